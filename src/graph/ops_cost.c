/*
 * ops_cost.c - what each op costs: its arithmetic, the bytes it reads and
 * writes, and the matrix products it hands to a matrix unit.
 *
 * Every op of ops.def has a cost_<ID> here, and registry.c puts it in the
 * op's row beside its shape inference and gradient rule, so the emulated
 * TPU's clock (compiler/cost.c), `systolic profile` and the benchmarks all
 * read one table: there is no second list of FLOPs anywhere.
 *
 * A cost is computed from the node's shapes and attributes alone (after
 * shape inference), never from data:
 *
 *   products     the (M, K, N) matrix products the op is made of, each
 *                `count` times: M rows streamed through a K x N operand.
 *                matmul (M, K) x (K, N); conv2d M = batch * output pixels,
 *                K = kh * kw * cin / groups, N = cout / groups, `groups`
 *                times; its input backprop the same product transposed
 *                (M = batch * output pixels, K = cout / groups,
 *                N = kh * kw * cin / groups, then col2im); its filter
 *                backprop M = kh * kw * cin / groups, K = batch * output
 *                pixels, N = cout / groups. The recurrent scans are their
 *                per-step products times T: an LSTM step multiplies
 *                [x, h(t-1)] (B, D + U) by [kernel; recurrent] (D + U, 4U),
 *                a GRU step x (B, D) by kernel (D, 3U) and h (B, U) by the
 *                recurrent kernel (U, 3U); their gradient ops likewise.
 *   vector_flops the arithmetic that is not a matrix product (elementwise
 *                work, reductions, a product's bias and activation
 *                epilogue, the gates of a recurrent cell): one per output
 *                element per elementwise instruction by default.
 *   flops        2 M K N count summed over the products, plus vector_flops.
 *   bytes        every input read once and the output written once, at the
 *                graph's dtypes (a slice reads only what it keeps; an
 *                optimizer update rewrites its parameter and slots in
 *                place; leaves and views cost nothing).
 *
 * The per-element factors of the composite ops (softmax 5, an LSTM cell's
 * 13 per unit, Adam's 12 per weight, ...) count the operations of the
 * formula the ref kernel computes; docs/design/tpu-cost-model.md lists them.
 */
#include "graph_internal.h"

#include <string.h>

static double elements(const sy_shape *s) {
    return (double)sy_shape_count(s);
}

static double node_bytes(const sy_node_rec *r) {
    return elements(&r->shape) * (double)sy_dtype_size(r->dtype);
}

static double input_bytes(const sy_graph *g, const sy_node_rec *n) {
    double b = 0;
    for (int i = 0; i < n->n_in; i++) b += node_bytes(graph_in_rec(g, n, i));
    return b;
}

static void add_product(sy_op_cost *c, int64_t m, int64_t k, int64_t n, int64_t count) {
    SY_ASSERT(c->n_products < SY_COST_MAX_PRODUCTS);
    c->product[c->n_products++] = (sy_mxu_product){.m = m, .k = k, .n = n, .count = count};
    c->flops += 2.0 * (double)m * (double)k * (double)n * (double)count;
}

/* Reads every input, writes the output, `per_out` vector operations per
 * output element. */
static void streamed(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c, double per_out) {
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n);
    c->vector_flops = per_out * elements(&n->shape);
    c->flops += c->vector_flops;
}

/* As streamed, but the work is per element of input 0 (reductions, losses). */
static void reducing(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c, double per_in) {
    streamed(g, n, c, 0);
    c->vector_flops = per_in * elements(&graph_in_rec(g, n, 0)->shape);
    c->flops += c->vector_flops;
}

void sy_op_cost_of(const sy_graph *g, sy_node node, sy_op_cost *c) {
    const sy_node_rec *n = graph_node(g, node);
    memset(c, 0, sizeof *c);
    sy_op_def_of(n->op)->cost(g, n, c);
}

#define COST(id) void cost_##id(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c)
/* leaves and views: no kernel runs */
#define COST_FREE(id)                                                                              \
    COST(id) {                                                                                     \
        (void)g, (void)n, (void)c;                                                                 \
    }
