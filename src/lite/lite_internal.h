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

/* lite_model.c: m's graph of int8 ops for a batch of `batch` samples (built again when the batch changes;
 * owned by m, valid until the next call or sy_lite_model_free), its input node (the file's input: float32 or
 * int8) and its output node -- what the TPU v1 lowering and other consumers of the int8 graph start from. */
sy_status lite_model_graph(sy_lite_model *m, int64_t batch, const sy_graph **g, sy_node *x, sy_node *y);


/* ---- Post-training quantization -------------------------------------------- */


/* ---- TPU v1 ---------------------------------------------------------------- */


#endif
