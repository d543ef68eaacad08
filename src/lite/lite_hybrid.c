/*
 * lite_hybrid.c - the operators of a dynamic-range .tflite file (issue 18):
 * what TFLiteConverter writes with optimizations=[DEFAULT] and no
 * representative dataset, and what `systolic quantize` writes for a model
 * with an Embedding or an LSTM. Activations stay float32; weights of 1,024
 * elements or more are int8, and the operators that take them are TFLite's
 * hybrid kernels, which quantize their float inputs row by row on the fly
 * (docs/design/tflite.md, "Dynamic-range quantization"):
 *
 *   UNIDIRECTIONAL_SEQUENCE_LSTM  int8 gate weights -> HLSTM (cpu/qhybrid.c)
 *   FULLY_CONNECTED               int8 weights -> HFULLY_CONNECTED; float
 *                                 weights (under 1,024 elements) -> the
 *                                 graph's matmul, bias and activation
 *   GATHER                        an embedding lookup: the graph's gather
 *   STRIDED_SLICE                 the LSTM's last step: slice and reshape
 *   LOGISTIC, TANH (float)        the graph's sigmoid, tanh
 *   RESHAPE (float)               the graph's reshape
 *   DEQUANTIZE of a constant      the constant's float values (weights
 *                                 stored int8 for a float operator)
 *   CAST of the float input       word ids fed as floats (a Keras model's
 *                                 default float32 input): the graph takes
 *                                 int32, converted as the plan is fed
 *
 * (GATHER of an int8 table then DEQUANTIZE of its int8 rows -- the
 * converter's weight-only quantization of an Embedding -- is GATHER here
 * and lite_model.c's int8 DEQUANTIZE.)
 *
 * lite_model.c asks lite_float_op() which operators are these (by code and
 * by their input's type: an int8 FULLY_CONNECTED stays lite_model.c's) and
 * calls lite_float_check() for each when the file loads, so that anything
 * else -- a peephole or projection LSTM, CIFG, layer norm, a float LSTM,
 * per-channel LSTM weights, a strided slice with strides or an ellipsis --
 * is refused by name before a graph is built.
 */
#include "lite_internal.h"

#include "../graph/graph_internal.h"

#include <math.h>
#include <string.h>

/* TFLite's ActivationFunctionType codes the float and hybrid kernels take. */
enum { ACT_NONE = 0, ACT_RELU = 1, ACT_RELU_N1_TO_1 = 2, ACT_RELU6 = 3, ACT_TANH = 4 };

const char *lite_float_op_names(void) {
    return "UNIDIRECTIONAL_SEQUENCE_LSTM FULLY_CONNECTED GATHER STRIDED_SLICE LOGISTIC TANH RESHAPE DEQUANTIZE CAST";
}

static const io_tflite_tensor *tensor_at(const io_tflite *f, const io_tflite_op *op, int j) {
    return j < op->n_inputs && op->inputs[j] >= 0 ? &f->tensors[op->inputs[j]] : NULL;
}

bool lite_float_op(const io_tflite *f, int32_t i) {
    const io_tflite_op *op = &f->ops[i];
    if (op->custom_code || op->n_inputs < 1 || op->inputs[0] < 0) return false;
    const io_tflite_tensor *x = &f->tensors[op->inputs[0]];
    switch (op->builtin) {
    case IO_TFLITE_OP_UNIDIRECTIONAL_SEQUENCE_LSTM:
    case IO_TFLITE_OP_GATHER:
    case IO_TFLITE_OP_STRIDED_SLICE:
    case IO_TFLITE_OP_CAST: return true;
    case IO_TFLITE_OP_FULLY_CONNECTED:
    case IO_TFLITE_OP_LOGISTIC:
    case IO_TFLITE_OP_TANH:
    case IO_TFLITE_OP_RESHAPE: return x->type == IO_TFLITE_FLOAT32;
    case IO_TFLITE_OP_DEQUANTIZE: return x->data != NULL; /* a constant: weight-only quantization */
    default: return false;
    }
}

/* ---- the checks when the file loads ------------------------------------------------------------ */

static sy_status refuse(const io_tflite *f, int32_t i, const char *fmt, const char *name) {
    char why[256];
    snprintf(why, sizeof why, fmt, name ? name : "");
    return lite_refuse_op(f, i, why);
}

