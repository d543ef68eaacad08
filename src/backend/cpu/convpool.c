/*
 * convpool.c - issue 21's fused conv -> pool kernels (docs/design/fusion.md):
 * conv2d_pool, which computes a conv's pixels and pools them in cache or in
 * registers, writing only the pooled output and a byte per output for the
 * argmax; and conv2d_pool_backprop_filter's pooled gradient, expanded into
 * the conv's output-gradient rows for conv.c's backprop-filter paths, or in
 * registers, or (dense_dy) computed first as a Dense layer's input gradient
 * dz w^T. The conv's arithmetic is conv.c's (conv_internal.h), so the values
 * are the unfused plan's.
 */
#include "conv_internal.h"

/* ---- the pooled gradient, expanded -------------------------------------------------------------
 * conv2d_pool's pool runs over the conv's output (OH, OW): windows of kh x kw, never overlapping,
 * giving (ph, pw). Its filter gradient reads dy, y and the argmax at the pooled output and expands
 * them, block by block of conv pixels in cache, into the conv's output gradient rows, which the
 * backprop-filter paths (conv.c) consume as they would dy's: max pooling gives each pooled gradient
 * to the place its argmax byte names (dh * kw + dw in the unclipped window; 255, none, also where a
 * relu before or after the pool gives 0), average pooling spreads it over the window's valid
 * places. The other activations' gradients come first, from y: a relu's after an average pool (y >
 * 0), and before a max pool, at the maximum, whose activated value is y (sigmoid y (1 - y), tanh 1
 * - y^2) -- what relu_grad, max_pool2d_grad and the activation's gradient compute, value for value,
 * so dw is the unfused graph's. */

static pool_win pool_win_of(const geom *g, const sy_attrs *a) {
    pool_win p = {a->conv.pool_ksize[0],
                  a->conv.pool_ksize[1],
                  a->conv.pool_stride[0],
                  a->conv.pool_stride[1],
                  0,
                  0,
                  0,
                  0};
    sy_conv_out(g->oh, p.kh, p.sh, a->conv.pool_padding, &p.ph, &p.pt);
    sy_conv_out(g->ow, p.kw, p.sw, a->conv.pool_padding, &p.pw, &p.pl);
    return p;
}

/* d (O) = the conv's output gradient at window place q of pooled element i (of its O channels):
 * the pooled gradient through the activations, to the maximum's place or by the average's share
 * inv. Constant flags, so that each variant compiles to its own vector loop. */
static inline __attribute__((always_inline)) void
unpool_row(float *restrict d, const pool_bwd *b, int64_t i, int64_t O, uint8_t q, float inv,
           bool dyb, bool yb, bool avg, bool relu, int act) {
    const uint8_t *arg = avg ? NULL : b->arg + i;
    for (int64_t c = 0; c < O; c++) {
        float g = sy_ldf(b->dy, i - b->dy_off + c, dyb);
        if (relu || act != SY_ACT_NONE) { /* relu: after an average pool */
            float v = sy_ldf(b->y, i + c, yb);
            if (relu) g = v > 0 ? g : 0;
            if (act == SY_ACT_SIGMOID) g = g * v * (1 - v);
            if (act == SY_ACT_TANH) g = g * (1 - v * v);
        }
        d[c] = avg ? g * inv : arg[c] == q ? g : 0.0f;
    }
}

/* unpool_row's float32 max pooling, by vectors (vld_u8 widens the argmax bytes), d bias added row by row */
static void unpool_max(float *restrict d, const float *restrict g, const uint8_t *restrict arg, int64_t n,
                       uint8_t q, float *restrict db) {
    int64_t c = 0;
    for (; c + VL <= n; c += VL) {
        vf v = vsel(vld_u8(arg + c) == (int32_t)q, vld(g + c), (vf){0});
        vst(d + c, v);
        if (db) vst(db + c, vld(db + c) + v);
    }
    for (; c < n; c++) {
        d[c] = arg[c] == q ? g[c] : 0.0f;
        if (db) db[c] += d[c];
    }
}

/* (cpu_internal.h) Channels [c0, c1) of the conv's output gradient rows [p0, p0 + rows) into dst. */
void sy_conv_pool_unpool(const sy_pool_grad *b, const sy_conv_geom *g, float *restrict dst, int64_t ldd, int64_t p0,
                         int64_t rows, int64_t c0, int64_t c1, float *restrict db) {
    const pool_win *w = &b->p;
    int64_t O = g->o, n1 = c1 - c0, ow = p0 % g->ow, t = p0 / g->ow, oh = t % g->oh, n = t / g->oh;
    bool avg = !b->arg, relu = avg && b->post_act == SY_ACT_RELU; /* after a max pool: in arg */
    int act = b->act == SY_ACT_RELU ? SY_ACT_NONE : b->act;
    bool round = b->round && (avg || act != SY_ACT_NONE); /* relu and max select bfloat16 numbers */
    int64_t ph = 0, dh = 0, pw = 0, dw = 0;
    for (int64_t r = 0; r < rows; r++, dst += ldd) {
        if (r == 0 || ow == 0) { /* (then by steps along the row: no divisions per pixel) */
            ph = (oh + w->pt) / w->sh, dh = oh + w->pt - ph * w->sh;
            pw = (ow + w->pl) / w->sw, dw = ow + w->pl - pw * w->sw;
        }
        if (ph >= w->ph || dh >= w->kh || pw >= w->pw || dw >= w->kw) {
            memset(dst, 0, (size_t)n1 * sizeof *dst);
        } else {
            int64_t i = ((n * w->ph + ph) * w->pw + pw) * O + c0;
            uint8_t q = (uint8_t)(dh * w->kw + dw);
            float inv = 0;
            if (avg) {
                int64_t h0 = sy_max64(ph * w->sh - w->pt, 0),
                        h1 = sy_min64(ph * w->sh - w->pt + w->kh, g->oh);
                int64_t w0 = sy_max64(pw * w->sw - w->pl, 0),
                        w1 = sy_min64(pw * w->sw - w->pl + w->kw, g->ow);
                inv = 1.0f / (float)((h1 - h0) * (w1 - w0));
            }
            if (!b->dyb && !avg && act == SY_ACT_NONE) { /* the tutorial CNN's, float32 (no rounding) */
                unpool_max(dst, (const float *)b->dy + (i - b->dy_off), b->arg + i, n1, q, db);
            } else {
                if (b->dyb && !avg && act == SY_ACT_NONE) /* and bfloat16 */
                    unpool_row(dst, b, i, n1, q, inv, true, false, false, false, SY_ACT_NONE);
                else
                    unpool_row(dst, b, i, n1, q, inv, b->dyb, b->yb, avg, relu, act);
                if (round) sy_bf16_round_all(dst, n1);
                for (int64_t c = 0; db && c < n1; c++) db[c] += dst[c];
            }
        }
        if (++dw == w->sw) dw = 0, pw++;
        if (++ow == g->ow) {
            ow = 0;
            if (++oh == g->oh) {
                oh = 0;
                n++;
            }
        }
    }
}

