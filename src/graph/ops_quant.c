/*
 * ops_quant.c - the int8 ops (issue 18): shape and dtype inference of the
 * ops TensorFlow Lite's int8 models are made of, and the CONSTANT leaf
 * that holds their weights. Their kernels are cpu/qref.c's; their costs
 * are in ops_cost.c with every other op's; docs/design/tflite.md gives the
 * arithmetic.
 *
 * Values are SY_I8 with per-tensor quantization: what a value means (its
 * scale and zero point) is carried by the ops that read and write it, in
 * attr.q -- the integer multipliers, shifts, zero points and clamps that
 * TFLite's Prepare functions derive from the file's float scales -- so
 * the graph's value type stays a plain dtype. Per-channel parameters
 * (convolution and fully-connected multipliers) are an int32 (2, O)
 * CONSTANT input: row 0 the Q31 multipliers, row 1 their shifts.
 *
 * None of these ops has a gradient: int8 graphs are for inference.
 */
#include "graph_internal.h"

#include <string.h>

static sy_status want(sy_graph *g, sy_node_rec *n, int i, sy_dtype dt) {
    const sy_node_rec *x = graph_in_rec(g, n, i);
    if (x->dtype != dt)
        return graph_fail(g, n, SY_ERR_DTYPE, "input %d ('%s') is %s; it must be %s", i, x->name,
                          sy_dtype_name(x->dtype), sy_dtype_name(dt));
    return SY_OK;
}

sy_node graph_constant(sy_graph *g, const char *name, sy_dtype dtype, sy_shape shape, const void *data) {
    if (g->status) return SY_NONE;
    int64_t bytes;
    if (sy_shape_bytes(&shape, sy_dtype_size(dtype), &bytes)) {
        graph_fail(g, NULL, SY_ERR_SHAPE, "constant '%s': its shape is too large", name ? name : "");
        return SY_NONE;
    }
    void *copy = sy_malloc(bytes ? (size_t)bytes : 1);
    if (!copy) {
        graph_fail(g, NULL, SY_ERR_OUT_OF_MEMORY, "constant '%s': out of memory", name ? name : "");
        return SY_NONE;
    }
    if (bytes) memcpy(copy, data, (size_t)bytes);
    sy_node id = graph_add(g, SY_OP_CONSTANT, NULL, 0, NULL, &shape);
    if (id == SY_NONE) {
        sy_free(copy);
        return SY_NONE;
    }
    sy_node_rec *n = graph_node(g, id);
    n->dtype = dtype;
    n->attr.constant.data = copy;
    if (name) {
        char *s = sy_strdup(name);
        if (s) {
            sy_free(n->name);
            n->name = s;
        }
    }
    return id;
}

sy_status infer_CONSTANT(sy_graph *g, sy_node_rec *n) { (void)g, (void)n; return SY_OK; }

sy_status infer_QUANTIZE(sy_graph *g, sy_node_rec *n) {
    sy_dtype dt = graph_in_rec(g, n, 0)->dtype;
    if (dt != SY_F32 && dt != SY_I8)
        return graph_fail(g, n, SY_ERR_DTYPE, "input is %s; it must be float32 or int8", sy_dtype_name(dt));
    n->shape = graph_in_rec(g, n, 0)->shape;
    n->dtype = SY_I8;
    return SY_OK;
}

sy_status infer_DEQUANTIZE(sy_graph *g, sy_node_rec *n) {
    sy_status st = want(g, n, 0, SY_I8);
    n->shape = graph_in_rec(g, n, 0)->shape;
    n->dtype = SY_F32;
    return st;
}

/* The weights, bias and multipliers of a product: int8 (O, ...), int32 (O), int32 (2, O). */
static sy_status product_operands(sy_graph *g, sy_node_rec *n, int64_t o) {
    sy_status st;
    if ((st = want(g, n, 0, SY_I8)) || (st = want(g, n, 1, SY_I8)) || (st = want(g, n, 2, SY_I32)) ||
        (st = want(g, n, 3, SY_I32)))
        return st;
    const sy_shape *b = &graph_in_rec(g, n, 2)->shape, *m = &graph_in_rec(g, n, 3)->shape;
    if (b->rank != 1 || b->dims[0] != o)
        return graph_fail(g, n, SY_ERR_SHAPE, "the bias must be (%lld), one per output channel", (long long)o);
    if (m->rank != 2 || m->dims[0] != 2 || m->dims[1] != o)
        return graph_fail(g, n, SY_ERR_SHAPE, "the multipliers must be (2, %lld): multipliers, then shifts",
                          (long long)o);
    return SY_OK;
}

