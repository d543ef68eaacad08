/*
 * test_imdb.c - the IMDB part of the data module: Keras's pad_sequences and
 * text_to_word_sequence against values Keras computed; the tar reader on
 * archives this test writes (ustar with a prefix, GNU long names, pax
 * headers, base-256 sizes, old GNU and v7 headers; plain and gzip'd) and on
 * archives Python's tarfile wrote (tests/data/tar_*), and on every kind of
 * damage; the word index, good and damaged; load_data on a small synthetic
 * dataset this test writes, against keras.datasets.imdb.load_data on the
 * same reviews for every option; and, when $SYSTOLIC_DATASETS is set, the
 * real dataset through the public API, with facts checked with Python.
 *
 * The tables come from tools/imdb_test_values.py (TensorFlow 2.15's Keras).
 */
#define _GNU_SOURCE /* nftw, in files.h */
#include "check.h"
#include "data/data_internal.h"
#include "files.h"
#include "systolic.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* ---- writing tar archives ------------------------------------------------------------ */

static void tar_file(buf *b, const char *name, const char *text) {
    header_spec h = {name, NULL, '0', strlen(text), USTAR, false};
    tar_member(b, &h, text, strlen(text));
}

/* ---- reading them back --------------------------------------------------------------- */

typedef struct want_member {
    const char *name;
    char type;
    const char *data; /* NULL: not read (skipped) */
    uint64_t size;
} want_member;

/* Read the archive `r` to its end and compare its members with want[]. */
static void check_members(tar_reader *r, const want_member *want, int count, const char *what) {
    const tar_entry *e;
    int i = 0;
    for (sy_status st; !(st = tar_next(r, &e)) && e; i++) {
        if (i >= count) {
            CHECK(false, "%s: an extra member '%s'", what, e->name);
            break;
        }
        CHECK(strcmp(e->name, want[i].name) == 0, "%s: member %d is '%s', expected '%s'", what, i,
              e->name, want[i].name);
        CHECK(e->type == want[i].type, "%s: '%s' has type '%c', expected '%c'", what, e->name,
              e->type, want[i].type);
        CHECK(e->size == want[i].size, "%s: '%s' has %llu bytes, expected %llu", what, e->name,
              (unsigned long long)e->size, (unsigned long long)want[i].size);
        if (!want[i].data) continue;
        uint8_t *data;
        size_t n;
        CHECK_OK(tar_read(r, &data, &n));
        CHECK(n == want[i].size && memcmp(data, want[i].data, n) == 0 && data[n] == 0,
              "%s: '%s' holds the wrong bytes", what, e->name);
    }
    CHECK(i == count, "%s: %d members, expected %d (%s)", what, i, count, sy_last_error());
    CHECK(tar_next(r, &e) == SY_OK && !e, "%s: the end stays the end", what);
}

/* ---- pad_sequences ------------------------------------------------------------------- */

typedef struct pad_case {
    int64_t maxlen;
    const char *padding, *truncating;
    int32_t value;
    int64_t width;
    int32_t want[40];
} pad_case;

typedef struct token_case {
    const char *text;
    int count;
    const char *words[30];
} token_case;

typedef struct seq_row {
    int label, len;
    int32_t values[16];
} seq_row;

typedef struct split_rows {
    int count;
    seq_row rows[6];
} split_rows;

typedef struct load_case {
    sy_imdb_options options;
    split_rows train, test;
} load_case;

/* keras.utils.pad_sequences([[1], [2, 3], [4, 5, 6], [], [7, 8, 9, 10, 11]], maxlen, padding=,
 * truncating=, value=) */
static const pad_case pad_cases[] = {
    {0, "pre", "pre", 0, 5, {0, 0, 0, 0, 1, 0, 0, 0, 2, 3, 0,  0, 4,
                             5, 6, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11}},
    {0, "pre", "pre", -1, 5, {-1, -1, -1, -1, 1,  -1, -1, -1, 2, 3, -1, -1, 4,
                              5,  6,  -1, -1, -1, -1, -1, 7,  8, 9, 10, 11}},
    {0, "pre", "post", 0, 5, {0, 0, 0, 0, 1, 0, 0, 0, 2, 3, 0,  0, 4,
                              5, 6, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11}},
    {0, "pre", "post", -1, 5, {-1, -1, -1, -1, 1,  -1, -1, -1, 2, 3, -1, -1, 4,
                               5,  6,  -1, -1, -1, -1, -1, 7,  8, 9, 10, 11}},
    {0, "post", "pre", 0, 5, {1, 0, 0, 0, 0, 2, 3, 0, 0, 0, 4,  5, 6,
                              0, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11}},
    {0, "post", "pre", -1, 5, {1,  -1, -1, -1, -1, 2,  3,  -1, -1, -1, 4,  5, 6,
                               -1, -1, -1, -1, -1, -1, -1, 7,  8,  9,  10, 11}},
    {0, "post", "post", 0, 5, {1, 0, 0, 0, 0, 2, 3, 0, 0, 0, 4,  5, 6,
                               0, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11}},
    {0, "post", "post", -1, 5, {1,  -1, -1, -1, -1, 2,  3,  -1, -1, -1, 4,  5, 6,
                                -1, -1, -1, -1, -1, -1, -1, 7,  8,  9,  10, 11}},
    {2, "pre", "pre", 0, 2, {0, 1, 2, 3, 5, 6, 0, 0, 10, 11}},
    {2, "pre", "pre", -1, 2, {-1, 1, 2, 3, 5, 6, -1, -1, 10, 11}},
    {2, "pre", "post", 0, 2, {0, 1, 2, 3, 4, 5, 0, 0, 7, 8}},
    {2, "pre", "post", -1, 2, {-1, 1, 2, 3, 4, 5, -1, -1, 7, 8}},
    {2, "post", "pre", 0, 2, {1, 0, 2, 3, 5, 6, 0, 0, 10, 11}},
    {2, "post", "pre", -1, 2, {1, -1, 2, 3, 5, 6, -1, -1, 10, 11}},
    {2, "post", "post", 0, 2, {1, 0, 2, 3, 4, 5, 0, 0, 7, 8}},
    {2, "post", "post", -1, 2, {1, -1, 2, 3, 4, 5, -1, -1, 7, 8}},
    {4, "pre", "pre", 0, 4, {0, 0, 0, 1, 0, 0, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 8, 9, 10, 11}},
    {4, "pre", "pre", -1, 4, {-1, -1, -1, 1,  -1, -1, 2, 3, -1, 4,
                              5,  6,  -1, -1, -1, -1, 8, 9, 10, 11}},
    {4, "pre", "post", 0, 4, {0, 0, 0, 1, 0, 0, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 7, 8, 9, 10}},
    {4, "pre", "post", -1, 4, {-1, -1, -1, 1,  -1, -1, 2, 3, -1, 4,
                               5,  6,  -1, -1, -1, -1, 7, 8, 9,  10}},
    {4, "post", "pre", 0, 4, {1, 0, 0, 0, 2, 3, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0, 8, 9, 10, 11}},
    {4, "post", "pre", -1, 4, {1, -1, -1, -1, 2,  3,  -1, -1, 4,  5,
                               6, -1, -1, -1, -1, -1, 8,  9,  10, 11}},
    {4, "post", "post", 0, 4, {1, 0, 0, 0, 2, 3, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0, 7, 8, 9, 10}},
    {4, "post", "post", -1, 4, {1, -1, -1, -1, 2,  3,  -1, -1, 4, 5,
                                6, -1, -1, -1, -1, -1, 7,  8,  9, 10}},
    {7, "pre", "pre", 0, 7, {0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 3, 0, 0,  0, 0,
                             4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11}},
    {7, "pre", "pre", -1, 7, {-1, -1, -1, -1, -1, -1, 1,  -1, -1, -1, -1, -1, 2, 3, -1, -1, -1, -1,
                              4,  5,  6,  -1, -1, -1, -1, -1, -1, -1, -1, -1, 7, 8, 9,  10, 11}},
    {7, "pre", "post", 0, 7, {0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 3, 0, 0,  0, 0,
                              4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11}},
    {7, "pre", "post", -1, 7, {-1, -1, -1, -1, -1, -1, 1,  -1, -1, -1, -1, -1, 2, 3, -1, -1, -1, -1,
                               4,  5,  6,  -1, -1, -1, -1, -1, -1, -1, -1, -1, 7, 8, 9,  10, 11}},
    {7, "post", "pre", 0, 7, {1, 0, 0, 0, 0, 0, 0, 2, 3, 0, 0, 0, 0, 0,  4,  5, 6, 0,
                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 0, 0}},
    {7, "post", "pre", -1, 7, {1,  -1, -1, -1, -1, -1, -1, 2,  3,  -1, -1, -1,
                               -1, -1, 4,  5,  6,  -1, -1, -1, -1, -1, -1, -1,
                               -1, -1, -1, -1, 7,  8,  9,  10, 11, -1, -1}},
    {7, "post", "post", 0, 7, {1, 0, 0, 0, 0, 0, 0, 2, 3, 0, 0, 0, 0, 0,  4,  5, 6, 0,
                               0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 0, 0}},
    {7, "post", "post", -1, 7, {1,  -1, -1, -1, -1, -1, -1, 2,  3,  -1, -1, -1,
                                -1, -1, 4,  5,  6,  -1, -1, -1, -1, -1, -1, -1,
                                -1, -1, -1, -1, 7,  8,  9,  10, 11, -1, -1}},
};

