/*
 * tpu1_program.c - TPU v1 program files (issue 18): encoding, writer,
 * loader, disassembler. docs/design/tpu-v1.md.
 *
 * Instructions are little-endian and of a length fixed by their opcode
 * (byte 0). MatrixMultiply and Convolve take the paper's 12 bytes: opcode,
 * flags, a 3-byte unified-buffer address (in 256-byte rows: 98,304 rows are
 * 24 MiB), a 2-byte accumulator address (4,096 rows), a 4-byte length
 * (Convolve: rows in the low 16 bits, the tile's 256-block of the im2col
 * row in the high 16 -- the paper's "sometimes 2 dimensions for
 * convolutions"), and a last byte of flags, zero. The others:
 *
 *   Read_Host_Memory,     20  op 0 | ub 2-4 | host offset 5-8 | rows 9-12 | row bytes - 1 13 |
 *   Write_Host_Memory         host stride 14-17 | 0 18-19
 *   Read_Weights          12  op 0 | 0 1 | first DDR3 tile 2-5 | tiles 6-9 | 0 10-11
 *   Activate              16  op 0 | 0 1 | ub 2-4 | acc 5-6 | rows 7-10 | channel block 11 |
 *                             descriptor 12-13 | 0 14-15
 *   SetConv               12  op 0 | 0 1 | geometry 2-3 | first output position 4-7 | 0 8-11
 *   Sync, Halt             4  op 0 | 0 1-3
 *
 * The file: a 96-byte header (magic "SYTPU1\0\0", version, the sizes of
 * what follows, the unified-buffer rows the program uses, host memory's
 * size, the input and output tensors: shape, host offset, scale, zero
 * point), the convolution geometries (13 int32 each), the activation
 * descriptors (22 int32, then bias, multiplier and shift per channel), the
 * instructions, each weight tile's used rows and columns (2 uint16), and
 * the weight image (64 KiB a tile), ending exactly at the file's end.
 *
 * The loader trusts nothing: every count is checked against the bytes left
 * before anything is allocated, every instruction against the machine (UB,
 * accumulators, DDR3 tiles, host memory) and against the program so far
 * (a tile taken from the weight FIFO must have been read, a Convolve needs
 * a SetConv), so that the emulator can run whatever it accepts. Errors
 * give the byte offset.
 */
#include "io_internal.h"
#include "tpu1_program.h"

#include <stdarg.h>
#include <string.h>

size_t io_tpu1_insn_size(uint8_t op) {
    switch (op) {
    case SY_TPU1_READ_HOST:
    case SY_TPU1_WRITE_HOST: return 20;
    case SY_TPU1_ACTIVATE: return 16;
    case SY_TPU1_READ_WEIGHTS:
    case SY_TPU1_MATMUL:
    case SY_TPU1_CONVOLVE:
    case SY_TPU1_SET_CONV: return 12;
    case SY_TPU1_SYNC:
    case SY_TPU1_HALT: return 4;
    default: return 0;
    }
}

const char *io_tpu1_op_name(uint8_t op) {
    static const char *names[] = {"?",        "Read_Host_Memory", "Write_Host_Memory", "Read_Weights", "MatrixMultiply",
                                  "Convolve", "Activate",         "SetConv",           "Sync",         "Halt"};
    return op < SY_TPU1_N_OPS ? names[op] : "?";
}

static void put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put24(uint8_t *p, uint32_t v) {
    put16(p, v);
    p[2] = (uint8_t)(v >> 16);
}
static void put32(uint8_t *p, uint32_t v) {
    put16(p, v);
    put16(p + 2, v >> 16);
}
static uint32_t le24(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16; }

void io_tpu1_encode_insn(const sy_tpu1_insn *in, uint8_t *o) {
    memset(o, 0, io_tpu1_insn_size(in->op));
    o[0] = in->op;
    switch (in->op) {
    case SY_TPU1_READ_HOST:
    case SY_TPU1_WRITE_HOST:
        put24(o + 2, in->ub);
        put32(o + 5, in->host);
        put32(o + 9, in->rows);
        o[13] = (uint8_t)(in->row_bytes - 1);
        put32(o + 14, in->host_stride);
        break;
    case SY_TPU1_READ_WEIGHTS:
        put32(o + 2, in->tile);
        put32(o + 6, in->rows);
        break;
    case SY_TPU1_MATMUL:
    case SY_TPU1_CONVOLVE:
        o[1] = in->flags;
        put24(o + 2, in->ub);
        put16(o + 5, in->acc);
        put32(o + 7, in->op == SY_TPU1_CONVOLVE ? (in->rows & 0xffff) | in->kblock << 16 : in->rows);
        break;
    case SY_TPU1_ACTIVATE:
        put24(o + 2, in->ub);
        put16(o + 5, in->acc);
        put32(o + 7, in->rows);
        o[11] = (uint8_t)in->cblock;
        put16(o + 12, in->index);
        break;
    case SY_TPU1_SET_CONV:
        put16(o + 2, in->index);
        put32(o + 4, in->first);
        break;
    default: break;
    }
}

