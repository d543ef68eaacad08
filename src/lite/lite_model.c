/*
 * lite_model.c - a .tflite file run by systolic (issue 18): the file's
 * first subgraph (io/tflite.c) becomes a graph of the int8 ops
 * (graph/ops_quant.c), compiled into an inference plan and run over
 * batches like any other plan (predict), and scored on a labelled set
 * (evaluate). docs/design/tflite.md says what runs and how.
 *
 * Building the graph is where TFLite's Prepare functions are redone: each
 * operator's float scales become the integer multipliers, shifts, zero
 * points and activation clamps its kernel takes, computed in double as
 * TFLite computes them (conv_multipliers, add_params, act_range), so that
 * the kernels' integer arithmetic is TFLite's to the bit. Weights, biases
 * and per-channel multipliers become CONSTANT leaves. The batch is the
 * first axis of every activation tensor: the file's batch (1 as the
 * converter writes it) is replaced by the batch a plan runs.
 *
 * Devices (sy_lite_model_set_device, `--tpu`): the cpu backend on the
 * calling thread, or on a pool of N threads (cpu:N; local: one per core);
 * or the emulated TPU v1 (sim:v1), where the run of matrix operators the
 * TPU v1 lowering takes (tpu1_tflite.c) becomes one program compiled for
 * the batch size, and the operators it leaves to the host -- a float
 * input's QUANTIZE before it, SOFTMAX and DEQUANTIZE after -- are graphs
 * of the same int8 ops around it (the model's "parts": operators [first,
 * end) from a tensor to a tensor), as the paper's host does them. The last
 * partial batch is padded with zeros and its extra outputs dropped; the
 * program's Table 3 counters are summed over its runs. The values are the
 * same bits on every device: integer arithmetic, TFLite's.
 *
 * A dynamic-range file (int8 weights, float32 activations: an Embedding
 * and LSTM model's) has float operators besides: lite_hybrid.c checks and
 * builds those (lite_float_op says which), this file the int8 ones; a
 * float32 input that only a CAST to int32 reads (word ids) becomes an
 * int32 graph input, converted as the plan is fed.
 *
 * Anything outside the supported set is refused by name before a graph is
 * built: an operator (with its index and the ops that are supported), a
 * tensor type, a float32 model (systolic runs int8 TFLite models; a
 * float32 one is a Keras model better run from its .h5), per-channel
 * quantization of an activation, an option value the kernels do not have
 * (dilated depthwise, a fused activation TFLite's int8 kernels refuse).
 */
#include "lite_internal.h"

#include "../compiler/compiler_internal.h"
#include "../core/core_internal.h"
#include "../graph/graph_internal.h"
#include "../io/io_internal.h"
#include "systolic/distribute.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the int8 operators systolic runs (io/tflite.h's BuiltinOperator codes) */
static const int32_t supported[] = {IO_TFLITE_OP_QUANTIZE,        IO_TFLITE_OP_DEQUANTIZE,  IO_TFLITE_OP_CONV_2D,
                                    IO_TFLITE_OP_DEPTHWISE_CONV_2D, IO_TFLITE_OP_FULLY_CONNECTED, IO_TFLITE_OP_ADD,
                                    IO_TFLITE_OP_MAX_POOL_2D,     IO_TFLITE_OP_AVERAGE_POOL_2D, IO_TFLITE_OP_MEAN,
                                    IO_TFLITE_OP_RESHAPE,         IO_TFLITE_OP_SOFTMAX,     IO_TFLITE_OP_PAD};
#define N_SUPPORTED ((int)(sizeof supported / sizeof supported[0]))

/* A run of the file's operators [first, end) as a graph of the int8 ops and its plan, built for one batch:
 * all of them on the cpu backend; on the TPU v1 the host's, before the program and after it. */
typedef struct lite_part {
    int32_t first, end;  /* operators */
    int32_t in, out;     /* tensors: the graph's input and its output */
    int64_t batch;       /* what graph and plan are built for; 0: neither is */
    sy_graph *graph;
    sy_plan *plan;
    sy_node x, y;
} lite_part;

struct sy_lite_model {
    io_tflite *file;
    int32_t in, out;     /* the subgraph's input and output tensors */
    int64_t file_batch;  /* the first axis of the input as the file gives it */
    bool cast_input;     /* a float32 input only a CAST to int32 reads (word ids): the graph takes int32 */
    lite_part whole;     /* every operator */
    /* sy_lite_model_set_device: the cpu backend's threads, or the TPU v1 */
    sy_pool *pool;       /* NULL: the calling thread alone */
    bool tpu1;
    lite_part pre, post; /* the host's operators around the program */
    sy_tpu1_program *prog;
    int64_t prog_batch;
    int8_t *prog_in, *prog_out; /* (prog_batch, ...) the program's int8 input and output */
    int64_t prog_in_row, prog_out_row; /* their bytes per sample */
    sy_tpu1_counters counters;  /* summed over the runs */
    int64_t runs;
};

static const char *op_name(int32_t code) {
    const char *s = io_tflite_op_name(code);
    return s ? s : "(unknown)";
}