/* ---- issue 21, dense_dy: the pooled gradient as a Dense layer's input gradient dz w^T --------------
 * The conv -> pool's output, flattened, fed a Dense layer, and its gradient is that layer's input
 * gradient dz w^T (N x F, F = PH PW O), which the kernel computes as it expands it instead of
 * reading it: a part's blocks of conv pixels need pooled rows (n, ph), each PW O floats, computed
 * into the part's cache from dz (N, U) and wt (U, F), w transposed once per call; consecutive
 * blocks share a pooled row at most, kept. Each value sums its U products in order, from the first
 * product, as the ref matmul does (oneDNN's sgemm, in the unfused plan, has an order of its own: the
 * two agree to float rounding). */
/* Pooled rows a block of `rows` conv pixels reads at most. */
int64_t sy_conv_pool_cache_rows(const geom *g, int64_t rows) { return ceil_div(rows, g->ow) + 1; }

/* The pooled row (n, ph) of conv pixel p, ph clamped to the pooled output (pixels past the last
 * window read none). */
static int64_t pooled_row(const pool_bwd *b, const geom *g, int64_t p) {
    int64_t oh = p / g->ow % g->oh, n = p / (g->ow * g->oh);
    return n * b->p.ph + sy_min64((oh + b->p.pt) / b->p.sh, b->p.ph - 1);
}

static void dense_compute(const pool_bwd *b, const geom *g, float *restrict dst, int64_t r0, int64_t r1) {
    int64_t L = b->p.pw * g->o, F = b->p.ph * L, U = b->units;
    for (int64_t r = r0; r < r1; r++, dst += L) {
        const float *z = b->dz + r / b->p.ph * U, *w = b->wd + r % b->p.ph * L;
        int64_t f = 0;
        for (; f + 4 * VL <= L; f += 4 * VL) { /* four vectors in registers across the U products */
            vf acc[4];
            UNROLL for (int v = 0; v < 4; v++) acc[v] = z[0] * vld(w + f + v * VL);
            for (int64_t u = 1; u < U; u++) UNROLL for (int v = 0; v < 4; v++) acc[v] += z[u] * vld(w + u * F + f + v * VL);
            UNROLL for (int v = 0; v < 4; v++) vst(dst + f + v * VL, acc[v]);
        }
        for (; f < L; f++) {
            float acc = z[0] * w[f];
            for (int64_t u = 1; u < U; u++) acc += z[u] * w[u * F + f];
            dst[f] = acc;
        }
    }
}

/* The pooled rows conv pixels [p0, p0 + rows) read into the cache; b's dy pointed at them. */
static void dense_rows(pool_bwd *b, const geom *g, dense_cache *c, int64_t p0, int64_t rows) {
    int64_t L = b->p.pw * g->o, r0 = pooled_row(b, g, p0), r1 = pooled_row(b, g, p0 + rows - 1) + 1, from = r0;
    if (r0 >= c->lo && r0 < c->hi) { /* the last block's last rows */
        memmove(c->rows, c->rows + (r0 - c->lo) * L, (size_t)((c->hi - r0) * L) * sizeof(float));
        from = sy_min64(c->hi, r1);
    }
    dense_compute(b, g, c->rows + (from - r0) * L, from, r1);
    c->lo = r0;
    c->hi = r1;
    b->dy = c->rows;
    b->dy_off = r0 * L;
}

/* (conv_internal.h) dense_dy: w transposed into ws and pool->wd pointed there; the floats it takes */
int64_t sy_conv_pool_dense_prepare(pool_bwd *pool, const sy_exec *ex, const geom *g, float *ws) {
    if (!pool->wd) return 0;
    int64_t F = pool->p.ph * pool->p.pw * g->o;
    sy_transpose(ex, ws, pool->wd, F, pool->units);
    pool->wd = ws;
    return floats_aligned(F * pool->units);
}

/* (conv_internal.h) Rows [p0, p0 + rows) of the conv's output gradient into dst (O floats a row), expanded from
 * the pooled gradient (dense_dy: its rows computed into the part's cache first), their sums added to db (when
 * not NULL). */
void sy_conv_pool_rows(const pool_bwd *pool, const geom *g, dense_cache *dc, float *dst, int64_t p0, int64_t rows,
                       float *db) {
    pool_bwd b = *pool;
    if (b.dz) dense_rows(&b, g, dc, p0, rows);
    sy_conv_pool_unpool(&b, g, dst, g->o, p0, rows, 0, g->o, db);
}

/* ---- issue 21: the pooled gradient expanded in registers -------------------------------------
 * For the tutorial's case -- a 2x2/2 max pool after a direct conv with no padding, float32, its
 * relu in the argmax, K <= BF_K taps -- the filter gradient takes each conv pixel's dy from the
 * pooled gradient and the argmax byte in registers, by PV vectors of channels, and adds its window's
 * products straight into K x PV accumulators: no expanded rows in cache, no second pass over them.
 * The pixels run in order as bf_tile runs them (and each row's d bias is added in that order), so
 * dw and d bias are the expanding path's bit for bit. */
#define PV 2 /* vectors of channels a tile (on AVX2 too: 1 ran at a quarter of the speed, measured) */
#define BF_K 12

