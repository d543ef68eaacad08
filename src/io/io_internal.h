/*
 * io_internal.h - the io module: the TensorFlow ecosystem's files that hold
 * models and training state, below keras (which gives them a model's
 * weights and configuration as plain names, shapes and arrays).
 *
 *   h5.c          Keras's HDF5 files through libhdf5 (weights, full models)
 *   events.c      TensorBoard event files (TFRecord framing, Event protos)
 *   checkpoint.c  training checkpoints: every variable and the loop's state
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
#include "../core/core_internal.h"

#include <stddef.h>
#include <stdint.h>

/* ---- checkpoints (checkpoint.c) ------------------------------------------------ */

#define CKPT_SUFFIX ".syckpt"

/* Write a checkpoint file: the manifest (JSON text) and the data bytes,
 * framed and CRC'd, atomically. */
sy_status ckpt_write(const char *path, const char *manifest, const void *data, size_t data_size);
/* The whole file at path, in a new buffer (sy_free). */
sy_status ckpt_read(const char *path, uint8_t **file, size_t *size);
/* Check a checkpoint's bytes (named `what` in messages): the magic, the
 * lengths against n, the CRC. *manifest is a new NUL-terminated copy
 * (sy_free); *data points into buf. SY_ERR_CORRUPT says what is wrong. */
sy_status ckpt_parse(const uint8_t *buf, size_t n, const char *what, char **manifest, const uint8_t **data,
                     size_t *data_size);
/* dir/ckpt-<step>.syckpt */
void ckpt_path(char *buf, size_t size, const char *dir, int64_t step);
/* The steps of the checkpoints in dir, ascending (a new array, sy_free);
 * none when dir does not exist. Temporary files a killed writer left are
 * removed. */
sy_status ckpt_list(const char *dir, int64_t **steps, int32_t *n);

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

#endif
