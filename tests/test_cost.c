/*
 * test_cost.c - the emulated TPU's clock (issue 16): every op has a cost,
 * a few ops' costs worked by hand, the matrix unit's cycle formula against
 * SCALE-Sim's golden reports and small cases counted by hand, and the pass
 * over a plan on a made-up chip whose every figure is a round number;
 * issue 20's pods on paper: the slices' topologies, their refusals, and the
 * all-reduce over a 2-D or 3-D torus worked by hand.
 */
#include "check.h"
#include "graph/graph_internal.h"
#include "systolic.h"
#include "systolic/profile.h"

#include <string.h>

static void check_cost(const sy_graph *g, sy_node n, const char *what, double flops,
                       double vector_flops, double read, double written) {
    sy_op_cost c;
    sy_op_cost_of(g, n, &c);
    CHECK_CLOSE(c.flops, flops, 0, 0, "%s flops", what);
    CHECK_CLOSE(c.vector_flops, vector_flops, 0, 0, "%s vector flops", what);
    CHECK_CLOSE(c.bytes_read, read, 0, 0, "%s bytes read", what);
    CHECK_CLOSE(c.bytes_written, written, 0, 0, "%s bytes written", what);
}

static void check_product(const sy_graph *g, sy_node n, const char *what, int i, int64_t m,
                          int64_t k, int64_t cols, int64_t count) {
    sy_op_cost c;
    sy_op_cost_of(g, n, &c);
    CHECK(i < c.n_products, "%s: product %d of %d", what, i, c.n_products);
    if (i >= c.n_products) return;
    const sy_mxu_product *p = &c.product[i];
    CHECK(p->m == m && p->k == k && p->n == cols && p->count == count,
          "%s: product %d is (%lld, %lld, %lld) x %lld, expected (%lld, %lld, %lld) x %lld", what,
          i, (long long)p->m, (long long)p->k, (long long)p->n, (long long)p->count, (long long)m,
          (long long)k, (long long)cols, (long long)count);
}

static void test_every_op_has_a_cost(void) {
    for (int op = 0; op < SY_OP_COUNT; op++)
        CHECK(sy_op_def_of((sy_op)op)->cost != NULL, "op %s has no cost function",
              sy_op_name((sy_op)op));
}

static void test_op_costs(void) {
    sy_graph *g;
    CHECK_OK(sy_graph_new(&g));
    /* matmul (4, 6) x (6, 3): 2 * 4 * 6 * 3 = 144 FLOPs; reads 24 + 18 floats, writes 12 */
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 4, 6));
    sy_node w = sy_graph_param(g, "w", SY_F32, sy_shape_of(2, 6, 3), sy_init_zeros());
    sy_node y = sy_graph_matmul(g, x, w, false, false);
    check_cost(g, y, "matmul", 144, 0, 4 * 42, 4 * 12);
    check_product(g, y, "matmul", 0, 4, 6, 3, 1);
    /* transposed: (6, 4)^T x (3, 6)^T is the same product */
    sy_node xt = sy_graph_input(g, "xt", SY_F32, sy_shape_of(2, 6, 4));
    sy_node wt = sy_graph_param(g, "wt", SY_F32, sy_shape_of(2, 3, 6), sy_init_zeros());
    check_product(g, sy_graph_matmul(g, xt, wt, true, true), "matmul^T", 0, 4, 6, 3, 1);

    /* relu of (4, 3): 12 FLOPs, 48 bytes in and out */
    check_cost(g, sy_graph_relu(g, y), "relu", 12, 12, 48, 48);
    /* sum over axis 1 of (4, 6): 24 additions, reads 96 bytes, writes 4 floats */
    int32_t axis = 1;
    check_cost(g, sy_graph_reduce_sum(g, x, &axis, 1, false), "reduce_sum", 24, 24, 96, 16);

    /* conv2d: x (2, 5, 5, 3) * w (3, 3, 3, 4), stride 1, valid -> (2, 3, 3, 4):
     * M = 2 * 3 * 3 = 18 output pixels, K = 3 * 3 * 3 = 27, N = 4 */
    sy_node img = sy_graph_input(g, "img", SY_F32, sy_shape_of(4, 2, 5, 5, 3));
    sy_node k = sy_graph_param(g, "k", SY_F32, sy_shape_of(4, 3, 3, 3, 4), sy_init_zeros());
    sy_node conv = sy_graph_conv2d(g, img, k, 1, 1, SY_PADDING_VALID);
    double conv_flops = 2.0 * 18 * 27 * 4;
    check_cost(g, conv, "conv2d", conv_flops, 0, 4 * (150 + 108), 4 * 72);
    check_product(g, conv, "conv2d", 0, 18, 27, 4, 1);
    /* its backprops: dy (2, 3, 3, 4) w^T -> col2im (M 18, K 4, N 27); patches^T dy (M 27, K 18, N
     * 4): the same FLOPs */
    sy_node dy = sy_graph_input(g, "dy", SY_F32, sy_shape_of(4, 2, 3, 3, 4));
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.conv.stride[0] = at.conv.stride[1] = 1;
    sy_node in_bi[2] = {dy, k}, in_bf[2] = {img, dy};
    sy_shape xs = sy_shape_of(4, 2, 5, 5, 3), ws = sy_shape_of(4, 3, 3, 3, 4);
    sy_node bi = graph_add(g, SY_OP_CONV2D_BACKPROP_INPUT, in_bi, 2, &at, &xs);
    sy_node bf = graph_add(g, SY_OP_CONV2D_BACKPROP_FILTER, in_bf, 2, &at, &ws);
    CHECK_OK(sy_graph_status(g));
    check_cost(g, bi, "conv2d_backprop_input", conv_flops, 0, 4 * (72 + 108), 4 * 150);
    check_product(g, bi, "conv2d_backprop_input", 0, 18, 4, 27, 1);
    check_cost(g, bf, "conv2d_backprop_filter", conv_flops, 0, 4 * (150 + 72), 4 * 108);
    check_product(g, bf, "conv2d_backprop_filter", 0, 27, 18, 4, 1);

    /* LSTM scan: x (B 2, T 3, D 4), U = 5: per step [x, h] (2, 9) [kernel; recurrent] (9, 20), 3
     * times; 2 * 2 * 9 * 20 * 3 = 2160 FLOPs of products and 13 per unit per row: 13 * 5 * 6 = 390
     */
    sy_node seq = sy_graph_input(g, "seq", SY_F32, sy_shape_of(3, 2, 3, 4));
    sy_node kern = sy_graph_param(g, "kern", SY_F32, sy_shape_of(2, 4, 20), sy_init_zeros());
    sy_node rec = sy_graph_param(g, "rec", SY_F32, sy_shape_of(2, 5, 20), sy_init_zeros());
    sy_node lstm = graph_lstm_scan(g, seq, kern, rec, SY_NONE, SY_NONE, SY_ACT_TANH, SY_ACT_SIGMOID,
                                   NULL, true);
    CHECK_OK(sy_graph_status(g));
    sy_op_cost c;
    sy_op_cost_of(g, lstm, &c);
    CHECK_CLOSE(c.flops, 2160 + 390, 0, 0, "lstm_scan flops");
    check_product(g, lstm, "lstm_scan", 0, 2, 9, 20, 3);
    sy_graph_free(g);
}

