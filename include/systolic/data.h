/*
 * systolic/data.h - datasets: the dataset zoo (Keras's load_data()) and the
 * file readers under it.
 *
 *   sy_data_split d;
 *   if (sy_fashion_mnist_load_data(&d)) fprintf(stderr, "%s\n", sy_last_error());
 *   // d.x_train: uint8 (60000, 28, 28); d.y_train: uint8 (60000,)
 *   sy_data_split_free(&d);
 *
 * Where the files come from, in order:
 *   1. $SYSTOLIC_DATASETS/<dataset>/<file> (the directory may also be
 *      spelled with '-' for '_': fashion-mnist);
 *   2. the cache, <cache>/datasets/<dataset>/<file>, where <cache> is
 *      $SYSTOLIC_CACHE_DIR, else $XDG_CACHE_HOME/systolic, else
 *      ~/.cache/systolic;
 *   3. a download into the cache from the publisher's URL (or, when
 *      $SYSTOLIC_DATASETS_MIRROR is set, from <mirror>/<dataset>/<file>),
 *      written to a temporary file, checked against the published SHA-256,
 *      and renamed into place only when it matches.
 * Every file found in 1 or 2 is checked against the same SHA-256 before it
 * is parsed. A wrong checksum, a truncated or corrupt file, or a missing file
 * with no network gives an error that names the file, what was expected and
 * what to do.
 */
#ifndef SYSTOLIC_DATA_H
#define SYSTOLIC_DATA_H

#include "systolic/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (x_train, y_train), (x_test, y_test), as Keras's load_data() returns them. */
typedef struct sy_data_split {
    sy_tensor *x_train, *y_train, *x_test, *y_test;
} sy_data_split;

/* Free the four tensors and set them to NULL; NULL members are skipped. */
void sy_data_split_free(sy_data_split *split);

/* Fashion-MNIST (Zalando): x uint8 (N, 28, 28) with 0..255, y uint8 (N,)
 * with classes 0..9; 60,000 train and 10,000 test. On failure every member
 * of *out is NULL. */
sy_status sy_fashion_mnist_load_data(sy_data_split *out);
/* MNIST (LeCun, Cortes, Burges): the same layout as Fashion-MNIST. */
sy_status sy_mnist_load_data(sy_data_split *out);

/* ---- IMDB reviews (Keras's imdb) --------------------------------------------- */

/* Sequences of different lengths (a ragged array of int32): reviews as word
 * indices. Count 0 for NULL; length 0 and data NULL for an index outside
 * [0, count). The data of sequence i is sy_sequences_length(s, i) int32
 * values owned by s. sy_sequences_free(NULL) does nothing. */
typedef struct sy_sequences sy_sequences;
int64_t sy_sequences_count(const sy_sequences *s);
int64_t sy_sequences_length(const sy_sequences *s, int64_t index);
const int32_t *sy_sequences_data(const sy_sequences *s, int64_t index);
void sy_sequences_free(sy_sequences *s);

/* Keras's imdb.load_data() arguments and defaults (Keras's None is 0 or -1
 * here). As in Keras, an index counts as a word only when
 * skip_top <= index < num_words (start_char included); other indices
 * become oov_char. */
typedef struct sy_imdb_options {
    int32_t num_words;  /* keep the words with index < num_words, rarer ones become oov_char:
                           0 (all: Keras then takes the largest index present, so that one
                           word becomes oov_char; kept for the same results) */
    int32_t skip_top;   /* indices below skip_top become oov_char too: 0 */
    int32_t maxlen;     /* drop reviews of maxlen or more indices (start_char included;
                           Keras keeps length < maxlen): 0 (keep all) */
    uint64_t seed;      /* shuffling: 113 */
    int32_t start_char; /* marks the start of a review: 1; -1 for none */
    int32_t oov_char;   /* replaces dropped words: 2; -1 removes them instead */
    int32_t index_from; /* word indices are their frequency rank + index_from: 3 */
} sy_imdb_options;

sy_imdb_options sy_imdb_options_default(void);

typedef struct sy_imdb_split {
    sy_sequences *x_train, *x_test; /* 25,000 reviews each (fewer with maxlen) */
    sy_tensor *y_train, *y_test;    /* uint8 (N,): 1 positive, 0 negative */
} sy_imdb_split;

/* Free the four members and set them to NULL; NULL members are skipped. */
void sy_imdb_split_free(sy_imdb_split *split);

/* The IMDB sentiment dataset as Keras's imdb.load_data() gives it, rebuilt
 * from the labelled Stanford review texts (aclImdb_v1_labeled.tar.gz:
 * aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt) and Keras's own
 * imdb_word_index.json, as Keras made its imdb.npz: each review is split
 * into words as Keras's text_to_word_sequence does (ASCII letters
 * lower-cased; !"#$%&()*+,-./:;<=>?@[\]^_`{|}~, tab and newline are
 * separators, so the HTML line break "<br />" becomes the word "br", as in
 * Keras's data; UTF-8 bytes stay inside words), each word mapped to its
 * rank in the word index, and words the index lacks (seen only in test
 * reviews) dropped. The sequences are Keras's; their order is not: each
 * split is read in a fixed order, then shuffled with `seed` by systolic's
 * own RNG (docs/design/datasets.md compares the result with imdb.npz).
 * options NULL: the defaults. Files are found as for the other datasets;
 * the review archive has no public URL (see docs/design/datasets.md).
 * SY_ERR_INVALID_ARGUMENT for a negative option, or a maxlen that keeps no
 * review of a split (Keras's ValueError); SY_ERR_IO, SY_ERR_CORRUPT as
 * sy_dataset_file, or for a damaged archive or word index (with the byte
 * offset, or the JSON line and column). On failure every member of *out is
 * NULL. */
