/*
 * io_internal.h - the io module: files, and the TensorFlow ecosystem's
 * formats, readers and writers that know nothing of models. It sits below
 * data (whose datasets read their files through it) and keras (which gives
 * it a model's weights and configuration as plain names, shapes and
 * arrays); docs/design/modules.md says why, and which of data's formats
 * are still to move here.
 *
 *   file.c        opening, reading and writing any file (docs/design/files.md)
 *   crc32c.c      CRC-32C, with the SSE4.2 instruction where there is one
 *   tfrecord.c    TFRecord files: the reader, the writer, the framing
 *   h5.c          Keras's HDF5 files through libhdf5 (weights, full models)
 *   h5_reader.c   the child process that does all of libhdf5's reading
 *   events.c      TensorBoard event files (TFRecord framing, Event protos)
 *   checkpoint.c  training checkpoints: every variable and the loop's state
 *   npy_write.c   NumPy .npy files, written (data's npy.c reads them)
 *   image.c       PNG and JPEG images, decoded as tf.io.decode_image
 *   tflite.c      TensorFlow Lite .tflite models, read (tflite.h; tflite_fb.cc,
 *                 the one C++ file, verifies and decodes the flatbuffer)
 *   tpu1_program.c  TPU v1 programs: encoding, writer, checking loader,
 *                 disassembler (tpu1_program.h; docs/design/tpu-v1.md)
 *
 * Every writer writes a temporary file beside the target, fsyncs it and
 * renames it over the target, so a crash never leaves a torn file and a
 * failed write never destroys the previous one. Event files are the
 * exception: TensorBoard reads them while they grow, so each is created
 * under its final, new name (exclusively: never over an existing file) and
 * appended to, flushed and fsynced at every flush.
 */
#ifndef SY_IO_INTERNAL_H
#define SY_IO_INTERNAL_H

#include "systolic/core.h"
#include "systolic/data.h" /* the TFRecord reader and writer (tfrecord.c) are data.h's API */
#include "../core/core_internal.h"
#include "tflite.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- TensorFlow Lite models (tflite.c, tflite_fb.cc): docs/design/tflite.md ------- */

/* The file at path (or n bytes at buf, copied; `what` names them in
 * messages) as a TFLite model's first subgraph, after flatbuffers'
 * Verifier has passed every byte of it: *out to free with io_tflite_free.
 * A damaged, truncated or foreign file is SY_ERR_CORRUPT naming it, what
 * was wrong and at which byte ("'m.tflite' is not a valid TFLite model:
 * subgraph 0, tensor 3 (table at byte 812) is damaged ..."); never a
 * crash. SY_ERR_IO for a file that cannot be read. */
sy_status io_tflite_read(const char *path, io_tflite **out);
sy_status io_tflite_parse(const uint8_t *buf, size_t n, const char *what, io_tflite **out);
void io_tflite_free(io_tflite *m);
/* issue 18: m written as a .tflite file at path (io_tflite_encode, then
 * io_write_file_atomic: a failure leaves whatever path held before). */
sy_status io_tflite_write(const char *path, const io_tflite *m, const io_tflite_write_options *wo);

/* ---- files (file.c): docs/design/files.md ------------------------------------------ */

/* Open `path` for reading without blocking and check that it is a regular
 * file: a directory, FIFO, device or socket is refused (SY_ERR_IO saying
 * which), as is a file that cannot be opened. Messages start "what: " when
 * what is given. *fd is blocking again; *size (when non-NULL) from fstat. */
sy_status io_open_read(const char *path, const char *what, int *fd, int64_t *size);
/* The same, as a stdio stream (fclose it). */
sy_status io_fopen_read(const char *path, const char *what, FILE **f, int64_t *size);

/* The whole file at `path` in a new sy_malloc'd buffer (*buf is non-NULL
 * even for an empty file). SY_ERR_IO names the path and the system's
 * reason; a file over `max` bytes (0: no limit) is refused before it is
 * read, SY_ERR_INVALID_ARGUMENT naming `format` ("a Keras model JSON"). */
