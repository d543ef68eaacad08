/*
 * dataset_cache.c - cache(): the first complete pass's elements kept, in
 * memory or in a file, and later passes read from there.
 *
 * When an iterator is opened on a cache node it becomes one of three:
 *   - a reader, when the cache is complete (in memory, or a whole file of
 *     this dataset's elements is there: a new process, or a new dataset
 *     over the same file, reads it instead of running the input);
 *   - the writer, when nothing is complete and no other iterator is
 *     writing: it passes the input's elements on and keeps a copy of each,
 *     and publishes the cache only when the input ends (in memory: under
 *     the node's mutex; in a file: written to "<filename>.tmp-<pid>-<n>",
 *     flushed, fsynced and renamed over <filename>, so a file of that name
 *     is always whole). A writer freed before the end (cache().take(k))
 *     discards what it kept, with a warning, as TensorFlow does;
 *   - a plain pass over the input, when another iterator is writing.
 *
 * The file format (host byte order: a cache is a local file):
 *
 *   header  "SYCACHE1", u32 n, n x (u32 dtype, u32 rank), u32 CRC-32 of
 *           the bytes before it
 *   record  u64 payload bytes, u32 CRC-32 of the payload, payload:
 *           per component its dims (i64 x rank), then its elements (raw
 *           numbers; or per string u64 length and the bytes)
 *   footer  "SYCEND01", u64 records
 *
 * A file that does not start with the magic is not ours: refused, never
 * overwritten. One of another dataset's elements (other dtypes or ranks)
 * is refused too. One with our header but no footer, a footer that does
 * not sit at the end, or (checked by reading it through once per dataset
 * and file identity) a record whose CRC, structure or count is wrong, is
 * partial or corrupt: not trusted, rebuilt by the next writer, with a
 * warning. Later passes still check each record's CRC, so a file damaged
 * after that check fails with SY_ERR_CORRUPT naming it.
 */
#include "data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char header_magic[8] = "SYCACHE1";
static const char footer_magic[8] = "SYCEND01";
#define FOOTER_BYTES 16
#define RECORD_HEAD 12

typedef struct cache_state {
    char *filename; /* NULL: in memory */
    pthread_mutex_t mu;
    /* under mu */
    bool writing;
    sy_element *elems; /* in memory, once complete */
    int64_t count;
    bool complete;
    bool verified; /* the file with this identity was read through and found whole */
    struct stat id;
    uint64_t temps; /* temporary files made */
} cache_state;

static void cache_destroy(void *state) {
    cache_state *s = state;
    for (int64_t i = 0; i < s->count; i++) sy_element_clear(&s->elems[i]);
    sy_free(s->elems);
    sy_free(s->filename);
    pthread_mutex_destroy(&s->mu);
}

/* ---- the file format -------------------------------------------------------------------------- */

typedef struct byte_buf {
    uint8_t *p;
    size_t n, cap;
} byte_buf;

/* Room for n more bytes. */
static bool reserve(byte_buf *b, size_t n) {
    if (b->n + n <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n) cap *= 2;
    uint8_t *grown = sy_realloc_array(b->p, b->cap, cap, 1);
    if (!grown) return false;
    b->p = grown;
    b->cap = cap;
    return true;
}

