/*
 * test_tpu1.c - the TPU v1 (issue 18; docs/design/tpu-v1.md): its program
 * encoding and files (src/io/tpu1_program.c), the emulator's values and
 * cycles (src/backend/sim/tpu1.c), the lowering (src/lite/tpu1_lower.c) and
 * the paper's workloads against Table 3 of Jouppi et al. (ISCA 2017).
 *
 *   - MatrixMultiply is the paper's 12 bytes, each field where it puts it
 *   - a program written, read and written again gives the same bytes; its
 *     disassembly names each instruction
 *   - the loader refuses every truncation, a bad opcode, addresses past the
 *     unified buffer, the accumulators, DDR3 and host memory, a tile taken
 *     before it was read, and a program needing more than 24 MiB of
 *     unified buffer (with both sizes) -- with the byte offset
 *   - hand-worked cycle counts of tiny programs: a tile's fetch and shift,
 *     a shift hidden under the previous tile's multiply, Activate after the
 *     drain, a Sync's RAW stall, a Read_Host_Memory's input stall
 *   - lowered fully connected layers and convolutions (tiled, padded,
 *     strided, pooled) compute what sy_qgemm_i8_ref and TFLite's pooling do
 *   - MLP0, MLP1 and CNN0 shaped workloads reach Table 3's TOPS within 20%
 *     and weight-stall share within 10 points; the roofline's ridge is
 *     65,536 MACs x 700 MHz / 34 GB/s and shows in a batch sweep
 */
#include "backend/cpu/cpu_internal.h"
#include "io/io_internal.h"
#include "io/tpu1_program.h"
#include "lite/lite_internal.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define TILE_CYCLES (65536 / 34e9 * 700e6) /* 1,349.27: a tile over DDR3 */

/* A program of the given instructions (Halt appended) with `tiles` weight tiles of value 1 fully used,
 * input (1, 1, 1, in_c) and output (1, 1, 1, 1), and one activation descriptor of 256 channels. */
static sy_tpu1_prog *make(const sy_tpu1_insn *insns, int32_t n, uint32_t tiles, uint32_t ub_rows, int32_t in_c) {
    sy_tpu1_prog *p = sy_calloc(1, sizeof *p);
    p->insns = sy_calloc((size_t)n + 1, sizeof *p->insns);
    memcpy(p->insns, insns, (size_t)n * sizeof *insns);
    p->insns[n] = (sy_tpu1_insn){.op = SY_TPU1_HALT};
    p->n_insns = n + 1;
    p->n_tiles = tiles;
    p->weights = sy_malloc((size_t)tiles * SY_TPU1_TILE_BYTES + 1);
    memset(p->weights, 1, (size_t)tiles * SY_TPU1_TILE_BYTES);
    p->tile_used = sy_malloc((size_t)tiles * 4 + 1);
    for (uint32_t i = 0; i < 2 * tiles; i++) p->tile_used[i] = 256;
    p->ub_rows = ub_rows;
    p->input = (sy_tpu1_tensor){.n = 1, .h = 1, .w = 1, .c = in_c, .scale = 1};
    p->output = (sy_tpu1_tensor){.n = 1, .h = 1, .w = 1, .c = 1, .offset = (uint32_t)in_c, .scale = 1};
    p->host_bytes = (uint32_t)in_c + 1;
    p->n_acts = 1;
    p->acts = sy_calloc(1, sizeof *p->acts);
    p->acts[0] = (sy_tpu1_act){.channels = 256, .act_min = -128, .act_max = 127};
    p->acts[0].bias = sy_calloc(256, 4);
    p->acts[0].mult = sy_calloc(256, 4);
    p->acts[0].shift = sy_calloc(256, 4);
    return p;
}

