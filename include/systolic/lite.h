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

/* What TFLiteConverter does with optimizations=[DEFAULT], a representative
 * dataset and TFLITE_BUILTINS_INT8 (docs/design/tflite.md, "Quantization"):
 * per-channel symmetric int8 weights, per-tensor asymmetric int8
 * activations from the float model's ranges on calibration batches, int32
 * biases, BatchNormalization folded, ReLU fused. */
typedef struct sy_lite_quantize_options {
    int64_t calibration_steps; /* batches of calibration samples run through the float model (100) */
    int64_t batch_size;        /* samples per calibration batch (32) */
    bool int8_input;           /* inference_input_type int8: the file takes int8 (no QUANTIZE op); false: float32 */
    bool int8_output;          /* inference_output_type int8 (no DEQUANTIZE op); false: float32 */
} sy_lite_quantize_options;

sy_lite_quantize_options sy_lite_quantize_options_default(void);

/* What a quantization did, for a report. */
typedef struct sy_lite_quantize_report {
    int32_t n_ops;            /* operators in the file */
    char ops[512];            /* their kinds in order of first use: "QUANTIZE CONV_2D MAX_POOL_2D ..." */
    int64_t samples;          /* calibration samples run */
    int64_t float_bytes;      /* the float model's weights: its parameters as float32 */
    int64_t file_bytes;       /* the .tflite file */
} sy_lite_quantize_report;

/* Quantize the float model m (built, one float input and one output) into
 * the .tflite file at path (written atomically: on any failure path keeps
 * what it held). calibration holds samples (N, the input's shape...),
 * float32: the first calibration_steps * batch_size of them (all, when
 * fewer) are run through m to find each tensor's range. A layer outside
 * the supported set is refused (SY_ERR_UNSUPPORTED) naming it and why.
 * report may be NULL. */
sy_status sy_lite_quantize(sy_model *m, const sy_tensor *calibration, const sy_lite_quantize_options *o,
                           const char *path, sy_lite_quantize_report *report);
/* Whether sy_lite_quantize takes m's layers (SY_OK), or the refusal it would give: a check that needs no data. */
sy_status sy_lite_quantize_check(const sy_model *m);


/* ---- TPU v1 ----------------------------------------------------------------
 * (lowering an int8 model to TPU v1 programs, running them) */


#ifdef __cplusplus
}
#endif

#endif
