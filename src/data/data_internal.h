/*
 * data_internal.h - what the data module's files share: the parsers behind
 * the file readers (they work on bytes in memory, so fuzz targets and tests
 * can feed them anything), SHA-256, the fetcher that finds, downloads and
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

/* Reverse the bytes of each of `count` elements of `size` bytes, in place. */
void data_byteswap(void *data, int64_t count, size_t size);

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
