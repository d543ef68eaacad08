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

/* An int8 TFLite model (full-integer quantization, as TFLiteConverter writes it) made into a graph of
 * systolic's int8 ops, which compute TFLite's reference kernels' integers exactly (src/lite/lite_model.c,
 * docs/design/tflite.md). Operators outside the supported set, float32 models and other tensor types are
 * refused by name when loading. */
typedef struct sy_lite_model sy_lite_model;

sy_status sy_lite_model_load(const char *path, sy_lite_model **out);
void sy_lite_model_free(sy_lite_model *m);

/* The model's input or output as the file declares it: dtype SY_F32 or SY_I8, shape with the batch axis
 * -1, and the scale and zero point of an int8 one (0 for float32). */
typedef struct sy_lite_io {
    const char *name;
    sy_dtype dtype;
    sy_shape shape;
    float scale;
    int32_t zero_point;
} sy_lite_io;
void sy_lite_model_io(const sy_lite_model *m, bool output, sy_lite_io *io);
int32_t sy_lite_model_op_count(const sy_lite_model *m);
const char *sy_lite_model_ops(const sy_lite_model *m, int32_t i); /* "CONV_2D": operator i's name */

/* The outputs for x (N, input shape...), batch_size rows at a time (<= 0: 32): a tensor of the output's
 * dtype, (N, output shape...). x is of the input's dtype; for an int8 input an int32 tensor of values in
 * [-128, 127] too (NumPy's int8 files load so). Shapes and dtypes are checked, with both named. */
sy_status sy_lite_model_predict(sy_lite_model *m, const sy_tensor *x, int64_t batch_size, sy_tensor **out);


/* ---- Post-training quantization --------------------------------------------
 * (a Keras model to an int8 .tflite file) */


/* ---- TPU v1 ----------------------------------------------------------------
 * (lowering an int8 model to TPU v1 programs, running them) */


#ifdef __cplusplus
}
#endif

#endif