static sy_status check_window(sy_graph *g, sy_node_rec *n, const int32_t *k, const int32_t *stride,
                              const int32_t *dil) {
    for (int i = 0; i < 2; i++)
        if (k[i] < 1 || stride[i] < 1 || (dil && dil[i] < 0)) /* dilation 0 reads as 1 */
            return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "window %dx%d, strides %dx%d, dilation %dx%d: all must be >= 1",
                              k[0], k[1], stride[0], stride[1], dil ? dil[0] : 1, dil ? dil[1] : 1);
    return SY_OK;
}

/* (N, H, W, C) through a window: (N, OH, OW, c), refused when it has no pixel. */
static sy_status window_shape(sy_graph *g, sy_node_rec *n, const sy_shape *x, const int32_t *k, const int32_t *dil,
                              int64_t c) {
    int64_t oh, ow, pad;
    int64_t d0 = dil && dil[0] > 1 ? dil[0] : 1, d1 = dil && dil[1] > 1 ? dil[1] : 1;
    sy_conv_out(x->dims[1], sy_dilated(k[0], d0), n->attr.q.stride[0], n->attr.q.padding, &oh, &pad);
    sy_conv_out(x->dims[2], sy_dilated(k[1], d1), n->attr.q.stride[1], n->attr.q.padding, &ow, &pad);
    if (oh <= 0 || ow <= 0) {
        char s[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "a %dx%d window over %s leaves no output pixel", k[0], k[1],
                          sy_shape_format(x, s, sizeof s));
    }
    n->shape = sy_shape_of(4, x->dims[0], oh, ow, c);
    n->dtype = SY_I8;
    return SY_OK;
}

sy_status infer_QCONV2D(sy_graph *g, sy_node_rec *n) {
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *w = &graph_in_rec(g, n, 1)->shape;
    char sx[SY_SHAPE_STR_MAX], sw[SY_SHAPE_STR_MAX];
    if (x->rank != 4 || w->rank != 4)
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s and kernel %s must be (N, H, W, C) and (O, KH, KW, C / groups)",
                          sy_shape_format(x, sx, sizeof sx), sy_shape_format(w, sw, sizeof sw));
    sy_status st = product_operands(g, n, w->dims[0]);
    if (st) return st;
    int64_t groups = n->attr.q.groups > 1 ? n->attr.q.groups : 1;
    if (w->dims[3] * groups != x->dims[3] || w->dims[0] % groups)
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s has %lld channels but kernel %s in %lld groups expects %lld",
                          sy_shape_format(x, sx, sizeof sx), (long long)x->dims[3], sy_shape_format(w, sw, sizeof sw),
                          (long long)groups, (long long)(w->dims[3] * groups));
    int32_t k[2] = {(int32_t)w->dims[1], (int32_t)w->dims[2]};
    if ((st = check_window(g, n, k, n->attr.q.stride, n->attr.q.dilation))) return st;
    return window_shape(g, n, x, k, n->attr.q.dilation, w->dims[0]);
}

/* issue 18, made by fusion (compiler/fusion.c): QCONV2D then QMAX_POOL2D over its output, the pool's window in
 * attr.q.pool */
sy_status infer_QCONV2D_POOL(sy_graph *g, sy_node_rec *n) {
    sy_status st = infer_QCONV2D(g, n);
    if (st) return st;
    const sy_attrs *a = &n->attr;
    if ((st = check_window(g, n, a->q.pool.ksize, a->q.pool.stride, NULL))) return st;
    int64_t ph, pw, pad;
    sy_conv_out(n->shape.dims[1], a->q.pool.ksize[0], a->q.pool.stride[0], a->q.pool.padding, &ph, &pad);
    sy_conv_out(n->shape.dims[2], a->q.pool.ksize[1], a->q.pool.stride[1], a->q.pool.padding, &pw, &pad);
    if (ph <= 0 || pw <= 0)
        return graph_fail(g, n, SY_ERR_SHAPE, "a %dx%d pool over the conv's %lldx%lld output leaves no pixel",
                          a->q.pool.ksize[0], a->q.pool.ksize[1], (long long)n->shape.dims[1],
                          (long long)n->shape.dims[2]);
    n->shape.dims[1] = ph, n->shape.dims[2] = pw;
    return SY_OK;
}