sy_status io_read_file_max(const char *path, size_t max, const char *format, uint8_t **buf,
                             size_t *n);
sy_status io_read_file(const char *path, uint8_t **buf, size_t *n);
/* Exactly n bytes of the open file fd (named path in the error) from byte at into buf: SY_ERR_IO naming the
 * file when it fails or ends first. */
sy_status io_read_at(int fd, const char *path, void *buf, size_t n, int64_t at);

/* "a directory", "a FIFO", "a character device", ... for messages about a
 * path that is not a regular file. */
const char *io_file_kind(unsigned mode);
/* Create dir and its parents (mkdir -p); SY_ERR_IO names the part that
 * failed, or a part that is not a directory. */
sy_status io_make_dirs(const char *dir);
/* fsync the directory, so that a rename into it survives a crash. */
void io_sync_dir(const char *dir);
/* Where a write to path lands (into target, of `size` bytes): path, or
 * the end of its chain of symbolic links; SY_ERR_IO, before anything is
 * written, when that is a directory, FIFO, device or socket. *mode is the
 * existing file's permission bits, or -1 when there is none. Writers that
 * stream into a temporary file and rename it (the TFRecord writer, the
 * dataset cache) resolve their path here, as io_write_file_atomic does. */
sy_status io_write_target(const char *path, char *target, size_t size, int *mode);
/* Write the n buffers, one after another, as the file at path, atomically:
 * into a temporary file beside it (".<name>.tmp-XXXXXX"), fsync'd, renamed
 * over path, the directory fsync'd. A symbolic link is written through: the
 * file it points to is replaced (beside itself) and the link kept, as h5py
 * does; an existing file keeps its permissions. A directory, FIFO, device or
 * socket at path (or at the end of its links) is refused, SY_ERR_IO naming
 * it, before anything is written. On any failure (a full disk, a missing
 * directory) the temporary file is removed, whatever path held before is
 * untouched, and SY_ERR_IO names path and the reason. Every writer
 * of a whole file goes through here. */
sy_status io_write_file_atomic(const char *path, const void *const *bufs, const size_t *sizes,
                                 int32_t n);

/* Unaligned little- and big-endian loads. */
static inline uint16_t io_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t io_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t io_le64(const uint8_t *p) {
    return io_le32(p) | (uint64_t)io_le32(p + 4) << 32;
}
static inline uint32_t io_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ---- issue 17, images (image.c) ------------------------------------------------------- */

/* "PNG", "JPEG", "GIF" or "BMP" from the first bytes, as decode_image
 * tells them apart; NULL for anything else. */
const char *io_image_format(const void *data, size_t n);
/* sy_image_decode with the bound on height * width * channels given
 * (sy_image_decode's is 2^29 bytes; the fuzzers set a smaller one). */
sy_status io_image_decode(const void *data, size_t n, int32_t channels, int64_t max_bytes, sy_tensor **out);

/* ---- TFRecord (crc32c.c, tfrecord.c) ------------------------------------------------ */

/* CRC-32C continued over n more bytes: crc32c_extend(0, data, n) is the
 * CRC of data. crc32c_soft is the table version the hardware path must
 * agree with (tests compare them). */
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t n);
uint32_t crc32c_soft(uint32_t crc, const void *data, size_t n);

/* TFRecord's masked CRC: a CRC stored beside the data it covers, masked so
 * that a CRC of bytes that hold CRCs does not degenerate. */
