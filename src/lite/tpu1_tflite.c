/*
 * tpu1_tflite.c - an int8 .tflite model as the chain of matrix layers the
 * TPU v1 lowering takes (issue 18; docs/design/tpu-v1.md).
 *
 * The operators are walked in order and must form a chain (each reads the
 * tensor the one before wrote). What each becomes:
 *
 *   QUANTIZE (first)       the host's: the program's input is its int8 output
 *   CONV_2D                a layer: Convolve over the OHWI filter
 *   FULLY_CONNECTED        a layer: MatrixMultiply, or over a flattened feature
 *                          map a Convolve whose kernel is the whole map
 *   MAX_POOL_2D,           the previous convolution's Activate pools (VALID,
 *   AVERAGE_POOL_2D        or SAME that pads nothing)
 *   RELU, RELU6            the previous layer's Activate requantizes (TFLite's
 *                          int8 ReluX: its own scale and zero point)
 *   RESHAPE                a view: the UB layout of (n, h, w, c) is the flattened
 *                          (n, h*w*c) for the next fully connected layer
 *   SOFTMAX, DEQUANTIZE    (last) the host's: named in host_tail
 *
 * Requantization constants are TFLite 2.15's own: a convolution's per
 * channel input_scale * filter_scale / output_scale in double
 * (PopulateConvolutionQuantizationParams), a per-tensor fully connected
 * layer's float product input_scale * filter_scale then divided in double
 * (GetQuantizedConvolutionMultipler), fused activations' clamps as
 * CalculateActivationRangeQuantized rounds them. The input zero point is
 * folded into the bias (bias - x_zp * sum_k w[c][k]), padding reading x_zp.
 * The model records which operators the program runs (first_op, end_op), so
 * that predict on sim:v1 (lite_model.c) runs those before and after it on
 * the host.
 */
#include "lite_internal.h"
#include "../io/io_internal.h"

#include <math.h>
#include <string.h>

typedef struct walker {
    const io_tflite *t;
    lite_tpu1_model *m;
    int32_t batch;
    int32_t cur;              /* the tensor the chain has reached */
    int32_t n, h, w, c;       /* its shape as the program holds it */
    lite_tpu1_layer *last;    /* the layer whose Activate may still take a pool or a relu */
    bool pooled, relued;
    bool flat;                /* after a RESHAPE: only a FULLY_CONNECTED may read the flattened map */
} walker;

static const char *op_name(int32_t b) {
    const char *s = io_tflite_op_name(b);
    return s ? s : "an unknown builtin";
}

static sy_status refuse(const walker *wk, int32_t i, const char *fmt, const char *what) {
    return sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering of '%s': op %d (%s): %s%s", wk->t->path, i,
                    op_name(wk->t->ops[i].builtin), fmt, what ? what : "");
}

static const io_tflite_tensor *tensor(const walker *wk, int32_t idx) {
    return idx >= 0 && idx < wk->t->n_tensors ? &wk->t->tensors[idx] : NULL;
}

static bool int8_tensor(const io_tflite_tensor *x) { return x && x->type == IO_TFLITE_INT8 && x->quant_count >= 1; }

/* TFLite's CalculateActivationRangeQuantized for a fused activation on output y. */
static bool act_range(int32_t act, const io_tflite_tensor *y, int32_t *lo, int32_t *hi) {
    float s = y->scale[0];
    int32_t zp = (int32_t)y->zero_point[0];
    *lo = -128, *hi = 127;
    switch (act) {
    case 0: return true;
    case 1: *lo = zp > -128 ? zp : -128; return true;
    case 3: {
        int32_t q6 = zp + (int32_t)roundf(6.0f / s);
        *lo = zp > -128 ? zp : -128;
        *hi = q6 < 127 ? q6 : 127;
        return true;
    }
    case 2: {
        int32_t a = zp + (int32_t)roundf(-1.0f / s), b = zp + (int32_t)roundf(1.0f / s);
        *lo = a > -128 ? a : -128;
        *hi = b < 127 ? b : 127;
        return true;
    }
    default: return false;
    }
}

/* SAME/VALID output size and leading pad, as TFLite's ComputePaddingHeightWidth. */
static void padding(int32_t same, int32_t in, int32_t k, int32_t s, int32_t *out, int32_t *pad) {
    *out = same ? (in + s - 1) / s : (in - k) / s + 1;
    int32_t total = (*out - 1) * s + k - in;
    *pad = total > 0 ? total / 2 : 0;
}