static void test_encoding(void) {
    sy_tpu1_insn mm = {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD | SY_TPU1_F_ACCUMULATE, .ub = 0x123456,
                       .acc = 0x0abc, .rows = 0x01020304};
    uint8_t b[32];
    memset(b, 0xee, sizeof b);
    CHECK(io_tpu1_insn_size(SY_TPU1_MATMUL) == 12 && io_tpu1_insn_size(SY_TPU1_CONVOLVE) == 12,
          "MatrixMultiply/Convolve take %zu/%zu bytes, the paper's 12", io_tpu1_insn_size(SY_TPU1_MATMUL),
          io_tpu1_insn_size(SY_TPU1_CONVOLVE));
    io_tpu1_encode_insn(&mm, b);
    const uint8_t want[12] = {SY_TPU1_MATMUL, 0x03, 0x56, 0x34, 0x12, 0xbc, 0x0a, 0x04, 0x03, 0x02, 0x01, 0x00};
    CHECK(!memcmp(b, want, 12), "MatrixMultiply: opcode, flags, 3-byte UB address, 2-byte accumulator address, 4-byte "
                                "length, flags: got %02x %02x | %02x %02x %02x | %02x %02x | %02x %02x %02x %02x | %02x",
          b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11]);
    CHECK(b[12] == 0xee, "MatrixMultiply wrote past its 12 bytes");
    sy_tpu1_insn cv = {.op = SY_TPU1_CONVOLVE, .flags = SY_TPU1_F_LOAD, .ub = 7, .acc = 2048, .rows = 1444, .kblock = 8};
    io_tpu1_encode_insn(&cv, b);
    CHECK(io_le32(b + 7) == (1444u | 8u << 16), "Convolve's length: rows and the im2col block, two dimensions");
}

/* A small valid program: input (2, 1, 1, 300) read in two planes, an FC of 2 K-tiles, Activate, write. */
static sy_tpu1_prog *small_program(void) {
    sy_tpu1_insn in[] = {
        {.op = SY_TPU1_READ_WEIGHTS, .tile = 0, .rows = 2},
        {.op = SY_TPU1_READ_HOST, .ub = 0, .host = 0, .rows = 2, .row_bytes = 256, .host_stride = 300},
        {.op = SY_TPU1_READ_HOST, .ub = 2, .host = 256, .rows = 2, .row_bytes = 44, .host_stride = 300},
        {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD, .ub = 0, .acc = 0, .rows = 2},
        {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD | SY_TPU1_F_ACCUMULATE, .ub = 2, .acc = 0, .rows = 2},
        {.op = SY_TPU1_ACTIVATE, .ub = 4, .acc = 0, .rows = 2, .cblock = 0, .index = 0},
        {.op = SY_TPU1_SYNC},
        {.op = SY_TPU1_WRITE_HOST, .ub = 4, .host = 600, .rows = 2, .row_bytes = 1, .host_stride = 1},
    };
    sy_tpu1_prog *p = make(in, 8, 2, 6, 300);
    p->input.n = 2;
    p->output = (sy_tpu1_tensor){.n = 2, .h = 1, .w = 1, .c = 1, .offset = 600, .scale = 1};
    p->host_bytes = 602;
    return p;
}