static void test_mxu_formula(void) {
    /* SCALE-Sim's golden GEMM (scale-sim-v2 test/general/golden_trace_user_ws: 52,447 total -
     * 41,248 stall cycles): M 256, K 256, N 128 on 32 x 32: 8 * 4 = 32 folds of 2 * 32 + 32 + 256 -
     * 2 = 350 cycles, less one */
    CHECK(sy_mxu_folds(256, 128, 32, 32) == 32, "folds %lld",
          (long long)sy_mxu_folds(256, 128, 32, 32));
    CHECK(sy_mxu_ws_cycles(256, 256, 128, 32, 32, 1, false) == 11199, "GEMM: %lld cycles",
          (long long)sy_mxu_ws_cycles(256, 256, 128, 32, 32, 1, false));
    /* SCALE-Sim's golden AlexNet conv1 (test/golden_trace/COMPUTE_REPORT.csv): 227 x 227 x 3, 11 x
     * 11, stride 4, 96 filters: M = 55 * 55 = 3025, K = 363, N = 96: 12 * 3 = 36 folds of 64 + 32 +
     * 3025 - 2 = 3119, less one */
    CHECK(sy_mxu_ws_cycles(3025, 363, 96, 32, 32, 1, false) == 112283, "AlexNet conv1: %lld cycles",
          (long long)sy_mxu_ws_cycles(3025, 363, 96, 32, 32, 1, false));
    /* By hand, 4 x 4 array, M 5, K 6, N 3: 2 folds (K 4 + 2 rows, N 3 of 4 columns), each 4 cycles
     * of weights, 5 rows, 4 + 4 - 2 = 6 of fill and drain: 2 * 15 - 1 = 29 */
    CHECK(sy_mxu_ws_cycles(5, 6, 3, 4, 4, 1, false) == 29, "4x4: %lld",
          (long long)sy_mxu_ws_cycles(5, 6, 3, 4, 4, 1, false));
    /* two arrays take a fold each: 15 - 1 */
    CHECK(sy_mxu_ws_cycles(5, 6, 3, 4, 4, 2, false) == 14, "4x4 x2: %lld",
          (long long)sy_mxu_ws_cycles(5, 6, 3, 4, 4, 2, false));
    /* four arrays: two per fold, each streaming ceil(5 / 2) = 3 rows: 8 + 4 + 3 - 2 - 1 = 12 */
    CHECK(sy_mxu_ws_cycles(5, 6, 3, 4, 4, 4, false) == 12, "4x4 x4: %lld",
          (long long)sy_mxu_ws_cycles(5, 6, 3, 4, 4, 4, false));
    CHECK(sy_mxu_ws_cycles(0, 6, 3, 4, 4, 1, false) == 0, "an empty product takes no cycles");
    /* Double-buffered weights (a TPU's MXU): the first fold's 4 cycles of weights, its 5 rows (the
     * second fold's weights load meanwhile), the second fold's 5 rows, then 4 + 4 - 2 of drain: 4 +
     * 5 + 5 + 6 - 1 = 19 */
    CHECK(sy_mxu_ws_cycles(5, 6, 3, 4, 4, 1, true) == 19, "4x4 double-buffered: %lld",
          (long long)sy_mxu_ws_cycles(5, 6, 3, 4, 4, 1, true));
    /* with 2 rows per fold the stream waits for the next weights: 4 + max(2, 4) + 2 + 6 - 1 = 15 */
    CHECK(sy_mxu_ws_cycles(2, 6, 3, 4, 4, 1, true) == 15,
          "short folds wait for their weights: %lld",
          (long long)sy_mxu_ws_cycles(2, 6, 3, 4, 4, 1, true));
    /* one fold: the same as without double-buffering */
    CHECK(sy_mxu_ws_cycles(8, 4, 2, 4, 4, 1, true) == sy_mxu_ws_cycles(8, 4, 2, 4, 4, 1, false),
          "one fold");
}

