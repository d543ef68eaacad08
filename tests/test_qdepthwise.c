/*
 * test_qdepthwise.c - the int8 depthwise conv (src/backend/cpu/qdepthwise.c):
 * the reference twin against an independent construction (each output
 * channel as a one-channel product, sy_qgemm_i8_ref on im2col rows padded
 * with x_zp: TFLite's "taps in the padding add nothing"), then the fast
 * version against the reference bit for bit, on the calling thread and on 3
 * threads. Shapes: 3x3 and 5x5, strides 1 and 2, dilation 2, 'same' and
 * 'valid' padding, channel counts that are not multiples of 16, depth
 * multipliers 1 and 2 (the second runs the reference's loop), 1x1 images.
 * Values: random and extreme, zero points -128 and 127, per-channel
 * multipliers with shifts -31..+2 and INT32_MIN multipliers, every clamp.
 * A fraction of a second in a release build.
 */
#include "backend/cpu/cpu_internal.h"
#include "check.h"
#include "xorshift.h"

#include <stdlib.h>


typedef struct dcase {
    int64_t n, h, w, c, mult, kh, kw, sh, sw, dh, dw;
    bool same;
} dcase;

/* TFLite's output size and leading padding ('same': half the total, the extra one at the end) */
static void geometry(const dcase *d, sy_qdw_geom *g) {
    *g = (sy_qdw_geom){.n = d->n, .h = d->h, .w = d->w, .c = d->c, .mult = d->mult, .kh = d->kh, .kw = d->kw,
                       .sh = d->sh, .sw = d->sw, .dh = d->dh, .dw = d->dw};
    int64_t ekh = (d->kh - 1) * d->dh + 1, ekw = (d->kw - 1) * d->dw + 1;
    if (d->same) {
        g->oh = (d->h + d->sh - 1) / d->sh;
        g->ow = (d->w + d->sw - 1) / d->sw;
        int64_t th = (g->oh - 1) * d->sh + ekh - d->h, tw = (g->ow - 1) * d->sw + ekw - d->w;
        g->pt = th > 0 ? th / 2 : 0;
        g->pl = tw > 0 ? tw / 2 : 0;
    } else {
        g->oh = (d->h - ekh) / d->sh + 1;
        g->ow = (d->w - ekw) / d->sw + 1;
    }
}

/* y by one sy_qgemm_i8_ref per output channel over im2col rows padded with x_zp */
static void by_products(int8_t *y, const int8_t *x, const int8_t *w, const sy_qdw_geom *g, const sy_qgemm_params *p) {
    int64_t taps = g->kh * g->kw, rows = g->n * g->oh * g->ow, ocs = g->c * g->mult;
    int8_t *cols = malloc((size_t)(rows * taps)), *wrow = malloc((size_t)taps), *col = malloc((size_t)rows);
    for (int64_t oc = 0; oc < ocs; oc++) {
        int64_t ic = oc / g->mult;
        for (int64_t r = 0; r < rows; r++) {
            int64_t b = r / (g->oh * g->ow), oy = r / g->ow % g->oh, ox = r % g->ow;
            for (int64_t t = 0; t < taps; t++) {
                int64_t iy = oy * g->sh - g->pt + t / g->kw * g->dh, ix = ox * g->sw - g->pl + t % g->kw * g->dw;
                bool in = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;
                cols[r * taps + t] = in ? x[((b * g->h + iy) * g->w + ix) * g->c + ic] : (int8_t)p->x_zp;
            }
        }
        for (int64_t t = 0; t < taps; t++) wrow[t] = w[t * ocs + oc];
        sy_qgemm_params q = *p;
        q.bias = p->bias ? p->bias + oc : NULL;
        q.mult = p->mult + oc;
        q.shift = p->shift + oc;
        sy_qgemm_i8_ref(col, 1, cols, taps, wrow, rows, 1, taps, &q);
        for (int64_t r = 0; r < rows; r++) y[r * ocs + oc] = col[r];
    }
    free(cols), free(wrow), free(col);
}

