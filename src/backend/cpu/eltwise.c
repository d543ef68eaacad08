/*
 * eltwise.c - elementwise work on the cpu backend: one small interpreter
 * for fused chains, which also runs every standalone elementwise op, and
 * the reductions.
 *
 * The interpreter walks the output in tiles of TILE floats. A register is a
 * pointer to one tile: a load of a full-size input just points into the
 * input (no copy), a row (bias) or scalar operand is expanded into a scratch
 * tile, and each arithmetic instruction is a plain loop over the tile that
 * GCC vectorises (the transcendentals use the branch-free sy_v* functions).
 * The last instruction writes straight into the output. A chain of k ops so
 * reads each input once and writes the output once, instead of k round trips
 * through memory.
 *
 * A standalone op (relu, add, bias_add, relu_grad, ...) is a two- or
 * three-instruction program built on the fly. Operands broadcast in other
 * ways than full/row/scalar run the reference kernel.
 *
 * Tiles are split over threads in parts fixed by the size; elementwise
 * results do not depend on the split anyway. Reductions keep one
 * accumulation order per output element whatever the thread count.
 *
 * bfloat16 storage (issue 16, mixed_bfloat16): any operand may be a 2-byte
 * bfloat16 buffer. A full-size one is widened into its register's scratch
 * tile as it is loaded, a row or scalar one as it is expanded; a bfloat16
 * output is computed into a scratch tile and rounded as it is stored, so
 * the numbers are those of float32 storage and the plan's rounding after
 * it. A bfloat16 sigmoid stores TensorFlow's bfloat16 sigmoid
 * (sy_bf16_sigmoid), as the plan applies after a float32 one.
 */
#include "cpu_internal.h"

#define TILE 512

/* ---- the activation op (issue 15, activations) ----------------------------
 * One loop per function, each a plain loop GCC vectorises (gelu's erff and
 * softplus's logf are library calls), following TensorFlow's float32 ops
 * (exp(x) - 1 for elu and selu, as its kernels compute it; softplus's
 * cut-offs). The formulas and the derivatives at kinks: sy_act_fn_ref. */

#define SELU_SCALE 1.05070098735548f
#define SELU_SCALE_ALPHA 1.75809934084738f
#define SOFTPLUS_CUT 13.9424f /* -(log(FLT_EPSILON) + 2): TensorFlow's threshold */

static void act_tile(const sy_act_params *p, const float *x, float *d, int64_t len) {
    const float a = p->a, b = p->b, c = p->c;
    int64_t t;
    switch ((sy_act_fn)p->fn) {
    case SY_AF_RELU:
        if (a != 0 && isinf(b) && c == 0) {
            for (t = 0; t < len; t++) d[t] = x[t] > 0 ? x[t] : x[t] * a;
            break;
        }
        for (t = 0; t < len; t++) {
            float v = x[t], y = c != 0 ? (v > c ? v : 0) : (v > 0 ? v : 0);
            if (!isinf(b)) y = y < 0 ? 0 : y > b ? b : y;
            float neg = c - v > 0 ? c - v : 0; /* relu(-x + c) */
            d[t] = a != 0 ? y - a * neg : y;
        }
        break;
    case SY_AF_ELU:
        for (t = 0; t < len; t++) d[t] = x[t] > 0 ? x[t] : a * (sy_vexpf(x[t]) - 1.0f);
        break;
    case SY_AF_SELU:
        for (t = 0; t < len; t++) d[t] = x[t] < 0 ? SELU_SCALE_ALPHA * (sy_vexpf(x[t]) - 1.0f) : SELU_SCALE * x[t];
        break;
    case SY_AF_GELU:
        for (t = 0; t < len; t++) d[t] = 0.5f * x[t] * (1.0f + erff(x[t] / 1.41421356237f));
        break;
    case SY_AF_SWISH:
        for (t = 0; t < len; t++) d[t] = x[t] * sy_vsigmoidf(x[t]);
        break;
    case SY_AF_SOFTPLUS:
        for (t = 0; t < len; t++) {
            float e = sy_vexpf(x[t]);
            d[t] = x[t] > SOFTPLUS_CUT ? x[t] : x[t] < -SOFTPLUS_CUT ? e : logf(e + 1.0f);
        }
        break;
    case SY_AF_SOFTSIGN:
        for (t = 0; t < len; t++) d[t] = x[t] / (1.0f + fabsf(x[t]));
        break;
    case SY_AF_HARD_SIGMOID:
        for (t = 0; t < len; t++) {
            float y = x[t] * 0.2f + 0.5f;
            d[t] = y < 0 ? 0 : y > 1 ? 1 : y;
        }
        break;
    case SY_AF_ABS:
        for (t = 0; t < len; t++) d[t] = fabsf(x[t]);
        break;
    default: SY_ASSERT(!"unknown activation function");
    }
}

