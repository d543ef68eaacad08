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


/* ---- TPU v1 ---------------------------------------------------------------- */


#endif
