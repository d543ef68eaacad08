/*
 * file.c - how every file is opened, read and written: the rules of
 * docs/design/files.md in one place, for every reader and writer in io and
 * data.
 *
 * Reading. io_open_read opens without blocking (a FIFO put where a file
 * was expected would otherwise hang the open for ever) and refuses,
 * naming what it is, anything that is not a regular file: a directory, a
 * FIFO, a device such as /dev/zero (endless). io_read_file_max reads a
 * whole file, exactly as many bytes as fstat reported and no more than
 * the caller's format can hold; the parsers then work from memory, so
 * their fuzz targets can feed them bytes.
 *
 * Writing. io_write_target decides where a write to a path lands: the
 * path, or the end of its chain of symbolic links (written through, as
 * h5py and Keras do), never a directory, FIFO, device or socket.
 * io_write_file_atomic writes a whole file there through a temporary file
 * beside it, fsync'd and renamed over it, the directory fsync'd: a full
 * disk or a crash leaves the old file whole. Writers that stream (the
 * TFRecord writer, the dataset cache) resolve their target the same way
 * and do the rename themselves.
 */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *io_file_kind(unsigned mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

/* O_NONBLOCK: open() of a FIFO with no writer returns at once instead of
 * waiting for one, and fstat then says what it is; a regular file ignores
 * the flag, which is cleared all the same before any read. */
sy_status io_open_read(const char *path, const char *what, int *fd, int64_t *size) {
    *fd = -1;
    const char *sep = what ? ": " : "";
    if (!what) what = "";
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) {
        int err = errno;
        return sy_error(SY_ERR_IO, "%s%scannot open '%s': %s", what, sep, path, strerror(err));
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int err = errno;
        close(f);
        return sy_error(SY_ERR_IO, "%s%scannot read '%s': %s", what, sep, path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        if (S_ISDIR(st.st_mode))
            return sy_error(SY_ERR_IO, "%s%scannot read '%s': it is a directory", what, sep, path);
        return sy_error(SY_ERR_IO, "%s%scannot read '%s': it is %s, not a regular file", what, sep,
                        path, io_file_kind(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0) fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    *fd = f;
    if (size) *size = (int64_t)st.st_size;
    return SY_OK;
}

sy_status io_fopen_read(const char *path, const char *what, FILE **out, int64_t *size) {
    *out = NULL;
    int fd;
    sy_status st = io_open_read(path, what, &fd, size);
    if (st) return st;
    *out = fdopen(fd, "rb");
    if (!*out) {
        int err = errno;
        close(fd);
        return sy_error(SY_ERR_IO, "%s%scannot read '%s': %s", what ? what : "", what ? ": " : "",
                        path, strerror(err));
    }
    return SY_OK;
}

sy_status io_read_file_max(const char *path, size_t max, const char *format, uint8_t **buf,
                             size_t *n) {
    *buf = NULL;
    *n = 0;
    int fd = -1;
    int64_t size64 = 0;
    sy_status st = io_open_read(path, NULL, &fd, &size64);
    if (st) return st;
    size_t size = (size_t)size64;
    if (max && size > max) {
        close(fd);
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "cannot read '%s': it holds %zu bytes, more than %s can (%zu)", path, size,
                        format ? format : "this reader takes", max);
    }
    uint8_t *p = sy_malloc(size ? size : 1);
    if (!p) {
        close(fd);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading '%s' (%zu bytes)", path, size);
    }
    /* Exactly the size fstat gave: a file growing while it is read (or
     * one that reports a size it does not have) cannot make this read
     * more than it planned. */
    st = io_read_at(fd, path, p, size, 0);
    close(fd);
    if (st) {
        sy_free(p);
        return st;
    }
    *buf = p;
    *n = size;
    return SY_OK;
}

sy_status io_read_at(int fd, const char *path, void *buf, size_t n, int64_t at) {
    size_t got = 0;
    int err = 0;
    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(at + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            err = r < 0 ? errno : 0;
            break;
        }
        got += (size_t)r;
    }
    if (got != n)
        return sy_error(SY_ERR_IO, "cannot read '%s': %s", path, err ? strerror(err) : "the file shrank while it was read");
    return SY_OK;
}

sy_status io_read_file(const char *path, uint8_t **buf, size_t *n) {
    return io_read_file_max(path, 0, NULL, buf, n);
}

/* Create dir and its parents. */
sy_status io_make_dirs(const char *dir) {
    char p[PATH_MAX];
    if (!*dir) return sy_error(SY_ERR_IO, "no directory given (an empty path)");
    if (strlen(dir) >= sizeof p)
        return sy_error(SY_ERR_IO, "the directory path '%s' is too long", dir);
    strcpy(p, dir);
    for (char *c = p + 1;; c++) {
        if (*c != '/' && *c != '\0') continue;
        char saved = *c;
        *c = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return sy_error(SY_ERR_IO, "cannot create the directory '%s': %s", p, strerror(errno));
        if (!(*c = saved)) break;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return sy_error(SY_ERR_IO, "'%s' exists but is not a directory", dir);
    return SY_OK;
}

/* Make the rename of a file in dir durable. */
void io_sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Where a write to path must land: path itself when nothing is there or a
 * regular file is, else, for a symbolic link, what it points to (relative
 * links resolve against the link's directory), followed to the end as
 * open() would. Writing through a link replaces the target and keeps the
 * link, as h5py and Keras do; replacing the link itself would leave the
 * target holding the old bytes. Anything that is not a regular file at the
 * end of the chain (a directory, a FIFO, a device, a socket) is refused:
 * renaming over it would destroy it, and writing into it is not saving a
 * file. *mode is the existing file's permissions (kept), or -1. */
sy_status io_write_target(const char *path, char *target, size_t size, int *mode) {
    char cur[PATH_MAX], link[PATH_MAX];
    if ((size_t)snprintf(cur, sizeof cur, "%s", path) >= sizeof cur)
        return sy_error(SY_ERR_IO, "cannot write '%s': the path is too long", path);
    *mode = -1;
    for (int hops = 0; hops <= 40; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0) {
            if (errno != ENOENT)
                return sy_error(SY_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            break; /* a new file (or the target of a dangling link): created */
        }
        if (S_ISREG(sb.st_mode)) {
            *mode = (int)(sb.st_mode & 07777);
            break;
        }
        if (!S_ISLNK(sb.st_mode)) {
            if (!strcmp(cur, path))
                return sy_error(
                    SY_ERR_IO,
                    "cannot write '%s': it is %s, not a regular file (nothing was written)", path,
                    io_file_kind(sb.st_mode));
            return sy_error(
                SY_ERR_IO,
                "cannot write '%s': it links to '%s', which is %s, not a regular file (nothing was "
                "written)",
                path, cur, io_file_kind(sb.st_mode));
        }
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            return sy_error(SY_ERR_IO, "cannot write '%s': cannot read the link '%s': %s", path,
                            cur, strerror(errno));
        link[n] = '\0';
        const char *slash = strrchr(cur, '/');
        if (link[0] != '/' && slash) {
            char next[PATH_MAX];
            if ((size_t)snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, link) >=
                sizeof next)
                return sy_error(SY_ERR_IO, "cannot write '%s': the path it links to is too long",
                                path);
            strcpy(cur, next);
        } else {
            strcpy(cur, link);
        }
        if (hops == 40) return sy_error(SY_ERR_IO, "cannot write '%s': %s", path, strerror(ELOOP));
    }
    if (strlen(cur) >= size)
        return sy_error(SY_ERR_IO, "cannot write '%s': the path is too long", path);
    strcpy(target, cur);
    return SY_OK;
}

sy_status io_write_file_atomic(const char *path, const void *const *bufs, const size_t *sizes,
                                 int32_t n) {
    char target[PATH_MAX], tmp[PATH_MAX], dir[PATH_MAX];
    int mode;
    sy_status st = io_write_target(path, target, sizeof target, &mode);
    if (st) return st;
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    if (!*base)
        return sy_error(SY_ERR_IO, "cannot write '%s': it names a directory, not a file", path);
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == target)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - target), target);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp-XXXXXX", dir, base) >= sizeof tmp)
        return sy_error(SY_ERR_IO, "cannot write '%s': the path is too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return sy_error(SY_ERR_IO, "cannot write '%s': cannot create a file in '%s': %s", path, dir,
                        strerror(errno));
    int err = 0;
    for (int32_t i = 0; i < n && !err; i++) {
        const char *p = bufs[i];
        size_t left = sizes[i];
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                err = w < 0 ? errno : ENOSPC;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (!err && (fchmod(fd, mode >= 0 ? (mode_t)mode : 0644) != 0 || fsync(fd) != 0)) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, target) != 0) err = errno;
    if (err) {
        unlink(tmp);
        return sy_error(SY_ERR_IO, "cannot write '%s': %s (whatever it held before is unchanged)",
                        path, strerror(err));
    }
    io_sync_dir(dir);
    return SY_OK;
}
