/*
 * files.h - the files the data tests write and read (test_imdb.c,
 * test_cifar.c): a temporary directory removed at the end, tests/data
 * beside the sources, a growing byte buffer, files written plain or
 * gzip'd, and tar archives with headers of each kind the reader accepts
 * (POSIX ustar with a prefix, old GNU, v7; octal or base-256 sizes), each
 * with a correct checksum. Include it after defining _GNU_SOURCE (nftw).
 */
#ifndef SY_TEST_FILES_H
#define SY_TEST_FILES_H

#include "core/core_internal.h"

#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- the test's directories ------------------------------------------------------------ */

static char tmp_root[512];       /* a new temporary directory */
static char fixture_dir[512];    /* tests/data */
static char real_datasets[1024]; /* $SYSTOLIC_DATASETS as the test found it; "" if unset */

static inline void in_tmp(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", tmp_root, name);
}

/* Make tmp_root ($TMPDIR/systolic-<test>-XXXXXX), find tests/data beside
 * `source`, the test's __FILE__ (CMake compiles it by its full path), and
 * keep $SYSTOLIC_DATASETS in real_datasets (the tests change the variable);
 * false, with the reason printed, when the directory cannot be made. */
static inline bool files_setup(const char *test, const char *source) {
    const char *real = getenv("SYSTOLIC_DATASETS");
    snprintf(real_datasets, sizeof real_datasets, "%s", real ? real : "");
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_root, sizeof tmp_root, "%s/systolic-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", test);
    if (!mkdtemp(tmp_root)) {
        fprintf(stderr, "%s: cannot create a temporary directory: %s\n", test, strerror(errno));
        return false;
    }
    snprintf(fixture_dir, sizeof fixture_dir, "%s", source);
    char *slash = strrchr(fixture_dir, '/');
    snprintf(slash ? slash + 1 : fixture_dir,
             sizeof fixture_dir - (size_t)(slash ? slash + 1 - fixture_dir : 0), "data");
    return true;
}

static inline int files_remove_one(const char *path, const struct stat *sb, int flag,
                                   struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Remove tmp_root and everything in it. */
static inline void files_cleanup(void) {
    nftw(tmp_root, files_remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- bytes and tar archives ------------------------------------------------------------ */

/* A growing byte buffer: archives of a few kilobytes. */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static inline void buf_add(buf *b, const void *data, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        SY_ASSERT(b->p);
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}

static inline void buf_zeros(buf *b, size_t n) {
    static const uint8_t zeros[1024];
    for (size_t done = 0; done < n; done += sizeof zeros)
        buf_add(b, zeros, n - done < sizeof zeros ? n - done : sizeof zeros);
}

/* Write `n` bytes to `path`, gzip'd (zlib's gzip writer) or not. */
static inline void write_bytes(const char *path, const void *data, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb9");
        SY_ASSERT(f && gzwrite(f, data, (unsigned)n) == (int)n && gzclose(f) == Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        SY_ASSERT(f && fwrite(data, 1, n, f) == n && fclose(f) == 0);
    }
}

typedef enum { USTAR, OLD_GNU, V7 } tar_magic;

typedef struct header_spec {
    const char *name, *prefix; /* prefix: POSIX ustar only */
    char type;
    uint64_t size;
    tar_magic magic;
    bool base256; /* the size in GNU's base-256 form */
} header_spec;

/* One 512-byte header with a correct checksum ("%06o\0 ", as GNU tar). */
static inline void tar_header(buf *b, const header_spec *h) {
    uint8_t block[512] = {0};
    memcpy(block, h->name, strnlen(h->name, 100));
    memcpy(block + 100, "0000644", 7);
    memcpy(block + 108, "0000000", 7);
    memcpy(block + 116, "0000000", 7);
    if (h->base256) {
        block[124] = 0x80;
        for (int i = 0; i < 8; i++) block[135 - i] = (uint8_t)(h->size >> (8 * i));
    } else {
        snprintf((char *)block + 124, 12, "%011llo", (unsigned long long)h->size);
    }
    memcpy(block + 136, "12010130000", 11);
    block[156] = (uint8_t)h->type;
    if (h->magic == USTAR)
        memcpy(block + 257,
               "ustar\0"
               "00",
               8);
    if (h->magic == OLD_GNU) memcpy(block + 257, "ustar  ", 8);
    if (h->magic == USTAR && h->prefix) memcpy(block + 345, h->prefix, strnlen(h->prefix, 155));
    memset(block + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += block[i];
    snprintf((char *)block + 148, 8, "%06o", sum);
    buf_add(b, block, sizeof block);
}

/* A member: its header, then its data padded to a whole block. */
static inline void tar_member(buf *b, const header_spec *h, const void *data, size_t n) {
    tar_header(b, h);
    buf_add(b, data, n);
    buf_zeros(b, (512 - n % 512) % 512);
}

/* The end-of-archive marker: two zero blocks. */
static inline void tar_end(buf *b) {
    buf_zeros(b, 1024);
}

#endif