#define COST_STREAMED(id, per_out)                                                                 \
    COST(id) {                                                                                     \
        streamed(g, n, c, per_out);                                                                \
    }
#define COST_REDUCING(id, per_in)                                                                  \
    COST(id) {                                                                                     \
        reducing(g, n, c, per_in);                                                                 \
    }

COST_FREE(INPUT)
COST_FREE(PARAM)
COST_FREE(FILL)
COST_FREE(RESHAPE)

/* elementwise, one instruction per element */
COST_STREAMED(BIAS_ADD, 1)
COST_STREAMED(ADD, 1)
COST_STREAMED(SUB, 1)
COST_STREAMED(MUL, 1)
COST_STREAMED(DIV, 1)
COST_STREAMED(NEG, 1)
COST_STREAMED(RELU, 1)
COST_STREAMED(SIGMOID, 1)
COST_STREAMED(TANH, 1)
COST_STREAMED(EXP, 1)
COST_STREAMED(LOG, 1)
COST_STREAMED(RSQRT, 1)
COST_STREAMED(ACT, 1)
COST_STREAMED(RELU_GRAD, 1)
COST_STREAMED(SIGMOID_GRAD, 2) /* dy * y * (1 - y) */
COST_STREAMED(TANH_GRAD, 2)    /* dy * (1 - y^2) */
COST_STREAMED(ACT_GRAD, 2)
COST_STREAMED(DROPOUT, 2) /* the mask's draw, the scaled multiply */
COST_STREAMED(SOFTMAX, 5) /* max, subtract, exp, sum, divide */
COST_STREAMED(LOG_SOFTMAX, 5)
COST_STREAMED(SOFTMAX_GRAD, 4) /* y * (dy - sum(dy y)) */
COST_STREAMED(LOG_SOFTMAX_GRAD, 4)
COST_STREAMED(UPSAMPLE2D, 1)
COST_STREAMED(UPSAMPLE2D_GRAD, 1)
/* data movement: no arithmetic */
COST_STREAMED(COPY, 0)
COST_STREAMED(TRANSPOSE, 0)
COST_STREAMED(CONCAT, 0)
COST_STREAMED(BROADCAST_TO, 0)
COST_STREAMED(REVERSE, 0)
COST_STREAMED(PAD, 0)
COST_STREAMED(SLICE_GRAD, 0)
COST_STREAMED(GATHER_GRAD, 1) /* a scatter-add of dy's rows */

COST(SLICE) {
    streamed(g, n, c, 0);
    c->bytes_read = node_bytes(n); /* only the kept part is read */
}

COST(GATHER) {
    streamed(g, n, c, 0);
    c->bytes_read =
        node_bytes(n) + node_bytes(graph_in_rec(g, n, 1)); /* the rows gathered and the indices */
}

/* reductions and losses: work per element of the first input */
COST_REDUCING(REDUCE_SUM, 1)
COST_REDUCING(REDUCE_MEAN, 1)
COST_REDUCING(REDUCE_MAX, 1)
COST_REDUCING(REDUCE_MAX_GRAD, 2)
COST_REDUCING(SPARSE_SOFTMAX_CE, 5)
COST_REDUCING(SOFTMAX_CE, 6)
COST_REDUCING(SIGMOID_CE, 5)
COST_REDUCING(SPARSE_CATEGORICAL_CE, 2)
COST_REDUCING(CATEGORICAL_CE, 3)
COST_REDUCING(BINARY_CE, 6)
COST_REDUCING(MSE, 3)
/* the losses' gradients read (dl, x, target) and write one value per element of x */
COST_STREAMED(SPARSE_SOFTMAX_CE_GRAD, 6)
COST_STREAMED(SOFTMAX_CE_GRAD, 6)
COST_STREAMED(SIGMOID_CE_GRAD, 4)
COST_STREAMED(SPARSE_CATEGORICAL_CE_GRAD, 2)
COST_STREAMED(CATEGORICAL_CE_GRAD, 2)
COST_STREAMED(BINARY_CE_GRAD, 5)
COST_STREAMED(MSE_GRAD, 3)
/* issue 17, losses and metrics: about a dozen flops per element (log, pow and exp counted as one) */
COST_REDUCING(KERAS_LOSS, 12)
COST_STREAMED(KERAS_LOSS_GRAD, 16)