/* ---- writing ----------------------------------------------------------------------------------- */

static size_t act_bytes(const sy_tpu1_act *a) { return 22 * 4 + (size_t)a->channels * 12; }

static void put_tensor(uint8_t *o, const sy_tpu1_tensor *t) {
    put32(o, (uint32_t)t->n);
    put32(o + 4, (uint32_t)t->h);
    put32(o + 8, (uint32_t)t->w);
    put32(o + 12, (uint32_t)t->c);
    put32(o + 16, t->offset);
    uint32_t bits;
    memcpy(&bits, &t->scale, 4);
    put32(o + 20, bits);
    put32(o + 24, (uint32_t)t->zero_point);
}

sy_status io_tpu1_encode(const sy_tpu1_prog *p, uint8_t **buf, size_t *n) {
    size_t code = 0, acts = 0;
    for (int32_t i = 0; i < p->n_insns; i++) code += io_tpu1_insn_size(p->insns[i].op);
    for (int32_t i = 0; i < p->n_acts; i++) acts += act_bytes(&p->acts[i]);
    size_t total = IO_TPU1_HEADER_BYTES + (size_t)p->n_convs * 52 + acts + code + (size_t)p->n_tiles * 4 +
                   (size_t)p->n_tiles * SY_TPU1_TILE_BYTES;
    uint8_t *o = sy_calloc(total, 1);
    if (!o) return sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 program: out of memory encoding %zu bytes", total);
    memcpy(o, IO_TPU1_MAGIC, 8);
    put32(o + 8, IO_TPU1_VERSION);
    put32(o + 12, (uint32_t)code);
    put32(o + 16, (uint32_t)p->n_insns);
    put32(o + 20, (uint32_t)p->n_convs);
    put32(o + 24, (uint32_t)p->n_acts);
    put32(o + 28, p->n_tiles);
    put32(o + 32, p->ub_rows);
    put32(o + 36, p->host_bytes);
    put_tensor(o + 40, &p->input);
    put_tensor(o + 68, &p->output);
    uint8_t *q = o + IO_TPU1_HEADER_BYTES;
    for (int32_t i = 0; i < p->n_convs; i++) {
        const int32_t *g = &p->convs[i].n; /* 13 int32 in order */
        for (int k = 0; k < 13; k++, q += 4) put32(q, (uint32_t)g[k]);
    }
    for (int32_t i = 0; i < p->n_acts; i++) {
        const sy_tpu1_act *a = &p->acts[i];
        const int32_t f[22] = {a->channels,  a->out_zp,     a->act_min,   a->act_max,    a->pool,        a->oh,
                               a->ow,        a->pkh,        a->pkw,       a->psh,        a->psw,         a->ph,
                               a->pw,        a->pool_min,   a->pool_max,  a->post,       a->post_in_zp,  a->post_mult,
                               a->post_shift, a->post_out_zp, a->post_min, a->post_max};
        for (int k = 0; k < 22; k++, q += 4) put32(q, (uint32_t)f[k]);
        for (int32_t c = 0; c < a->channels; c++, q += 12) {
            put32(q, (uint32_t)a->bias[c]);
            put32(q + 4, (uint32_t)a->mult[c]);
            put32(q + 8, (uint32_t)a->shift[c]);
        }
    }
    for (int32_t i = 0; i < p->n_insns; i++) {
        io_tpu1_encode_insn(&p->insns[i], q);
        q += io_tpu1_insn_size(p->insns[i].op);
    }
    for (uint32_t i = 0; i < 2 * p->n_tiles; i++, q += 2) put16(q, p->tile_used[i]);
    if (p->n_tiles) memcpy(q, p->weights, (size_t)p->n_tiles * SY_TPU1_TILE_BYTES);
    *buf = o;
    *n = total;
    return SY_OK;
}

