/*
 * winograd.c - Winograd F(4x4, 3x3) convolution for 3x3, stride-1 convs:
 * the forward pass, the input gradient (a 3x3 conv of dy with the kernel
 * flipped and its channels swapped) and the kernel gradient.
 *
 * The output is cut into 4x4 tiles; each reads a 6x6 input tile. With the
 * interpolation points 0, +-1, +-2 and infinity (Lavin & Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2016):
 *
 *   y (4x4) = A^T [ sum_c (G g_c G^T) . (B^T d_c B) ] A
 *
 * where . is the elementwise product of 6x6 matrices. Fixing one of the 36
 * positions xi of the 6x6 matrices, the sum over input channels for every
 * tile and output channel is a matrix product:
 *
 *   M[xi] (T, O) = V[xi] (T, C) x U[xi] (C, O)
 *
 * with V the transformed input tiles and U the transformed kernel. So a
 * conv is four phases, each over ex's threads:
 *
 *   0. kernel transform  U[xi] (C, O) = G g G^T            (parts: rows c)
 *   1. input transform   V[xi] (T, C) = B^T d B            (parts: tiles)
 *   2. 36 GEMMs          M[xi] = V[xi] x U[xi]             (parts: xi)
 *   3. output transform  y = A^T M A, + bias, activation   (parts: tiles)
 *
 * 36 multiplications per tile and channel pair against 144 for the direct
 * conv: 4x fewer, less the transforms (O(C + O) per tile, not O(C x O)).
 * The kernel gradient is the adjoint of the same: dM = A dy A^T per output
 * tile, dU[xi] (C, O) = V[xi]^T x dM[xi] (one GEMM per xi over all tiles),
 * dw = G^T dU G.
 *
 * Every part is fixed by the shapes and each GEMM is one single-threaded
 * sgemm, so results are bitwise the same on any number of threads.
 *
 * Numerics: the transforms' coefficients (1/4, 1/6, 1/24, 8, ...) grow the
 * rounding error of float32 over the direct conv's by a few bits; tests/
 * test_ops.c measures it against a float64 reference (docs/design/
 * winograd.md). $SYSTOLIC_WINOGRAD=0 turns the path off (conv.c then runs
 * im2col + GEMM), for comparison. Plans with no backward pass (predict,
 * evaluate: sy_exec.inference) never take it: there, agreeing with Keras
 * comes before speed (docs/design/winograd.md).
 */
#include "cpu_internal.h"

#include <stdlib.h>

#pragma GCC diagnostic ignored "-Wpsabi"

#define WL 16 /* floats per vector: one AVX-512 register, two AVX2 ones */
typedef float wv __attribute__((vector_size(WL * sizeof(float))));
typedef int32_t wvi __attribute__((vector_size(WL * sizeof(int32_t))));

#define TILES_PER_PART 32 /* tiles per part of the transforms */

/* n floats (n <= WL) as a vector, zeros beyond. */
static inline wv wload(const float *p, int64_t n) {
    wv v = {0};
    if (n == WL) memcpy(&v, p, sizeof v); /* one vector load */
    else memcpy(&v, p, (size_t)n * sizeof(float));
    return v;
}
static inline void wstore(float *p, wv v, int64_t n) {
    if (n == WL) memcpy(p, &v, sizeof v);
    else memcpy(p, &v, (size_t)n * sizeof(float));
}

bool sy_winograd_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        const char *e = getenv("SYSTOLIC_WINOGRAD");
        enabled = !(e && e[0] == '0');
    }
    return enabled;
}

/* A conv is worth it when the GEMMs are big enough to run near peak and
 * the 4x4 tiles are mostly used: at 2x2 outputs a tile computes 16 outputs
 * for 4 and does as many multiplications as the direct conv. */
bool sy_winograd_fits(const sy_wino_shape *s) {
    return sy_winograd_enabled() && s->c >= 16 && s->o >= 16 && s->oh >= 4 && s->ow >= 4 && s->n > 0;
}

static int64_t tiles_h(const sy_wino_shape *s) { return (s->oh + 3) / 4; }
static int64_t tiles_w(const sy_wino_shape *s) { return (s->ow + 3) / 4; }
static int64_t tiles(const sy_wino_shape *s) { return s->n * tiles_h(s) * tiles_w(s); }
static int64_t aligned(int64_t n) { return sy_align_up(n, SY_ALIGN / (int64_t)sizeof(float)); }