sy_status lite_refuse_op(const io_tflite *f, int32_t i, const char *why) {
    const io_tflite_op *op = &f->ops[i];
    char list[768];
    size_t k = 0;
    for (int j = 0; j < N_SUPPORTED; j++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", j ? " " : "", op_name(supported[j]));
    snprintf(list + k, sizeof list - k, "; with float32 activations (dynamic-range files) %s", lite_float_op_names());
    if (op->custom_code)
        return sy_error(SY_ERR_UNSUPPORTED, "'%s': operator %d is the custom op '%s', which systolic's TFLite path "
                        "does not run; it runs the builtins %s", f->path, (int)i, op->custom_code, list);
    return sy_error(SY_ERR_UNSUPPORTED, "'%s': operator %d is %s (builtin %d)%s%s; systolic's TFLite path runs %s",
                    f->path, (int)i, op_name(op->builtin), (int)op->builtin, why ? ": " : ", which it does not run",
                    why ? why : "", list);
}

/* ---- the checks before a graph is built --------------------------------------------------- */

static const io_tflite_tensor *tensor(const io_tflite *f, int32_t i) { return i >= 0 ? &f->tensors[i] : NULL; }

sy_dtype lite_dtype(int32_t type) {
    return type == IO_TFLITE_INT8 ? SY_I8 : type == IO_TFLITE_INT32 ? SY_I32 : SY_F32;
}

static bool per_tensor_int8(const io_tflite_tensor *t) { return t->type == IO_TFLITE_INT8 && t->quant_count == 1; }

static sy_status check_model(const io_tflite *f) {
    if (f->n_inputs != 1 || f->n_outputs != 1)
        return sy_error(SY_ERR_UNSUPPORTED, "'%s' has %d inputs and %d outputs; systolic runs TFLite models with one "
                        "of each", f->path, (int)f->n_inputs, (int)f->n_outputs);
    bool any_int8 = false;
    for (int32_t i = 0; i < f->n_tensors; i++) any_int8 |= f->tensors[i].type == IO_TFLITE_INT8;
    if (!any_int8)
        return sy_error(SY_ERR_UNSUPPORTED, "'%s' is a float TFLite model (no int8 tensor); systolic runs int8 "
                        "TFLite models (full-integer quantization); run the float model from its Keras file (.h5)",
                        f->path);
    for (int32_t i = 0; i < f->n_ops; i++) {
        const io_tflite_op *op = &f->ops[i];
        if (op->n_outputs != 1 || op->n_inputs < 1 || op->inputs[0] < 0) return lite_refuse_op(f, i, "it has no single output");
        if (lite_float_op(f, i)) { /* a dynamic-range file's operators: lite_hybrid.c */
            sy_status st = lite_float_check(f, i);
            if (st) return st;
            continue;
        }
        bool ok = false;
        for (int j = 0; j < N_SUPPORTED && !ok; j++) ok = !op->custom_code && op->builtin == supported[j];
        if (!ok) return lite_refuse_op(f, i, NULL);
        const io_tflite_tensor *x = tensor(f, op->inputs[0]), *y = tensor(f, op->outputs[0]);
        bool x_ok = op->builtin == IO_TFLITE_OP_QUANTIZE ? x->type == IO_TFLITE_FLOAT32 || per_tensor_int8(x) : per_tensor_int8(x);
        bool y_ok = op->builtin == IO_TFLITE_OP_DEQUANTIZE ? y->type == IO_TFLITE_FLOAT32 : per_tensor_int8(y);
        if (!x_ok || !y_ok) {
            char why[256];
            const io_tflite_tensor *t = x_ok ? y : x;
            snprintf(why, sizeof why, "its %s '%s' is %s%s, where systolic takes int8 with one scale", x_ok ? "output" : "input",
                     t->name, io_tflite_type_name(t->type), t->quant_count > 1 ? " quantized per channel" : "");
            return lite_refuse_op(f, i, why);
        }
        if (op->activation < 0 || op->activation > 3)
            return lite_refuse_op(f, i, "its fused activation is not NONE, RELU, RELU_N1_TO_1 or RELU6");
        if (x->data && op->builtin != IO_TFLITE_OP_PAD) return lite_refuse_op(f, i, "its input is a constant");
        for (int j = 0; j < 2; j++) { /* an empty activation has no meaning here; refused before a kernel divides by it */
            const io_tflite_tensor *t = j ? y : x;
            bool empty = t->rank < 1;
            for (int32_t d = 0; d < t->rank; d++) empty |= t->shape[d] == 0;
            if (empty) {
                char why[160];
                snprintf(why, sizeof why, "its %s '%s' is %s", j ? "output" : "input", t->name,
                         t->rank < 1 ? "a scalar" : "empty (a dimension is 0)");
                return lite_refuse_op(f, i, why);
            }
        }
    }
    const io_tflite_tensor *in = tensor(f, f->inputs[0]);
    if (in->rank < 1 || in->data)
        return sy_error(SY_ERR_UNSUPPORTED, "'%s': the input tensor '%s' has no batch axis", f->path, in->name);
    return SY_OK;
}

/* ---- TFLite's Prepare arithmetic ---------------------------------------------------------- */

/* CalculateActivationRangeQuantized for int8: the fused activation as a clamp on the output's integers. */
static void act_range(int32_t act, const io_tflite_tensor *y, int32_t *lo, int32_t *hi) {
    float scale = y->scale[0];
    int32_t zp = (int32_t)y->zero_point[0];
#define Q(f) (zp + (int32_t)roundf((f) / scale))
    *lo = -128, *hi = 127;
    if (act == 1 || act == 3) *lo = Q(0.0f) > -128 ? Q(0.0f) : -128;
    if (act == 3) *hi = Q(6.0f) < 127 ? Q(6.0f) : 127;
    if (act == 2) {
        *lo = Q(-1.0f) > -128 ? Q(-1.0f) : -128;
        *hi = Q(1.0f) < 127 ? Q(1.0f) : 127;
    }
#undef Q
}

/* PopulateConvolutionQuantizationParams: channel c's input scale x filter scale / output scale, in double,
 * as a Q31 multiplier and shift; (2, n): multipliers, then shifts. */
static void conv_multipliers(const io_tflite_tensor *x, const io_tflite_tensor *w, const io_tflite_tensor *y,
                             int64_t n, int32_t *m) {
    for (int64_t c = 0; c < n; c++) {
        double ws = (double)w->scale[w->quant_count > 1 ? c : 0];
        int shift;
        sy_q_multiplier((double)x->scale[0] * ws / (double)y->scale[0], &m[c], &shift);
        m[n + c] = shift;
    }
}

/* ---- building the graph ------------------------------------------------------------------- */

sy_shape lite_act_shape(const builder *b, const io_tflite_tensor *t) {
    int64_t d[SY_MAX_RANK];
    int rank = t->rank < SY_MAX_RANK ? t->rank : SY_MAX_RANK;
    for (int i = 0; i < rank; i++) d[i] = t->shape[i];
    if (rank) d[0] = d[0] / (b->f->tensors[b->f->inputs[0]].shape[0] ? b->f->tensors[b->f->inputs[0]].shape[0] : 1) *
                     b->batch;
    return sy_shape_from(rank, d);
}

static sy_node constant_of(builder *b, int32_t idx, sy_dtype dt, sy_shape s, const void *data) {
    return graph_constant(b->g, b->f->tensors[idx].name, dt, s, data);
}

/* The filter, bias and multipliers of a product with n outputs, as the int8 ops take them; the filter's
 * bytes reordered by `depthwise` from (1, KH, KW, C M) to (C M, KH, KW, 1). */
static sy_status product_leaves(builder *b, const io_tflite_op *op, int64_t n, bool depthwise, sy_node *in) {
    const io_tflite *f = b->f;
    const io_tflite_tensor *x = tensor(f, op->inputs[0]), *w = op->n_inputs > 1 ? tensor(f, op->inputs[1]) : NULL,
                           *bias = op->n_inputs > 2 ? tensor(f, op->inputs[2]) : NULL,
                           *y = tensor(f, op->outputs[0]);
    if (!w || !w->data || w->type != IO_TFLITE_INT8 || w->quant_count < 1 ||
        (w->quant_count > 1 && w->quant_count != n))
        return sy_error(SY_ERR_UNSUPPORTED, "'%s': %s's weights must be a constant int8 tensor quantized per tensor or "
                        "per output channel", f->path, op_name(op->builtin));
    for (int32_t i = 0; i < w->quant_count; i++)
        if (w->zero_point[i] != 0)
            return sy_error(SY_ERR_UNSUPPORTED, "'%s': %s's weights '%s' have zero point %lld; TFLite's int8 kernels "
                            "take symmetric weights", f->path, op_name(op->builtin), w->name, (long long)w->zero_point[i]);
    if (bias && (!bias->data || bias->type != IO_TFLITE_INT32 || (int64_t)bias->data_size != n * 4))
        return sy_error(SY_ERR_UNSUPPORTED, "'%s': %s's bias '%s' must be a constant int32 tensor of %lld values",
                        f->path, op_name(op->builtin), bias->name, (long long)n);
    int64_t count = (int64_t)w->data_size, k = count / n;
    int8_t *wd = sy_malloc((size_t)count);
    int32_t *bd = sy_calloc((size_t)n, sizeof *bd), *md = sy_malloc((size_t)(2 * n) * sizeof *md);
    if (!wd || !bd || !md) {
        sy_free(wd), sy_free(bd), sy_free(md);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "'%s': out of memory for %s's weights", f->path, op_name(op->builtin));
    }
    if (depthwise) /* (1, KH, KW, n) -> (n, KH, KW, 1) */
        for (int64_t t = 0; t < k; t++)
            for (int64_t c = 0; c < n; c++) wd[c * k + t] = (int8_t)w->data[t * n + c];
    else
        memcpy(wd, w->data, (size_t)count);
    if (bias) memcpy(bd, bias->data, (size_t)n * 4);
    conv_multipliers(x, w, y, n, md);
    sy_shape ws;
    if (w->rank == 4)
        ws = depthwise ? sy_shape_of(4, n, (int64_t)w->shape[1], (int64_t)w->shape[2], (int64_t)1)
                       : sy_shape_of(4, n, (int64_t)w->shape[1], (int64_t)w->shape[2], (int64_t)w->shape[3]);
    else
        ws = sy_shape_of(2, n, k);
    in[1] = constant_of(b, op->inputs[1], SY_I8, ws, wd);
    in[2] = graph_constant(b->g, bias ? bias->name : "bias", SY_I32, sy_shape_of(1, n), bd);
    in[3] = graph_constant(b->g, "multipliers", SY_I32, sy_shape_of(2, (int64_t)2, n), md);
    sy_free(wd), sy_free(bd), sy_free(md);
    return SY_OK;
}

