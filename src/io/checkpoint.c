/*
 * checkpoint.c - the training checkpoint file and the directory of them.
 *
 * A checkpoint is one file, "ckpt-<global step>.syckpt", laid out as
 *
 *   magic "SYCKPT01" | manifest bytes M (u64 LE) | data bytes D (u64 LE)
 *   | manifest: M bytes of JSON | data: D bytes | CRC-32C of all before (u32 LE)
 *
 * The manifest (written and read by keras/model_checkpoint.c) says which
 * variables the data holds and where, and the training loop's state; this
 * file knows nothing of models. One CRC over the whole file catches any
 * damage; the lengths are checked against the file's size before anything
 * is read, so a truncated or padded file is refused by what it is, and the
 * reader never trusts a length it has not checked. A file is written
 * whole, atomically (io_write_file_atomic), so a crash leaves either the
 * previous set of checkpoints or the new one, plus at most a temporary
 * ".ckpt-<step>.syckpt.tmp-XXXXXX", which ckpt_remove_temporaries()
 * removes -- only under the directory's lock, since a temporary file in a
 * directory another run holds may be that run's checkpoint being written.
 *
 * The lock (ckpt_lock) is flock(LOCK_EX | LOCK_NB) on "DIR/.lock", held
 * through a run; the file holds the holder's pid, which a refused run
 * names. flock's lock belongs to the open file description, so a second
 * open of the file -- in another process or the same one -- is refused,
 * and the kernel drops it when the descriptor closes, however the process
 * ends: a killed run leaves no stale lock, only its pid in the file, which
 * nobody reads while the lock is free. The file stays (removing it would
 * let a run lock a file another run has just opened). The listing sees
 * only "ckpt-<digits>.syckpt", so neither it nor "*.damaged" counts.
 *
 * Why not TensorFlow's tensor bundle: its index is a LevelDB table of
 * BundleEntryProto, and a checkpoint here also carries state that
 * TensorFlow keeps in Python objects (the input position, the epoch's
 * running sums); docs/design/checkpoints.md has the comparison.
 */
#include "io_internal.h"


#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char magic[8] = {'S', 'Y', 'C', 'K', 'P', 'T', '0', '1'};
#define HEADER 24
#define MANIFEST_MAX ((uint64_t)64 << 20) /* a manifest lists variables: megabytes at most */

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

sy_status ckpt_write(const char *path, const char *manifest, const void *data, size_t data_size) {
    uint8_t head[HEADER], tail[4];
    size_t m = strlen(manifest);
    memcpy(head, magic, 8);
    put_u64(head + 8, m);
    put_u64(head + 16, data_size);
    uint32_t crc = crc32c_extend(0, head, HEADER);
    crc = crc32c_extend(crc, manifest, m);
    crc = crc32c_extend(crc, data, data_size);
    for (int i = 0; i < 4; i++) tail[i] = (uint8_t)(crc >> (8 * i));
    const void *bufs[4] = {head, manifest, data, tail};
    size_t sizes[4] = {HEADER, m, data_size, 4};
    return io_write_file_atomic(path, bufs, sizes, 4);
}

sy_status ckpt_parse(const uint8_t *buf, size_t n, const char *what, char **manifest, const uint8_t **data,
                     size_t *data_size) {
    *manifest = NULL;
    *data = NULL;
    *data_size = 0;
    if (n < HEADER + 4 || memcmp(buf, magic, 8) != 0)
        return sy_error(SY_ERR_CORRUPT, "'%s' is not a systolic checkpoint (%s)", what,
                        n < HEADER + 4 ? "too short" : "no SYCKPT01 magic at its start");
    uint64_t m = get_u64(buf + 8), d = get_u64(buf + 16);
    if (m > MANIFEST_MAX || d > n || m + d + HEADER + 4 != n) {
        char all[48] = ""; /* the sum, unless a length is too large to add */
        if (m <= MANIFEST_MAX && d <= UINT64_MAX - MANIFEST_MAX - HEADER - 4)
            snprintf(all, sizeof all, " (%" PRIu64 " in all)", m + d + HEADER + 4);
        return sy_error(SY_ERR_CORRUPT,
                        "checkpoint '%s' is %zu bytes but its header gives a %" PRIu64 "-byte manifest and %" PRIu64
                        " bytes of data%s: truncated or damaged",
                        what, n, m, d, all);
    }
    uint32_t want = 0;
    for (int i = 0; i < 4; i++) want |= (uint32_t)buf[n - 4 + i] << (8 * i);
    uint32_t got = crc32c_extend(0, buf, n - 4);
    if (got != want)
        return sy_error(SY_ERR_CORRUPT, "checkpoint '%s' is damaged: its CRC-32C is %08x but the file says %08x", what,
                        got, want);
    *manifest = sy_malloc((size_t)m + 1);
    if (!*manifest) return sy_error(SY_ERR_OUT_OF_MEMORY, "checkpoint '%s': out of memory", what);
    memcpy(*manifest, buf + HEADER, (size_t)m);
    (*manifest)[m] = '\0';
    if (strlen(*manifest) != m) {
        sy_free(*manifest);
        *manifest = NULL;
        return sy_error(SY_ERR_CORRUPT, "checkpoint '%s': its manifest holds a NUL byte", what);
    }
    *data = buf + HEADER + m;
    *data_size = (size_t)d;
    return SY_OK;
}