/* A chip of round numbers: one core, one 4 x 4 array, 1 MHz, 1 vector FLOP and 1 HBM byte per
 * cycle. */
static const sy_tpu_chip toy = {.name = "toy",
                                .cores = 1,
                                .replicas = 1,
                                .mxus_per_core = 1,
                                .mxu_rows = 4,
                                .mxu_cols = 4,
                                .clock_hz = 1e6,
                                .peak_bf16_flops = 32e6,
                                .vector_flops_core = 1e6,
                                .hbm_bytes = 1e9,
                                .hbm_bytes_per_s = 1e6,
                                .ici_links = 4,
                                .ici_link_bytes_per_s = 1e6,
                                .ici_latency_s = 1e-6,
                                .infeed_bytes_per_s = 1e6,
                                .host_round_trip_s = 1e-3,
                                .max_chips = 4};

static void test_plan_pass(void) {
    /* Dense(2) on x (8, 4), predict: one matmul step with its bias epilogue. */
    sy_graph *g;
    CHECK_OK(sy_graph_new(&g));
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 8, 4));
    sy_node labels = sy_graph_input(g, "labels", SY_F32, sy_shape_of(2, 8, 2));
    sy_graph_push_scope(g, "dense");
    sy_node w =
        sy_graph_param(g, "kernel", SY_F32, sy_shape_of(2, 4, 2), sy_init_glorot_uniform(1));
    sy_node b = sy_graph_param(g, "bias", SY_F32, sy_shape_of(1, 2), sy_init_zeros());
    sy_node y = sy_graph_bias_add(g, sy_graph_matmul(g, x, w, false, false), b);
    sy_graph_pop_scope(g);
    sy_node loss = sy_graph_mean_squared_error(g, y, labels);
    int32_t axis = 0;
    loss = sy_graph_reduce_mean(g, loss, &axis, 1, false);
    CHECK_OK(sy_graph_status(g));

    sy_plan_options po = sy_plan_options_default();
    po.outputs = &y;
    po.n_outputs = 1;
    sy_plan *predict = NULL;
    CHECK_OK(sy_plan_compile(g, &po, &predict));
    sy_profile_options o = sy_profile_options_default();
    o.steps_per_execution = 4;
    sy_profile *p = NULL;
    CHECK_OK(sy_plan_profile(predict, &toy, &o, &p));
    if (p) {
        CHECK(p->n_ops == 1, "one fused step, got %d", p->n_ops);
        if (p->n_ops != 1) sy_plan_dump(predict, stderr);
        const sy_profile_op *op = &p->ops[0];
        CHECK(strcmp(op->op, "matmul") == 0 && strcmp(op->layer, "dense") == 0,
              "op %s in layer '%s'", op->op, op->layer);
        /* (8, 4) x (4, 2): 1 fold, 4 + 8 + 4 + 4 - 2 - 1 = 17 cycles; its transpose (2, 4) x (4,
         * 8): 2 folds of 2 rows, double-buffered, 4 + max(2, 4) + 2 + 4 + 4 - 2 - 1 = 15: the pass
         * keeps the cheaper */
        CHECK_CLOSE(op->mxu_cycles, 15, 0, 0, "MXU cycles");
        CHECK_CLOSE(op->flops, 2 * 8 * 4 * 2 + 16, 0, 0, "FLOPs: the product and the bias");
        CHECK_CLOSE(op->vector_cycles, 16, 0, 0, "vector cycles: 16 bias adds");
        /* reads x 128, kernel 32, bias 8 bytes, writes 64 */
        CHECK_CLOSE(op->memory_cycles, 232, 0, 0, "memory cycles");
        CHECK(op->bound == SY_BOUND_MEMORY, "bound by %s", sy_bound_name(op->bound));
        CHECK_CLOSE(op->mxu_utilization, 128.0 / (2 * 15 * 16), 1e-12, 0, "MXU utilisation");
        CHECK_CLOSE(p->infeed_bytes, 128, 0, 0, "infeed: x only (the labels are not read)");
        CHECK_CLOSE(p->infeed_stall_s, 0, 0, 0, "128 us of infeed hide behind 232 us of compute");
        CHECK_CLOSE(p->host_s, 250e-6, 1e-12, 0, "the round trip over 4 steps");
        CHECK_CLOSE(p->allreduce_s, 0, 0, 0, "predict reduces nothing");
        CHECK_CLOSE(p->step_s, 482e-6, 1e-12, 0, "step");
        CHECK_CLOSE(p->samples_per_s, 8 / 482e-6, 1e-9, 0, "samples/s");
        CHECK(p->bound == SY_BOUND_HOST, "the step is bound by %s", sy_bound_name(p->bound));
        CHECK_CLOSE(op->share, 232.0 / 482, 1e-12, 0, "share");
    }
    sy_profile_free(p);
    sy_plan_free(predict);

    /* Training on 4 replicas: the gradients (kernel 8 + bias 2 floats = 40 bytes) go round a ring:
     * 2 * 3/4 * 40 = 60 bytes at 1 MB/s + 2 * 3 hops of 1 us = 66 us. */
    po = sy_plan_options_default();
    po.loss = loss;
    po.optimizer = sy_optimizer_sgd(0.1f, 0, false);
    sy_plan *train = NULL;
    CHECK_OK(sy_plan_compile(g, &po, &train));
    o = sy_profile_options_default();
    o.replicas = 4;
    CHECK_OK(sy_plan_profile(train, &toy, &o, &p));
    if (p) {
        CHECK_CLOSE(p->gradient_bytes, 40, 0, 0, "gradient bytes");
        CHECK_CLOSE(p->allreduce_s, 66e-6, 1e-12, 0, "ring all-reduce");
        CHECK_CLOSE(p->infeed_bytes, 128 + 64, 0, 0, "infeed: x and the labels");
        double sum = 0;
        for (int i = 0; i < p->n_ops; i++) sum += p->ops[i].seconds;
        CHECK_CLOSE(sum, p->compute_s, 1e-12, 0, "the ops add up to the compute time");
        CHECK_CLOSE(p->samples_per_s, 8 * 4 / p->step_s, 1e-12, 0,
                    "samples/s counts every replica's batch");
    }
    sy_profile_free(p);

    /* Errors name what is wrong. */
    o.replicas = -1;
    CHECK_ERR(sy_plan_profile(train, &toy, &o, &p), SY_ERR_INVALID_ARGUMENT, "replicas");
    CHECK(p == NULL, "no profile on error");
    o = sy_profile_options_default();
    o.steps_per_execution = 0;
    CHECK_ERR(sy_plan_profile(train, &toy, &o, &p), SY_ERR_INVALID_ARGUMENT, "steps_per_execution");
    CHECK_ERR(sy_plan_profile(train, NULL, NULL, &p), SY_ERR_INVALID_ARGUMENT, "chip");
    sy_plan_free(train);
    sy_graph_free(g);
}