static inline __attribute__((always_inline)) void bf_pool_tile(const bwd_filter_job *j, const pool_bwd *b, float *dw,
                                                               float *db, int64_t p0, int64_t rows, int64_t o0, int K) {
    const geom *g = j->g;
    const pool_win *w = &b->p;
    int64_t O = g->o, ow = p0 % g->ow, t0 = p0 / g->ow, oh = t0 % g->oh, n = t0 / g->oh;
    const int64_t *off = j->off_in;
    vf acc[BF_K][PV], dbv[PV];
    UNROLL for (int t = 0; t < K; t++) UNROLL for (int v = 0; v < PV; v++) acc[t][v] = (vf){0};
    UNROLL for (int v = 0; v < PV; v++) dbv[v] = db ? vld(db + o0 + v * VL) : (vf){0};
    const float *x = j->x;
    for (int64_t r = 0; r < rows; r++) {
        const float *src = x + ((n * g->h + oh * g->sh) * g->w + ow * g->sw) * g->c;
        int64_t ph = oh >> 1, pw = ow >> 1;
        vf d[PV];
        if (ph < w->ph && pw < w->pw) {
            int64_t i = ((n * w->ph + ph) * w->pw + pw) * O + o0;
            int32_t q = (int32_t)((oh & 1) * 2 + (ow & 1));
            const float *gy = (const float *)b->dy + (i - b->dy_off);
            UNROLL for (int v = 0; v < PV; v++) {
                d[v] = vsel(vld_u8(b->arg + i + v * VL) == q, vld(gy + v * VL), (vf){0});
                dbv[v] += d[v];
            }
        } else {
            UNROLL for (int v = 0; v < PV; v++) d[v] = (vf){0};
        }
        UNROLL for (int t = 0; t < K; t++) {
            float xs = src[off[t]];
            UNROLL for (int v = 0; v < PV; v++) acc[t][v] += xs * d[v];
        }
        if (++ow == g->ow) {
            ow = 0;
            if (++oh == g->oh) oh = 0, n++;
        }
    }
    UNROLL for (int t = 0; t < K; t++) UNROLL for (int v = 0; v < PV; v++) /* the block's sum, as bf_tile adds it */
        vst(dw + t * O + o0 + v * VL, vld(dw + t * O + o0 + v * VL) + acc[t][v]);
    UNROLL for (int v = 0; v < PV; v++) if (db) vst(db + o0 + v * VL, dbv[v]);
}

#define BF_POOL(K)                                                                                         \
    case K:                                                                                                \
        for (int64_t o0 = 0; o0 < g->o; o0 += PV * VL) bf_pool_tile(j, &b, dw, db, p0, n, o0, K);         \
        break;

/* ---- issue 21: the filter gradient window by window -------------------------------------------
 * A max pool gives each channel's gradient to one conv pixel of its window, so of a window's 4
 * pixels' products per tap and channel one is not zero: bf_pool_tile computes all 4. For a
 * one-channel input (a first conv over grayscale images: the tutorial's) and a stride-1 conv of at
 * most 3x3, a window's pixels read one patch of (kh + 1) x (kw + 1) <= 4 x 4 input values, and each
 * channel's value for tap (dh, dw) is the patch's at (dh, dw) plus its argmax place a's (a >> 1, a &
 * 1): a permute of the patch, the argmax bytes widened to its index. So a tap costs one product a
 * vector, not four. AVX-512 holds the patch in one vector (row r at lanes 4r...), moved down by the
 * tap's place once a tap (win_tap), then picked by the index a + (a & 2); AVX2, 8 lanes, holds two
 * patch rows a vector (dh's and the next), the index a + (a & 2) + dw. The sums run window by window
 * (a window in the block and part of its first pixel) where the expanding path's run pixel by
 * pixel, so dw is the unfused plan's to float rounding -- and the same bits on any number of
 * threads, the parts being the pixels' parts. d bias, each window's once, as bf_pool_tile. */
#if defined(__AVX512F__) && defined(__AVX512VL__) && VL == 16
#define WINDOWS 1 /* (else 0, below: bf_pool_tile) */
typedef struct win_patch {
    __m512 p;
} win_patch;
static inline __attribute__((always_inline)) win_patch win_load(const float *src, int64_t W, int kh, int kw) {
    __mmask8 m = (__mmask8)((1u << (kw + 1)) - 1); /* a patch row's kw + 1 values */
    __m512 p = _mm512_castps128_ps512(_mm_maskz_loadu_ps(m, src));
    p = _mm512_insertf32x4(p, _mm_maskz_loadu_ps(m, src + W), 1);
    p = _mm512_insertf32x4(p, _mm_maskz_loadu_ps(kh > 1 ? m : 0, src + 2 * W), 2);
    return (win_patch){_mm512_insertf32x4(p, _mm_maskz_loadu_ps(kh > 2 ? m : 0, src + 3 * W), 3)};
}
/* tap t's values at the window's 4 places: lanes 0, 1, 4, 5 */
static inline __attribute__((always_inline)) vf win_tap(win_patch w, int t, const vi *shift) {
    return (vf)_mm512_permutexvar_ps((__m512i)shift[t], w.p);
}
static inline __attribute__((always_inline)) vf win_pick(vf tap, vi idx, int dw) {
    (void)dw;
    return (vf)_mm512_permutexvar_ps((__m512i)idx, (__m512)tap);
}
#elif defined(__AVX2__) && VL == 8
#define WINDOWS 1
typedef struct win_patch {
    __m256 r[3]; /* rows dh and dh + 1 */
} win_patch;
static inline __attribute__((always_inline)) win_patch win_load(const float *src, int64_t W, int kh, int kw) {
    __m128i m = _mm_cmplt_epi32(_mm_set_epi32(3, 2, 1, 0), _mm_set1_epi32(kw + 1));
    __m128 row[4];
    win_patch w;
    for (int r = 0; r <= kh; r++) row[r] = kw == 3 ? _mm_loadu_ps(src + r * W) : _mm_maskload_ps(src + r * W, m);
    for (int r = 0; r < kh; r++) w.r[r] = _mm256_insertf128_ps(_mm256_castps128_ps256(row[r]), row[r + 1], 1);
    return w;
}
static inline __attribute__((always_inline)) vf win_tap(win_patch w, int t, int kw) { return (vf)w.r[t / kw]; }
static inline __attribute__((always_inline)) vf win_pick(vf tap, vi idx, int dw) {
    return (vf)_mm256_permutevar8x32_ps((__m256)tap, (__m256i)(idx + dw));
}
#else
#define WINDOWS 0
#endif

