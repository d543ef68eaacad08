/*
 * tpu1.c - the TPU v1 emulator (issue 18): executes a TPU v1 program (tpu1.h)
 * on the paper's machine (Jouppi et al., ISCA 2017; docs/design/tpu-v1.md),
 * computing its outputs and the counters of the paper's Table 3.
 *
 * Values. Each instruction runs in program order on a 24 MiB unified
 * buffer (UB), 4,096 x 256 int32 accumulators, the weight tile held by the
 * array, and host memory. MatrixMultiply adds x[k] * w[k][n] over a tile's
 * 256 inputs into an accumulator row per UB row; Convolve gathers its UB
 * row as an im2col row (tpu1.h); Activate adds the bias, requantizes with
 * sy_q_requantize, clamps, pools and applies a requantizing activation:
 * the integer steps of sy_qgemm_i8_ref and of TFLite's reference pooling
 * and activation kernels, so the outputs equal theirs bit for bit. (The
 * input zero point is folded into the bias by the compiler, bias - x_zp *
 * sum_k w[c][k], and padding reads x_zp: the same sums, as TFLite's
 * optimized kernels do.)
 *
 * Time. Four units -- the host interface (PCIe), the weight fetcher (DDR3
 * -> weight FIFO), the matrix unit, the activation unit -- each take their
 * instructions in order (the paper's four-stage CISC pipeline:
 * instructions overlap across units). Issue is in order, one instruction a
 * cycle, and an instruction waits at issue until the previous one of its
 * unit has started (one slot per unit), so a stalled unit holds up what
 * follows it; Sync holds issue until everything issued before has
 * finished (the explicit synchronisation after Activate). Read_Weights
 * completes once it has sent its addresses (decoupled access/execute):
 * DDR3 then fetches its tiles one after another at 34 GB/s (1,349 cycles
 * a tile), each into a FIFO slot, four slots, a slot freed when its tile
 * starts shifting into the array. A shift takes 256 cycles and starts once
 * the tile has arrived and the array's shadow buffer is free (the tile
 * before has started multiplying: double buffering). A MatrixMultiply of
 * R rows keeps the array busy R cycles; its sums leave the array 511 cycles
 * (256 + 255, the systolic drain) after its last row, and an Activate of
 * those accumulators starts no earlier and reads one row a cycle. A
 * MatrixMultiply waits for the Read_Host_Memory writing the rows it reads,
 * and for an Activate still reading the accumulators it overwrites.
 *
 * Counters. Every cycle of the run is one of: array active (the matrix
 * unit multiplying), weight stall (waiting for a tile from DDR3), weight
 * shift (waiting for a tile to shift in), non-matrix (anything else). The
 * idle gap before a MatrixMultiply is split in the order its conditions
 * clear: issue (a raw stall when a Sync held it, an input stall when a
 * host transfer ahead of it in the pipeline did, else non-matrix), a busy
 * accumulator, its input from the host (an input stall), the tile's
 * arrival (weight stall), its shift (weight shift). Useful MACs count the
 * tile's used rows x columns per row; the rest of the 65,536 are unused.
 */
#include "../backend_internal.h"
#include "tpu1.h"

#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

static const sy_tpu1_machine machine = {
    .mxu_rows = 256,
    .mxu_cols = 256,
    .clock_hz = 700e6,
    .peak_ops = 2.0 * 65536 * 700e6,
    .unified_buffer_bytes = (int64_t)SY_TPU1_UB_ROWS * SY_TPU1_ROW,
    .accumulators = SY_TPU1_ACC_ROWS,
    .weight_fifo_tiles = SY_TPU1_FIFO_TILES,
    .ddr_bytes = 8 * GIB,
    .ddr_bytes_per_s = 34e9,
    .pcie_bytes_per_s = 14 * GIB,
    .shift_cycles = 256,
    .drain_cycles = 511,
    .ridge_macs_per_byte = 65536 * 700e6 / 34e9,
};