/* d = dy * f'(x) */
static void act_grad_tile(const sy_act_params *p, const float *dy, const float *x, float *d, int64_t len) {
    const float a = p->a, b = p->b, c = p->c;
    int64_t t;
    switch ((sy_act_fn)p->fn) {
    case SY_AF_RELU:
        if (a != 0 && isinf(b) && c == 0) {
            for (t = 0; t < len; t++) d[t] = x[t] > 0 ? dy[t] : dy[t] * a;
            break;
        }
        for (t = 0; t < len; t++) {
            float v = x[t], pre = c != 0 ? (v > c ? v : 0) : (v > 0 ? v : 0);
            float g = (c != 0 ? v > c : v > 0) ? dy[t] : 0;
            if (b == 6 && c == 0) g = v > 0 && v < 6 ? dy[t] : 0; /* tf.nn.relu6 */
            else if (!isinf(b) && (pre < 0 || pre > b)) g = 0;
            d[t] = a != 0 && c - v > 0 ? g + a * dy[t] : g;
        }
        break;
    case SY_AF_ELU:
        for (t = 0; t < len; t++) d[t] = x[t] > 0 ? dy[t] : dy[t] * a * sy_vexpf(x[t]);
        break;
    case SY_AF_SELU:
        for (t = 0; t < len; t++) d[t] = x[t] < 0 ? dy[t] * (SELU_SCALE_ALPHA * sy_vexpf(x[t])) : dy[t] * SELU_SCALE;
        break;
    case SY_AF_GELU:
        for (t = 0; t < len; t++) {
            float v = x[t];
            d[t] = dy[t] * (0.5f * (1.0f + erff(v / 1.41421356237f)) + v * sy_vexpf(-0.5f * v * v) * 0.39894228040f);
        }
        break;
    case SY_AF_SWISH:
        for (t = 0; t < len; t++) {
            float s = sy_vsigmoidf(x[t]);
            d[t] = dy[t] * (s * (1.0f + x[t] * (1.0f - s)));
        }
        break;
    case SY_AF_SOFTPLUS:
        for (t = 0; t < len; t++) d[t] = dy[t] / (sy_vexpf(-x[t]) + 1.0f);
        break;
    case SY_AF_SOFTSIGN:
        for (t = 0; t < len; t++) {
            float q = 1.0f + fabsf(x[t]);
            d[t] = dy[t] / (q * q);
        }
        break;
    case SY_AF_HARD_SIGMOID:
        for (t = 0; t < len; t++) {
            float y = x[t] * 0.2f + 0.5f;
            d[t] = y >= 0 && y <= 1 ? dy[t] * 0.2f : 0;
        }
        break;
    case SY_AF_ABS:
        for (t = 0; t < len; t++) d[t] = x[t] > 0 ? dy[t] : x[t] < 0 ? -dy[t] : 0;
        break;
    default: SY_ASSERT(!"unknown activation function");
    }
}

typedef struct eltwise_job {
    const sy_eprog *prog;
    const sy_kargs *k;
    int64_t n, row;
} eltwise_job;

