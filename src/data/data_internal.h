/*
 * data_internal.h - what the data module's files share: the parsers behind
 * the file readers (they work on bytes in memory, so fuzz targets and tests
 * can feed them anything), the tar reader, the word index and the IMDB
 * loader with explicit paths, SHA-256, the fetcher that finds, downloads and
 * verifies a dataset file, and small byte helpers.
 *
 * Every parser takes `what`, the name used in its messages (a path, or
 * "archive.npz member 'x.npy'"), and bounds every size it computes against
 * the bytes it was given before allocating anything, so a header that claims
 * gigabytes fails with SY_ERR_CORRUPT instead of allocating them.
 */
#ifndef SY_DATA_INTERNAL_H
#define SY_DATA_INTERNAL_H

#include "systolic/data.h"
#include "../core/core_internal.h"

#include <zlib.h>

/* ---- parsers (idx.c, npy.c, npz.c) ------------------------------------------- */

/* An IDX file's bytes, raw or gzip (1f 8b), into a new tensor. */
sy_status idx_parse(const uint8_t *buf, size_t n, const char *what, sy_tensor **out);

/* An NPY file's bytes into a new tensor; byte offsets in messages count
 * from buf (for an archive member, `what` says where the member starts). */
sy_status npy_parse(const uint8_t *buf, size_t n, const char *what, sy_tensor **out);

/* An NPZ (zip) archive's bytes. The archive refers to `buf`, which must
 * outlive it; sy_npz_close frees only what the parse allocated. */
sy_status npz_parse(const uint8_t *buf, size_t n, const char *what, sy_npz **out);

/* The whole file at `path` in a new sy_malloc'd buffer (*buf may be non-NULL
 * for an empty file). SY_ERR_IO names the path and the system's reason. */
sy_status data_read_file(const char *path, uint8_t **buf, size_t *n);

/* Read the file at `path` whole, call fn(bytes, size, path, ctx), and free
 * the bytes: fn's status. */
typedef sy_status (*data_bytes_fn)(const uint8_t *buf, size_t n, const char *path, void *ctx);
sy_status data_with_file(const char *path, data_bytes_fn fn, void *ctx);

/* Read the file at `path` whole and parse it with `parse` (idx_parse,
 * npy_parse), naming the path in messages. */
typedef sy_status (*data_parser)(const uint8_t *buf, size_t n, const char *what, sy_tensor **out);
sy_status data_parse_file(const char *path, data_parser parse, sy_tensor **out);

/* Deflate can shrink at most 1032:1, so no valid stream of n compressed
 * bytes inflates to more than this: the bound that keeps a forged header
 * from making us allocate gigabytes. */
static inline uint64_t data_inflate_bound(size_t compressed) {
    return (uint64_t)compressed * 1032u + 1024u;
}

/* Unaligned little- and big-endian loads. */
static inline uint16_t data_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t data_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t data_le64(const uint8_t *p) {
    return data_le32(p) | (uint64_t)data_le32(p + 4) << 32;
}
static inline uint32_t data_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* The bytes of a buffer in order, inflated when it is gzip'd (read.c): the
 * IDX and tar readers read through it. */
typedef struct data_stream {
    const uint8_t *buf;
    size_t n;
    const char *what;
    bool gz;
    size_t pos;     /* plain: offset of the next byte */
    uint64_t out;   /* bytes handed out so far (= the offset in the stream) */
    z_stream z;     /* gzip: the inflater; next_in is the compressed position */
    bool z_init;    /* inflateInit2 was called (inflateEnd is due) */
    bool in_member; /* inside a gzip member (between header and trailer) */
} data_stream;

/* Start reading buf (gzip when it starts with 1f 8b); `what` names it in
 * messages and must outlive the stream. */
sy_status data_stream_open(data_stream *s, const uint8_t *buf, size_t n, const char *what);
/* Up to `len` more bytes into dst; *got < len only at the end of the stream.
 * SY_ERR_CORRUPT for damaged or truncated gzip data, with the byte offset. */
sy_status data_stream_read(data_stream *s, void *dst, size_t len, size_t *got);
/* The most bytes the rest of the stream can hold: exact when plain,
 * deflate's limit when gzip'd. */
uint64_t data_stream_room(const data_stream *s);
/* "" when plain, " of the decompressed data" when gzip'd: follows "at byte N". */
const char *data_stream_where(const data_stream *s);
void data_stream_close(data_stream *s);

/* Reverse the bytes of each of `count` elements of `size` bytes, in place. */
void data_byteswap(void *data, int64_t count, size_t size);

/* ---- tar archives (tar.c) ------------------------------------------------------ */

/* A tar archive read front to back, plain or gzip'd (POSIX ustar, old GNU
 * and v7 headers; GNU long names and pax path/size records). */
typedef struct tar_reader tar_reader;

typedef struct tar_entry {
    const char *name; /* the member's path, owned by the reader until the next tar_next */
    char type;        /* typeflag: '0' a regular file ('\0' and '7' read as '0'), '5' a
                         directory, '1' '2' links, ... */
    uint64_t size;    /* bytes of data */
    uint64_t offset;  /* where its header starts in the (decompressed) archive */
} tar_entry;

