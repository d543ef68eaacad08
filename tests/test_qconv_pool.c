/*
 * test_qconv_pool.c - the int8 conv -> max pool fusion (issue 18: compiler/
 * fusion.c's qconv2d_pool, the cpu kernel in src/backend/cpu/qconvpool.c)
 * against the two ops unfused on the reference kernels (cpu/qref.c), bit
 * for bit.
 *
 * Each case builds qconv2d -> qmax_pool2d on constants (random input,
 * weights, bias, per-channel multipliers and shifts, zero points, clamps)
 * and compiles it three ways: the ref backend with fusion off (what the
 * result is), the cpu backend fused on the calling thread and on a pool of
 * 3 threads. Checked: the cpu plans fused the pair (one op folded) and their
 * bytes are the reference's. Shapes: the Fashion-MNIST CNN's, odd sizes,
 * 'same' and 'valid' padding for both the conv and the pool, strides 2 and
 * (1, 2), input channels 1, 3, 5 and 16, kernel rows whose bytes are not a
 * multiple of 4, output channels past a block of 64 and not a multiple of
 * 16, a pool of 3x3, pools whose windows skip conv pixels (stride > window)
 * or reach past the conv's output (no window is ever empty: TFLite's
 * padding never leaves one so), small kernels whose weights stay in
 * registers (3x3x1, 1x1x3, 2x2x2), a pool clamp disjoint from the conv's;
 * dilated and depthwise convs take the kernel's unfused fallback. What must
 * not fuse does not: a negative multiplier, an accumulator whose left shift
 * could wrap, an overlapping pool, a conv output another op reads. Built a
 * second time with qconvpool.c and qgemm_fast.c compiled without VNNI
 * (test_qconv_pool_avx2), it checks the fallback the same way. A tenth of a
 * second in a release build.
 */
#include "backend/backend_internal.h"
#include "backend/cpu/cpu_internal.h"
#include "check.h"
#include "xorshift.h"
#include "graph/graph_internal.h"
#include "systolic.h"

#include <stdlib.h>
#include <string.h>


typedef struct ccase {
    const char *name;
    int64_t n, h, w, c, o, kh, kw;
    int32_t sh, sw, dil, groups;
    bool same;
    int32_t pk[2], ps[2];
    bool pool_same;
} ccase;

enum { FUSES, NO_FUSE_NEGATIVE, NO_FUSE_WRAP, NO_FUSE_OVERLAP, NO_FUSE_SHARED };

static sy_pool *pool3;

/* Runs y on backend with fusion `fuse`; the output bytes (malloc'd) and the plan's fused count. */
static int8_t *run_plan(sy_graph *g, sy_node y, const char *backend, bool fuse, bool threads, int64_t bytes,
                        int32_t *fused) {
    sy_plan_options o = sy_plan_options_default();
    o.backend = backend;
    o.fuse = fuse;
    o.outputs = &y;
    o.n_outputs = 1;
    if (threads) o.pool = pool3, o.threads = 3;
    sy_plan *p = NULL;
    CHECK_OK(sy_plan_compile(g, &o, &p));
    if (!p) return NULL;
    CHECK_OK(sy_plan_run(p));
    int8_t *out = malloc((size_t)bytes);
    memcpy(out, sy_plan_output(p, y), (size_t)bytes);
    sy_plan_info info;
    sy_plan_get_info(p, &info);
    *fused = info.fused;
    sy_plan_free(p);
    return out;
}