/* ---- the 1-D transforms, applied to columns then rows ---------------------- */

/* B^T a: 6 -> 6 */
#define BT6(a, r)                                                                                                     \
    do {                                                                                                              \
        r[0] = 4 * a[0] - 5 * a[2] + a[4];                                                                            \
        r[1] = -4 * a[1] - 4 * a[2] + a[3] + a[4];                                                                    \
        r[2] = 4 * a[1] - 4 * a[2] - a[3] + a[4];                                                                     \
        r[3] = -2 * a[1] - a[2] + 2 * a[3] + a[4];                                                                    \
        r[4] = 2 * a[1] - a[2] - 2 * a[3] + a[4];                                                                     \
        r[5] = 4 * a[1] - 5 * a[3] + a[5];                                                                            \
    } while (0)

/* A^T m: 6 -> 4 */
#define AT4(m, r)                                                                                                     \
    do {                                                                                                              \
        wv p12 = m[1] + m[2], n12 = m[1] - m[2], p34 = m[3] + m[4], n34 = m[3] - m[4];                                \
        r[0] = m[0] + p12 + p34;                                                                                      \
        r[1] = n12 + 2 * n34;                                                                                         \
        r[2] = p12 + 4 * p34;                                                                                         \
        r[3] = n12 + 8 * n34 + m[5];                                                                                  \
    } while (0)

/* G g: 3 -> 6 */
#define G6(g, r)                                                                                                      \
    do {                                                                                                              \
        r[0] = g[0] * (1.0f / 4);                                                                                     \
        r[1] = (g[0] + g[1] + g[2]) * (-1.0f / 6);                                                                    \
        r[2] = (g[0] - g[1] + g[2]) * (-1.0f / 6);                                                                    \
        r[3] = g[0] * (1.0f / 24) + g[1] * (1.0f / 12) + g[2] * (1.0f / 6);                                           \
        r[4] = g[0] * (1.0f / 24) - g[1] * (1.0f / 12) + g[2] * (1.0f / 6);                                           \
        r[5] = g[2];                                                                                                  \
    } while (0)

/* A y: 4 -> 6 (the adjoint of AT4) */
#define A6(y, r)                                                                                                      \
    do {                                                                                                              \
        r[0] = y[0];                                                                                                  \
        r[1] = y[0] + y[1] + y[2] + y[3];                                                                             \
        r[2] = y[0] - y[1] + y[2] - y[3];                                                                             \
        r[3] = y[0] + 2 * y[1] + 4 * y[2] + 8 * y[3];                                                                 \
        r[4] = y[0] - 2 * y[1] + 4 * y[2] - 8 * y[3];                                                                 \
        r[5] = y[3];                                                                                                  \
    } while (0)

/* G^T u: 6 -> 3 (the adjoint of G6) */
#define GT3(u, r)                                                                                                     \
    do {                                                                                                              \
        r[0] = u[0] * (1.0f / 4) - (u[1] + u[2]) * (1.0f / 6) + (u[3] + u[4]) * (1.0f / 24);                          \
        r[1] = (u[2] - u[1]) * (1.0f / 6) + (u[3] - u[4]) * (1.0f / 12);                                              \
        r[2] = (u[3] + u[4] - u[1] - u[2]) * (1.0f / 6) + u[5];                                                       \
    } while (0)

/* out (R x Q, row-major) from in (P x P'): columns by F (P -> R) then rows by F2 (P' -> Q). */
#define TRANSFORM_2D(F, F2, in, P, P2, R, Q, out)                                                                     \
    do {                                                                                                              \
        wv t_[R][P2];                                                                                                 \
        for (int j_ = 0; j_ < P2; j_++) {                                                                             \
            wv a_[P], r_[R];                                                                                          \
            for (int i_ = 0; i_ < P; i_++) a_[i_] = in[i_ * P2 + j_];                                                 \
            F(a_, r_);                                                                                                \
            for (int i_ = 0; i_ < R; i_++) t_[i_][j_] = r_[i_];                                                       \
        }                                                                                                             \
        for (int i_ = 0; i_ < R; i_++) {                                                                              \
            wv r_[Q];                                                                                                 \
            F2(t_[i_], r_);                                                                                           \
            for (int j_ = 0; j_ < Q; j_++) out[i_ * Q + j_] = r_[j_];                                                 \
        }                                                                                                             \
    } while (0)