static void test_round_trip(void) {
    sy_tpu1_prog *p = small_program(), *q = NULL;
    uint8_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK_OK(io_tpu1_encode(p, &a, &na));
    CHECK_OK(io_tpu1_parse(a, na, "small.bin", &q));
    if (q) CHECK_OK(io_tpu1_encode(q, &b, &nb));
    CHECK(a && b && na == nb && !memcmp(a, b, na), "written, read and written again: %zu and %zu bytes", na, nb);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (q) io_tpu1_disassemble(q, f);
    fclose(f);
    const char *names[] = {"Read_Weights", "Read_Host_Memory", "MatrixMultiply", "Activate", "Sync", "Write_Host_Memory",
                           "Halt", "load accumulate"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        CHECK(text && strstr(text, names[i]), "the disassembly names %s:\n%s", names[i], text ? text : "");
    free(text);

    /* refusals, each with the byte offset */
    for (size_t cut = 0; cut < na; cut += (cut < 400 ? 1 : 4099)) {
        sy_tpu1_prog *r = NULL;
        sy_status st = io_tpu1_parse(a, cut, "cut.bin", &r);
        CHECK(st == SY_ERR_CORRUPT && !r && strstr(sy_last_error(), "at byte"), "truncated at %zu: %s", cut,
              sy_last_error());
        sy_tpu1_prog_free(r);
    }
    sy_tpu1_prog_free(q);
    q = NULL;
    CHECK_ERR(io_tpu1_parse(a, na - 1, "cut.bin", &q), SY_ERR_CORRUPT, "truncated", "the weight image");
    size_t code = IO_TPU1_HEADER_BYTES + 22 * 4 + 256 * 12; /* the first instruction */
    uint8_t *c = malloc(na);
    struct {
        size_t at;
        uint8_t value;
        const char *says;
    } damage[] = {
        {code, 0x77, "bad opcode 0x77"},
        {code + 12 + 4, 0x7f, "past the"},               /* Read_Host_Memory's UB address */
        {code + 12 + 9, 0x40, "past host memory"},       /* its rows */
        {code + 2, 0x09, "past the weight image"},        /* Read_Weights' first tile */
        {code + 52 + 6, 0x10, "past the 4096 accumulators"}, /* a MatrixMultiply's accumulator address */
        {code + 52 + 1, 0x80, "flags"},
        {code + 52 + 11, 0x01, "must be 0"},
        {code + 6, 0x01, "only 1 were read"},            /* Read_Weights of 1 tile, two taken */
    };
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        memcpy(c, a, na);
        c[damage[i].at] = damage[i].value;
        char at[32];
        snprintf(at, sizeof at, "at byte ");
        sy_tpu1_prog *r = NULL;
        CHECK_ERR(io_tpu1_parse(c, na, "bad.bin", &r), SY_ERR_CORRUPT, damage[i].says, at, "bad.bin");
        sy_tpu1_prog_free(r);
    }
    /* every byte before the weight image changed two ways: refused, or accepted and then run (values and time)
     * without a fault -- ASan and UBSan watch in make asan; fuzz_tpu1 does the same at random */
    int accepted = 0;
    for (size_t at = 0; at + SY_TPU1_TILE_BYTES * 2 < na; at++)
        for (int how = 0; how < 2; how++) {
            memcpy(c, a, na);
            c[at] = how ? (uint8_t)(c[at] ^ 0x80) : (uint8_t)(c[at] + 1);
            sy_tpu1_prog *r = NULL;
            if (io_tpu1_parse(c, na, "flip.bin", &r) != SY_OK) continue;
            accepted++;
            int8_t x[4096] = {0}, y[4096];
            sy_tpu1_counters cnt;
            bool small = (int64_t)r->input.n * r->input.h * r->input.w * r->input.c <= 4096 &&
                         (int64_t)r->output.n * r->output.h * r->output.w * r->output.c <= 4096;
            CHECK_OK(sy_tpu1_run(r, small ? x : NULL, small ? y : NULL, &cnt));
            sy_tpu1_prog_free(r);
        }
    CHECK(accepted > 0, "some changed bytes (constants, addresses in range) still make a program");
    /* a program needing more unified buffer than 24 MiB */
    memcpy(c, a, na);
    c[32] = 0x01, c[33] = 0x80, c[34] = 0x01, c[35] = 0x00; /* 0x18001 rows */
    CHECK_ERR(io_tpu1_parse(c, na, "big.bin", &q), SY_ERR_UNSUPPORTED, "25166080 bytes of unified buffer", "98305 rows",
              "25165824 (24 MiB");
    free(c);
    sy_free(a);
    sy_free(b);
    sy_tpu1_prog_free(p);
    sy_tpu1_prog_free(q);
}

static sy_tpu1_counters timed(sy_tpu1_prog *p) {
    sy_tpu1_counters c;
    memset(&c, 0, sizeof c);
    uint8_t *buf = NULL;
    size_t n = 0;
    sy_tpu1_prog *q = NULL;
    CHECK_OK(io_tpu1_encode(p, &buf, &n));
    CHECK_OK(io_tpu1_parse(buf, n, "hand.bin", &q)); /* the emulator runs only what the loader accepts */
    if (q) CHECK_OK(sy_tpu1_run(q, NULL, NULL, &c));
    double sum = c.array_active_cycles + c.weight_stall_cycles + c.weight_shift_cycles + c.non_matrix_cycles;
    CHECK_CLOSE(sum, c.cycles, 1e-12, 1e-6, "the four kinds of cycle add up to the run");
    CHECK_CLOSE(c.useful_macs + c.unused_macs, c.array_active_cycles * 65536, 1e-12, 0, "MACs on active cycles");
    sy_free(buf);
    sy_tpu1_prog_free(q);
    sy_tpu1_prog_free(p);
    return c;
}