#if WINDOWS
#define WPV (VL == 16 ? 2 : 1) /* vectors of channels a tile (AVX2: 9 accumulators, 3 patch rows) */
static inline __attribute__((always_inline)) void bf_window_tile(const bwd_filter_job *j, const pool_bwd *b, float *dw,
                                                                 float *db, int64_t p0, int64_t rows, int64_t o0,
                                                                 int kh, int kw, const vi *shift) {
    const geom *g = j->g;
    const pool_win *w = &b->p;
    int64_t O = g->o;
    int K = kh * kw;
    const float *x = j->x;
    vf acc[BF_K][WPV], dbv[WPV];
    UNROLL for (int t = 0; t < K; t++) UNROLL for (int v = 0; v < WPV; v++) acc[t][v] = (vf){0};
    UNROLL for (int v = 0; v < WPV; v++) dbv[v] = db ? vld(db + o0 + v * VL) : (vf){0};
    for (int64_t p = p0, end = p0 + rows; p < end;) {
        int64_t ow = p % g->ow, t0 = p / g->ow, oh = t0 % g->oh, n = t0 / g->oh;
        int64_t row_end = sy_min64(end, p + g->ow - ow); /* this conv row's pixels in the block */
        int64_t last = (oh & 1) == 0 && oh >> 1 < w->ph ? sy_min64(ow + row_end - p, 2 * w->pw) : 0;
        for (int64_t c = (ow + 1) & ~(int64_t)1; c < last; c += 2) {
            win_patch pt = win_load(x + (n * g->h + oh) * g->w + c, g->w, kh, kw);
            int64_t i = ((n * w->ph + (oh >> 1)) * w->pw + (c >> 1)) * O + o0;
            const float *gy = (const float *)b->dy + (i - b->dy_off);
            vi idx[WPV];
            vf gv[WPV];
            UNROLL for (int v = 0; v < WPV; v++) {
                vi a = vld_u8(b->arg + i + v * VL);
                gv[v] = vsel(a < 4, vld(gy + v * VL), (vf){0}); /* 255: no gradient */
                idx[v] = a + (a & 2);
                dbv[v] += gv[v];
            }
            UNROLL for (int t = 0; t < K; t++) {
#if VL == 16
                vf tap = win_tap(pt, t, shift);
#else
                vf tap = win_tap(pt, t, kw);
#endif
                UNROLL for (int v = 0; v < WPV; v++) acc[t][v] += win_pick(tap, idx[v], t % kw) * gv[v];
            }
        }
        p = row_end;
    }
    UNROLL for (int t = 0; t < K; t++) UNROLL for (int v = 0; v < WPV; v++)
        vst(dw + t * O + o0 + v * VL, vld(dw + t * O + o0 + v * VL) + acc[t][v]);
    UNROLL for (int v = 0; v < WPV; v++) if (db) vst(db + o0 + v * VL, dbv[v]);
}

#define BF_WIN(KH, KW)                                                                                     \
    if (g->kh == KH && g->kw == KW) {                                                                      \
        for (int64_t o0 = 0; o0 < g->o; o0 += WPV * VL) bf_window_tile(j, &b, dw, db, p0, n, o0, KH, KW, shift); \
        continue;                                                                                          \
    }

/* bf_window_tile's case, within bf_pool_tile's */
static bool by_windows(const geom *g) {
    return g->c == 1 && g->sh == 1 && g->sw == 1 && g->kh <= 3 && g->kw <= 3 && g->o % (WPV * VL) == 0;
}
#endif

/* dw (K, O) and db (or NULL) += pixels [q0, q1)'s, by blocks whose dense_dy rows fit the cache */
void sy_conv_bf_pool_registers(const bwd_filter_job *j, int64_t q0, int64_t q1, float *dw, float *db, dense_cache *dc) {
    const geom *g = j->g;
    pool_bwd b = *j->pool;
    int64_t sub = sy_conv_bf_sub(g);
    memset(dw, 0, (size_t)(g->K * g->o) * sizeof(float));
#if WINDOWS
    vi shift[BF_K]; /* (AVX-512) tap t's place in the patch, dh * 4 + dw, added to each lane's */
    for (int t = 0; t < g->K; t++)
        for (int l = 0; l < VL; l++) shift[t][l] = (l + (int)(t / g->kw * 4 + t % g->kw)) & 15;
#endif
    for (int64_t p0 = q0; p0 < q1; p0 += sub) {
        int64_t n = sy_min64(sub, q1 - p0);
        if (b.dz) dense_rows(&b, g, dc, p0, n);
#if WINDOWS
        if (by_windows(g)) {
            BF_WIN(3, 3) BF_WIN(2, 2) BF_WIN(1, 1) BF_WIN(3, 2) BF_WIN(2, 3) BF_WIN(3, 1) BF_WIN(1, 3)
            BF_WIN(2, 1) BF_WIN(1, 2)
        }
#endif
        switch (g->K) {
            BF_POOL(1) BF_POOL(2) BF_POOL(3) BF_POOL(4) BF_POOL(5) BF_POOL(6)
            BF_POOL(7) BF_POOL(8) BF_POOL(9) BF_POOL(10) BF_POOL(11) BF_POOL(12)
        }
    }
}

/* bf_pool_tile's case */
bool sy_conv_bf_pool_in_registers(const geom *g, const pool_bwd *b, bool xb) {
    return direct(g) && g->K <= BF_K && !xb && b->arg && !b->dyb && !b->round &&
           (b->act == SY_ACT_NONE || b->act == SY_ACT_RELU) && b->p.kh == 2 && b->p.kw == 2 && b->p.sh == 2 &&
           b->p.sw == 2 && b->p.pt == 0 && b->p.pl == 0 && g->pt == 0 && g->pl == 0 &&
           (g->oh - 1) * g->sh + g->kh <= g->h && (g->ow - 1) * g->sw + g->kw <= g->w && g->o % (PV * VL) == 0;
}

