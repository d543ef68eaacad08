/*
 * dataset_files.c - the file sources: TFRecordDataset, TextLineDataset and
 * FixedLengthRecordDataset, and ds_stream, the compressed-or-plain file
 * reader under the last two.
 *
 * A file source holds its file names (a string tensor) and reads them one
 * after the other, each record a string scalar; files are opened as the
 * iterator reaches them, so a missing third file fails after the first
 * two's records, as in TensorFlow. Files are streamed, never read whole.
 *
 * ds_stream inflates ZLIB (RFC 1950) or GZIP (RFC 1952) data as it is
 * read, with TensorFlow's window (15 bits; +16 for gzip's wrapper), and
 * reads several streams one after another as one (gzip's concatenation
 * rule). An empty file is empty; a file that ends inside a stream is
 * SY_ERR_CORRUPT, as is damaged data (with the offset in the file).
 *
 * Text lines end at "\n"; a "\r" just before it goes too ("\r\n"), and a
 * last line without "\n" is a line (TextLineDataset's ReadLine). Fixed-
 * length records come after header_bytes and before footer_bytes of each
 * file: a plain file's size is checked when it is opened, as TensorFlow
 * does (the body must be a whole number of records); a compressed one's
 * when its end is reached, since only then is its length known. Records
 * are read through a window of record_bytes + footer_bytes, so the footer
 * is never taken for a record.
 *
 * TFRecord files are read with sy_tfrecord_reader (tfrecord.c). With
 * num_parallel_reads > 1 the source is interleave(file names, one file's
 * records, cycle_length num_parallel_reads, block_length 1,
 * num_parallel_calls num_parallel_reads): TFRecordDataset's order (its
 * parallel interleave with sloppy = False), records one at a time from
 * each of num_parallel_reads files in turn, the next file taking a
 * finished one's place.
 */
#include "data_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define DS_STREAM_CHUNK (256 * 1024) /* TensorFlow's default read buffer */
#define DS_LINE_MAX ((size_t)1 << 30)  /* a longer line is refused, not grown into */

/* ---- ds_stream -------------------------------------------------------------------------- */

static const char *compression_name(sy_compression c) {
    return c == SY_COMPRESSION_ZLIB ? "ZLIB" : c == SY_COMPRESSION_GZIP ? "GZIP" : "uncompressed";
}

sy_status ds_stream_open(ds_stream *s, const char *path, sy_compression compression, const char *what) {
    memset(s, 0, sizeof *s);
    s->path = path;
    s->what = what;
    s->compression = compression;
    sy_status st = io_fopen_read(path, what, &s->f, NULL);
    if (st) return st;
    if (compression == SY_COMPRESSION_NONE) return SY_OK;
    s->in = sy_malloc(DS_STREAM_CHUNK);
    if (!s->in || inflateInit2(&s->z, compression == SY_COMPRESSION_ZLIB ? 15 : 15 + 16) != Z_OK) {
        ds_stream_close(s);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for an inflater for '%s'", what, path);
    }
    s->z_init = true;
    s->z_done = true; /* no stream started yet: an empty file is empty */
    return SY_OK;
}

static sy_status stream_read_error(ds_stream *s) {
    return sy_error(SY_ERR_IO, "%s: cannot read '%s': %s", s->what, s->path, strerror(errno));
}

