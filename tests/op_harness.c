/*
 * op_harness.c - what the op harness's rows (op_rows.c, op_rows_fused.c)
 * and checks (test_ops.c, test_ops_bf16.c) share: the leaves a row is
 * built on, generated once from the row's seed and identical in float32
 * and float64, building a row in a fresh graph and feeding its leaves into
 * a plan.
 */
#include "op_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- leaves of a row: generated once, identical in float32 and float64 ---- */

static double *gen(ctx *c, const sy_shape *s, double lo, double hi, bool away_from_zero,
                   bool integer) {
    int64_t n = sy_shape_count(s);
    double *v = malloc((size_t)n * sizeof *v);
    sy_rng r = sy_rng_new(c->seed, (uint64_t)c->n_leaves);
    for (int64_t i = 0; i < n; i++) {
        if (integer) {
            v[i] = (double)((int64_t)lo + (int64_t)(sy_rng_uniform64(&r) * (hi - lo)));
            continue;
        }
        double x;
        do x = lo + (hi - lo) * sy_rng_uniform64(&r);
        while (away_from_zero && fabs(x) < 0.05);
        v[i] = x;
    }
    return v;
}

sy_node op_add_leaf(ctx *c, leaf_kind kind, sy_shape s, double lo, double hi, bool nz) {
    char name[32];
    snprintf(name, sizeof name, "leaf%d", c->n_leaves);
    sy_node n = kind == LEAF_VAR ? sy_graph_param(c->g, name, c->dt, s, sy_init_zeros())
                                 : sy_graph_input(c->g, name, kind == LEAF_INT ? SY_I32 : c->dt, s);
    leaf *l = &c->leaves[c->n_leaves];
    l->kind = kind;
    l->node = n;
    l->shape = s;
    l->values = gen(c, &s, lo, hi, nz, kind == LEAF_INT);
    c->n_leaves++;
    /* issue 16, bfloat16 storage: a mixed layer's autocast of its float inputs and weights */
    return c->bf16 && kind != LEAF_INT ? sy_graph_cast_bf16(c->g, n) : n;
}

sy_node op_var(ctx *c, sy_shape s, double lo, double hi) {
    return op_add_leaf(c, LEAF_VAR, s, lo, hi, false);
}
sy_node op_var_nz(ctx *c, sy_shape s) {
    return op_add_leaf(c, LEAF_VAR, s, -1, 1, true);
}
sy_node op_cin(ctx *c, sy_shape s, double lo, double hi) {
    return op_add_leaf(c, LEAF_FLOAT, s, lo, hi, false);
}
sy_node op_iin(ctx *c, sy_shape s, int lo, int hi) {
    return op_add_leaf(c, LEAF_INT, s, lo, hi, false);
}

/* ---- building and feeding a row ----------------------------------------------------------- */

void op_free_ctx(ctx *c) {
    for (int i = 0; i < c->n_leaves; i++) free(c->leaves[i].values);
    sy_graph_free(c->g);
}

sy_node op_build(const row *r, ctx *c, sy_dtype dt, uint64_t seed, bool bf16) {
    memset(c, 0, sizeof *c);
    c->dt = dt;
    c->seed = seed;
    c->bf16 = bf16;
    sy_graph_new(&c->g);
    sy_graph_set_bf16(c->g, bf16);
    sy_node out = r->build(c);
    sy_graph_set_bf16(c->g, false);
    return out;
}

bool op_poison_first_leaf;

void op_feed(ctx *c, sy_plan *p) {
    sy_vars *v = sy_plan_vars(p);
    for (int i = 0; i < c->n_leaves; i++) {
        leaf *l = &c->leaves[i];
        void *dst;
        if (l->kind == LEAF_VAR) {
            int32_t idx = sy_vars_find(v, sy_graph_name(c->g, l->node));
            dst = idx >= 0 ? sy_vars_data(v, idx) : NULL;
        } else {
            dst = sy_plan_input(p, l->node);
            sy_clear_error();
        }
        if (!dst) continue; /* not read by this plan */
        int64_t n = sy_shape_count(&l->shape);
        for (int64_t k = 0; k < n; k++) {
            if (op_poison_first_leaf && i == 0 && l->kind != LEAF_INT)
                ((float *)dst)[k] = NAN;
            else if (l->kind == LEAF_INT)
                ((int32_t *)dst)[k] = (int32_t)l->values[k];
            else if (c->dt == SY_F32)
                ((float *)dst)[k] = (float)l->values[k];
            else
                ((double *)dst)[k] = l->values[k];
        }
    }
}

double op_read_val(const void *p, sy_dtype dt, int64_t i) {
    return dt == SY_F32   ? ((const float *)p)[i]
           : dt == SY_F64 ? ((const double *)p)[i]
                          : ((const int32_t *)p)[i];
}