/* A CONV_2D or FULLY_CONNECTED op as a layer. */
static sy_status matrix_layer(walker *wk, int32_t i) {
    const io_tflite_op *op = &wk->t->ops[i];
    bool conv = op->builtin == IO_TFLITE_OP_CONV_2D;
    const io_tflite_tensor *x = tensor(wk, op->inputs[0]), *f = op->n_inputs > 1 ? tensor(wk, op->inputs[1]) : NULL;
    const io_tflite_tensor *b = op->n_inputs > 2 ? tensor(wk, op->inputs[2]) : NULL, *y = tensor(wk, op->outputs[0]);
    if (!int8_tensor(x) || !int8_tensor(f) || !int8_tensor(y) || !f->data)
        return refuse(wk, i, "the TPU v1 multiplies int8 inputs by constant int8 weights into int8 outputs", NULL);
    if (b && (b->type != IO_TFLITE_INT32 || !b->data)) return refuse(wk, i, "its bias is not constant int32", NULL);
    int32_t out_c = f->shape[0];
    int64_t k = 1;
    for (int32_t d = 1; d < f->rank; d++) k *= f->shape[d];
    if ((conv && f->rank != 4) || (!conv && f->rank != 2) || out_c < 1 || out_c > 255 * 256 || k < 1 || k >= 65536 ||
        f->data_size != (size_t)(k * out_c) ||
        (b && (int64_t)b->data_size != 4LL * out_c) || (f->quant_count != 1 && f->quant_count != out_c))
        return refuse(wk, i, "its filter, bias or their quantization has a shape it cannot take", NULL);
    if (op->weights_format) return refuse(wk, i, "shuffled weights", NULL);
    lite_tpu1_layer *l = lite_tpu1_add_layer(wk->m, out_c);
    if (!l || !(l->weights = sy_malloc((size_t)(k * out_c)))) return sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 lowering: out of memory");
    snprintf(l->name, sizeof l->name, "op %d (%s)", i, op_name(op->builtin));
    memcpy(l->weights, f->data, (size_t)(k * out_c));
    l->n = wk->n, l->h = wk->h, l->w = wk->w, l->c = wk->c, l->sh = l->sw = 1;
    if (conv) {
        if (f->shape[3] != wk->c) return refuse(wk, i, "its filter's input channels do not match its input", NULL);
        if (op->dilation_h != 1 || op->dilation_w != 1) return refuse(wk, i, "dilated convolution", NULL);
        l->kh = f->shape[1], l->kw = f->shape[2], l->sh = op->stride_h, l->sw = op->stride_w;
        if (l->sh < 1 || l->sw < 1 || l->kh > wk->h + 2 * l->kh || l->kw > wk->w + 2 * l->kw)
            return refuse(wk, i, "strides or kernel out of range", NULL);
        padding(op->padding == 0, wk->h, l->kh, l->sh, &l->oh, &l->pt);
        padding(op->padding == 0, wk->w, l->kw, l->sw, &l->ow, &l->pl);
        if (l->oh < 1 || l->ow < 1) return refuse(wk, i, "a kernel larger than its input", NULL);
    } else {
        if ((int64_t)wk->h * wk->w * wk->c != k) return refuse(wk, i, "its weights' inputs do not match its input's size", NULL);
        l->kh = wk->h, l->kw = wk->w, l->oh = l->ow = 1; /* a feature map's flattening: a kernel over all of it */
    }
    l->in_zp = (int32_t)x->zero_point[0];
    const int8_t *w = (const int8_t *)f->data;
    for (int32_t c = 0; c < out_c; c++) {
        int32_t bias = 0, sum = 0;
        if (b) memcpy(&bias, b->data + 4 * (size_t)c, 4);
        for (int64_t kk = 0; kk < k; kk++) sum += w[c * k + kk];
        l->act.bias[c] = (int32_t)((uint32_t)bias - (uint32_t)l->in_zp * (uint32_t)sum);
        float fs = f->scale[f->quant_count > 1 ? c : 0];
        double real = conv || f->quant_count > 1
                          ? (double)x->scale[0] * (double)fs / (double)y->scale[0]
                          : (double)(x->scale[0] * fs) / (double)y->scale[0];
        int mult, shift;
        sy_q_multiplier(real, &mult, &shift);
        if (shift > 30 || shift < -31) return refuse(wk, i, "a requantization scale out of range", NULL);
        l->act.mult[c] = mult, l->act.shift[c] = shift;
    }
    l->act.out_zp = (int32_t)y->zero_point[0];
    if (!act_range(op->activation, y, &l->act.act_min, &l->act.act_max))
        return refuse(wk, i, "a fused activation other than RELU, RELU6 or RELU_N1_TO_1", NULL);
    wk->h = l->oh, wk->w = l->ow, wk->c = out_c;
    wk->last = l;
    wk->pooled = wk->relued = wk->flat = false;
    return SY_OK;
}