sy_status io_tpu1_write(const char *path, const sy_tpu1_prog *p) {
    uint8_t *buf;
    size_t n;
    sy_status st = io_tpu1_encode(p, &buf, &n);
    if (st) return st;
    sy_tpu1_prog *check = NULL;
    st = io_tpu1_parse(buf, n, path, &check); /* what the loader would refuse is not written */
    sy_tpu1_prog_free(check);
    if (!st) {
        const void *bufs[1] = {buf};
        st = io_write_file_atomic(path, bufs, &n, 1);
    }
    sy_free(buf);
    return st;
}

/* ---- reading ----------------------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *b;
    size_t n, at;
    const char *what;
} reader;

static sy_status bad(const reader *r, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static sy_status bad(const reader *r, size_t at, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sy_error(SY_ERR_CORRUPT, "'%s' is not a valid TPU v1 program: at byte %zu: %s", r->what, at, msg);
}

/* The next `need` bytes, or NULL with *st set (truncated). */
static const uint8_t *take(reader *r, size_t need, const char *part, sy_status *st) {
    if (r->n - r->at < need) {
        *st = bad(r, r->at, "truncated: %s needs %zu bytes, %zu left", part, need, r->n - r->at);
        return NULL;
    }
    const uint8_t *p = r->b + r->at;
    r->at += need;
    return p;
}

static bool in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

static sy_status read_tensor(reader *r, const uint8_t *p, size_t at, const char *which, uint32_t host_bytes,
                             sy_tpu1_tensor *t) {
    int32_t d[4];
    for (int k = 0; k < 4; k++) {
        d[k] = (int32_t)io_le32(p + 4 * k);
        if (!in_range(d[k], 1, 1 << 24)) return bad(r, at + 4 * k, "the %s's shape has dimension %d", which, d[k]);
    }
    t->n = d[0], t->h = d[1], t->w = d[2], t->c = d[3];
    t->offset = io_le32(p + 16);
    uint32_t bits = io_le32(p + 20);
    memcpy(&t->scale, &bits, 4);
    t->zero_point = (int32_t)io_le32(p + 24);
    /* each dimension is below 2^25 and host memory below 2^32: the running product, checked at each step,
     * stays below 2^57 */
    int64_t bytes = 1;
    for (int k = 0; k < 4; k++) {
        bytes *= d[k];
        if (bytes > (int64_t)host_bytes)
            return bad(r, at + 4 * k, "the %s's shape %dx%dx%dx%d holds more than host memory's %u bytes", which, d[0],
                       d[1], d[2], d[3], host_bytes);
    }
    if (bytes > (int64_t)host_bytes - (int64_t)t->offset)
        return bad(r, at + 16, "the %s's %lld bytes at host offset %u pass host memory's %u bytes", which,
                   (long long)bytes, t->offset, host_bytes);
    if (!in_range(t->zero_point, -128, 127)) return bad(r, at + 24, "the %s's zero point %d is not int8", which, t->zero_point);
    return SY_OK;
}

static sy_status read_conv(reader *r, size_t at, const uint8_t *p, sy_tpu1_conv *g) {
    int32_t *f = &g->n;
    for (int k = 0; k < 13; k++) f[k] = (int32_t)io_le32(p + 4 * k);
    static const char *names[13] = {"n", "h", "w", "c", "kh", "kw", "sh", "sw", "pt", "pl", "oh", "ow", "in_zp"};
    for (int k = 0; k < 12; k++) {
        int32_t lo = (k == 8 || k == 9) ? 0 : 1;
        if (!in_range(f[k], lo, SY_TPU1_UB_ROWS))
            return bad(r, at + 4 * k, "convolution geometry: %s = %d out of [%d, %d]", names[k], f[k], lo, SY_TPU1_UB_ROWS);
    }
    if (!in_range(g->in_zp, -128, 127)) return bad(r, at + 48, "convolution geometry: input zero point %d", g->in_zp);
    if (g->pt >= g->kh || g->pl >= g->kw) return bad(r, at + 32, "convolution geometry: padding not under the kernel");
    if ((int64_t)g->n * g->h * g->w > SY_TPU1_UB_ROWS || (int64_t)g->n * g->oh * g->ow > SY_TPU1_UB_ROWS ||
        (int64_t)g->kh * g->kw * g->c > 0xffff * 256LL)
        return bad(r, at, "convolution geometry larger than the unified buffer or the im2col row's 16-bit blocks");
    return SY_OK;
}