static void test_cycles(void) {
    /* one tile: fetched over DDR3 (1,349.27 cycles), shifted in (256), 100 rows multiplied */
    sy_tpu1_insn a[] = {{.op = SY_TPU1_READ_WEIGHTS, .tile = 0, .rows = 1},
                        {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD, .rows = 100}};
    sy_tpu1_counters c = timed(make(a, 2, 1, 100, 1));
    CHECK_CLOSE(c.cycles, TILE_CYCLES + 256 + 100, 0, 1e-6, "one tile");
    CHECK_CLOSE(c.weight_stall_cycles, TILE_CYCLES - 1, 0, 1e-6, "waiting for the tile (after the cycle of issue)");
    CHECK_CLOSE(c.weight_shift_cycles, 256, 0, 1e-6, "waiting for its shift");
    CHECK_CLOSE(c.array_active_cycles, 100, 0, 0, "multiplying");
    CHECK_CLOSE(c.non_matrix_cycles, 1, 0, 1e-6, "the MatrixMultiply's issue");
    CHECK_CLOSE(c.useful_macs, 100 * 65536.0, 0, 0, "a full tile's MACs");

    /* two tiles of 1,000 rows: the second arrives 93.27 cycles after the first's multiply ends, then shifts */
    sy_tpu1_insn b[] = {{.op = SY_TPU1_READ_WEIGHTS, .tile = 0, .rows = 2},
                        {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD, .rows = 1000},
                        {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD | SY_TPU1_F_ACCUMULATE, .rows = 1000}};
    c = timed(make(b, 3, 2, 1000, 1));
    CHECK_CLOSE(c.cycles, 2 * TILE_CYCLES + 256 + 1000, 0, 1e-6, "two tiles of 1,000 rows: bound by DDR3");
    CHECK_CLOSE(c.weight_stall_cycles, TILE_CYCLES - 1 + (2 * TILE_CYCLES - (TILE_CYCLES + 256 + 1000)), 0, 1e-6,
                "stalls for both tiles");
    CHECK_CLOSE(c.weight_shift_cycles, 512, 0, 1e-6, "both shifts exposed");

    /* two tiles of 2,000 rows: the second's fetch and shift hide under the first's multiply (double buffering) */
    b[1].rows = b[2].rows = 2000;
    c = timed(make(b, 3, 2, 2000, 1));
    CHECK_CLOSE(c.cycles, TILE_CYCLES + 256 + 4000, 0, 1e-6, "two tiles of 2,000 rows: bound by the array");
    CHECK_CLOSE(c.weight_shift_cycles, 256, 0, 1e-6, "only the first shift exposed");

    /* Activate waits for the systolic drain (511 cycles), then reads a row a cycle; a Sync holds the next
     * MatrixMultiply until it is done: a RAW stall */
    sy_tpu1_insn d[] = {{.op = SY_TPU1_READ_WEIGHTS, .tile = 0, .rows = 1},
                        {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD, .rows = 100},
                        {.op = SY_TPU1_ACTIVATE, .ub = 100, .acc = 0, .rows = 100},
                        {.op = SY_TPU1_SYNC},
                        {.op = SY_TPU1_MATMUL, .ub = 100, .acc = 2048, .rows = 50}};
    c = timed(make(d, 5, 1, 200, 1));
    double mm1 = TILE_CYCLES + 256 + 100, act = mm1 + 511 + 100;
    CHECK_CLOSE(c.cycles, act + 50, 0, 1e-6, "drain, Activate, Sync, the second multiply");
    CHECK_CLOSE(c.raw_stall_cycles, act - mm1, 0, 1e-6, "the array waits through the drain and Activate");
    CHECK_CLOSE(c.array_active_cycles, 150, 0, 0, "both multiplies");

    /* Read_Host_Memory of 14 KiB at 14 GiB/s (700 cycles) before the multiply that reads it: an input stall */
    sy_tpu1_insn e[] = {{.op = SY_TPU1_READ_WEIGHTS, .tile = 0, .rows = 1},
                        {.op = SY_TPU1_READ_HOST, .ub = 0, .rows = 100, .row_bytes = 143, .host_stride = 0},
                        {.op = SY_TPU1_READ_HOST, .ub = 100, .rows = 28000, .row_bytes = 256, .host_stride = 0},
                        {.op = SY_TPU1_MATMUL, .flags = SY_TPU1_F_LOAD, .ub = 100, .rows = 100}};
    c = timed(make(e, 4, 1, 28100, 256));
    double bytes_cycles = 700e6 / (14.0 * 1024 * 1024 * 1024);
    double host_end = (100 * 143 + 28000 * 256) * bytes_cycles + 1;
    CHECK(host_end > TILE_CYCLES + 256, "the transfer outlasts the tile's fetch and shift");
    CHECK_CLOSE(c.cycles, host_end + 100, 1e-12, 1e-6, "the multiply waits for its rows from the host");
    CHECK_CLOSE(c.input_stall_cycles + 3, host_end, 1e-12, 1e-6, "an input stall (after 3 cycles of issue)");
}

