/*
 * data_internal.h - what the data module's files share: the parsers behind
 * the file readers (they work on bytes in memory, so fuzz targets and tests
 * can feed them anything), the tar reader, the word index and the IMDB
 * and CIFAR-10 loaders with explicit paths, SHA-256, the fetcher that
 * finds, downloads and verifies a dataset file, and small byte helpers.
 * Files are opened, read and written through io (io_internal.h), and
 * TFRecord files are io's too.
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
#include "../io/io_internal.h" /* opening, reading and writing files */

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
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

/* ---- CIFAR-10 (cifar.c) ----------------------------------------------------------- */

/* Records in each of the published batches. */
#define CIFAR10_RECORDS 10000

/* sy_cifar10_load_data on an explicit archive (no checksum), or on an open
 * one (fuzzing: any bytes), whose batches hold `records` records each
 * (CIFAR10_RECORDS; tests use fewer): x_train uint8 (5 * records, 32, 32, 3),
 * y_train uint8 (5 * records, 1), x_test and y_test with `records` rows.
 * On failure every member of *out is NULL. */
sy_status cifar10_load_file(const char *archive, int64_t records, sy_data_split *out);
sy_status cifar10_load_tar(tar_reader *tar, int64_t records, sy_data_split *out);

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

/* ---- datasets: the input pipeline (dataset*.c) ---------------------------------- */

/* A dataset is an immutable, reference-counted node: its kind (the
 * transformation or source), its component specs and cardinality, its
 * inputs (retained) and the kind's own state, allocated with the node. An
 * iterator is one pass's state: opening a node opens what it needs of its
 * inputs. docs/design/input-pipeline.md has the whole model. */
typedef struct ds_iter ds_iter;

typedef struct ds_iter_ops {
    /* The next element into *out (empty on entry), or *end; after an
     * error or at the end *out is empty. */
    sy_status (*next)(ds_iter *it, sy_element *out, bool *end);
    /* Stop its threads and free what it holds (not the struct itself). */
    void (*release)(ds_iter *it);
} ds_iter_ops;

/* The first member of every iterator. */
struct ds_iter {
    const ds_iter_ops *ops;
    const sy_dataset *d; /* retained while the iterator lives */
};

typedef struct ds_kind {
    const char *name; /* "map": what errors name */
    sy_status (*open)(const sy_dataset *d, ds_iter **out);
    void (*destroy)(void *state); /* the kind's state (not the node); NULL: nothing */
} ds_kind;

#define DS_MAX_INPUTS SY_ELEMENT_MAX

struct sy_dataset {
    atomic_int refs;
    const ds_kind *kind;
    int32_t n;
    sy_component_spec spec[SY_ELEMENT_MAX];
    int64_t cardinality;
    int32_t n_inputs;
    const sy_dataset *input[DS_MAX_INPUTS];
    void *state; /* state_size zeroed bytes allocated with the node */
};

/* A node of `kind` with `state_size` bytes of zeroed state, the inputs
 * retained, one reference (the caller's), n = 0 and cardinality unknown. */
sy_status ds_node_new(const ds_kind *kind, size_t state_size, const sy_dataset *const *inputs, int32_t n_inputs,
                      sy_dataset **out);
/* n components with the given specs (copied). */
void ds_node_set_specs(sy_dataset *d, const sy_component_spec *spec, int32_t n);
const sy_dataset *ds_retain(const sy_dataset *d);

/* An iterator of `size` bytes (zeroed) for d, which it retains; freed with
 * ds_iter_free, which calls ops->release. */
void *ds_iter_alloc(size_t size, const ds_iter_ops *ops, const sy_dataset *d);
/* The same, SY_ERR_OUT_OF_MEMORY naming d's kind when it fails. */
sy_status ds_iter_new(const sy_dataset *d, size_t size, const ds_iter_ops *ops, ds_iter **out);
sy_status ds_open(const sy_dataset *d, ds_iter **out);
static inline sy_status ds_next(ds_iter *it, sy_element *out, bool *end) {
    *end = false;
    return it->ops->next(it, out, end);
}
void ds_iter_free(ds_iter *it);

/* Elements. clone copies tensors (strings too); move leaves the source
 * empty; bytes counts what the tensors hold (string bytes included). */
sy_status ds_element_clone(const sy_element *in, sy_element *out);
static inline void ds_element_move(sy_element *to, sy_element *from) {
    *to = *from;
    from->n = 0;
}
size_t ds_element_bytes(const sy_element *e);
/* e fits the n specs: component count, dtypes, ranks and every known
 * dimension. fits is the cheap test; check says what does not fit:
 * SY_ERR_SHAPE (or SY_ERR_DTYPE) "<what> component 1 is int32 (3,) but
 * the declared spec is float32 (None,)". */
bool ds_element_fits(const sy_element *e, const sy_component_spec *spec, int32_t n);
sy_status ds_element_check(const sy_element *e, const sy_component_spec *spec, int32_t n, const char *what);
/* "float32 (None, 28)": -1 dimensions as Python's None. */
char *ds_spec_format(const sy_component_spec *s, char *buf, size_t size);
#define DS_SPEC_STR_MAX (SY_SHAPE_STR_MAX + 16)
/* Specs given to a transformation (map's, interleave's): 1..SY_ELEMENT_MAX
 * of them, valid dtypes, ranks and dimensions (>= -1). */