static sy_status read_act(reader *r, sy_tpu1_act *a, sy_status *st) {
    size_t at = r->at;
    const uint8_t *p = take(r, 22 * 4, "an activation descriptor", st);
    if (!p) return *st;
    int32_t f[22];
    for (int k = 0; k < 22; k++) f[k] = (int32_t)io_le32(p + 4 * k);
    a->channels = f[0], a->out_zp = f[1], a->act_min = f[2], a->act_max = f[3], a->pool = f[4];
    a->oh = f[5], a->ow = f[6], a->pkh = f[7], a->pkw = f[8], a->psh = f[9], a->psw = f[10], a->ph = f[11], a->pw = f[12];
    a->pool_min = f[13], a->pool_max = f[14], a->post = f[15], a->post_in_zp = f[16], a->post_mult = f[17];
    a->post_shift = f[18], a->post_out_zp = f[19], a->post_min = f[20], a->post_max = f[21];
    if (!in_range(a->channels, 1, 255 * 256)) return bad(r, at, "activation descriptor: %d channels", a->channels);
    if (!in_range(a->out_zp, -128, 127) || !in_range(a->act_min, -128, 127) || !in_range(a->act_max, a->act_min, 127))
        return bad(r, at + 4, "activation descriptor: zero point %d, clamp [%d, %d] not int8", a->out_zp, a->act_min,
                   a->act_max);
    if (!in_range(a->pool, 0, 2)) return bad(r, at + 16, "activation descriptor: pooling kind %d", a->pool);
    if (a->pool) {
        for (int k = 5; k <= 12; k++)
            if (!in_range(f[k], 1, SY_TPU1_ACC_ROWS)) return bad(r, at + 4 * k, "activation descriptor: pooling size %d", f[k]);
        if ((int64_t)(a->ph - 1) * a->psh + a->pkh > a->oh || (int64_t)(a->pw - 1) * a->psw + a->pkw > a->ow)
            return bad(r, at + 20, "activation descriptor: pooled %dx%d does not fit its input %dx%d", a->ph, a->pw, a->oh,
                       a->ow);
        if (!in_range(a->pool_min, -128, 127) || !in_range(a->pool_max, a->pool_min, 127))
            return bad(r, at + 52, "activation descriptor: pooling clamp [%d, %d]", a->pool_min, a->pool_max);
    }
    if (!in_range(a->post, 0, 1)) return bad(r, at + 60, "activation descriptor: post-activation flag %d", a->post);
    if (a->post && (!in_range(a->post_in_zp, -128, 127) || !in_range(a->post_out_zp, -128, 127) || a->post_mult < 0 ||
                    !in_range(a->post_shift, -31, 30) || !in_range(a->post_min, -128, 127) ||
                    !in_range(a->post_max, a->post_min, 127)))
        return bad(r, at + 64, "activation descriptor: requantizing activation out of range");
    size_t chan_at = r->at;
    p = take(r, (size_t)a->channels * 12, "an activation descriptor's per-channel constants", st);
    if (!p) return *st;
    a->bias = sy_malloc((size_t)a->channels * 4);
    a->mult = sy_malloc((size_t)a->channels * 4);
    a->shift = sy_malloc((size_t)a->channels * 4);
    if (!a->bias || !a->mult || !a->shift) return sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 program: out of memory");
    for (int32_t c = 0; c < a->channels; c++) {
        a->bias[c] = (int32_t)io_le32(p + 12 * c);
        a->mult[c] = (int32_t)io_le32(p + 12 * c + 4);
        a->shift[c] = (int32_t)io_le32(p + 12 * c + 8);
        if (a->mult[c] < 0 || !in_range(a->shift[c], -31, 30))
            return bad(r, chan_at + 12 * (size_t)c + 4, "channel %d's multiplier %d, shift %d out of range", c, a->mult[c],
                       a->shift[c]);
    }
    return SY_OK;
}

/* Check one instruction against the machine and the program so far. */
typedef struct walk {
    int64_t requested, popped;
    bool loaded, halted;
    const sy_tpu1_conv *conv;
    uint32_t first;
} walk;

