/*
 * quantize.c - post-training full-integer quantization (issue 18): a float
 * Keras model (sy_model) to an int8 TensorFlow Lite file, as TF 2.15's
 * TFLiteConverter writes one with optimizations=[DEFAULT], a representative
 * dataset and TFLITE_BUILTINS_INT8. docs/design/tflite.md, "Quantization".
 *
 * Three steps:
 *  1. Calibrate. One inference plan whose outputs are every model node's
 *     value (keras_build_nodes) runs the calibration batches; each node
 *     keeps the running minimum and maximum over all of them, as TFLite's
 *     calibrator (MinMax in calibration_logger.h) does.
 *  2. Lower. The model's nodes, in order, become TFLite operators:
 *     Conv2D -> CONV_2D, DepthwiseConv2D -> DEPTHWISE_CONV_2D, Dense ->
 *     FULLY_CONNECTED (each with a BatchNormalization after it folded in,
 *     and a ReLU or ReLU6 after that fused), Add -> ADD, MaxPooling2D /
 *     AveragePooling2D -> MAX_POOL_2D / AVERAGE_POOL_2D, GlobalAverage-
 *     Pooling2D -> MEAN, ZeroPadding2D -> PAD, Flatten / Reshape -> RESHAPE,
 *     Softmax -> SOFTMAX, a ReLU that cannot be fused -> RELU / RELU6,
 *     Dropout -> nothing. Anything else is refused naming the layer.
 *  3. Quantize and write. Weights per output channel, symmetric, in
 *     [-127, 127]; activations per tensor from their calibrated range; biases
 *     int32 at input scale x weight scale; then tflite_write.cc's encoder.
 *
 * A model with an Embedding or an LSTM (or any, with dynamic_range set) is
 * quantized dynamic-range instead, without calibration:
 * quantize_dynamic.c, sharing this file's builder (lite_qb_*).
 *
 * What shares its parameters with what follows TFLite's kernels: pools,
 * PAD and RESHAPE keep their input's scale and zero point, SOFTMAX outputs
 * 1/256 and -128, a ReLU fused into a pool leaves the pool's input
 * parameters (as the converter does with the tutorial CNN's
 * MaxPooling2D -> relu).
 */
#include "lite_internal.h"

#include "../core/core_internal.h"
#include "../io/io_internal.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

sy_lite_quantize_options sy_lite_quantize_options_default(void) {
    return (sy_lite_quantize_options){.calibration_steps = 100, .batch_size = 32, .int8_input = false,
                                      .int8_output = false, .dynamic_range = false};
}

/* MLIR's quant::fakeQuantAttrsToType (FakeQuantSupport.cpp) for int8, narrow_range false. */
void lite_quant_params(double lo, double hi, double *scale, int64_t *zero_point) {
    const double qmin = -128, qmax = 127;
    if (lo > 0) lo = 0; /* the range always holds 0, which must be exact */
    if (hi < 0) hi = 0;
    if (hi - lo < 1e-30) { /* all zeros: any scale; TFLite's is 1 */
        *scale = 1.0;
        *zero_point = 0;
        return;
    }
    double s = (hi - lo) / (qmax - qmin);
    double zp_min = qmin - lo / s, zp_min_err = fabs(qmin) + fabs(lo / s);
    double zp_max = qmax - hi / s, zp_max_err = fabs(qmax) + fabs(hi / s);
    double zp = zp_min_err < zp_max_err ? zp_min : zp_max;
    *zero_point = zp < qmin ? (int64_t)qmin : zp > qmax ? (int64_t)qmax : (int64_t)llround(zp);
    *scale = s;
}

/* ---- the file being built ---------------------------------------------------------- */

static void *grow(void *p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return p;
    int32_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *q = sy_realloc_array(p, (size_t)*cap, (size_t)c, elem);
    if (!q) return NULL;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
    *cap = c;
    return q;
}

sy_status lite_qb_oom(void) { return sy_error(SY_ERR_OUT_OF_MEMORY, "quantize: out of memory"); }

/* A new tensor: name, type and shape (batch axis first for activations); data NULL. */
sy_status lite_qb_tensor(qbuild *b, const char *name, int32_t type, int32_t rank, const int64_t *dims,
                            int32_t *index) {
    io_tflite *t = b->t;
    io_tflite_tensor *ts = grow(t->tensors, &b->cap_tensors, t->n_tensors + 1, sizeof *ts);
    if (!ts) return lite_qb_oom();
    t->tensors = ts;
    io_tflite_tensor *x = &ts[t->n_tensors];
    memset(x, 0, sizeof *x);
    if (!(x->name = sy_strdup(name))) return lite_qb_oom();
    x->type = type;
    x->rank = rank;
    for (int32_t d = 0; d < rank; d++) x->shape[d] = (int32_t)dims[d];
    *index = t->n_tensors++;
    return SY_OK;
}

/* An activation tensor of node shape s with the batch axis (1, as the converter writes it; -1 in its signature). */
sy_status lite_qb_activation(qbuild *b, const char *name, int32_t type, const sy_shape *s, int32_t *index) {
    int64_t dims[IO_TFLITE_MAX_RANK];
    if (s->rank + 1 > IO_TFLITE_MAX_RANK) return sy_error(SY_ERR_UNSUPPORTED, "quantize: '%s' has rank %d", name, s->rank);
    dims[0] = 1;
    for (int32_t d = 0; d < s->rank; d++) dims[d + 1] = s->dims[d];
    return lite_qb_tensor(b, name, type, s->rank + 1, dims, index);
}