static sy_status build_op(builder *b, int32_t i) {
    const io_tflite *f = b->f;
    const io_tflite_op *op = &f->ops[i];
    if (lite_float_op(f, i)) {
        sy_node out = SY_NONE;
        sy_status st = lite_float_build(b, i, &out);
        if (st) return st;
        b->node[op->outputs[0]] = out;
        return SY_OK;
    }
    const io_tflite_tensor *x = tensor(f, op->inputs[0]), *y = tensor(f, op->outputs[0]);
    sy_node in[4] = {b->node[op->inputs[0]], SY_NONE, SY_NONE, SY_NONE};
    if (in[0] == SY_NONE) return lite_refuse_op(f, i, "its input is computed by no earlier operator");
    sy_attrs a;
    memset(&a, 0, sizeof a);
    a.q.x_zp = (int32_t)(x->quant_count ? x->zero_point[0] : 0);
    a.q.x_scale = x->quant_count ? x->scale[0] : 0;
    a.q.y_zp = (int32_t)(y->quant_count ? y->zero_point[0] : 0);
    a.q.y_scale = y->quant_count ? y->scale[0] : 0;
    if (y->quant_count) act_range(op->activation, y, &a.q.act_min, &a.q.act_max);
    sy_shape ys = lite_act_shape(b, y);
    sy_node out = SY_NONE;
    sy_status st = SY_OK;
    int shift;
    switch (op->builtin) {
    case IO_TFLITE_OP_QUANTIZE:
        if (x->type == IO_TFLITE_INT8) { /* a requantize: input scale / output scale */
            sy_q_multiplier((double)x->scale[0] / (double)y->scale[0], &a.q.mult[0], &shift);
            a.q.shift[0] = shift;
        }
        out = graph_add(b->g, SY_OP_QUANTIZE, in, 1, &a, NULL);
        break;
    case IO_TFLITE_OP_DEQUANTIZE: out = graph_add(b->g, SY_OP_DEQUANTIZE, in, 1, &a, NULL); break;
    case IO_TFLITE_OP_CONV_2D:
    case IO_TFLITE_OP_DEPTHWISE_CONV_2D: {
        bool dw = op->builtin == IO_TFLITE_OP_DEPTHWISE_CONV_2D;
        int64_t n = y->rank == 4 ? y->shape[3] : 0;
        if (x->rank != 4 || n <= 0) return lite_refuse_op(f, i, "its input or output is not (N, H, W, C)");
        if (dw && (op->dilation_h > 1 || op->dilation_w > 1))
            return lite_refuse_op(f, i, "a dilated depthwise convolution is not supported");
        if (dw && n != (int64_t)x->shape[3] * (op->depth_multiplier > 0 ? op->depth_multiplier : 1))
            return lite_refuse_op(f, i, "its output channels are not input channels x depth_multiplier");
        if ((st = product_leaves(b, op, n, dw, in))) return st;
        a.q.stride[0] = op->stride_h, a.q.stride[1] = op->stride_w;
        a.q.dilation[0] = op->dilation_h, a.q.dilation[1] = op->dilation_w;
        a.q.padding = op->padding == 0 ? SY_PAD_SAME : SY_PAD_VALID;
        a.q.groups = dw ? x->shape[3] : 1;
        out = graph_add(b->g, SY_OP_QCONV2D, in, 4, &a, NULL);
        break;
    }
    case IO_TFLITE_OP_FULLY_CONNECTED: {
        const io_tflite_tensor *w = op->n_inputs > 1 ? tensor(f, op->inputs[1]) : NULL;
        if (!w || w->rank != 2 || op->weights_format != 0) return lite_refuse_op(f, i, "its weights are not (units, inputs)");
        int64_t n = w->shape[0], depth = w->shape[1];
        sy_shape xs = lite_act_shape(b, x);
        int64_t cnt = sy_shape_count(&xs);
        if (depth <= 0 || cnt % depth) return lite_refuse_op(f, i, "its input does not hold whole rows of the weights' depth");
        in[0] = sy_graph_reshape(b->g, in[0], sy_shape_of(2, cnt / depth, depth)); /* TFLite flattens the input */
        if ((st = product_leaves(b, op, n, false, in))) return st;
        out = graph_add(b->g, SY_OP_QFULLY_CONNECTED, in, 4, &a, NULL);
        if (out != SY_NONE && sy_shape_count(&ys) == cnt / depth * n) out = sy_graph_reshape(b->g, out, ys);
        break;
    }
    case IO_TFLITE_OP_ADD: {
        const io_tflite_tensor *x2 = op->n_inputs > 1 ? tensor(f, op->inputs[1]) : NULL;
        if (!x2 || !per_tensor_int8(x2) || b->node[op->inputs[1]] == SY_NONE)
            return lite_refuse_op(f, i, "its second input is not an int8 activation");
        in[1] = b->node[op->inputs[1]];
        /* add.cc's Prepare for int8: both inputs scaled to twice the larger input scale, at 2^20 */
        a.q.x2_zp = (int32_t)x2->zero_point[0];
        a.q.left_shift = 20;
        float s1 = x->scale[0], s2 = x2->scale[0];
        const double twice_max = 2 * (s1 > s2 ? s1 : s2);
        double r[3] = {s1 / twice_max, s2 / twice_max, twice_max / ((1 << 20) * y->scale[0])};
        for (int j = 0; j < 3; j++) {
            sy_q_multiplier(r[j], &a.q.mult[j], &shift);
            a.q.shift[j] = shift;
        }
        out = graph_add(b->g, SY_OP_QADD, in, 2, &a, NULL);
        break;
    }
    case IO_TFLITE_OP_MAX_POOL_2D:
    case IO_TFLITE_OP_AVERAGE_POOL_2D:
        if (x->rank != 4) return lite_refuse_op(f, i, "its input is not (N, H, W, C)");
        a.q.ksize[0] = op->filter_h, a.q.ksize[1] = op->filter_w;
        a.q.stride[0] = op->stride_h, a.q.stride[1] = op->stride_w;
        a.q.padding = op->padding == 0 ? SY_PAD_SAME : SY_PAD_VALID;
        if (x->scale[0] != y->scale[0] || x->zero_point[0] != y->zero_point[0])
            return lite_refuse_op(f, i, "its input and output are quantized differently");
        out = graph_add(b->g, op->builtin == IO_TFLITE_OP_MAX_POOL_2D ? SY_OP_QMAX_POOL2D : SY_OP_QAVG_POOL2D, in, 1, &a, NULL);
        break;
    case IO_TFLITE_OP_MEAN: {
        const io_tflite_tensor *ax = op->n_inputs > 1 ? tensor(f, op->inputs[1]) : NULL;
        if (!ax || !ax->data || ax->type != IO_TFLITE_INT32) return lite_refuse_op(f, i, "its axes are not a constant int32 tensor");
        for (size_t j = 0; j < ax->data_size / 4; j++) {
            int32_t v;
            memcpy(&v, ax->data + 4 * j, 4);
            if (v < 0) v += x->rank;
            if (v < 0 || v >= x->rank) return lite_refuse_op(f, i, "an axis is out of range");
            a.q.axes |= 1u << v;
        }
        /* reduce.cc's Prepare: input scale / output scale */
        sy_q_multiplier((double)x->scale[0] / (double)y->scale[0], &a.q.mult[0], &shift);
        a.q.shift[0] = shift;
        if (op->keep_dims && x->rank == 4 && a.q.axes == 6)
            return lite_refuse_op(f, i, "keep_dims over H and W (TFLite's own int8 Mean path) is not supported yet");
        out = graph_add(b->g, SY_OP_QMEAN, in, 1, &a, &ys);
        break;
    }
    case IO_TFLITE_OP_RESHAPE: out = sy_graph_reshape(b->g, in[0], ys); break;
    case IO_TFLITE_OP_SOFTMAX:
        a.q.beta = op->beta;
        out = graph_add(b->g, SY_OP_QSOFTMAX, in, 1, &a, NULL);
        break;
    case IO_TFLITE_OP_PAD: {
        const io_tflite_tensor *p = op->n_inputs > 1 ? tensor(f, op->inputs[1]) : NULL;
        if (!p || !p->data || p->type != IO_TFLITE_INT32 || (int32_t)p->data_size != 8 * x->rank || x->rank > SY_MAX_RANK)
            return lite_refuse_op(f, i, "its paddings are not a constant int32 (rank, 2) tensor");
        if (op->n_inputs > 2 && op->inputs[2] >= 0) return lite_refuse_op(f, i, "a constant pad value is not supported");
        for (int32_t d = 0; d < x->rank; d++) {
            int32_t v[2];
            memcpy(v, p->data + 8 * d, 8);
            if (d == 0 && (v[0] || v[1])) return lite_refuse_op(f, i, "it pads the batch axis");
            a.q.pad_before[d] = v[0];
        }
        out = graph_add(b->g, SY_OP_QPAD, in, 1, &a, &ys);
        break;
    }
    default: return lite_refuse_op(f, i, NULL);
    }
    if (out == SY_NONE)
        return sy_error(sy_graph_status(b->g), "'%s': operator %d (%s): %s", f->path, (int)i, op_name(op->builtin),
                        sy_graph_error(b->g));
    if (!sy_shape_equal(&b->g->nodes[out].shape, &ys)) {
        char s1[SY_SHAPE_STR_MAX], s2[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_CORRUPT, "'%s': operator %d (%s) computes %s, but the file says its output '%s' is %s",
                        f->path, (int)i, op_name(op->builtin), sy_shape_format(&b->g->nodes[out].shape, s1, sizeof s1),
                        y->name, sy_shape_format(&ys, s2, sizeof s2));
    }
    b->node[op->outputs[0]] = out;
    return SY_OK;
}