const sy_tpu1_machine *sy_tpu1_machine_get(void) { return &machine; }

void sy_tpu1_prog_free(sy_tpu1_prog *p) {
    if (!p) return;
    for (int32_t i = 0; p->acts && i < p->n_acts; i++) {
        sy_free(p->acts[i].bias);
        sy_free(p->acts[i].mult);
        sy_free(p->acts[i].shift);
    }
    sy_free(p->acts);
    sy_free(p->convs);
    sy_free(p->insns);
    sy_free(p->weights);
    sy_free(p->tile_used);
    sy_free(p);
}

/* ---- values ------------------------------------------------------------------------------------ */

typedef struct state {
    const sy_tpu1_prog *p;
    int8_t *ub;       /* (ub_rows, 256) */
    int32_t *acc;     /* (rows the program touches <= 4096, 256) */
    int8_t *host;     /* (host_bytes) */
    int64_t *fifo;    /* requested tiles, in order */
    int64_t n_req, n_pop;
    int64_t tile;     /* the array's tile, -1 before the first */
    const sy_tpu1_conv *conv;
    uint32_t first;   /* SetConv's first output position */
} state;

/* x (256) gathered for output position pos of a Convolve: im2col indices kb*256 .. + 255 */
static void gather(const state *s, const sy_tpu1_insn *in, int64_t pos, int32_t k_used, int8_t *x) {
    const sy_tpu1_conv *g = s->conv;
    int64_t plane = (int64_t)g->n * g->h * g->w;
    int64_t img = pos / ((int64_t)g->oh * g->ow), y = pos / g->ow % g->oh, xo = pos % g->ow;
    memset(x, 0, SY_TPU1_ROW);
    for (int32_t kk = 0; kk < k_used; kk++) {
        int64_t k = (int64_t)in->kblock * SY_TPU1_ROW + kk, ch = k % g->c, tap = k / g->c;
        int64_t iy = y * g->sh - g->pt + tap / g->kw, ix = xo * g->sw - g->pl + tap % g->kw;
        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) {
            x[kk] = (int8_t)g->in_zp;
            continue;
        }
        int64_t row = in->ub + ch / SY_TPU1_ROW * plane + (img * g->h + iy) * g->w + ix;
        x[kk] = s->ub[row * SY_TPU1_ROW + ch % SY_TPU1_ROW];
    }
}

static void matmul(state *s, const sy_tpu1_insn *in) {
    if (in->flags & SY_TPU1_F_LOAD) s->tile = s->fifo[s->n_pop++];
    const uint8_t *wt = s->p->weights + s->tile * (int64_t)SY_TPU1_TILE_BYTES;
    int32_t k_used = s->p->tile_used[2 * s->tile], n_used = s->p->tile_used[2 * s->tile + 1];
    bool conv = in->op == SY_TPU1_CONVOLVE;
    int8_t xbuf[SY_TPU1_ROW];
    for (uint32_t r = 0; r < in->rows; r++) {
        int32_t *a = s->acc + (int64_t)(in->acc + r) * SY_TPU1_ROW;
        if (!(in->flags & SY_TPU1_F_ACCUMULATE)) memset(a, 0, SY_TPU1_ROW * sizeof *a);
        const int8_t *x;
        if (conv) {
            gather(s, in, (int64_t)s->first + r, k_used, xbuf);
            x = xbuf;
        } else {
            x = s->ub + (int64_t)(in->ub + r) * SY_TPU1_ROW;
        }
        for (int32_t k = 0; k < k_used; k++) {
            int32_t xk = x[k];
            if (!xk) continue;
            const int8_t *w = (const int8_t *)wt + k * SY_TPU1_ROW;
            /* wrapping, as int32 hardware does: a valid program's sums never reach it, a hostile one is no UB */
            for (int32_t n = 0; n < n_used; n++) a[n] = (int32_t)((uint32_t)a[n] + (uint32_t)(xk * (int32_t)w[n]));
        }
    }
}