static sy_status check_insn(reader *r, const sy_tpu1_prog *p, const sy_tpu1_insn *in, walk *w) {
    size_t at = in->offset;
    const char *name = io_tpu1_op_name(in->op);
    int64_t ub_end = 0;
    switch (in->op) {
    case SY_TPU1_READ_HOST:
    case SY_TPU1_WRITE_HOST: {
        if (in->rows < 1) return bad(r, at + 9, "%s of no rows", name);
        /* fields below 2^32: the product below 2^64 - 2^33, the sum too, in unsigned 64-bit */
        uint64_t last = (uint64_t)in->host + (uint64_t)(in->rows - 1) * in->host_stride + in->row_bytes;
        if (last > p->host_bytes)
            return bad(r, at + 5, "%s reaches host byte %llu, past host memory's %u", name, (unsigned long long)last,
                       p->host_bytes);
        ub_end = (int64_t)in->ub + in->rows;
        break;
    }
    case SY_TPU1_READ_WEIGHTS:
        if (in->rows < 1 || (int64_t)in->tile + in->rows > p->n_tiles)
            return bad(r, at + 2, "Read_Weights of tiles %u..%lld, past the weight image's %u tiles", in->tile,
                       (long long)in->tile + in->rows - 1, p->n_tiles);
        w->requested += in->rows;
        break;
    case SY_TPU1_MATMUL:
    case SY_TPU1_CONVOLVE:
        if (in->flags & ~(SY_TPU1_F_ACCUMULATE | SY_TPU1_F_LOAD)) return bad(r, at + 1, "%s flags 0x%02x", name, in->flags);
        if (in->rows < 1 || (int64_t)in->acc + in->rows > SY_TPU1_ACC_ROWS)
            return bad(r, at + 5, "%s of %u rows at accumulator %u, past the %d accumulators", name, in->rows, in->acc,
                       SY_TPU1_ACC_ROWS);
        if (in->flags & SY_TPU1_F_LOAD) {
            if (w->popped >= w->requested)
                return bad(r, at + 1, "%s takes weight tile %lld from the FIFO, but only %lld were read", name,
                           (long long)w->popped + 1, (long long)w->requested);
            w->popped++;
            w->loaded = true;
        } else if (!w->loaded) {
            return bad(r, at + 1, "%s before any weights were loaded into the array", name);
        }
        if (in->op == SY_TPU1_MATMUL) {
            ub_end = (int64_t)in->ub + in->rows;
        } else {
            const sy_tpu1_conv *g = w->conv;
            if (!g) return bad(r, at, "Convolve with no SetConv before it");
            if ((int64_t)w->first + in->rows > (int64_t)g->n * g->oh * g->ow)
                return bad(r, at + 7, "Convolve of output positions %u..%lld, past the convolution's %lld", w->first,
                           (long long)w->first + in->rows - 1, (long long)g->n * g->oh * g->ow);
            if ((int64_t)in->kblock * 256 >= (int64_t)g->kh * g->kw * g->c)
                return bad(r, at + 9, "Convolve of im2col block %u, past the convolution's %lld inputs", in->kblock,
                           (long long)g->kh * g->kw * g->c);
            ub_end = (int64_t)in->ub + ((int64_t)g->c + 255) / 256 * g->n * g->h * g->w;
        }
        break;
    case SY_TPU1_ACTIVATE: {
        if (in->index >= (uint32_t)p->n_acts)
            return bad(r, at + 12, "Activate with descriptor %u of %d", in->index, p->n_acts);
        const sy_tpu1_act *a = &p->acts[in->index];
        if ((int64_t)in->cblock * 256 >= a->channels)
            return bad(r, at + 11, "Activate of channel block %u, past the descriptor's %d channels", in->cblock, a->channels);
        if (in->rows < 1 || (int64_t)in->acc + in->rows > SY_TPU1_ACC_ROWS)
            return bad(r, at + 5, "Activate of %u rows at accumulator %u, past the %d accumulators", in->rows, in->acc,
                       SY_TPU1_ACC_ROWS);
        int64_t out = in->rows;
        if (a->pool) {
            int64_t per = (int64_t)a->oh * a->ow;
            if (in->rows % per)
                return bad(r, at + 7, "Activate pools images of %lld rows; %u rows is not a whole number", (long long)per,
                           in->rows);
            out = in->rows / per * a->ph * a->pw;
        }
        ub_end = (int64_t)in->ub + out;
        break;
    }
    case SY_TPU1_SET_CONV:
        if (in->index >= (uint32_t)p->n_convs)
            return bad(r, at + 2, "SetConv of geometry %u of %d", in->index, p->n_convs);
        w->conv = &p->convs[in->index];
        w->first = in->first;
        break;
    case SY_TPU1_HALT: w->halted = true; break;
    default: break;
    }
    if (ub_end > p->ub_rows)
        return bad(r, at + 2, "%s reaches unified-buffer row %lld, past the %u rows the program declares", name,
                   (long long)ub_end - 1, p->ub_rows);
    return SY_OK;
}