/* ---- values ------------------------------------------------------------------------------------ */

/* A random layer: int8 weights (out_c, kh, kw, c), per-channel requantization, relu or not. */
static lite_tpu1_layer *random_layer(lite_tpu1_model *m, int32_t n, int32_t h, int32_t w, int32_t c, int32_t out_c,
                                     int32_t k, int32_t stride, bool same, int32_t in_zp, sy_rng *rng) {
    lite_tpu1_layer *l = lite_tpu1_add_layer(m, out_c);
    int64_t kk = (int64_t)k * k * c;
    l->weights = sy_malloc((size_t)(kk * out_c));
    for (int64_t i = 0; i < kk * out_c; i++) l->weights[i] = (int8_t)((int32_t)(sy_rng_u32(rng) % 255) - 127);
    l->n = n, l->h = h, l->w = w, l->c = c, l->kh = l->kw = k, l->sh = l->sw = stride, l->in_zp = in_zp;
    l->oh = same ? (h + stride - 1) / stride : (h - k) / stride + 1;
    l->ow = same ? (w + stride - 1) / stride : (w - k) / stride + 1;
    int32_t th = (l->oh - 1) * stride + k - h, tw = (l->ow - 1) * stride + k - w;
    l->pt = same && th > 0 ? th / 2 : 0, l->pl = same && tw > 0 ? tw / 2 : 0;
    for (int32_t ch = 0; ch < out_c; ch++) {
        int32_t sum = 0;
        for (int64_t i = 0; i < kk; i++) sum += l->weights[ch * kk + i];
        l->act.bias[ch] = (int32_t)(sy_rng_u32(rng) % 2001) - 1000 - in_zp * sum; /* folded as the lowering's input does */
        sy_q_multiplier((0.5 + sy_rng_uniform(rng)) / (40.0 * (double)kk), &l->act.mult[ch], &l->act.shift[ch]);
    }
    l->act.out_zp = 3, l->act.act_min = -128, l->act.act_max = 127;
    return l;
}

/* im2col of x (n, h, w, c) for layer l: (n*oh*ow, kh*kw*c), padding with in_zp. */
static int8_t *im2col(const lite_tpu1_layer *l, const int8_t *x) {
    int64_t rows = (int64_t)l->n * l->oh * l->ow, k = (int64_t)l->kh * l->kw * l->c;
    int8_t *col = malloc((size_t)(rows * k));
    for (int64_t r = 0; r < rows; r++) {
        int64_t img = r / (l->oh * l->ow), y = r / l->ow % l->oh, xo = r % l->ow;
        for (int64_t kk = 0; kk < k; kk++) {
            int64_t ch = kk % l->c, tap = kk / l->c, iy = y * l->sh - l->pt + tap / l->kw, ix = xo * l->sw - l->pl + tap % l->kw;
            bool in = iy >= 0 && iy < l->h && ix >= 0 && ix < l->w;
            col[r * k + kk] = in ? x[((img * l->h + iy) * l->w + ix) * l->c + ch] : (int8_t)l->in_zp;
        }
    }
    return col;
}