static int64_t differ(const int8_t *a, const int8_t *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

static void run_case(const dcase *d, int values, bool extreme, sy_pool *pool) {
    sy_qdw_geom g;
    geometry(d, &g);
    int64_t xs = d->n * d->h * d->w * d->c, ocs = d->c * d->mult, ws = d->kh * d->kw * ocs,
            ys = d->n * g.oh * g.ow * ocs;
    int8_t *x = malloc((size_t)xs), *w = malloc((size_t)ws), *ref = malloc((size_t)ys), *other = malloc((size_t)ys);
    for (int64_t i = 0; i < xs; i++) x[i] = values == 1 ? -128 : values == 2 ? 127 : (int8_t)uniform(-128, 127);
    for (int64_t i = 0; i < ws; i++) w[i] = values == 1 ? 127 : values == 2 ? -128 : (int8_t)uniform(-128, 127);
    int32_t *bias = malloc((size_t)ocs * 4), *mult = malloc((size_t)ocs * 4), *shift = malloc((size_t)ocs * 4);
    double typical = 128.0 * 74.0 * (double)d->kh + 1.0;
    for (int64_t c = 0; c < ocs; c++) {
        bias[c] = uniform(-(1 << 24), 1 << 24);
        if (extreme) {
            uint32_t r = next32() % 5;
            mult[c] = r == 0 ? INT32_MIN : r == 1 ? INT32_MAX : r == 2 ? -(int32_t)(next32() >> 1)
                                                                       : (int32_t)(next32() >> 1) | (1 << 30);
            shift[c] = uniform(-31, 2);
        } else {
            int s;
            sy_q_multiplier(100.0 / typical * (0.25 + (next32() % 1000) / 500.0), &mult[c], &s);
            shift[c] = s;
        }
    }
    int zps[] = {-128, 127, 0, uniform(-128, 127)};
    sy_qgemm_params p = {.x_zp = zps[next32() % 4], .y_zp = zps[next32() % 4], .act_min = -128, .act_max = 127,
                         .bias = next32() % 4 ? bias : NULL, .mult = mult, .shift = shift};
    if (next32() % 2) p.act_min = p.y_zp; /* ReLU */
    else if (next32() % 2) p.act_min = uniform(-128, 0), p.act_max = uniform(p.act_min, 127);
    sy_qdepthwise_i8_ref(ref, x, w, &g, &p);
    by_products(other, x, w, &g, &p);
    char what[160];
    snprintf(what, sizeof what, "%lldx%lldx%lldx%lld mult %lld, %lldx%lld stride %lld/%lld dilation %lld/%lld %s",
             (long long)d->n, (long long)d->h, (long long)d->w, (long long)d->c, (long long)d->mult,
             (long long)d->kh, (long long)d->kw, (long long)d->sh, (long long)d->sw, (long long)d->dh,
             (long long)d->dw, d->same ? "same" : "valid");
    CHECK(differ(ref, other, ys) == 0, "%s: the reference differs from per-channel products in %lld of %lld", what,
          (long long)differ(ref, other, ys), (long long)ys);
    for (int t = 0; t < 2; t++) {
        sy_exec ex = {.pool = pool, .threads = 3};
        memset(other, 0x5A, (size_t)ys);
        sy_qdepthwise_i8(t ? &ex : NULL, other, x, w, &g, &p);
        CHECK(differ(ref, other, ys) == 0, "%s, values %d, extreme %d, %s: the fast version differs in %lld of %lld",
              what, values, extreme, t ? "3 threads" : "calling thread", (long long)differ(ref, other, ys),
              (long long)ys);
    }
    free(x), free(w), free(ref), free(other), free(bias), free(mult), free(shift);
}

int main(void) {
    rng = 0x2545F4914F6CDD1Dull;
    sy_pool *pool = NULL;
    CHECK(sy_pool_new(3, &pool) == SY_OK, "pool");
    const dcase cases[] = {
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, false},  {2, 7, 9, 5, 1, 3, 3, 1, 1, 1, 1, true},
        {1, 8, 8, 16, 1, 3, 3, 1, 1, 1, 1, true},  {1, 9, 7, 33, 1, 3, 3, 2, 2, 1, 1, true},
        {2, 10, 11, 17, 1, 3, 3, 2, 1, 1, 1, false}, {1, 12, 12, 40, 1, 5, 5, 1, 1, 1, 1, true},
        {1, 13, 9, 24, 1, 3, 3, 1, 1, 2, 2, true}, {1, 11, 11, 20, 1, 3, 3, 2, 2, 2, 1, false},
        {1, 1, 1, 64, 1, 3, 3, 1, 1, 1, 1, true},  {3, 6, 5, 7, 2, 3, 3, 1, 1, 1, 1, true},
        {1, 9, 9, 8, 3, 5, 3, 2, 1, 1, 2, true},   {1, 14, 14, 96, 1, 3, 3, 1, 1, 1, 1, true},
        {1, 4, 20, 19, 1, 1, 7, 1, 3, 1, 1, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_case(&cases[i], 0, false, pool);
        run_case(&cases[i], 0, true, pool);
        run_case(&cases[i], 1, false, pool);
        run_case(&cases[i], 2, true, pool);
    }
    sy_pool_free(pool);
    return check_report("test_qdepthwise");
}
