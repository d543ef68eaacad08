/*
 * quantize_dynamic.c - dynamic-range quantization (issue 18): a float Keras
 * model with an Embedding and LSTMs (the IMDB tutorial's) to the .tflite
 * file TF 2.15's TFLiteConverter writes with optimizations=[DEFAULT] and no
 * representative dataset. docs/design/tflite.md, "Dynamic-range
 * quantization", lists what the converter does and this file follows.
 *
 * Nothing is calibrated: activations stay float32, and each weight tensor
 * of 1,024 elements or more is stored int8, symmetric (zero point 0), one
 * scale per tensor, max|w| / 127, each value round(w / scale) with the
 * scale in double, halves away from zero -- the converter's values, every
 * one. Smaller tensors stay float32, as the converter's
 * min_elements_for_weights leaves them.
 *
 *   input        float32 word ids and a CAST to int32 when the Keras model
 *                takes float32 (a Sequential's default: the Embedding
 *                casts); int32 ids when it says Input(dtype="int32")
 *   Embedding    GATHER of the table by the ids; an int8 table gives int8
 *                rows, which a DEQUANTIZE makes float32
 *   LSTM         UNIDIRECTIONAL_SEQUENCE_LSTM: the kernel and the recurrent
 *                kernel split into their gates' (units, inputs) matrices,
 *                the bias into four float vectors, the two states as
 *                (1, units) variable tensors; cell_clip 10 and
 *                asymmetric_quantize_inputs, as the converter sets them;
 *                the last step taken by STRIDED_SLICE unless
 *                return_sequences
 *   Dense        FULLY_CONNECTED (weights (units, inputs)), hybrid with
 *                int8 weights (version 9, asymmetric inputs); relu and
 *                relu6 fused, sigmoid a LOGISTIC after it; a bias of
 *                zeros dropped
 *   Dropout      nothing (inference)
 *
 * docs/design/tflite.md lists what the converter was measured to write.
 * quantize.c calls in here (sy_lite_quantize) and shares the file builder
 * (lite_internal.h's qbuild and lite_qb_*).
 */
#include "lite_internal.h"

#include "../core/core_internal.h"

#include <math.h>
#include <string.h>

/* TFLiteConverter's min_elements_for_weights: a weight tensor below it stays float32. */
#define MIN_ELEMENTS 1024

static const sy_layer *layer_cfg(const sy_model *m, int64_t k) { return &m->layers[m->nodes[k].layer].cfg; }

bool sy_lite_quantize_dynamic(const sy_model *m, const sy_lite_quantize_options *o) {
    if (o && o->dynamic_range) return true;
    if (m->n_inputs >= 1 && model_input_dtype(m, 0) != SY_F32) return true;
    for (int64_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].cfg.kind == SY_LAYER_EMBEDDING || m->layers[i].cfg.kind == SY_LAYER_LSTM) return true;
    return false;
}

static sy_status refuse(const sy_model *m, int64_t k, const char *why) {
    qbuild probe = {.m = (sy_model *)m};
    return lite_qb_unsupported(&probe, (int32_t)k, why);
}