/* issue 16, cost validation: the fusion rules and bfloat16 activations, worked by hand on the toy
 * chip (1 HBM byte and 1 vector FLOP a cycle). */

/* The profile of a predict plan of g that reads `outputs`. */
static sy_profile *profile_outputs(sy_graph *g, sy_node *outputs, int n, sy_plan **plan) {
    sy_plan_options po = sy_plan_options_default();
    po.outputs = outputs;
    po.n_outputs = n;
    *plan = NULL;
    CHECK_OK(sy_plan_compile(g, &po, plan));
    sy_profile *p = NULL;
    if (*plan) CHECK_OK(sy_plan_profile(*plan, &toy, NULL, &p));
    return p;
}

/* The profile's row of the (first) step running op `name`. */
static const sy_profile_op *row(const sy_profile *p, const char *name) {
    for (int i = 0; p && i < p->n_ops; i++)
        if (!strcmp(p->ops[i].op, name)) return &p->ops[i];
    CHECK(false, "no %s step in the profile", name);
    return NULL;
}

static void test_fusion_rules(void) {
    /* d = -x, read by a sum and a ReLU, x (2, 4): d is recomputed in both readers' loops (2 readers
     * re-reading x's 32 bytes, 64, against storing d, 32 + 2 x 32 = 96), and the ReLU joins the
     * sum's loop (multi-output fusion), so x is read once: the sum reads x (32) and writes its 4
     * floats (16), the ReLU writes its 32; neg runs nowhere. Vector work: each loop redoes the
     * negation, 8. */
    sy_graph *g;
    CHECK_OK(sy_graph_new(&g));
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 2, 4));
    sy_node d = sy_graph_neg(g, x);
    int32_t axis = 0;
    sy_node outs[2] = {sy_graph_reduce_sum(g, d, &axis, 1, false), sy_graph_relu(g, d)};
    CHECK_OK(sy_graph_status(g));
    sy_plan *plan;
    sy_profile *p = profile_outputs(g, outs, 2, &plan);
    const sy_profile_op *neg = row(p, "neg"), *sum = row(p, "reduce_sum"), *relu = row(p, "relu");
    if (neg && sum && relu) {
        CHECK_CLOSE(neg->memory_cycles + neg->vector_cycles, 0, 0, 0,
                    "neg runs inside its readers");
        CHECK_CLOSE(sum->memory_cycles + relu->memory_cycles, 32 + 16 + 32, 0, 0,
                    "x read once by the sum and the ReLU's loop: %g + %g", sum->memory_cycles,
                    relu->memory_cycles);
        CHECK_CLOSE(sum->vector_cycles, 8 + 8, 0, 0, "the sum redoes the negation");
        CHECK_CLOSE(relu->vector_cycles, 8 + 8, 0, 0, "the ReLU redoes the negation");
        CHECK_CLOSE(p->bytes, 80, 0, 0, "bytes of the step");
    }
    if (!p && plan) sy_plan_dump(plan, stderr);
    sy_profile_free(p);
    sy_plan_free(plan);
    sy_graph_free(g);

    /* z = x + w, read by a sum and a ReLU: recomputing it would read 2 x 64 bytes, storing it costs
     * 32 + 2 x 32 = 96, so it is stored; the sum and the ReLU join the add's loop and read z there:
     * add 64 + 32, sum 16, ReLU 32. */
    CHECK_OK(sy_graph_new(&g));
    x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 2, 4));
    sy_node w = sy_graph_input(g, "w", SY_F32, sy_shape_of(2, 2, 4));
    sy_node z = sy_graph_add(g, x, w);
    outs[0] = sy_graph_reduce_sum(g, z, &axis, 1, false);
    outs[1] = sy_graph_relu(g, z);
    CHECK_OK(sy_graph_status(g));
    p = profile_outputs(g, outs, 2, &plan);
    const sy_profile_op *add = row(p, "add");
    sum = row(p, "reduce_sum"), relu = row(p, "relu");
    if (add && sum && relu) {
        CHECK_CLOSE(add->memory_cycles, 64 + 32, 0, 0, "the add reads x and w and stores z");
        CHECK_CLOSE(sum->memory_cycles, 16, 0, 0, "the sum reads z in the add's loop");
        CHECK_CLOSE(relu->memory_cycles, 32, 0, 0, "the ReLU too");
    }
    sy_profile_free(p);
    sy_plan_free(plan);
    sy_graph_free(g);

    /* An elementwise operand of a product is computed as it streams into the MXU: relu(x) (8, 4)
     * feeding x W (4, 2) is never stored; the matmul reads x (128) and W (32), writes 64 and does
     * the ReLU's 32 operations. */
    CHECK_OK(sy_graph_new(&g));
    x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 8, 4));
    sy_node k = sy_graph_param(g, "kernel", SY_F32, sy_shape_of(2, 4, 2), sy_init_zeros());
    outs[0] = sy_graph_matmul(g, sy_graph_relu(g, x), k, false, false);
    CHECK_OK(sy_graph_status(g));
    p = profile_outputs(g, outs, 1, &plan);
    const sy_profile_op *mm = row(p, "matmul");
    relu = row(p, "relu");
    if (mm && relu) {
        CHECK_CLOSE(relu->memory_cycles, 0, 0, 0, "the ReLU is fused into the product");
        CHECK_CLOSE(mm->memory_cycles, 128 + 32 + 64, 0, 0, "the product's bytes");
        CHECK_CLOSE(mm->vector_cycles, 32, 0, 0, "the product does the ReLU");
        CHECK(p->bf16_ops == 0 && !mm->bf16, "float32: no op writes bfloat16");
    }
    sy_profile_free(p);
    sy_plan_free(plan);
    sy_graph_free(g);
}