static bool put(byte_buf *b, const void *data, size_t n) {
    if (!reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    return true;
}

static bool put_u32(byte_buf *b, uint32_t v) { return put(b, &v, 4); }
static bool put_u64(byte_buf *b, uint64_t v) { return put(b, &v, 8); }

static bool encode_header(const sy_dataset *d, byte_buf *b) {
    bool ok = put(b, header_magic, 8) && put_u32(b, (uint32_t)d->n);
    for (int32_t c = 0; c < d->n && ok; c++)
        ok = put_u32(b, (uint32_t)d->spec[c].dtype) && put_u32(b, (uint32_t)d->spec[c].shape.rank);
    return ok && put_u32(b, (uint32_t)crc32_z(0, b->p, b->n));
}

/* A record: its head (length, CRC) and payload, into b (emptied first). */
static bool encode_element(const sy_element *e, byte_buf *b) {
    b->n = 0;
    bool ok = put_u64(b, 0) && put_u32(b, 0);
    for (int32_t c = 0; c < e->n && ok; c++) {
        const sy_tensor *t = e->c[c];
        sy_shape s = sy_tensor_shape(t);
        ok = put(b, s.dims, (size_t)s.rank * sizeof *s.dims);
        if (sy_tensor_dtype(t) != SY_STRING) {
            ok = ok && put(b, sy_tensor_data(t), sy_tensor_bytes(t));
            continue;
        }
        for (int64_t i = 0; i < sy_tensor_count(t) && ok; i++) {
            sy_string str = sy_tensor_string(t, i);
            ok = put_u64(b, (uint64_t)str.size) && put(b, str.data, (size_t)str.size);
        }
    }
    if (!ok) return false;
    uint64_t payload = b->n - RECORD_HEAD;
    uint32_t crc = (uint32_t)crc32_z(0, b->p + RECORD_HEAD, (size_t)payload);
    memcpy(b->p, &payload, 8);
    memcpy(b->p + 8, &crc, 4);
    return true;
}

/* A reader of a cache file. */
typedef struct cache_file {
    FILE *f;
    const char *path;
    uint64_t size, pos, body_end; /* body_end: where the footer starts */
    int64_t count, index;
    byte_buf buf;
} cache_file;

static void cache_file_close(cache_file *cf) {
    if (cf->f) fclose(cf->f);
    sy_free(cf->buf.p);
    memset(cf, 0, sizeof *cf);
}

static bool read_exact(cache_file *cf, void *dst, size_t n) {
    if (fread(dst, 1, n, cf->f) != n) return false;
    cf->pos += n;
    return true;
}

/* Open the file and check what can be checked cheaply: SY_ERR_INVALID_ARGUMENT
 * when it is not a cache of d's elements (never to be overwritten),
 * SY_ERR_CORRUPT when it is partial or damaged, SY_ERR_NOT_FOUND when it
 * is not there, SY_ERR_IO when it is not a regular file (a directory, a
 * FIFO: never overwritten either) or cannot be read. */
static sy_status cache_file_open(cache_file *cf, const char *path, const sy_dataset *d) {
    memset(cf, 0, sizeof *cf);
    cf->path = path;
    int64_t size;
    struct stat sb;
    if (lstat(path, &sb) != 0 && errno == ENOENT)
        return sy_error(SY_ERR_NOT_FOUND, "cache: cannot open '%s': %s", path, strerror(ENOENT));
    sy_status st = io_fopen_read(path, "cache", &cf->f, &size);
    if (st) return st;
    cf->size = (uint64_t)size;
    byte_buf want = {0};
    if (!encode_header(d, &want)) return sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory");
    uint8_t head[8 + 4 + 8 * SY_ELEMENT_MAX + 4];
    size_t got = fread(head, 1, want.n, cf->f);
    cf->pos = got;
    char specs[SY_ELEMENT_MAX * DS_SPEC_STR_MAX] = "", one[DS_SPEC_STR_MAX];
    for (int32_t c = 0; c < d->n; c++)
        snprintf(specs + strlen(specs), sizeof specs - strlen(specs), "%s%s", c ? ", " : "",
                 ds_spec_format(&d->spec[c], one, sizeof one));
    if (got < 8 || memcmp(head, header_magic, 8) != 0)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "cache: '%s' exists and is not a systolic cache file; it is left as it "
                      "is (delete it, or cache to another file name)", path);
    else if (got < want.n || memcmp(head, want.p, want.n - 4) != 0)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "cache: '%s' holds the cache of another dataset (other component "
                      "dtypes or ranks than %s); delete it, or cache to another file name", path, specs);
    else if (memcmp(head + want.n - 4, want.p + want.n - 4, 4) != 0)
        st = sy_error(SY_ERR_CORRUPT, "cache: '%s' has a damaged header", path);
    sy_free(want.p);
    if (st) return st;
    uint8_t foot[FOOTER_BYTES];
    if (cf->size < cf->pos + FOOTER_BYTES || fseeko(cf->f, (off_t)(cf->size - FOOTER_BYTES), SEEK_SET) != 0 ||
        fread(foot, 1, FOOTER_BYTES, cf->f) != FOOTER_BYTES || memcmp(foot, footer_magic, 8) != 0)
        return sy_error(SY_ERR_CORRUPT, "cache: '%s' has no footer: it is partial", path);
    memcpy(&cf->count, foot + 8, 8);
    cf->body_end = cf->size - FOOTER_BYTES;
    if (cf->count < 0 || (uint64_t)cf->count > (cf->body_end - cf->pos) / RECORD_HEAD ||
        fseeko(cf->f, (off_t)cf->pos, SEEK_SET) != 0)
        return sy_error(SY_ERR_CORRUPT, "cache: '%s' has a damaged footer", path);
    return SY_OK;
}