/* keras.preprocessing.text.text_to_word_sequence(s), and systolic's words where
 * they differ (Python 3 lower-cases non-ASCII capitals; Keras's word index was
 * made lower-casing ASCII only) */
static const token_case token_cases[] = {
    {"Hello, World! This is a TEST.", 6, {"hello", "world", "this", "is", "a", "test"}},
    {"I loved it.<br /><br />The end", 7, {"i", "loved", "it", "br", "br", "the", "end"}},
    {"don't won't 'quoted' it's o'clock''", 5, {"don't", "won't", "'quoted'", "it's", "o'clock''"}},
    {"  multiple   spaces\x09"
     "here\x0a"
     "and\x0a"
     "\x0a"
     "newlines  ",
     5,
     {"multiple", "spaces", "here", "and", "newlines"}},
    {"a-b_c/d\\e|f~g`h^i{j}k[l]m@n?o>p=q<r;s:t+u*v)w(x&y%z$#\"!",
     26,
     {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
      "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z"}},
    {"123 4.5 $100 10/10 1990's", 7, {"123", "4", "5", "100", "10", "10", "1990's"}},
    {"\x0d"
     "\x0a"
     "windows\x0d"
     "line\x0b"
     "vt\x0c"
     "ff",
     2,
     {"\x0d"
      "",
      "windows\x0d"
      "line\x0b"
      "vt\x0c"
      "ff"}},
    {"caf\xc3"
     "\xa9"
     " na\xc3"
     "\xaf"
     "ve \xe2"
     "\x80"
     "\xa6"
     "ellipsis\xe2"
     "\x80"
     "\x94"
     "dash \xe2"
     "\x80"
     "\x9c"
     "quotes\xe2"
     "\x80"
     "\x9d"
     " a\xc2"
     "\xa0"
     "b",
     5,
     {"caf\xc3"
      "\xa9"
      "",
      "na\xc3"
      "\xaf"
      "ve",
      "\xe2"
      "\x80"
      "\xa6"
      "ellipsis\xe2"
      "\x80"
      "\x94"
      "dash",
      "\xe2"
      "\x80"
      "\x9c"
      "quotes\xe2"
      "\x80"
      "\x9d"
      "",
      "a\xc2"
      "\xa0"
      "b"}},
    /* Keras: "caf\xc3""\xa9""", "\xc3""\xa1""ngela", "\xc3""\xa9""cole" */
    {"Caf\xc3"
     "\x89"
     " \xc3"
     "\x81"
     "ngela \xc3"
     "\x89"
     "COLE",
     3,
     {"caf\xc3"
      "\x89"
      "",
      "\xc3"
      "\x81"
      "ngela",
      "\xc3"
      "\x89"
      "cole"}},
    {"!!! ... ---", 0, {NULL}},
    {"", 0, {NULL}},
};

/* keras.datasets.imdb.load_data(num_words, skip_top, maxlen, start_char=,
 * oov_char=, index_from=) on the synthetic reviews; each split sorted by
 * (label, sequence). Keras's None is 0 (num_words, maxlen) or -1. */