/* issue 16, cost validation: under Keras's mixed_bfloat16 policy each value is costed at the bytes
 * the chip stores it in -- a bf16 op's output 2 an element, what Keras keeps in float32 4 -- worked
 * by hand on the toy chip (1 HBM byte a cycle). The graph is what dtype_policy.c builds for a mixed
 * Dense layer (x and the kernel cast to bfloat16, the product a bf16 op) feeding a float32 softmax
 * (Keras's Activation('softmax', dtype='float32')); the same graph with no casts and no flags is
 * the float32 policy's. */
static void build_dense_softmax(sy_graph *g, bool mixed, sy_node *x, sy_node *labels, sy_node *y) {
    *x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 8, 4));
    *labels = sy_graph_input(g, "labels", SY_F32, sy_shape_of(2, 8, 2));
    sy_graph_push_scope(g, "dense");
    sy_node k =
        sy_graph_param(g, "kernel", SY_F32, sy_shape_of(2, 4, 2), sy_init_glorot_uniform(3));
    sy_node xin = mixed ? sy_graph_cast_bf16(g, *x) : *x,
            kin = mixed ? sy_graph_cast_bf16(g, k) : k;
    bool was = sy_graph_set_bf16(g, mixed);
    sy_node h = sy_graph_matmul(g, xin, kin, false, false);
    sy_graph_set_bf16(g, was);
    sy_graph_pop_scope(g);
    *y = sy_graph_softmax(g, h, -1);
}

static void test_bf16_cast_recomputed(void) {
    /* A cast of a value its readers recompute is recomputed with it (a BatchNormalization's float32
     * output, cast to bfloat16 and streamed into the next convolution): -x, cast to bfloat16 and
     * read by a bf16 product, never goes to HBM; the product reads x (32 x 4) and the float32
     * kernel (8 x 4) and writes its output in bfloat16 (16 x 2). */
    sy_graph *g;
    CHECK_OK(sy_graph_new(&g));
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 8, 4));
    sy_node k = sy_graph_param(g, "kernel", SY_F32, sy_shape_of(2, 4, 2), sy_init_zeros());
    sy_node xb = sy_graph_cast_bf16(g, sy_graph_neg(g, x)), kb = sy_graph_cast_bf16(g, k);
    bool was = sy_graph_set_bf16(g, true);
    sy_node y = sy_graph_matmul(g, xb, kb, false, false);
    sy_graph_set_bf16(g, was);
    CHECK_OK(sy_graph_status(g));
    sy_plan *plan;
    sy_profile *p = profile_outputs(g, &y, 1, &plan);
    const sy_profile_op *mm = row(p, "matmul"), *neg = row(p, "neg");
    if (mm && neg) {
        CHECK_CLOSE(mm->bytes, 128 + 32 + 32, 0, 0, "the product reads x and the kernel");
        CHECK_CLOSE(neg->bytes, 0, 0, 0, "-x is not stored");
        CHECK_CLOSE(p->bytes, 128 + 32 + 32, 0, 0, "neither is its cast");
    }
    sy_profile_free(p);
    sy_plan_free(plan);
    sy_graph_free(g);
}