static void run_case(const ccase *cc, int variant) {
    sy_graph *g;
    CHECK_OK(sy_graph_new(&g));
    int64_t cg = cc->c / cc->groups, k = cc->kh * cc->kw * cg, nx = cc->n * cc->h * cc->w * cc->c;
    int8_t *x = malloc((size_t)nx), *w = malloc((size_t)(cc->o * k));
    int32_t *bias = malloc((size_t)cc->o * 4), *m = malloc((size_t)cc->o * 8);
    int32_t x_zp = variant % 3 == 0 ? -128 : variant % 3 == 1 ? 127 : uniform(-20, 20);
    for (int64_t i = 0; i < nx; i++) x[i] = (int8_t)uniform(-128, 127);
    for (int64_t i = 0; i < cc->o * k; i++) w[i] = (int8_t)uniform(-127, 127);
    if (variant == 4) { /* every weight at the ends of its range, every input too: the largest accumulators */
        for (int64_t i = 0; i < nx; i++) x[i] = (int8_t)(x_zp > 0 ? -128 : 127);
        for (int64_t i = 0; i < cc->o * k; i++) w[i] = (int8_t)(next32() & 1 ? 127 : -127);
    }
    for (int64_t c = 0; c < cc->o; c++) {
        bias[c] = uniform(-20000, 20000);
        /* a scale that spreads the accumulators over the int8 range, by a random factor; small k: some
         * scales above 1 (a left shift) */
        double real = (k < 8 ? 4.0 : 1.0) / (60.0 * (double)k) * (0.25 + (double)(next32() % 1000) / 250.0);
        int shift;
        sy_q_multiplier(real, &m[c], &shift);
        m[cc->o + c] = shift;
    }
    if (variant == NO_FUSE_NEGATIVE + 10) m[cc->o - 1] = -m[cc->o - 1];
    if (variant == NO_FUSE_WRAP + 10) m[2 * cc->o - 1] = 20; /* acc << 20 may wrap */
    sy_attrs a;
    memset(&a, 0, sizeof a);
    a.q.x_zp = x_zp, a.q.y_zp = uniform(-10, 10);
    a.q.act_min = variant % 2 ? a.q.y_zp : -128, a.q.act_max = variant % 4 == 3 ? 100 : 127; /* relu, or a clamp */
    a.q.stride[0] = cc->sh, a.q.stride[1] = cc->sw, a.q.dilation[0] = a.q.dilation[1] = cc->dil;
    a.q.padding = cc->same ? SY_PAD_SAME : SY_PAD_VALID, a.q.groups = cc->groups;
    sy_node in[4] = {graph_constant(g, "x", SY_I8, sy_shape_of(4, cc->n, cc->h, cc->w, cc->c), x),
                     graph_constant(g, "w", SY_I8, sy_shape_of(4, cc->o, cc->kh, cc->kw, cg), w),
                     graph_constant(g, "bias", SY_I32, sy_shape_of(1, cc->o), bias),
                     graph_constant(g, "mult", SY_I32, sy_shape_of(2, (int64_t)2, cc->o), m)};
    sy_node conv = graph_add(g, SY_OP_QCONV2D, in, 4, &a, NULL);
    sy_attrs pa;
    memset(&pa, 0, sizeof pa);
    for (int i = 0; i < 2; i++) pa.q.ksize[i] = cc->pk[i], pa.q.stride[i] = cc->ps[i];
    pa.q.padding = cc->pool_same ? SY_PAD_SAME : SY_PAD_VALID;
    /* the pool's clamp: narrower, or (variant 3) above all the conv's clamp lets through */
    pa.q.act_min = variant % 4 == 2 ? -3 : variant == 3 ? 110 : -128, pa.q.act_max = variant % 5 == 4 ? 90 : 127;
    sy_node y = graph_add(g, SY_OP_QMAX_POOL2D, &conv, 1, &pa, NULL);
    if (variant == NO_FUSE_SHARED + 10) { /* the conv's output read by another op too */
        sy_node both[2] = {y, graph_add(g, SY_OP_QMAX_POOL2D, &conv, 1, &pa, NULL)};
        sy_attrs aa = a;
        aa.q.left_shift = 20;
        y = graph_add(g, SY_OP_QADD, both, 2, &aa, NULL);
    }
    CHECK(sy_graph_status(g) == SY_OK, "%s: %s", cc->name, sy_graph_error(g));
    if (sy_graph_status(g) == SY_OK) {
        int64_t bytes = sy_shape_count(&graph_node(g, y)->shape);
        int32_t f_ref, f1, f3;
        int8_t *want = run_plan(g, y, "ref", false, false, bytes, &f_ref);
        int8_t *got1 = run_plan(g, y, "cpu", true, false, bytes, &f1);
        int8_t *got3 = run_plan(g, y, "cpu", true, true, bytes, &f3);
        bool fuses = variant < 10 && !(cc->ps[0] < cc->pk[0] || cc->ps[1] < cc->pk[1]);
        CHECK(f_ref == 0 && f1 == (fuses ? 1 : 0) && f3 == f1, "%s, variant %d: %d ops folded, not %d", cc->name,
              variant, f1, fuses ? 1 : 0);
        for (int t = 0; t < 2 && want; t++) {
            const int8_t *got = t ? got3 : got1;
            int64_t bad = -1;
            for (int64_t i = 0; got && i < bytes && bad < 0; i++)
                if (got[i] != want[i]) bad = i;
            CHECK(got && bad < 0, "%s, variant %d, %s: output %lld is %d, the reference's %d", cc->name, variant,
                  t ? "3 threads" : "calling thread", (long long)bad, got && bad >= 0 ? got[bad] : 0,
                  bad >= 0 ? want[bad] : 0);
        }
        free(want);
        free(got1);
        free(got3);
    }
    sy_graph_free(g);
    free(x), free(w), free(bias), free(m);
}