static const load_case load_cases[] = {
    {
        {0, 0, 0, 113, 1, 2, 3},
        {6,
         {{0, 13, {1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
          {0, 11, {1, 9, 5, 4, 14, 11, 9, 9, 9, 12, 8}},
          {0, 6, {1, 10, 12, 6, 8, 5}},
          {1, 7, {1, 2, 13, 2, 14, 10, 2}},
          {1, 11, {1, 4, 5, 11, 8, 7, 7, 6, 8, 8, 14}},
          {1, 2, {1, 8}}}},
        {4,
         {{0, 1, {1}},
          {0, 7, {1, 4, 14, 9, 4, 13, 9}},
          {1, 7, {1, 6, 2, 5, 12, 9, 7}},
          {1, 4, {1, 8, 8, 8}}}},
    },
    {
        {8, 0, 0, 113, 1, 2, 3},
        {6,
         {{0, 6, {1, 2, 2, 6, 2, 5}},
          {0, 11, {1, 2, 5, 4, 2, 2, 2, 2, 2, 2, 2}},
          {0, 13, {1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
          {1, 2, {1, 2}},
          {1, 7, {1, 2, 2, 2, 2, 2, 2}},
          {1, 11, {1, 4, 5, 2, 2, 7, 7, 6, 2, 2, 2}}}},
        {4,
         {{0, 1, {1}},
          {0, 7, {1, 4, 2, 2, 4, 2, 2}},
          {1, 4, {1, 2, 2, 2}},
          {1, 7, {1, 6, 2, 5, 2, 2, 7}}}},
    },
    {
        {8, 0, 0, 113, 1, -1, 3},
        {6,
         {{0, 13, {1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
          {0, 3, {1, 5, 4}},
          {0, 3, {1, 6, 5}},
          {1, 1, {1}},
          {1, 1, {1}},
          {1, 6, {1, 4, 5, 7, 7, 6}}}},
        {4, {{0, 1, {1}}, {0, 3, {1, 4, 4}}, {1, 1, {1}}, {1, 4, {1, 6, 5, 7}}}},
    },
    {
        {0, 4, 0, 113, 1, 2, 3},
        {6,
         {{0, 13, {2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
          {0, 11, {2, 9, 5, 4, 14, 11, 9, 9, 9, 12, 8}},
          {0, 6, {2, 10, 12, 6, 8, 5}},
          {1, 7, {2, 2, 13, 2, 14, 10, 2}},
          {1, 11, {2, 4, 5, 11, 8, 7, 7, 6, 8, 8, 14}},
          {1, 2, {2, 8}}}},
        {4,
         {{0, 1, {2}},
          {0, 7, {2, 4, 14, 9, 4, 13, 9}},
          {1, 7, {2, 6, 2, 5, 12, 9, 7}},
          {1, 4, {2, 8, 8, 8}}}},
    },
    {
        {20, 0, 0, 113, -1, 2, 2},
        {6,
         {{0, 12, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}},
          {0, 10, {8, 4, 3, 13, 10, 8, 8, 8, 11, 7}},
          {0, 5, {9, 11, 5, 7, 4}},
          {1, 10, {3, 4, 10, 7, 6, 6, 5, 7, 7, 13}},
          {1, 1, {7}},
          {1, 6, {14, 12, 14, 13, 9, 14}}}},
        {4,
         {{0, 0, {0}},
          {0, 6, {3, 13, 8, 3, 12, 8}},
          {1, 6, {5, 14, 4, 11, 8, 6}},
          {1, 3, {7, 7, 7}}}},
    },
    {
        {0, 0, 10, 113, 1, 2, 3},
        {3, {{0, 6, {1, 10, 12, 6, 8, 5}}, {1, 7, {1, 2, 13, 2, 14, 10, 2}}, {1, 2, {1, 8}}}},
        {4,
         {{0, 1, {1}},
          {0, 7, {1, 4, 14, 9, 4, 13, 9}},
          {1, 7, {1, 6, 2, 5, 12, 9, 7}},
          {1, 4, {1, 8, 8, 8}}}},
    },
    {
        {12, 2, 0, 113, 7, 0, 5},
        {6,
         {{0, 6, {7, 0, 0, 8, 10, 7}},
          {0, 13, {7, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}},
          {0, 11, {7, 11, 7, 6, 0, 0, 11, 11, 11, 0, 10}},
          {1, 7, {7, 0, 0, 0, 0, 0, 0}},
          {1, 11, {7, 6, 7, 0, 10, 9, 9, 8, 10, 10, 0}},
          {1, 2, {7, 10}}}},
        {4,
         {{0, 1, {7}},
          {0, 7, {7, 6, 0, 11, 6, 0, 11}},
          {1, 7, {7, 8, 0, 7, 0, 11, 9}},
          {1, 4, {7, 10, 10, 10}}}},
    },
    {
        {15, 3, 9, 113, -1, -1, 1},
        {3, {{0, 5, {8, 10, 4, 6, 3}}, {1, 1, {6}}, {1, 6, {13, 11, 13, 12, 8, 13}}}},
        {4, {{0, 0, {0}}, {0, 4, {12, 7, 11, 7}}, {1, 6, {4, 13, 3, 10, 7, 5}}, {1, 3, {6, 6, 6}}}},
    },
};
/* maxlen=2: ValueError: After filtering for sequences shorter than maxlen=2, no sequence was kept.
 * Increase maxlen. */

/* Sequences from rows of values, the rows' lengths in len[]. */
static sy_sequences *make_sequences(int count, const int *len, const int32_t *values) {
    int64_t total = 0;
    for (int i = 0; i < count; i++) total += len[i];
    sy_sequences *s;
    SY_ASSERT(sequences_new(count, total, &s) == SY_OK);
    for (int i = 0; i < count; i++) s->offsets[i + 1] = s->offsets[i] + len[i];
    memcpy(s->data, values, (size_t)total * sizeof *values);
    return s;
}

static void test_pad_sequences(void) {
    static const int len[] = {1, 2, 3, 0, 5};
    static const int32_t values[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    sy_sequences *s = make_sequences(5, len, values);
    CHECK(sy_sequences_count(s) == 5 && sy_sequences_length(s, 4) == 5 &&
              sy_sequences_data(s, 4)[4] == 11 && sy_sequences_length(s, 3) == 0,
          "accessors");
    CHECK(sy_sequences_length(s, 5) == 0 && sy_sequences_data(s, -1) == NULL &&
              sy_sequences_count(NULL) == 0,
          "outside the sequences: 0 and NULL");
    for (size_t c = 0; c < sizeof pad_cases / sizeof pad_cases[0]; c++) {
        const pad_case *p = &pad_cases[c];
        sy_pad_options o = {p->maxlen, p->padding, p->truncating, p->value};
        sy_tensor *t = NULL;
        CHECK_OK(sy_pad_sequences(s, &o, &t));
        if (!t) continue;
        sy_shape shape = sy_tensor_shape(t), want = sy_shape_of(2, (int64_t)5, p->width);
        CHECK(sy_shape_equal(&shape, &want) && sy_tensor_dtype(t) == SY_I32,
              "maxlen %lld: shape (%lld, %lld)", (long long)p->maxlen, (long long)shape.dims[0],
              (long long)shape.dims[1]);
        const int32_t *x = sy_tensor_data(t);
        for (int64_t i = 0; i < 5 * p->width && sy_shape_equal(&shape, &want); i++)
            CHECK(x[i] == p->want[i],
                  "maxlen %lld padding %s truncating %s value %d: [%lld] = %d, "
                  "expected %d",
                  (long long)p->maxlen, p->padding, p->truncating, p->value, (long long)i, x[i],
                  p->want[i]);
        sy_tensor_free(t);
    }
    /* Keras's defaults, also spelled as NULL */
    sy_tensor *t = NULL;
    sy_pad_options o = sy_pad_options_default();
    o.padding = o.truncating = NULL;
    CHECK_OK(sy_pad_sequences(s, &o, &t));
    CHECK(t && memcmp(sy_tensor_data(t), pad_cases[0].want, 25 * sizeof(int32_t)) == 0,
          "NULL padding and truncating are \"pre\"");
    sy_tensor_free(t);
    CHECK_OK(sy_pad_sequences(s, NULL, &t));
    CHECK(t && memcmp(sy_tensor_data(t), pad_cases[0].want, 25 * sizeof(int32_t)) == 0,
          "no options: the defaults");
    sy_tensor_free(t);
    o = sy_pad_options_default();
    o.padding = "middle";
    CHECK_ERR(sy_pad_sequences(s, &o, &t), SY_ERR_INVALID_ARGUMENT, "padding \"middle\"",
              "\"pre\" or \"post\"");
    o.padding = "post";
    o.truncating = "both";
    CHECK_ERR(sy_pad_sequences(s, &o, &t), SY_ERR_INVALID_ARGUMENT, "truncating \"both\"");
    o.truncating = "pre";
    o.maxlen = -1;
    CHECK_ERR(sy_pad_sequences(s, &o, &t), SY_ERR_INVALID_ARGUMENT, "maxlen -1");
    CHECK(t == NULL, "no tensor on failure");
    sy_sequences_free(s);
    /* no sequences at all: (0, 0) */
    s = make_sequences(0, len, values);
    CHECK_OK(sy_pad_sequences(s, NULL, &t));
    sy_shape shape = t ? sy_tensor_shape(t) : sy_shape_of(0);
    CHECK(t && shape.rank == 2 && shape.dims[0] == 0 && shape.dims[1] == 0, "empty: (0, 0)");
    sy_tensor_free(t);
    sy_sequences_free(s);
    sy_sequences_free(NULL);
}

/* ---- the tokenizer ------------------------------------------------------------------- */

typedef struct words {
    char text[30][64];
    int count;
} words;

static void collect(void *ctx, const char *word, size_t len) {
    words *w = ctx;
    if (w->count < 30) snprintf(w->text[w->count], 64, "%.*s", (int)len, word);
    w->count++;
}

static void test_tokenizer(void) {
    for (size_t c = 0; c < sizeof token_cases / sizeof token_cases[0]; c++) {
        const token_case *t = &token_cases[c];
        char text[256];
        size_t n = strlen(t->text);
        memcpy(text, t->text, n + 1);
        words w = {.count = 0};
        imdb_tokenize(text, n, collect, &w);
        CHECK(w.count == t->count, "'%s': %d words, expected %d", t->text, w.count, t->count);
        for (int i = 0; i < w.count && i < t->count; i++)
            CHECK(strcmp(w.text[i], t->words[i]) == 0, "'%s': word %d is '%s', expected '%s'",
                  t->text, i, w.text[i], t->words[i]);
    }
}

/* ---- the tar reader ------------------------------------------------------------------ */

static const char long_name[] =
    "aclImdb/a-directory-name-long-enough-that-the-whole-path-needs-more-than-one-hundred-bytes/"
    "of-the-name-field/review.txt";

/* An archive of every kind of member this reader knows. */
static void valid_archive(buf *b) {
    static const uint8_t gnu_long[] = "aclImdb/train/pos/gnu-long-name-that-goes-on-and-on-and-on-"
                                      "well-past-the-one-hundred-bytes-of-the-name-field.txt";
    static const char pax[] = "30 mtime=1309046400.123456789\n"
                              "24 path=aclImdb/pax.txt\n"
                              "13 size=1000\n"
                              "17 comment=a=b=c\n";
    header_spec dir = {"aclImdb/", NULL, '5', 0, USTAR, false};
    tar_member(b, &dir, NULL, 0);
    tar_file(b, "aclImdb/README", "the README\n");
    header_spec split = {"review.txt",
                         "aclImdb/a-directory-name-long-enough-that-the-whole-path-"
                         "needs-more-than-one-hundred-bytes/of-the-name-field",
                         '0',
                         6,
                         USTAR,
                         false};
    tar_member(b, &split, "split!", 6);
    header_spec gnu = {"././@LongLink", NULL, 'L', sizeof gnu_long, OLD_GNU, false};
    tar_member(b, &gnu, gnu_long, sizeof gnu_long);
    header_spec after_gnu = {"aclImdb/train/pos/gnu-long-name-that-goes-on-and-on-and-on-well-pa",
                             NULL,
                             '0',
                             5,
                             OLD_GNU,
                             false};
    tar_member(b, &after_gnu, "12345", 5);
    header_spec pax_h = {"PaxHeaders/pax.txt", NULL, 'x', strlen(pax), USTAR, false};
    tar_member(b, &pax_h, pax, strlen(pax));
    char thousand[1000];
    memset(thousand, 'x', sizeof thousand);
    header_spec pax_file = {"pax.txt", NULL, '0', 0 /* the pax size rules */, USTAR, false};
    tar_member(b, &pax_file, thousand, sizeof thousand);
    header_spec link = {"aclImdb/link", NULL, '2', 700 /* ignored: links have no data */,
                        USTAR,          false};
    tar_header(b, &link);
    header_spec big = {"aclImdb/base256.txt", NULL, '0', 3, OLD_GNU, true};
    tar_member(b, &big, "abc", 3);
    header_spec v7 = {"aclImdb/v7.txt", NULL, '\0', 2, V7, false};
    tar_member(b, &v7, "v7", 2);
    header_spec empty = {"aclImdb/empty.txt", NULL, '0', 0, USTAR, false};
    tar_member(b, &empty, NULL, 0);
    tar_file(b, "aclImdb/skipped.txt", "not read: skipped by tar_next");
    tar_end(b);
    buf_zeros(b, 10240 - b->n % 10240); /* the record padding */
}

static void test_tar_valid(void) {
    static char thousand[1001];
    memset(thousand, 'x', 1000);
    const want_member want[] = {
        {"aclImdb/", '5', "", 0},
        {"aclImdb/README", '0', "the README\n", 11},
        {long_name, '0', "split!", 6},
        {"aclImdb/train/pos/gnu-long-name-that-goes-on-and-on-and-on-well-past-the-one-hundred-"
         "bytes-of-the-name-field.txt",
         '0', "12345", 5},
        {"aclImdb/pax.txt", '0', thousand, 1000},
        {"aclImdb/link", '2', "", 0},
        {"aclImdb/base256.txt", '0', "abc", 3},
        {"aclImdb/v7.txt", '0', "v7", 2},
        {"aclImdb/empty.txt", '0', "", 0},
        {"aclImdb/skipped.txt", '0', NULL, 29},
    };
    const int count = (int)(sizeof want / sizeof want[0]);
    buf b = {0};
    valid_archive(&b);
    tar_reader *r;
    CHECK_OK(tar_open_memory(b.p, b.n, "memory.tar", &r));
    check_members(r, want, count, "memory.tar");
    CHECK(strcmp(tar_name(r), "memory.tar") == 0, "the archive's name");
    tar_close(r);
    char path[600];
    in_tmp(path, sizeof path, "valid.tar.gz");
    write_bytes(path, b.p, b.n, true);
    CHECK_OK(tar_open_file(path, &r));
    check_members(r, want, count, path);
    tar_close(r);
    tar_close(NULL);
    free(b.p);

    /* Python's tarfile: POSIX ustar (the long path split into prefix and
     * name), GNU (an 'L' member; gzip'd) and pax (an 'x' member) */
    static const char *const fixtures[] = {"tar_ustar.tar", "tar_gnu.tar.gz", "tar_pax.tar"};
    const want_member python[] = {
        {"aclImdb/", '5', "", 0},
        {"aclImdb/README", '0', "Large Movie Review Dataset v1.0\n", 32},
        {"aclImdb/a-rather-long-directory-name/a-rather-long-directory-name/a-rather-long-"
         "directory-name/a-rather-long-directory-name/and-a-file-name-of-some-length.txt",
         '0', "long name", 9},
        {"aclImdb/empty.txt", '0', "", 0},
        {"aclImdb/train/pos/0_9.txt", '0', "A good movie.<br />Great!", 25},
    };
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", fixture_dir, fixtures[i]);
        CHECK_OK(tar_open_file(path, &r));
        if (r) check_members(r, python, 5, path);
        tar_close(r);
    }
}

/* Open `bytes` (gzip'd first when gz) and read it to the end: the status. */
static sy_status read_through(const buf *b, bool gz, const char *name) {
    tar_reader *r;
    char path[600];
    in_tmp(path, sizeof path, name);
    write_bytes(path, b->p, b->n, gz);
    sy_status st = tar_open_file(path, &r);
    const tar_entry *e;
    while (!st && !(st = tar_next(r, &e)) && e) {
        uint8_t *data;
        size_t n;
        st = tar_read(r, &data, &n);
    }
    tar_close(r);
    return st;
}

static void test_tar_damaged(void) {
    buf good = {0};
    tar_file(&good, "aclImdb/a.txt", "first member");
    tar_file(&good, "aclImdb/b.txt", "second member, a little longer");
    tar_end(&good);
    CHECK_OK(read_through(&good, false, "good.tar"));
    CHECK_OK(read_through(&good, true, "good.tar.gz"));

    /* cut inside the second member's data, plain and gzip'd */
    buf cut = {0};
    buf_add(&cut, good.p, 1024 + 512 + 10);
    CHECK_ERR(read_through(&cut, false, "cut.tar"), SY_ERR_CORRUPT, "cut.tar", "at byte 1148",
              "claims 30 bytes of data, more than the 10", "truncated");
    CHECK_ERR(read_through(&cut, true, "cut.tar.gz"), SY_ERR_CORRUPT, "cut.tar.gz", "truncated",
              "ends at byte 1546 of the decompressed data, inside the member 'aclImdb/b.txt' "
              "(header at byte 1024, 30 bytes of data)");
    /* cut inside a header */
    cut.n = 1024 + 100;
    CHECK_ERR(read_through(&cut, false, "cut-header.tar"), SY_ERR_CORRUPT,
              "damaged tar archive at byte 1024", "truncated header", "100 of its 512 bytes");
    /* cut between members: no end-of-archive marker */
    cut.n = 1024;
    CHECK_ERR(read_through(&cut, false, "no-end.tar"), SY_ERR_CORRUPT, "ends at byte 1024",
              "end-of-archive marker");
    /* an empty file is not an archive either */
    cut.n = 0;
    CHECK_ERR(read_through(&cut, false, "empty.tar"), SY_ERR_CORRUPT, "ends at byte 0");

    buf bad = {0};
    /* a bad checksum in the second header */
    buf_add(&bad, good.p, good.n);
    bad.p[1024 + 5] ^= 0x20;
    CHECK_ERR(read_through(&bad, false, "checksum.tar"), SY_ERR_CORRUPT,
              "damaged tar archive at byte 1024", "checksum does not match");
    CHECK_ERR(read_through(&bad, true, "checksum.tar.gz"), SY_ERR_CORRUPT,
              "at byte 1024 of the decompressed data", "checksum");
    /* a size that runs past the end: 60,000 bytes in a 2 KB archive */
    bad.n = 0;
    header_spec huge = {"aclImdb/huge.txt", NULL, '0', 60000, USTAR, false};
    tar_member(&bad, &huge, "tiny", 4);
    tar_end(&bad);
    CHECK_ERR(read_through(&bad, false, "huge.tar"), SY_ERR_CORRUPT, "at byte 124",
              "size field claims 60000 bytes", "the 1536 the rest of the archive can hold");
    /* gzip'd, only deflate's limit is known: the member is read until the data ends */
    CHECK_ERR(read_through(&bad, true, "huge.tar.gz"), SY_ERR_CORRUPT, "truncated",
              "ends at byte 2048 of the decompressed data, inside the member 'aclImdb/huge.txt'",
              "60000 bytes");
    /* a size that is not octal (checksum fixed up, so the size is what is wrong) */
    bad.n = 0;
    tar_file(&bad, "aclImdb/nine.txt", "x");
    memcpy(bad.p + 124, "00000000009", 11);
    memset(bad.p + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += bad.p[i];
    snprintf((char *)bad.p + 148, 8, "%06o", sum);
    tar_end(&bad);
    CHECK_ERR(read_through(&bad, false, "octal.tar"), SY_ERR_CORRUPT, "at byte 124",
              "not an octal number");
    /* a malformed pax record */
    bad.n = 0;
    header_spec pax = {"PaxHeaders/x", NULL, 'x', 12, USTAR, false};
    tar_member(&bad, &pax, "99 path=x\nzz", 12);
    tar_file(&bad, "aclImdb/x", "x");
    tar_end(&bad);
    CHECK_ERR(read_through(&bad, false, "pax.tar"), SY_ERR_CORRUPT, "malformed pax record");
    /* a GNU long name of 2 MB */
    bad.n = 0;
    header_spec gnu = {"././@LongLink", NULL, 'L', 2 << 20, OLD_GNU, false};
    tar_header(&bad, &gnu);
    buf_zeros(&bad, 2 << 20);
    tar_file(&bad, "aclImdb/x", "x");
    tar_end(&bad);
    CHECK_ERR(read_through(&bad, false, "long.tar"), SY_ERR_CORRUPT,
              "a GNU long name of 2097152 bytes");
    /* damaged compressed data */
    char path[600];
    in_tmp(path, sizeof path, "good.tar.gz");
    uint8_t *gz;
    size_t n;
    CHECK_OK(io_read_file(path, &gz, &n));
    if (gz) {
        gz[n / 2] ^= 0xff;
        gz[n / 2 + 1] ^= 0x55;
        tar_reader *r;
        CHECK_OK(tar_open_memory(gz, n, "flipped.tar.gz", &r));
        const tar_entry *e;
        sy_status st;
        while (!(st = tar_next(r, &e)) && e) {
        }
        CHECK(st == SY_ERR_CORRUPT && strstr(sy_last_error(), "gzip"), "flipped bytes: %s",
              sy_last_error());
        tar_close(r);
        /* and trailing garbage after the gzip stream */
        gz[n / 2] ^= 0xff;
        gz[n / 2 + 1] ^= 0x55;
        uint8_t *longer = malloc(n + 3);
        memcpy(longer, gz, n);
        memcpy(longer + n, "xyz", 3);
        CHECK_OK(tar_open_memory(longer, n + 3, "garbage.tar.gz", &r));
        while (!(st = tar_next(r, &e)) && e) {
        }
        CHECK(st == SY_ERR_CORRUPT && strstr(sy_last_error(), "trailing garbage"),
              "trailing garbage: %s", sy_last_error());
        tar_close(r);
        free(longer);
    }
    sy_free(gz);
    tar_reader *missing = NULL;
    CHECK_ERR(tar_open_file("no/such/dir/x.tar", &missing), SY_ERR_IO, "no/such/dir/x.tar");
    CHECK(missing == NULL, "no reader on failure");
    free(good.p);
    free(cut.p);
    free(bad.p);
}

/* ---- the word index ------------------------------------------------------------------ */

static sy_status parse_words(const char *json, sy_word_index **wi) {
    return word_index_parse((const uint8_t *)json, strlen(json), "words.json", wi);
}

static void test_word_index(void) {
    sy_word_index *wi = NULL;
    CHECK_OK(parse_words("{\"the\": 2, \"caf\\u00e9\": 1, \"it's\": 3, \"\": 4}", &wi));
    CHECK(sy_word_index_count(wi) == 4, "4 words");
    CHECK(sy_word_index_get(wi, "the") == 2 && sy_word_index_get(wi, "caf\xc3\xa9") == 1 &&
              sy_word_index_get(wi, "it's") == 3 && sy_word_index_get(wi, "") == 4,
          "lookups");
    CHECK(sy_word_index_get(wi, "cafe") == 0 && sy_word_index_get(wi, "th") == 0 &&
              sy_word_index_get(wi, "thee") == 0 && sy_word_index_get(wi, NULL) == 0,
          "absent words: 0");
    CHECK(word_index_find(wi, "the quick", 3) == 2, "a word inside a longer text");
    CHECK(strcmp(sy_word_index_word(wi, 1), "caf\xc3\xa9") == 0 &&
              strcmp(sy_word_index_word(wi, 3), "it's") == 0,
          "rank -> word");
    CHECK(!sy_word_index_word(wi, 0) && !sy_word_index_word(wi, 5) && !sy_word_index_word(NULL, 1),
          "no such rank: NULL");
    sy_word_index_free(wi);
    sy_word_index_free(NULL);
    CHECK(sy_word_index_count(NULL) == 0, "NULL: 0 words");

    /* many words: the table grows past its first size, and every word is found */
    buf json = {0};
    buf_add(&json, "{", 1);
    for (int i = 1; i <= 5000; i++) {
        char item[32];
        int len = snprintf(item, sizeof item, "%s\"w%d\": %d", i > 1 ? ", " : "", i * 7, i);
        buf_add(&json, item, (size_t)len);
    }
    buf_add(&json, "}", 2);
    CHECK_OK(parse_words((const char *)json.p, &wi));
    bool all = wi != NULL;
    for (int i = 1; i <= 5000 && wi; i++) {
        char w[16];
        snprintf(w, sizeof w, "w%d", i * 7);
        all = all && sy_word_index_get(wi, w) == i && strcmp(sy_word_index_word(wi, i), w) == 0;
        snprintf(w, sizeof w, "w%d", i * 7 + 1);
        all = all && sy_word_index_get(wi, w) == 0;
    }
    CHECK(all, "5,000 words, each found, each with its rank");
    sy_word_index_free(wi);
    free(json.p);

    /* damage: the line and column of bad JSON, the word of a bad rank */
    CHECK_ERR(parse_words("{\"the\": 1,\n \"a\": 2,\n \"b\" 3}", &wi), SY_ERR_CORRUPT, "words.json",
              "line 3, column 6", "':' expected");
    CHECK(wi == NULL, "no index on failure");
    CHECK_ERR(parse_words("", &wi), SY_ERR_CORRUPT, "line 1, column 0");
    CHECK_ERR(parse_words("{\"the\": 1, \"the\": 2}", &wi), SY_ERR_CORRUPT, "line 1",
              "duplicate object key");
    CHECK_ERR(parse_words("{\"the\": 1} x", &wi), SY_ERR_CORRUPT, "end of file expected");
    CHECK_ERR(parse_words("[[\"the\", 1]]", &wi), SY_ERR_CORRUPT, "the JSON is an array",
              "expected an object");
    CHECK_ERR(parse_words("{\"the\": 1, \"a\": 1}", &wi), SY_ERR_CORRUPT,
              "\"the\" and \"a\" both have rank 1");
    CHECK_ERR(parse_words("{\"the\": 1, \"a\": 3}", &wi), SY_ERR_CORRUPT,
              "\"a\" has rank 3, expected an integer rank from 1 to 2");
    CHECK_ERR(parse_words("{\"the\": 0}", &wi), SY_ERR_CORRUPT, "rank 0");
    CHECK_ERR(parse_words("{\"the\": 1.0}", &wi), SY_ERR_CORRUPT, "\"the\" has a real number");
    CHECK_ERR(parse_words("{\"\\u00e9\\n\": \"1\"}", &wi), SY_ERR_CORRUPT,
              "\"\\xc3\\xa9\\x0a\" has a string");
    char path[600];
    in_tmp(path, sizeof path, "damaged.json");
    write_bytes(path, "{\"the\": 1,\n\"a\": 2,,\n}", 21, false);
    CHECK_ERR(word_index_read(path, &wi), SY_ERR_CORRUPT, path, "line 2, column 8");
    in_tmp(path, sizeof path, "missing.json");
    CHECK_ERR(word_index_read(path, &wi), SY_ERR_IO, path);
}

/* ---- load_data on a synthetic dataset ------------------------------------------------ */

/* The reviews of tools/imdb_test_values.py, in an archive order that is not
 * the fixed order (load_data must not depend on it). */
static const struct {
    const char *name, *text;
} reviews[] = {
    {"aclImdb/train/pos/0_9.txt", "The movie was GOOD.<br /><br />A good, good plot!"},
    {"aclImdb/test/neg/1_1.txt", "zzz yyy"},
    {"aclImdb/train/pos/1_10.txt", "Great caf\xc3\xa9; great plot -- it's great."},
    {"aclImdb/train/pos/12_8.txt", "good"},
    {"aclImdb/train/neg/3_1.txt", "Bad movie. The plot was bad, bad, BAD (not good)."},
    {"aclImdb/test/pos/0_7.txt", "A great movie, not bad.<br />"},
    {"aclImdb/train/neg/2_2.txt", "It's not a good movie...unknownword"},
    {"aclImdb/train/neg/10_4.txt", "the the the the the the the the the the the the"},
    {"aclImdb/test/pos/5_9.txt", "Good good good; testonlyword."},
    {"aclImdb/test/neg/0_3.txt", "The plot? Bad. The caf\xc3\xa9? Bad."},
};

static const char synthetic_words[] =
    "{\"the\": 1, \"movie\": 2, \"a\": 3, \"br\": 4, \"good\": 5, \"bad\": 6, \"it's\": 7, "
    "\"was\": 8, \"not\": 9, \"caf\\u00e9\": 10, \"plot\": 11, \"great\": 12}";

static char synthetic_tar[600], synthetic_json[600];

static void write_synthetic(void) {
    buf b = {0};
    header_spec dir = {"aclImdb/", NULL, '5', 0, USTAR, false};
    tar_member(&b, &dir, NULL, 0);
    tar_file(&b, "aclImdb/README", "Large Movie Review Dataset v1.0\n");
    tar_file(&b, "aclImdb/train/urls_pos.txt",
             "http://www.imdb.com/title/tt0453418/usercomments\n");
    tar_file(&b, "aclImdb/train/unsup/0_0.txt", "not labelled, so not read");
    tar_file(&b, "aclImdb/train/pos/notes.txt", "not a review's name");
    for (size_t i = 0; i < sizeof reviews / sizeof reviews[0]; i++)
        tar_file(&b, reviews[i].name, reviews[i].text);
    tar_end(&b);
    in_tmp(synthetic_tar, sizeof synthetic_tar, "reviews.tar.gz");
    write_bytes(synthetic_tar, b.p, b.n, true);
    free(b.p);
    in_tmp(synthetic_json, sizeof synthetic_json, "words.json");
    write_bytes(synthetic_json, synthetic_words, strlen(synthetic_words), false);
}

typedef struct row_ref {
    int label;
    int64_t len;
    const int32_t *values;
} row_ref;

/* (label, then the sequence, shorter first when one starts the other): how
 * Python sorts (label, list) pairs */
static int by_row(const void *a, const void *b) {
    const row_ref *x = a, *y = b;
    if (x->label != y->label) return x->label - y->label;
    for (int64_t i = 0; i < x->len && i < y->len; i++)
        if (x->values[i] != y->values[i]) return x->values[i] < y->values[i] ? -1 : 1;
    return (x->len > y->len) - (x->len < y->len);
}

static void check_split(const sy_sequences *x, const sy_tensor *y, const split_rows *want,
                        const char *what) {
    int64_t n = sy_sequences_count(x);
    CHECK(n == want->count && sy_tensor_count(y) == n && sy_tensor_dtype(y) == SY_U8,
          "%s: %lld reviews and %lld labels, expected %d", what, (long long)n,
          (long long)sy_tensor_count(y), want->count);
    if (n != want->count || sy_tensor_count(y) != n) return;
    row_ref rows[6];
    for (int64_t i = 0; i < n; i++)
        rows[i] = (row_ref){((const uint8_t *)sy_tensor_data(y))[i], sy_sequences_length(x, i),
                            sy_sequences_data(x, i)};
    qsort(rows, (size_t)n, sizeof *rows, by_row);
    for (int i = 0; i < n; i++) {
        row_ref w = {want->rows[i].label, want->rows[i].len, want->rows[i].values};
        CHECK(by_row(&rows[i], &w) == 0,
              "%s: row %d (sorted) differs from Keras's: label %d, "
              "length %lld (expected label %d, length %d)",
              what, i, rows[i].label, (long long)rows[i].len, w.label, want->rows[i].len);
    }
}

/* Whether two loads gave the same reviews in the same order. */
static bool same_order(const sy_imdb_split *a, const sy_imdb_split *b) {
    for (int64_t i = 0; i < sy_sequences_count(a->x_train); i++) {
        int64_t len = sy_sequences_length(a->x_train, i);
        if (len != sy_sequences_length(b->x_train, i) ||
            memcmp(sy_sequences_data(a->x_train, i), sy_sequences_data(b->x_train, i),
                   (size_t)len * sizeof(int32_t)) != 0)
            return false;
    }
    return true;
}

static void test_load_synthetic(void) {
    write_synthetic();
    for (size_t c = 0; c < sizeof load_cases / sizeof load_cases[0]; c++) {
        const load_case *l = &load_cases[c];
        const sy_imdb_options *o = &l->options;
        char what[160];
        snprintf(what, sizeof what,
                 "num_words %d skip_top %d maxlen %d start_char %d oov_char %d index_from %d",
                 o->num_words, o->skip_top, o->maxlen, o->start_char, o->oov_char, o->index_from);
        sy_imdb_split d;
        CHECK_OK(imdb_load_files(synthetic_tar, synthetic_json, o, &d));
        char part[200];
        snprintf(part, sizeof part, "%s: train", what);
        check_split(d.x_train, d.y_train, &l->train, part);
        snprintf(part, sizeof part, "%s: test", what);
        check_split(d.x_test, d.y_test, &l->test, part);
        sy_imdb_split_free(&d);
    }
    /* the seed decides the order, and only the order */
    sy_imdb_options o = sy_imdb_options_default();
    sy_imdb_split a, b;
    CHECK_OK(imdb_load_files(synthetic_tar, synthetic_json, &o, &a));
    CHECK_OK(imdb_load_files(synthetic_tar, synthetic_json, NULL, &b));
    CHECK(a.x_train && b.x_train && same_order(&a, &b), "the same seed, the same order");
    sy_imdb_split_free(&b);
    o.seed = 114;
    CHECK_OK(imdb_load_files(synthetic_tar, synthetic_json, &o, &b));
    CHECK(a.x_train && b.x_train && !same_order(&a, &b), "another seed, another order");
    check_split(b.x_train, b.y_train, &load_cases[0].train, "seed 114");
    sy_imdb_split_free(&a);
    sy_imdb_split_free(&b);
    CHECK(!a.x_train && !a.y_test, "freed members are NULL");
    sy_imdb_split_free(NULL);

    /* Keras's ValueError, and options out of range */
    o = sy_imdb_options_default();
    o.maxlen = 2;
    CHECK_ERR(imdb_load_files(synthetic_tar, synthetic_json, &o, &a), SY_ERR_INVALID_ARGUMENT,
              "maxlen=2", "no sequence was kept in the training split");
    CHECK(!a.x_train && !a.x_test && !a.y_train && !a.y_test, "all NULL on failure");
    o = sy_imdb_options_default();
    o.num_words = -5;
    CHECK_ERR(imdb_load_files(synthetic_tar, synthetic_json, &o, &a), SY_ERR_INVALID_ARGUMENT,
              "num_words is -5");
    o = sy_imdb_options_default();
    o.oov_char = -2;
    CHECK_ERR(imdb_load_files(synthetic_tar, synthetic_json, &o, &a), SY_ERR_INVALID_ARGUMENT,
              "oov_char is -2", "-1 to remove");
    o = sy_imdb_options_default();
    o.index_from = INT32_MAX - 5;
    CHECK_ERR(imdb_load_files(synthetic_tar, synthetic_json, &o, &a), SY_ERR_INVALID_ARGUMENT,
              "index_from", "from 0 to 2147483635");

    /* archives that are not the dataset */
    buf t = {0};
    char path[600];
    tar_file(&t, "aclImdb/train/pos/1_9.txt", "good");
    tar_file(&t, "aclImdb/test/neg/1_2.txt", "bad");
    tar_file(&t, "aclImdb/test/neg/01_2.txt", "the same review id");
    tar_end(&t);
    in_tmp(path, sizeof path, "twice.tar");
    write_bytes(path, t.p, t.n, false);
    CHECK_ERR(imdb_load_files(path, synthetic_json, NULL, &a), SY_ERR_CORRUPT, path,
              "two reviews with id 1 in aclImdb/test/neg/", "bytes 1024 and 2048");
    t.n = 0;
    tar_file(&t, "aclImdb/train/pos/1_9.txt", "good");
    tar_end(&t);
    in_tmp(path, sizeof path, "no-test.tar");
    write_bytes(path, t.p, t.n, false);
    CHECK_ERR(imdb_load_files(path, synthetic_json, NULL, &a), SY_ERR_CORRUPT, path,
              "no test reviews", "aclImdb/test/pos/<id>_<rating>.txt");
    free(t.p);
    CHECK_ERR(imdb_load_files(synthetic_tar, path, NULL, &a), SY_ERR_CORRUPT, path,
              "invalid JSON at line 1");
    in_tmp(path, sizeof path, "absent.tar.gz");
    CHECK_ERR(imdb_load_files(path, synthetic_json, NULL, &a), SY_ERR_IO, path);
}

/* The labelled archive has no public URL: the error says where it can come
 * from (no network is touched: there is nothing to download from). */
static void test_not_found(void) {
    char empty[600], cache[600], path[PATH_MAX];
    in_tmp(empty, sizeof empty, "empty-datasets");
    in_tmp(cache, sizeof cache, "cache");
    mkdir(empty, 0755);
    setenv("SYSTOLIC_DATASETS", empty, 1);
    setenv("SYSTOLIC_CACHE_DIR", cache, 1);
    unsetenv("SYSTOLIC_DATASETS_MIRROR");
    CHECK_ERR(sy_dataset_file("imdb", "aclImdb_v1_labeled.tar.gz", path, sizeof path), SY_ERR_IO,
              "imdb/aclImdb_v1_labeled.tar.gz: not found", "empty-datasets/imdb/", "no public URL",
              "not published for download", "$SYSTOLIC_DATASETS_MIRROR",
              "fc132c2a23a4d23eec474b518907765dbc9c59e648c1e57ac8010670238ed697");
    CHECK_ERR(sy_dataset_file("imdb", "imdb.npz", path, sizeof path), SY_ERR_NOT_FOUND,
              "imdb_word_index.json, aclImdb_v1_labeled.tar.gz");
}

/* ---- the real dataset ---------------------------------------------------------------- */

/* A review's words: how many, and how many the word index has. */
typedef struct coverage {
    const sy_word_index *wi;
    int64_t found, all;
} coverage;

static void count_word(void *ctx, const char *word, size_t len) {
    coverage *c = ctx;
    c->found += word_index_find(c->wi, word, len) != 0;
    c->all++;
}

/* 0 for a training review's path, 1 for a test review's, else -1. */
static int review_split(const char *name) {
    static const char *const dirs[] = {"aclImdb/train/neg/", "aclImdb/train/pos/",
                                       "aclImdb/test/neg/", "aclImdb/test/pos/"};
    for (int i = 0; i < 4; i++)
        if (strncmp(name, dirs[i], strlen(dirs[i])) == 0) return i / 2;
    return -1;
}

typedef struct split_facts {
    int64_t reviews, positive, values, sum, ones, twos, longest;
} split_facts;

static void check_facts(const sy_sequences *x, const sy_tensor *y, const split_facts *want,
                        const char *what) {
    split_facts got = {sy_sequences_count(x), 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < got.reviews; i++) {
        got.positive += ((const uint8_t *)sy_tensor_data(y))[i];
        int64_t len = sy_sequences_length(x, i);
        const int32_t *v = sy_sequences_data(x, i);
        got.values += len;
        got.longest = sy_max64(got.longest, len);
        for (int64_t j = 0; j < len; j++) {
            got.sum += v[j];
            got.ones += v[j] == 1;
            got.twos += v[j] == 2;
        }
    }
    CHECK(memcmp(&got, want, sizeof got) == 0,
          "%s: %lld reviews (%lld positive), %lld values summing to %lld, %lld ones, %lld twos, "
          "longest %lld; expected %lld (%lld), %lld, %lld, %lld, %lld, %lld",
          what, (long long)got.reviews, (long long)got.positive, (long long)got.values,
          (long long)got.sum, (long long)got.ones, (long long)got.twos, (long long)got.longest,
          (long long)want->reviews, (long long)want->positive, (long long)want->values,
          (long long)want->sum, (long long)want->ones, (long long)want->twos,
          (long long)want->longest);
}

/* Under ThreadSanitizer, which runs this single-threaded work 11 times
 * slower (a load takes 20 s), only the first load runs. */
#if defined(__SANITIZE_THREAD__)
static const bool under_tsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
static const bool under_tsan = true;
#else
static const bool under_tsan = false;
#endif
#else
static const bool under_tsan = false;
#endif

/* Options on the real data, and how many of the reviews' words the index has. */
static void test_real_more(const sy_word_index *wi) {
    static const split_facts options[2] = {{22882, 11351, 4500022, 3182491621ll, 0, 1580839, 499},
                                           {23065, 11473, 4446410, 3063388712ll, 0, 1555156, 499}};
    sy_imdb_split d;
    sy_imdb_options o = sy_imdb_options_default();
    o.num_words = 10000;
    o.skip_top = 20;
    o.maxlen = 500;
    CHECK_OK(sy_imdb_load_data(&o, &d));
    if (d.x_train) {
        check_facts(d.x_train, d.y_train, &options[0], "num_words 10000, skip_top 20, maxlen 500");
        check_facts(d.x_test, d.y_test, &options[1], "the same, x_test");
    }
    sy_imdb_split_free(&d);

    /* the words the index has: all of the training reviews' (it was made
     * from them), 98.9% of the test reviews' */
    char archive[PATH_MAX];
    CHECK_OK(sy_dataset_file("imdb", "aclImdb_v1_labeled.tar.gz", archive, sizeof archive));
    tar_reader *r = NULL;
    CHECK_OK(tar_open_file(archive, &r));
    coverage seen[2] = {{wi, 0, 0}, {wi, 0, 0}}; /* train, test */
    const tar_entry *e;
    while (r && wi && !tar_next(r, &e) && e) {
        int split = review_split(e->name);
        uint8_t *text;
        size_t n;
        if (split < 0) continue;
        if (tar_read(r, &text, &n)) break;
        imdb_tokenize((char *)text, n, count_word, &seen[split]);
    }
    tar_close(r);
    CHECK(seen[0].found == 5942841 && seen[0].all == 5942841, "train: %lld of %lld words found",
          (long long)seen[0].found, (long long)seen[0].all);
    CHECK(seen[1].found == 5745105 && seen[1].all == 5808817, "test: %lld of %lld words found",
          (long long)seen[1].found, (long long)seen[1].all);
}

static void test_real(const char *datasets) {
    setenv("SYSTOLIC_DATASETS", datasets, 1);
    /* verified with Python: tools/imdb_test_values.py rebuilds the sequences
     * and runs Keras's load_data on them */
    static const split_facts defaults[2] = {{25000, 12500, 5967841, 13444425352ll, 25000, 1, 2494},
                                            {25000, 12500, 5770105, 11575689090ll, 25000, 0, 2315}};
    sy_imdb_split d;
    CHECK_OK(sy_imdb_load_data(NULL, &d));
    if (d.x_train) {
        check_facts(d.x_train, d.y_train, &defaults[0], "x_train");
        check_facts(d.x_test, d.y_test, &defaults[1], "x_test");
        /* Keras's x_train[0] (as tutorials print it): train/pos/576_10.txt */
        static const int32_t head[] = {1, 14, 22, 16, 43, 530, 973, 1622, 1385, 65, 458, 4468},
                             tail[] = {16, 4472, 113, 103, 32, 15, 16, 5345, 19, 178, 32};
        int found = 0;
        for (int64_t i = 0; i < sy_sequences_count(d.x_train); i++) {
            const int32_t *v = sy_sequences_data(d.x_train, i);
            int64_t len = sy_sequences_length(d.x_train, i);
            if (len < 12 || memcmp(v, head, sizeof head) != 0) continue;
            found++;
            CHECK(len == 218 && memcmp(v + 207, tail, sizeof tail) == 0 &&
                      ((const uint8_t *)sy_tensor_data(d.y_train))[i] == 1,
                  "Keras's first review: length %lld", (long long)len);
        }
        CHECK(found == 1, "Keras's first training review found %d times", found);
    }
    sy_imdb_split_free(&d);
    sy_word_index *wi = NULL;
    CHECK_OK(sy_imdb_get_word_index(&wi));
    CHECK(sy_word_index_count(wi) == 88584, "88,584 words, not %lld",
          (long long)sy_word_index_count(wi));
    CHECK(sy_word_index_get(wi, "the") == 1 && sy_word_index_get(wi, "br") == 7 &&
              sy_word_index_get(wi, "movie") == 17 && sy_word_index_get(wi, "it's") == 42 &&
              sy_word_index_get(wi, "na\xc3\xafve") == 13006 &&
              sy_word_index_get(wi, "\xc3\x81ngela") == 55684,
          "ranks of the, br, movie, it's, naive, Angela");
    CHECK(wi && strcmp(sy_word_index_word(wi, 1), "the") == 0 &&
              strcmp(sy_word_index_word(wi, 17), "movie") == 0,
          "rank -> word");

    if (!under_tsan)
        test_real_more(wi);
    else
        fprintf(stderr, "test_imdb: under ThreadSanitizer: one load of the real IMDB only\n");
    sy_word_index_free(wi);

    /* a mirror serves the archive: here a file:// URL, into an empty cache */
    char cache[600], mirror[PATH_MAX + 16], path[PATH_MAX], absolute[PATH_MAX];
    in_tmp(cache, sizeof cache, "mirror-cache");
    snprintf(mirror, sizeof mirror, "file://%s",
             realpath(datasets, absolute) ? absolute : datasets);
    unsetenv("SYSTOLIC_DATASETS");
    setenv("SYSTOLIC_CACHE_DIR", cache, 1);
    setenv("SYSTOLIC_DATASETS_MIRROR", mirror, 1);
    CHECK_OK(sy_dataset_file("imdb", "aclImdb_v1_labeled.tar.gz", path, sizeof path));
    CHECK(strstr(path, "mirror-cache/datasets/imdb/aclImdb_v1_labeled.tar.gz") != NULL,
          "fetched into the cache: %s", path);
    unsetenv("SYSTOLIC_DATASETS_MIRROR");
    setenv("SYSTOLIC_DATASETS", datasets, 1);
}

int main(void) {
    if (!files_setup("test-imdb", __FILE__)) return 1;

    test_pad_sequences();
    test_tokenizer();
    test_tar_valid();
    test_tar_damaged();
    test_word_index();
    test_load_synthetic();
    test_not_found();
    if (real_datasets[0])
        test_real(real_datasets);
    else
        fprintf(stderr, "test_imdb: SYSTOLIC_DATASETS is not set: skipping the real IMDB\n");
    files_cleanup();
    return check_report("test_imdb");
}
