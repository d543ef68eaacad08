/*
 * op_harness.h - the op harness's table and the leaves its rows are built
 * from (op_rows.c), shared by its checks: test_ops.c (every op on every
 * backend against ref, gradients against finite differences) and
 * test_ops_bf16.c (issue 16: bfloat16 storage against float32 storage).
 *
 * A row builds one op (or a short chain) on leaves -- variables and
 * inputs whose values are generated once from the row's seed, identical in
 * float32 and float64 -- and returns its output node.
 */
#ifndef SY_TEST_OP_HARNESS_H
#define SY_TEST_OP_HARNESS_H

#include "graph/graph_internal.h"
#include "systolic.h"

typedef enum { LEAF_VAR, LEAF_FLOAT, LEAF_INT } leaf_kind;

typedef struct leaf {
    leaf_kind kind;
    sy_node node;
    sy_shape shape;
    double *values;
} leaf;

typedef struct ctx {
    sy_graph *g;
    sy_dtype dt;
    leaf leaves[16];
    int n_leaves;
    uint64_t seed;
    /* issue 16, bfloat16 storage (test_ops_bf16.c): the row is built as a layer under
     * mixed_bfloat16 builds it -- each float leaf cast to bfloat16, every op a bf16 op */
    bool bf16;
} ctx;

/* MXU_GROWS (issue 16, MXU recurrent products): a scan whose state grows step by step (linear
 * gates), which multiplies bfloat16's rounding error along the way: sim-ref within 5e-2 of float32,
 * not 1e-2 */
/* FUSED_TRAIN (issue 21): a chain the compiler fuses; its training plan's gradients, fused, against
 * the unfused graph's, and the row's op in the fused plan (test_ops.c) */
enum { FWD = 1, GRAD = 2, CHECK_FUSED = 4, MXU_GROWS = 8, FUSED_TRAIN = 16 };

typedef struct row {
    const char *name;
    sy_op op;
    sy_node (*build)(ctx *c);
    int checks;
} row;

extern const row op_rows[];
extern const int op_n_rows;

/* A fresh graph with the row built in it, in dtype dt, leaves from seed, as a mixed_bfloat16 layer
 * when bf16 (ctx.bf16); returns the row's output (the graph's status says whether building failed).
 */
sy_node op_build(const row *r, ctx *c, sy_dtype dt, uint64_t seed, bool bf16);
void op_free_ctx(ctx *c);
/* Write the leaves' values into the plan (variables and inputs); with op_poison_first_leaf, the
 * first float leaf is all NaN. */
extern bool op_poison_first_leaf;
void op_feed(ctx *c, sy_plan *p);
/* Element i of a plan's output of dtype dt, as a double. */
double op_read_val(const void *p, sy_dtype dt, int64_t i);
/* Leaves (op_harness.c): one of `kind` uniform in [lo, hi) (kept 0.05 from zero if away_from_zero);
 * a differentiable float variable uniform in [lo, hi), or kept at least 0.05 away from zero in [-1,
 * 1) (relu and friends have a kink there); a float input uniform in [lo, hi) that is not
 * differentiated; an int32 input in [lo, hi). Under ctx.bf16 float leaves are read through a cast
 * to bfloat16. */
sy_node op_add_leaf(ctx *c, leaf_kind kind, sy_shape s, double lo, double hi, bool away_from_zero);
sy_node op_var(ctx *c, sy_shape s, double lo, double hi);
sy_node op_var_nz(ctx *c, sy_shape s);
sy_node op_cin(ctx *c, sy_shape s, double lo, double hi);
sy_node op_iin(ctx *c, sy_shape s, int lo, int hi);
/* issue 18: the int8 ops, checked against hand-worked TFLite arithmetic (op_rows_quant.c) */
/* Returns the failures (printed), *checks the checks made. */
int check_quant_ops(bool *covered, int *checks);
/* issue 21: conv -> pool chains that fuse (op_rows_fused.c) */
sy_node op_b_conv_pool_max_relu(ctx *c);
sy_node op_b_conv_pool_sigmoid_same(ctx *c);
sy_node op_b_conv_pool_avg(ctx *c);
sy_node op_b_conv_pool_im2col_tanh(ctx *c);
sy_node op_b_conv_pool_avg_relu(ctx *c);
sy_node op_b_conv_pool_dense(ctx *c);
sy_node op_b_conv_pool_registers(ctx *c);
sy_node op_b_dense_bias(ctx *c);
/* An LSTM scan built for inference (h only, last step): it has no gradient. */
sy_node op_inference_scan(ctx *c);

#define S(...)       sy_shape_of(__VA_ARGS__)
#define R(rank, ...) sy_shape_of(rank, __VA_ARGS__)

#endif