static int32_t clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static int32_t post(const sy_tpu1_act *d, int32_t v) {
    if (!d->post) return v;
    v = d->post_out_zp + sy_q_requantize(v - d->post_in_zp, d->post_mult, d->post_shift);
    return clamp(v, d->post_min, d->post_max);
}

static int32_t requant(const sy_tpu1_act *d, int32_t acc, int32_t c) {
    int32_t v = sy_q_requantize((int32_t)((uint32_t)acc + (uint32_t)d->bias[c]), d->mult[c], d->shift[c]);
    v = (int32_t)((uint32_t)v + (uint32_t)d->out_zp);
    return clamp(v, d->act_min, d->act_max);
}

static void activate(state *s, const sy_tpu1_insn *in) {
    const sy_tpu1_act *d = &s->p->acts[in->index];
    int32_t c0 = (int32_t)in->cblock * SY_TPU1_ROW, lanes = d->channels - c0 < SY_TPU1_ROW ? d->channels - c0 : SY_TPU1_ROW;
    const int32_t *acc = s->acc + (int64_t)in->acc * SY_TPU1_ROW;
    int8_t *ub = s->ub + (int64_t)in->ub * SY_TPU1_ROW;
    if (d->pool == SY_TPU1_POOL_NONE) {
        for (uint32_t r = 0; r < in->rows; r++)
            for (int32_t l = 0; l < lanes; l++)
                ub[(int64_t)r * SY_TPU1_ROW + l] = (int8_t)post(d, requant(d, acc[(int64_t)r * SY_TPU1_ROW + l], c0 + l));
        return;
    }
    int64_t per = (int64_t)d->oh * d->ow, images = in->rows / per;
    for (int64_t img = 0; img < images; img++)
        for (int32_t py = 0; py < d->ph; py++)
            for (int32_t px = 0; px < d->pw; px++)
                for (int32_t l = 0; l < lanes; l++) {
                    int32_t m = -128, sum = 0, count = 0;
                    for (int32_t i = 0; i < d->pkh; i++)
                        for (int32_t j = 0; j < d->pkw; j++) {
                            int64_t row = img * per + (int64_t)(py * d->psh + i) * d->ow + px * d->psw + j;
                            int32_t v = requant(d, acc[row * SY_TPU1_ROW + l], c0 + l);
                            m = v > m ? v : m;
                            sum += v;
                            count++;
                        }
                    int32_t v = m;
                    if (d->pool == SY_TPU1_POOL_AVG) /* TFLite's reference_integer_ops::AveragePool */
                        v = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    v = clamp(v, d->pool_min, d->pool_max);
                    ub[((img * d->ph + py) * d->pw + px) * SY_TPU1_ROW + l] = (int8_t)post(d, v);
                }
}

static void host_move(state *s, const sy_tpu1_insn *in) {
    for (uint32_t r = 0; r < in->rows; r++) {
        int8_t *u = s->ub + (int64_t)(in->ub + r) * SY_TPU1_ROW;
        int8_t *h = s->host + in->host + (int64_t)r * in->host_stride;
        if (in->op == SY_TPU1_READ_HOST) memcpy(u, h, in->row_bytes);
        else memcpy(h, u, in->row_bytes);
    }
}

/* ---- time -------------------------------------------------------------------------------------- */

enum { U_HOST, U_WEIGHTS, U_MXU, U_ACT, U_N };
enum { H_NONE, H_SYNC, H_HOST, H_OTHER };

typedef struct host_read {
    uint32_t lo, hi;
    double end;
} host_read;

typedef struct timing {
    double tile_cycles, byte_cycles;
    double issue, sync_until, end;
    int why; /* what set the last issue time (H_...) */
    double unit_start[U_N];
    double host_free, mxu_free, act_free, ddr_free;
    double *req, *arrive, *shift_start, *shift_end, *use; /* per tile in FIFO order */
    int64_t n_arrived;
    double *acc_ready, *acc_busy;                          /* (4096) */
    host_read *reads;
    int64_t n_reads;
} timing;