/* ---- issue 21: conv2d_pool, the conv and the pool after it in one pass ----------------------
 * A part is one image's block of whole pooled rows. It computes the conv rows their windows read by
 * the forward's own paths (sy_conv_fwd_rows: direct or im2col, bias and activation in the epilogue;
 * under round_bf16 the bare product, then sy_bf16_epilogue's roundings) into a float32 block in its
 * scratch, and pools that block into the output while it is in cache: only the pooled output and,
 * for max pooling in a training plan, a byte per output naming the maximum's place go to memory.
 * The conv's values are computed as the unfused conv2d computes them (the direct kernels sum each
 * pixel in the same order whatever the block), and each pool as max_pool2d or avg_pool2d does: the
 * maximum from -inf, the first maximum in scan order as the argmax (max_pool2d_grad's), the average
 * as the sum in scan order over the valid count. The sim backend runs this same kernel with its
 * MXU products as the conv's rows (sy_conv_rows, sim/mxu.c). */

/* Conv pixels per part, at most: whole pooled rows, about this many (the im2col block's rows for
 * wide windows); at least one pooled row. */
#define POOL_PIXELS 512

typedef struct pool_fwd_job {
    fwd_job f; /* float32 conv values (f.b.y false) */
    const sy_conv_rows *rows; /* or, when not NULL, computed by these (issue 16: the sim backend's) */
    pool_win p;
    const float *bias; /* the bias, widened, for round_bf16's epilogue (f.bias is NULL then) */
    int act, post_act;
    bool avg, round, yb, relu_mask;
    void *y;      /* (N, PH, PW, O) */
    uint8_t *arg; /* (N, PH, PW, O) or NULL */
    int64_t prows, parts_per_image, cv_floats;
    bool in_registers; /* pool_tile's case (below) */
} pool_fwd_job;

/* Pooled rows per part, and the conv pixels a part computes at most. */
static int64_t pool_part_rows(const geom *g, const pool_win *p) {
    int64_t width = direct(g) ? POOL_PIXELS : sy_conv_block_rows(g->P, g->K + g->o, 1);
    return clamp64(width / sy_max64(1, p->sh * g->ow), 1, sy_max64(p->ph, 1));
}
static int64_t pool_part_pixels(const geom *g, const pool_win *p) {
    return sy_min64(((pool_part_rows(g, p) - 1) * p->sh + p->kh) * g->ow, g->oh * g->ow);
}


/* The pool's flags, constants where pool_lanes is called for the tutorial's case (a 2x2 max pool
 * of float32 values, relu before or after, fast below) so that it compiles to its own loop. */
typedef struct pool_flags {
    bool avg, yb, relu_mask, arg;
    int post_act;
} pool_flags;

/* Channels [c0, c0 + VL) of one pooled output from its window's places in cv (offs, in floats; the
 * places' numbers qs). */
static inline __attribute__((always_inline)) void pool_lanes(const pool_fwd_job *j, pool_flags fl,
                                                             const float *cv, const int64_t *offs,
                                                             const uint8_t *qs, int cnt, int64_t out,
                                                             int64_t c0) {
    vf acc = (vf){0} + (fl.avg ? 0.0f : -INFINITY), best = {0};
    vi at = (vi){0} + 255;
    for (int i = 0; i < cnt; i++) {
        vf v = vld(cv + offs[i] + c0);
        if (fl.avg) {
            acc += v;
            continue;
        }
        acc = vmax_gt(v, acc);
        vi gt = i ? v > best : (vi){0} - 1; /* the first maximum in scan order */
        best = vsel(gt, v, best);
        at = (gt & qs[i]) | (~gt & at);
    }
    if (fl.avg) acc = acc / (float)(cnt ? cnt : 1);
    if (fl.avg && j->round) acc = vbf16_round(acc);
    if (fl.relu_mask) { /* a relu's gradient is 0 where the output is not positive */
        vi pos = acc > 0;
        at = (pos & at) | (~pos & 255);
    }
    if (fl.post_act == SY_ACT_RELU) acc = vrelu(acc);
    if (fl.yb)
        vst_bf16((uint16_t *)j->y + out + c0, vbf16_round(acc));
    else
        vst((float *)j->y + out + c0, acc);
    if (fl.arg) {
        vst_u8(j->arg + out + c0, at);
    }
}

/* Pooled rows [ph0, ph1) of image n from the conv's rows [r0, ...) in cv (float32, O a pixel). */
static void pool_block(const pool_fwd_job *j, const float *cv, int64_t n, int64_t ph0, int64_t ph1,
                       int64_t r0) {
    const geom *g = j->f.g;
    const pool_win *p = &j->p;
    int64_t O = g->o, offs[255];
    uint8_t qs[255];
    pool_flags fl = {j->avg, j->yb, j->relu_mask, j->arg != NULL, j->post_act};
    /* the tutorial CNN's: max, float32, relu after (its mask in the argmax), training */
    pool_flags fast_fl = {false, false, true, true, SY_ACT_RELU};
    bool fast = !fl.avg && !fl.yb && fl.relu_mask && fl.arg && fl.post_act == SY_ACT_RELU;
    for (int64_t ph = ph0; ph < ph1; ph++)
        for (int64_t pw = 0; pw < p->pw; pw++) {
            int64_t out = ((n * p->ph + ph) * p->pw + pw) * O;
            int cnt = 0;
            for (int64_t dh = 0; dh < p->kh; dh++) {
                int64_t oh = ph * p->sh - p->pt + dh;
                for (int64_t dw = 0; dw < p->kw && oh >= 0 && oh < g->oh; dw++) {
                    int64_t ow = pw * p->sw - p->pl + dw;
                    if (ow < 0 || ow >= g->ow) continue;
                    offs[cnt] = ((oh - r0) * g->ow + ow) * O;
                    qs[cnt++] = (uint8_t)(dh * p->kw + dw);
                }
            }
            int64_t c0 = 0;
            if (fast && cnt == 4)
                for (; c0 + VL <= O; c0 += VL) pool_lanes(j, fast_fl, cv, offs, qs, 4, out, c0);
            else
                for (; c0 + VL <= O; c0 += VL) pool_lanes(j, fl, cv, offs, qs, cnt, out, c0);
            for (; c0 < O; c0++) { /* the last channels, one by one: the same operations */
                float acc = j->avg ? 0.0f : -INFINITY, best = 0;
                uint8_t at = 255;
                for (int i = 0; i < cnt; i++) {
                    float v = cv[offs[i] + c0];
                    if (j->avg) {
                        acc += v;
                        continue;
                    }
                    acc = v > acc ? v : acc;
                    if (!i || v > best) best = v, at = qs[i];
                }
                if (j->avg) acc = acc / (float)(cnt ? cnt : 1);
                if (j->avg && j->round) acc = sy_bf16_round(acc);
                if (j->relu_mask && !(acc > 0)) at = 255;
                if (j->post_act == SY_ACT_RELU) acc = acc > 0 ? acc : 0;
                sy_stf(j->y, out + c0, acc, j->yb);
                if (j->arg) j->arg[out + c0] = at;
            }
        }
}