sy_status lite_qb_quant(qbuild *b, int32_t index, int32_t count, const double *scale, const int64_t *zp,
                           int32_t dim) {
    io_tflite_tensor *x = &b->t->tensors[index];
    x->scale = sy_malloc((size_t)count * sizeof *x->scale);
    x->zero_point = sy_malloc((size_t)count * sizeof *x->zero_point);
    if (!x->scale || !x->zero_point) return lite_qb_oom();
    for (int32_t i = 0; i < count; i++) {
        x->scale[i] = (float)scale[i];
        x->zero_point[i] = zp ? zp[i] : 0;
    }
    x->quant_count = count;
    x->quant_dim = dim;
    return SY_OK;
}

sy_status lite_qb_data(qbuild *b, int32_t index, void *data, size_t size) {
    void **bl = grow(b->blobs, &b->cap_blobs, b->n_blobs + 1, sizeof *bl);
    if (!bl) {
        sy_free(data);
        return lite_qb_oom();
    }
    b->blobs = bl;
    b->blobs[b->n_blobs++] = data;
    b->t->tensors[index].data = data;
    b->t->tensors[index].data_size = size;
    return SY_OK;
}

/* An int8 activation tensor for model node k with its calibrated range's parameters (or those of `like`). */
static sy_status activation_for(qbuild *b, int32_t k, const char *name, int32_t like, int32_t *index) {
    sy_status st = lite_qb_activation(b, name, IO_TFLITE_INT8, &b->m->nodes[k].shape, index);
    if (st) return st;
    if (like >= 0) {
        const io_tflite_tensor *l = &b->t->tensors[like];
        double s = l->scale[0];
        return lite_qb_quant(b, *index, 1, &s, &l->zero_point[0], 0);
    }
    if (!isfinite(b->lo[k]) || !isfinite(b->hi[k])) /* a NaN or infinity in the data or the weights */
        return sy_error(SY_ERR_INVALID_ARGUMENT, "quantize: %s%s%s takes values outside the finite floats on the "
                        "calibration data (range [%g, %g]): no int8 scale fits it",
                        b->m->nodes[k].layer < 0 ? "the model's input" : "layer '",
                        b->m->nodes[k].layer < 0 ? "" : b->m->layers[b->m->nodes[k].layer].name,
                        b->m->nodes[k].layer < 0 ? "" : "'", (double)b->lo[k], (double)b->hi[k]);
    double s;
    int64_t zp;
    lite_quant_params(b->lo[k], b->hi[k], &s, &zp);
    return lite_qb_quant(b, *index, 1, &s, &zp, 0);
}

sy_status lite_qb_op(qbuild *b, int32_t builtin, int32_t version, const int32_t *in, int32_t n_in, int32_t out,
                        io_tflite_op **op) {
    io_tflite *t = b->t;
    io_tflite_op *ops = grow(t->ops, &b->cap_ops, t->n_ops + 1, sizeof *ops);
    if (!ops) return lite_qb_oom();
    t->ops = ops;
    io_tflite_op *o = &ops[t->n_ops];
    memset(o, 0, sizeof *o);
    o->builtin = builtin;
    o->version = version;
    o->inputs = sy_malloc((size_t)(n_in ? n_in : 1) * sizeof *o->inputs);
    o->outputs = sy_malloc(sizeof *o->outputs);
    if (!o->inputs || !o->outputs) {
        sy_free(o->inputs);
        sy_free(o->outputs);
        return lite_qb_oom();
    }
    memcpy(o->inputs, in, (size_t)n_in * sizeof *in);
    o->n_inputs = n_in;
    o->outputs[0] = out;
    o->n_outputs = 1;
    o->stride_w = o->stride_h = o->dilation_w = o->dilation_h = 1;
    o->beta = 1.0f;
    t->n_ops++;
    if (op) *op = o;
    return SY_OK;
}

/* An int32 constant (the shape of a RESHAPE, a MEAN's axes, a PAD's paddings). */
sy_status lite_qb_const_i32(qbuild *b, const char *name, const int32_t *v, int32_t rank, const int64_t *dims,
                           int32_t *index) {
    sy_status st = lite_qb_tensor(b, name, IO_TFLITE_INT32, rank, dims, index);
    if (st) return st;
    int64_t n = 1;
    for (int32_t d = 0; d < rank; d++) n *= dims[d];
    int32_t *data = sy_malloc((size_t)n * sizeof *data);
    if (!data) return lite_qb_oom();
    memcpy(data, v, (size_t)n * sizeof *data);
    return lite_qb_data(b, *index, data, (size_t)n * sizeof *data);
}

/* ---- layers ------------------------------------------------------------------------ */

const char *lite_qb_layer_name(const qbuild *b, int32_t k) { return b->m->layers[b->m->nodes[k].layer].name; }
static const sy_layer *cfg_of(const qbuild *b, int32_t k) { return &b->m->layers[b->m->nodes[k].layer].cfg; }
static const char *class_of(const qbuild *b, int32_t k) {
    const layer_impl *impl = layer_impl_of(cfg_of(b, k)->kind);
    return impl ? impl->class_name : "a layer";
}
static int32_t input_of(const qbuild *b, int32_t k, int32_t i) { return b->m->edges[b->m->nodes[k].in_off + i]; }

/* The one layer call that takes node k, when k is no model output and nothing else takes it; else -1. */
static int32_t sole_consumer(const qbuild *b, int32_t k) {
    if (b->uses[k] != 1) return -1;
    for (int64_t j = k + 1; j < b->m->n_nodes; j++) {
        const model_node *n = &b->m->nodes[j];
        for (int32_t i = 0; n->layer >= 0 && i < n->n_in; i++)
            if (b->m->edges[n->in_off + i] == k) return (int32_t)j;
    }
    return -1;
}

/* The fused activation a layer's own activation or a ReLU layer stands for: 1 RELU, 3 RELU6, 0 none
 * (linear); -1 for one TFLite cannot fuse. */
static int fused_code(sy_activation a) {
    return a == SY_ACTIVATION_LINEAR ? 0 : a == SY_ACTIVATION_RELU ? 1 : a == SY_ACTIVATION_RELU6 ? 3 : -1;
}