/* An int8 constant with one scale and zero point 0 (an LSTM's gate weights), or per channel along dim 0 when
 * `per_channel` (a FULLY_CONNECTED's). */
static bool symmetric_int8(const io_tflite_tensor *t, bool per_channel) {
    if (!t || !t->data || t->type != IO_TFLITE_INT8 || t->quant_count < 1) return false;
    if (t->quant_count > 1 && (!per_channel || t->quant_dim != 0)) return false;
    for (int32_t c = 0; c < t->quant_count; c++)
        if (t->zero_point[c] != 0 || !(t->scale[c] > 0) || !isfinite(t->scale[c])) return false;
    return true;
}

static bool float_const(const io_tflite_tensor *t, int64_t n) {
    return t && t->data && t->type == IO_TFLITE_FLOAT32 && (int64_t)t->data_size == 4 * n;
}

static bool is_float(const io_tflite_tensor *t) { return t && t->type == IO_TFLITE_FLOAT32; }

static sy_status check_lstm(const io_tflite *f, int32_t i) {
    const io_tflite_op *op = &f->ops[i];
    const io_tflite_tensor *x = tensor_at(f, op, 0), *y = &f->tensors[op->outputs[0]];
    if (op->n_inputs != 20 && op->n_inputs != 24) return refuse(f, i, "it has other than 20 or 24 inputs%s", NULL);
    if (!is_float(x) || !is_float(y) || x->rank != 3 || y->rank != 3)
        return refuse(f, i, "its input and output must be float32 (batch, steps, features)%s", NULL);
    if (op->time_major) return refuse(f, i, "time_major inputs (steps first) are not supported%s", NULL);
    const io_tflite_tensor *w1 = tensor_at(f, op, 1);
    if (!w1) return refuse(f, i, "a CIFG LSTM (no input gate) is not supported%s", NULL);
    for (int j = 9; j < op->n_inputs; j++)
        if (j != 12 && j != 13 && j != 14 && j != 15 && j != 18 && j != 19 && tensor_at(f, op, j))
            return refuse(f, i, "it has peephole, projection or layer-norm weights, which Keras's LSTM does not%s", NULL);
    int64_t u = y->shape[2], in = x->shape[2];
    for (int j = 1; j <= 8; j++) {
        const io_tflite_tensor *w = tensor_at(f, op, j);
        if (w && w->data && w->type == IO_TFLITE_FLOAT32)
            return refuse(f, i, "its weights '%s' are float32: a float LSTM, which systolic's TFLite path does not run "
                          "(dynamic-range quantization leaves weights under 1,024 elements float)", w->name);
        if (!symmetric_int8(w, false))
            return refuse(f, i, "its gate weights '%s' are not an int8 constant with one scale and zero point 0",
                          w ? w->name : "(absent)");
        if (w->rank != 2 || w->shape[0] != u || w->shape[1] != (j <= 4 ? in : u))
            return refuse(f, i, "its gate weights '%s' are not (units, inputs) and (units, units)", w->name);
    }
    for (int j = 12; j <= 15; j++)
        if (!float_const(tensor_at(f, op, j), u)) return refuse(f, i, "its gate biases are not float32 constants of units values%s", NULL);
    for (int j = 18; j <= 19; j++) {
        const io_tflite_tensor *s = tensor_at(f, op, j);
        if (!is_float(s)) return refuse(f, i, "its states are not float32%s", NULL);
        if (s->data)
            for (size_t k = 0; k + 4 <= s->data_size; k += 4) {
                float v;
                memcpy(&v, s->data + k, 4);
                if (v != 0) return refuse(f, i, "its state '%s' starts at other than zeros", s->name);
            }
    }
    if (op->activation != ACT_TANH) return refuse(f, i, "its cell activation is not tanh (Keras's LSTM default)%s", NULL);
    if (op->proj_clip != 0) return refuse(f, i, "a projection clip without a projection%s", NULL);
    if (!(op->cell_clip >= 0)) return refuse(f, i, "its cell clip is negative%s", NULL);
    if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1])
        return refuse(f, i, "its output is not (batch, steps, units) of its input%s", NULL);
    return SY_OK;
}