static void test_bf16_bytes(void) {
    double want[2][3] = {
        /* float32: the product reads x (32 x 4) and the kernel (8 x 4), writes h (16 x 4); the
         * softmax reads h and writes its 16 floats */
        {128 + 32 + 64, 64 + 64, 0},
        /* mixed_bfloat16: x's cast is recomputed in the product's loop (storing it, 64 bytes, and
         * reading it back, 64, moves as much as the product reading x, 128) and the kernel's cast
         * is fused into the product, which reads the float32 kernel: x 128 + kernel 32, h written
         * in bfloat16 (16 x 2); the float32 softmax reads h at 2 bytes and writes 4 */
        {128 + 32 + 32, 32 + 64, 3},
    };
    for (int mixed = 0; mixed <= 1; mixed++) {
        sy_graph *g;
        CHECK_OK(sy_graph_new(&g));
        sy_node x, labels, y;
        build_dense_softmax(g, mixed, &x, &labels, &y);
        CHECK_OK(sy_graph_status(g));
        sy_plan *plan;
        sy_profile *p = profile_outputs(g, &y, 1, &plan);
        const sy_profile_op *mm = row(p, "matmul"), *sm = row(p, "softmax");
        if (mm && sm) {
            CHECK_CLOSE(mm->memory_cycles, want[mixed][0], 0, 0, "%s: the product's bytes",
                        mixed ? "mixed_bfloat16" : "float32");
            CHECK_CLOSE(sm->memory_cycles, want[mixed][1], 0, 0, "%s: the softmax's bytes",
                        mixed ? "mixed_bfloat16" : "float32");
            CHECK(mm->bf16 == mixed && !sm->bf16, "the product writes %s, the softmax float32",
                  mixed ? "bfloat16" : "float32");
            /* the two casts (x's recomputed in the product, the kernel's fused) and the product */
            CHECK(p->bf16_ops == (int32_t)want[mixed][2], "%d ops write bfloat16", p->bf16_ops);
            CHECK_CLOSE(p->bytes, want[mixed][0] + want[mixed][1], 0, 0, "the step's bytes");
            CHECK_CLOSE(p->infeed_bytes, 128, 0, 0,
                        "the input is fed in float32, as Keras's InputLayer");
        }
        if (!p && plan) sy_plan_dump(plan, stderr);
        sy_profile_free(p);
        sy_plan_free(plan);

        /* Training. Under the policy the softmax's gradient dh is cast to bfloat16 (the gradient of
         * Keras's cast of h up to float32), a convert XLA does in softmax_grad's own loop:
         * softmax_grad reads the softmax's output and its gradient (64 + 64) and writes dh in
         * bfloat16 (32), the kernel's gradient x^T dh reads x's stored cast (64, read by two
         * products now) and dh (32; float32: x 128, dh 64) and writes the gradient in float32 (32),
         * as the all-reduce and the update take it: 2 x 3/4 x 32 bytes at 1 MB/s + 6 hops of 1 us.
         */
        int32_t axis = 0;
        sy_node loss =
            sy_graph_reduce_mean(g, sy_graph_mean_squared_error(g, y, labels), &axis, 1, false);
        CHECK_OK(sy_graph_status(g));
        sy_plan_options po = sy_plan_options_default();
        po.loss = loss;
        po.optimizer = sy_optimizer_sgd(0.1f, 0, false);
        CHECK_OK(sy_plan_compile(g, &po, &plan));
        sy_profile_options o = sy_profile_options_default();
        o.replicas = 4;
        p = NULL;
        if (plan) CHECK_OK(sy_plan_profile(plan, &toy, &o, &p));
        const sy_profile_op *dw = NULL, *sg = row(p, "softmax_grad");
        for (int i = 0; p && i < p->n_ops; i++)
            if (!strcmp(p->ops[i].op, "matmul"))
                dw = &p->ops[i]; /* the last: the kernel's gradient */
        if (p && dw && sg) {
            CHECK_CLOSE(sg->bytes, mixed ? 64 + 64 + 0 : 64 + 64 + 64, 0, 0,
                        "softmax_grad's bytes");
            CHECK_CLOSE(dw->bytes, mixed ? 64 + 32 + 32 : 128 + 64 + 32, 0, 0,
                        "the kernel's gradient's bytes");
            CHECK(!dw->bf16 && !sg->bf16, "the kernel's gradient and softmax_grad write float32");
            CHECK(p->bf16_ops == (mixed ? 4 : 0),
                  "%d ops write bfloat16 (mixed: 3 casts, the product)", p->bf16_ops);
            CHECK_CLOSE(p->gradient_bytes, 32, 0, 0, "the kernel's gradient in float32");
            CHECK_CLOSE(p->allreduce_s, 54e-6, 1e-12, 0, "the all-reduce of float32 gradients");
        }
        if (!p && plan) sy_plan_dump(plan, stderr);
        sy_profile_free(p);
        sy_plan_free(plan);
        sy_graph_free(g);
    }
}

/* ---- issue 20, pods on paper ---------------------------------------------------------------- */

