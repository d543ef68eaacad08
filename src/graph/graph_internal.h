/*
 * graph_internal.h - node records, the op registry, and the builder entry
 * points the compiler uses (autodiff and fusion add nodes through them).
 */
#ifndef SY_GRAPH_INTERNAL_H
#define SY_GRAPH_INTERNAL_H

#include "systolic/graph.h"
#include "../backend/backend_internal.h"

_Static_assert((int)SY_PADDING_SAME == (int)SY_PAD_SAME, "padding enums agree");

typedef struct sy_node_rec {
    sy_op op;
    sy_dtype dtype;
    sy_shape shape;
    sy_attrs attr;
    int32_t in_off, n_in; /* inputs: g->edges[in_off .. in_off + n_in) */
    char *name;           /* scoped name, owned */
    sy_init init;         /* PARAM */
    bool trainable;       /* PARAM */
    bool bf16;            /* issue 16, mixed_bfloat16: the output is rounded to bfloat16 (a bf16 op in Keras) */
} sy_node_rec;

struct sy_graph {
    sy_node_rec *nodes;
    int64_t n_nodes, cap_nodes;
    int32_t *edges;
    int64_t n_edges, cap_edges;
    char scope[512];
    int32_t scope_marks[32]; /* scope lengths before each push */
    int32_t n_scopes;
    sy_eprog **progs; /* fused programs owned by this graph */
    int64_t n_progs, cap_progs;
    sy_status status;
    char error[1024];
    bool bf16; /* issue 16, mixed_bfloat16: nodes added now get bf16 (sy_graph_set_bf16) */
};

/* Shape inference: check the inputs of n (already linked) and set n->shape
 * and n->dtype; on a mismatch return graph_fail(...). Ops whose output shape
 * is an argument (reshape, fill, gradient ops) find it preset in n->shape. */
typedef sy_status (*sy_infer_fn)(sy_graph *g, sy_node_rec *n);

/* Gradient rule: given node y and the gradient dy of the loss w.r.t. it, add
 * the nodes that compute dx[i] for each input with need[i], SY_NONE for the
 * others. The graph may grow (node records move): look nodes up again after
 * adding. */
typedef sy_status (*sy_grad_fn)(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx);

enum {
    SY_OPF_LEAF = 1 << 0,    /* input, param, fill: no kernel runs */
    SY_OPF_ALIAS = 1 << 1,   /* output is a view of input 0 (reshape) */
    SY_OPF_UPDATE = 1 << 2,  /* writes inputs in place, no output */
    SY_OPF_ELTWISE = 1 << 3, /* elementwise: fusible */
    SY_OPF_GRAD_OP = 1 << 4, /* made by autodiff; not differentiable */
    SY_OPF_SIDE = 1 << 5,    /* issue 21: a second output of input 0's kernel, which writes it
                                (sy_kargs.aux); no kernel of its own */
};

/* issue 16, cost model: what an op costs (ops_cost.c says how each is
 * counted). A matrix product streams m rows through a k x n operand, count
 * times; flops = 2 m k n count over the products + vector_flops. */
#define SY_COST_MAX_PRODUCTS 4
typedef struct sy_mxu_product {
    int64_t m, k, n, count;
} sy_mxu_product;

typedef struct sy_op_cost {
    double flops;        /* all of it */
    double vector_flops; /* the part that is not matrix products */
    double bytes_read, bytes_written;
    int32_t n_products;
    sy_mxu_product product[SY_COST_MAX_PRODUCTS];
} sy_op_cost;

/* Fill c (zeroed by the caller) from n's shapes and attributes. */
typedef void (*sy_cost_fn)(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c);

typedef struct sy_op_def {
    sy_infer_fn infer;
    sy_grad_fn grad; /* NULL: not differentiable (see flags) */
    uint32_t flags;
    sy_eop eop; /* for SY_OPF_ELTWISE: the fused instruction */
    sy_cost_fn cost; /* issue 16, cost model */
} sy_op_def;

/* The cost of node `node` of g (after shape inference). */
void sy_op_cost_of(const sy_graph *g, sy_node node, sy_op_cost *c);

const sy_op_def *sy_op_def_of(sy_op op);

static inline sy_node_rec *graph_node(const sy_graph *g, sy_node id) { return &g->nodes[id]; }
static inline sy_node graph_input(const sy_graph *g, sy_node id, int i) {
    return g->edges[g->nodes[id].in_off + i];
}
static inline const sy_node_rec *graph_in_rec(const sy_graph *g, const sy_node_rec *n, int i) {
    return &g->nodes[g->edges[n->in_off + i]];
}

