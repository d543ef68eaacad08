/*
 * test_ops_bf16.c - bfloat16 storage against float32 storage, op by op
 * (issue 16, mixed_bfloat16; docs/design/mixed-precision.md).
 *
 * Every row of the op harness's table (op_rows.c) is built as a layer under
 * mixed_bfloat16 builds it -- each float leaf cast to bfloat16, every op a
 * bf16 op -- and followed by a float32 copy of its output, so that the
 * plan may keep the row's own output in 2 bytes. The graph is compiled for
 * the cpu backend with 2-byte storage and with float32 storage
 * ($SYSTOLIC_BF16_STORAGE=0, the path before it), on one thread fused and
 * not, and on two threads fused. The outputs must be the same bits: the
 * values are bfloat16 numbers either way, and a kernel that reads or writes
 * bfloat16 computes what the float32 kernel and the plan's rounding give.
 * Ops without a bfloat16 kernel for their shapes pass too, through the
 * plan's conversion at the boundary.
 *
 * So that the comparison is not between two float32 runs, the rows in
 * `native` below must run their op's bfloat16 kernel (unfused): its step
 * reads its bfloat16 inputs as they are stored, nothing converted, and
 * writes its output as bfloat16 -- or, where the output is a sum kept in
 * float32 (the convs' backprops, pooling gradients over overlapping
 * windows), reads bfloat16 and writes float32.
 */
#include "check.h"
#include "compiler/compiler_internal.h"
#include "op_harness.h"

#include <stdlib.h>
#include <string.h>

typedef struct native_row {
    const char *name;
    bool out_bf16;
} native_row;

static const native_row native[] = {
    /* the Fashion-MNIST tutorial CNN's path, forward and backward */
    {"conv2d valid", true},
    {"conv2d same stride 2", true},
    {"conv2d one input channel", true},
    {"conv2d im2col path", true},
    {"conv2d 70 output channels", true},
    {"conv2d + bias + relu", true},
    {"conv2d + bias + tanh same", true},
    {"conv2d window 144 MXU chunks", true},
    {"conv2d_backprop_filter", false},
    {"conv2d_backprop_filter same stride 2", false},
    {"conv2d_backprop_filter im2col 70 channels", false},
    {"conv2d_backprop_filter direct 70 channels", false},
    {"conv2d_backprop_filter 270 pixels MXU chunks", false},
    {"conv2d_backprop_input", false},
    {"conv2d_backprop_input same stride 2", false},
    {"conv2d_backprop_input im2col 70 channels", false},
    {"conv2d_backprop_input 150 channels MXU chunks", false},
    {"matmul", true},
    {"matmul transpose_b", true},
    {"matmul transpose_a", true},
    {"matmul transpose_a transpose_b", true},
    {"matmul 67x131x45", true},
    {"matmul + bias", true},
    {"matmul + bias + relu", true},
    {"matmul + bias + sigmoid", true},
    {"matmul + bias + tanh", true},
    {"matmul 50x300x21 MXU chunks", true},
    {"bias_add", true},
    {"reduce_sum last axis", true},
    {"reduce_mean", true},
    {"relu", true},
    {"sigmoid", true},
    {"tanh", true},
    {"relu_grad", true},
    {"sigmoid_grad", true},
    {"tanh_grad", true},
    {"max_pool2d", true},
    {"max_pool2d same 3x3/2", true},
    {"max_pool2d 70 channels", true},
    {"max_pool2d_grad", true},
    {"max_pool2d_grad ties", true},
    {"max_pool2d_grad gaps 2x2/3", true},
    {"max_pool2d_grad 70 channels ties", true},
    {"max_pool2d_grad same", false},
    {"max_pool2d_grad ties same", false},
    {"max_pool2d_grad 70 channels same", false},
    {"dropout", true},
    {"copy", true},
    /* the other elementwise ops and pooling, and the layout ops */
    {"input", true},
    {"fill", true},
    {"div", true},
    {"neg", true},
    {"exp", true},
    {"log", true},
    {"activation elu", true},
    {"activation gelu", true},
    {"activation relu6", true},
    {"activation_grad", true},
    {"fused_eltwise", true},
    {"avg_pool2d", true},
    {"avg_pool2d same 3x2/2x1", true},
    {"avg_pool2d 70 channels", true},
    {"avg_pool2d_grad", true},
    {"avg_pool2d_grad gaps 2x2/3", true},
    {"avg_pool2d_grad same", false},
    {"transpose", true},
    {"concat", true},
    {"slice", true},
    {"slice middle axis", true},
    {"slice_grad", true},
    {"pad", true},
    {"broadcast_to", true},
    {"reverse", true},
    {"gather", true},
};

typedef struct run_out {
    uint32_t *bits; /* the output's float32 bit patterns */
    int64_t n;
    bool found, out_bf16;
    uint32_t bf16_in, converted;
} run_out;