/* ---- phase 0: the kernel ------------------------------------------------------ */

typedef struct kernel_job {
    const float *w; /* (3, 3, CI, CO) */
    float *u;       /* (36, CI, CO) */
    int64_t ci, co;
    bool flip;      /* transform the kernel flipped in space */
} kernel_job;

static void kernel_part(void *ctx, int64_t c) {
    const kernel_job *j = ctx;
    for (int64_t o0 = 0; o0 < j->co; o0 += WL) {
        int64_t n = sy_min64(WL, j->co - o0);
        wv g[9], u[36];
        for (int k = 0; k < 9; k++) g[k] = wload(j->w + ((j->flip ? 8 - k : k) * j->ci + c) * j->co + o0, n);
        TRANSFORM_2D(G6, G6, g, 3, 3, 6, 6, u);
        for (int xi = 0; xi < 36; xi++) wstore(j->u + (xi * j->ci + c) * j->co + o0, u[xi], n);
    }
}

/* ---- phase 1: input tiles -------------------------------------------------- */

typedef struct input_job {
    const sy_wino_shape *s;
    const float *x; /* (N, H, W, C) */
    float *v;       /* (36, T, C) */
    int64_t T;
} input_job;

/* Tiles [t0, t1) of x transformed into v (36, ldt, C), tile t at row t - t0. */
static void input_tiles(const sy_wino_shape *s, const float *x, float *v, int64_t ldt, int64_t t0, int64_t t1) {
    int64_t th = tiles_h(s), tw = tiles_w(s), C = s->c;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / (th * tw), r = t % (th * tw), ih0 = (r / tw) * 4 - s->pt, iw0 = (r % tw) * 4 - s->pl;
        const float *rows[6][6];
        for (int i = 0; i < 6; i++)
            for (int k = 0; k < 6; k++) {
                int64_t ih = ih0 + i, iw = iw0 + k;
                rows[i][k] = ih >= 0 && ih < s->h && iw >= 0 && iw < s->w ? x + ((n * s->h + ih) * s->w + iw) * C : NULL;
            }
        for (int64_t c0 = 0; c0 < C; c0 += WL) {
            int64_t nc = sy_min64(WL, C - c0);
            wv d[36], d36[36];
            for (int i = 0; i < 36; i++) d[i] = rows[i / 6][i % 6] ? wload(rows[i / 6][i % 6] + c0, nc) : (wv){0};
            TRANSFORM_2D(BT6, BT6, d, 6, 6, 6, 6, d36);
            for (int xi = 0; xi < 36; xi++) wstore(v + (xi * ldt + t - t0) * C + c0, d36[xi], nc);
        }
    }
}

static void input_part(void *ctx, int64_t part) {
    const input_job *j = ctx;
    int64_t t0 = part * TILES_PER_PART;
    input_tiles(j->s, j->x, j->v + t0 * j->s->c, j->T, t0, sy_min64(j->T, t0 + TILES_PER_PART));
}

/* ---- phase 2: the 36 products ------------------------------------------------ */

typedef struct gemm_job {
    const float *a, *b;
    float *c;
    int64_t m, n, k;
    bool ta, tb;
} gemm_job;

/* c[xi] (m, n) = op(a[xi]) (m, k) x op(b[xi]) (k, n); a stored (k, m) when ta, b stored (n, k) when tb */
static void gemm_part(void *ctx, int64_t xi) {
    const gemm_job *j = ctx;
    sy_sgemm(j->ta, j->tb, j->m, j->n, j->k, 1.0f, j->a + xi * j->m * j->k, j->ta ? j->m : j->k, j->b + xi * j->k * j->n,
             j->tb ? j->k : j->n, 0.0f, j->c + xi * j->m * j->n, j->n);
}

/* ---- phase 3: output tiles ------------------------------------------------- */

typedef struct output_job {
    const sy_wino_shape *s;
    const float *m, *bias; /* (36, T, O); (O) or NULL */
    float *y;              /* (N, OH, OW, O) */
    int64_t T;
    int act;
} output_job;