/* Node k as a ReLU TFLite can fuse or run: an Activation('relu'/'relu6') or ReLU() (max_value none or 6, no
 * threshold or slope). 1 RELU, 3 RELU6; 0 not one. */
static int relu_kind(const qbuild *b, int32_t k) {
    if (b->m->nodes[k].layer < 0) return 0;
    const sy_layer *l = cfg_of(b, k);
    if (l->kind == SY_LAYER_ACTIVATION) {
        int c = fused_code(l->activation);
        return c > 0 ? c : 0;
    }
    if (l->kind == SY_LAYER_RELU && l->negative_slope == 0 && l->threshold == 0)
        return isinf(l->max_value) ? 1 : l->max_value == 6 ? 3 : 0;
    return 0;
}

float *lite_qb_weights(qbuild *b, int32_t k, const char *leaf, sy_shape *shape) {
    const model_layer *L = &b->m->layers[b->m->nodes[k].layer];
    for (int32_t j = 0; j < L->n_weights; j++) {
        const char *full = sy_vars_name(b->m->vars, L->weight_var[j]);
        size_t n = strlen(full), m = strlen(leaf);
        if (n > m && full[n - m - 1] == '/' && !strcmp(full + n - m, leaf)) {
            if (shape) *shape = sy_vars_shape(b->m->vars, L->weight_var[j]);
            return sy_vars_data(b->m->vars, L->weight_var[j]);
        }
    }
    return NULL;
}

/* Conv2D, DepthwiseConv2D or Dense at node k: its kernel in TFLite's layout (O, KH, KW, I), (1, KH, KW, I*M) or
 * (O, I) as floats, its bias (zeros when it has none), a BatchNormalization after it folded in, and the ReLU
 * after that; *last is the node whose output the op's output stands for. */
typedef struct affine {
    float *w, *bias;
    int64_t wdims[4];
    int32_t wrank, channels, quant_dim;
    int act;
    int32_t last;
} affine;

static sy_status lower_affine(qbuild *b, int32_t k, affine *a) {
    const sy_layer *l = cfg_of(b, k);
    memset(a, 0, sizeof *a);
    sy_shape ks;
    const char *kname = l->kind == SY_LAYER_DEPTHWISE_CONV2D ? "depthwise_kernel" : "kernel";
    float *kernel = lite_qb_weights(b, k, kname, &ks);
    if (!kernel) return sy_error(SY_ERR_INTERNAL, "quantize: layer '%s' has no %s", lite_qb_layer_name(b, k), kname);
    float *bias = l->use_bias ? lite_qb_weights(b, k, "bias", NULL) : NULL;
    int64_t n = sy_shape_count(&ks);
    a->w = sy_malloc((size_t)n * sizeof *a->w);
    if (!a->w) return lite_qb_oom();
    if (l->kind == SY_LAYER_DENSE) { /* (I, O) -> (O, I) */
        int64_t I = ks.dims[0], O = ks.dims[1];
        for (int64_t i = 0; i < I; i++)
            for (int64_t o = 0; o < O; o++) a->w[o * I + i] = kernel[i * O + o];
        a->wrank = 2, a->wdims[0] = O, a->wdims[1] = I, a->channels = (int32_t)O, a->quant_dim = 0;
    } else if (l->kind == SY_LAYER_CONV2D) { /* (KH, KW, I, O) -> (O, KH, KW, I) */
        int64_t KH = ks.dims[0], KW = ks.dims[1], I = ks.dims[2], O = ks.dims[3];
        for (int64_t p = 0; p < KH * KW * I; p++)
            for (int64_t o = 0; o < O; o++) a->w[o * KH * KW * I + p] = kernel[p * O + o];
        a->wrank = 4, a->wdims[0] = O, a->wdims[1] = KH, a->wdims[2] = KW, a->wdims[3] = I;
        a->channels = (int32_t)O, a->quant_dim = 0;
    } else { /* depthwise (KH, KW, I, M) is already (1, KH, KW, I*M) in memory */
        memcpy(a->w, kernel, (size_t)n * sizeof *a->w);
        a->wrank = 4, a->wdims[0] = 1, a->wdims[1] = ks.dims[0], a->wdims[2] = ks.dims[1];
        a->wdims[3] = ks.dims[2] * ks.dims[3];
        a->channels = (int32_t)a->wdims[3], a->quant_dim = 3;
    }
    a->bias = sy_calloc((size_t)a->channels, sizeof *a->bias);
    if (!a->bias) return lite_qb_oom();
    if (bias) memcpy(a->bias, bias, (size_t)a->channels * sizeof *bias);
    a->act = fused_code(l->activation);
    if (a->act < 0)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "quantize: layer '%s' (%s) has activation %s inside, which TFLite cannot fuse into %s; only "
                        "linear, relu and relu6 fuse (softmax: give it its own Activation layer)",
                        lite_qb_layer_name(b, k), class_of(b, k), sy_activation_name(l->activation), class_of(b, k));
    a->last = k;
    int32_t next = sole_consumer(b, k);
    /* BatchNormalization after a linear conv or dense: folded into its weights, as the converter does */
    if (next >= 0 && a->act == 0 && cfg_of(b, next)->kind == SY_LAYER_BATCH_NORMALIZATION) {
        const sy_layer *bn = cfg_of(b, next);
        int32_t rank = b->m->nodes[k].shape.rank + 1;
        if (bn->n_axes != 1 || bn->axes[0] != rank - 1)
            return sy_error(SY_ERR_UNSUPPORTED, "quantize: BatchNormalization '%s' normalizes axis %d, not the channels "
                            "(axis %d) of '%s': it cannot be folded", lite_qb_layer_name(b, next), bn->axes[0], rank - 1,
                            lite_qb_layer_name(b, k));
        float *gamma = lite_qb_weights(b, next, "gamma", NULL), *beta = lite_qb_weights(b, next, "beta", NULL);
        float *mean = lite_qb_weights(b, next, "moving_mean", NULL), *var = lite_qb_weights(b, next, "moving_variance", NULL);
        if (!mean || !var)
            return sy_error(SY_ERR_INTERNAL, "quantize: BatchNormalization '%s' has no moving statistics",
                            lite_qb_layer_name(b, next));
        int32_t C = a->channels;
        int64_t per = n / C;
        for (int32_t c = 0; c < C; c++) {
            float mul = (gamma ? gamma[c] : 1.0f) / sqrtf(var[c] + (float)bn->epsilon);
            a->bias[c] = (a->bias[c] - mean[c]) * mul + (beta ? beta[c] : 0.0f);
            if (a->quant_dim == 0)
                for (int64_t p = 0; p < per; p++) a->w[c * per + p] *= mul;
            else
                for (int64_t p = 0; p < per; p++) a->w[p * C + c] *= mul;
        }
        b->done[next] = true;
        a->last = next;
        next = sole_consumer(b, next);
    }
    int r = next >= 0 && a->act == 0 ? relu_kind(b, next) : 0;
    if (r) {
        a->act = r;
        b->done[next] = true;
        a->last = next;
    }
    return SY_OK;
}