static sy_status decode_insn(reader *r, sy_tpu1_insn *in, sy_status *st) {
    size_t at = r->at;
    if (r->at >= r->n) return *st = bad(r, at, "truncated: the program ends before Halt");
    uint8_t op = r->b[r->at];
    size_t size = io_tpu1_insn_size(op);
    if (!size) return *st = bad(r, at, "bad opcode 0x%02x", op);
    const uint8_t *p = take(r, size, io_tpu1_op_name(op), st);
    if (!p) return *st;
    memset(in, 0, sizeof *in);
    in->op = op;
    in->offset = (uint32_t)at;
    /* bytes that must be zero: per opcode, from this mask of byte positions */
    uint32_t zero = 0;
    switch (op) {
    case SY_TPU1_READ_HOST:
    case SY_TPU1_WRITE_HOST:
        in->ub = le24(p + 2);
        in->host = io_le32(p + 5);
        in->rows = io_le32(p + 9);
        in->row_bytes = (uint32_t)p[13] + 1;
        in->host_stride = io_le32(p + 14);
        zero = 1u << 1 | 1u << 18 | 1u << 19;
        break;
    case SY_TPU1_READ_WEIGHTS:
        in->tile = io_le32(p + 2);
        in->rows = io_le32(p + 6);
        zero = 1u << 1 | 1u << 10 | 1u << 11;
        break;
    case SY_TPU1_MATMUL:
    case SY_TPU1_CONVOLVE: {
        in->flags = p[1];
        in->ub = le24(p + 2);
        in->acc = io_le16(p + 5);
        uint32_t len = io_le32(p + 7);
        in->rows = op == SY_TPU1_CONVOLVE ? len & 0xffff : len;
        in->kblock = op == SY_TPU1_CONVOLVE ? len >> 16 : 0;
        zero = 1u << 11;
        break;
    }
    case SY_TPU1_ACTIVATE:
        in->ub = le24(p + 2);
        in->acc = io_le16(p + 5);
        in->rows = io_le32(p + 7);
        in->cblock = p[11];
        in->index = io_le16(p + 12);
        zero = 1u << 1 | 1u << 14 | 1u << 15;
        break;
    case SY_TPU1_SET_CONV:
        in->index = io_le16(p + 2);
        in->first = io_le32(p + 4);
        zero = 1u << 1 | 0xfu << 8;
        break;
    default: zero = 0xeu; break;
    }
    for (size_t k = 0; k < size; k++)
        if ((zero >> k & 1) && p[k]) return *st = bad(r, at + k, "%s: byte %zu must be 0, is 0x%02x", io_tpu1_op_name(op), k, p[k]);
    return SY_OK;
}