/* The layer on x as TFLite computes it: sy_qgemm_i8_ref on im2col (bias unfolded), then the pool. */
static int8_t *reference(const lite_tpu1_layer *l, const int8_t *x, int64_t *out_count) {
    int64_t rows = (int64_t)l->n * l->oh * l->ow, k = (int64_t)l->kh * l->kw * l->c;
    int8_t *col = im2col(l, x), *y = malloc((size_t)(rows * l->out_c));
    int32_t *bias = malloc((size_t)l->out_c * 4);
    for (int32_t ch = 0; ch < l->out_c; ch++) {
        int32_t sum = 0;
        for (int64_t i = 0; i < k; i++) sum += l->weights[ch * k + i];
        bias[ch] = l->act.bias[ch] + l->in_zp * sum;
    }
    sy_qgemm_params qp = {.x_zp = l->in_zp, .y_zp = l->act.out_zp, .act_min = l->act.act_min, .act_max = l->act.act_max,
                          .bias = bias, .mult = l->act.mult, .shift = l->act.shift};
    sy_qgemm_i8_ref(y, l->out_c, col, k, l->weights, rows, l->out_c, k, &qp);
    free(col);
    free(bias);
    *out_count = rows * l->out_c;
    const sy_tpu1_act *a = &l->act;
    if (!a->pool) return y;
    int8_t *p = malloc((size_t)((int64_t)l->n * a->ph * a->pw * l->out_c));
    for (int64_t img = 0; img < l->n; img++)
        for (int32_t py = 0; py < a->ph; py++)
            for (int32_t px = 0; px < a->pw; px++)
                for (int32_t ch = 0; ch < l->out_c; ch++) {
                    int32_t m = -128, sum = 0, cnt = 0;
                    for (int32_t i = 0; i < a->pkh; i++)
                        for (int32_t j = 0; j < a->pkw; j++) {
                            int32_t v = y[((img * l->oh + py * a->psh + i) * l->ow + px * a->psw + j) * l->out_c + ch];
                            m = v > m ? v : m, sum += v, cnt++;
                        }
                    int32_t v = a->pool == SY_TPU1_POOL_MAX ? m : sum > 0 ? (sum + cnt / 2) / cnt : (sum - cnt / 2) / cnt;
                    p[((img * a->ph + py) * a->pw + px) * l->out_c + ch] = (int8_t)v;
                }
    free(y);
    *out_count = (int64_t)l->n * a->ph * a->pw * l->out_c;
    return p;
}

/* One layer lowered and run on random inputs against reference(). */
static void check_layer(const char *what, int32_t n, int32_t h, int32_t w, int32_t c, int32_t out_c, int32_t k,
                        int32_t stride, bool same, int32_t pool, uint64_t seed) {
    sy_rng rng = sy_rng_new(seed, 0);
    lite_tpu1_model m = {0};
    lite_tpu1_layer *l = random_layer(&m, n, h, w, c, out_c, k, stride, same, -7, &rng);
    if (h == 1 && w == 1) l->oh = l->ow = 1;
    if (pool) {
        l->act.pool = pool;
        l->act.oh = l->oh, l->act.ow = l->ow, l->act.pkh = l->act.pkw = 2, l->act.psh = l->act.psw = 2;
        l->act.ph = l->oh / 2, l->act.pw = l->ow / 2, l->act.pool_min = -128, l->act.pool_max = 127;
    }
    int64_t in_count = (int64_t)n * h * w * c, out_count;
    int8_t *x = malloc((size_t)in_count);
    for (int64_t i = 0; i < in_count; i++) x[i] = (int8_t)(sy_rng_u32(&rng) % 256 - 128);
    int8_t *want = reference(l, x, &out_count);
    m.input = (sy_tpu1_tensor){.n = n, .h = h, .w = w, .c = c, .scale = 1};
    m.output = (sy_tpu1_tensor){.n = n, .h = pool ? l->act.ph : l->oh, .w = pool ? l->act.pw : l->ow, .c = out_c, .scale = 1};
    sy_tpu1_prog *p = NULL;
    CHECK_OK(lite_tpu1_lower(&m, &p));
    int8_t *got = calloc((size_t)out_count, 1);
    sy_tpu1_counters cnt;
    if (p) CHECK_OK(sy_tpu1_run(p, x, got, &cnt));
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < out_count; i++)
        if (got[i] != want[i] && !bad++) first = i;
    CHECK(bad == 0, "%s: %lld of %lld outputs differ from sy_qgemm_i8_ref's, the first at %lld (%d, not %d)", what,
          (long long)bad, (long long)out_count, (long long)first, first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
    free(x);
    free(want);
    free(got);
    sy_tpu1_prog_free(p);
    lite_tpu1_model_free(&m);
}

static void test_values(void) {
    check_layer("fully connected 300 -> 260, batch 5 (2 x 2 tiles, padded)", 5, 1, 1, 300, 260, 1, 1, false, 0, 1);
    check_layer("3x3 conv SAME, stride 2, 3 -> 5 channels", 2, 9, 8, 3, 5, 3, 2, true, 0, 2);
    check_layer("3x3 conv VALID, 300 -> 20 channels (2 planes, 11 K-tiles)", 1, 5, 5, 300, 20, 3, 1, false, 0, 3);
    check_layer("3x3 conv SAME + 2x2 max pool, 40 images (chunks of whole images)", 40, 10, 10, 4, 6, 3, 1, true,
                SY_TPU1_POOL_MAX, 4);
    check_layer("3x3 conv SAME + 2x2 average pool", 3, 6, 6, 2, 3, 3, 1, true, SY_TPU1_POOL_AVG, 5);
    check_layer("3x3 conv SAME on 50x50, 2 images (positions in chunks of 2,048 at most)", 2, 50, 50, 2, 3, 3, 1, true, 0,
                6);
}