/* ---- the pool in registers: the tutorial's 2x2/2 max pool over a direct conv -------------------
 * A tile of one pooled output by FPV vectors of channels computes its 4 conv pixels (each as
 * fwd_tile does: the bias, then the window's products in order -- the same bits) in registers and
 * pools them there, writing only the pooled vectors and the argmax bytes: no conv block in cache,
 * no second pass over it (measured at batch 1,000 on two threads: 5.1-5.3 ms against 7.7-8.0 for
 * the block and pool_block; three pooled outputs a tile, 12 pixels, ran slower than the block).
 * Taken for float32 max pools of 2x2 windows, stride 2, over a conv with no padding and a window of
 * at most DIRECT_K, O a multiple of FPV vectors (pool_in_registers); pixel i is place i = dh * 2 +
 * dw, scanned in the window's order. */
#define FPV (VL == 16 ? 4 : 2) /* vectors of channels a tile: AVX2 has 16 registers (4 x 2 accumulators) */

/* The pool of a tile's 4 pixels' values acc (each place's FPV vectors) into the pooled output: pool_lanes',
 * in registers */
static inline __attribute__((always_inline)) void pool_tile_store(const pool_fwd_job *j, vf acc[4][FPV], int64_t out,
                                                                  int64_t o0) {
    UNROLL for (int v = 0; v < FPV; v++) {
        vf c[4];
        UNROLL for (int i = 0; i < 4; i++) c[i] = j->act == SY_ACT_RELU ? vrelu(acc[i][v]) : acc[i][v];
        vf best = c[0];
        vi at = {0};
        UNROLL for (int i = 1; i < 4; i++) {
            vi gt = c[i] > best;
            best = vsel(gt, c[i], best);
            at = (gt & i) | (~gt & at);
        }
        vf m = best; /* the maximum from -inf: best, but where c[0] is NaN (never after a relu) */
        if (j->act != SY_ACT_RELU) {
            m = (vf){0} - INFINITY;
            UNROLL for (int i = 0; i < 4; i++) m = vmax_gt(c[i], m);
        }
        if (j->relu_mask) {
            vi pos = m > 0;
            at = (pos & at) | (~pos & 255);
        }
        vst((float *)j->y + out + o0 + v * VL, j->post_act == SY_ACT_RELU ? vrelu(m) : m);
        if (j->arg) vst_u8(j->arg + out + o0 + v * VL, at);
    }
}

static inline __attribute__((always_inline)) void pool_tile(const pool_fwd_job *j, const float *corner, int64_t out,
                                                            int64_t o0) {
    const geom *g = j->f.g;
    int64_t K = g->K, O = g->o, step = g->sw * g->c, rstep = g->sh * g->w * g->c;
    const int64_t *off = j->f.off_in;
    const float *w = j->f.w + o0, *bias = j->f.bias;
    const float *src[4] = {corner, corner + step, corner + rstep, corner + rstep + step};
    vf acc[4][FPV];
    UNROLL for (int v = 0; v < FPV; v++) {
        vf b = bias ? vld(bias + o0 + v * VL) : (vf){0};
        UNROLL for (int i = 0; i < 4; i++) acc[i][v] = b;
    }
    for (int64_t t = 0; t < K; t++) {
        vf wv[FPV];
        UNROLL for (int v = 0; v < FPV; v++) {
            wv[v] = vld(w + t * O + v * VL);
            IN_REGISTER(wv[v]);
        }
        UNROLL for (int i = 0; i < 4; i++) {
            float xs = src[i][off[t]];
            UNROLL for (int v = 0; v < FPV; v++) acc[i][v] += xs * wv[v];
        }
    }
    pool_tile_store(j, acc, out, o0);
}

/* issue 16, the sim backend's conv -> pool: the same tile with the MXU's products. A pixel's value is its
 * window's one chunk (K <= SY_MXU_DEPTH) summed from 0 in pairs of taps by VDPBF16PS, x and w rounded to
 * bfloat16 (w in rows->mxu_w, packed as sy_mxu_pack_b packs it), then the bias added in float32: the bits
 * mxu.c's product and epilogue give (tests/test_fusion.c compares them). */
#if defined(__AVX512BF16__) && defined(__AVX512VL__) && VL == 16
#define MXU_TILE 1 /* (else 0, below: the MXU's pixels come from rows->fn) */
static inline uint32_t mxu_pair(float x0, float x1) { return sy_bf16_bits(x0) | (uint32_t)sy_bf16_bits(x1) << 16; }