sy_status lite_float_check(const io_tflite *f, int32_t i) {
    const io_tflite_op *op = &f->ops[i];
    const io_tflite_tensor *x = tensor_at(f, op, 0), *y = &f->tensors[op->outputs[0]];
    for (int32_t d = 0; d < y->rank; d++)
        if (y->shape[d] == 0) return refuse(f, i, "its output '%s' is empty (a dimension is 0)", y->name);
    switch (op->builtin) {
    case IO_TFLITE_OP_UNIDIRECTIONAL_SEQUENCE_LSTM: return check_lstm(f, i);
    case IO_TFLITE_OP_FULLY_CONNECTED: {
        const io_tflite_tensor *w = tensor_at(f, op, 1), *bias = tensor_at(f, op, 2);
        if (!w || !w->data || w->rank != 2 || op->weights_format != 0 || w->shape[1] < 1)
            return refuse(f, i, "its weights are not a constant (units, inputs)%s", NULL);
        if (w->type != IO_TFLITE_FLOAT32 && !symmetric_int8(w, true))
            return refuse(f, i, "its weights '%s' are neither float32 nor int8 with zero point 0", w->name);
        if (bias && !float_const(bias, w->shape[0])) return refuse(f, i, "its bias is not float32, one per unit%s", NULL);
        if (!is_float(y)) return refuse(f, i, "its output is not float32%s", NULL);
        if (op->activation < ACT_NONE || op->activation > ACT_TANH)
            return refuse(f, i, "its fused activation is not NONE, RELU, RELU_N1_TO_1, RELU6 or TANH%s", NULL);
        return SY_OK;
    }
    case IO_TFLITE_OP_GATHER: {
        const io_tflite_tensor *ix = tensor_at(f, op, 1);
        if (!x || x->rank != 2 || (x->type != IO_TFLITE_FLOAT32 && x->type != IO_TFLITE_INT8))
            return refuse(f, i, "its table is not a (rows, features) float32 or int8 tensor%s", NULL);
        if (!ix || ix->type != IO_TFLITE_INT32 || ix->data) return refuse(f, i, "its indices are not int32 word ids%s", NULL);
        if (op->axis != 0 || op->batch_dims != 0) return refuse(f, i, "it gathers along another axis than 0%s", NULL);
        if (y->type != x->type) return refuse(f, i, "its output's type is not its table's%s", NULL);
        return SY_OK;
    }
    case IO_TFLITE_OP_STRIDED_SLICE: {
        for (int j = 1; j <= 3; j++) {
            const io_tflite_tensor *t = tensor_at(f, op, j);
            if (!t || !t->data || t->type != IO_TFLITE_INT32 || (int32_t)t->data_size != 4 * x->rank)
                return refuse(f, i, "its begin, end and strides are not constant int32 vectors of its input's rank%s",
                              NULL);
        }
        const io_tflite_tensor *st = tensor_at(f, op, 3);
        for (int32_t d = 0; d < x->rank; d++) {
            int32_t v;
            memcpy(&v, st->data + 4 * d, 4);
            if (v != 1) return refuse(f, i, "it has a stride other than 1%s", NULL);
        }
        if (op->ellipsis_mask || op->new_axis_mask || op->offset || x->rank > SY_MAX_RANK)
            return refuse(f, i, "it has an ellipsis, a new axis or an offset end%s", NULL);
        if (!(op->shrink_axis_mask & 1) && !((op->begin_mask & 1) && (op->end_mask & 1)))
            return refuse(f, i, "it slices the batch axis%s", NULL);
        if (op->shrink_axis_mask & 1) return refuse(f, i, "it removes the batch axis%s", NULL);
        if (x->type != y->type) return refuse(f, i, "its output's type is not its input's%s", NULL);
        return SY_OK;
    }
    case IO_TFLITE_OP_CAST: { /* the model's float input to word ids, done as the plan is fed (lite_model.c) */
        if (op->inputs[0] != f->inputs[0] || x->type != IO_TFLITE_FLOAT32 || y->type != IO_TFLITE_INT32)
            return refuse(f, i, "only a CAST of the model's float32 input to int32 is supported%s", NULL);
        for (int32_t j = 0; j < f->n_ops; j++)
            for (int32_t k = 0; j != i && k < f->ops[j].n_inputs; k++)
                if (f->ops[j].inputs[k] == f->inputs[0])
                    return refuse(f, i, "the model's input it casts is read by other operators too%s", NULL);
        return SY_OK;
    }
    case IO_TFLITE_OP_DEQUANTIZE: {
        if (x->type != IO_TFLITE_INT8 || x->quant_count < 1 || (x->quant_count > 1 && x->quant_dim != 0) ||
            !is_float(y))
            return refuse(f, i, "its constant '%s' is not int8 quantized per tensor or along dimension 0", x->name);
        int64_t ny = 1;
        for (int32_t d = 0; d < y->rank; d++) ny *= y->shape[d];
        if (ny != (int64_t)x->data_size || y->rank > SY_MAX_RANK)
            return refuse(f, i, "its output '%s' does not hold its constant's values", y->name);
        return SY_OK;
    }
    default: /* LOGISTIC, TANH, RESHAPE on float32 */
        if (!is_float(y)) return refuse(f, i, "its output is not float32%s", NULL);
        return SY_OK;
    }
}