/* Read the archive in buf (which must outlive the reader), naming it `what`
 * in messages. */
sy_status tar_open_memory(const uint8_t *buf, size_t n, const char *what, tar_reader **out);
/* Read the file at path whole (compressed, if it is), then as above. */
sy_status tar_open_file(const char *path, tar_reader **out);
/* The next member (the rest of the current one is skipped), or *entry NULL
 * at the end of the archive. SY_ERR_CORRUPT names the archive, the byte
 * offset and the damage: a bad header checksum or number, a member running
 * past the end, a missing end-of-archive marker, damaged gzip data. */
sy_status tar_next(tar_reader *r, const tar_entry **entry);
/* The current member's data, whole, in a buffer the reader owns (the caller
 * may change it) until the next call; NUL-terminated, though the data may
 * hold NULs too. Memory grows with the bytes actually read, so a forged size
 * cannot make it allocate more than the archive holds. */
sy_status tar_read(tar_reader *r, uint8_t **data, size_t *n);
void tar_close(tar_reader *r);
/* The archive's name in messages (its path, or tar_open_memory's `what`). */
const char *tar_name(const tar_reader *r);

/* ---- the IMDB dataset (word_index.c, imdb.c, sequences.c) ----------------------- */

/* A JSON object word -> rank (Keras's imdb_word_index.json) from bytes. The
 * ranks must be the integers 1..count, each once. SY_ERR_CORRUPT names
 * `what` with the line and column of bad JSON, or the word with a bad rank. */
sy_status word_index_parse(const uint8_t *buf, size_t n, const char *what, sy_word_index **out);
sy_status word_index_read(const char *path, sy_word_index **out);
/* The rank of the `len` bytes at word (no NUL needed), 0 if absent. */
int32_t word_index_find(const sy_word_index *wi, const char *word, size_t len);

/* Keras's text_to_word_sequence (default filters, lower=True, split=' ')
 * on bytes: the filtered characters !"#$%&()*+,-./:;<=>?@[\]^_`{|}~, tab,
 * newline and space separate words, and fn gets each run of other bytes,
 * its ASCII letters lower-cased in place. Non-ASCII bytes stay as they are,
 * inside words. */
typedef void (*imdb_word_fn)(void *ctx, const char *word, size_t len);
void imdb_tokenize(char *text, size_t n, imdb_word_fn fn, void *ctx);

/* sy_imdb_load_data on explicit files (no checksums): the review archive
 * (aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt) and the word index. */
sy_status imdb_load_files(const char *archive, const char *word_index, const sy_imdb_options *o,
                          sy_imdb_split *out);
/* The same from an open archive (fuzzing: any bytes). */
sy_status imdb_load_tar(tar_reader *tar, const sy_word_index *wi, const sy_imdb_options *o,
                        sy_imdb_split *out);

/* `count` empty sequences with room for `total` values: the caller fills
 * data and offsets (offsets[0] = 0, offsets[i + 1] = end of sequence i). */
struct sy_sequences {
    int64_t count;
    int64_t *offsets; /* count + 1 */
    int32_t *data;
};
sy_status sequences_new(int64_t count, int64_t total, sy_sequences **out);

/* ---- SHA-256 (sha256.c) --------------------------------------------------------- */

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
void sha256_final(sha256_ctx *c, uint8_t digest[32]);
/* 64 lowercase hex digits and a NUL. */
void sha256_hex(const uint8_t digest[32], char hex[65]);
/* The SHA-256 of a file, as hex. SY_ERR_IO names the path. */
sy_status sha256_file(const char *path, char hex[65]);

/* ---- finding and downloading files (fetch.c) ------------------------------------ */

/* One file of a dataset, as the zoo (zoo.c) or a test describes it. */
typedef struct data_file_spec {
    const char *dataset;     /* "fashion_mnist" */
    const char *file;        /* "train-images-idx3-ubyte.gz" */
    const char *sha256;      /* 64 lowercase hex digits */
    int64_t size;            /* bytes; a download stops past it (0: unknown) */
    const char *const *urls; /* base URLs ending in '/', NULL-terminated: <url><file> */
    const char *note;        /* said when the file cannot be found (NULL: nothing) */
} data_file_spec;

/* Find the file ($SYSTOLIC_DATASETS, then the cache), or download it into
 * the cache, verify its SHA-256, and write its path into `path` (`size`
 * bytes). SY_ERR_IO when it can be neither found nor downloaded,
 * SY_ERR_CORRUPT when a copy has the wrong checksum; the message names the
 * places searched, the URLs tried and what to do. */
sy_status data_fetch(const data_file_spec *spec, char *path, size_t size);

/* The cache directory: $SYSTOLIC_CACHE_DIR, else $XDG_CACHE_HOME/systolic,
 * else $HOME/.cache/systolic. SY_ERR_IO when none of them is set. */
sy_status data_cache_dir(char *path, size_t size);

#endif
