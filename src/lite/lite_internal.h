/*
 * lite_internal.h - what the lite module's files share (issue 18): the
 * int8 model built from a .tflite file, the quantizer, the TPU v1 lowering.
 */
#ifndef SY_LITE_INTERNAL_H
#define SY_LITE_INTERNAL_H

#include "systolic/lite.h"
#include "../io/tflite.h"
#include "../keras/keras_internal.h"

/* ---- Running a .tflite model ---------------------------------------------- */


/* ---- Post-training quantization -------------------------------------------- */

/* TFLite's activation quantization (quantize.c): the int8 scale and zero
 * point of a calibrated range [lo, hi], widened to hold 0 and the zero
 * point nudged to an integer as MLIR's fakeQuantAttrsToType does. */
void lite_quant_params(double lo, double hi, double *scale, int64_t *zero_point);


/* ---- TPU v1 ---------------------------------------------------------------- */


#endif
