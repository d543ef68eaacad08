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

/* Write t as a NumPy .npy file (format 1.0, C order, this machine's byte
 * order), the file np.save writes for the same array: SY_F32 '<f4',
 * SY_F64 '<f8', SY_I32 '<i4', SY_I64 '<i8', SY_U8 '|u1'. Written whole or
 * not at all (a temporary file renamed over path: an existing file stays
 * as it was on failure). SY_ERR_DTYPE for a string tensor; SY_ERR_IO
 * naming the path. */
sy_status sy_npy_write(const char *path, const sy_tensor *t);
/* issue 17: n arrays (1 to 64) as the .npz archive np.savez writes, each
 * under its name (names[i] + ".npy", names unique), stored, in order;
 * written whole or not at all as sy_npy_write. SY_ERR_UNSUPPORTED past
 * 4 GiB (written without zip64). */
sy_status sy_npz_write(const char *path, const char *const *names, const sy_tensor *const *arrays,
                       int32_t n);

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

/* ==== CIFAR-10 (cifar.c) =========================================================== */

/* CIFAR-10 (Krizhevsky, 2009), as Keras's cifar10.load_data() returns it:
 * x uint8 (N, 32, 32, 3), channels last; y uint8 (N, 1), classes 0..9;
 * 50,000 train (data_batch_1..5) and 10,000 test (test_batch). Read from
 * the binary version (cifar-10-binary.tar.gz: cifar-10-batches-bin/NAME.bin,
 * records of 1 label byte and 3,072 pixel bytes, the red plane, then green,
 * then blue, each row-major 32 x 32), found, fetched and verified as the
 * other datasets. On failure every member of *out is NULL. */
sy_status sy_cifar10_load_data(sy_data_split *out);

/* ==== TFRecord files (tfrecord.c) ================================================ */

/* TensorFlow's TFRecord framing: per record a uint64 length, the masked
 * CRC32C of the length, the data, the masked CRC32C of the data (all
 * little-endian); the whole file optionally ZLIB- or GZIP-compressed. */
typedef enum sy_compression { SY_COMPRESSION_NONE = 0, SY_COMPRESSION_ZLIB, SY_COMPRESSION_GZIP } sy_compression;

/* TensorFlow's spellings: "" or "NONE", "ZLIB", "GZIP" (any case).
 * SY_ERR_INVALID_ARGUMENT lists them. */
sy_status sy_compression_from_name(const char *name, sy_compression *out);

typedef struct sy_tfrecord_options {
    sy_compression compression; /* SY_COMPRESSION_NONE */
    int64_t buffer_size;        /* bytes read at a time: 0 for 256 KiB (TFRecordDataset's default) */
    bool skip_corrupt;          /* count and skip corrupt records instead of failing: false */
    /* issue 17, TFRecord layouts: sy_dataset_tfrecord gives each record with
     * where it came from, (record, file name string (), record index int64
     * ()), the index 0-based in its file, damaged records counted: false */
    bool with_origin;
} sy_tfrecord_options;

sy_tfrecord_options sy_tfrecord_options_default(void);

/* Reading, record by record. sy_tfrecord_read gives the next record in
 * *data (n bytes, owned by the reader until the next call) or sets *end.
 * A damaged record -- a length or data checksum that does not match, a
 * length past the end of the file, a truncated record, damaged compressed
 * data -- is SY_ERR_CORRUPT naming the file, the record's index and its
 * byte offset (in the decompressed stream when compressed). With
 * skip_corrupt such a record is counted (sy_tfrecord_reader_skipped) and
 * skipped; a record whose length cannot be trusted ends the file, since no
 * later record can be found reliably. sy_tfrecord_reader_close(NULL) does
 * nothing. */
typedef struct sy_tfrecord_reader sy_tfrecord_reader;
sy_status sy_tfrecord_reader_open(const char *path, const sy_tfrecord_options *options, sy_tfrecord_reader **out);
sy_status sy_tfrecord_read(sy_tfrecord_reader *r, const uint8_t **data, size_t *n, bool *end);
int64_t sy_tfrecord_reader_skipped(const sy_tfrecord_reader *r);
/* issue 17: records met so far, damaged ones counted; the record read last is number this - 1. */
int64_t sy_tfrecord_reader_records(const sy_tfrecord_reader *r);
void sy_tfrecord_reader_close(sy_tfrecord_reader *r);

