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

/* TFLite's activation quantization (quantize.c): the int8 scale and zero
 * point of a calibrated range [lo, hi], widened to hold 0 and the zero
 * point nudged to an integer as MLIR's fakeQuantAttrsToType does. */
void lite_quant_params(double lo, double hi, double *scale, int64_t *zero_point);


/* ---- TPU v1 ---------------------------------------------------------------- */
#include "../backend/sim/tpu1.h"

/* The lowering's input (tpu1_lower.c): a chain of matrix layers, each a
 * convolution or a fully connected layer (a convolution whose kernel is its
 * whole input: (n, 1, 1, k) for a matrix, (n, h, w, c) for a flattened
 * feature map), with what Activate does after it. Built from a .tflite
 * file (tpu1_tflite.c) or synthetically (tpu1_models.c). */
typedef struct lite_tpu1_layer {
    int32_t n, h, w, c;                     /* input */
    int32_t kh, kw, sh, sw, pt, pl, oh, ow; /* the convolution; output (n, oh, ow, out_c) before pooling */
    int32_t out_c;
    int8_t *weights;                        /* (out_c, kh, kw, c), owned */
    int32_t in_zp;
    sy_tpu1_act act;                        /* channels = out_c; bias with in_zp folded in; arrays owned */
    char name[64];                          /* for messages: "CONV_2D (op 1)" */
} lite_tpu1_layer;

typedef struct lite_tpu1_model {
    int32_t n_layers;
    lite_tpu1_layer *layers;
    sy_tpu1_tensor input, output; /* shapes and quantization; offsets set by the lowering */
    char host_tail[96];           /* ops left to the host after the program ("SOFTMAX, DEQUANTIZE") */
    int32_t first_op, end_op;     /* from a .tflite file: the program runs its operators [first_op, end_op); the
                                   * host those before (a float QUANTIZE) and after (SOFTMAX, DEQUANTIZE) */
} lite_tpu1_model;

void lite_tpu1_model_free(lite_tpu1_model *m);
/* A new layer at the end of m (zeroed, act arrays of out_c allocated); NULL when out of memory. */
lite_tpu1_layer *lite_tpu1_add_layer(lite_tpu1_model *m, int32_t out_c);
/* The layers as a TPU v1 program (checked as the loader checks it). */
sy_status lite_tpu1_lower(const lite_tpu1_model *m, sy_tpu1_prog **out);
/* The int8 chain of a .tflite model at batch n: of the file at path, or of one already read (t: not kept). */
sy_status lite_tpu1_from_tflite(const char *path, int32_t batch, lite_tpu1_model *m);
sy_status lite_tpu1_from_file(const io_tflite *t, int32_t batch, lite_tpu1_model *m);


#endif
