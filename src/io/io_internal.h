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
 * failed write never destroys the previous one.
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

#endif