/* The pools: a window of kh * kw inputs per output (forward) or per dy element (gradient). */
static double window(const sy_node_rec *n) {
    return (double)n->attr.pool.ksize[0] * (double)n->attr.pool.ksize[1];
}
COST(MAX_POOL2D) {
    streamed(g, n, c, window(n));
}
COST(AVG_POOL2D) {
    streamed(g, n, c, window(n));
}
COST(MAX_POOL2D_GRAD) { /* (x, y, dy) */
    streamed(g, n, c, 0);
    c->vector_flops = window(n) * elements(&graph_in_rec(g, n, 2)->shape);
    c->flops = c->vector_flops;
}
COST(AVG_POOL2D_GRAD) {
    reducing(g, n, c, window(n));
}

/* Optimizer and state updates: `per` operations per weight; the parameter
 * and its slots are read and rewritten in place, the gradient (input 1) only read. */
static void update(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c, double per) {
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = c->bytes_read - node_bytes(graph_in_rec(g, n, 1));
    c->vector_flops = per * elements(&graph_in_rec(g, n, 0)->shape);
    c->flops = c->vector_flops;
}
COST(SGD_UPDATE) {
    update(g, n, c, n->n_in > 2 ? 4 : 2);
} /* p -= lr g; with momentum v = m v - lr g, p += v */
COST(ADAM_UPDATE) {
    update(g, n, c, 12);
}
COST(RMSPROP_UPDATE) {
    update(g, n, c, 8);
}
/* issue 17, optimizers: operations per weight of each rule as written */
COST(ADADELTA_UPDATE) {
    update(g, n, c, 14);
}
COST(ADAGRAD_UPDATE) {
    update(g, n, c, 6);
}
COST(ADAMAX_UPDATE) {
    update(g, n, c, 9);
}
COST(ADAFACTOR_UPDATE) {
    update(g, n, c, 16);
}
COST(NADAM_UPDATE) {
    update(g, n, c, 16);
}
COST(FTRL_UPDATE) {
    update(g, n, c, 16);
}
COST(LION_UPDATE) {
    update(g, n, c, 8);
}
COST(MOVING_AVERAGE) {
    update(g, n, c, 3);
}

/* A fused elementwise chain: its instructions (not the loads) once per output element. */
COST(FUSED_ELTWISE) {
    const sy_eprog *p = n->attr.fused;
    int ops = 0;
    for (int i = 0; i < p->n; i++)
        if (p->insn[i].op > SY_E_LD_SCALAR) ops++;
    streamed(g, n, c, ops);
}

/* ---- matrix products ---------------------------------------------------- */

/* A product's epilogue: the bias add and the activation the fusion pass folded in. */
static void epilogue(const sy_node_rec *n, sy_op_cost *c, bool bias, bool act) {
    c->vector_flops = ((bias ? 1 : 0) + (act ? 1 : 0)) * elements(&n->shape);
    c->flops += c->vector_flops;
}

COST(MATMUL) {
    const sy_shape *a = &graph_in_rec(g, n, 0)->shape, *b = &graph_in_rec(g, n, 1)->shape;
    int64_t m = n->attr.matmul.ta ? a->dims[1] : a->dims[0],
            k = n->attr.matmul.ta ? a->dims[0] : a->dims[1];
    int64_t cols = n->attr.matmul.tb ? b->dims[0] : b->dims[1];
    add_product(c, m, k, cols, 1);
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n);
    epilogue(n, c, n->n_in > 2, n->attr.matmul.act != 0);
}

static int64_t groups(const sy_node_rec *n) {
    return n->attr.conv.groups > 1 ? n->attr.conv.groups : 1;
}