int main(void) {
    rng = 0x243F6A8885A308D3ull;
    CHECK(sy_pool_new(3, &pool3) == SY_OK, "pool");
    const ccase cases[] = {
        /* name                          n  h   w   c   o   kh kw sh sw dil gr same  pool k, s, same */
        {"Fashion-MNIST CNN", 3, 28, 28, 1, 64, 3, 3, 1, 1, 1, 1, false, {2, 2}, {2, 2}, false},
        {"odd, same, c 3", 2, 13, 11, 3, 20, 3, 3, 1, 1, 1, 1, true, {2, 2}, {2, 2}, true},
        {"stride 2, c 16, o 33", 2, 15, 17, 16, 33, 3, 3, 2, 2, 1, 1, true, {2, 2}, {2, 2}, false},
        {"5x5, c 3, pool 3x3 same", 1, 19, 19, 3, 70, 5, 5, 1, 1, 1, 1, false, {3, 3}, {3, 3}, true},
        {"1x1, c 16", 2, 8, 8, 16, 16, 1, 1, 1, 1, 1, 1, false, {2, 2}, {2, 2}, false},
        {"1x1, c 3, o 72 (weights in registers)", 2, 6, 7, 3, 72, 1, 1, 1, 1, 1, 1, true, {2, 2}, {2, 2}, true},
        {"2x2, c 2, stride 2 (weights in registers)", 2, 9, 9, 2, 64, 2, 2, 2, 2, 1, 1, true, {2, 2}, {2, 2}, false},
        {"2x4 kernel, c 5, strides (1, 2)", 2, 9, 14, 5, 130, 2, 4, 1, 2, 1, 1, true, {2, 3}, {2, 3}, true},
        {"pool skips pixels", 1, 12, 12, 1, 17, 3, 3, 1, 1, 1, 1, true, {2, 2}, {3, 3}, false},
        {"pool 1x2 over a 1-row output", 2, 3, 10, 3, 8, 3, 3, 1, 1, 1, 1, false, {1, 2}, {1, 2}, true},
        {"tiny image, same", 1, 2, 2, 1, 5, 3, 3, 1, 1, 1, 1, true, {2, 2}, {2, 2}, true},
        {"pool window past the output", 1, 5, 5, 2, 3, 3, 3, 1, 1, 1, 1, true, {4, 4}, {4, 4}, true},
        {"pool 1x1, stride 3", 1, 7, 7, 1, 4, 1, 1, 1, 1, 1, 1, true, {1, 1}, {3, 3}, true},
        {"dilated (fallback)", 2, 11, 11, 3, 12, 3, 3, 1, 1, 2, 1, false, {2, 2}, {2, 2}, false},
        {"depthwise (fallback)", 2, 10, 10, 8, 8, 3, 3, 1, 1, 1, 8, true, {2, 2}, {2, 2}, false},
        {"overlapping pool (unfused)", 1, 9, 9, 3, 16, 3, 3, 1, 1, 1, 1, true, {3, 3}, {2, 2}, true},
    };
    int nc = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < nc; i++)
        for (int v = 0; v < 6; v++) run_case(&cases[i], v);
    for (int v = NO_FUSE_NEGATIVE; v <= NO_FUSE_SHARED; v++)
        if (v != NO_FUSE_OVERLAP) run_case(&cases[1], v + 10);
    sy_pool_free(pool3);
    return check_report("test_qconv_pool");
}