sy_status io_tpu1_parse(const uint8_t *bytes, size_t n, const char *what, sy_tpu1_prog **out) {
    *out = NULL;
    reader r = {bytes, n, 0, what};
    sy_status st = SY_OK;
    const uint8_t *h = take(&r, IO_TPU1_HEADER_BYTES, "the header", &st);
    if (!h) return st;
    if (memcmp(h, IO_TPU1_MAGIC, 8)) return bad(&r, 0, "no TPU v1 program magic (\"SYTPU1\")");
    if (io_le32(h + 8) != IO_TPU1_VERSION)
        return bad(&r, 8, "version %u; this systolic reads version %u", io_le32(h + 8), IO_TPU1_VERSION);
    uint32_t code = io_le32(h + 12), n_insns = io_le32(h + 16), n_convs = io_le32(h + 20), n_acts = io_le32(h + 24);
    uint32_t n_tiles = io_le32(h + 28), ub_rows = io_le32(h + 32), host_bytes = io_le32(h + 36);
    if (ub_rows > SY_TPU1_UB_ROWS)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "'%s': the program needs %llu bytes of unified buffer (%u rows of 256); the TPU v1 has %lld "
                        "(24 MiB, %d rows)",
                        what, (unsigned long long)ub_rows * 256, ub_rows, (long long)SY_TPU1_UB_ROWS * 256,
                        SY_TPU1_UB_ROWS);
    if (n_tiles > SY_TPU1_DDR_TILES)
        return bad(&r, 28, "%u weight tiles (%llu bytes) do not fit the 8 GiB of DDR3 (%d tiles)", n_tiles,
                   (unsigned long long)n_tiles * SY_TPU1_TILE_BYTES, SY_TPU1_DDR_TILES);
    /* counts against the bytes left, before anything is allocated */
    size_t left = n - r.at;
    if (code > left || n_insns > code / 4 || n_convs > left / 52 || n_acts > left / 100 ||
        (size_t)n_tiles * (4 + SY_TPU1_TILE_BYTES) > left)
        return bad(&r, 12, "truncated: the header's counts (%u bytes of instructions, %u geometries, %u descriptors, "
                   "%u tiles) need more than the %zu bytes left", code, n_convs, n_acts, n_tiles, left);
    sy_tpu1_prog *p = sy_calloc(1, sizeof *p);
    if (!p) return sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 program: out of memory");
    p->ub_rows = ub_rows;
    p->host_bytes = host_bytes;
    p->n_tiles = n_tiles;
    if ((st = read_tensor(&r, h + 40, 40, "input", host_bytes, &p->input)) ||
        (st = read_tensor(&r, h + 68, 68, "output", host_bytes, &p->output)))
        goto fail;
    p->convs = sy_calloc(n_convs ? n_convs : 1, sizeof *p->convs);
    p->acts = sy_calloc(n_acts ? n_acts : 1, sizeof *p->acts);
    p->insns = sy_calloc(n_insns ? n_insns : 1, sizeof *p->insns);
    p->tile_used = sy_calloc(n_tiles ? 2 * (size_t)n_tiles : 1, sizeof *p->tile_used);
    if (!p->convs || !p->acts || !p->insns || !p->tile_used) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 program: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n_convs; i++, p->n_convs++) {
        size_t at = r.at;
        const uint8_t *g = take(&r, 52, "a convolution geometry", &st);
        if (!g || (st = read_conv(&r, at, g, &p->convs[i]))) goto fail;
    }
    for (uint32_t i = 0; i < n_acts; i++) {
        p->n_acts++;
        if ((st = read_act(&r, &p->acts[i], &st))) goto fail;
    }
    size_t code_at = r.at;
    if (code > r.n - r.at) {
        st = bad(&r, r.at, "truncated: %u bytes of instructions, %zu left", code, r.n - r.at);
        goto fail;
    }
    reader rc = {bytes, code_at + code, code_at, what};
    walk w = {0};
    for (uint32_t i = 0; i < n_insns; i++) {
        if (w.halted) {
            st = bad(&r, rc.at, "an instruction after Halt");
            goto fail;
        }
        if ((st = decode_insn(&rc, &p->insns[i], &st))) goto fail;
        p->n_insns++;
        if ((st = check_insn(&r, p, &p->insns[i], &w))) goto fail;
    }
    if (!w.halted) {
        st = bad(&r, rc.at, "the program ends without Halt");
        goto fail;
    }
    if (rc.at != code_at + code) {
        st = bad(&r, rc.at, "%zu bytes of instructions after Halt", code_at + code - rc.at);
        goto fail;
    }
    if (w.requested != w.popped) {
        st = bad(&r, code_at, "Read_Weights fetches %lld tiles but MatrixMultiply/Convolve take %lld", (long long)w.requested,
                 (long long)w.popped);
        goto fail;
    }
    r.at = code_at + code;
    const uint8_t *u = take(&r, (size_t)n_tiles * 4, "the tiles' used rows and columns", &st);
    if (!u) goto fail;
    for (uint32_t i = 0; i < 2 * n_tiles; i++) {
        p->tile_used[i] = io_le16(u + 2 * i);
        if (p->tile_used[i] > 256) {
            st = bad(&r, r.at - (size_t)n_tiles * 4 + 2 * i, "tile %u uses %u rows or columns of 256", i / 2, p->tile_used[i]);
            goto fail;
        }
    }
    const uint8_t *wts = take(&r, (size_t)n_tiles * SY_TPU1_TILE_BYTES, "the weight image", &st);
    if (!wts) goto fail;
    if (r.at != n) {
        st = bad(&r, r.at, "%zu bytes after the weight image", n - r.at);
        goto fail;
    }
    p->weights = sy_malloc(n_tiles ? (size_t)n_tiles * SY_TPU1_TILE_BYTES : 1);
    if (!p->weights) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 program: out of memory for %u weight tiles", n_tiles);
        goto fail;
    }
    if (n_tiles) memcpy(p->weights, wts, (size_t)n_tiles * SY_TPU1_TILE_BYTES);
    *out = p;
    return SY_OK;