static double maxd(double a, double b) { return a > b ? a : b; }

/* DDR3 fetches the tiles up to i in order, each once a FIFO slot is free. */
static double arrival(timing *t, int64_t i) {
    for (; t->n_arrived <= i; t->n_arrived++) {
        int64_t k = t->n_arrived;
        double start = maxd(t->ddr_free, t->req[k]);
        if (k >= SY_TPU1_FIFO_TILES) start = maxd(start, t->shift_start[k - SY_TPU1_FIFO_TILES]);
        t->arrive[k] = t->ddr_free = start + t->tile_cycles;
    }
    return t->arrive[i];
}

/* Blame the gap's cycles from *cursor up to `until` (capped at start) on *counter. */
static void blame(double *cursor, double until, double start, double *counter) {
    double to = until < start ? until : start;
    if (to > *cursor) {
        if (counter) *counter += to - *cursor;
        *cursor = to;
    }
}

static void time_matmul(timing *t, state *s, const sy_tpu1_insn *in, double ti, int why, sy_tpu1_counters *c) {
    double start = maxd(ti, t->mxu_free), war = 0, input = 0, arr = 0, se = 0;
    for (uint32_t r = in->acc; r < in->acc + in->rows; r++) war = maxd(war, t->acc_busy[r]);
    uint32_t lo = in->ub, hi = in->ub + in->rows;
    if (in->op == SY_TPU1_CONVOLVE) { /* its gather reads the whole input */
        const sy_tpu1_conv *g = s->conv;
        hi = in->ub + (uint32_t)(((int64_t)g->c + 255) / 256 * g->n * g->h * g->w);
    }
    for (int64_t i = 0; i < t->n_reads; i++)
        if (t->reads[i].lo < hi && lo < t->reads[i].hi) input = maxd(input, t->reads[i].end);
    int64_t k = s->n_pop; /* matmul() pops after */
    if (in->flags & SY_TPU1_F_LOAD) {
        arr = arrival(t, k);
        double ss = arr;
        if (k > 0) ss = maxd(ss, maxd(t->shift_end[k - 1], t->use[k - 1]));
        t->shift_start[k] = ss;
        se = t->shift_end[k] = ss + 256;
    }
    start = maxd(start, maxd(maxd(war, input), se));
    if (in->flags & SY_TPU1_F_LOAD) t->use[k] = start;
    double cursor = t->mxu_free;
    blame(&cursor, ti, start, why == H_SYNC ? &c->raw_stall_cycles : why == H_HOST ? &c->input_stall_cycles : NULL);
    blame(&cursor, war, start, NULL);
    blame(&cursor, input, start, &c->input_stall_cycles);
    blame(&cursor, arr, start, &c->weight_stall_cycles);
    blame(&cursor, se, start, &c->weight_shift_cycles);
    double end = start + in->rows;
    t->mxu_free = end;
    t->unit_start[U_MXU] = start;
    for (uint32_t r = in->acc; r < in->acc + in->rows; r++) t->acc_ready[r] = end + 511;
    c->array_active_cycles += in->rows;
    int64_t tile = (in->flags & SY_TPU1_F_LOAD) ? s->fifo[k] : s->tile;
    double used = (double)s->p->tile_used[2 * tile] * s->p->tile_used[2 * tile + 1];
    c->useful_macs += used * in->rows;
    c->unused_macs += (65536.0 - used) * in->rows;
    c->matrix_rows += in->rows;
    t->end = maxd(t->end, end);
}

/* Issue time of the next instruction on unit u (-1: none): in order, one a cycle, after the unit's previous one has
 * started and after a Sync's wait. *why: what set it -- a Sync (H_SYNC), a host transfer ahead of it in the
 * pipeline (H_HOST), another unit (H_OTHER) -- inherited from the instruction before when that one's issue set it. */