static void check_topology(const char *chip, int32_t cores, int rank, int32_t x, int32_t y,
                           int32_t z, bool wx, bool wy, bool wz) {
    sy_tpu_topology t;
    bool ok = sy_tpu_slice_topology(sy_tpu_chip_find(chip), cores, &t);
    CHECK(ok, "%s-%d has a topology", chip, cores);
    if (!ok) return;
    CHECK(t.rank == rank && t.chips[0] == x && t.chips[1] == y && t.chips[2] == z,
          "%s-%d: rank %d, %dx%dx%d chips; want rank %d, %dx%dx%d", chip, cores, t.rank, t.chips[0],
          t.chips[1], t.chips[2], rank, x, y, z);
    CHECK(t.wrap[0] == wx && t.wrap[1] == wy && t.wrap[2] == wz, "%s-%d: wraps %d %d %d", chip,
          cores, t.wrap[0], t.wrap[1], t.wrap[2]);
}

static void test_slice_topologies(void) {
    /* a host's 4 chips: issue 16's ring */
    check_topology("v2", 8, 1, 4, 1, 1, false, false, false);
    check_topology("v3", 8, 1, 4, 1, 1, false, false, false);
    check_topology("v4", 8, 1, 4, 1, 1, false, false, false);
    /* v2 and v3: host bounds x 2x2 chips; the pod's dimensions wrap */
    check_topology("v2", 32, 2, 4, 4, 1, false, false, false);
    check_topology("v2", 128, 2, 8, 8, 1, false, false, false);
    check_topology("v2", 256, 2, 8, 16, 1, false, true, false);
    check_topology("v2", 512, 2, 16, 16, 1, true, true, false);
    check_topology("v3", 32, 2, 4, 4, 1, false, false, false);
    check_topology("v3", 64, 2, 4, 8, 1, false, false, false);
    check_topology("v3", 512, 2, 16, 16, 1, false, false, false);
    check_topology("v3", 1024, 2, 16, 32, 1, false, true, false);
    check_topology("v3", 2048, 2, 32, 32, 1, true, true, false);
    /* v4: the most cubic AxBxC; whole 4x4x4 cubes make a torus */
    check_topology("v4", 16, 3, 2, 2, 2, false, false, false);
    check_topology("v4", 32, 3, 2, 2, 4, false, false, false);
    check_topology("v4", 64, 3, 2, 4, 4, false, false, false);
    check_topology("v4", 128, 3, 4, 4, 4, true, true, true);
    check_topology("v4", 2048, 3, 8, 8, 16, true, true, true);
    check_topology("v4", 8192, 3, 16, 16, 16, true, true, true);
    /* slices a generation does not have: no topology, *out untouched */
    const struct {
        const char *chip;
        int32_t cores;
    } none[] = {{"v2", 16},   {"v2", 64}, {"v2", 1024}, {"v3", 16},
                {"v3", 4096}, {"v3", 7},  {"v4", 6},    {"v4", 16384}};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        sy_tpu_topology t = {.rank = 9};
        CHECK(!sy_tpu_slice_topology(sy_tpu_chip_find(none[i].chip), none[i].cores, &t) &&
                  t.rank == 9,
              "%s-%d is no slice", none[i].chip, none[i].cores);
    }
    CHECK(!sy_tpu_slice_topology(NULL, 8, &(sy_tpu_topology){0}), "no chip, no topology");
}