sy_status lite_dynamic_check(const sy_model *m) {
    if (m->n_inputs != 1 || m->n_outputs != 1)
        return sy_error(SY_ERR_UNSUPPORTED, "quantize: model '%s' has %d inputs and %d outputs; one of each is quantized",
                        m->name, m->n_inputs, m->n_outputs);
    for (int64_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].sub)
            return sy_error(SY_ERR_UNSUPPORTED, "quantize: layer '%s' is a nested model; quantize a flat one",
                            m->layers[i].name);
    for (int64_t k = 0; k < m->n_nodes; k++) {
        const model_node *n = &m->nodes[k];
        if (n->layer < 0) continue;
        const sy_layer *l = layer_cfg(m, k);
        const sy_shape *in = &m->nodes[m->edges[n->in_off]].shape;
        switch (l->kind) {
        case SY_LAYER_DROPOUT: break;
        case SY_LAYER_EMBEDDING:
            if (l->mask_zero)
                return refuse(m, k, "has mask_zero=True: TFLite's fused LSTM takes no mask (the converter does not fuse a "
                                    "masked LSTM); train it without");
            if (m->edges[n->in_off] != m->inputs[0].node)
                return refuse(m, k, "does not take the model's input: dynamic-range quantization here takes an "
                                    "Embedding first");
            break;
        case SY_LAYER_LSTM: {
            if (l->go_backwards) return refuse(m, k, "has go_backwards=True, which TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM has not");
            if (l->activation != SY_ACTIVATION_TANH || l->recurrent_activation != SY_ACTIVATION_SIGMOID)
                return refuse(m, k, "has an activation other than tanh or a recurrent_activation other than sigmoid: "
                                    "TFLite's fused LSTM has Keras's defaults only");
            if (!l->use_bias) return refuse(m, k, "has use_bias=False; the file's LSTM takes gate biases");
            int64_t u = l->units, d = in->rank == 2 ? in->dims[1] : 0;
            if (u * d < MIN_ELEMENTS || u * u < MIN_ELEMENTS)
                return refuse(m, k, "has gate matrices (units x features, units x units) under 1,024 elements: the "
                                    "converter leaves those float32, a float LSTM, which systolic's TFLite path does "
                                    "not run");
            break;
        }
        case SY_LAYER_DENSE: {
            if (in->rank != 1)
                return refuse(m, k, "takes an input of rank > 2; FULLY_CONNECTED takes (batch, features) here");
            sy_activation a = l->activation;
            if (a != SY_ACTIVATION_LINEAR && a != SY_ACTIVATION_RELU && a != SY_ACTIVATION_RELU6 &&
                a != SY_ACTIVATION_SIGMOID)
                return refuse(m, k, "has an activation other than linear, relu, relu6 (fused into FULLY_CONNECTED) "
                                    "or sigmoid (a LOGISTIC after it)");
            break;
        }
        default:
            return refuse(m, k, "has no dynamic-range TFLite lowering here; supported: Embedding (first), LSTM, Dense, "
                                "Dropout");
        }
    }
    return SY_OK;
}

/* ---- weights ------------------------------------------------------------------------------------ */

/* A weight tensor: w (rows, cols) float, owned (freed here). Under MIN_ELEMENTS float32; else int8 symmetric
 * with one scale, or one per row when per_row. */