static void part_clear(lite_part *p) {
    sy_plan_free(p->plan);
    sy_graph_free(p->graph);
    p->plan = NULL, p->graph = NULL, p->batch = 0;
}

/* p's graph for a batch of `batch`: its input tensor a graph input, its operators in order. */
static sy_status build_graph(sy_lite_model *m, lite_part *p, int64_t batch) {
    part_clear(p);
    const io_tflite *f = m->file;
    builder b = {f, NULL, sy_malloc((size_t)f->n_tensors * sizeof(sy_node)), batch};
    if (!b.node) return sy_error(SY_ERR_OUT_OF_MEMORY, "'%s': out of memory", f->path);
    for (int32_t i = 0; i < f->n_tensors; i++) b.node[i] = SY_NONE;
    sy_status st = sy_graph_new(&b.g);
    if (!st) {
        const io_tflite_tensor *in = tensor(f, p->in);
        b.node[p->in] = sy_graph_input(b.g, in->name[0] ? in->name : "input",
                                       m->cast_input && p->in == m->in ? SY_I32 : lite_dtype(in->type),
                                       lite_act_shape(&b, in));
        p->x = b.node[p->in];
        st = sy_graph_status(b.g);
        for (int32_t i = p->first; i < p->end && !st; i++) st = build_op(&b, i);
        if (!st && b.node[p->out] == SY_NONE)
            st = sy_error(SY_ERR_CORRUPT, "'%s': no operator computes the output tensor '%s'", f->path,
                          f->tensors[p->out].name);
        if (!st) st = sy_graph_status(b.g);
    }
    p->y = st ? SY_NONE : b.node[p->out];
    sy_free(b.node);
    if (st) {
        sy_graph_free(b.g);
        return st;
    }
    p->graph = b.g;
    p->batch = batch;
    return SY_OK;
}