void ckpt_path(char *buf, size_t size, const char *dir, int64_t step) {
    snprintf(buf, size, "%s/ckpt-%" PRId64 CKPT_SUFFIX, dir, step);
}

/* "ckpt-<digits>.syckpt" -> step; -1 for any other name. */
static int64_t step_of(const char *name) {
    if (strncmp(name, "ckpt-", 5) != 0) return -1;
    const char *p = name + 5;
    int64_t v = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*p - '0');
    }
    return strcmp(p, CKPT_SUFFIX) == 0 ? v : -1;
}

static int cmp_step(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

sy_status ckpt_list(const char *dir, int64_t **steps, int32_t *n) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return SY_OK;
        return sy_error(SY_ERR_IO, "cannot list the model directory '%s': %s", dir, strerror(errno));
    }
    int64_t *v = NULL, cap = 0, count = 0;
    sy_status st = SY_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t s = step_of(e->d_name);
        if (s < 0) continue;
        if (SY_GROW(v, cap, count + 1)) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "listing '%s': out of memory", dir);
            break;
        }
        v[count++] = s;
    }
    closedir(d);
    if (st) {
        sy_free(v);
        return st;
    }
    if (count) qsort(v, (size_t)count, sizeof *v, cmp_step);
    *steps = v;
    *n = (int32_t)count;
    return SY_OK;
}

void ckpt_remove_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        /* a temporary file a killed writer left: never a checkpoint */
        if (strncmp(e->d_name, ".ckpt-", 6) == 0 && strstr(e->d_name, CKPT_SUFFIX ".tmp-")) {
            char p[4096];
            if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < sizeof p) unlink(p);
        }
    }
    closedir(d);
}

sy_status ckpt_lock(const char *dir, int *fd) {
    *fd = -1;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/" CKPT_LOCK, dir) >= sizeof path)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "the model directory's name is too long: '%.64s...'", dir);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) return sy_error(SY_ERR_IO, "cannot open the lock file '%s': %s", path, strerror(errno));
    int r;
    do r = flock(f, LOCK_EX | LOCK_NB);
    while (r != 0 && errno == EINTR);
    if (r != 0) {
        int err = errno;
        char pid[24] = "";
        ssize_t got = err == EWOULDBLOCK ? pread(f, pid, sizeof pid - 1, 0) : -1;
        close(f);
        if (err != EWOULDBLOCK) return sy_error(SY_ERR_IO, "cannot lock '%s': %s", path, strerror(err));
        pid[got > 0 ? got : 0] = '\0';
        pid[strspn(pid, "0123456789")] = '\0';
        if (!pid[0]) /* the holder has locked it and not yet written its pid */
            return sy_error(SY_ERR_STATE,
                            "the model directory '%s' is in use by another run (its pid is not yet in '%s')", dir,
                            path);
        bool self = strtol(pid, NULL, 10) == (long)getpid();
        return sy_error(SY_ERR_STATE, "the model directory '%s' is in use by another run (pid %s%s)", dir, pid,
                        self ? ", this process" : "");
    }
    char pid[24];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, pid, (size_t)len, 0) != len) {
        int err = errno;
        close(f);
        return sy_error(SY_ERR_IO, "cannot write this run's pid into the lock file '%s': %s", path, strerror(err));
    }
    *fd = f;
    return SY_OK;
}

void ckpt_unlock(int fd) {
    /* closing drops the lock; the pid stays in the file, as after a crash */
    if (fd >= 0) close(fd);
}