/* The row as a mixed_bfloat16 layer, its output copied to float32, on the cpu backend. */
static bool run_row(const row *r, bool storage, sy_pool *pool, bool fuse, run_out *res) {
    memset(res, 0, sizeof *res);
    ctx c;
    sy_node out = op_build(r, &c, SY_F32, 1234, true);
    sy_node y = graph_add(c.g, SY_OP_COPY, &out, 1, NULL, NULL);
    CHECK(sy_graph_status(c.g) == SY_OK, "%s: building failed: %s", r->name, sy_graph_error(c.g));
    if (sy_graph_status(c.g)) {
        op_free_ctx(&c);
        return false;
    }
    CHECK(setenv("SYSTOLIC_BF16_STORAGE", storage ? "1" : "0", 1) == 0, "setenv");
    sy_plan_options o = sy_plan_options_default();
    o.outputs = &y;
    o.n_outputs = 1;
    o.pool = pool;
    o.fuse = fuse;
    sy_plan *p = NULL;
    sy_status st = sy_plan_compile(c.g, &o, &p);
    unsetenv("SYSTOLIC_BF16_STORAGE");
    CHECK(st == SY_OK, "%s: compile failed: %s", r->name, sy_last_error());
    if (st == SY_OK) {
        op_feed(&c, p);
        CHECK_OK(sy_plan_run(p));
        sy_shape s = sy_graph_shape(c.g, y);
        res->n = sy_shape_count(&s);
        res->bits = malloc((size_t)(res->n ? res->n : 1) * sizeof *res->bits);
        const void *v = sy_plan_output(p, y);
        size_t es = sy_dtype_size(sy_graph_dtype(c.g, y));
        for (int64_t i = 0; i < res->n; i++) {
            res->bits[i] = 0;
            memcpy(&res->bits[i], (const char *)v + (size_t)i * es, es < 4 ? es : 4);
        }
        for (int32_t k = 0; k < plan_step_count(p); k++)
            if (plan_step_node(p, k) == out) {
                res->found = true;
                res->out_bf16 = plan_step_bf16(p, k, &res->bf16_in, &res->converted);
            }
        sy_plan_free(p);
    }
    op_free_ctx(&c);
    return st == SY_OK;
}

static const native_row *native_of(const row *r) {
    for (size_t i = 0; i < sizeof native / sizeof native[0]; i++)
        if (!strcmp(native[i].name, r->name)) return &native[i];
    return NULL;
}

/* Returns whether the row's op ran a bfloat16 kernel. */
static bool check_row(const row *r, sy_pool *pool2) {
    struct {
        sy_pool *pool;
        bool fuse;
    } variants[] = {{NULL, false}, {NULL, true}, {pool2, true}};
    bool ran_bf16 = false;
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        run_out two, four;
        bool ok = run_row(r, true, variants[v].pool, variants[v].fuse, &two);
        ok = run_row(r, false, variants[v].pool, variants[v].fuse, &four) && ok;
        if (ok) {
            CHECK(two.n == four.n, "%s: %lld outputs with bfloat16 storage, %lld without", r->name,
                  (long long)two.n, (long long)four.n);
            int bad = 0;
            for (int64_t i = 0; i < two.n && i < four.n && bad < 3; i++)
                if (two.bits[i] != four.bits[i]) {
                    bad++;
                    CHECK(false,
                          "%s (%d thread%s, fusion %s) [%lld]: 0x%08x with bfloat16 storage, "
                          "0x%08x with float32",
                          r->name, sy_pool_size(variants[v].pool), variants[v].pool ? "s" : "",
                          variants[v].fuse ? "on" : "off", (long long)i, two.bits[i], four.bits[i]);
                }
            CHECK(!four.out_bf16 && !four.bf16_in && !four.converted,
                  "%s: $SYSTOLIC_BF16_STORAGE=0 left bfloat16 in the plan", r->name);
        }
        const native_row *nat = native_of(r);
        if (ok && v == 0 && nat) { /* unfused: the row's own op has a step */
            CHECK(two.found, "%s: no step computes the row's output", r->name);
            CHECK(two.bf16_in && !two.converted && two.out_bf16 == nat->out_bf16,
                  "%s: its kernel reads inputs %#x as bfloat16, the plan converts %#x, writes %s; "
                  "expected bfloat16 "
                  "inputs, none converted, %s out",
                  r->name, two.bf16_in, two.converted, two.out_bf16 ? "bfloat16" : "float32",
                  nat->out_bf16 ? "bfloat16" : "float32");
        }
        if (v == 0) ran_bf16 = two.found && (two.out_bf16 || (two.bf16_in & ~two.converted));
        free(two.bits);
        free(four.bits);
    }
    return ran_bf16;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    sy_pool *pool2;
    CHECK_OK(sy_pool_new(2, &pool2));
    for (size_t i = 0; i < sizeof native / sizeof native[0]; i++) {
        bool known = false;
        for (int k = 0; k < op_n_rows; k++) known |= !strcmp(op_rows[k].name, native[i].name);
        CHECK(known, "'%s' is not a row of the op harness", native[i].name);
    }
    for (int i = 0; i < op_n_rows; i++) {
        const row *r = &op_rows[i];
        if (only && !strstr(r->name, only)) continue;
        int before = check_failures;
        bool ran = check_row(r, pool2);
        fprintf(stderr, "%-40s %s%s\n", r->name, check_failures == before ? "ok" : "FAILED",
                ran ? " (bfloat16 kernel)" : "");
    }
    sy_pool_free(pool2);
    return check_report("test_ops_bf16");
}