/* ---- the public API ----------------------------------------------------------------------- */

sy_status sy_lite_model_load(const char *path, sy_lite_model **out) {
    *out = NULL;
    sy_lite_model *m = sy_calloc(1, sizeof *m);
    if (!m) return sy_error(SY_ERR_OUT_OF_MEMORY, "'%s': out of memory", path);
    sy_status st = io_tflite_read(path, &m->file);
    if (!st) st = check_model(m->file);
    if (!st) {
        m->in = m->file->inputs[0];
        m->out = m->file->outputs[0];
        m->file_batch = m->file->tensors[m->in].shape[0];
        for (int32_t i = 0; i < m->file->n_ops; i++)
            m->cast_input |= m->file->ops[i].builtin == IO_TFLITE_OP_CAST && m->file->ops[i].inputs[0] == m->in;
        const io_tflite_tensor *in = tensor(m->file, m->in), *o = tensor(m->file, m->out);
        if ((in->type != IO_TFLITE_FLOAT32 && in->type != IO_TFLITE_INT8 && in->type != IO_TFLITE_INT32) ||
            (o->type != IO_TFLITE_FLOAT32 && o->type != IO_TFLITE_INT8))
            st = sy_error(SY_ERR_UNSUPPORTED, "'%s': the input is %s and the output %s; systolic takes float32, int8 "
                          "(or int32 word ids) in and float32 or int8 out", path, io_tflite_type_name(in->type),
                          io_tflite_type_name(o->type));
    }
    if (!st) {
        m->whole = (lite_part){.first = 0, .end = m->file->n_ops, .in = m->in, .out = m->out};
        st = build_graph(m, &m->whole, 1); /* every operator checked now, not at the first batch */
    }
    if (st) {
        sy_lite_model_free(m);
        return st;
    }
    *out = m;
    return SY_OK;
}