sy_status infer_QFULLY_CONNECTED(sy_graph *g, sy_node_rec *n) {
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *w = &graph_in_rec(g, n, 1)->shape;
    char sx[SY_SHAPE_STR_MAX], sw[SY_SHAPE_STR_MAX];
    if (x->rank < 1 || w->rank != 2 || x->dims[x->rank - 1] != w->dims[1])
        return graph_fail(g, n, SY_ERR_SHAPE, "cannot multiply %s by the weights %s (units, inputs)",
                          sy_shape_format(x, sx, sizeof sx), sy_shape_format(w, sw, sizeof sw));
    sy_status st = product_operands(g, n, w->dims[0]);
    n->shape = *x;
    n->shape.dims[x->rank - 1] = w->dims[0];
    n->dtype = SY_I8;
    return st;
}

sy_status infer_QADD(sy_graph *g, sy_node_rec *n) {
    sy_status st;
    if ((st = want(g, n, 0, SY_I8)) || (st = want(g, n, 1, SY_I8))) return st;
    const sy_shape *a = &graph_in_rec(g, n, 0)->shape, *b = &graph_in_rec(g, n, 1)->shape;
    if (!sy_shape_equal(a, b)) {
        char sa[SY_SHAPE_STR_MAX], sb[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "adds %s and %s: the int8 add takes equal shapes",
                          sy_shape_format(a, sa, sizeof sa), sy_shape_format(b, sb, sizeof sb));
    }
    n->shape = *a;
    n->dtype = SY_I8;
    return SY_OK;
}

static sy_status infer_qpool(sy_graph *g, sy_node_rec *n) {
    sy_status st = want(g, n, 0, SY_I8);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    if (x->rank != 4) {
        char s[SY_SHAPE_STR_MAX];
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s must be (N, H, W, C)", sy_shape_format(x, s, sizeof s));
    }
    if ((st = check_window(g, n, n->attr.q.ksize, n->attr.q.stride, NULL))) return st;
    return window_shape(g, n, x, n->attr.q.ksize, NULL, x->dims[3]);
}

sy_status infer_QMAX_POOL2D(sy_graph *g, sy_node_rec *n) { return infer_qpool(g, n); }
sy_status infer_QAVG_POOL2D(sy_graph *g, sy_node_rec *n) { return infer_qpool(g, n); }

sy_status infer_QMEAN(sy_graph *g, sy_node_rec *n) {
    sy_status st = want(g, n, 0, SY_I8);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    if (!n->attr.q.axes || (n->attr.q.axes >> x->rank))
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "reduces axes 0x%x of a rank-%d input", n->attr.q.axes,
                          x->rank);
    /* the output shape is preset: the reduced axes dropped, or kept as 1 (keep_dims) */
    int64_t kept = 1;
    for (int i = 0; i < x->rank; i++)
        if (!(n->attr.q.axes >> i & 1)) kept *= x->dims[i];
    if (sy_shape_count(&n->shape) != kept)
        return graph_fail(g, n, SY_ERR_SHAPE, "the output holds %lld values, not the %lld the reduction leaves",
                          (long long)sy_shape_count(&n->shape), (long long)kept);
    n->dtype = SY_I8;
    return SY_OK;
}

sy_status infer_QSOFTMAX(sy_graph *g, sy_node_rec *n) {
    sy_status st = want(g, n, 0, SY_I8);
    n->shape = graph_in_rec(g, n, 0)->shape;
    n->dtype = SY_I8;
    if (!st && n->shape.rank < 1) return graph_fail(g, n, SY_ERR_SHAPE, "softmax of a scalar");
    return st;
}