static double issue(timing *t, int u, int *why) {
    double ti = t->issue + 1;
    if (t->sync_until > ti) {
        ti = t->sync_until;
        t->why = H_SYNC;
    }
    if (u >= 0 && t->unit_start[u] > ti) {
        ti = t->unit_start[u];
        t->why = u == U_HOST ? H_HOST : H_OTHER;
    }
    t->issue = ti;
    *why = t->why;
    return ti;
}

static void step(timing *t, state *s, const sy_tpu1_insn *in, sy_tpu1_counters *c) {
    int held = H_NONE;
    double ti;
    switch (in->op) {
    case SY_TPU1_READ_HOST:
    case SY_TPU1_WRITE_HOST: {
        ti = issue(t, U_HOST, &held);
        double start = maxd(ti, t->host_free), bytes = (double)in->rows * in->row_bytes;
        double end = start + bytes * t->byte_cycles;
        t->unit_start[U_HOST] = start;
        t->host_free = end;
        t->end = maxd(t->end, end);
        c->host_bytes += bytes;
        if (in->op == SY_TPU1_READ_HOST)
            t->reads[t->n_reads++] = (host_read){in->ub, in->ub + in->rows, end};
        break;
    }
    case SY_TPU1_READ_WEIGHTS:
        ti = issue(t, U_WEIGHTS, &held);
        t->unit_start[U_WEIGHTS] = ti;
        for (uint32_t i = 0; i < in->rows; i++) t->req[s->n_req + i] = ti;
        c->weight_tiles += in->rows;
        c->weight_bytes += (double)in->rows * SY_TPU1_TILE_BYTES;
        break;
    case SY_TPU1_MATMUL:
    case SY_TPU1_CONVOLVE:
        ti = issue(t, U_MXU, &held);
        time_matmul(t, s, in, ti, held, c);
        break;
    case SY_TPU1_ACTIVATE: {
        ti = issue(t, U_ACT, &held);
        double start = maxd(ti, t->act_free);
        for (uint32_t r = in->acc; r < in->acc + in->rows; r++) start = maxd(start, t->acc_ready[r]);
        double end = start + in->rows;
        t->unit_start[U_ACT] = start;
        t->act_free = end;
        for (uint32_t r = in->acc; r < in->acc + in->rows; r++) t->acc_busy[r] = end;
        t->end = maxd(t->end, end);
        break;
    }
    case SY_TPU1_SYNC:
        ti = issue(t, -1, &held);
        t->sync_until = maxd(maxd(ti, t->host_free), maxd(t->mxu_free, t->act_free));
        break;
    default: /* SetConv, Halt */
        ti = issue(t, -1, &held);
        break;
    }
    t->end = maxd(t->end, ti);
}