static void tpu1_clear(sy_lite_model *m) {
    part_clear(&m->pre);
    part_clear(&m->post);
    sy_tpu1_program_free(m->prog);
    sy_free(m->prog_in);
    sy_free(m->prog_out);
    m->prog = NULL, m->prog_in = m->prog_out = NULL, m->prog_batch = 0;
}

void sy_lite_model_free(sy_lite_model *m) {
    if (!m) return;
    part_clear(&m->whole);
    tpu1_clear(m);
    sy_pool_free(m->pool);
    io_tflite_free(m->file);
    sy_free(m);
}

static void lite_shape(const sy_lite_model *m, int32_t t, sy_shape *s) {
    const io_tflite_tensor *x = tensor(m->file, t);
    int64_t d[SY_MAX_RANK];
    int rank = x->rank < SY_MAX_RANK ? x->rank : SY_MAX_RANK;
    for (int i = 0; i < rank; i++) d[i] = x->shape[i];
    if (rank) d[0] = -1;
    *s = sy_shape_from(rank, d);
}

void sy_lite_model_io(const sy_lite_model *m, bool output, sy_lite_io *io) {
    int32_t t = output ? m->out : m->in;
    const io_tflite_tensor *x = tensor(m->file, t);
    memset(io, 0, sizeof *io);
    io->name = x->name;
    io->dtype = lite_dtype(x->type);
    lite_shape(m, t, &io->shape);
    io->scale = x->quant_count ? x->scale[0] : 0;
    io->zero_point = x->quant_count ? (int32_t)x->zero_point[0] : 0;
}

const char *sy_lite_model_ops(const sy_lite_model *m, int32_t i) {
    return i >= 0 && i < m->file->n_ops ? op_name(m->file->ops[i].builtin) : NULL;
}
int32_t sy_lite_model_op_count(const sy_lite_model *m) { return m->file->n_ops; }

int64_t sy_lite_model_vocabulary(const sy_lite_model *m) {
    const io_tflite *f = m->file;
    for (int32_t i = 0; i < f->n_ops; i++) {
        const io_tflite_op *op = &f->ops[i];
        if (op->builtin != IO_TFLITE_OP_GATHER || op->n_inputs != 2 || op->inputs[0] < 0 || f->tensors[op->inputs[0]].rank < 1)
            continue;
        bool ids = op->inputs[1] == m->in; /* the input, or its CAST to int32 */
        for (int32_t j = 0; j < f->n_ops && !ids; j++)
            ids = f->ops[j].builtin == IO_TFLITE_OP_CAST && f->ops[j].inputs[0] == m->in && f->ops[j].outputs[0] == op->inputs[1];
        if (ids) return f->tensors[op->inputs[0]].shape[0];
    }
    return 0;
}

sy_status lite_model_graph(sy_lite_model *m, int64_t batch, const sy_graph **g, sy_node *x, sy_node *y) {
    *g = NULL;
    if (batch < 1) return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s': batch %lld", m->file->path, (long long)batch);
    if (m->whole.batch != batch || !m->whole.graph) {
        sy_status st = build_graph(m, &m->whole, batch);
        if (st) return st;
    }
    *g = m->whole.graph, *x = m->whole.x, *y = m->whole.y;
    return SY_OK;
}

/* p's plan for batch b (its graph built again when b changes), on the model's threads. */
static sy_status plan_for(sy_lite_model *m, lite_part *p, int64_t b) {
    if (p->plan && p->batch == b) return SY_OK;
    sy_status st = p->batch == b && p->graph ? SY_OK : build_graph(m, p, b);
    if (st) return st;
    sy_plan_free(p->plan);
    p->plan = NULL;
    sy_plan_options o = sy_plan_options_default();
    o.backend = "cpu";
    o.outputs = &p->y;
    o.n_outputs = 1;
    o.pool = m->pool;
    return sy_plan_compile(p->graph, &o, &p->plan);
}

/* ---- devices: the cpu backend's threads, the TPU v1 ---------------------------------------- */

sy_status sy_lite_model_set_device(sy_lite_model *m, const char *spec) {
    const char *env = getenv("SYSTOLIC_TPU"), *s = spec && *spec ? spec : env && *env ? env : "local";
    if (!strncasecmp(s, "mpi", 3)) /* refused before resolving, which would start MPI */
        return sy_error(SY_ERR_UNSUPPORTED, "device spec '%s'%s: a TFLite model runs in one process: local, cpu, "
                        "cpu:N (N threads) or sim:v1 (the emulated TPU v1)", s, s == env ? " (from $SYSTOLIC_TPU)" : "");
    sy_cluster *c;
    sy_status st = sy_cluster_resolve(spec, &c);
    if (st) { /* a spec the resolver refuses (gpu in this build too) is the caller's mistake, whatever its code */
        char why[512];
        snprintf(why, sizeof why, "%s", sy_last_error());
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s", why);
    }
    const sy_device *d = sy_cluster_device(c, 0);
    int32_t n = sy_cluster_device_count(c), cores = sy_cluster_host_cores(c);
    bool sim = d && d->kind == SY_DEVICE_SIM, v1 = sim && d->chip && d->chip->inference_only;
    char name[64];
    snprintf(name, sizeof name, "%s", sy_cluster_spec(c));
    sy_cluster_free(c);
    if (sim && !v1)
        return sy_error(SY_ERR_UNSUPPORTED, "device spec '%s'%s: a TFLite model runs on the cpu backend (local, cpu, "
                        "cpu:N: N threads) or on the emulated TPU v1 (sim:v1); the emulated Cloud TPU slices run "
                        "Keras models", name, s == env ? " (from $SYSTOLIC_TPU)" : "");
    sy_pool *pool = NULL;
    if (v1) { /* refused now, naming the op, rather than at the first batch */
        lite_tpu1_model lm;
        sy_tpu1_program *p = NULL;
        st = lite_tpu1_from_file(m->file, 1, &lm);
        if (!st) {
            st = lite_tpu1_lower(&lm, &p);
            lite_tpu1_model_free(&lm);
        }
        sy_tpu1_program_free(p);
        if (st) return st;
    } else if ((n < cores ? n : cores) > 1 && (st = sy_pool_new(n < cores ? n : cores, &pool))) {
        return st;
    }
    tpu1_clear(m);
    sy_plan_free(m->whole.plan); /* compiled for the threads before */
    m->whole.plan = NULL;
    sy_pool_free(m->pool);
    m->pool = pool;
    m->tpu1 = v1;
    memset(&m->counters, 0, sizeof m->counters);
    m->runs = 0;
    return SY_OK;
}