sy_status ds_stream_read(ds_stream *s, void *dst, size_t n, size_t *got) {
    *got = 0;
    if (!s->z_init) {
        *got = fread(dst, 1, n, s->f);
        if (*got < n && ferror(s->f)) return stream_read_error(s);
        s->pos += *got;
        return SY_OK;
    }
    s->z.next_out = dst;
    s->z.avail_out = (uInt)n;
    while (s->z.avail_out > 0) {
        if (s->z.avail_in == 0) {
            size_t k = fread(s->in, 1, DS_STREAM_CHUNK, s->f);
            if (k == 0 && ferror(s->f)) return stream_read_error(s);
            if (k == 0) {
                if (s->z_done) break;
                return sy_error(SY_ERR_CORRUPT, "%s: '%s' ends inside its %s data (after %lld bytes of output): the "
                                "file is truncated", s->what, s->path, compression_name(s->compression),
                                (long long)(s->pos + (n - s->z.avail_out)));
            }
            s->z.next_in = s->in;
            s->z.avail_in = (uInt)k;
        }
        if (s->z_done) { /* another stream follows the last one */
            inflateReset(&s->z);
            s->z_done = false;
        }
        int rc = inflate(&s->z, Z_NO_FLUSH);
        if (rc == Z_STREAM_END)
            s->z_done = true;
        else if (rc != Z_OK && !(rc == Z_BUF_ERROR && s->z.avail_in == 0)) {
            long long at = (long long)ftell(s->f) - (long long)s->z.avail_in;
            return sy_error(SY_ERR_CORRUPT, "%s: '%s' has damaged %s data at byte %lld of the file: %s", s->what,
                            s->path, compression_name(s->compression), at, s->z.msg ? s->z.msg : "inflate failed");
        }
    }
    *got = n - s->z.avail_out;
    s->pos += *got;
    return SY_OK;
}

void ds_stream_close(ds_stream *s) {
    if (s->z_init) inflateEnd(&s->z);
    if (s->f) fclose(s->f);
    sy_free(s->in);
    memset(s, 0, sizeof *s);
}

/* ---- file sources: what the three share ------------------------------------------------------ */

typedef struct files_iter files_iter;
typedef struct file_format file_format;

typedef struct files_state {
    const file_format *format;
    sy_tensor *names; /* (n,) string */
    sy_compression compression;
    int64_t record_bytes, header_bytes, footer_bytes; /* fixed-length */
    sy_tfrecord_options tfrecord;
} files_state;

/* One file format: open a file, its next record (*end at its end), close. */
struct file_format {
    sy_status (*open)(files_iter *it, const files_state *s, const char *path);
    sy_status (*next)(files_iter *it, const files_state *s, sy_element *out, bool *end);
    void (*close)(files_iter *it);
};

struct files_iter {
    ds_iter base;
    int64_t file;     /* the file being read, or the next to open */
    bool open;
    ds_stream stream; /* text, fixed-length */
    sy_tfrecord_reader *reader;
    const char *path;
    uint8_t *buf; /* text: [pos, len) unread; fixed: the window */
    size_t cap, len, pos;
    bool eof;
};

/* A string scalar of n bytes as element out. */
static sy_status string_element(const void *data, size_t n, sy_element *out) {
    sy_status st = sy_tensor_new(SY_STRING, sy_shape_of(0), &out->c[0]);
    if (!st) st = sy_tensor_set_string(out->c[0], 0, data, n);
    if (st) {
        sy_tensor_free(out->c[0]);
        out->c[0] = NULL;
        return st;
    }
    out->n = 1;
    return SY_OK;
}

static sy_status files_next(ds_iter *base, sy_element *out, bool *end) {
    files_iter *it = (files_iter *)base;
    const files_state *s = base->d->state;
    for (;;) {
        if (!it->open) {
            if (it->file >= sy_tensor_count(s->names)) {
                *end = true;
                return SY_OK;
            }
            it->path = (const char *)sy_tensor_string(s->names, it->file).data;
            it->len = it->pos = 0;
            it->eof = false;
            sy_status st = s->format->open(it, s, it->path);
            if (st) {
                s->format->close(it);
                return st;
            }
            it->open = true;
        }
        bool file_end = false;
        sy_status st = s->format->next(it, s, out, &file_end);
        if (st || !file_end) return st;
        s->format->close(it);
        it->open = false;
        it->file++;
    }
}

static void files_release(ds_iter *base) {
    files_iter *it = (files_iter *)base;
    if (it->open) ((const files_state *)base->d->state)->format->close(it);
    sy_free(it->buf);
}

static const ds_iter_ops files_iter_ops = {files_next, files_release};

static sy_status files_open(const sy_dataset *d, ds_iter **out) {
    return ds_iter_new(d, sizeof(files_iter), &files_iter_ops, out);
}

static void files_destroy(void *state) { sy_tensor_free(((files_state *)state)->names); }

/* A file source node of `kind` over the names (copied), with the settings
 * in *tmpl (its names ignored). */