static sy_status corrupt(const cache_file *cf, uint64_t at, const char *why) {
    return sy_error(SY_ERR_CORRUPT, "cache: '%s' is corrupt at element %lld (byte %llu): %s; delete it to rebuild the "
                    "cache", cf->path, (long long)cf->index, (unsigned long long)at, why);
}

/* Take n bytes from the payload at *p (end at `end`). */
static const uint8_t *take(const uint8_t **p, const uint8_t *end, uint64_t n) {
    if ((uint64_t)(end - *p) < n) return NULL;
    const uint8_t *at = *p;
    *p += n;
    return at;
}

static sy_status decode_component(const cache_file *cf, const sy_component_spec *spec, const uint8_t **p,
                                  const uint8_t *end, uint64_t at, sy_tensor **out) {
    sy_shape shape = {spec->shape.rank, {0}};
    const uint8_t *dims = take(p, end, (uint64_t)shape.rank * 8);
    if (!dims) return corrupt(cf, at, "a record is shorter than its dimensions");
    memcpy(shape.dims, dims, (size_t)shape.rank * 8);
    uint64_t count = 1;
    for (int32_t k = 0; k < shape.rank; k++) {
        int64_t dim = shape.dims[k];
        if (dim < 0 || (spec->shape.dims[k] >= 0 && dim != spec->shape.dims[k]) ||
            (dim > 0 && count > (uint64_t)(end - *p) / (uint64_t)dim))
            return corrupt(cf, at, "a component's dimensions do not fit its spec or its record");
        count *= (uint64_t)dim;
    }
    sy_status st = sy_tensor_new(spec->dtype, shape, out);
    if (st) return st;
    if (spec->dtype != SY_STRING) {
        const uint8_t *data = take(p, end, sy_tensor_bytes(*out));
        if (data) memcpy(sy_tensor_data(*out), data, sy_tensor_bytes(*out));
        else st = corrupt(cf, at, "a record is shorter than its elements");
    }
    for (uint64_t i = 0; spec->dtype == SY_STRING && i < count && !st; i++) {
        const uint8_t *len = take(p, end, 8);
        uint64_t n = 0;
        if (len) memcpy(&n, len, 8);
        const uint8_t *bytes = len ? take(p, end, n) : NULL;
        st = bytes ? sy_tensor_set_string(*out, (int64_t)i, bytes, (size_t)n)
                   : corrupt(cf, at, "a record is shorter than its strings");
    }
    if (st) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

static sy_status cache_file_next(cache_file *cf, const sy_dataset *d, sy_element *out, bool *end) {
    if (cf->index >= cf->count) {
        if (cf->pos != cf->body_end) return corrupt(cf, cf->pos, "there are bytes after the last record");
        *end = true;
        return SY_OK;
    }
    uint64_t at = cf->pos;
    uint8_t head[RECORD_HEAD];
    if (cf->body_end - cf->pos < RECORD_HEAD || !read_exact(cf, head, RECORD_HEAD))
        return corrupt(cf, at, "the records end before the footer's count");
    uint64_t n;
    uint32_t crc;
    memcpy(&n, head, 8);
    memcpy(&crc, head + 8, 4);
    if (n > cf->body_end - cf->pos) return corrupt(cf, at, "a record's length runs past the footer");
    byte_buf *b = &cf->buf;
    b->n = 0;
    if (!reserve(b, (size_t)n)) return sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory reading '%s'", cf->path);
    if (!read_exact(cf, b->p, (size_t)n)) return corrupt(cf, at, "the file ends inside a record");
    if ((uint32_t)crc32_z(0, b->p, (size_t)n) != crc) return corrupt(cf, at, "a record's CRC-32 does not match");
    const uint8_t *p = b->p, *e = b->p + n;
    for (int32_t c = 0; c < d->n; c++) {
        sy_status st = decode_component(cf, &d->spec[c], &p, e, at, &out->c[c]);
        if (st) {
            sy_element_clear(out);
            return st;
        }
        out->n = c + 1;
    }
    if (p != e) {
        sy_element_clear(out);
        return corrupt(cf, at, "a record is longer than its components");
    }
    cf->index++;
    return SY_OK;
}

/* Read the whole file through: is every record whole? */
static sy_status cache_file_verify(const char *path, const sy_dataset *d) {
    cache_file cf;
    sy_status st = cache_file_open(&cf, path, d);
    for (bool end = false; !st && !end;) {
        sy_element e = {0};
        st = cache_file_next(&cf, d, &e, &end);
        sy_element_clear(&e);
    }
    cache_file_close(&cf);
    return st;
}

static bool same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* ---- iterators ------------------------------------------------------------------------------------ */

typedef struct cache_iter {
    ds_unary_iter u; /* the writer's input */
    bool writer, done;
    /* memory reader */
    int64_t next;
    /* memory writer */
    sy_element *kept;
    int64_t count, cap;
    /* file reader */
    cache_file file;
    /* file writer */
    FILE *out;
    char *temp;
    char target[PATH_MAX]; /* where the file lands: the filename, or what its symbolic link points to */
    byte_buf buf;
    int64_t written;
} cache_iter;

static sy_status memory_read(ds_iter *base, sy_element *out, bool *end) {
    cache_iter *it = (cache_iter *)base;
    const cache_state *s = base->d->state; /* complete: no longer changes */
    if (it->next >= s->count) {
        *end = true;
        return SY_OK;
    }
    return ds_element_clone(&s->elems[it->next++], out);
}

static sy_status file_read(ds_iter *base, sy_element *out, bool *end) {
    return cache_file_next(&((cache_iter *)base)->file, base->d, out, end);
}

static sy_status write_error(cache_iter *it, const char *path) {
    return sy_error(SY_ERR_IO, "cache: cannot write '%s' (through its temporary file '%s'): %s", path, it->temp,
                    strerror(errno));
}

/* The input has ended: publish what was kept. */
static sy_status publish(cache_iter *it, cache_state *s) {
    if (!s->filename) {
        pthread_mutex_lock(&s->mu);
        s->elems = it->kept;
        s->count = it->count;
        s->complete = true;
        pthread_mutex_unlock(&s->mu);
        it->kept = NULL;
        it->count = 0;
        return SY_OK;
    }
    uint8_t foot[FOOTER_BYTES];
    memcpy(foot, footer_magic, 8);
    memcpy(foot + 8, &it->written, 8);
    bool ok = fwrite(foot, 1, FOOTER_BYTES, it->out) == FOOTER_BYTES && fflush(it->out) == 0 &&
              fsync(fileno(it->out)) == 0;
    int err = errno;
    ok = fclose(it->out) == 0 && ok;
    it->out = NULL;
    if (ok && rename(it->temp, it->target) != 0) ok = false, err = errno;
    if (!ok) {
        errno = err;
        return write_error(it, s->filename);
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", it->target);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    io_sync_dir(slash ? dir : ".");
    sy_free(it->temp);
    it->temp = NULL;
    struct stat sb; /* what we wrote needs no reading through */
    if (stat(s->filename, &sb) == 0) {
        pthread_mutex_lock(&s->mu);
        s->verified = true;
        s->id = sb;
        pthread_mutex_unlock(&s->mu);
    }
    return SY_OK;
}

static sy_status cache_write(ds_iter *base, sy_element *out, bool *end) {
    cache_iter *it = (cache_iter *)base;
    cache_state *s = base->d->state;
    if (it->done) {
        *end = true;
        return SY_OK;
    }
    sy_status st = ds_next(it->u.input, out, end);
    if (st) return st;
    if (*end) {
        st = publish(it, s);
        it->done = !st;
        return st;
    }
    if (!s->filename) {
        if (SY_GROW(it->kept, it->cap, it->count + 1) == SY_OK) st = ds_element_clone(out, &it->kept[it->count]);
        else st = sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory keeping element %lld", (long long)it->count);
        if (!st) it->count++;
    } else if (!encode_element(out, &it->buf)) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory writing element %lld", (long long)it->written);
    } else if (fwrite(it->buf.p, 1, it->buf.n, it->out) != it->buf.n) {
        st = write_error(it, s->filename);
    } else {
        it->written++;
    }
    if (st) sy_element_clear(out);
    return st;
}

static void cache_release(ds_iter *base) {
    cache_iter *it = (cache_iter *)base;
    cache_state *s = (cache_state *)base->d->state;
    if (it->writer) {
        if (!it->done)
            sy_log(SY_LOG_WARNING, "cache: the iterator was freed before the input ended, so the partial %s cache "
                   "is discarded (cache().take(k) reads only part of its input: take before cache)",
                   s->filename ? "file" : "memory");
        pthread_mutex_lock(&s->mu);
        s->writing = false;
        pthread_mutex_unlock(&s->mu);
    }
    for (int64_t i = 0; i < it->count; i++) sy_element_clear(&it->kept[i]);
    sy_free(it->kept);
    if (it->out) fclose(it->out);
    if (it->temp) remove(it->temp);
    sy_free(it->temp);
    sy_free(it->buf.p);
    cache_file_close(&it->file);
    ds_unary_release(base);
}

static const ds_iter_ops memory_read_ops = {memory_read, cache_release};
static const ds_iter_ops file_read_ops = {file_read, cache_release};
static const ds_iter_ops write_ops = {cache_write, cache_release};

/* The writer of a file cache: the temporary file and its header. */
static sy_status start_file(cache_iter *it, cache_state *s, uint64_t n) {
    int mode;
    sy_status st = io_write_target(s->filename, it->target, sizeof it->target, &mode);
    if (st) return st;
    size_t len = strlen(it->target) + 64;
    it->temp = sy_malloc(len);
    if (!it->temp) return sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory");
    snprintf(it->temp, len, "%s.tmp-%ld-%llu", it->target, (long)getpid(), (unsigned long long)n);
    int fd = open(it->temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    it->out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!it->out) {
        int err = errno;
        if (fd >= 0) close(fd);
        sy_free(it->temp);
        it->temp = NULL; /* nothing of ours to remove */
        return sy_error(SY_ERR_IO, "cache: cannot create '%s.tmp-...' beside the cache file: %s", s->filename,
                        strerror(err));
    }
    if (!encode_header(it->u.base.d, &it->buf)) return sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory");
    if (fwrite(it->buf.p, 1, it->buf.n, it->out) != it->buf.n) return write_error(it, s->filename);
    return SY_OK;
}

/* A file cache's reader when the file is whole; *use false when there is
 * none to use (absent, or partial or corrupt: a warning says so). */
static sy_status open_file_reader(cache_iter *it, cache_state *s, bool *use) {
    const sy_dataset *d = it->u.base.d;
    *use = false;
    struct stat sb;
    if (stat(s->filename, &sb) != 0) return SY_OK;
    pthread_mutex_lock(&s->mu);
    bool verified = s->verified && same_file(&s->id, &sb);
    pthread_mutex_unlock(&s->mu);
    sy_status st = verified ? SY_OK : cache_file_verify(s->filename, d);
    if (!st) st = cache_file_open(&it->file, s->filename, d);
    if (st == SY_ERR_CORRUPT || st == SY_ERR_NOT_FOUND) {
        if (st == SY_ERR_CORRUPT) sy_log(SY_LOG_WARNING, "%s; it is not used and will be rebuilt", sy_last_error());
        cache_file_close(&it->file);
        return SY_OK;
    }
    if (st) return st;
    pthread_mutex_lock(&s->mu);
    s->verified = true;
    s->id = sb;
    pthread_mutex_unlock(&s->mu);
    *use = true;
    return SY_OK;
}

static sy_status cache_open(const sy_dataset *d, ds_iter **out) {
    cache_state *s = d->state;
    cache_iter *it = ds_iter_alloc(sizeof(cache_iter), &memory_read_ops, d);
    if (!it) return sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory");
    bool use_file = false;
    sy_status st = s->filename ? open_file_reader(it, s, &use_file) : SY_OK;
    if (st) {
        ds_iter_free(&it->u.base);
        return st;
    }
    if (use_file) {
        it->u.base.ops = &file_read_ops;
        *out = &it->u.base;
        return SY_OK;
    }
    pthread_mutex_lock(&s->mu);
    bool complete = s->complete, write = !complete && !s->writing;
    if (write) s->writing = true;
    uint64_t temp = s->temps++;
    pthread_mutex_unlock(&s->mu);
    if (complete) {
        *out = &it->u.base;
        return SY_OK;
    }
    ds_iter_free(&it->u.base);
    if (!write) return ds_open(d->input[0], out); /* another iterator is writing */
    st = ds_unary_open(d, sizeof(cache_iter), &write_ops, out);
    if (st) {
        pthread_mutex_lock(&s->mu);
        s->writing = false;
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    it = (cache_iter *)*out;
    it->writer = true;
    if (s->filename) st = start_file(it, s, temp);
    if (st) {
        it->done = true; /* nothing was cached: no warning */
        ds_iter_free(*out);
        *out = NULL;
    }
    return st;
}

static const ds_kind cache_kind = {"cache", cache_open, cache_destroy};

sy_status sy_dataset_cache(const sy_dataset *in, const char *filename, sy_dataset **out) {
    sy_status st = ds_transform_new(&cache_kind, sizeof(cache_state), in, out);
    if (st) return st;
    cache_state *s = (*out)->state;
    pthread_mutex_init(&s->mu, NULL);
    if (filename && *filename && !(s->filename = sy_strdup(filename))) {
        sy_dataset_free(*out);
        *out = NULL;
        return sy_error(SY_ERR_OUT_OF_MEMORY, "cache: out of memory");
    }
    return SY_OK;
}