sy_status ds_specs_check(const sy_component_spec *spec, int32_t n, const char *what);

/* A failure carried from the thread that saw it to the consumer: the
 * status and the message sy_last_error() had there. The first one set
 * stays; raise re-issues it on the calling thread. */
typedef struct ds_error {
    sy_status status;
    char *message;
} ds_error;
void ds_error_capture(ds_error *e, sy_status status);
sy_status ds_error_raise(const ds_error *e);
void ds_error_clear(ds_error *e);

/* Start n threads running fn(arg); the number started (n on success). */
int ds_threads_start(pthread_t *threads, int n, void *(*fn)(void *), void *arg);

/* A uniform integer in [0, n), n >= 1, without modulo bias. */
uint64_t ds_rng_below(sy_rng *rng, uint64_t n);

/* Autotune's choices (docs/design/input-pipeline.md): map and interleave
 * use one thread per core; an autotuned prefetch buffer starts at one
 * element and doubles whenever the consumer finds it empty, up to
 * DS_PREFETCH_MAX_ELEMENTS and DS_PREFETCH_BUDGET bytes. */
#define DS_PREFETCH_MAX_ELEMENTS 64
#define DS_PREFETCH_BUDGET ((size_t)64 << 20)
int ds_autotune_threads(void);

/* Parallel stages hand elements over in chunks: as many as take
 * DS_CHUNK_SECONDS at the measured `seconds` each, 1 to max. Element by
 * element, the locks and wake-ups cost more than a cheap function: a map
 * normalising 784 bytes ran 4x slower on two threads than on one, and
 * interleaved TFRecord reads 20x slower, most of it in futex calls. */
#define DS_CHUNK_MAX 16
#define DS_CHUNK_SECONDS 50e-6
/* map with SY_AUTOTUNE: fn runs inline, timed on the first
 * DS_AUTOTUNE_PROBE calls and one in DS_AUTOTUNE_SAMPLE after, until it
 * costs more than DS_PARALLEL_MIN_SECONDS a call (dataset_parallel.c) */
#define DS_AUTOTUNE_PROBE 64
#define DS_AUTOTUNE_SAMPLE 16
#define DS_PARALLEL_MIN_SECONDS 20e-6
int ds_chunk_size(double seconds, int max);

/* Most transformations: one input, the node made by ds_transform_new (the
 * input's specs and cardinality, which the caller then adjusts), and an
 * iterator that starts with ds_unary_iter, its input opened by
 * ds_unary_open and freed by ds_unary_release. */
sy_status ds_transform_new(const ds_kind *kind, size_t state_size, const sy_dataset *in, sy_dataset **out);
typedef struct ds_unary_iter {
    ds_iter base;
    ds_iter *input;
} ds_unary_iter;
sy_status ds_unary_open(const sy_dataset *d, size_t size, const ds_iter_ops *ops, ds_iter **out);
void ds_unary_release(ds_iter *it);

/* A user function's failure, as "<kind>: the <role> returned SY_ERR_X on
 * element <index>: <its message>". */
sy_status ds_fn_error(sy_status status, const char *kind, const char *role, int64_t index);

/* A FIFO of elements that grows as needed (prefetch's buffer,
 * interleave's read-ahead); bytes counts what its elements hold. */
typedef struct ds_queue {
    sy_element *e;
    int64_t head, count, cap;
    size_t bytes;
} ds_queue;
/* Moves *e in (leaving it empty); SY_ERR_OUT_OF_MEMORY names `what`. */
sy_status ds_queue_push(ds_queue *q, sy_element *e, const char *what);
void ds_queue_pop(ds_queue *q, sy_element *out); /* count > 0 */
void ds_queue_clear(ds_queue *q);                /* frees the elements and the storage */

/* ---- files under the datasets (dataset_files.c) ---- */

/* A file's bytes in order, inflated (ZLIB or GZIP, concatenated members
 * too) as they are read; `what` names the transformation in messages. */
typedef struct ds_stream {
    FILE *f;
    const char *path;
    const char *what;
    sy_compression compression;
    z_stream z;
    bool z_init, z_done; /* inflater set up; at the end of a stream (member) */
    uint8_t *in;         /* compressed input buffer */
    uint64_t pos;        /* bytes handed out so far */
} ds_stream;
sy_status ds_stream_open(ds_stream *s, const char *path, sy_compression compression, const char *what);
/* Up to n bytes; *got < n only at the end. SY_ERR_IO, SY_ERR_CORRUPT name
 * the file and the offset. */
sy_status ds_stream_read(ds_stream *s, void *dst, size_t n, size_t *got);
void ds_stream_close(ds_stream *s);

/* A string tensor (n,) of the n file names, for the file sources. */
sy_status ds_filenames_tensor(const char *const *filenames, int32_t n, const char *what, sy_tensor **out);

#endif