static sy_status files_new(const ds_kind *kind, const sy_tensor *names, const files_state *tmpl, sy_dataset **out) {
    sy_status st = ds_node_new(kind, sizeof(files_state), NULL, 0, out);
    if (st) return st;
    files_state *s = (*out)->state;
    *s = *tmpl;
    s->names = NULL;
    st = sy_tensor_clone(names, &s->names);
    if (st) {
        sy_dataset_free(*out);
        *out = NULL;
        return st;
    }
    /* issue 17: with_origin (only a TFRecord node sets it) adds the file's name and the record's index */
    sy_component_spec specs[3] = {{SY_STRING, sy_shape_of(0)}, {SY_STRING, sy_shape_of(0)}, {SY_I64, sy_shape_of(0)}};
    ds_node_set_specs(*out, specs, tmpl->tfrecord.with_origin ? 3 : 1);
    return SY_OK;
}

/* The names as a tensor, then files_new. */
static sy_status files_new_names(const ds_kind *kind, const char *const *filenames, int32_t n, const files_state *tmpl,
                                 sy_dataset **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: out is NULL", kind->name);
    *out = NULL;
    sy_tensor *names;
    sy_status st = ds_filenames_tensor(filenames, n, kind->name, &names);
    if (st) return st;
    st = files_new(kind, names, tmpl, out);
    sy_tensor_free(names);
    return st;
}

static void stream_close(files_iter *it) { ds_stream_close(&it->stream); }

/* ---- text lines --------------------------------------------------------------------------------- */

static sy_status text_open(files_iter *it, const files_state *s, const char *path) {
    return ds_stream_open(&it->stream, path, s->compression, "text_lines");
}

static sy_status text_next(files_iter *it, const files_state *s, sy_element *out, bool *end) {
    for (;;) {
        uint8_t *start = it->buf ? it->buf + it->pos : NULL;
        uint8_t *nl = it->len > it->pos ? memchr(start, '\n', it->len - it->pos) : NULL;
        if (nl || (it->eof && it->pos < it->len)) {
            size_t n = nl ? (size_t)(nl - start) : it->len - it->pos;
            it->pos += nl ? n + 1 : n;
            if (nl && n > 0 && start[n - 1] == '\r') n--;
            return string_element(start, n, out);
        }
        if (it->eof) {
            *end = true;
            return SY_OK;
        }
        if (it->pos) memmove(it->buf, start, it->len - it->pos);
        it->len -= it->pos;
        it->pos = 0;
        if (it->len == it->cap) {
            if (it->cap >= DS_LINE_MAX)
                return sy_error(SY_ERR_UNSUPPORTED, "text_lines: '%s' has a line longer than %zu bytes at byte %llu",
                                it->path, DS_LINE_MAX, (unsigned long long)(it->stream.pos - it->len));
            size_t cap = it->cap ? 2 * it->cap : 64 * 1024;
            uint8_t *grown = sy_realloc_array(it->buf, it->cap, cap, 1);
            if (!grown) return sy_error(SY_ERR_OUT_OF_MEMORY, "text_lines: out of memory for a line of '%s'", it->path);
            it->buf = grown;
            it->cap = cap;
        }
        size_t want = it->cap - it->len, got;
        sy_status st = ds_stream_read(&it->stream, it->buf + it->len, want, &got);
        if (st) return st;
        it->len += got;
        it->eof = got < want;
    }
}

static const file_format text_format = {text_open, text_next, stream_close};

static const ds_kind text_lines_kind = {"text_lines", files_open, files_destroy};

static sy_status check_compression(sy_compression c, const char *what) {
    if ((unsigned)c > SY_COMPRESSION_GZIP)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: invalid compression %d; expected SY_COMPRESSION_NONE, _ZLIB or "
                        "_GZIP", what, (int)c);
    return SY_OK;
}

sy_status sy_dataset_text_lines(const char *const *filenames, int32_t n, sy_compression compression, sy_dataset **out) {
    sy_status st = check_compression(compression, "text_lines");
    if (st) return st;
    files_state tmpl = {.format = &text_format, .compression = compression};
    return files_new_names(&text_lines_kind, filenames, n, &tmpl, out);
}

/* ---- fixed-length records ------------------------------------------------------------------------- */