static sy_status pool_op(walker *wk, int32_t i) {
    const io_tflite_op *op = &wk->t->ops[i];
    lite_tpu1_layer *l = wk->last;
    const io_tflite_tensor *x = tensor(wk, op->inputs[0]), *y = tensor(wk, op->outputs[0]);
    if (!l || wk->pooled || wk->relued || l->oh * l->ow == 1)
        return refuse(wk, i, "pooling runs in the Activate of the convolution just before it", NULL);
    if (!int8_tensor(x) || !int8_tensor(y) || x->scale[0] != y->scale[0] || x->zero_point[0] != y->zero_point[0])
        return refuse(wk, i, "an int8 pool keeps its input's quantization", NULL);
    sy_tpu1_act *a = &l->act;
    a->pool = op->builtin == IO_TFLITE_OP_MAX_POOL_2D ? SY_TPU1_POOL_MAX : SY_TPU1_POOL_AVG;
    a->oh = l->oh, a->ow = l->ow, a->pkh = op->filter_h, a->pkw = op->filter_w, a->psh = op->stride_h, a->psw = op->stride_w;
    int32_t pt, pl;
    if (a->pkh < 1 || a->pkw < 1 || a->psh < 1 || a->psw < 1 || a->pkh > a->oh || a->pkw > a->ow)
        return refuse(wk, i, "a pool window out of range", NULL);
    padding(op->padding == 0, a->oh, a->pkh, a->psh, &a->ph, &pt);
    padding(op->padding == 0, a->ow, a->pkw, a->psw, &a->pw, &pl);
    if (pt || pl || (a->ph - 1) * a->psh + a->pkh > a->oh || (a->pw - 1) * a->psw + a->pkw > a->ow)
        return refuse(wk, i, "a pool that pads (the TPU v1 lowering pools VALID windows)", NULL);
    if (!act_range(op->activation, y, &a->pool_min, &a->pool_max)) return refuse(wk, i, "its fused activation", NULL);
    wk->h = a->ph, wk->w = a->pw;
    wk->pooled = true;
    return SY_OK;
}

static sy_status relu_op(walker *wk, int32_t i) {
    const io_tflite_op *op = &wk->t->ops[i];
    lite_tpu1_layer *l = wk->last;
    const io_tflite_tensor *x = tensor(wk, op->inputs[0]), *y = tensor(wk, op->outputs[0]);
    if (!l || wk->relued) return refuse(wk, i, "an activation runs in the Activate of the layer before it", NULL);
    if (!int8_tensor(x) || !int8_tensor(y)) return refuse(wk, i, "not int8", NULL);
    sy_tpu1_act *a = &l->act;
    a->post = 1;
    a->post_in_zp = (int32_t)x->zero_point[0];
    a->post_out_zp = (int32_t)y->zero_point[0];
    int mult, shift;
    sy_q_multiplier((double)(x->scale[0] / y->scale[0]), &mult, &shift); /* ReluPrepare: a float quotient */
    a->post_mult = mult, a->post_shift = shift;
    float s = y->scale[0];
    int32_t zp = (int32_t)y->zero_point[0], lo = zp + (int32_t)roundf(0.0f / s);
    a->post_min = lo > -128 ? lo : -128;
    a->post_max = 127;
    if (op->builtin == IO_TFLITE_OP_RELU6) {
        int32_t hi = zp + (int32_t)roundf(6.0f / s);
        a->post_max = hi < 127 ? hi : 127;
    }
    wk->relued = true;
    return SY_OK;
}