/* Writing. Records go to a temporary file beside `path`, which
 * sy_tfrecord_writer_close flushes, fsyncs and renames to `path`: a file
 * with the final name is always whole, and a failure (a full disk) leaves
 * any earlier file of that name as it was. close and abort free the writer
 * whatever happens; abort removes the temporary file. Both do nothing for
 * NULL. */
typedef struct sy_tfrecord_writer sy_tfrecord_writer;
sy_status sy_tfrecord_writer_open(const char *path, sy_compression compression, sy_tfrecord_writer **out);
sy_status sy_tfrecord_write(sy_tfrecord_writer *w, const void *data, size_t n);
sy_status sy_tfrecord_writer_close(sy_tfrecord_writer *w);
void sy_tfrecord_writer_abort(sy_tfrecord_writer *w);

/* ==== tf.train.Example (example.c) =============================================== */

/* Building an Example: features by name, each a float_list, an int64_list
 * or a bytes_list (a key once; SY_ERR_INVALID_ARGUMENT names a repeated
 * key). sy_example_serialize gives the protobuf wire bytes as a scalar
 * string tensor. sy_example_free(NULL) does nothing. */
typedef struct sy_example sy_example;
sy_status sy_example_new(sy_example **out);
void sy_example_free(sy_example *e);
sy_status sy_example_add_floats(sy_example *e, const char *key, const float *values, int64_t n);
sy_status sy_example_add_int64s(sy_example *e, const char *key, const int64_t *values, int64_t n);
sy_status sy_example_add_bytes(sy_example *e, const char *key, const sy_string *values, int64_t n);
sy_status sy_example_serialize(const sy_example *e, sy_tensor **out);

/* What to parse, as tf.io.FixedLenFeature and tf.io.VarLenFeature. dtype
 * is SY_F32 (a float_list), SY_I64 (an int64_list) or SY_STRING (a
 * bytes_list). A fixed-length feature holds exactly prod(shape) values; when
 * its key is absent the default (a tensor of that shape and dtype) is used,
 * or, with none, the Example is refused. A variable-length feature holds
 * any number, none when absent. */
typedef enum sy_feature_kind { SY_FEATURE_FIXED_LEN = 0, SY_FEATURE_VAR_LEN } sy_feature_kind;

typedef struct sy_feature_spec {
    const char *key;
    sy_feature_kind kind;
    sy_dtype dtype;
    sy_shape shape;                 /* fixed-length: the value's shape */
    const sy_tensor *default_value; /* fixed-length: NULL for a required feature */
} sy_feature_spec;

/* One serialized Example (data, n bytes) into out[i] for specs[i]: a
 * tensor of the spec's shape (fixed-length) or a 1-D tensor of the values
 * (variable-length). SY_ERR_CORRUPT for bad wire data, with the byte offset;
 * SY_ERR_INVALID_ARGUMENT naming the key for a missing required feature, a
 * feature of another type, or a fixed-length feature with the wrong number
 * of values. On failure every out[i] is NULL. */
sy_status sy_parse_single_example(const void *data, size_t n, const sy_feature_spec *specs, int32_t n_specs,
                                  sy_tensor **out);

/* A batch: `serialized` a string tensor (B,). Fixed-length features give
 * (B, shape...); variable-length ones give their values, row after row, in
 * out[i] (total,) and row_splits[i] int64 (B + 1,): row b's values are
 * out[i][row_splits[b] : row_splits[b + 1]] (TensorFlow returns a
 * SparseTensor; the splits say the same). row_splits may be NULL when no
 * spec is variable-length; its entries for fixed-length specs are NULL.
 * Errors name the Example's index besides the above. */
sy_status sy_parse_example(const sy_tensor *serialized, const sy_feature_spec *specs, int32_t n_specs, sy_tensor **out,
                           sy_tensor **row_splits);