/* ---- the paper ------------------------------------------------------------------------------- */

static sy_tpu1_counters paper(const char *name, int32_t batch) {
    sy_tpu1_program *p = NULL;
    sy_tpu1_counters c;
    memset(&c, 0, sizeof c);
    CHECK_OK(sy_tpu1_paper_model(name, batch, 1, &p));
    if (p) CHECK_OK(sy_tpu1_run(p, NULL, NULL, &c));
    sy_tpu1_program_free(p);
    return c;
}

static void test_paper(void) {
    const sy_tpu1_machine *mc = sy_tpu1_machine_get();
    CHECK_CLOSE(mc->ridge_macs_per_byte, 1349.27, 0, 0.01, "the ridge: 65,536 MACs x 700 MHz / 34 GB/s");
    CHECK_CLOSE(mc->peak_ops, 91.75e12, 0, 0.01e12, "92 TeraOps/s");
    /* Table 3: TOPS 12.3 / 9.7 / 86.0, weight stall 53.9% / 44.2% / 0.0%, array active 78.2% for CNN0 */
    struct {
        const char *name;
        double tops, stall;
    } t3[] = {{"mlp0", 12.3, 53.9}, {"mlp1", 9.7, 44.2}, {"cnn0", 86.0, 0.0}};
    for (int i = 0; i < 3; i++) {
        sy_tpu1_counters c = paper(t3[i].name, 0);
        double stall = 100 * c.weight_stall_cycles / c.cycles;
        printf("%s: %.1f TOPS (paper %.1f), weight stall %.1f%% (paper %.1f%%), array active %.1f%%\n", t3[i].name, c.tops,
               t3[i].tops, stall, t3[i].stall, 100 * c.array_active_cycles / c.cycles);
        CHECK(fabs(c.tops - t3[i].tops) <= 0.2 * t3[i].tops, "%s: %.2f TOPS, Table 3 %.1f", t3[i].name, c.tops, t3[i].tops);
        CHECK(fabs(stall - t3[i].stall) <= 10, "%s: weight stall %.1f%%, Table 3 %.1f%%", t3[i].name, stall, t3[i].stall);
    }
    sy_tpu1_counters cnn = paper("cnn0", 0);
    CHECK(cnn.array_active_cycles / cnn.cycles > 0.7, "cnn0 near the array's peak: active %.1f%% (Table 3: 78.2%%)",
          100 * cnn.array_active_cycles / cnn.cycles);
    /* the roofline: below the ridge TOPS grow with the batch (ops per weight byte), past it they flatten */
    sy_tpu1_counters lo = paper("fc", 512), mid = paper("fc", 1024), hi = paper("fc", 2000);
    double slope = 2 * 34e9 / 1e12; /* TOPS per op/weight byte on the memory roof */
    printf("fc roofline: batch 512 %.1f TOPS (roof %.1f), 1024 %.1f (roof %.1f), 2000 %.1f (peak 91.8)\n", lo.tops,
           512 * slope, mid.tops, 1024 * slope, hi.tops);
    CHECK(lo.tops > 0.8 * 512 * slope && lo.tops <= 512 * slope, "batch 512 on the memory roof: %.1f TOPS", lo.tops);
    CHECK(mid.tops > 0.8 * 1024 * slope && mid.tops <= 1024 * slope, "batch 1024 on the memory roof: %.1f TOPS", mid.tops);
    CHECK(hi.tops > 0.8 * 91.75 && hi.weight_stall_cycles < 0.02 * hi.cycles,
          "batch 2000, past the ridge: %.1f TOPS, weight stalls %.1f%%", hi.tops, 100 * hi.weight_stall_cycles / hi.cycles);
    CHECK(mid.weight_stall_cycles + mid.weight_shift_cycles > 0.1 * mid.cycles,
          "batch 1024, below the ridge, waits on weights (their fetch, then their shift)");
}

int main(void) {
    test_encoding();
    test_round_trip();
    test_cycles();
    test_values();
    test_paper();
    return check_report("test_tpu1");
}