static void run_tile(const eltwise_job *j, int64_t start, int64_t len) {
    const sy_eprog *p = j->prog;
    const sy_kargs *k = j->k;
    float scratch[SY_FUSED_MAX_REGS][TILE] __attribute__((aligned(64)));
    const float *reg[SY_FUSED_MAX_REGS];
    bool out_bf16 = k->dtype == SY_BF16;
    float *out = out_bf16 ? NULL : (float *)k->out + start;
    for (int i = 0; i < p->n; i++) {
        const sy_einsn *e = &p->insn[i];
        const float *a = reg[e->a], *b = reg[e->b];
        float *d = i == p->n - 1 && out ? out : scratch[e->dst];
        bool in_bf16 = e->op <= SY_E_LD_SCALAR && k->in_dtype[e->a] == SY_BF16;
        int64_t t;
        switch ((sy_eop)e->op) {
        case SY_E_LD_FULL:
            if (in_bf16) { /* widened into the register's tile */
                sy_bf16_load_all(d, (const uint16_t *)k->in[e->a] + start, len);
                break;
            }
            reg[e->dst] = (const float *)k->in[e->a] + start;
            if (d == out && out != reg[e->dst]) /* (in place: the same floats) */
                memcpy(out, reg[e->dst], (size_t)len * sizeof *out);
            continue;
        case SY_E_LD_ROW: {
            const void *in = k->in[e->a];
            int64_t c = start % j->row;
            for (t = 0; t < len; t++) {
                d[t] = sy_ldf(in, c, in_bf16);
                if (++c == j->row) c = 0;
            }
            break;
        }
        case SY_E_LD_SCALAR: {
            float v = sy_ldf(k->in[e->a], 0, in_bf16);
            for (t = 0; t < len; t++) d[t] = v;
            break;
        }
        case SY_E_ADD: for (t = 0; t < len; t++) d[t] = a[t] + b[t]; break;
        case SY_E_SUB: for (t = 0; t < len; t++) d[t] = a[t] - b[t]; break;
        case SY_E_MUL: for (t = 0; t < len; t++) d[t] = a[t] * b[t]; break;
        case SY_E_DIV: for (t = 0; t < len; t++) d[t] = a[t] / b[t]; break;
        case SY_E_NEG: for (t = 0; t < len; t++) d[t] = -a[t]; break;
        case SY_E_RELU: for (t = 0; t < len; t++) d[t] = a[t] > 0 ? a[t] : 0; break;
        case SY_E_SIGMOID: for (t = 0; t < len; t++) d[t] = sy_vsigmoidf(a[t]); break;
        case SY_E_TANH: for (t = 0; t < len; t++) d[t] = sy_vtanhf(a[t]); break;
        case SY_E_EXP: for (t = 0; t < len; t++) d[t] = sy_vexpf(a[t]); break;
        case SY_E_LOG: for (t = 0; t < len; t++) d[t] = logf(a[t]); break;
        case SY_E_RELU_GRAD: for (t = 0; t < len; t++) d[t] = b[t] > 0 ? a[t] : 0; break;
        case SY_E_SIGMOID_GRAD: for (t = 0; t < len; t++) d[t] = a[t] * b[t] * (1 - b[t]); break;
        case SY_E_TANH_GRAD: for (t = 0; t < len; t++) d[t] = a[t] * (1 - b[t] * b[t]); break;
        case SY_E_ACT: act_tile(&p->act[i], a, d, len); break;
        case SY_E_ACT_GRAD: act_grad_tile(&p->act[i], a, b, d, len); break;
        default: SY_ASSERT(!"unknown elementwise instruction");
        }
        reg[e->dst] = d;
    }
    if (!out_bf16) return;
    uint16_t *o = (uint16_t *)k->out + start;
    if (k->op == SY_OP_SIGMOID) { /* TensorFlow's bfloat16 sigmoid of the input (its register 0) */
        sy_bf16_sigmoid(scratch[p->out], reg[0], len);
        sy_bf16_store_all(o, scratch[p->out], len);
    } else {
        sy_bf16_store_all(o, reg[p->out], len);
    }
}

#define TILES_PER_PART 32

static void eltwise_part(void *ctx, int64_t part) {
    const eltwise_job *j = ctx;
    int64_t begin = part * TILES_PER_PART * TILE, end = sy_min64(j->n, begin + TILES_PER_PART * TILE);
    for (int64_t s = begin; s < end; s += TILE) run_tile(j, s, sy_min64(TILE, end - s));
}

static void run_program(const sy_kargs *k, const sy_eprog *p) {
    eltwise_job j = {p, k, sy_shape_count(k->out_shape), 1};
    if (k->out_shape->rank) j.row = k->out_shape->dims[k->out_shape->rank - 1];
    if (j.row < 1) j.row = 1;
    int64_t parts = (j.n + TILES_PER_PART * TILE - 1) / (TILES_PER_PART * TILE);
    sy_parallel_parts(k->ex, parts, eltwise_part, &j);
}

static void fused_eltwise_fwd_f32_fast(const sy_kargs *k) { run_program(k, k->attr->fused); }