/* ==== Datasets: the input pipeline (dataset*.c) ================================== */

/* tf.data in C. A dataset describes a stream of elements, each a tuple of
 * 1 to SY_ELEMENT_MAX tensors (components); iterating it runs the pipeline,
 * on threads of its own where a transformation asks for them (map and
 * interleave with num_parallel_calls > 1, prefetch, parallel reads), so
 * that it overlaps with the model's compute. Datasets are immutable and
 * reference counted: a transformation keeps a reference to its input, and
 * sy_dataset_free drops the caller's. Results are deterministic: parallel
 * stages keep the input order, and shuffles draw from their seed.
 *
 *   const char *files[] = {"train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"};
 *   sy_dataset *d, *parsed, *batched, *ready;
 *   sy_dataset_tfrecord(files, 2, NULL, 2, &d);
 *   sy_dataset_map(d, parse_fn, &spec, 2, parsed_specs, 2, &parsed);  // -> (image, label)
 *   sy_dataset_batch(parsed, 128, true, &batched);
 *   sy_dataset_prefetch(batched, SY_AUTOTUNE, &ready);
 *   sy_model_fit_dataset(model, ready, NULL, &fit_options, &history);
 */
#define SY_ELEMENT_MAX 8

typedef struct sy_element {
    int32_t n;
    sy_tensor *c[SY_ELEMENT_MAX];
} sy_element;

/* Free the components and set n to 0. */
void sy_element_clear(sy_element *e);

/* A component's dtype and shape; a dimension of -1 is not known before
 * running (a batch without drop_remainder, a variable-length feature). */
typedef struct sy_component_spec {
    sy_dtype dtype;
    sy_shape shape;
} sy_component_spec;

typedef struct sy_dataset sy_dataset;

void sy_dataset_free(sy_dataset *d); /* NULL: nothing */
int32_t sy_dataset_component_count(const sy_dataset *d);
sy_component_spec sy_dataset_component_spec(const sy_dataset *d, int32_t index);

#define SY_INFINITE (-1)
#define SY_UNKNOWN (-2)
/* Elements per pass, or SY_INFINITE, or SY_UNKNOWN (tf.data's cardinality). */
int64_t sy_dataset_cardinality(const sy_dataset *d);

/* -- sources -- */

/* Slices of the tensors along their first axis (which they must share):
 * element i is (t[0][i], ..., t[n-1][i]). The tensors are copied. */
sy_status sy_dataset_from_tensor_slices(sy_tensor *const *tensors, int32_t n, sy_dataset **out);
/* One element, the tensors themselves (copied). */
sy_status sy_dataset_from_tensors(sy_tensor *const *tensors, int32_t n, sy_dataset **out);
/* int64 scalars start, start + step, ... up to stop (excluded); step != 0. */
sy_status sy_dataset_range(int64_t start, int64_t stop, int64_t step, sy_dataset **out);
/* The records of TFRecord files (string scalars), the files in order, or
 * num_parallel_reads of them read at once and their records interleaved
 * one at a time (TFRecordDataset's order). options NULL: the defaults. */
sy_status sy_dataset_tfrecord(const char *const *filenames, int32_t n, const sy_tfrecord_options *options,
                              int32_t num_parallel_reads, sy_dataset **out);
/* Records of record_bytes bytes (string scalars) after header_bytes and
 * before footer_bytes of each file; a file whose body is not a whole number
 * of records is SY_ERR_CORRUPT naming it. */
sy_status sy_dataset_fixed_length_records(const char *const *filenames, int32_t n, int64_t record_bytes,
                                          int64_t header_bytes, int64_t footer_bytes, sy_compression compression,
                                          sy_dataset **out);
/* Lines (string scalars) without their "\n" or "\r\n". */
sy_status sy_dataset_text_lines(const char *const *filenames, int32_t n, sy_compression compression, sy_dataset **out);
/* File names matching a glob pattern (string scalars), sorted, or shuffled
 * with seed. No match is SY_ERR_NOT_FOUND naming the pattern. */