static sy_status weight_tensor(qbuild *b, const char *name, float *w, int64_t rows, int64_t cols, bool per_row,
                               int32_t *index) {
    int64_t dims[2] = {rows, cols}, n = rows * cols;
    sy_status st = lite_qb_tensor(b, name, n < MIN_ELEMENTS ? IO_TFLITE_FLOAT32 : IO_TFLITE_INT8, 2, dims, index);
    if (st) {
        sy_free(w);
        return st;
    }
    if (n < MIN_ELEMENTS) return lite_qb_data(b, *index, w, (size_t)n * sizeof *w);
    int64_t groups = per_row ? rows : 1, per = n / groups;
    double *scale = sy_malloc((size_t)groups * sizeof *scale);
    int8_t *q = sy_malloc((size_t)n);
    if (!scale || !q) {
        sy_free(scale), sy_free(q), sy_free(w);
        return lite_qb_oom();
    }
    for (int64_t g = 0; g < groups; g++) {
        float amax = 0;
        for (int64_t i = 0; i < per; i++) amax = fmaxf(amax, fabsf(w[g * per + i]));
        scale[g] = amax > 0 ? (double)amax / 127.0 : 1.0;
        for (int64_t i = 0; i < per; i++) {
            /* by the scale in double (the file keeps it as float32), halves away from zero, as MLIR's quantizer */
            double v = round((double)w[g * per + i] / scale[g]);
            q[g * per + i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    sy_free(w);
    st = lite_qb_quant(b, *index, (int32_t)groups, scale, NULL, 0);
    sy_free(scale);
    if (st) {
        sy_free(q);
        return st;
    }
    return lite_qb_data(b, *index, q, (size_t)n);
}

/* Rows [off, off + rows) of the columns of src (cols, ld): the matrix (rows, cols) with m[r][c] = src[c][off + r]
 * -- a Keras kernel (inputs, units) read as TFLite's (units, inputs). */
static float *transposed(const float *src, int64_t cols, int64_t ld, int64_t off, int64_t rows) {
    float *m = sy_malloc((size_t)(rows * cols) * sizeof *m);
    if (!m) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) m[r * cols + c] = src[c * ld + off + r];
    return m;
}

static sy_status float_tensor(qbuild *b, const char *name, const float *v, int32_t rank, const int64_t *dims,
                              int32_t *index) {
    int64_t n = 1;
    for (int32_t d = 0; d < rank; d++) n *= dims[d];
    sy_status st = lite_qb_tensor(b, name, IO_TFLITE_FLOAT32, rank, dims, index);
    if (st) return st;
    float *copy = sy_malloc((size_t)(n ? n : 1) * sizeof *copy);
    if (!copy) return lite_qb_oom();
    if (v) memcpy(copy, v, (size_t)n * sizeof *copy);
    else memset(copy, 0, (size_t)n * sizeof *copy);
    return lite_qb_data(b, *index, copy, (size_t)n * sizeof *copy);
}

/* ---- layers ------------------------------------------------------------------------------------- */

/* Embedding: GATHER of the table by the word ids. A table of 1,024 values or more is stored int8 and the
 * GATHER gives int8 rows (the table's scale), which a DEQUANTIZE makes float32 -- the converter's weight-only
 * quantization of the lookup. */
static sy_status lower_embedding(qbuild *b, int32_t k, int32_t x) {
    sy_shape ws;
    float *table = lite_qb_weights(b, k, "embeddings", &ws);
    if (!table || ws.rank != 2) return lite_qb_unsupported(b, k, "has no (rows, features) embeddings variable");
    float *copy = sy_malloc((size_t)sy_shape_count(&ws) * sizeof *copy);
    if (!copy) return lite_qb_oom();
    memcpy(copy, table, (size_t)sy_shape_count(&ws) * sizeof *copy);
    const char *ln = lite_qb_layer_name(b, k);
    char name[LAYER_NAME_MAX + 48];
    snprintf(name, sizeof name, "%s/embedding_lookup", ln);
    int32_t w, rows;
    sy_status st = weight_tensor(b, name, copy, ws.dims[0], ws.dims[1], false, &w);
    if (st) return st;
    bool int8 = b->t->tensors[w].type == IO_TFLITE_INT8;
    snprintf(name, sizeof name, "%s/embedding_lookup1", ln);
    if ((st = lite_qb_activation(b, name, b->t->tensors[w].type, &b->m->nodes[k].shape, &rows))) return st;
    if (int8) {
        double sc = b->t->tensors[w].scale[0];
        if ((st = lite_qb_quant(b, rows, 1, &sc, NULL, 0))) return st;
    }
    int32_t in[2] = {w, x};
    io_tflite_op *op = NULL;
    if ((st = lite_qb_op(b, IO_TFLITE_OP_GATHER, int8 ? 2 : 1, in, 2, rows, &op))) return st;
    b->tensor[k] = rows;
    if (!int8) return SY_OK;
    int32_t f;
    snprintf(name, sizeof name, "%s/embedding_lookup2", ln);
    if ((st = lite_qb_activation(b, name, IO_TFLITE_FLOAT32, &b->m->nodes[k].shape, &f)) ||
        (st = lite_qb_op(b, IO_TFLITE_OP_DEQUANTIZE, 2, &rows, 1, f, NULL)))
        return st;
    b->tensor[k] = f;
    return SY_OK;
}

static sy_status lower_lstm(qbuild *b, int32_t k, int32_t x) {
    const sy_layer *l = &b->m->layers[b->m->nodes[k].layer].cfg;
    sy_shape ks, rs, bs;
    float *kernel = lite_qb_weights(b, k, "kernel", &ks), *rec = lite_qb_weights(b, k, "recurrent_kernel", &rs);
    float *bias = lite_qb_weights(b, k, "bias", &bs);
    int64_t u = l->units, d = ks.dims[0];
    if (!kernel || !rec || !bias || ks.rank != 2 || ks.dims[1] != 4 * u || rs.rank != 2 || rs.dims[0] != u)
        return lite_qb_unsupported(b, k, "has no kernel (features, 4 units), recurrent_kernel and bias");
    const char *ln = lite_qb_layer_name(b, k);
    static const char *gate[4] = {"input", "forget", "cell", "output"};
    char name[LAYER_NAME_MAX + 64];
    int32_t in[24];
    for (int j = 0; j < 24; j++) in[j] = -1;
    in[0] = x;
    sy_status st = SY_OK;
    for (int g = 0; g < 4 && !st; g++) {
        float *wx = transposed(kernel, d, 4 * u, g * u, u), *wh = transposed(rec, u, 4 * u, g * u, u);
        if (!wx || !wh) {
            sy_free(wx), sy_free(wh);
            return lite_qb_oom();
        }
        snprintf(name, sizeof name, "%s/input_to_%s_weights", ln, gate[g]);
        st = weight_tensor(b, name, wx, u, d, false, &in[1 + g]);
        if (st) {
            sy_free(wh);
            return st;
        }
        snprintf(name, sizeof name, "%s/recurrent_to_%s_weights", ln, gate[g]);
        if ((st = weight_tensor(b, name, wh, u, u, false, &in[5 + g]))) return st;
        snprintf(name, sizeof name, "%s/%s_gate_bias", ln, gate[g]);
        st = float_tensor(b, name, bias + g * u, 1, &u, &in[12 + g]);
    }
    int64_t sd[2] = {1, u}; /* the states: zero variable tensors of the file's batch (1), no data */
    snprintf(name, sizeof name, "%s/zeros", ln);
    if (!st) st = lite_qb_tensor(b, name, IO_TFLITE_FLOAT32, 2, sd, &in[18]);
    snprintf(name, sizeof name, "%s/zeros1", ln);
    if (!st) st = lite_qb_tensor(b, name, IO_TFLITE_FLOAT32, 2, sd, &in[19]);
    if (st) return st;
    b->t->tensors[in[18]].is_variable = b->t->tensors[in[19]].is_variable = 1;
    const sy_shape *xs = &b->m->nodes[b->m->edges[b->m->nodes[k].in_off]].shape;
    sy_shape seq = sy_shape_of(2, xs->dims[0], u);
    int32_t y;
    snprintf(name, sizeof name, "%s/unidirectional_sequence_lstm", ln);
    if ((st = lite_qb_activation(b, name, IO_TFLITE_FLOAT32, l->return_sequences ? &b->m->nodes[k].shape : &seq, &y)))
        return st;
    io_tflite_op *op;
    if ((st = lite_qb_op(b, IO_TFLITE_OP_UNIDIRECTIONAL_SEQUENCE_LSTM, 3, in, 24, y, &op))) return st;
    op->activation = 4;       /* TANH */
    op->cell_clip = 10.0f;    /* the converter's fused Keras LSTM clips the cell state at 10 */
    op->asymmetric_quantize_inputs = 1;
    if (l->return_sequences) {
        b->tensor[k] = y;
        return SY_OK;
    }
    /* the last step: y[:, -1, :] */
    int32_t begin[3] = {0, -1, 0}, end[3] = {0, 0, 0}, strides[3] = {1, 1, 1}, ts[3], last;
    int64_t three = 3;
    snprintf(name, sizeof name, "%s/strided_slice/begin", ln);
    if ((st = lite_qb_const_i32(b, name, begin, 1, &three, &ts[0]))) return st;
    snprintf(name, sizeof name, "%s/strided_slice/end", ln);
    if ((st = lite_qb_const_i32(b, name, end, 1, &three, &ts[1]))) return st;
    snprintf(name, sizeof name, "%s/strided_slice/strides", ln);
    if ((st = lite_qb_const_i32(b, name, strides, 1, &three, &ts[2]))) return st;
    snprintf(name, sizeof name, "%s/strided_slice", ln);
    if ((st = lite_qb_activation(b, name, IO_TFLITE_FLOAT32, &b->m->nodes[k].shape, &last))) return st;
    int32_t sin[4] = {y, ts[0], ts[1], ts[2]};
    if ((st = lite_qb_op(b, IO_TFLITE_OP_STRIDED_SLICE, 1, sin, 4, last, &op))) return st;
    op->begin_mask = 5, op->end_mask = 5, op->shrink_axis_mask = 2;
    b->tensor[k] = last;
    return SY_OK;
}

static sy_status lower_dense(qbuild *b, int32_t k, int32_t x) {
    const sy_layer *l = &b->m->layers[b->m->nodes[k].layer].cfg;
    sy_shape ks;
    float *kernel = lite_qb_weights(b, k, "kernel", &ks), *bias = l->use_bias ? lite_qb_weights(b, k, "bias", NULL) : NULL;
    if (!kernel || ks.rank != 2) return lite_qb_unsupported(b, k, "has no (inputs, units) kernel");
    int64_t n = ks.dims[1], d = ks.dims[0];
    const char *ln = lite_qb_layer_name(b, k);
    char name[LAYER_NAME_MAX + 48];
    float *w = transposed(kernel, d, n, 0, n);
    if (!w) return lite_qb_oom();
    int32_t in[3] = {x, -1, -1}, y;
    snprintf(name, sizeof name, "%s/MatMul", ln);
    sy_status st = weight_tensor(b, name, w, n, d, false, &in[1]);
    bool nonzero = false;
    for (int64_t i = 0; bias && i < n; i++) nonzero |= bias[i] != 0;
    snprintf(name, sizeof name, "%s/BiasAdd/ReadVariableOp", ln);
    if (!st && nonzero) st = float_tensor(b, name, bias, 1, &n, &in[2]);
    bool sigmoid = l->activation == SY_ACTIVATION_SIGMOID;
    snprintf(name, sizeof name, sigmoid ? "%s/BiasAdd" : "%s", ln);
    if (!st) st = lite_qb_activation(b, name, IO_TFLITE_FLOAT32, &b->m->nodes[k].shape, &y);
    io_tflite_op *op = NULL;
    if (!st) st = lite_qb_op(b, IO_TFLITE_OP_FULLY_CONNECTED, b->t->tensors[in[1]].type == IO_TFLITE_INT8 ? 9 : 1, in, 3, y, &op);
    if (st) return st;
    op->activation = l->activation == SY_ACTIVATION_RELU ? 1 : l->activation == SY_ACTIVATION_RELU6 ? 3 : 0;
    op->asymmetric_quantize_inputs = b->t->tensors[in[1]].type == IO_TFLITE_INT8;
    b->tensor[k] = y;
    if (!sigmoid) return SY_OK;
    int32_t s;
    snprintf(name, sizeof name, "%s", ln);
    if ((st = lite_qb_activation(b, name, IO_TFLITE_FLOAT32, &b->m->nodes[k].shape, &s)) ||
        (st = lite_qb_op(b, IO_TFLITE_OP_LOGISTIC, 1, &y, 1, s, NULL)))
        return st;
    b->tensor[k] = s;
    return SY_OK;
}

sy_status lite_dynamic_build(qbuild *b) {
    sy_model *m = b->m;
    for (int64_t i = 0; i < m->n_nodes; i++) b->tensor[i] = -1;
    int32_t node0 = m->inputs[0].node, x, ids;
    char name[LAYER_NAME_MAX + 48];
    snprintf(name, sizeof name, "serving_default_%s:0", m->inputs[0].name[0] ? m->inputs[0].name : "input_1");
    /* Keras's input is float32 unless the model says int32 (an Input(dtype="int32")); word ids then come in as
     * floats and a CAST makes them the Embedding's int32, as in the converter's file */
    const char *kdt = m->inputs[0].dtype;
    bool float_in = model_input_dtype(m, 0) == SY_F32 || !kdt[0] || strncmp(kdt, "int", 3) != 0;
    sy_status st = lite_qb_activation(b, name, float_in ? IO_TFLITE_FLOAT32 : IO_TFLITE_INT32, &m->nodes[node0].shape, &x);
    if (st) return st;
    ids = x;
    if (float_in && model_input_dtype(m, 0) != SY_F32) {
        int64_t e = 0; /* the layer that takes the input (an Embedding: lite_dynamic_check) */
        while (e < m->n_nodes && (m->nodes[e].layer < 0 || m->edges[m->nodes[e].in_off] != node0)) e++;
        snprintf(name, sizeof name, "%s/Cast", e < m->n_nodes ? lite_qb_layer_name(b, (int32_t)e) : "input");
        if ((st = lite_qb_activation(b, name, IO_TFLITE_INT32, &m->nodes[node0].shape, &ids)) ||
            (st = lite_qb_op(b, IO_TFLITE_OP_CAST, 1, &x, 1, ids, NULL)))
            return st;
    }
    b->tensor[node0] = ids;
    for (int64_t k = 0; k < m->n_nodes; k++) {
        const model_node *n = &m->nodes[k];
        if (n->layer < 0) continue;
        int32_t in = b->tensor[m->edges[n->in_off]];
        switch (layer_cfg(m, k)->kind) {
        case SY_LAYER_DROPOUT: b->tensor[k] = in; break;
        case SY_LAYER_EMBEDDING: st = lower_embedding(b, (int32_t)k, in); break;
        case SY_LAYER_LSTM: st = lower_lstm(b, (int32_t)k, in); break;
        case SY_LAYER_DENSE: st = lower_dense(b, (int32_t)k, in); break;
        default: st = lite_qb_unsupported(b, (int32_t)k, "has no dynamic-range TFLite lowering here");
        }
        if (st) return st;
    }
    int32_t y = b->tensor[m->outputs[0]];
    if (y < 0) return sy_error(SY_ERR_INTERNAL, "quantize: the model's output was not lowered");
    if (y == x || y == ids) return sy_error(SY_ERR_UNSUPPORTED, "quantize: model '%s' computes nothing to quantize", m->name);
    io_tflite *t = b->t;
    /* one operator code per builtin and version: with a hybrid FULLY_CONNECTED (version 9) in the file, the
     * converter gives the float ones version 9 too */
    bool hybrid_fc = false;
    for (int32_t i = 0; i < t->n_ops; i++) hybrid_fc |= t->ops[i].builtin == IO_TFLITE_OP_FULLY_CONNECTED && t->ops[i].version == 9;
    for (int32_t i = 0; hybrid_fc && i < t->n_ops; i++)
        if (t->ops[i].builtin == IO_TFLITE_OP_FULLY_CONNECTED) t->ops[i].version = 9;
    sy_free(t->tensors[y].name);
    if (!(t->tensors[y].name = sy_strdup("StatefulPartitionedCall:0"))) return lite_qb_oom();
    return lite_qb_finish(b, x, y);
}