/* ---- the graph -------------------------------------------------------------------------------- */

static sy_node konst(builder *b, const io_tflite_tensor *t, sy_dtype dt, sy_shape s, const void *data) {
    return graph_constant(b->g, t->name, dt, s, data);
}

static sy_node float_vector(builder *b, const io_tflite_tensor *t) {
    int64_t n = (int64_t)t->data_size / 4;
    return konst(b, t, SY_F32, sy_shape_of(1, n), t->data); /* graph_constant copies: alignment is its */
}

/* The int8 weights' scales as a float32 constant (one, or one per row). */
static sy_node scales_of(builder *b, const io_tflite_tensor *w) {
    return graph_constant(b->g, "scales", SY_F32, sy_shape_of(1, (int64_t)w->quant_count), w->scale);
}

static sy_status build_lstm(builder *b, const io_tflite_op *op, sy_node *out) {
    const io_tflite *f = b->f;
    const io_tflite_tensor *w1 = tensor_at(f, op, 1);
    int64_t u = w1->shape[0], in = w1->shape[1];
    int8_t *wx = sy_malloc((size_t)(4 * u * in)), *wh = sy_malloc((size_t)(4 * u * u));
    float *bias = sy_malloc((size_t)(4 * u) * sizeof *bias), scales[8];
    sy_status st = SY_OK;
    if (!wx || !wh || !bias) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "'%s': out of memory for the LSTM's weights", f->path);
        goto done;
    }
    /* the gates in TFLite's order, i f c o: inputs 1-4, 5-8, 12-15 */
    for (int g = 0; g < 4; g++) {
        const io_tflite_tensor *x = tensor_at(f, op, 1 + g), *h = tensor_at(f, op, 5 + g), *bb = tensor_at(f, op, 12 + g);
        memcpy(wx + g * u * in, x->data, (size_t)(u * in));
        memcpy(wh + g * u * u, h->data, (size_t)(u * u));
        memcpy(bias + g * u, bb->data, (size_t)u * sizeof *bias);
        scales[g] = x->scale[0];
        scales[4 + g] = h->scale[0];
    }
    sy_node ins[5] = {b->node[op->inputs[0]], graph_constant(b->g, w1->name, SY_I8, sy_shape_of(2, 4 * u, in), wx),
                      graph_constant(b->g, "recurrent_weights", SY_I8, sy_shape_of(2, 4 * u, u), wh),
                      graph_constant(b->g, "gate_biases", SY_F32, sy_shape_of(1, 4 * u), bias),
                      graph_constant(b->g, "weight_scales", SY_F32, sy_shape_of(1, (int64_t)8), scales)};
    sy_attrs a;
    memset(&a, 0, sizeof a);
    a.hy.asymmetric = op->asymmetric_quantize_inputs != 0;
    a.hy.cell_clip = op->cell_clip;
    *out = graph_add(b->g, SY_OP_HLSTM, ins, 5, &a, NULL);
done:
    sy_free(wx);
    sy_free(wh);
    sy_free(bias);
    return st;
}

