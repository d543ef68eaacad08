/*
 * systolic/lite.h - int8 models in TensorFlow Lite's format (issue 18): a
 * .tflite file run by systolic's int8 path, post-training quantization of
 * a Keras model into one, and the first TPU (TPU v1) that runs them.
 * docs/design/tflite.md says how.
 *
 * The module (src/lite/) sits above io (the .tflite reader and writer,
 * which know nothing of models), the compiler and the backends (the int8
 * ops and kernels, the sim backend's TPU v1), and keras (the float models
 * that quantization starts from).
 */
#ifndef SYSTOLIC_LITE_H
#define SYSTOLIC_LITE_H

#include "systolic/core.h"
#include "systolic/keras.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Running a .tflite model ----------------------------------------------
 * (loading, predict, evaluate) */


/* ---- Post-training quantization --------------------------------------------
 * (a Keras model to an int8 .tflite file) */


/* ---- TPU v1 ----------------------------------------------------------------
 * (lowering an int8 model to TPU v1 programs, running them) */


#ifdef __cplusplus
}
#endif

#endif