/* Read until n bytes or the end into it->buf + it->len. */
static sy_status fill(files_iter *it, size_t n) {
    size_t got;
    sy_status st = ds_stream_read(&it->stream, it->buf + it->len, n, &got);
    it->len += got;
    if (got < n) it->eof = true;
    return st;
}

static sy_status fixed_open(files_iter *it, const files_state *s, const char *path) {
    const char *what = "fixed_length_records";
    sy_status st = ds_stream_open(&it->stream, path, s->compression, what);
    if (st) return st;
    struct stat sb;
    if (s->compression == SY_COMPRESSION_NONE && fstat(fileno(it->stream.f), &sb) == 0 && S_ISREG(sb.st_mode)) {
        int64_t body = (int64_t)sb.st_size - s->header_bytes - s->footer_bytes;
        if (body < 0 || body % s->record_bytes != 0)
            return sy_error(SY_ERR_CORRUPT, "%s: '%s' has %lld bytes: less the header (%lld bytes) and footer (%lld "
                            "bytes), %lld bytes, which is not a whole number of %lld-byte records", what, path,
                            (long long)sb.st_size, (long long)s->header_bytes, (long long)s->footer_bytes,
                            (long long)body, (long long)s->record_bytes);
    }
    size_t window = (size_t)(s->record_bytes + s->footer_bytes);
    if (it->cap < window) {
        uint8_t *grown = sy_realloc_array(it->buf, it->cap, window, 1);
        if (!grown) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu-byte records", what, window);
        it->buf = grown;
        it->cap = window;
    }
    int64_t skipped = 0;
    while (skipped < s->header_bytes && !it->eof) { /* the header, a window at a time */
        it->len = 0;
        st = fill(it, (size_t)sy_min64(s->header_bytes - skipped, (int64_t)window));
        if (st) return st;
        skipped += (int64_t)it->len;
    }
    if (skipped < s->header_bytes)
        return sy_error(SY_ERR_CORRUPT, "%s: '%s' has %lld bytes, fewer than its %lld-byte header", what, path,
                        (long long)skipped, (long long)s->header_bytes);
    it->len = 0;
    return it->eof ? SY_OK : fill(it, window);
}

static sy_status fixed_next(files_iter *it, const files_state *s, sy_element *out, bool *end) {
    size_t record = (size_t)s->record_bytes, footer = (size_t)s->footer_bytes;
    if (it->len < record + footer) {
        if (it->len == footer && it->eof) {
            *end = true;
            return SY_OK;
        }
        return sy_error(SY_ERR_CORRUPT, "fixed_length_records: '%s' ends %zu bytes after its last whole record, "
                        "where the %zu-byte footer or another %zu-byte record should be: the body is not a whole "
                        "number of records", it->path, it->len, footer, record);
    }
    sy_status st = string_element(it->buf, record, out);
    if (st) return st;
    memmove(it->buf, it->buf + record, footer);
    it->len = footer;
    if (!it->eof) st = fill(it, record);
    if (st) sy_element_clear(out);
    return st;
}

static const file_format fixed_format = {fixed_open, fixed_next, stream_close};

static const ds_kind fixed_length_kind = {"fixed_length_records", files_open, files_destroy};

sy_status sy_dataset_fixed_length_records(const char *const *filenames, int32_t n, int64_t record_bytes,
                                          int64_t header_bytes, int64_t footer_bytes, sy_compression compression,
                                          sy_dataset **out) {
    sy_status st = check_compression(compression, "fixed_length_records");
    if (st) return st;
    int64_t limit = (int64_t)1 << 30;
    if (record_bytes < 1 || header_bytes < 0 || footer_bytes < 0 || record_bytes > limit || footer_bytes > limit ||
        header_bytes > INT64_MAX / 4)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "fixed_length_records: record_bytes %lld, header_bytes %lld, "
                        "footer_bytes %lld; expected record_bytes >= 1, the others >= 0, records and footers up to "
                        "1 GiB", (long long)record_bytes, (long long)header_bytes, (long long)footer_bytes);
    files_state tmpl = {.format = &fixed_format, .compression = compression, .record_bytes = record_bytes,
                        .header_bytes = header_bytes, .footer_bytes = footer_bytes};
    return files_new_names(&fixed_length_kind, filenames, n, &tmpl, out);
}

/* ---- TFRecord ------------------------------------------------------------------------------------ */