/* Add a node (the generic builder). `shape` presets the output shape for ops
 * that take it as an argument; NULL otherwise. Returns SY_NONE on failure
 * (sticky). */
sy_node graph_add(sy_graph *g, sy_op op, const sy_node *in, int n_in, const sy_attrs *attr,
                  const sy_shape *shape);

/* Record the first error on g, naming the op and node; returns status. */
sy_status graph_fail(sy_graph *g, const sy_node_rec *n, sy_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The printable shape of input i of n (for messages). */
const char *graph_in_shape_str(const sy_graph *g, const sy_node_rec *n, int i, char *buf);

/* dy reduced (summed over broadcast axes) back to `shape`. */
sy_node graph_unbroadcast(sy_graph *g, sy_node dy, const sy_shape *shape);

/* issue 21, fusion: conv2d's output for input x and kernel w (both rank 4), checked (ops_nn.c), and
 * a pool's window over x (N, H, W, C) with o output channels. */
sy_status graph_conv_out_shape(sy_graph *g, sy_node_rec *n, const sy_shape *x, const sy_shape *w,
                               sy_shape *out);
sy_status graph_pool_out_shape(sy_graph *g, sy_node_rec *n, const sy_shape *x, const int32_t *ksize,
                               const int32_t *stride, int padding, sy_shape *out);

/* Shared inference helpers (ops_math.c). */
sy_status require_float_inputs(sy_graph *g, sy_node_rec *n, int count);
sy_status normalize_axis(sy_graph *g, sy_node_rec *n, int rank);

/* The recurrent scans (ops_rnn.c): x (B, T, D) through kernel, recurrent
 * kernel, bias (SY_NONE: none) and recurrent dropout mask (SY_NONE: none);
 * act and rec_act are sy_act values, or fn (NULL: none) gives both as
 * sy_act_params {activation, recurrent_activation} of any function
 * (SY_AF_*, up to SY_AF_SCAN_COUNT) for the general cell. An LSTM scan for
 * inference returns h only and has no gradient. */
sy_node graph_lstm_scan(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask, int act,
                        int rec_act, const sy_act_params *fn, bool inference);
sy_node graph_gru_scan(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask, int act,
                       int rec_act, const sy_act_params *fn);
/* issue 17, masking: the scans with the Keras mask steps (B, T) of 0/1 (SY_NONE: none), under which a step
 * of 0 keeps the previous state (h, and c for LSTM) and its gates get no gradient. */
sy_node graph_lstm_scan_masked(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask,
                               sy_node steps, int act, int rec_act, const sy_act_params *fn, bool inference);
sy_node graph_gru_scan_masked(sy_graph *g, sy_node x, sy_node kernel, sy_node recurrent, sy_node bias, sy_node mask,
                              sy_node steps, int act, int rec_act, const sy_act_params *fn);
/* The column where a scan's rows hold h (U columns from there). */
int64_t graph_scan_h_column(const sy_graph *g, sy_node scan);

/* The activation op (issue 15): fn a sy_act_fn, a, b, c its parameters
 * (backend_internal.h). */
sy_node graph_activation(sy_graph *g, sy_node x, int fn, float a, float b, float c);

/* issue 18 (ops_quant.c): a CONSTANT leaf of dtype and shape holding a copy of data (its shape's bytes), named
 * name (NULL: "constant"); the int8 ops' weights, biases and multipliers. */
sy_node graph_constant(sy_graph *g, const char *name, sy_dtype dtype, sy_shape shape, const void *data);

/* Deep copy (nodes, edges, names, programs). */
sy_status graph_clone(const sy_graph *g, sy_graph **out);

/* Take ownership of a fused program. */
sy_status graph_own_prog(sy_graph *g, sy_eprog *p);

/* Per-op rules, in ops_*.c. */
#define SY_OP(id, name, arity)                                                                     \
    sy_status infer_##id(sy_graph *g, sy_node_rec *n);                                             \
    sy_status grad_##id(sy_graph *g, sy_node y, sy_node dy, const bool *need, sy_node *dx);        \
    void cost_##id(const sy_graph *g, const sy_node_rec *n, sy_op_cost *c);
#include "../backend/ops.def"
#undef SY_OP

#endif