fail:
    sy_tpu1_prog_free(p);
    return st;
}

sy_status io_tpu1_read(const char *path, sy_tpu1_prog **out) {
    uint8_t *buf;
    size_t n;
    *out = NULL;
    sy_status st = io_read_file(path, &buf, &n);
    if (st) return st;
    st = io_tpu1_parse(buf, n, path, out);
    sy_free(buf);
    return st;
}

/* ---- disassembly ------------------------------------------------------------------------------- */

void io_tpu1_disassemble(const sy_tpu1_prog *p, FILE *o) {
    const sy_tpu1_tensor *t[2] = {&p->input, &p->output};
    fprintf(o, "; TPU v1 program: %d instructions, %u weight tiles (%.2f MiB of DDR3), %u unified-buffer rows "
               "(%.2f MiB of 24)\n",
            p->n_insns, p->n_tiles, p->n_tiles / 16.0, p->ub_rows, p->ub_rows / 4096.0);
    for (int i = 0; i < 2; i++)
        fprintf(o, "; %s: int8 (%d, %d, %d, %d) at host byte %u, scale %g, zero point %d\n", i ? "output" : "input",
                t[i]->n, t[i]->h, t[i]->w, t[i]->c, t[i]->offset, (double)t[i]->scale, t[i]->zero_point);
    for (int32_t i = 0; i < p->n_convs; i++) {
        const sy_tpu1_conv *g = &p->convs[i];
        fprintf(o, "; conv %d: input (%d, %d, %d, %d), kernel %dx%d, stride %dx%d, pad %d,%d, output %dx%d, zero point %d\n",
                i, g->n, g->h, g->w, g->c, g->kh, g->kw, g->sh, g->sw, g->pt, g->pl, g->oh, g->ow, g->in_zp);
    }
    static const char *pools[3] = {"", ", max pool", ", average pool"};
    for (int32_t i = 0; i < p->n_acts; i++) {
        const sy_tpu1_act *a = &p->acts[i];
        fprintf(o, "; act %d: %d channels, zero point %d, clamp [%d, %d]%s", i, a->channels, a->out_zp, a->act_min,
                a->act_max, pools[a->pool]);
        if (a->pool) fprintf(o, " %dx%d stride %dx%d of %dx%d -> %dx%d", a->pkh, a->pkw, a->psh, a->psw, a->oh, a->ow, a->ph, a->pw);
        if (a->post) fprintf(o, ", then requantize to zero point %d clamp [%d, %d]", a->post_out_zp, a->post_min, a->post_max);
        fprintf(o, "\n");
    }
    for (int32_t i = 0; i < p->n_insns; i++) {
        const sy_tpu1_insn *in = &p->insns[i];
        fprintf(o, "%08x  %-17s", in->offset, io_tpu1_op_name(in->op));
        switch (in->op) {
        case SY_TPU1_READ_HOST:
        case SY_TPU1_WRITE_HOST:
            fprintf(o, " ub=%u host=%u rows=%u bytes=%u stride=%u", in->ub, in->host, in->rows, in->row_bytes, in->host_stride);
            break;
        case SY_TPU1_READ_WEIGHTS: fprintf(o, " ddr_tile=%u tiles=%u", in->tile, in->rows); break;
        case SY_TPU1_MATMUL:
        case SY_TPU1_CONVOLVE:
            fprintf(o, " ub=%u acc=%u rows=%u", in->ub, in->acc, in->rows);
            if (in->op == SY_TPU1_CONVOLVE) fprintf(o, " kblock=%u", in->kblock);
            if (in->flags & SY_TPU1_F_LOAD) fprintf(o, " load");
            if (in->flags & SY_TPU1_F_ACCUMULATE) fprintf(o, " accumulate");
            break;
        case SY_TPU1_ACTIVATE:
            fprintf(o, " ub=%u acc=%u rows=%u channels=%u.. act=%u", in->ub, in->acc, in->rows, in->cblock * 256, in->index);
            break;
        case SY_TPU1_SET_CONV: fprintf(o, " conv=%u first=%u", in->index, in->first); break;
        default: break;
        }
        fprintf(o, "\n");
    }
}
