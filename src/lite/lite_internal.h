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

/* A .tflite file's graph being built (lite_model.c): the graph node of each tensor, the batch the plan runs. */
typedef struct builder {
    const io_tflite *f;
    sy_graph *g;
    sy_node *node; /* per tensor; SY_NONE until an operator computes it */
    int64_t batch;
} builder;
/* Tensor t's shape in the graph: the file's, its first axis scaled from the file's batch to b's. */
sy_shape lite_act_shape(const builder *b, const io_tflite_tensor *t);
/* SY_ERR_UNSUPPORTED: operator i of f named (index, builtin, why), with the operators systolic runs. */
sy_status lite_refuse_op(const io_tflite *f, int32_t i, const char *why);
sy_dtype lite_dtype(int32_t tflite_type); /* FLOAT32 -> SY_F32, INT8 -> SY_I8, INT32 -> SY_I32, else SY_F32 */

/* lite_hybrid.c: the operators of a dynamic-range file (float32 activations: hybrid FULLY_CONNECTED and
 * UNIDIRECTIONAL_SEQUENCE_LSTM with int8 weights, float FULLY_CONNECTED, GATHER, STRIDED_SLICE, LOGISTIC,
 * a DEQUANTIZE of a constant): whether operator i is one of them (by its code and its input's type), its
 * checks when the file is loaded, and its graph nodes (*out the node of its output). */
bool lite_float_op(const io_tflite *f, int32_t i);
const char *lite_float_op_names(void); /* "UNIDIRECTIONAL_SEQUENCE_LSTM GATHER ...", for messages */
sy_status lite_float_check(const io_tflite *f, int32_t i);
sy_status lite_float_build(builder *b, int32_t i, sy_node *out);


/* ---- Post-training quantization -------------------------------------------- */

/* TFLite's activation quantization (quantize.c): the int8 scale and zero
 * point of a calibrated range [lo, hi], widened to hold 0 and the zero
 * point nudged to an integer as MLIR's fakeQuantAttrsToType does. */
void lite_quant_params(double lo, double hi, double *scale, int64_t *zero_point);

/* The .tflite file quantize.c builds from a Keras model, node by node (full-integer there, dynamic-range in
 * quantize_dynamic.c). */
typedef struct qbuild {
    sy_model *m;
    io_tflite *t;
    int32_t cap_tensors, cap_ops;
    void **blobs; /* constant data the tensors point at */
    int32_t n_blobs, cap_blobs;
    float *lo, *hi;    /* per model node: calibrated range */
    int32_t *tensor;   /* per model node: its tensor (int8, or float32 in a dynamic-range file); -1: not yet */
    int32_t *uses;     /* per model node: layer calls that take it, plus one if a model output */
    bool *done;        /* per model node: lowered (or folded into another) */
} qbuild;

sy_status lite_qb_oom(void);
/* A new tensor: name, TFLite type and dims (batch axis first for activations); no data yet. */
sy_status lite_qb_tensor(qbuild *b, const char *name, int32_t type, int32_t rank, const int64_t *dims, int32_t *index);
/* An activation tensor of node shape s with the batch axis (1, as the converter writes it). */
sy_status lite_qb_activation(qbuild *b, const char *name, int32_t type, const sy_shape *s, int32_t *index);
/* Tensor index's quantization: count scales (zero points zp, NULL: zeros) along dimension dim. */
sy_status lite_qb_quant(qbuild *b, int32_t index, int32_t count, const double *scale, const int64_t *zp, int32_t dim);
/* Tensor index's constant bytes (sy_malloc'd; owned by b from now on, freed on failure too). */
sy_status lite_qb_data(qbuild *b, int32_t index, void *data, size_t size);
/* A new operator (builtin code, version) of n_in inputs (-1: an omitted optional one) and one output. */
sy_status lite_qb_op(qbuild *b, int32_t builtin, int32_t version, const int32_t *in, int32_t n_in, int32_t out,
                     io_tflite_op **op);
sy_status lite_qb_const_i32(qbuild *b, const char *name, const int32_t *v, int32_t rank, const int64_t *dims,
                            int32_t *index);
const char *lite_qb_layer_name(const qbuild *b, int32_t k);
/* Node k's layer's weight whose name ends in /leaf ("kernel", "lstm_cell/recurrent_kernel"), its shape in *shape. */
float *lite_qb_weights(qbuild *b, int32_t k, const char *leaf, sy_shape *shape);
/* SY_ERR_UNSUPPORTED naming node k's layer, its class and why. */
sy_status lite_qb_unsupported(const qbuild *b, int32_t k, const char *why);
/* The model's one subgraph input and output, and the file's schema version: the last step of a build. */
sy_status lite_qb_finish(qbuild *b, int32_t in, int32_t out);

/* quantize_dynamic.c (sy_lite_quantize_dynamic says when): the dynamic-range check before anything runs; the
 * whole file built into b (b->tensor etc. allocated, b->t empty). */
sy_status lite_dynamic_check(const sy_model *m);
sy_status lite_dynamic_build(qbuild *b);


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