sy_status sy_dataset_list_files(const char *pattern, bool shuffle, uint64_t seed, sy_dataset **out);

/* -- transformations (the input stays the caller's to free) -- */

/* fn makes each output element from an input element, on the caller's
 * thread or, with num_parallel_calls > 1, on that many threads, the order
 * kept; SY_AUTOTUNE picks the count. The output's components are declared
 * (as tf.py_function's Tout) and every element fn makes is checked against
 * them: a mismatch is an error naming the component and both specs. fn may
 * be called concurrently; a non-OK status from it ends the iteration with
 * that error. */
#define SY_AUTOTUNE (-1)
typedef sy_status (*sy_map_fn)(void *ctx, const sy_element *in, sy_element *out);
sy_status sy_dataset_map(const sy_dataset *in, sy_map_fn fn, void *ctx, int32_t num_parallel_calls,
                         const sy_component_spec *out_specs, int32_t n_out, sy_dataset **out);
/* The elements for which pred sets *keep. */
typedef sy_status (*sy_predicate_fn)(void *ctx, const sy_element *e, bool *keep);
sy_status sy_dataset_filter(const sy_dataset *in, sy_predicate_fn pred, void *ctx, sy_dataset **out);
/* A buffer of buffer_size elements, each output drawn uniformly from it
 * and replaced by the next input; the order differs on every pass when
 * reshuffle_each_iteration. */
sy_status sy_dataset_shuffle(const sy_dataset *in, int64_t buffer_size, uint64_t seed, bool reshuffle_each_iteration,
                             sy_dataset **out);
/* batch_size consecutive elements stacked along a new first axis; the last
 * smaller batch is dropped with drop_remainder, which gives a static batch
 * dimension. Components must have the same shape in every element of a
 * batch (else SY_ERR_SHAPE naming the component and both shapes). */
sy_status sy_dataset_batch(const sy_dataset *in, int64_t batch_size, bool drop_remainder, sy_dataset **out);
/* The same, each component padded to padded_shapes[c] (NULL, or -1
 * dimensions: the longest in the batch) with padding_values[c] (NULL: 0,
 * or the empty string). */
sy_status sy_dataset_padded_batch(const sy_dataset *in, int64_t batch_size, const sy_shape *padded_shapes,
                                  const double *padding_values, bool drop_remainder, sy_dataset **out);
/* count passes (SY_INFINITE: forever). */
sy_status sy_dataset_repeat(const sy_dataset *in, int64_t count, sy_dataset **out);
sy_status sy_dataset_take(const sy_dataset *in, int64_t count, sy_dataset **out);
sy_status sy_dataset_skip(const sy_dataset *in, int64_t count, sy_dataset **out);
/* issue 20: tf.data's shard(num_shards, index): the elements i with
 * i % num_shards == index, as a TPU Pod's hosts each take their share of
 * the input. SY_ERR_INVALID_ARGUMENT, with TensorFlow's words, unless
 * num_shards >= 1 and 0 <= index < num_shards. */
sy_status sy_dataset_shard(const sy_dataset *in, int64_t num_shards, int64_t index, sy_dataset **out);
/* Elements side by side, their components concatenated, until the first
 * input ends. */
sy_status sy_dataset_zip(const sy_dataset *const *in, int32_t n, sy_dataset **out);
/* a's elements, then b's (their specs must agree). */
sy_status sy_dataset_concatenate(const sy_dataset *a, const sy_dataset *b, sy_dataset **out);
/* fn maps each input element to a dataset; cycle_length of those are read
 * at once, block_length elements from each in turn (tf.data's interleave),
 * with num_parallel_calls threads opening and reading them ahead, the
 * order kept. The inner datasets' components are declared as map's. */
typedef sy_status (*sy_interleave_fn)(void *ctx, const sy_element *e, sy_dataset **out);
sy_status sy_dataset_interleave(const sy_dataset *in, sy_interleave_fn fn, void *ctx, int32_t cycle_length,
                                int32_t block_length, int32_t num_parallel_calls, const sy_component_spec *out_specs,
                                int32_t n_out, sy_dataset **out);