/* FULLY_CONNECTED on float32: hybrid with int8 weights, else a float product. TFLite flattens the input to
 * rows of the weights' depth; the output takes the file's shape. */
static sy_status build_fc(builder *b, const io_tflite_op *op, const io_tflite_tensor *y, sy_node *out) {
    const io_tflite *f = b->f;
    const io_tflite_tensor *x = tensor_at(f, op, 0), *w = tensor_at(f, op, 1), *bias = tensor_at(f, op, 2);
    int64_t n = w->shape[0], depth = w->shape[1];
    sy_shape xs = lite_act_shape(b, x), ys = lite_act_shape(b, y);
    int64_t cnt = sy_shape_count(&xs);
    if (cnt % depth) return lite_refuse_op(f, (int32_t)(op - f->ops), "its input does not hold whole rows of the weights' depth");
    sy_node x2 = sy_graph_reshape(b->g, b->node[op->inputs[0]], sy_shape_of(2, cnt / depth, depth)), z;
    if (w->type == IO_TFLITE_INT8) {
        sy_node ins[4] = {x2, konst(b, w, SY_I8, sy_shape_of(2, n, depth), w->data), scales_of(b, w),
                          bias ? float_vector(b, bias) : SY_NONE};
        sy_attrs a;
        memset(&a, 0, sizeof a);
        a.hy.asymmetric = op->asymmetric_quantize_inputs != 0;
        a.hy.act = (uint8_t)op->activation;
        z = graph_add(b->g, SY_OP_HFULLY_CONNECTED, ins, bias ? 4 : 3, &a, NULL);
    } else {
        z = sy_graph_matmul(b->g, x2, konst(b, w, SY_F32, sy_shape_of(2, n, depth), w->data), false, true);
        if (bias) z = sy_graph_bias_add(b->g, z, float_vector(b, bias));
        if (op->activation == ACT_RELU) z = sy_graph_relu(b->g, z);
        else if (op->activation == ACT_TANH) z = sy_graph_tanh(b->g, z);
        else if (op->activation == ACT_RELU6 || op->activation == ACT_RELU_N1_TO_1) {
            float lo = op->activation == ACT_RELU6 ? 0.0f : -1.0f, hi = op->activation == ACT_RELU6 ? 6.0f : 1.0f;
            sy_node l = sy_graph_fill(b->g, SY_F32, sy_shape_of(0), lo), h = sy_graph_fill(b->g, SY_F32, sy_shape_of(0), hi);
            /* clamp(z, lo, hi) = lo + relu(z - lo) - relu(z - hi) */
            z = sy_graph_sub(b->g, sy_graph_add(b->g, l, sy_graph_relu(b->g, sy_graph_sub(b->g, z, l))),
                             sy_graph_relu(b->g, sy_graph_sub(b->g, z, h)));
        }
    }
    *out = sy_graph_reshape(b->g, z, ys);
    return SY_OK;
}

static sy_status build_slice(builder *b, const io_tflite_op *op, const io_tflite_tensor *y, sy_node *out) {
    const io_tflite *f = b->f;
    const io_tflite_tensor *x = tensor_at(f, op, 0), *bt = tensor_at(f, op, 1), *et = tensor_at(f, op, 2);
    sy_shape xs = lite_act_shape(b, x);
    int64_t begin[SY_MAX_RANK], size[SY_MAX_RANK];
    for (int32_t d = 0; d < x->rank; d++) {
        int32_t bv, ev;
        memcpy(&bv, bt->data + 4 * d, 4);
        memcpy(&ev, et->data + 4 * d, 4);
        int64_t dim = xs.dims[d], lo = bv < 0 ? bv + dim : bv, hi = ev < 0 ? ev + dim : ev;
        if (op->begin_mask >> d & 1) lo = 0;
        if (op->end_mask >> d & 1) hi = dim;
        if (op->shrink_axis_mask >> d & 1) hi = lo + 1;
        lo = lo < 0 ? 0 : lo > dim ? dim : lo;
        hi = hi < lo ? lo : hi > dim ? dim : hi;
        if (hi == lo) return lite_refuse_op(f, (int32_t)(op - f->ops), "it leaves an empty slice");
        begin[d] = lo;
        size[d] = hi - lo;
    }
    sy_node s = sy_graph_slice(b->g, b->node[op->inputs[0]], begin, size);
    *out = sy_graph_reshape(b->g, s, lite_act_shape(b, y));
    return SY_OK;
}