/* Values per sample of tensor t: its shape past the batch axis. */
static int64_t per_sample(const io_tflite *f, int32_t t) {
    int64_t n = 1;
    for (int32_t d = 1; d < f->tensors[t].rank; d++) n *= f->tensors[t].shape[d];
    return n;
}

/* The program for a batch of `batch` and the host's parts around it: the operators before the program's
 * (a float QUANTIZE) and after (SOFTMAX, DEQUANTIZE), run by the int8 ops on the cpu backend. */
static sy_status tpu1_program_for(sy_lite_model *m, int64_t batch) {
    if (m->prog && m->prog_batch == batch) return SY_OK;
    tpu1_clear(m);
    const io_tflite *f = m->file;
    if (batch > 65536)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s' on the TPU v1: batch %lld; a program takes at most 65536",
                        f->path, (long long)batch);
    lite_tpu1_model lm;
    sy_status st = lite_tpu1_from_file(f, (int32_t)batch, &lm);
    if (st) return st;
    int32_t first = lm.first_op, end = lm.end_op;
    st = lite_tpu1_lower(&lm, &m->prog);
    lite_tpu1_model_free(&lm);
    if (st) return st;
    int32_t prog_in = first ? f->ops[first - 1].outputs[0] : m->in, prog_out = f->ops[end - 1].outputs[0];
    m->pre = (lite_part){.first = 0, .end = first, .in = m->in, .out = prog_in};
    m->post = (lite_part){.first = end, .end = f->n_ops, .in = prog_out, .out = m->out};
    sy_tpu1_io pi, po;
    sy_tpu1_program_io(m->prog, &pi, &po);
    m->prog_in_row = pi.shape[1] * pi.shape[2] * pi.shape[3];
    m->prog_out_row = po.shape[1] * po.shape[2] * po.shape[3];
    if ((end == f->n_ops && prog_out != m->out) || m->prog_in_row != per_sample(f, prog_in) ||
        m->prog_out_row != per_sample(f, prog_out)) {
        tpu1_clear(m);
        return sy_error(SY_ERR_UNSUPPORTED, "'%s' on the TPU v1: the program's input and output are not the model's "
                        "tensors '%s' and '%s'", f->path, f->tensors[prog_in].name, f->tensors[prog_out].name);
    }
    m->prog_in = sy_malloc((size_t)(batch * m->prog_in_row));
    m->prog_out = sy_malloc((size_t)(batch * m->prog_out_row));
    if (!m->prog_in || !m->prog_out) {
        tpu1_clear(m);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "'%s' on the TPU v1: out of memory for a batch of %lld", f->path,
                        (long long)batch);
    }
    m->prog_batch = batch;
    return SY_OK;
}

static void add_counters(sy_tpu1_counters *a, const sy_tpu1_counters *c) {
    a->cycles += c->cycles;
    a->array_active_cycles += c->array_active_cycles, a->useful_macs += c->useful_macs, a->unused_macs += c->unused_macs;
    a->weight_stall_cycles += c->weight_stall_cycles, a->weight_shift_cycles += c->weight_shift_cycles;
    a->non_matrix_cycles += c->non_matrix_cycles;
    a->raw_stall_cycles += c->raw_stall_cycles, a->input_stall_cycles += c->input_stall_cycles;
    a->seconds += c->seconds;
    a->tops = a->seconds > 0 ? 2 * a->useful_macs / a->seconds / 1e12 : 0;
    a->instructions += c->instructions, a->weight_tiles += c->weight_tiles, a->matrix_rows += c->matrix_rows;
    a->weight_bytes += c->weight_bytes, a->host_bytes += c->host_bytes;
}

bool sy_lite_model_tpu1_counters(const sy_lite_model *m, sy_tpu1_counters *counters, int64_t *runs, int64_t *batch) {
    if (!m->tpu1) return false;
    if (counters) *counters = m->counters;
    if (runs) *runs = m->runs;
    if (batch) *batch = m->prog_batch;
    return true;
}

/* ---- predict -------------------------------------------------------------------------------- */

/* Samples [start, start + rows) of x, `per` values each, into dst in the model's input dtype (int8 from the
 * int32 tensor NumPy's int8 files load as: its values checked before). */
static void feed(void *dst, sy_dtype to, const sy_tensor *x, int64_t start, int64_t rows, int64_t per) {
    if (sy_tensor_dtype(x) == SY_I32 && to == SY_I8) { /* NumPy's int8 arrays load as int32 (checked: all int8) */
        for (int64_t i = 0; i < rows * per; i++)
            ((int8_t *)dst)[i] = (int8_t)((const int32_t *)sy_tensor_data(x))[start * per + i];
        return;
    }
    if (sy_tensor_dtype(x) == SY_F32 && to == SY_I32) { /* word ids as floats, CAST (truncated) as TFLite does */
        for (int64_t i = 0; i < rows * per; i++)
            ((int32_t *)dst)[i] = (int32_t)((const float *)sy_tensor_data(x))[start * per + i];
        return;
    }
    size_t size = sy_dtype_size(sy_tensor_dtype(x));
    memcpy(dst, (const uint8_t *)sy_tensor_data(x) + (size_t)(start * per) * size, (size_t)(rows * per) * size);
}