/* The weights quantized per channel (Conv2D, DepthwiseConv2D: TFLite's per-axis; Dense: one scale, as TF 2.15's
 * converter gives FULLY_CONNECTED) and the bias at input scale x weight scale; the op's inputs. */
static sy_status emit_affine(qbuild *b, int32_t k, affine *a, int32_t in, int32_t *w_t, int32_t *b_t) {
    bool dense = cfg_of(b, k)->kind == SY_LAYER_DENSE;
    int32_t C = a->channels, nq = dense ? 1 : C;
    int64_t n = 1;
    for (int32_t d = 0; d < a->wrank; d++) n *= a->wdims[d];
    int64_t per = n / C;
    double *ws = sy_malloc((size_t)C * sizeof *ws), *bs = sy_malloc((size_t)C * sizeof *bs);
    int8_t *q = sy_malloc((size_t)n);
    int32_t *qb = sy_malloc((size_t)C * sizeof *qb);
    sy_status st = SY_OK;
    if (!ws || !bs || !q || !qb) {
        st = lite_qb_oom();
        goto out;
    }
    float amax_all = 0;
    for (int64_t i = 0; i < n; i++) amax_all = fmaxf(amax_all, fabsf(a->w[i]));
    for (int32_t c = 0; c < C; c++) {
        float amax = 0;
        for (int64_t p = 0; p < per; p++)
            amax = fmaxf(amax, fabsf(a->quant_dim == 0 ? a->w[c * per + p] : a->w[p * C + c]));
        if (dense) amax = amax_all;
        ws[c] = amax > 0 ? (double)amax / 127.0 : 1.0;
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t c = (int32_t)(a->quant_dim == 0 ? i / per : i % C);
        double v = nearbyint((double)a->w[i] / (double)(float)ws[c]);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    double in_scale = b->t->tensors[in].scale[0];
    for (int32_t c = 0; c < C; c++) {
        bs[c] = in_scale * (double)(float)ws[c];
        double v = nearbyint((double)a->bias[c] / bs[c]);
        qb[c] = (int32_t)(v > INT32_MAX ? INT32_MAX : v < -INT32_MAX ? -INT32_MAX : v);
    }
    char name[LAYER_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s/%s", lite_qb_layer_name(b, k), dense ? "MatMul" : "kernel");
    if ((st = lite_qb_tensor(b, name, IO_TFLITE_INT8, a->wrank, a->wdims, w_t)) ||
        (st = lite_qb_quant(b, *w_t, nq, ws, NULL, a->quant_dim)))
        goto out;
    st = lite_qb_data(b, *w_t, q, (size_t)n);
    q = NULL;
    if (st) goto out;
    *b_t = -1;
    bool nonzero = false;
    for (int32_t c = 0; c < C; c++) nonzero |= qb[c] != 0;
    if (!dense || nonzero) { /* the converter drops a Dense's bias of zeros; a conv keeps its own */
        int64_t bd = C;
        snprintf(name, sizeof name, "%s/bias", lite_qb_layer_name(b, k));
        if ((st = lite_qb_tensor(b, name, IO_TFLITE_INT32, 1, &bd, b_t)) ||
            (st = lite_qb_quant(b, *b_t, dense ? 1 : C, bs, NULL, 0)))
            goto out;
        st = lite_qb_data(b, *b_t, qb, (size_t)C * sizeof *qb);
        qb = NULL;
    }
out:
    sy_free(ws);
    sy_free(bs);
    sy_free(q);
    sy_free(qb);
    return st;
}

static int32_t tfl_padding(sy_padding p) { return p == SY_PADDING_SAME ? 0 : 1; }

sy_status lite_qb_unsupported(const qbuild *b, int32_t k, const char *why) {
    return sy_error(SY_ERR_UNSUPPORTED, "quantize: layer '%s' (%s) %s", lite_qb_layer_name(b, k), class_of(b, k), why);
}

/* Node k's operator(s); sets b->tensor[...] for the node whose value its output stands for. */
static sy_status lower_node(qbuild *b, int32_t k) {
    const sy_layer *l = cfg_of(b, k);
    int32_t x = b->tensor[input_of(b, k, 0)];
    int32_t out = -1;
    char name[LAYER_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s", lite_qb_layer_name(b, k));
    sy_status st = SY_OK;
    io_tflite_op *op = NULL;
    switch (l->kind) {
    case SY_LAYER_DROPOUT: /* inference: the identity */
        b->tensor[k] = x;
        return SY_OK;
    case SY_LAYER_CONV2D:
    case SY_LAYER_DEPTHWISE_CONV2D:
    case SY_LAYER_DENSE: {
        if (l->kind == SY_LAYER_CONV2D && l->groups > 1) return lite_qb_unsupported(b, k, "has groups > 1, which TFLite's CONV_2D does not take");
        if (l->kind == SY_LAYER_DENSE && b->m->nodes[input_of(b, k, 0)].shape.rank != 1)
            return lite_qb_unsupported(b, k, "takes an input of rank > 2; FULLY_CONNECTED takes (batch, features): Flatten first");
        affine a;
        int32_t w, bias;
        st = lower_affine(b, k, &a);
        if (!st) st = emit_affine(b, k, &a, x, &w, &bias);
        if (!st) {
            snprintf(name, sizeof name, "%s", lite_qb_layer_name(b, a.last));
            st = activation_for(b, a.last, name, -1, &out);
        }
        if (!st) {
            int32_t in[3] = {x, w, bias};
            int32_t code = l->kind == SY_LAYER_DENSE    ? IO_TFLITE_OP_FULLY_CONNECTED
                           : l->kind == SY_LAYER_CONV2D ? IO_TFLITE_OP_CONV_2D
                                                        : IO_TFLITE_OP_DEPTHWISE_CONV_2D;
            st = lite_qb_op(b, code, l->kind == SY_LAYER_DENSE ? 4 : 3, in, 3, out, &op);
        }
        if (!st) {
            op->activation = a.act;
            if (l->kind != SY_LAYER_DENSE) {
                op->padding = tfl_padding(l->padding);
                op->stride_h = l->strides[0], op->stride_w = l->strides[1];
                op->dilation_h = l->dilation_rate[0] ? l->dilation_rate[0] : 1;
                op->dilation_w = l->dilation_rate[1] ? l->dilation_rate[1] : 1;
                if (l->kind == SY_LAYER_DEPTHWISE_CONV2D) op->depth_multiplier = l->depth_multiplier;
            }
            b->tensor[a.last] = out;
        }
        sy_free(a.w);
        sy_free(a.bias);
        return st;
    }
    case SY_LAYER_MAX_POOLING2D:
    case SY_LAYER_AVERAGE_POOLING2D: {
        /* TFLite's pools keep their input's parameters; a ReLU after one is fused and keeps them too */
        int32_t last = k, next = sole_consumer(b, k), act = next >= 0 ? relu_kind(b, next) : 0;
        if (act) {
            b->done[next] = true;
            last = next;
            snprintf(name, sizeof name, "%s", lite_qb_layer_name(b, next));
        }
        if ((st = activation_for(b, last, name, x, &out)) ||
            (st = lite_qb_op(b, l->kind == SY_LAYER_MAX_POOLING2D ? IO_TFLITE_OP_MAX_POOL_2D : IO_TFLITE_OP_AVERAGE_POOL_2D, 2, &x, 1, out, &op)))
            return st;
        op->padding = tfl_padding(l->padding);
        int32_t st2[2]; /* Keras's strides=None (0 here) is the pool size: TFLite's options need it spelled out */
        keras_pool2d_strides(l, st2);
        op->stride_h = st2[0], op->stride_w = st2[1];
        op->filter_h = l->pool_size[0], op->filter_w = l->pool_size[1];
        op->activation = act;
        b->tensor[last] = out;
        return SY_OK;
    }
    case SY_LAYER_ADD: {
        if (b->m->nodes[k].n_in != 2) return lite_qb_unsupported(b, k, "adds more than two inputs; TFLite's ADD takes two");
        int32_t last = k, next = sole_consumer(b, k), act = next >= 0 ? relu_kind(b, next) : 0;
        if (act) {
            b->done[next] = true;
            last = next;
            snprintf(name, sizeof name, "%s", lite_qb_layer_name(b, next));
        }
        int32_t in[2] = {x, b->tensor[input_of(b, k, 1)]};
        if ((st = activation_for(b, last, name, -1, &out)) || (st = lite_qb_op(b, IO_TFLITE_OP_ADD, 2, in, 2, out, &op))) return st;
        op->activation = act;
        b->tensor[last] = out;
        return SY_OK;
    }
    case SY_LAYER_ACTIVATION:
    case SY_LAYER_RELU:
    case SY_LAYER_SOFTMAX: {
        bool softmax = (l->kind == SY_LAYER_ACTIVATION && l->activation == SY_ACTIVATION_SOFTMAX) ||
                       (l->kind == SY_LAYER_SOFTMAX && (l->axis == -1 || l->axis == b->m->nodes[k].shape.rank) &&
                        l->n_axes <= 1);
        if (l->kind == SY_LAYER_ACTIVATION && l->activation == SY_ACTIVATION_LINEAR) {
            b->tensor[k] = x;
            return SY_OK;
        }
        if (softmax) { /* TFLite's int8 SOFTMAX: output 1/256, -128 */
            if ((st = lite_qb_activation(b, name, IO_TFLITE_INT8, &b->m->nodes[k].shape, &out))) return st;
            double s = 1.0 / 256;
            int64_t zp = -128;
            if ((st = lite_qb_quant(b, out, 1, &s, &zp, 0)) || (st = lite_qb_op(b, IO_TFLITE_OP_SOFTMAX, 2, &x, 1, out, &op))) return st;
            b->tensor[k] = out;
            return SY_OK;
        }
        int r = relu_kind(b, k);
        if (!r)
            return lite_qb_unsupported(b, k, "is an activation TFLite's int8 builtins are not given here: relu, relu6 and "
                                     "softmax are");
        if ((st = activation_for(b, k, name, -1, &out)) || (st = lite_qb_op(b, r == 1 ? IO_TFLITE_OP_RELU : IO_TFLITE_OP_RELU6, 2, &x, 1, out, NULL)))
            return st;
        b->tensor[k] = out;
        return SY_OK;
    }
    case SY_LAYER_FLATTEN:
    case SY_LAYER_RESHAPE: {
        const sy_shape *s = &b->m->nodes[k].shape;
        int32_t v[IO_TFLITE_MAX_RANK] = {-1};
        int64_t d = s->rank + 1;
        for (int32_t i = 0; i < s->rank && i + 1 < IO_TFLITE_MAX_RANK; i++) v[i + 1] = (int32_t)s->dims[i];
        int32_t shape_t = -1;
        snprintf(name, sizeof name, "%s/shape", lite_qb_layer_name(b, k));
        if ((st = lite_qb_const_i32(b, name, v, 1, &d, &shape_t))) return st;
        snprintf(name, sizeof name, "%s", lite_qb_layer_name(b, k));
        int32_t in[2] = {x, shape_t};
        if ((st = activation_for(b, k, name, x, &out)) || (st = lite_qb_op(b, IO_TFLITE_OP_RESHAPE, 1, in, 2, out, NULL))) return st;
        b->tensor[k] = out;
        return SY_OK;
    }
    case SY_LAYER_GLOBAL_AVERAGE_POOLING2D: {
        int32_t axes[2] = {1, 2}, axes_t = -1;
        int64_t d = 2;
        snprintf(name, sizeof name, "%s/reduction_indices", lite_qb_layer_name(b, k));
        if ((st = lite_qb_const_i32(b, name, axes, 1, &d, &axes_t))) return st;
        snprintf(name, sizeof name, "%s", lite_qb_layer_name(b, k));
        int32_t in[2] = {x, axes_t};
        if ((st = activation_for(b, k, name, -1, &out)) || (st = lite_qb_op(b, IO_TFLITE_OP_MEAN, 2, in, 2, out, &op))) return st;
        op->keep_dims = l->keepdims;
        b->tensor[k] = out;
        return SY_OK;
    }
    case SY_LAYER_ZERO_PADDING2D: {
        int32_t p[8] = {0, 0, l->margins[0][0], l->margins[0][1], l->margins[1][0], l->margins[1][1], 0, 0}, pad_t = -1;
        int64_t d[2] = {4, 2};
        snprintf(name, sizeof name, "%s/paddings", lite_qb_layer_name(b, k));
        if ((st = lite_qb_const_i32(b, name, p, 2, d, &pad_t))) return st;
        snprintf(name, sizeof name, "%s", lite_qb_layer_name(b, k));
        int32_t in[2] = {x, pad_t};
        if ((st = activation_for(b, k, name, x, &out)) || (st = lite_qb_op(b, IO_TFLITE_OP_PAD, 2, in, 2, out, NULL))) return st;
        b->tensor[k] = out;
        return SY_OK;
    }
    case SY_LAYER_BATCH_NORMALIZATION:
        return lite_qb_unsupported(b, k, "does not follow a linear Conv2D, DepthwiseConv2D or Dense that only it takes, so "
                                 "it cannot be folded into one (TFLite has no int8 batch normalization)");
    default:
        return lite_qb_unsupported(b, k, "has no int8 TFLite builtin here; supported: Conv2D, DepthwiseConv2D, Dense, "
                                 "BatchNormalization (folded), ReLU/relu/relu6, MaxPooling2D, AveragePooling2D, "
                                 "GlobalAveragePooling2D, ZeroPadding2D, Add, Flatten, Reshape, Dropout, Softmax");
    }
}

/* ---- calibration ------------------------------------------------------------------- */

static sy_status calibrate(qbuild *b, const sy_tensor *x, const sy_lite_quantize_options *o, int64_t *samples) {
    sy_model *m = b->m;
    sy_shape xs = sy_tensor_shape(x), in = model_input_shape_at(m, 0);
    int64_t per = sy_shape_count(&in), n = xs.rank > 0 ? xs.dims[0] : 0;
    if (sy_tensor_dtype(x) != SY_F32 || n < 1 || sy_shape_count(&xs) != n * per) {
        char s1[SY_SHAPE_STR_MAX], s2[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_SHAPE, "quantize: calibration samples of shape %s (%s) do not fit model '%s''s input %s",
                        sy_shape_format(&xs, s1, sizeof s1), sy_dtype_name(sy_tensor_dtype(x)), m->name,
                        sy_shape_format(&in, s2, sizeof s2));
    }
    int64_t batch = o->batch_size < n ? o->batch_size : n;
    int64_t steps = n / batch < o->calibration_steps ? n / batch : o->calibration_steps;
    sy_graph *g = NULL;
    sy_plan *plan = NULL;
    sy_pool *pool = NULL;
    sy_node *values = sy_calloc((size_t)m->n_nodes + 1, sizeof *values);
    sy_status st = values ? sy_graph_new(&g) : lite_qb_oom();
    if (st) goto out;
    sy_node xin = sy_graph_input(g, "x", SY_F32, keras_batch_shape(batch, &in));
    if (!keras_build_nodes(m, g, &xin, values) || sy_graph_status(g)) {
        st = sy_error(sy_graph_status(g) ? sy_graph_status(g) : SY_ERR_INTERNAL, "quantize: model '%s': %s", m->name,
                      sy_graph_error(g));
        goto out;
    }
    sy_plan_options po = sy_plan_options_default();
    po.outputs = values;
    po.n_outputs = (int)m->n_nodes;
    po.vars = m->vars;
    if ((st = sy_pool_new(sy_cpu_count(), &pool))) goto out;
    po.pool = pool;
    if ((st = sy_plan_compile(g, &po, &plan))) goto out;
    for (int64_t i = 0; i < m->n_nodes; i++) b->lo[i] = INFINITY, b->hi[i] = -INFINITY;
    const float *data = sy_tensor_data(x);
    for (int64_t s = 0; s < steps; s++) {
        memcpy(sy_plan_input(plan, xin), data + s * batch * per, (size_t)(batch * per) * sizeof(float));
        if ((st = sy_plan_run(plan))) goto out;
        for (int64_t i = 0; i < m->n_nodes; i++) {
            const float *v = sy_plan_output(plan, values[i]);
            int64_t count = batch * sy_shape_count(&m->nodes[i].shape);
            float lo = b->lo[i], hi = b->hi[i];
            for (int64_t j = 0; j < count; j++) {
                lo = v[j] < lo ? v[j] : lo;
                hi = v[j] > hi ? v[j] : hi;
            }
            b->lo[i] = lo, b->hi[i] = hi;
        }
    }
    *samples = steps * batch;
out:
    sy_plan_free(plan);
    sy_pool_free(pool);
    sy_graph_free(g);
    sy_free(values);
    return st;
}

/* ---- the whole -------------------------------------------------------------------- */

sy_status sy_lite_quantize_check(const sy_model *m, const sy_lite_quantize_options *o) {
    if (!m->built) return sy_error(SY_ERR_STATE, "quantize: model '%s' has no input shape yet", m->name);
    if (sy_lite_quantize_dynamic(m, o)) return lite_dynamic_check(m);
    if (m->n_inputs != 1 || m->n_outputs != 1)
        return sy_error(SY_ERR_UNSUPPORTED, "quantize: model '%s' has %d inputs and %d outputs; one of each is quantized",
                        m->name, m->n_inputs, m->n_outputs);
    if (model_input_dtype(m, 0) != SY_F32)
        return sy_error(SY_ERR_UNSUPPORTED, "quantize: model '%s' takes %s input: full-integer quantization takes "
                        "float inputs (dynamic-range quantization, --dynamic-range, takes word ids into an Embedding)",
                        m->name, sy_dtype_name(model_input_dtype(m, 0)));
    for (int64_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].sub)
            return sy_error(SY_ERR_UNSUPPORTED, "quantize: layer '%s' is a nested model; quantize a flat one",
                            m->layers[i].name);
    static const sy_layer_kind ok[] = {SY_LAYER_DROPOUT, SY_LAYER_CONV2D, SY_LAYER_DEPTHWISE_CONV2D, SY_LAYER_DENSE,
                                       SY_LAYER_MAX_POOLING2D, SY_LAYER_AVERAGE_POOLING2D, SY_LAYER_ADD,
                                       SY_LAYER_ACTIVATION, SY_LAYER_RELU, SY_LAYER_SOFTMAX, SY_LAYER_FLATTEN,
                                       SY_LAYER_RESHAPE, SY_LAYER_GLOBAL_AVERAGE_POOLING2D, SY_LAYER_ZERO_PADDING2D,
                                       SY_LAYER_BATCH_NORMALIZATION};
    for (int64_t i = 0; i < m->n_nodes; i++) {
        if (m->nodes[i].layer < 0) continue;
        sy_layer_kind k = m->layers[m->nodes[i].layer].cfg.kind;
        bool known = false;
        for (size_t j = 0; j < sizeof ok / sizeof ok[0]; j++) known |= ok[j] == k;
        if (!known) {
            qbuild probe = {.m = (sy_model *)m};
            return lite_qb_unsupported(&probe, (int32_t)i, "has no int8 TFLite builtin here; supported: Conv2D, "
                                                   "DepthwiseConv2D, Dense, BatchNormalization (folded), "
                                                   "ReLU/relu/relu6, MaxPooling2D, AveragePooling2D, "
                                                   "GlobalAveragePooling2D, ZeroPadding2D, Add, Flatten, Reshape, "
                                                   "Dropout, Softmax");
        }
    }
    return SY_OK;
}

/* TFLite's calibrator logs each operator's inputs again after the kernel ran (calibrator.cc, LoggingEval: for the
 * state of LSTMs), and TF 2.15's interpreter runs ADD in place: the output overwrites the first input that only it
 * reads. That input's recorded range so takes in the sum's, and the converter's file has it; so does this one. */
static void inplace_ranges(qbuild *b) {
    const sy_model *m = b->m;
    for (int32_t k = 0; k < (int32_t)m->n_nodes; k++) {
        if (m->nodes[k].layer < 0 || cfg_of(b, k)->kind != SY_LAYER_ADD || m->nodes[k].n_in != 2) continue;
        int32_t next = sole_consumer(b, k), out = next >= 0 && relu_kind(b, next) ? next : k;
        for (int32_t i = 0; i < 2; i++) {
            int32_t e = input_of(b, k, i);
            const model_node *n = &m->nodes[e];
            sy_layer_kind kind = n->layer >= 0 ? cfg_of(b, e)->kind : SY_LAYER_DROPOUT;
            if (b->uses[e] != 1 || !sy_shape_equal(&n->shape, &m->nodes[k].shape) || kind == SY_LAYER_DROPOUT ||
                kind == SY_LAYER_FLATTEN || kind == SY_LAYER_RESHAPE ||
                (kind == SY_LAYER_ACTIVATION && cfg_of(b, e)->activation == SY_ACTIVATION_LINEAR))
                continue;
            b->lo[e] = fminf(b->lo[e], b->lo[out]);
            b->hi[e] = fmaxf(b->hi[e], b->hi[out]);
            break;
        }
    }
}

static sy_status build(qbuild *b, const sy_lite_quantize_options *o) {
    sy_model *m = b->m;
    sy_status st;
    for (int64_t i = 0; i < m->n_nodes; i++) {
        b->tensor[i] = -1;
        const model_node *n = &m->nodes[i];
        for (int32_t k = 0; n->layer >= 0 && k < n->n_in; k++) b->uses[m->edges[n->in_off + k]]++;
    }
    b->uses[m->outputs[0]]++;
    inplace_ranges(b);
    /* the input: float, then QUANTIZE (or int8 straight away) */
    int32_t node0 = m->inputs[0].node, in_t, q_t;
    char name[LAYER_NAME_MAX + 48];
    const char *in_name = m->inputs[0].name[0] ? m->inputs[0].name : "input_1";
    snprintf(name, sizeof name, "serving_default_%s:0", in_name);
    if ((st = activation_for(b, node0, name, -1, &q_t))) return st;
    in_t = q_t;
    if (!o->int8_input) {
        io_tflite_tensor *t = &b->t->tensors[q_t];
        sy_free(t->name);
        if (!(t->name = sy_strdup("tfl.quantize"))) return lite_qb_oom();
        if ((st = lite_qb_activation(b, name, IO_TFLITE_FLOAT32, &m->nodes[node0].shape, &in_t)) ||
            (st = lite_qb_op(b, IO_TFLITE_OP_QUANTIZE, 1, &in_t, 1, q_t, NULL)))
            return st;
    }
    b->tensor[node0] = q_t;
    for (int64_t i = 0; i < m->n_nodes; i++) {
        if (m->nodes[i].layer < 0 || b->done[i]) continue;
        if ((st = lower_node(b, (int32_t)i))) return st;
        b->done[i] = true;
    }
    int32_t y = b->tensor[m->outputs[0]], out_t = y;
    if (y < 0) return sy_error(SY_ERR_INTERNAL, "quantize: the model's output was not lowered");
    if (!o->int8_output) {
        snprintf(name, sizeof name, "StatefulPartitionedCall:0");
        if ((st = lite_qb_activation(b, name, IO_TFLITE_FLOAT32, &m->nodes[m->outputs[0]].shape, &out_t)) ||
            (st = lite_qb_op(b, IO_TFLITE_OP_DEQUANTIZE, 2, &y, 1, out_t, NULL)))
            return st;
    }
    return lite_qb_finish(b, in_t, out_t);
}

sy_status lite_qb_finish(qbuild *b, int32_t in, int32_t out) {
    io_tflite *t = b->t;
    if (!(t->inputs = sy_malloc(sizeof *t->inputs)) || !(t->outputs = sy_malloc(sizeof *t->outputs))) return lite_qb_oom();
    t->inputs[0] = in;
    t->outputs[0] = out;
    t->n_inputs = t->n_outputs = 1;
    t->n_subgraphs = 1;
    t->version = 3;
    return SY_OK;
}

static void report_ops(const io_tflite *t, sy_lite_quantize_report *r) {
    size_t len = 0;
    r->n_ops = t->n_ops;
    r->ops[0] = '\0';
    for (int32_t i = 0; i < t->n_ops; i++) {
        bool seen = false;
        for (int32_t j = 0; j < i && !seen; j++) seen = t->ops[j].builtin == t->ops[i].builtin;
        const char *nm = io_tflite_op_name(t->ops[i].builtin);
        if (!seen && nm && len + strlen(nm) + 2 < sizeof r->ops)
            len += (size_t)snprintf(r->ops + len, sizeof r->ops - len, "%s%s", len ? " " : "", nm);
    }
}

sy_status sy_lite_quantize(sy_model *m, const sy_tensor *calibration, const sy_lite_quantize_options *o,
                           const char *path, sy_lite_quantize_report *report) {
    sy_lite_quantize_options def = sy_lite_quantize_options_default();
    if (!o) o = &def;
    bool dynamic = m && sy_lite_quantize_dynamic(m, o);
    if (!m || (!calibration && !dynamic) || !path)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "quantize: model, calibration data and path are required");
    if (o->calibration_steps < 1 || o->batch_size < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "quantize: calibration_steps (%lld) and batch_size (%lld) must be >= 1",
                        (long long)o->calibration_steps, (long long)o->batch_size);
    sy_status st = sy_lite_quantize_check(m, o); /* before the calibration runs: a refusal costs nothing */
    if (st) return st;
    qbuild b = {.m = m};
    b.t = sy_calloc(1, sizeof *b.t);
    size_t nn = (size_t)m->n_nodes + 1;
    b.lo = sy_malloc(nn * sizeof *b.lo);
    b.hi = sy_malloc(nn * sizeof *b.hi);
    b.tensor = sy_malloc(nn * sizeof *b.tensor);
    b.uses = sy_calloc(nn, sizeof *b.uses);
    b.done = sy_calloc(nn, sizeof *b.done);
    int64_t samples = 0;
    if (!b.t || !b.lo || !b.hi || !b.tensor || !b.uses || !b.done) st = lite_qb_oom();
    if (!st && !dynamic) st = calibrate(&b, calibration, o, &samples);
    if (!st) st = dynamic ? lite_dynamic_build(&b) : build(&b, o);
    if (!st) {
        const char *in_names[1] = {m->inputs[0].name[0] ? m->inputs[0].name : "input_1"};
        const char *out_names[1] = {model_output_name(m, 0)};
        io_tflite_write_options wo = {.description = dynamic ? "systolic quantize (TFLite dynamic-range quantization)"
                                                             : "systolic quantize (TFLite full-integer post-training quantization)",
                                      .input_names = in_names, .output_names = out_names, .dynamic_batch = !dynamic,
                                      .min_runtime_version = 1};
        st = io_tflite_write(path, b.t, &wo);
    }
    if (!st && report) {
        memset(report, 0, sizeof *report);
        report_ops(b.t, report);
        report->samples = samples;
        report->dynamic_range = dynamic;
        int64_t params = 0;
        for (int64_t i = 0; i < m->n_layers; i++) params += m->layers[i].params;
        report->float_bytes = params * 4;
        struct stat sb;
        if (stat(path, &sb) == 0) report->file_bytes = (int64_t)sb.st_size;
    }
    for (int32_t i = 0; i < b.n_blobs; i++) sy_free(b.blobs[i]);
    sy_free(b.blobs);
    if (b.t) io_tflite_free(b.t);
    sy_free(b.lo);
    sy_free(b.hi);
    sy_free(b.tensor);
    sy_free(b.uses);
    sy_free(b.done);
    return st;
}