static sy_status tfrecord_open_file(files_iter *it, const files_state *s, const char *path) {
    sy_status st = sy_tfrecord_reader_open(path, &s->tfrecord, &it->reader);
    return st ? sy_error(st, "tfrecord: %s", sy_last_error()) : SY_OK;
}

static sy_status tfrecord_next(files_iter *it, const files_state *s, sy_element *out, bool *end) {
    const uint8_t *data;
    size_t n;
    sy_status st = sy_tfrecord_read(it->reader, &data, &n, end);
    if (st) return sy_error(st, "tfrecord: %s", sy_last_error());
    if (*end) return SY_OK;
    st = string_element(data, n, out);
    if (st || !s->tfrecord.with_origin) return st;
    /* issue 17: where the record came from, for errors that name it */
    if (!(st = sy_tensor_new(SY_STRING, sy_shape_of(0), &out->c[1]))) {
        out->n = 2;
        st = sy_tensor_set_string(out->c[1], 0, it->path, strlen(it->path));
    }
    if (!st && !(st = sy_tensor_new(SY_I64, sy_shape_of(0), &out->c[2]))) {
        out->n = 3;
        *(int64_t *)sy_tensor_data(out->c[2]) = sy_tfrecord_reader_records(it->reader) - 1;
    }
    if (st) sy_element_clear(out);
    return st;
}

static void tfrecord_close(files_iter *it) {
    int64_t skipped = it->reader ? sy_tfrecord_reader_skipped(it->reader) : 0;
    if (skipped)
        sy_log(SY_LOG_WARNING, "tfrecord: skipped %lld corrupt record%s in '%s'", (long long)skipped,
               skipped == 1 ? "" : "s", it->path);
    sy_tfrecord_reader_close(it->reader);
    it->reader = NULL;
}

static const file_format tfrecord_format = {tfrecord_open_file, tfrecord_next, tfrecord_close};

static const ds_kind tfrecord_kind = {"tfrecord", files_open, files_destroy};

/* interleave's fn for num_parallel_reads: one file's records, read with
 * the settings of the sequential source node whose state is ctx. */
static sy_status tfrecord_one_file(void *ctx, const sy_element *e, sy_dataset **out) {
    return files_new(&tfrecord_kind, e->c[0], ctx, out);
}

sy_status sy_dataset_tfrecord(const char *const *filenames, int32_t n, const sy_tfrecord_options *options,
                              int32_t num_parallel_reads, sy_dataset **out) {
    if (out) *out = NULL;
    if (num_parallel_reads < SY_AUTOTUNE)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "tfrecord: num_parallel_reads is %d; expected SY_AUTOTUNE (-1) or "
                        ">= 0", (int)num_parallel_reads);
    files_state tmpl = {.format = &tfrecord_format,
                        .tfrecord = options ? *options : sy_tfrecord_options_default()};
    sy_status st = check_compression(tmpl.tfrecord.compression, "tfrecord");
    if (!st && tmpl.tfrecord.buffer_size < 0)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "tfrecord: buffer_size is %lld; expected >= 0 (0: 256 KiB)",
                      (long long)tmpl.tfrecord.buffer_size);
    sy_dataset *all;
    if (!st) st = files_new_names(&tfrecord_kind, filenames, n, &tmpl, &all);
    if (st || num_parallel_reads == 0 || num_parallel_reads == 1) {
        if (!st) *out = all;
        return st;
    }
    files_state *s = all->state;
    sy_dataset *names;
    st = sy_dataset_from_tensor_slices(&s->names, 1, &names);
    if (!st) {
        int32_t reads = num_parallel_reads == SY_AUTOTUNE ? ds_autotune_threads() : num_parallel_reads;
        st = sy_dataset_interleave(names, tfrecord_one_file, s, reads, 1, reads, all->spec, 1, out);
        sy_dataset_free(names);
    }
    if (st) {
        sy_dataset_free(all);
        return st;
    }
    /* The interleave keeps the sequential node, whose state is its fn's
     * ctx; it opens only its first input. */
    SY_ASSERT((*out)->n_inputs < DS_MAX_INPUTS);
    (*out)->input[(*out)->n_inputs++] = all;
    return SY_OK;
}