/* The first pass's elements kept, in memory (filename NULL or "") or in a
 * file, and later passes read from there. A cache file is written
 * atomically once its pass is complete, and a whole one found at the start
 * is read instead of the input. */
sy_status sy_dataset_cache(const sy_dataset *in, const char *filename, sy_dataset **out);
/* Up to buffer_size elements made ahead on a thread of its own
 * (SY_AUTOTUNE: as many as keep the consumer from waiting, within a
 * memory budget). */
sy_status sy_dataset_prefetch(const sy_dataset *in, int64_t buffer_size, sy_dataset **out);

/* The dataset's random state, as tf.data's seed generators hold it: for
 * every shuffle in it with reshuffle_each_iteration (depth first through
 * its inputs), how many passes have begun. Writes at most max values and
 * returns how many there are. A checkpoint saves it, and setting it back
 * on the same pipeline built anew makes the next iterator draw the order
 * the interrupted run's would have drawn. */
int32_t sy_dataset_rng_state(const sy_dataset *d, uint64_t *state, int32_t max);
/* Set what sy_dataset_rng_state gave; SY_ERR_INVALID_ARGUMENT when n is
 * not the number of shuffles in d (another pipeline). */
sy_status sy_dataset_set_rng_state(const sy_dataset *d, const uint64_t *state, int32_t n);

/* -- iteration -- */

/* One pass over the dataset (repeat makes it longer): each call gives the
 * next element in *out (which the caller then owns and clears) or sets
 * *end. Errors name the transformation and say what happened. Freeing an
 * iterator stops its threads. sy_iterator_free(NULL) does nothing. */
typedef struct sy_iterator sy_iterator;
sy_status sy_dataset_iterator(const sy_dataset *d, sy_iterator **out);
sy_status sy_iterator_next(sy_iterator *it, sy_element *out, bool *end);
void sy_iterator_free(sy_iterator *it);

#ifdef __cplusplus
}
#endif
/* ==== issue 17, TFRecord layouts: images and record specs (src/io/image.c, src/data/features.c) ==== */

/* An encoded image as tf.io.decode_image(data, channels) (dtype uint8)
 * decodes it: PNG (8 or 16 bits, gray, gray+alpha, RGB, RGBA, palette,
 * interlaced) or JPEG (baseline, progressive), into a new uint8 tensor
 * (height, width, channels). channels 0 keeps the file's own; 1, 3, 4
 * convert as TensorFlow converts (a JPEG gives 1 or 3). SY_ERR_CORRUPT
 * for data that is no PNG or JPEG, damaged or truncated, or declares more
 * than 2^29 bytes of pixels; SY_ERR_UNSUPPORTED for GIF, BMP, CMYK JPEG,
 * or a format the build has no library for (docs/design/tfrecord.md). */
sy_status sy_image_decode(const void *data, size_t n, int32_t channels, sy_tensor **out);

/* tf.image.resize(image, (height, width)) with its defaults (bilinear,
 * half_pixel_centers, antialias off): float32 (height, width, C) from
 * uint8 or float32 (H, W, C). */
sy_status sy_image_resize_bilinear(const sy_tensor *image, int64_t height, int64_t width, sy_tensor **out);

/* What an element is made of, read from a TFRecord of tf.train.Examples:
 * each component (a role: "x" the model's input, "y" its label, "w" the
 * sample weight; "x.NAME" and "y.NAME" the input and output layers NAME
 * of a model with several) from one feature, as tf.io.parse_single_example
 * with FixedLenFeature or VarLenFeature reads it, or an encoded image
 * decoded as decode_image does, optionally resized and rescaled. Written
 * as a flag
 *   x=FixedLen(image, float, [28,28,1]); y=FixedLen(label, int64)
 *   x=VarLen(text, int64, length=250); y=FixedLen(label, int64, default=0)
 *   x=Image(image/encoded, channels=3, resize=[224,224], rescale=0.00392156862);
 *     y=FixedLen(image/class/label, int64)
 *   x.in_a=FixedLen(a, float, [4]); x.in_b=FixedLen(b, float, [3]);
 *     y.cls=FixedLen(c, int64); y.reg=FixedLen(r, float, [2]); w=FixedLen(weight, float)
 * or as JSON ({"x": {"kind": "Image", "feature": "image/encoded", ...}},
 * {"x.in_a": {...}, ...}); docs/design/tfrecord.md gives both in full.
 * The components are an element's, (x..., y..., w), as Keras takes
 * (x, y, sample_weight): at most SY_ELEMENT_MAX features together, a
 * ninth is refused when the spec is parsed. */