sy_status sy_tpu1_execute(const sy_tpu1_prog *p, const int8_t *input, int8_t *output, sy_tpu1_counters *c) {
    memset(c, 0, sizeof *c);
    bool values = input && output;
    int64_t tiles = 0, acc_rows = 1; /* the accumulators the program touches: small programs need not zero 4 MiB */
    for (int32_t i = 0; i < p->n_insns; i++) {
        const sy_tpu1_insn *in = &p->insns[i];
        if (in->op == SY_TPU1_READ_WEIGHTS) tiles += in->rows;
        if ((in->op == SY_TPU1_MATMUL || in->op == SY_TPU1_CONVOLVE || in->op == SY_TPU1_ACTIVATE) &&
            (int64_t)in->acc + in->rows > acc_rows)
            acc_rows = (int64_t)in->acc + in->rows;
    }
    state s = {.p = p, .tile = -1};
    timing t = {.tile_cycles = SY_TPU1_TILE_BYTES / machine.ddr_bytes_per_s * machine.clock_hz,
                .byte_cycles = machine.clock_hz / machine.pcie_bytes_per_s,
                .issue = -1};
    size_t nt = (size_t)(tiles > 0 ? tiles : 1);
    s.fifo = sy_malloc(nt * sizeof *s.fifo);
    t.req = sy_malloc(nt * sizeof(double));
    t.arrive = sy_malloc(nt * sizeof(double));
    t.shift_start = sy_malloc(nt * sizeof(double));
    t.shift_end = sy_malloc(nt * sizeof(double));
    t.use = sy_malloc(nt * sizeof(double));
    t.acc_ready = sy_calloc(SY_TPU1_ACC_ROWS, sizeof(double));
    t.acc_busy = sy_calloc(SY_TPU1_ACC_ROWS, sizeof(double));
    t.reads = sy_malloc((size_t)(p->n_insns > 0 ? p->n_insns : 1) * sizeof *t.reads);
    if (values) {
        s.ub = sy_calloc((size_t)(p->ub_rows > 0 ? p->ub_rows : 1), SY_TPU1_ROW);
        s.acc = sy_calloc((size_t)acc_rows, SY_TPU1_ROW * sizeof(int32_t));
        s.host = sy_calloc(p->host_bytes > 0 ? p->host_bytes : 1, 1);
    }
    sy_status st = SY_OK;
    if (!s.fifo || !t.req || !t.arrive || !t.shift_start || !t.shift_end || !t.use || !t.acc_ready || !t.acc_busy ||
        !t.reads || (values && (!s.ub || !s.acc || !s.host))) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1: out of memory for the emulated machine");
        goto done;
    }
    if (values)
        memcpy(s.host + p->input.offset, input,
               (size_t)p->input.n * p->input.h * p->input.w * p->input.c);
    for (int32_t i = 0; i < p->n_insns; i++) {
        const sy_tpu1_insn *in = &p->insns[i];
        c->instructions++;
        if (in->op == SY_TPU1_HALT) {
            step(&t, &s, in, c);
            break;
        }
        if (in->op == SY_TPU1_SET_CONV) {
            s.conv = &p->convs[in->index];
            s.first = in->first;
        }
        step(&t, &s, in, c);
        switch (in->op) {
        case SY_TPU1_READ_WEIGHTS:
            for (uint32_t k = 0; k < in->rows; k++) s.fifo[s.n_req++] = (int64_t)in->tile + k;
            break;
        case SY_TPU1_MATMUL:
        case SY_TPU1_CONVOLVE:
            if (values) {
                matmul(&s, in);
            } else if (in->flags & SY_TPU1_F_LOAD) {
                s.tile = s.fifo[s.n_pop++];
            }
            break;
        case SY_TPU1_ACTIVATE:
            if (values) activate(&s, in);
            break;
        case SY_TPU1_READ_HOST:
        case SY_TPU1_WRITE_HOST:
            if (values) host_move(&s, in);
            break;
        default:
            break;
        }
    }
    c->cycles = t.end;
    /* the cycles the matrix unit was not multiplying nor waiting for weights, including after its last row */
    c->non_matrix_cycles = c->cycles - c->array_active_cycles - c->weight_stall_cycles - c->weight_shift_cycles;
    c->seconds = c->cycles / machine.clock_hz;
    c->tops = c->seconds > 0 ? 2 * c->useful_macs / c->seconds / 1e12 : 0;
    if (values)
        memcpy(output, s.host + p->output.offset, (size_t)p->output.n * p->output.h * p->output.w * p->output.c);
done:
    sy_free(s.fifo);
    sy_free(s.ub);
    sy_free(s.acc);
    sy_free(s.host);
    sy_free(t.req);
    sy_free(t.arrive);
    sy_free(t.shift_start);
    sy_free(t.shift_end);
    sy_free(t.use);
    sy_free(t.acc_ready);
    sy_free(t.acc_busy);
    sy_free(t.reads);
    return st;
}