/* A DEQUANTIZE of an int8 constant: its float values, scale (x - zero point), per tensor or along dim 0. */
static sy_status build_dequantized(builder *b, const io_tflite_tensor *x, const io_tflite_tensor *y, sy_node *out) {
    int64_t n = (int64_t)x->data_size, per = x->quant_count > 1 ? n / x->quant_count : n;
    float *v = sy_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return sy_error(SY_ERR_OUT_OF_MEMORY, "'%s': out of memory for '%s'", b->f->path, x->name);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = x->quant_count > 1 ? i / per : 0;
        v[i] = (float)((double)x->scale[c] * (double)((int8_t)x->data[i] - x->zero_point[c]));
    }
    sy_shape s;
    s.rank = y->rank;
    for (int d = 0; d < y->rank && d < SY_MAX_RANK; d++) s.dims[d] = y->shape[d];
    *out = graph_constant(b->g, y->name, SY_F32, s, v);
    sy_free(v);
    return SY_OK;
}

sy_status lite_float_build(builder *b, int32_t i, sy_node *out) {
    const io_tflite *f = b->f;
    const io_tflite_op *op = &f->ops[i];
    const io_tflite_tensor *x = tensor_at(f, op, 0), *y = &f->tensors[op->outputs[0]];
    *out = SY_NONE;
    if (op->builtin == IO_TFLITE_OP_DEQUANTIZE) return build_dequantized(b, x, y, out);
    sy_node in = b->node[op->inputs[0]];
    if (op->builtin == IO_TFLITE_OP_GATHER) { /* the table is a constant, or a DEQUANTIZE's output */
        if (in == SY_NONE && x->data) in = konst(b, x, lite_dtype(x->type), sy_shape_of(2, (int64_t)x->shape[0], (int64_t)x->shape[1]), x->data);
        sy_node ix = b->node[op->inputs[1]];
        if (in == SY_NONE || ix == SY_NONE) return lite_refuse_op(f, i, "its table or indices are computed by no earlier operator");
        *out = sy_graph_gather(b->g, in, ix);
    } else if (in == SY_NONE) {
        return lite_refuse_op(f, i, "its input is computed by no earlier operator");
    } else {
        sy_status st = SY_OK;
        switch (op->builtin) {
        case IO_TFLITE_OP_UNIDIRECTIONAL_SEQUENCE_LSTM: st = build_lstm(b, op, out); break;
        case IO_TFLITE_OP_FULLY_CONNECTED: st = build_fc(b, op, y, out); break;
        case IO_TFLITE_OP_STRIDED_SLICE: st = build_slice(b, op, y, out); break;
        case IO_TFLITE_OP_LOGISTIC: *out = sy_graph_sigmoid(b->g, in); break;
        case IO_TFLITE_OP_TANH: *out = sy_graph_tanh(b->g, in); break;
        case IO_TFLITE_OP_RESHAPE: *out = sy_graph_reshape(b->g, in, lite_act_shape(b, y)); break;
        case IO_TFLITE_OP_CAST: *out = in; break; /* the graph's input is int32 already */
        default: return lite_refuse_op(f, i, NULL);
        }
        if (st) return st;
    }
    if (*out == SY_NONE)
        return sy_error(sy_graph_status(b->g) ? sy_graph_status(b->g) : SY_ERR_INTERNAL, "'%s': operator %d (%s): %s",
                        f->path, (int)i, io_tflite_op_name(op->builtin), sy_graph_error(b->g));
    sy_shape ys = lite_act_shape(b, y);
    if (!sy_shape_equal(&b->g->nodes[*out].shape, &ys)) {
        char s1[SY_SHAPE_STR_MAX], s2[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_CORRUPT, "'%s': operator %d (%s) computes %s, but the file says its output '%s' is %s",
                        f->path, (int)i, io_tflite_op_name(op->builtin),
                        sy_shape_format(&b->g->nodes[*out].shape, s1, sizeof s1), y->name,
                        sy_shape_format(&ys, s2, sizeof s2));
    }
    return SY_OK;
}