/* How input i is read: full, row or scalar; -1 for other broadcasts. */
static int operand_kind(const sy_kargs *k, int i) {
    const sy_shape *s = &k->in_shape[i], *o = k->out_shape;
    if (sy_shape_equal(s, o)) return SY_E_LD_FULL;
    int64_t n = sy_shape_count(s);
    if (n == 1) return SY_E_LD_SCALAR;
    if (o->rank >= 1 && s->rank >= 1 && s->rank <= o->rank && s->dims[s->rank - 1] == o->dims[o->rank - 1] &&
        n == s->dims[s->rank - 1])
        return SY_E_LD_ROW;
    return -1;
}

static sy_eop eop_of(sy_op op) {
    switch (op) {
    case SY_OP_NEG: return SY_E_NEG;
    case SY_OP_RELU: return SY_E_RELU;
    case SY_OP_SIGMOID: return SY_E_SIGMOID;
    case SY_OP_TANH: return SY_E_TANH;
    case SY_OP_EXP: return SY_E_EXP;
    case SY_OP_LOG: return SY_E_LOG;
    case SY_OP_ADD: return SY_E_ADD;
    case SY_OP_BIAS_ADD: return SY_E_ADD;
    case SY_OP_SUB: return SY_E_SUB;
    case SY_OP_MUL: return SY_E_MUL;
    case SY_OP_DIV: return SY_E_DIV;
    case SY_OP_RELU_GRAD: return SY_E_RELU_GRAD;
    case SY_OP_SIGMOID_GRAD: return SY_E_SIGMOID_GRAD;
    case SY_OP_ACT: return SY_E_ACT;
    case SY_OP_ACT_GRAD: return SY_E_ACT_GRAD;
    default: return SY_E_TANH_GRAD;
    }
}

/* One op as a program: load each operand, apply. */
static void single_op_f32_fast(const sy_kargs *k) {
    sy_eprog p;
    p.n = 0;
    for (int i = 0; i < k->n_in; i++) {
        int kind = operand_kind(k, i);
        if (kind < 0) { /* a broadcast the interpreter does not read */
            if (k->n_in == 2 && (k->op == SY_OP_ADD || k->op == SY_OP_SUB || k->op == SY_OP_MUL || k->op == SY_OP_DIV))
                sy_cpu_bcast_binary(k); /* broadcast.c (issue 15) */
            else
                sy_ref_kernel(k->op, SY_F32)->run(k);
            return;
        }
        p.insn[p.n++] = (sy_einsn){(uint8_t)kind, (uint8_t)i, (uint8_t)i, 0};
    }
    if (k->op == SY_OP_ACT || k->op == SY_OP_ACT_GRAD) p.act[p.n] = k->attr->act;
    p.insn[p.n++] = (sy_einsn){(uint8_t)eop_of(k->op), (uint8_t)k->n_in, 0, (uint8_t)(k->n_in > 1 ? 1 : 0)};
    p.out = k->n_in;
    run_program(k, &p);
}

/* ---- reductions over a contiguous run of axes: (outer, R, inner) -> (outer, inner) ---- */

typedef struct reduce_job {
    const void *x;
    void *y;
    int64_t outer, red, inner, blocks;
    float scale;
    bool xb, yb; /* issue 16: x or y stored as bfloat16 */
    float bf16_count; /* issue 16: a mean in TensorFlow's bfloat16 arithmetic (attr reduce.bf16_seq):
                         the count rounded to bfloat16; 0: not one */
} reduce_job;

#define REDUCE_COLS 256 /* inner elements per part */

/* xb, yb constants at each call: the float32 loops, or the same on widened values with a rounded
 * store */
static inline __attribute__((always_inline)) void reduce_block(const reduce_job *j, int64_t part,
                                                               bool xb, bool yb) {
    int64_t o = part / j->blocks, c0 = (part % j->blocks) * REDUCE_COLS, c1 = sy_min64(j->inner, c0 + REDUCE_COLS);
    int64_t x = o * j->red * j->inner, y = o * j->inner;
    if (j->inner == 1) {
        /* a row sum: 16 interleaved partial sums, combined in a fixed order */
        float acc[16] = {0};
        int64_t r = 0;
        for (; r + 16 <= j->red; r += 16)
            for (int q = 0; q < 16; q++) acc[q] += sy_ldf(j->x, x + r + q, xb);
        float s = 0;
        for (int q = 0; q < 16; q++) s += acc[q];
        for (; r < j->red; r++) s += sy_ldf(j->x, x + r, xb);
        sy_stf(j->y, y, s * j->scale, yb);
        return;
    }
    float acc[REDUCE_COLS];
    for (int64_t c = c0; c < c1; c++) acc[c - c0] = 0;
    if (j->bf16_count != 0) { /* one sum after the other, each rounded, as TensorFlow's bfloat16 mean */
        for (int64_t r = 0; r < j->red; r++)
            for (int64_t c = c0; c < c1; c++)
                acc[c - c0] = sy_bf16_round(acc[c - c0] + sy_ldf(j->x, x + r * j->inner + c, xb));
        for (int64_t c = c0; c < c1; c++) sy_stf(j->y, y + c, sy_bf16_round(acc[c - c0] / j->bf16_count), yb);
        return;
    }
    for (int64_t r = 0; r < j->red; r++) {
        int64_t xr = x + r * j->inner;
        for (int64_t c = c0; c < c1; c++) acc[c - c0] += sy_ldf(j->x, xr + c, xb);
    }
    for (int64_t c = c0; c < c1; c++) sy_stf(j->y, y + c, acc[c - c0] * j->scale, yb);
}