sy_status infer_QPAD(sy_graph *g, sy_node_rec *n) {
    sy_status st = want(g, n, 0, SY_I8);
    if (st) return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    if (n->shape.rank != x->rank) return graph_fail(g, n, SY_ERR_SHAPE, "the padded shape has another rank");
    for (int i = 0; i < x->rank; i++)
        if (n->attr.q.pad_before[i] < 0 || n->shape.dims[i] < x->dims[i] + n->attr.q.pad_before[i])
            return graph_fail(g, n, SY_ERR_SHAPE, "axis %d: padding %lld before %lld values leaves no room in %lld", i,
                              (long long)n->attr.q.pad_before[i], (long long)x->dims[i], (long long)n->shape.dims[i]);
    n->dtype = SY_I8;
    return SY_OK;
}

/* ---- issue 18, dynamic-range quantization: the hybrid ops (int8 weights, float32 activations) ---- */

sy_status infer_HFULLY_CONNECTED(sy_graph *g, sy_node_rec *n) {
    if (n->n_in != 3 && n->n_in != 4)
        return graph_fail(g, n, SY_ERR_INVALID_ARGUMENT, "takes (x, weights, scales [, bias]), not %d inputs", n->n_in);
    sy_status st;
    if ((st = want(g, n, 0, SY_F32)) || (st = want(g, n, 1, SY_I8)) || (st = want(g, n, 2, SY_F32)) ||
        (n->n_in == 4 && (st = want(g, n, 3, SY_F32))))
        return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *w = &graph_in_rec(g, n, 1)->shape;
    char sx[SY_SHAPE_STR_MAX], sw[SY_SHAPE_STR_MAX];
    if (x->rank < 1 || w->rank != 2 || x->dims[x->rank - 1] != w->dims[1])
        return graph_fail(g, n, SY_ERR_SHAPE, "cannot multiply %s by the weights %s (units, inputs)",
                          sy_shape_format(x, sx, sizeof sx), sy_shape_format(w, sw, sizeof sw));
    int64_t ns = sy_shape_count(&graph_in_rec(g, n, 2)->shape);
    if (ns != 1 && ns != w->dims[0])
        return graph_fail(g, n, SY_ERR_SHAPE, "%lld weight scales for %lld units: one, or one per unit", (long long)ns,
                          (long long)w->dims[0]);
    if (n->n_in == 4 && sy_shape_count(&graph_in_rec(g, n, 3)->shape) != w->dims[0])
        return graph_fail(g, n, SY_ERR_SHAPE, "the bias must hold %lld values, one per unit", (long long)w->dims[0]);
    n->shape = *x;
    n->shape.dims[x->rank - 1] = w->dims[0];
    n->dtype = SY_F32;
    return SY_OK;
}

sy_status infer_HLSTM(sy_graph *g, sy_node_rec *n) {
    sy_status st;
    if ((st = want(g, n, 0, SY_F32)) || (st = want(g, n, 1, SY_I8)) || (st = want(g, n, 2, SY_I8)) ||
        (st = want(g, n, 3, SY_F32)) || (st = want(g, n, 4, SY_F32)))
        return st;
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *wx = &graph_in_rec(g, n, 1)->shape,
                   *wh = &graph_in_rec(g, n, 2)->shape;
    char sx[SY_SHAPE_STR_MAX], s1[SY_SHAPE_STR_MAX], s2[SY_SHAPE_STR_MAX];
    int64_t u = wh->rank == 2 ? wh->dims[1] : 0;
    if (x->rank != 3 || wx->rank != 2 || wh->rank != 2 || u < 1 || wh->dims[0] != 4 * u || wx->dims[0] != 4 * u ||
        wx->dims[1] != x->dims[2])
        return graph_fail(g, n, SY_ERR_SHAPE, "input %s, input weights %s and recurrent weights %s must be (B, T, I), "
                          "(4 U, I) and (4 U, U)", sy_shape_format(x, sx, sizeof sx), sy_shape_format(wx, s1, sizeof s1),
                          sy_shape_format(wh, s2, sizeof s2));
    if (sy_shape_count(&graph_in_rec(g, n, 3)->shape) != 4 * u || sy_shape_count(&graph_in_rec(g, n, 4)->shape) != 8)
        return graph_fail(g, n, SY_ERR_SHAPE, "the bias must hold 4 x %lld values and the scales 8", (long long)u);
    n->shape = sy_shape_of(3, x->dims[0], x->dims[1], u);
    n->dtype = SY_F32;
    return SY_OK;
}