sy_status sy_imdb_load_data(const sy_imdb_options *options, sy_imdb_split *out);

/* Keras's imdb.get_word_index(): word -> frequency rank (1 = "the"), the
 * 88,584 words of the training reviews. Found and verified as the dataset
 * files are; SY_ERR_CORRUPT for bad JSON (with its line and column) or
 * ranks that are not 1..count, each once. sy_word_index_free(NULL) does
 * nothing. */
typedef struct sy_word_index sy_word_index;
sy_status sy_imdb_get_word_index(sy_word_index **out);
void sy_word_index_free(sy_word_index *wi);
int64_t sy_word_index_count(const sy_word_index *wi);
/* The word's rank, or 0 if the word is not in the index. */
int32_t sy_word_index_get(const sy_word_index *wi, const char *word);
/* The word of rank `rank` (1-based), owned by wi, or NULL. */
const char *sy_word_index_word(const sy_word_index *wi, int32_t rank);

/* Keras's pad_sequences: every sequence cut or padded to maxlen (0: the
 * longest), padding and truncating at the start ("pre", the default) or
 * the end ("post"), padded with `value`. Returns a new int32 tensor
 * (count, maxlen); options NULL: the defaults. SY_ERR_INVALID_ARGUMENT for
 * a negative maxlen or a padding or truncating other than "pre" and
 * "post". */
typedef struct sy_pad_options {
    int64_t maxlen;         /* 0 */
    const char *padding;    /* "pre" or "post"; NULL: "pre" */
    const char *truncating; /* "pre" or "post"; NULL: "pre" */
    int32_t value;          /* 0 */
} sy_pad_options;

sy_pad_options sy_pad_options_default(void);
sy_status sy_pad_sequences(const sy_sequences *s, const sy_pad_options *options, sy_tensor **out);

/* The path of a dataset file, found or fetched as described above, with its
 * checksum verified: `dataset` is "fashion_mnist", "mnist", "imdb"; `file`
 * a file name of that dataset ("train-images-idx3-ubyte.gz"). Writes at most
 * `size` bytes into `path`. SY_ERR_NOT_FOUND for a file the zoo does not
 * know; SY_ERR_IO when it can be neither found nor downloaded;
 * SY_ERR_CORRUPT when its checksum is wrong. */
sy_status sy_dataset_file(const char *dataset, const char *file, char *path, size_t size);

/* Read an IDX file (LeCun's format: magic, dims as big-endian int32, then
 * the elements big-endian), gzip-compressed or not (detected from the
 * first bytes). unsigned byte -> SY_U8; signed byte, short and int ->
 * SY_I32; float -> SY_F32; double -> SY_F64. The tensor's shape is the
 * file's dims. SY_ERR_CORRUPT names the file and the byte offset for a bad
 * magic, a truncated body, trailing bytes or a damaged gzip stream. */
sy_status sy_idx_read(const char *path, sy_tensor **out);

/* Read a NumPy .npy file (format versions 1.0, 2.0 and 3.0; C order;
 * little- or big-endian). '<f4' -> SY_F32, '<f8' -> SY_F64, '<i4' ->
 * SY_I32, '|u1' and '|b1' -> SY_U8 (bools as 0 and 1); '<i8', '<i2',
 * '|i1', '<u2', '<u4', '<u8' -> SY_I32 when every value fits
 * (SY_ERR_UNSUPPORTED names the value that does not). Fortran order (rank
 * >= 2), object arrays and other dtypes: SY_ERR_UNSUPPORTED naming the
 * dtype. A bad magic, header, a truncated body or bytes after it:
 * SY_ERR_CORRUPT with the file and byte offset. */
sy_status sy_npy_read(const char *path, sy_tensor **out);

/* A NumPy .npz archive (a zip of .npy files, as np.savez and
 * np.savez_compressed write them: stored or deflated members, zip64
 * included). sy_npz_open reads the file into memory and checks its
 * directory (SY_ERR_IO, SY_ERR_CORRUPT naming the byte offset); each
 * member is inflated and its CRC-32 checked when sy_npz_get asks for it.
 * sy_npz_close(NULL) does nothing. */
typedef struct sy_npz sy_npz;
sy_status sy_npz_open(const char *path, sy_npz **out);
void sy_npz_close(sy_npz *npz);
int32_t sy_npz_count(const sy_npz *npz);
/* The array's name without ".npy" ("x_train"), owned by the archive;
 * NULL for an index outside [0, count). */
const char *sy_npz_name(const sy_npz *npz, int32_t index);
/* Read the member named `name` (without ".npy") as sy_npy_read would.
 * SY_ERR_NOT_FOUND lists the names the archive has. */
sy_status sy_npz_get(const sy_npz *npz, const char *name, sy_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