/* x (N, H, W, C) * w (KH, KW, C / groups, O) -> (N, OH, OW, O) */
COST(CONV2D) {
    const sy_shape *w = &graph_in_rec(g, n, 1)->shape;
    int64_t gr = groups(n);
    add_product(c, n->shape.dims[0] * n->shape.dims[1] * n->shape.dims[2],
                w->dims[0] * w->dims[1] * w->dims[2], w->dims[3] / gr, gr);
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n);
    epilogue(n, c, n->n_in > 2, n->attr.conv.act != 0);
}

/* issue 21, conv -> pool fusion: the conv's product over every conv output pixel the pools read
 * (all of them, counted as such), its epilogue, a window's worth of pooling per pooled output and
 * the activation after it; only the pooled output is written (the argmax, a side output, costs
 * nothing of its own: a byte per output, counted here). */
static double conv_pixels(const sy_node_rec *n, const sy_shape *x, const sy_shape *w) {
    int64_t oh, ow, p;
    sy_conv_out(x->dims[1], w->dims[0], n->attr.conv.stride[0], n->attr.conv.padding, &oh, &p);
    sy_conv_out(x->dims[2], w->dims[1], n->attr.conv.stride[1], n->attr.conv.padding, &ow, &p);
    return (double)x->dims[0] * (double)oh * (double)ow;
}
COST(CONV2D_POOL) {
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *w = &graph_in_rec(g, n, 1)->shape;
    double pixels = conv_pixels(n, x, w);
    add_product(c, (int64_t)pixels, w->dims[0] * w->dims[1] * w->dims[2], w->dims[3], 1);
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n) * (n->attr.conv.pool_avg ? 1.0 : 1.25);
    double window = (double)n->attr.conv.pool_ksize[0] * (double)n->attr.conv.pool_ksize[1];
    c->vector_flops = pixels * (double)w->dims[3] * ((n->n_in > 2) + (n->attr.conv.act != 0)) +
                      elements(&n->shape) * (window + (n->attr.conv.post_act != 0));
    c->flops += c->vector_flops;
}
COST_FREE(POOL_ARGMAX)
COST_FREE(CONV2D_POOL_BIAS_GRAD)
COST_FREE(MATMUL_BIAS_GRAD) /* (a sum over b, which the product reads anyway) */
/* (x, dy, y [, argmax]) -> dw: the filter gradient's product over the conv's pixels, from the
 * pooled gradient (with the bias gradient, a sum per element of dy); dense_dy: dy = dz w^T first,
 * (N, U) x (U, F) */
COST(CONV2D_POOL_BACKPROP_FILTER) {
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    add_product(c, n->shape.dims[0] * n->shape.dims[1] * n->shape.dims[2],
                (int64_t)conv_pixels(n, x, &n->shape), n->shape.dims[3], 1);
    double pooled = elements(&graph_in_rec(g, n, 1)->shape);
    if (n->attr.conv.dense_dy) {
        const sy_shape *dz = &graph_in_rec(g, n, 1)->shape, *w = &graph_in_rec(g, n, 2)->shape;
        add_product(c, dz->dims[0], dz->dims[1], w->dims[0], 1);
        pooled = (double)dz->dims[0] * (double)w->dims[0];
    }
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n) + (double)n->shape.dims[3] * (double)sy_dtype_size(n->dtype);
    c->vector_flops = 2 * pooled;
    c->flops += c->vector_flops;
}

/* (dy (N, OH, OW, O), w (KH, KW, C / groups, O)) -> dx (N, H, W, C): dy w^T, then col2im adds the
 * patches */
COST(CONV2D_BACKPROP_INPUT) {
    const sy_shape *dy = &graph_in_rec(g, n, 0)->shape, *w = &graph_in_rec(g, n, 1)->shape;
    int64_t gr = groups(n);
    add_product(c, dy->dims[0] * dy->dims[1] * dy->dims[2], w->dims[3] / gr,
                w->dims[0] * w->dims[1] * w->dims[2], gr);
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n);
}