static inline __attribute__((always_inline)) void pool_tile_mxu(const pool_fwd_job *j, const float *corner,
                                                                int64_t out, int64_t o0) {
    const geom *g = j->f.g;
    int64_t K = g->K, pairs = (K + 1) / 2, step = g->sw * g->c, rstep = g->sh * g->w * g->c;
    const int64_t *off = j->f.off_in;
    const float *bias = j->f.bias;
    const uint32_t *wp = j->rows->mxu_w + o0 / 16 * pairs * 16; /* panel o0 / 16, pair after pair */
    const float *src[4] = {corner, corner + step, corner + rstep, corner + rstep + step};
    __m512 acc[4][FPV];
    UNROLL for (int i = 0; i < 4; i++) UNROLL for (int v = 0; v < FPV; v++) acc[i][v] = _mm512_setzero_ps();
    for (int64_t q = 0; q < pairs; q++) {
        __m512i wv[FPV];
        UNROLL for (int v = 0; v < FPV; v++) wv[v] = _mm512_loadu_si512((const void *)(wp + (v * pairs + q) * 16));
        UNROLL for (int i = 0; i < 4; i++) {
            __m512i a = _mm512_set1_epi32((int)mxu_pair(src[i][off[2 * q]], 2 * q + 1 < K ? src[i][off[2 * q + 1]] : 0));
            UNROLL for (int v = 0; v < FPV; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], (__m512bh)a, (__m512bh)wv[v]);
        }
    }
    vf c[4][FPV];
    UNROLL for (int v = 0; v < FPV; v++) {
        vf b = bias ? vld(bias + o0 + v * VL) : (vf){0};
        UNROLL for (int i = 0; i < 4; i++) c[i][v] = bias ? (vf)acc[i][v] + b : (vf)acc[i][v];
    }
    pool_tile_store(j, c, out, o0);
}
#else
#define MXU_TILE 0
#endif

/* Pooled rows [ph0, ph1) of image n, by tiles */
static void pool_rows_in_registers(const pool_fwd_job *j, int64_t n, int64_t ph0, int64_t ph1) {
    const geom *g = j->f.g;
    const pool_win *p = &j->p;
    int64_t O = g->o, step = g->sw * g->c;
    for (int64_t ph = ph0; ph < ph1; ph++) {
        const float *row = (const float *)j->f.x + (n * g->h + 2 * ph * g->sh) * g->w * g->c;
        for (int64_t pw = 0; pw < p->pw; pw++) {
            int64_t out = ((n * p->ph + ph) * p->pw + pw) * O;
            for (int64_t o0 = 0; o0 < O; o0 += FPV * VL)
#if MXU_TILE
                if (j->rows) pool_tile_mxu(j, row + 2 * pw * step, out, o0);
                else
#endif
                    pool_tile(j, row + 2 * pw * step, out, o0);
        }
    }
}

/* pool_tile's case: the geometry above, float32 throughout, act none or relu */
static bool pool_in_registers(const geom *g, const pool_win *p, const sy_attrs *a, conv_bf16 b, bool yb) {
    return direct(g) && !b.x && !b.w && !b.y && !yb && !a->conv.round_bf16 && !a->conv.pool_avg &&
           (a->conv.act == SY_ACT_NONE || a->conv.act == SY_ACT_RELU) && p->kh == 2 && p->kw == 2 &&
           p->sh == 2 && p->sw == 2 && p->pt == 0 && p->pl == 0 && g->pt == 0 && g->pl == 0 &&
           (g->oh - 1) * g->sh + g->kh <= g->h && (g->ow - 1) * g->sw + g->kw <= g->w && g->o % (FPV * VL) == 0;
}

static void pool_fwd_part(void *ctx, int64_t part, float *scratch) {
    const pool_fwd_job *j = ctx;
    const geom *g = j->f.g;
    const pool_win *p = &j->p;
    int64_t n = part / j->parts_per_image, ph0 = part % j->parts_per_image * j->prows;
    int64_t ph1 = sy_min64(ph0 + j->prows, p->ph);
    if (j->in_registers) {
        pool_rows_in_registers(j, n, ph0, ph1);
        return;
    }
    int64_t r0 = sy_max64(ph0 * p->sh - p->pt, 0),
            r1 = sy_min64((ph1 - 1) * p->sh - p->pt + p->kh, g->oh);
    float *cv = scratch;
    if (r1 > r0) {
        int64_t p0 = (n * g->oh + r0) * g->ow, rows = (r1 - r0) * g->ow;
        if (j->rows)
            j->rows->fn(j->rows->ctx, p0, rows, j->f.bias, j->f.act, cv, scratch + j->cv_floats);
        else
            sy_conv_fwd_rows(&j->f, p0, rows, cv, scratch + j->cv_floats);
        if (j->round) sy_bf16_epilogue(cv, rows, g->o, j->bias, j->act);
    }
    pool_block(j, cv, n, ph0, ph1, r0);
}

static int64_t pool_parts(const geom *g, const pool_win *p) {
    return g->n * ceil_div(p->ph, pool_part_rows(g, p));
}

static conv_bf16 pool_conv_bf16(const sy_kargs *k) {
    conv_bf16 b = sy_conv_bf16_of(k);
    b.y = false; /* the conv's values go to a float32 block */
    return b;
}

/* Per-part scratch: the conv's block, then the rows' scratch. */
static int64_t pool_scratch(const geom *g, const pool_win *p, conv_bf16 b, const sy_conv_rows *rows) {
    int64_t pix = pool_part_pixels(g, p);
    return floats_aligned(pix * g->o) + (rows ? rows->scratch_floats : sy_conv_fwd_scratch(g, pix, b));
}

size_t sy_conv2d_pool_ws(const sy_kargs *k, int threads, const sy_conv_rows *rows) {
    geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], k->attr);
    pool_win p = pool_win_of(&g, k->attr);
    conv_bf16 b = pool_conv_bf16(k);
    int64_t parts = pool_parts(&g, &p);
    if (parts == 0) return 0;
    return (size_t)(sy_conv_fwd_head(&g, b) + sy_blocks_buffers(threads, parts) * pool_scratch(&g, &p, b, rows)) *
           sizeof(float);
}

void sy_conv2d_pool_run(const sy_kargs *k, float *ws, const sy_conv_rows *rows) {
    const sy_attrs *a = k->attr;
    geom g = sy_conv_geom_make(&k->in_shape[0], &k->in_shape[1], a);
    pool_win p = pool_win_of(&g, a);
    conv_bf16 b = pool_conv_bf16(k);
    int64_t parts = pool_parts(&g, &p);
    if (parts == 0) return;
    bool round = a->conv.round_bf16;
    pool_fwd_job j;
    int64_t pix = pool_part_pixels(&g, &p);
    j.f = sy_conv_fwd_setup(&g, k->in[0], k->in[1], k->n_in > 2 ? k->in[2] : NULL,
                    round ? SY_ACT_NONE : a->conv.act, NULL, ws, b, pix);
    j.rows = rows;
    j.bias = j.f.bias;
    if (round) j.f.bias = NULL; /* the bare product; sy_bf16_epilogue adds it */
    j.p = p;
    j.act = a->conv.act;
    j.post_act = a->conv.post_act;
    j.avg = a->conv.pool_avg;
    j.round = round;
    j.yb = k->dtype == SY_BF16;
    j.relu_mask = sy_conv_pool_relu_mask(a);
    j.y = k->out;
    j.arg = j.avg ? NULL : k->aux;
    j.prows = pool_part_rows(&g, &p);
    j.parts_per_image = ceil_div(p.ph, j.prows);
    j.cv_floats = floats_aligned(pix * g.o);
    j.in_registers = pool_in_registers(&g, &p, a, b, j.yb) && (!rows || (MXU_TILE && rows->mxu_w));
    sy_run_blocks(k->ex, parts, pool_fwd_part, &j, ws + sy_conv_fwd_head(&g, b), pool_scratch(&g, &p, b, rows));
}

