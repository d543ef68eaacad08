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

#endif