/* y for tiles [t0, t1) from m (36, ldt, O), tile t at row t - t0: + bias, act. */
static void output_tiles(const sy_wino_shape *s, const float *mm, int64_t ldt, int64_t t0, int64_t t1,
                         const float *bias, int act, float *yy) {
    int64_t th = tiles_h(s), tw = tiles_w(s), O = s->o;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / (th * tw), r = t % (th * tw), oh0 = (r / tw) * 4, ow0 = (r % tw) * 4;
        int64_t nh = sy_min64(4, s->oh - oh0), nw = sy_min64(4, s->ow - ow0);
        for (int64_t o0 = 0; o0 < O; o0 += WL) {
            int64_t no = sy_min64(WL, O - o0);
            wv m[36], y[16], b = bias ? wload(bias + o0, no) : (wv){0};
            for (int xi = 0; xi < 36; xi++) m[xi] = wload(mm + (xi * ldt + t - t0) * O + o0, no);
            TRANSFORM_2D(AT4, AT4, m, 6, 6, 4, 4, y);
            for (int i = 0; i < nh; i++)
                for (int k = 0; k < nw; k++) {
                    wv v = y[i * 4 + k] + b;
                    if (act == SY_ACT_RELU) v = (wv)((wvi)v & (wvi)(v > 0)); /* NaN gives 0, as sy_act_f32 */
                    float *dst = yy + ((n * s->oh + oh0 + i) * s->ow + ow0 + k) * O + o0;
                    wstore(dst, v, no);
                    if (act != SY_ACT_NONE && act != SY_ACT_RELU)
                        for (int64_t q = 0; q < no; q++) dst[q] = sy_act_f32(dst[q], act);
                }
        }
    }
}

static void output_part(void *ctx, int64_t part) {
    const output_job *j = ctx;
    int64_t t0 = part * TILES_PER_PART;
    output_tiles(j->s, j->m + t0 * j->s->o, j->T, t0, sy_min64(j->T, t0 + TILES_PER_PART), j->bias, j->act, j->y);
}

/* ---- the forward conv ------------------------------------------------------ */

/* Blocked: when U is small enough to stay in cache (C x O up to 128 x 128),
 * each part takes a block of tiles through all three phases in a
 * per-thread buffer that stays in L2, so V and M never go to memory (VGG16's
 * first block at batch 64 would otherwise write and read 150 MB of them
 * per conv). Larger kernels take the phases over the whole batch: each
 * position's U (up to 1 MB) is read once, by one GEMM over all tiles. */
#define BLOCK_BYTES (1 << 20)   /* a block's V and M */
#define BLOCKED_MAX_U (4 << 20) /* U's bytes, at most, for the blocked form */

static int64_t block_tiles(const sy_wino_shape *s) {
    return sy_max64(16, sy_min64(128, BLOCK_BYTES / (36 * (int64_t)sizeof(float) * (s->c + s->o))));
}

static bool blocked(const sy_wino_shape *s) {
    return 36 * s->c * s->o * (int64_t)sizeof(float) <= BLOCKED_MAX_U && tiles(s) >= 2 * block_tiles(s);
}

static int64_t block_count(const sy_wino_shape *s) { return (tiles(s) + block_tiles(s) - 1) / block_tiles(s); }

/* Workspace: U (36, C, O), then V (36, T, C) and M (36, T, O), or one block's per thread. */
size_t sy_winograd_fwd_ws(const sy_wino_shape *s, int threads) {
    int64_t T = tiles(s), n = aligned(36 * s->c * s->o);
    if (blocked(s)) n += sy_min64(threads, block_count(s)) * aligned(36 * block_tiles(s) * (s->c + s->o));
    else n += aligned(36 * T * s->c) + aligned(36 * T * s->o);
    return (size_t)n * sizeof(float);
}

typedef struct block_job {
    const sy_wino_shape *s;
    const float *x, *u, *bias;
    float *y, *buf;
    int64_t tb, blocks, buf_floats;
    int act;
    bool flip;
} block_job;

static void block_thread(void *arg, int index, int count) {
    const block_job *j = arg;
    const sy_wino_shape *s = j->s;
    int64_t b0, b1, T = tiles(s), C = s->c, O = s->o, tb = j->tb;
    sy_split_range(j->blocks, index, count, &b0, &b1);
    float *v = j->buf + index * j->buf_floats, *m = v + 36 * tb * C;
    for (int64_t b = b0; b < b1; b++) {
        int64_t t0 = b * tb, t1 = sy_min64(T, t0 + tb);
        input_tiles(s, j->x, v, tb, t0, t1);
        for (int xi = 0; xi < 36; xi++)
            sy_sgemm(false, j->flip, t1 - t0, O, C, 1.0f, v + xi * tb * C, C, j->u + xi * C * O, j->flip ? C : O, 0.0f,
                     m + xi * tb * O, O);
        output_tiles(s, m, tb, t0, t1, j->bias, j->act, j->y);
    }
}