static inline uint32_t tfrecord_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* A record's TFRecord frame: head gets its length (uint64 little-endian)
 * and that length's masked CRC, foot the data's masked CRC; the record is
 * head, the n bytes of data, foot. For writers that keep their own file
 * (TensorBoard's event files, src/io/events.c). */
void tfrecord_frame(const void *data, size_t n, uint8_t head[12], uint8_t foot[4]);

/* A TFRecord reader on bytes in memory (which must outlive it), named
 * `what` in messages: what the fuzz target feeds. */
sy_status tfrecord_reader_open_memory(const uint8_t *buf, size_t n, const char *what,
                                      const sy_tfrecord_options *options, sy_tfrecord_reader **out);

/* ---- checkpoints (checkpoint.c) ------------------------------------------------ */

#define CKPT_SUFFIX ".syckpt"

/* Write a checkpoint file: the manifest (JSON text) and the data bytes,
 * framed and CRC'd, atomically. */
sy_status ckpt_write(const char *path, const char *manifest, const void *data, size_t data_size);
/* Check a checkpoint's bytes (named `what` in messages): the magic, the
 * lengths against n, the CRC. *manifest is a new NUL-terminated copy
 * (sy_free); *data points into buf. SY_ERR_CORRUPT says what is wrong. */
sy_status ckpt_parse(const uint8_t *buf, size_t n, const char *what, char **manifest, const uint8_t **data,
                     size_t *data_size);
/* dir/ckpt-<step>.syckpt */
void ckpt_path(char *buf, size_t size, const char *dir, int64_t step);
/* The steps of the checkpoints in dir, ascending (a new array, sy_free);
 * none when dir does not exist. Changes nothing. */
sy_status ckpt_list(const char *dir, int64_t **steps, int32_t *n);
/* Remove the temporary files a killed writer left in dir. Only while
 * holding dir's lock: another run's may be being written. */
void ckpt_remove_temporaries(const char *dir);
/* The model directory's lock file, beside the checkpoints. */
#define CKPT_LOCK ".lock"
/* Take dir's lock (dir must exist) for as long as *fd stays open, and
 * write this process's pid in it. SY_ERR_STATE, naming the holder's pid,
 * if another open of it holds the lock -- in another process or this
 * one; SY_ERR_IO if it cannot be opened or locked. */
sy_status ckpt_lock(const char *dir, int *fd);
/* Release a lock ckpt_lock took; -1 is a no-op. */
void ckpt_unlock(int fd);

/* ---- TensorBoard event files (events.c) -------------------------------------------- */

/* One Event record: the file's first (file_version set) or a scalar. */
typedef struct io_event {
    double wall_time;         /* seconds since the epoch */
    int64_t step;
    const char *file_version; /* "brain.Event:2": the first event (with source_metadata) */
    const char *tag;          /* else a scalar summary: tag and value */
    float value;
} io_event;

/* e serialized as TensorFlow 2.15 serializes it (tf.summary.scalar's
 * Summary for a scalar) into buf when it holds it; returns the size. */
size_t io_event_pack(const io_event *e, uint8_t *buf, size_t cap);

typedef struct io_events io_events;

/* A new event file in dir (made with its parents), named as TensorFlow's
 * summary writer names it, events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2,
 * holding the first event, flushed. SY_ERR_IO names the directory or the
 * file and the reason (dir is a file, not writable; a file of that name
 * exists, which is left alone). */
sy_status io_events_open(const char *dir, io_events **out);
/* Append a record (buffered; written out when the buffer fills). */
sy_status io_events_write(io_events *w, const io_event *e);
/* A scalar at step, stamped now: tf.summary.scalar(tag, value, step). */
sy_status io_events_scalar(io_events *w, const char *tag, int64_t step, float value);
/* Write out what is buffered and fsync. A failed write is SY_ERR_IO naming
 * the file; every later call repeats it. */
sy_status io_events_flush(io_events *w);
/* Flush and close; frees w even on failure. NULL: SY_OK. */
sy_status io_events_close(io_events *w);
/* The file's path (w's own string). */
const char *io_events_path(const io_events *w);
/* Seconds since the epoch, microsecond resolution: an Event's wall_time. */
double io_events_now(void);

/* ---- HDF5 (h5.c) --------------------------------------------------------------
 *
 * A thin layer over libhdf5 that knows nothing of models: files, groups,
 * string attributes as h5py writes and reads them, float32 datasets. Every
 * failure is an sy_error naming the file (the target's path, never the
 * temporary one) and the object, with libhdf5's own innermost reason;
 * libhdf5 prints nothing. Objects are libhdf5 ids (hid_t, 64-bit since
 * 1.10) kept opaque here so that no HDF5 header leaks past h5.c. libhdf5's
 * serial build is not thread-safe: one thread at a time may use these.
 *
 * A file opened for reading is read by libhdf5 in a child process
 * (h5_reader.c): a damaged file that crashes or hangs libhdf5 gives
 * SY_ERR_CORRUPT ("FILE: damaged HDF5 file (libhdf5 crashed with SIGSEGV
 * reading attribute 'layer_names' of '/')"), never a crash here. Ids of such
 * a file are the child's; pass them only with their file. */

typedef int64_t h5_id;
typedef struct h5_file h5_file;

/* A new file for `path`, written at a temporary name beside it
 * (".<name>.tmp-XXXXXX"); nothing at `path` changes until h5_commit. */
sy_status h5_create(const char *path, h5_file **out);
/* Close the file, fsync it, rename it over `path` and sync the directory;
 * on any failure the temporary file is removed and `path` left as it was.
 * Frees f either way. */
sy_status h5_commit(h5_file *f);
/* Open `path` read-only, in a reader process. A missing file, one that is
 * not HDF5, or one that libhdf5 finds damaged or truncated is refused with
 * the reason. SYSTOLIC_H5_TIMEOUT: the seconds the reader may go silent
 * before it is stopped (30). */
sy_status h5_open(const char *path, h5_file **out);
/* Close a file opened for reading, or abandon one being written (its
 * temporary file is removed). NULL: nothing. */
void h5_close(h5_file *f);
/* SY_OK, or, once libhdf5 crashed or hung reading f, SY_ERR_CORRUPT with
 * why. A yes/no question (h5_exists, h5_attr_exists, ...) whose reader
 * died says no: a load asks this before it trusts what it read. */
sy_status h5_lost(const h5_file *f);
/* The target path (for messages), and the root group. */
const char *h5_path(const h5_file *f);
h5_id h5_root(const h5_file *f);

/* Groups. `name` may be a path ("a/b"); h5_group_create creates the
 * intermediate groups. Close every group opened or created. */
sy_status h5_group_create(h5_file *f, h5_id parent, const char *name, h5_id *out);
sy_status h5_group_open(h5_file *f, h5_id parent, const char *name, h5_id *out);
void h5_group_close(h5_file *f, h5_id group);
/* Whether `path` below parent names a group (false for a dataset or
 * nothing), and whether it names anything; every step of the path is
 * checked, so a missing intermediate group is just "no". */
bool h5_is_group(h5_file *f, h5_id parent, const char *path);
bool h5_exists(h5_file *f, h5_id parent, const char *path);
/* "/model_weights/dense" (for messages); "?" when libhdf5 cannot say. */
const char *h5_name(const h5_file *f, h5_id obj, char *buf, size_t size);

/* Strings, one or several. */
typedef struct h5_strings {
    char **v;
    int64_t n;
} h5_strings;
void h5_strings_free(h5_strings *s);

/* Write a scalar string attribute, variable-length as h5py writes a str
 * (utf8: cset UTF-8) or bytes (ASCII). */
sy_status h5_attr_write_string(h5_file *f, h5_id obj, const char *name, const char *value, bool utf8);
/* Write a list of strings as Keras's save_attributes_to_hdf5_group: an
 * array of variable-length ASCII strings, split into name0, name1, ...
 * when numpy's fixed-width copy of it would pass 64,512 bytes, and, when
 * empty, the empty float64 array h5py makes of []. */
sy_status h5_attr_write_strings(h5_file *f, h5_id obj, const char *name, const char *const *values, int64_t n);
/* Read a list of strings in any form h5py and Keras write: fixed or
 * variable length, scalar or array, or chunked (name0, name1, ...) as
 * Keras's load_attributes_from_hdf5_group reads it; an empty numeric
 * array is an empty list. *found says whether the attribute (or its first
 * chunk) exists; a missing one gives an empty list and SY_OK. */
sy_status h5_attr_read_strings(h5_file *f, h5_id obj, const char *name, h5_strings *out, bool *found);
/* Read one string (a scalar, or an array of one): a new string (sy_free).
 * SY_ERR_NOT_FOUND when absent. */
sy_status h5_attr_read_string(h5_file *f, h5_id obj, const char *name, char **out);
bool h5_attr_exists(h5_file *f, h5_id obj, const char *name);

/* Datasets of float32 (IEEE little-endian, contiguous, as h5py writes a
 * float32 numpy array). `name` may be a path; intermediate groups are
 * created. A shape of rank 0 is a scalar. */
sy_status h5_dataset_write_f32(h5_file *f, h5_id parent, const char *name, const sy_shape *shape, const float *data);
/* The same values as an int64 dataset (rounded to the nearest integer):
 * a variable Keras keeps as int64, such as Normalization's count (issue 15). */
sy_status h5_dataset_write_f32_as_i64(h5_file *f, h5_id parent, const char *name, const sy_shape *shape,
                                      const float *data);
/* The shape of dataset `name`: SY_ERR_NOT_FOUND if absent (or not a
 * dataset), SY_ERR_DTYPE unless its elements are floating point (float16,
 * 32 or 64; converted to float32 when read), SY_ERR_CORRUPT past
 * SY_MAX_RANK dimensions. */
sy_status h5_dataset_shape(h5_file *f, h5_id parent, const char *name, sy_shape *shape);
/* Read dataset `name`, which must have `shape` (checked again), into out. */
sy_status h5_dataset_read_f32(h5_file *f, h5_id parent, const char *name, const sy_shape *shape, float *out);
/* issue 15: the same, where `integers` also takes a dataset of integers
 * (read as float32): a variable Keras keeps as int64 (Normalization's
 * count). Elsewhere integers are refused, SY_ERR_DTYPE. */
sy_status h5_dataset_shape_ex(h5_file *f, h5_id parent, const char *name, bool integers, sy_shape *shape);
sy_status h5_dataset_read_f32_ex(h5_file *f, h5_id parent, const char *name, bool integers, const sy_shape *shape,
                                 float *out);
/* The reader child's side of the flag. */
void h5_allow_integers(h5_file *f, bool on);

/* h5.c and h5_reader.c only. h5_open_here opens in this process: the
 * reader's child calls it, and h5.c's functions on the file it gives run
 * libhdf5 here. The h5_reader_ functions are h5.c's for a file opened by
 * h5_open: each sends its request to the child and waits for the reply. */
typedef struct h5_reader h5_reader;
sy_status h5_open_here(const char *path, h5_file **out);
sy_status h5_reader_open(const char *path, h5_reader **out, h5_id *root);
void h5_reader_close(h5_reader *r);
sy_status h5_reader_lost(const h5_reader *r);
sy_status h5_reader_group_open(h5_reader *r, h5_id parent, const char *name, h5_id *out);
void h5_reader_group_close(h5_reader *r, h5_id group);
bool h5_reader_is_group(h5_reader *r, h5_id parent, const char *path);
bool h5_reader_exists(h5_reader *r, h5_id parent, const char *path);
bool h5_reader_attr_exists(h5_reader *r, h5_id obj, const char *name);
void h5_reader_name(h5_reader *r, h5_id obj, char *buf, size_t size);
sy_status h5_reader_attr_read_strings(h5_reader *r, h5_id obj, const char *name, h5_strings *out, bool *found);
sy_status h5_reader_dataset_shape(h5_reader *r, h5_id parent, const char *name, bool integers, sy_shape *shape);
sy_status h5_reader_dataset_read_f32(h5_reader *r, h5_id parent, const char *name, bool integers,
                                     const sy_shape *shape, float *out);

#endif