static size_t conv2d_pool_ws(const sy_kargs *k, int threads) { return sy_conv2d_pool_ws(k, threads, NULL); }
static void conv2d_pool_fwd_f32_fast(const sy_kargs *k) { sy_conv2d_pool_run(k, k->ws, NULL); }

/* (x, dy [, y] [, argmax]) -> dw; aux: d bias */
static size_t conv2d_pool_bwd_filter_ws(const sy_kargs *k, int threads) {
    geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    int64_t L = 0, wt = 0;
    if (k->attr->conv.dense_dy) { /* the pooled row's floats, w's: F = PH PW O of (N, F) */
        const sy_shape *w = &k->in_shape[2];
        L = w->dims[0] / sy_max64(pool_win_of(&g, k->attr).ph, 1);
        wt = w->dims[0] * w->dims[1];
    }
    return g.P ? sy_conv_filter_ws(&g, threads, k->in_dtype[0] == SY_BF16, false, true, L, wt) : 0;
}

sy_pool_grad sy_conv_pool_grad(const sy_kargs *k, const sy_conv_geom *g) {
    const sy_attrs *a = k->attr;
    bool reads_y = sy_conv_pool_reads_y(a);
    int d = a->conv.dense_dy != 0; /* (x, dz, w [, y] [, argmax]): dy's rows computed (dense_rows) */
    return (sy_pool_grad){.p = pool_win_of(g, a),
                          .dy = d ? NULL : k->in[1],
                          .y = reads_y ? k->in[2 + d] : NULL,
                          .dy_off = 0,
                          .dz = d ? k->in[1] : NULL,
                          .wd = d ? k->in[2] : NULL,
                          .units = d ? k->in_shape[1].dims[1] : 0,
                          .arg = a->conv.pool_avg ? NULL : k->in[2 + d + reads_y],
                          .dyb = k->in_dtype[1] == SY_BF16,
                          .yb = reads_y && k->in_dtype[2 + d] == SY_BF16,
                          .round = a->conv.round_bf16,
                          .act = a->conv.act,
                          .post_act = a->conv.post_act,
                          .db = k->aux,
                          .db_part = NULL};
}

static void conv2d_pool_bwd_filter_f32_fast(const sy_kargs *k) {
    geom g = sy_conv_geom_make(&k->in_shape[0], k->out_shape, k->attr);
    pool_bwd b = sy_conv_pool_grad(k, &g);
    if (g.P == 0) {
        memset(k->out, 0, (size_t)sy_shape_count(k->out_shape) * sizeof(float));
        if (b.db) memset(b.db, 0, (size_t)g.o * sizeof(float));
        return;
    }
    sy_conv_filter_run(k, &g, &b);
    if (!b.round) return; /* the bf16 ops' sums, rounded as the plan rounds theirs */
    sy_bf16_round_all(k->out, sy_shape_count(k->out_shape));
    if (b.db) sy_bf16_round_all(b.db, g.o);
}

/* Every float operand may be bfloat16 but the gradients, which are float32 sums. */
static uint32_t conv2d_pool_bf16_io(const sy_kargs *k) {
    if (k->op == SY_OP_CONV2D_POOL)
        return SY_BF16_IN(0) | SY_BF16_IN(1) | SY_BF16_IN(2) | SY_BF16_OUT;
    if (k->attr->conv.dense_dy) return SY_BF16_IN(0); /* dz and w float32 (sy_cpu_fuses) */
    return SY_BF16_IN(0) | SY_BF16_IN(1) | SY_BF16_IN(2);
}

/* The shapes the fast paths above take: a plain conv by the direct or im2col path (not pointwise,
 * and not Winograd, which a training plan takes for 3x3 convs over 16 channels or more:
 * docs/design/winograd.md). Everything else stays unfused. */
bool sy_cpu_fuses(sy_op op, const sy_kargs *k) {
    if (op == SY_OP_QCONV2D_POOL) return true; /* issue 18: any shape (qconvpool.c; fusion.c checks the numbers) */
    if (op == SY_OP_MATMUL_BIAS_GRAD) return k->dtype == SY_F32 || k->dtype == SY_F64; /* gemm.c, the ref kernel */
    if (op != SY_OP_CONV2D_POOL && op != SY_OP_CONV2D_POOL_BACKPROP_FILTER) return false;
    if (k->dtype == SY_F64) return true; /* the ref kernels, as for every float64 op */
    if (k->dtype != SY_F32 || !plain(k->attr) || (k->attr->conv.dense_dy && k->attr->conv.round_bf16)) return false;
    const sy_shape *w = op == SY_OP_CONV2D_POOL ? &k->in_shape[1] : k->out_shape;
    geom g = sy_conv_geom_make(&k->in_shape[0], w, k->attr);
    sy_wino_shape ws;
    bool wino = sy_conv_wino_shape(&g, false, &ws) && (op != SY_OP_CONV2D_POOL || !k->ex->inference);
    return g.P > 0 && !pointwise(&g) && !wino;
}

const sy_kernel sy_cpu_conv2d_pool = {conv2d_pool_fwd_f32_fast, conv2d_pool_ws,
                                      conv2d_pool_bf16_io};
const sy_kernel sy_cpu_conv2d_pool_backprop_filter = {
    conv2d_pool_bwd_filter_f32_fast, conv2d_pool_bwd_filter_ws, conv2d_pool_bf16_io};