static void test_torus_allreduce(void) {
    /* toy: 1 replica a chip, links of 1 MB/s, 1 us a hop; toy2 the same with 2 replicas a chip */
    sy_tpu_chip toy2 = toy;
    toy2.cores = toy2.replicas = 2;
    /* no topology: issue 16's ring, 2 x 3/4 x 40 bytes at 1 MB/s + 6 hops = 66 us */
    CHECK_CLOSE(sy_allreduce_seconds(&toy, NULL, 4, 40), 66e-6, 1e-12, 0, "ring of 4");
    /* 4x4 torus, 64 bytes: rings of 4 both ways round (2 MB/s): 2 (3/4 x 64 / 2e6 + 3 us) = 54 us,
     * then a quarter, 16 bytes: 2 (3/4 x 16 / 2e6 + 3 us) = 18 us; 72 us (a ring of 16: 150 us) */
    sy_tpu_topology t = {.rank = 2, .chips = {4, 4, 1}, .wrap = {true, true, false}};
    CHECK_CLOSE(sy_allreduce_seconds(&toy, &t, 16, 64), 72e-6, 1e-12, 0, "4x4 torus");
    CHECK_CLOSE(sy_allreduce_seconds(&toy, NULL, 16, 64), 150e-6, 1e-12, 0, "ring of 16");
    /* 2x4 mesh of 2-replica chips, 64 bytes: the 4 first, its rings of 8 replicas one way:
     * 2 (7/8 x 64 / 1e6 + 7 us) = 126 us; then 8 bytes a replica, two replicas a chip over its
     * links: 2 (1/2 x 8 x 2 / 1e6 + 1 us) = 18 us: 144 us (the 2 first: 102 + 54 = 156 us) */
    t = (sy_tpu_topology){.rank = 2, .chips = {2, 4, 1}, .wrap = {false, false, false}};
    CHECK_CLOSE(sy_allreduce_seconds(&toy2, &t, 16, 64), 144e-6, 1e-12, 0, "2x4 mesh, 2 a chip");
    /* the 4 wrapped: 2 (7/8 x 64 / 2e6 + 7 us) = 70 us, then 18 us: 88 us */
    t.wrap[1] = true;
    CHECK_CLOSE(sy_allreduce_seconds(&toy2, &t, 16, 64), 88e-6, 1e-12, 0, "2x4, the 4 wrapped");
    /* a replica count the topology does not hold: the ring of the replicas */
    CHECK_CLOSE(sy_allreduce_seconds(&toy2, &t, 4, 40), 66e-6, 1e-12, 0,
                "not the topology's replicas");
    /* 2x2x2 mesh, 64 bytes: 2 (32 + 1) + 2 (16 + 1) + 2 (8 + 1) us = 118 us */
    t = (sy_tpu_topology){.rank = 3, .chips = {2, 2, 2}, .wrap = {false, false, false}};
    CHECK_CLOSE(sy_allreduce_seconds(&toy, &t, 8, 64), 118e-6, 1e-12, 0, "2x2x2 mesh");
    CHECK(sy_allreduce_seconds(&toy, &t, 1, 64) == 0 && sy_allreduce_seconds(&toy, &t, 8, 0) == 0,
          "one replica, or nothing to reduce: no time");
    /* a -8 slice is issue 16's ring of its 8 replicas, to the bit */
    const sy_tpu_chip *v3 = sy_tpu_chip_find("v3");
    double b = 102334368; /* ResNet-50's float32 gradients */
    CHECK(sy_tpu_slice_topology(v3, 8, &t), "v3-8");
    CHECK(sy_allreduce_seconds(v3, &t, 8, b) ==
              2.0 * 7 / 8 * b / v3->ici_link_bytes_per_s + 2.0 * 7 * v3->ici_latency_s,
          "v3-8: the ring of 8");
    /* the v3 pod, 32x32 chips, 2 replicas each: rings of 64 along one dimension both ways round,
     * then of 32 over 1/64 of the bytes, two a chip */
    CHECK(sy_tpu_slice_topology(v3, 2048, &t), "v3-2048");
    double bw = v3->ici_link_bytes_per_s, hop = v3->ici_latency_s,
           want = 2 * (63.0 / 64 * b / (2 * bw) + 63 * hop) +
                  2 * (31.0 / 32 * b / 64 * 2 / (2 * bw) + 31 * hop);
    CHECK_CLOSE(sy_allreduce_seconds(v3, &t, 2048, b), want, 1e-12, 0, "v3-2048");
    CHECK(want < 2.0 * 2047 / 2048 * b / bw, "the torus beats one ring of 2,048");
}

/* The pass over a plan on a pod slice: the replica count picks the slice's topology. */
static void test_pod_profile(void) {
    sy_graph *g;
    CHECK_OK(sy_graph_new(&g));
    sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, 8, 4));
    sy_node labels = sy_graph_input(g, "labels", SY_F32, sy_shape_of(2, 8, 2));
    sy_node w =
        sy_graph_param(g, "kernel", SY_F32, sy_shape_of(2, 4, 2), sy_init_glorot_uniform(1));
    sy_node y = sy_graph_matmul(g, x, w, false, false);
    int32_t axis = 0;
    sy_node loss =
        sy_graph_reduce_mean(g, sy_graph_mean_squared_error(g, y, labels), &axis, 1, false);
    CHECK_OK(sy_graph_status(g));
    sy_plan_options po = sy_plan_options_default();
    po.loss = loss;
    po.optimizer = sy_optimizer_sgd(0.1f, 0, false);
    sy_plan *plan = NULL;
    CHECK_OK(sy_plan_compile(g, &po, &plan));
    const sy_tpu_chip *v3 = sy_tpu_chip_find("v3");
    const int32_t replicas[] = {8, 32, 2048, 12};
    for (int i = 0; plan && i < 4; i++) {
        sy_profile_options o = sy_profile_options_default();
        o.replicas = replicas[i];
        sy_profile *p = NULL;
        CHECK_OK(sy_plan_profile(plan, v3, &o, &p));
        if (!p) continue;
        sy_tpu_topology t;
        bool slice = sy_tpu_slice_topology(v3, replicas[i], &t);
        CHECK(p->topology.rank == (slice ? t.rank : 0), "%d replicas: rank %d", replicas[i],
              p->topology.rank);
        CHECK_CLOSE(p->gradient_bytes, 32, 0, 0, "the kernel's gradient");
        CHECK_CLOSE(p->allreduce_s, sy_allreduce_seconds(v3, slice ? &t : NULL, replicas[i], 32),
                    1e-12, 0, "%d replicas: the all-reduce over the slice", replicas[i]);
        CHECK_CLOSE(p->step_s, p->compute_s + p->infeed_stall_s + p->allreduce_s + p->host_s, 1e-12,
                    0, "the step adds up");
        sy_profile_free(p);
    }
    sy_plan_free(plan);
    sy_graph_free(g);
}

int main(void) {
    test_every_op_has_a_cost();
    test_op_costs();
    test_mxu_formula();
    test_plan_pass();
    test_fusion_rules(); /* issue 16, cost validation */
    test_bf16_bytes();
    test_bf16_cast_recomputed();
    test_slice_topologies(); /* issue 20, pods on paper */
    test_torus_allreduce();
    test_pod_profile();
    return check_report("test_cost");
}