void sy_winograd_fwd(const sy_exec *ex, const sy_wino_shape *s, const float *x, const float *w, bool flip,
                     const float *bias, int act, float *y, float *ws) {
    int64_t T = tiles(s), C = s->c, O = s->o;
    float *u = ws, *v = u + aligned(36 * C * O), *m = v + aligned(36 * T * C);
    /* flip: w is the forward conv's (3, 3, O, C), this conv's input channels
     * its outputs; U is transformed in w's layout, (36, O, C), and the GEMMs
     * take it transposed */
    kernel_job kj = {w, u, flip ? O : C, flip ? C : O, flip};
    sy_parallel_parts(ex, kj.ci, kernel_part, &kj);
    if (blocked(s)) {
        int64_t tb = block_tiles(s), blocks = block_count(s);
        block_job bj = {s, x, u, bias, y, v, tb, blocks, aligned(36 * tb * (C + O)), act, flip};
        sy_exec_parallel(ex, (int)sy_min64(ex->threads, blocks), block_thread, &bj);
        return;
    }
    int64_t parts = (T + TILES_PER_PART - 1) / TILES_PER_PART;
    input_job ij = {s, x, v, T};
    sy_parallel_parts(ex, parts, input_part, &ij);
    gemm_job gj = {v, u, m, T, O, C, false, flip};
    sy_parallel_parts(ex, 36, gemm_part, &gj);
    output_job oj = {s, m, bias, y, T, act};
    sy_parallel_parts(ex, parts, output_part, &oj);
}

/* ---- the kernel gradient --------------------------------------------------- */

typedef struct dy_job {
    const sy_wino_shape *s;
    const float *dy; /* (N, OH, OW, O) */
    float *dm;       /* (36, T, O) */
    int64_t T;
} dy_job;

/* dM = A dy A^T for tiles [t0, t1) into dm (36, ldt, O), tile t at row t - t0; zeros past the output's edge. */
static void dy_tiles(const sy_wino_shape *s, const float *dy, float *dm, int64_t ldt, int64_t t0, int64_t t1) {
    int64_t th = tiles_h(s), tw = tiles_w(s), O = s->o;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / (th * tw), r = t % (th * tw), oh0 = (r / tw) * 4, ow0 = (r % tw) * 4;
        int64_t nh = sy_min64(4, s->oh - oh0), nw = sy_min64(4, s->ow - ow0);
        for (int64_t o0 = 0; o0 < O; o0 += WL) {
            int64_t no = sy_min64(WL, O - o0);
            wv d[16], m[36];
            for (int i = 0; i < 4; i++)
                for (int k = 0; k < 4; k++)
                    d[i * 4 + k] = i < nh && k < nw ? wload(dy + ((n * s->oh + oh0 + i) * s->ow + ow0 + k) * O + o0, no)
                                                    : (wv){0};
            TRANSFORM_2D(A6, A6, d, 4, 4, 6, 6, m);
            for (int xi = 0; xi < 36; xi++) wstore(dm + (xi * ldt + t - t0) * O + o0, m[xi], no);
        }
    }
}

static void dy_part(void *ctx, int64_t part) {
    const dy_job *j = ctx;
    int64_t t0 = part * TILES_PER_PART;
    dy_tiles(j->s, j->dy, j->dm + t0 * j->s->o, j->T, t0, sy_min64(j->T, t0 + TILES_PER_PART));
}

typedef struct dw_job {
    const float *du; /* (36, C, O) */
    float *dw;       /* (3, 3, C, O) */
    int64_t c, o;
} dw_job;

static void dw_part(void *ctx, int64_t c) {
    const dw_job *j = ctx;
    for (int64_t o0 = 0; o0 < j->o; o0 += WL) {
        int64_t n = sy_min64(WL, j->o - o0);
        wv u[36], g[9];
        for (int xi = 0; xi < 36; xi++) u[xi] = wload(j->du + (xi * j->c + c) * j->o + o0, n);
        TRANSFORM_2D(GT3, GT3, u, 6, 6, 3, 3, g);
        for (int k = 0; k < 9; k++) wstore(j->dw + (k * j->c + c) * j->o + o0, g[k], n);
    }
}