typedef enum sy_record_kind { SY_RECORD_FIXED_LEN = 0, SY_RECORD_VAR_LEN, SY_RECORD_IMAGE } sy_record_kind;

#define SY_RECORD_NAME_MAX 128
/* The most bytes one component may take (2 GiB, a protocol buffer's limit):
 * a larger shape, length or resize is refused when the spec is parsed. */
#define SY_RECORD_MAX_BYTES ((int64_t)1 << 31)

typedef struct sy_record_feature {
    char role[16];                 /* "x", "y" or "w" */
    char name[SY_RECORD_NAME_MAX]; /* x.NAME, y.NAME: the model's input or output layer; "": none */
    char key[SY_RECORD_NAME_MAX];  /* the Example's feature */
    sy_record_kind kind;
    sy_dtype dtype;                /* FixedLen, VarLen: SY_F32, SY_I64 or SY_STRING */
    sy_shape shape;                /* the component's shape; -1: known only from the data (an image not resized) */
    bool has_default;              /* FixedLen: absent -> every value default_value */
    double default_value;          /* FixedLen's default; VarLen's padding (0) */
    int64_t length;                /* VarLen: values kept, padded after with default_value */
    int32_t channels;              /* Image: decode_image's channels (0: the file's) */
    int64_t resize[2];             /* Image: (height, width), 0: none */
    bool rescaled;                 /* Image: x * rescale + offset (Keras's Rescaling) */
    double rescale, offset;
} sy_record_feature;

typedef struct sy_record_spec {
    int32_t n; /* components: the x's, then the y's, then w */
    sy_record_feature f[SY_ELEMENT_MAX];
} sy_record_spec;

/* Parse the flag's form or the JSON form (text of n bytes, named `name`
 * in errors: a file's path, or "--features"). SY_ERR_INVALID_ARGUMENT
 * naming the entry, what is wrong and what is allowed (JSON: with line and
 * column). sy_record_spec_read reads a JSON file. */
sy_status sy_record_spec_parse(const char *text, sy_record_spec *out);
sy_status sy_record_spec_from_json(const char *text, size_t n, const char *name, sy_record_spec *out);
sy_status sy_record_spec_read(const char *path, sy_record_spec *out);
/* Put s in a model's order: the x's as `inputs` lists the model's input
 * layers, the y's as `outputs` lists its output layers, then w; a bare x
 * (y) is the only input (output). A spec without y keeps none (predict's).
 * SY_ERR_INVALID_ARGUMENT naming the role and the model's names: a NAME no
 * input (output) has, an input without an x, labels for some outputs and
 * not others, a bare x (y) for several, w without y, or more components
 * than SY_ELEMENT_MAX. */
sy_status sy_record_spec_arrange(sy_record_spec *s, const char *const *inputs, int32_t n_inputs,
                                 const char *const *outputs, int32_t n_outputs);
/* Component i's dtype and shape: FixedLen its dtype and shape, VarLen
 * (length,), Image uint8 (H, W, C), float32 when resized or rescaled. */
sy_component_spec sy_record_spec_component(const sy_record_spec *s, int32_t i);
/* One serialized Example (data, n bytes) as an element of s->n components.
 * `where` ("FILE, record N") starts every error, which names the feature:
 * missing (and no default), of another type, the wrong number of values,
 * an image that does not decode or whose shape is not the spec's. */
sy_status sy_record_spec_apply(const sy_record_spec *s, const void *data, size_t n, const char *where,
                               sy_element *out);

#endif