/* (x (N, H, W, C), dy (N, OH, OW, O)) -> dw (KH, KW, C / groups, O): patches^T dy */
COST(CONV2D_BACKPROP_FILTER) {
    const sy_shape *dy = &graph_in_rec(g, n, 1)->shape;
    int64_t gr = groups(n);
    add_product(c, n->shape.dims[0] * n->shape.dims[1] * n->shape.dims[2],
                dy->dims[0] * dy->dims[1] * dy->dims[2], n->shape.dims[3] / gr, gr);
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n);
}

/* ---- recurrent scans: x (B, T, D), kernel (D, gU), recurrent (U, gU) ---- */

static void scan_sizes(const sy_graph *g, const sy_node_rec *n, int kernel, int recurrent,
                       int64_t *b, int64_t *t, int64_t *d, int64_t *u) {
    const sy_shape *seq = &graph_in_rec(g, n, 0)->shape;
    *b = seq->dims[0];
    *t = seq->dims[1];
    *d = kernel >= 0 ? graph_in_rec(g, n, kernel)->shape.dims[0] : 0;
    *u = graph_in_rec(g, n, recurrent)->shape.dims[0];
}

static void scan_vector(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c, double per_unit,
                        int64_t rows, int64_t u) {
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n);
    c->vector_flops = per_unit * (double)rows * (double)u;
    c->flops += c->vector_flops;
}

/* A step: [x, h(t-1)] (B, D + U) [kernel; recurrent] (D + U, 4U), then the
 * cell: 4U bias adds, 4U activations, c = f c + i g (3U), h = o tanh(c) (2U). */
COST(LSTM_SCAN) {
    int64_t b, t, d, u;
    scan_sizes(g, n, 1, 2, &b, &t, &d, &u);
    add_product(c, b, d + u, 4 * u, t);
    scan_vector(g, n, c, 13, b * t, u);
}

/* A step backwards: the gates' gradients (about 20 operations per unit),
 * then d gates (B, 4U) [kernel; recurrent]^T for dx and dh(t-1) (only the
 * recurrent part without dx). Inputs (dh, seq, kernel, recurrent [, mask]). */
COST(LSTM_SCAN_GRAD) {
    int64_t b, t, d, u;
    scan_sizes(g, n, 2, 3, &b, &t, &d, &u);
    t = graph_in_rec(g, n, 1)->shape.dims[1]; /* dh may hold only the last step */
    add_product(c, b, 4 * u, n->attr.rnn.need_dx ? d + u : u, t);
    scan_vector(g, n, c, 20, b * t, u);
}

/* (seq (B, T, W), grads (B, T, G), kernel (D, 4U)) -> (D + U + 1, 4U): [x, h(t-1), 1]^T d gates
 * over all B T rows */
COST(LSTM_SCAN_WGRAD) {
    const sy_shape *seq = &graph_in_rec(g, n, 0)->shape;
    add_product(c, n->shape.dims[0], seq->dims[0] * seq->dims[1], n->shape.dims[1], 1);
    c->bytes_read = input_bytes(g, n);
    c->bytes_written = node_bytes(n);
}

/* A step (Keras's reset_after GRU): x kernel (B, D, 3U) and h recurrent (B, U, 3U), then about 12
 * operations per unit. */
COST(GRU_SCAN) {
    int64_t b, t, d, u;
    scan_sizes(g, n, 1, 2, &b, &t, &d, &u);
    add_product(c, b, d, 3 * u, t);
    add_product(c, b, u, 3 * u, t);
    scan_vector(g, n, c, 12, b * t, u);
}

/* (dh, seq, recurrent [, mask]): per step the recurrent side's gate gradients (B, 3U) recurrent^T
 * (3U, U). */
COST(GRU_SCAN_GRAD) {
    int64_t b, t, d, u;
    scan_sizes(g, n, -1, 2, &b, &t, &d, &u);
    t = graph_in_rec(g, n, 1)->shape.dims[1];
    add_product(c, b, 3 * u, u, t);
    scan_vector(g, n, c, 20, b * t, u);
}