sy_status lite_tpu1_from_file(const io_tflite *t, int32_t batch, lite_tpu1_model *m) {
    memset(m, 0, sizeof *m);
    const char *path = t->path;
    sy_status st = SY_OK;
    walker wk = {.t = t, .m = m, .batch = batch};
    if (t->n_inputs != 1 || t->n_outputs != 1) {
        st = sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering of '%s': %d inputs and %d outputs; it takes one of each", path,
                      t->n_inputs, t->n_outputs);
        goto done;
    }
    wk.cur = t->inputs[0];
    int32_t first = 0, last = t->n_ops;
    if (t->n_ops > 0 && t->ops[0].builtin == IO_TFLITE_OP_QUANTIZE && t->ops[0].n_inputs >= 1 && t->ops[0].n_outputs == 1 &&
        t->ops[0].inputs[0] == wk.cur && tensor(&wk, wk.cur) && tensor(&wk, wk.cur)->type == IO_TFLITE_FLOAT32)
        first = 1, wk.cur = t->ops[0].outputs[0]; /* float -> int8 on the host; an int8 requantization is refused below */
    /* the host's tail: SOFTMAX and DEQUANTIZE at the end */
    while (last > first && (t->ops[last - 1].builtin == IO_TFLITE_OP_SOFTMAX || t->ops[last - 1].builtin == IO_TFLITE_OP_DEQUANTIZE)) last--;
    for (int32_t i = last; i < t->n_ops; i++)
        snprintf(m->host_tail + strlen(m->host_tail), sizeof m->host_tail - strlen(m->host_tail), "%s%s",
                 i > last ? ", " : "", op_name(t->ops[i].builtin));
    const io_tflite_tensor *x = tensor(&wk, wk.cur);
    if (!int8_tensor(x)) {
        st = sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering of '%s': the input is not int8 (nor quantized by a first QUANTIZE)",
                      path);
        goto done;
    }
    wk.n = batch, wk.h = wk.w = 1, wk.c = 1;
    if (x->rank == 4) wk.h = x->shape[1], wk.w = x->shape[2], wk.c = x->shape[3];
    else if (x->rank == 2) wk.c = x->shape[1];
    else {
        st = sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering of '%s': an input of rank %d; it takes (n, h, w, c) or (n, k)",
                      path, x->rank);
        goto done;
    }
    if (wk.h < 1 || wk.w < 1 || wk.c < 1 || (int64_t)batch * wk.h * wk.w * ((wk.c + 255) / 256) > SY_TPU1_UB_ROWS) {
        st = sy_error(SY_ERR_UNSUPPORTED,
                      "TPU v1 lowering of '%s': an input of (%d, %d, %d, %d) int8; the unified buffer holds %d rows of "
                      "256 channels (24 MiB)",
                      path, batch, wk.h, wk.w, wk.c, SY_TPU1_UB_ROWS);
        goto done;
    }
    m->input = (sy_tpu1_tensor){.n = batch, .h = wk.h, .w = wk.w, .c = wk.c, .scale = x->scale[0],
                                .zero_point = (int32_t)x->zero_point[0]};
    for (int32_t i = first; i < last && !st; i++) {
        const io_tflite_op *op = &t->ops[i];
        if (op->n_inputs < 1 || op->n_outputs != 1 || op->inputs[0] != wk.cur)
            st = refuse(&wk, i, "the TPU v1 lowering takes a chain of ops, each reading the one before", NULL);
        else if (wk.flat && op->builtin != IO_TFLITE_OP_FULLY_CONNECTED)
            st = refuse(&wk, i, "after a flattening RESHAPE the TPU v1 lowering takes only FULLY_CONNECTED", NULL);
        else switch (op->builtin) {
            case IO_TFLITE_OP_CONV_2D:
            case IO_TFLITE_OP_FULLY_CONNECTED: st = matrix_layer(&wk, i); break;
            case IO_TFLITE_OP_MAX_POOL_2D:
            case IO_TFLITE_OP_AVERAGE_POOL_2D: st = pool_op(&wk, i); break;
            case IO_TFLITE_OP_RELU:
            case IO_TFLITE_OP_RELU6: st = relu_op(&wk, i); break;
            case IO_TFLITE_OP_RESHAPE: {
                const io_tflite_tensor *y = tensor(&wk, op->outputs[0]), *xi = tensor(&wk, op->inputs[0]);
                int64_t count = 1;
                for (int32_t d = 1; y && d < y->rank; d++) count *= y->shape[d];
                if (!y || !int8_tensor(y) || y->scale[0] != xi->scale[0] || y->zero_point[0] != xi->zero_point[0] ||
                    !(y->rank == 2 && count == (int64_t)wk.h * wk.w * wk.c))
                    st = refuse(&wk, i, "a RESHAPE other than flattening (n, h, w, c) to (n, h*w*c)", NULL);
                wk.flat = true;
                break;
            }
            default:
                st = refuse(&wk, i,
                            "not an op the TPU v1 runs; it runs FULLY_CONNECTED, CONV_2D, MAX_POOL_2D, AVERAGE_POOL_2D, "
                            "RELU, RELU6 and RESHAPE, with QUANTIZE first and SOFTMAX / DEQUANTIZE last on the host",
                            NULL);
                break;
            }
        if (!st) wk.cur = op->outputs[0];
    }
    if (st) goto done;
    if (m->n_layers == 0) {
        st = sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering of '%s': no FULLY_CONNECTED or CONV_2D to run", path);
        goto done;
    }
    const io_tflite_tensor *y = tensor(&wk, wk.cur);
    m->output = (sy_tpu1_tensor){.n = batch, .h = wk.h, .w = wk.w, .c = wk.c, .scale = y->scale[0],
                                 .zero_point = (int32_t)y->zero_point[0]};
    m->first_op = first, m->end_op = last;
done:
    if (st) lite_tpu1_model_free(m);
    return st;
}

sy_status lite_tpu1_from_tflite(const char *path, int32_t batch, lite_tpu1_model *m) {
    memset(m, 0, sizeof *m);
    io_tflite *t;
    sy_status st = io_tflite_read(path, &t);
    if (st) return st;
    st = lite_tpu1_from_file(t, batch, m);
    io_tflite_free(t);
    return st;
}