static void reduce_part(void *ctx, int64_t part) {
    const reduce_job *j = ctx;
    if (!j->xb && !j->yb)
        reduce_block(j, part, false, false);
    else if (j->xb && !j->yb)
        reduce_block(j, part, true, false); /* a bias's gradient */
    else
        reduce_block(j, part, j->xb, j->yb);
}

static void reduce_f32_fast(const sy_kargs *k) {
    const sy_shape *s = &k->in_shape[0];
    uint32_t axes = k->attr->reduce.axes;
    int first = -1, last = -1;
    for (int d = 0; d < s->rank; d++)
        if (axes & (1u << d)) {
            if (first < 0) first = d;
            last = d;
        }
    for (int d = first; first >= 0 && d <= last; d++)
        if (!(axes & (1u << d))) { /* not one contiguous run */
            sy_ref_kernel(k->op, SY_F32)->run(k);
            return;
        }
    reduce_job j = {k->in[0], k->out, 1, 1, 1, 1, 1.0f, k->in_dtype[0] == SY_BF16, k->dtype == SY_BF16, 0};
    for (int d = 0; d < s->rank; d++) {
        if (first >= 0 && d < first) j.outer *= s->dims[d];
        else if (first >= 0 && d <= last) j.red *= s->dims[d];
        else j.inner *= s->dims[d];
    }
    if (first < 0) j.outer = 1; /* no axes: a copy */
    if (k->op == SY_OP_REDUCE_MEAN && j.red) j.scale = 1.0f / (float)j.red;
    if (k->attr->reduce.bf16_seq && j.red) j.bf16_count = sy_bf16_round((float)j.red);
    j.blocks = (j.inner + REDUCE_COLS - 1) / REDUCE_COLS;
    sy_parallel_parts(k->ex, j.outer * j.blocks, reduce_part, &j);
}

/* issue 16, bfloat16 storage: every operand the interpreter loads, and its output; not the
 * broadcasts it leaves to broadcast.c or ref */
static uint32_t program_bf16_io(const sy_kargs *k) {
    (void)k;
    return SY_BF16_OUT | (SY_BF16_OUT - 1);
}
static uint32_t single_op_bf16_io(const sy_kargs *k) {
    for (int i = 0; i < k->n_in; i++)
        if (operand_kind(k, i) < 0) return 0;
    return program_bf16_io(k);
}

const sy_kernel sy_cpu_fused_eltwise = {fused_eltwise_fwd_f32_fast, NULL, program_bf16_io};
const sy_kernel sy_cpu_unary = {single_op_f32_fast, NULL, single_op_bf16_io};
const sy_kernel sy_cpu_binary = {single_op_f32_fast, NULL, single_op_bf16_io};
const sy_kernel sy_cpu_bias_add = {single_op_f32_fast, NULL, single_op_bf16_io};
const sy_kernel sy_cpu_eltwise_grad = {single_op_f32_fast, NULL, single_op_bf16_io};
/* issue 16, bfloat16 storage: over one contiguous run of axes (the others go to ref) */
static uint32_t reduce_bf16_io(const sy_kargs *k) {
    uint32_t axes = k->attr->reduce.axes;
    while (axes && !(axes & 1)) axes >>= 1;
    return (axes & (axes + 1)) == 0 ? SY_BF16_IN(0) | SY_BF16_OUT : 0;
}

const sy_kernel sy_cpu_reduce_sum = {reduce_f32_fast, NULL, reduce_bf16_io};
const sy_kernel sy_cpu_reduce_mean = {reduce_f32_fast, NULL, reduce_bf16_io};