/* ---- issue 18, int8 inference (ops_quant.c): the same counts at int8's bytes ---- */
COST_FREE(CONSTANT)
COST_STREAMED(QUANTIZE, 2)   /* scale (or requantize) and round, clamp */
COST_STREAMED(DEQUANTIZE, 2) /* subtract the zero point, scale */
COST_STREAMED(QADD, 6)       /* two rescales, add, requantize, offset, clamp */
COST_STREAMED(QSOFTMAX, 4)   /* max, table lookup, sum, scale */
COST_STREAMED(QPAD, 0)
COST_REDUCING(QMEAN, 1)
/* a pool: one operation per window tap, plus the rounding divide of the average */
static void qpool_cost(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c, double extra) {
    streamed(g, n, c, (double)n->attr.q.ksize[0] * n->attr.q.ksize[1] + extra);
}
COST(QMAX_POOL2D) { qpool_cost(g, n, c, 0); }
COST(QAVG_POOL2D) { qpool_cost(g, n, c, 1); }
/* int8 products, counted as conv2d's and matmul's are: M rows through a K x N operand per group, and the
 * requantizing epilogue (bias, multiply, shift, offset, clamp) per output element */
COST(QCONV2D) {
    const sy_shape *w = &graph_in_rec(g, n, 1)->shape;
    int64_t groups = n->attr.q.groups > 1 ? n->attr.q.groups : 1;
    streamed(g, n, c, 5);
    add_product(c, n->shape.dims[0] * n->shape.dims[1] * n->shape.dims[2], w->dims[1] * w->dims[2] * w->dims[3],
                 w->dims[0] / groups, groups);
}
/* the conv's product over its full output, its epilogue on the pooled outputs only, one max per window tap */
COST(QCONV2D_POOL) {
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape, *w = &graph_in_rec(g, n, 1)->shape;
    int64_t groups = n->attr.q.groups > 1 ? n->attr.q.groups : 1, oh, ow, pad;
    int64_t dh = n->attr.q.dilation[0] > 1 ? n->attr.q.dilation[0] : 1;
    int64_t dw = n->attr.q.dilation[1] > 1 ? n->attr.q.dilation[1] : 1;
    sy_conv_out(x->dims[1], sy_dilated(w->dims[1], dh), n->attr.q.stride[0], n->attr.q.padding, &oh, &pad);
    sy_conv_out(x->dims[2], sy_dilated(w->dims[2], dw), n->attr.q.stride[1], n->attr.q.padding, &ow, &pad);
    streamed(g, n, c, 5 + (double)n->attr.q.pool.ksize[0] * n->attr.q.pool.ksize[1]);
    add_product(c, x->dims[0] * oh * ow, w->dims[1] * w->dims[2] * w->dims[3], w->dims[0] / groups, groups);
}
COST(QFULLY_CONNECTED) {
    const sy_shape *w = &graph_in_rec(g, n, 1)->shape;
    streamed(g, n, c, 5);
    add_product(c, sy_shape_count(&n->shape) / w->dims[0], w->dims[1], w->dims[0], 1);
}
/* issue 18, dynamic-range quantization: the hybrid products, as their int8 twins, plus each float row's
 * quantization (min, max, scale: about 3 operations per input element) */
COST(HFULLY_CONNECTED) {
    const sy_shape *w = &graph_in_rec(g, n, 1)->shape;
    int64_t rows = sy_shape_count(&n->shape) / w->dims[0];
    streamed(g, n, c, 4);
    c->vector_flops += 3.0 * (double)rows * (double)w->dims[1];
    c->flops += 3.0 * (double)rows * (double)w->dims[1];
    add_product(c, rows, w->dims[1], w->dims[0], 1);
}
/* a step: x(t) and h(t-1) quantized, (B, I + U) x (I + U, 4U) in int8, then the float cell as LSTM_SCAN's */
COST(HLSTM) {
    const sy_shape *x = &graph_in_rec(g, n, 0)->shape;
    int64_t b = x->dims[0], t = x->dims[1], d = x->dims[2], u = n->shape.dims[2];
    add_product(c, b, d + u, 4 * u, t);
    scan_vector(g, n, c, 13 + 3.0 * (double)(d + u) / (double)u + 8, b * t, u);
}