/* One batch of n samples on the cpu backend: their outputs, y_row bytes each, into y. */
static sy_status cpu_batch(sy_lite_model *m, const sy_tensor *x, int64_t start, int64_t n, int64_t per, void *y,
                           size_t y_row) {
    sy_status st = plan_for(m, &m->whole, n);
    if (st) return st;
    feed(sy_plan_input(m->whole.plan, m->whole.x), m->cast_input ? SY_I32 : lite_dtype(tensor(m->file, m->in)->type), x,
         start, n, per);
    if ((st = sy_plan_run(m->whole.plan))) return st;
    memcpy(y, sy_plan_output(m->whole.plan, m->whole.y), (size_t)n * y_row);
    return SY_OK;
}

/* One run of the program on n <= prog_batch samples, the batch padded with zeros past them (their outputs
 * dropped); the host's operators before and after it on the cpu backend. x_size: bytes of an input value. */
static sy_status tpu1_batch(sy_lite_model *m, const sy_tensor *x, int64_t start, int64_t n, int64_t per,
                            size_t x_size, void *y, size_t y_row) {
    int64_t b = m->prog_batch;
    sy_status st;
    if (m->pre.first < m->pre.end) {
        if ((st = plan_for(m, &m->pre, b))) return st;
        uint8_t *dst = sy_plan_input(m->pre.plan, m->pre.x);
        feed(dst, lite_dtype(tensor(m->file, m->in)->type), x, start, n, per);
        memset(dst + (size_t)(n * per) * x_size, 0, (size_t)((b - n) * per) * x_size);
        if ((st = sy_plan_run(m->pre.plan))) return st;
        memcpy(m->prog_in, sy_plan_output(m->pre.plan, m->pre.y), (size_t)(b * m->prog_in_row));
    } else {
        feed(m->prog_in, SY_I8, x, start, n, per);
        memset(m->prog_in + n * per, 0, (size_t)((b - n) * per));
    }
    sy_tpu1_counters c;
    if ((st = sy_tpu1_run(m->prog, m->prog_in, m->prog_out, &c))) return st;
    add_counters(&m->counters, &c);
    m->runs++;
    if (m->post.first == m->post.end) {
        memcpy(y, m->prog_out, (size_t)n * y_row);
        return SY_OK;
    }
    if ((st = plan_for(m, &m->post, b))) return st;
    memcpy(sy_plan_input(m->post.plan, m->post.x), m->prog_out, (size_t)(b * m->prog_out_row));
    if ((st = sy_plan_run(m->post.plan))) return st;
    memcpy(y, sy_plan_output(m->post.plan, m->post.y), (size_t)n * y_row);
    return SY_OK;
}

sy_status sy_lite_model_predict(sy_lite_model *m, const sy_tensor *x, int64_t batch_size, sy_tensor **out) {
    *out = NULL;
    sy_lite_io in, o;
    sy_lite_model_io(m, false, &in);
    sy_lite_model_io(m, true, &o);
    sy_shape xs = sy_tensor_shape(x);
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    bool shape_ok = xs.rank == in.shape.rank && xs.rank >= 1 && xs.dims[0] >= 1;
    for (int i = 1; shape_ok && i < xs.rank; i++) shape_ok = xs.dims[i] == in.shape.dims[i];
    if (!shape_ok)
        return sy_error(SY_ERR_SHAPE, "'%s' takes inputs of shape %s (its input '%s'), not %s", m->file->path,
                        sy_shape_format(&in.shape, a, sizeof a), in.name, sy_shape_format(&xs, b, sizeof b));
    sy_dtype xd = sy_tensor_dtype(x);
    /* a float input CAST to word ids (lite_hybrid.c): the plan takes int32, so int32 ids are taken as they are */
    bool cast = m->cast_input && xd == SY_F32;
    if (xd != in.dtype && !(in.dtype == SY_I8 && xd == SY_I32) && !(m->cast_input && xd == SY_I32))
        return sy_error(SY_ERR_DTYPE, "'%s' takes %s inputs (its input '%s'), not %s", m->file->path,
                        sy_dtype_name(in.dtype), in.name, sy_dtype_name(xd));
    int64_t n = xs.dims[0], per = sy_shape_count(&xs) / n;
    bool narrow = xd == SY_I32 && in.dtype == SY_I8; /* NumPy's int8 arrays load as int32 */
    if (narrow) /* every value must be an int8 */
        for (int64_t i = 0; i < n * per; i++) {
            int32_t v = ((const int32_t *)sy_tensor_data(x))[i];
            if (v < -128 || v > 127)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s' takes int8 inputs, but input value %lld is %d",
                                m->file->path, (long long)i, (int)v);
        }
    if (cast) /* TFLite's CAST truncates; a value no int32 holds is refused before it is converted */
        for (int64_t i = 0; i < n * per; i++) {
            float v = ((const float *)sy_tensor_data(x))[i];
            if (!(v > -2147483648.0f && v < 2147483648.0f))
                return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s' casts its input to int32 word ids, but input value %lld "
                                "is %g", m->file->path, (long long)i, (double)v);
        }
    if (batch_size <= 0) batch_size = 32;
    sy_status st = m->tpu1 ? tpu1_program_for(m, batch_size) : SY_OK;
    if (st) return st;
    sy_shape ys = o.shape;
    ys.dims[0] = n;
    sy_tensor *y;
    if ((st = sy_tensor_new(o.dtype, ys, &y))) return st;
    size_t y_row = (size_t)(sy_shape_count(&ys) / n) * sy_dtype_size(o.dtype);
    for (int64_t start = 0; start < n && !st; start += batch_size) {
        int64_t bn = n - start < batch_size ? n - start : batch_size;
        void *dst = (uint8_t *)sy_tensor_data(y) + (size_t)start * y_row;
        st = m->tpu1 ? tpu1_batch(m, x, start, bn, per, sy_dtype_size(in.dtype), dst, y_row)
                     : cpu_batch(m, x, start, bn, per, dst, y_row);
    }
    if (st) {
        sy_tensor_free(y);
        return st;
    }
    *out = y;
    return SY_OK;
}