/* Blocked as the forward: G groups of blocks (fixed by the shape), each
 * summing its blocks' products into its own dU, added in group order. */
#define BF_GROUPS 4

static int64_t bf_groups(const sy_wino_shape *s) { return sy_min64(BF_GROUPS, block_count(s)); }

/* Workspace: blocked, G partial dU (36, C, O) and one block's V and dM per
 * thread; phased, dU, V (36, T, C) and dM (36, T, O). */
size_t sy_winograd_bwd_filter_ws(const sy_wino_shape *s, int threads) {
    int64_t T = tiles(s), n;
    if (blocked(s))
        n = bf_groups(s) * aligned(36 * s->c * s->o) +
            sy_min64(threads, bf_groups(s)) * aligned(36 * block_tiles(s) * (s->c + s->o));
    else n = aligned(36 * s->c * s->o) + aligned(36 * T * s->c) + aligned(36 * T * s->o);
    return (size_t)n * sizeof(float);
}

typedef struct bf_job {
    const sy_wino_shape *s;
    const float *x, *dy;
    float *du, *buf; /* G x (36, C, O); per-thread blocks */
    int64_t tb, blocks, groups, buf_floats;
} bf_job;

static void bf_thread(void *arg, int index, int count) {
    const bf_job *j = arg;
    const sy_wino_shape *s = j->s;
    int64_t g0, g1, T = tiles(s), C = s->c, O = s->o, tb = j->tb;
    sy_split_range(j->groups, index, count, &g0, &g1);
    float *v = j->buf + index * j->buf_floats, *dm = v + 36 * tb * C;
    for (int64_t g = g0; g < g1; g++) {
        int64_t b0, b1;
        sy_split_range(j->blocks, (int)g, (int)j->groups, &b0, &b1);
        float *du = j->du + g * aligned(36 * C * O);
        for (int64_t b = b0; b < b1; b++) {
            int64_t t0 = b * tb, t1 = sy_min64(T, t0 + tb);
            input_tiles(s, j->x, v, tb, t0, t1);
            dy_tiles(s, j->dy, dm, tb, t0, t1);
            for (int xi = 0; xi < 36; xi++)
                sy_sgemm(true, false, C, O, t1 - t0, 1.0f, v + xi * tb * C, C, dm + xi * tb * O, O, b == b0 ? 0.0f : 1.0f,
                         du + xi * C * O, O);
        }
    }
}

typedef struct sum_job {
    float *du;
    int64_t n, stride, groups;
} sum_job;

/* du[0] += du[1] + ... + du[G-1], position xi */
static void sum_part(void *ctx, int64_t xi) {
    const sum_job *j = ctx;
    float *d = j->du + xi * j->n;
    for (int64_t g = 1; g < j->groups; g++) {
        const float *p = d + g * j->stride;
        for (int64_t i = 0; i < j->n; i++) d[i] += p[i];
    }
}

void sy_winograd_bwd_filter(const sy_exec *ex, const sy_wino_shape *s, const float *x, const float *dy, float *dw,
                            float *ws) {
    int64_t T = tiles(s), C = s->c, O = s->o;
    float *du = ws;
    if (blocked(s)) {
        int64_t tb = block_tiles(s), groups = bf_groups(s);
        bf_job bj = {s, x, dy, du, du + groups * aligned(36 * C * O), tb, block_count(s), groups,
                     aligned(36 * tb * (C + O))};
        sy_exec_parallel(ex, (int)sy_min64(ex->threads, groups), bf_thread, &bj);
        sum_job sj = {du, C * O, aligned(36 * C * O), groups};
        sy_parallel_parts(ex, 36, sum_part, &sj);
    } else {
        float *v = du + aligned(36 * C * O), *dm = v + aligned(36 * T * C);
        int64_t parts = (T + TILES_PER_PART - 1) / TILES_PER_PART;
        input_job ij = {s, x, v, T};
        sy_parallel_parts(ex, parts, input_part, &ij);
        dy_job dj = {s, dy, dm, T};
        sy_parallel_parts(ex, parts, dy_part, &dj);
        gemm_job gj = {v, dm, du, C, O, T, true, false};
        sy_parallel_parts(ex, 36, gemm_part, &gj);
    }
    dw_job wj = {du, dw, C, O};
    sy_parallel_parts(ex, C, dw_part, &wj);
}
