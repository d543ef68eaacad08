/*
 * tpu1_lower.c - a chain of int8 matrix layers (lite_tpu1_model) lowered to
 * a TPU v1 program (issue 18; docs/design/tpu-v1.md), and the public
 * entry points around programs (compile, read, write, run).
 *
 * Every layer is a product of an im2col matrix (positions x K, K = kh * kw
 * * c) by the weights (K x out_c), cut into 256 x 256 tiles, zero-padded
 * at the edges (the paper's unused MACs), laid out in DDR3 column block by
 * column block so that one Read_Weights fetches the K-tiles of a block. A
 * fully connected layer on a matrix reads its UB rows directly
 * (MatrixMultiply); a convolution, and a fully connected layer on a
 * flattened feature map (a convolution whose kernel is the whole map),
 * uses Convolve, whose address generator gathers each position's im2col
 * row from the feature map in the UB -- chosen over materialising im2col in
 * the UB because that costs kh * kw times the activation's rows of the 24
 * MiB (a 3x3 layer of CNN0's size: 9 x 2,888 rows) and a pass of
 * Activate-unit time per layer, where the paper's machine feeds the array
 * straight from the buffer.
 *
 * Positions are taken in chunks of up to 2,048 rows, as even as they can
 * be (whole images when the layer pools, since Activate pools within a
 * chunk: CNN0's 2,888 positions are two chunks of 1,444, each past the
 * ridge of ~1,350 rows a tile, where 2,048 + 840 would leave the second
 * waiting on weights), and each chunk's
 * column blocks alternate between the two halves of the 4,096
 * accumulators, so that Activate drains one half while the array fills the
 * other -- the double buffering the paper sized the accumulators for.
 * After a layer's last Activate comes a Sync (the next layer reads what
 * Activate wrote: the paper's explicit synchronisation), with the next
 * layer's first Read_Weights hoisted before it, since weights depend on no
 * activation (and the first layer's before the input's Read_Host_Memory). Activations ping-pong between two UB regions; the input is
 * read from the host once, the output written back after the last Sync.
 */
#include "lite_internal.h"
#include "../io/tpu1_program.h"

#include <string.h>

void lite_tpu1_model_free(lite_tpu1_model *m) {
    if (!m) return;
    for (int32_t i = 0; i < m->n_layers; i++) {
        lite_tpu1_layer *l = &m->layers[i];
        sy_free(l->weights);
        sy_free(l->act.bias);
        sy_free(l->act.mult);
        sy_free(l->act.shift);
    }
    sy_free(m->layers);
    memset(m, 0, sizeof *m);
}

lite_tpu1_layer *lite_tpu1_add_layer(lite_tpu1_model *m, int32_t out_c) {
    lite_tpu1_layer *grown = sy_realloc_array(m->layers, (size_t)m->n_layers, (size_t)m->n_layers + 1, sizeof *grown);
    if (!grown) return NULL;
    m->layers = grown;
    lite_tpu1_layer *l = &m->layers[m->n_layers++];
    memset(l, 0, sizeof *l);
    l->out_c = l->act.channels = out_c;
    l->act.bias = sy_calloc((size_t)out_c, 4);
    l->act.mult = sy_calloc((size_t)out_c, 4);
    l->act.shift = sy_calloc((size_t)out_c, 4);
    if (!l->act.bias || !l->act.mult || !l->act.shift) return NULL;
    return l;
}

/* ---- building the program ---------------------------------------------------------------------- */

typedef struct emitter {
    sy_tpu1_insn *insns;
    int32_t n, cap;
    bool oom;
} emitter;

static void emit(emitter *e, sy_tpu1_insn in) {
    if (e->n == e->cap) {
        int32_t cap = e->cap ? 2 * e->cap : 256;
        sy_tpu1_insn *g = sy_realloc_array(e->insns, (size_t)e->cap, (size_t)cap, sizeof *g);
        if (!g) {
            e->oom = true;
            return;
        }
        e->insns = g;
        e->cap = cap;
    }
    e->insns[e->n++] = in;
}

static int64_t ceil256(int64_t x) { return (x + 255) / 256; }

/* Output positions of a layer after pooling, per image. */
static int64_t pooled(const lite_tpu1_layer *l) {
    return l->act.pool ? (int64_t)l->act.ph * l->act.pw : (int64_t)l->oh * l->ow;
}

/* UB rows of a tensor (n, h*w positions, c channels): its planes of 256 channels. */
static int64_t tensor_rows(int64_t n, int64_t hw, int64_t c) { return ceil256(c) * n * hw; }

static bool is_matrix(const lite_tpu1_layer *l) { return l->h == 1 && l->w == 1 && l->kh == 1 && l->kw == 1; }

/* The tiles of layer l from `first` on: column block nb, K block kb at first + nb * kt + kb. */
static void fill_tiles(const lite_tpu1_layer *l, uint8_t *img, uint16_t *used) {
    int64_t k = (int64_t)l->kh * l->kw * l->c, kt = ceil256(k), nt = ceil256(l->out_c);
    for (int64_t nb = 0; nb < nt; nb++)
        for (int64_t kb = 0; kb < kt; kb++) {
            int64_t t = nb * kt + kb;
            int8_t *tile = (int8_t *)img + t * SY_TPU1_TILE_BYTES;
            int64_t ku = k - kb * 256 < 256 ? k - kb * 256 : 256, nu = l->out_c - nb * 256 < 256 ? l->out_c - nb * 256 : 256;
            used[2 * t] = (uint16_t)ku;
            used[2 * t + 1] = (uint16_t)nu;
            if (!l->weights) continue;
            for (int64_t kk = 0; kk < ku; kk++)
                for (int64_t j = 0; j < nu; j++) tile[kk * 256 + j] = l->weights[(nb * 256 + j) * k + kb * 256 + kk];
        }
}

sy_status lite_tpu1_lower(const lite_tpu1_model *m, sy_tpu1_prog **out) {
    *out = NULL;
    if (m->n_layers < 1) return sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering: the model has no matrix layer");
    /* the two activation regions: even tensors (the input, layer 1's output, ...) and odd ones */
    int64_t region[2] = {0, 0}, tiles = 0;
    const lite_tpu1_layer *l0 = &m->layers[0];
    region[0] = tensor_rows(l0->n, (int64_t)l0->h * l0->w, l0->c);
    for (int32_t i = 0; i < m->n_layers; i++) {
        const lite_tpu1_layer *l = &m->layers[i];
        int64_t rows = tensor_rows(l->n, pooled(l), l->out_c);
        if (rows > region[(i + 1) % 2]) region[(i + 1) % 2] = rows;
        tiles += ceil256((int64_t)l->kh * l->kw * l->c) * ceil256(l->out_c);
        if (l->act.pool && (int64_t)l->oh * l->ow > SY_TPU1_ACC_ROWS / 2)
            return sy_error(SY_ERR_UNSUPPORTED,
                            "TPU v1 lowering: %s pools a %dx%d output per image, %d rows, more than the 2,048 of an "
                            "accumulator half (Activate pools within one)",
                            l->name, l->oh, l->ow, l->oh * l->ow);
    }
    int64_t ub_rows = region[0] + region[1];
    if (ub_rows > SY_TPU1_UB_ROWS)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "TPU v1 lowering: the program needs %lld bytes of unified buffer (two activation regions of "
                        "%lld and %lld rows of 256 bytes); the TPU v1 has %lld (24 MiB)",
                        (long long)ub_rows * 256, (long long)region[0], (long long)region[1],
                        (long long)SY_TPU1_UB_ROWS * 256);
    if (tiles > SY_TPU1_DDR_TILES)
        return sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering: %lld weight tiles (%lld bytes) do not fit 8 GiB of DDR3",
                        (long long)tiles, (long long)tiles * SY_TPU1_TILE_BYTES);
    sy_tpu1_prog *p = sy_calloc(1, sizeof *p);
    if (!p) return sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 lowering: out of memory");
    p->n_tiles = (uint32_t)tiles;
    p->ub_rows = (uint32_t)ub_rows;
    p->weights = sy_calloc(tiles ? (size_t)tiles : 1, SY_TPU1_TILE_BYTES);
    p->tile_used = sy_calloc(tiles ? 2 * (size_t)tiles : 1, sizeof *p->tile_used);
    p->acts = sy_calloc((size_t)m->n_layers, sizeof *p->acts);
    p->convs = sy_calloc((size_t)m->n_layers, sizeof *p->convs);
    emitter e = {0};
    sy_status st = SY_OK;
    if (!p->weights || !p->tile_used || !p->acts || !p->convs) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 lowering: out of memory for %lld weight tiles", (long long)tiles);
        goto fail;
    }
    p->input = m->input;
    p->output = m->output;
    int64_t in_bytes = (int64_t)p->input.n * p->input.h * p->input.w * p->input.c;
    int64_t out_bytes = (int64_t)p->output.n * p->output.h * p->output.w * p->output.c;
    if (in_bytes + out_bytes > UINT32_MAX) {
        st = sy_error(SY_ERR_UNSUPPORTED, "TPU v1 lowering: %lld bytes of input and output pass 4 GiB of host memory",
                      (long long)(in_bytes + out_bytes));
        goto fail;
    }
    p->input.offset = 0;
    p->output.offset = (uint32_t)in_bytes;
    p->host_bytes = (uint32_t)(in_bytes + out_bytes);

    /* the first weights, fetched while the input comes in; then the input, plane by plane, into region 0 */
    emit(&e, (sy_tpu1_insn){.op = SY_TPU1_READ_WEIGHTS, .tile = 0, .rows = (uint32_t)ceil256((int64_t)l0->kh * l0->kw * l0->c)});
    int64_t in_pos = (int64_t)l0->n * l0->h * l0->w;
    for (int64_t j = 0; j < ceil256(l0->c); j++)
        emit(&e, (sy_tpu1_insn){.op = SY_TPU1_READ_HOST, .ub = (uint32_t)(j * in_pos), .host = (uint32_t)(256 * j),
                                .rows = (uint32_t)in_pos,
                                .row_bytes = (uint32_t)(l0->c - 256 * j < 256 ? l0->c - 256 * j : 256),
                                .host_stride = (uint32_t)l0->c});
    int64_t tile0 = 0, half = 0;
    bool hoisted = true;
    for (int32_t i = 0; i < m->n_layers; i++) {
        const lite_tpu1_layer *l = &m->layers[i];
        int64_t k = (int64_t)l->kh * l->kw * l->c, kt = ceil256(k), nt = ceil256(l->out_c);
        fill_tiles(l, p->weights + tile0 * SY_TPU1_TILE_BYTES, p->tile_used + 2 * tile0);
        sy_tpu1_act *a = &p->acts[p->n_acts++];
        *a = l->act;
        a->channels = l->out_c;
        a->bias = sy_malloc((size_t)l->out_c * 4);
        a->mult = sy_malloc((size_t)l->out_c * 4);
        a->shift = sy_malloc((size_t)l->out_c * 4);
        if (!a->bias || !a->mult || !a->shift) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 lowering: out of memory");
            goto fail;
        }
        memcpy(a->bias, l->act.bias, (size_t)l->out_c * 4);
        memcpy(a->mult, l->act.mult, (size_t)l->out_c * 4);
        memcpy(a->shift, l->act.shift, (size_t)l->out_c * 4);
        bool matrix = is_matrix(l);
        uint32_t conv = 0;
        if (!matrix) {
            conv = (uint32_t)p->n_convs;
            p->convs[p->n_convs++] = (sy_tpu1_conv){l->n,  l->h,  l->w,  l->c,  l->kh, l->kw,   l->sh,
                                                    l->sw, l->pt, l->pl, l->oh, l->ow, l->in_zp};
        }
        uint32_t in_ub = i % 2 ? (uint32_t)region[0] : 0, out_ub = i % 2 ? 0 : (uint32_t)region[0];
        int64_t positions = (int64_t)l->n * l->oh * l->ow, per = l->act.pool ? (int64_t)l->oh * l->ow : 1;
        /* chunks of at most an accumulator half, as even as whole images (when pooling) allow */
        int64_t units = positions / per, most = SY_TPU1_ACC_ROWS / 2 / per, chunks = (units + most - 1) / most;
        int64_t chunk = (units + chunks - 1) / chunks * per, out_plane = (int64_t)l->n * pooled(l);
        for (int64_t p0 = 0; p0 < positions; p0 += chunk) {
            int64_t rows = positions - p0 < chunk ? positions - p0 : chunk;
            if (!matrix) emit(&e, (sy_tpu1_insn){.op = SY_TPU1_SET_CONV, .index = conv, .first = (uint32_t)p0});
            for (int64_t nb = 0; nb < nt; nb++) {
                uint32_t acc = (uint32_t)(half++ % 2 * (SY_TPU1_ACC_ROWS / 2));
                if (hoisted) hoisted = false; /* fetched before the last layer's Sync */
                else emit(&e, (sy_tpu1_insn){.op = SY_TPU1_READ_WEIGHTS, .tile = (uint32_t)(tile0 + nb * kt), .rows = (uint32_t)kt});
                for (int64_t kb = 0; kb < kt; kb++) {
                    uint8_t flags = (uint8_t)(SY_TPU1_F_LOAD | (kb ? SY_TPU1_F_ACCUMULATE : 0));
                    if (matrix)
                        emit(&e, (sy_tpu1_insn){.op = SY_TPU1_MATMUL, .flags = flags, .ub = (uint32_t)(in_ub + kb * l->n + p0),
                                                .acc = acc, .rows = (uint32_t)rows});
                    else
                        emit(&e, (sy_tpu1_insn){.op = SY_TPU1_CONVOLVE, .flags = flags, .ub = in_ub, .acc = acc,
                                                .rows = (uint32_t)rows, .kblock = (uint32_t)kb});
                }
                int64_t dst = out_ub + nb * out_plane + (l->act.pool ? p0 / per * pooled(l) : p0);
                emit(&e, (sy_tpu1_insn){.op = SY_TPU1_ACTIVATE, .ub = (uint32_t)dst, .acc = acc, .rows = (uint32_t)rows,
                                        .cblock = (uint32_t)nb, .index = (uint32_t)(p->n_acts - 1)});
            }
        }
        tile0 += kt * nt;
        if (i + 1 < m->n_layers) {
            const lite_tpu1_layer *nx = &m->layers[i + 1];
            emit(&e, (sy_tpu1_insn){.op = SY_TPU1_READ_WEIGHTS, .tile = (uint32_t)tile0,
                                    .rows = (uint32_t)ceil256((int64_t)nx->kh * nx->kw * nx->c)});
            hoisted = true;
        }
        emit(&e, (sy_tpu1_insn){.op = SY_TPU1_SYNC});
    }
    /* the output, plane by plane, from the last layer's region */
    const lite_tpu1_layer *ll = &m->layers[m->n_layers - 1];
    uint32_t out_ub = m->n_layers % 2 ? (uint32_t)region[0] : 0;
    int64_t out_pos = (int64_t)ll->n * pooled(ll);
    for (int64_t j = 0; j < ceil256(ll->out_c); j++)
        emit(&e, (sy_tpu1_insn){.op = SY_TPU1_WRITE_HOST, .ub = (uint32_t)(out_ub + j * out_pos),
                                .host = (uint32_t)(p->output.offset + 256 * j), .rows = (uint32_t)out_pos,
                                .row_bytes = (uint32_t)(ll->out_c - 256 * j < 256 ? ll->out_c - 256 * j : 256),
                                .host_stride = (uint32_t)ll->out_c});
    emit(&e, (sy_tpu1_insn){.op = SY_TPU1_HALT});
    if (e.oom) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1 lowering: out of memory for the instructions");
        goto fail;
    }
    p->insns = e.insns;
    p->n_insns = e.n;
    e.insns = NULL;
    /* the loader's checks, so that nothing it would refuse leaves the compiler */
    uint8_t *buf;
    size_t n;
    if ((st = io_tpu1_encode(p, &buf, &n))) goto fail;
    sy_tpu1_prog_free(p);
    p = NULL;
    st = io_tpu1_parse(buf, n, "the compiled program", out);
    sy_free(buf);
    return st;
fail:
    sy_free(e.insns);
    sy_tpu1_prog_free(p);
    return st;
}

/* ---- the public entry points ------------------------------------------------------------------- */

sy_status sy_tpu1_compile(const char *tflite_path, int32_t batch, sy_tpu1_program **out, char *host_tail,
                          size_t tail_size) {
    *out = NULL;
    if (batch < 1) return sy_error(SY_ERR_INVALID_ARGUMENT, "TPU v1: batch %d; it must be at least 1", batch);
    lite_tpu1_model m = {0};
    sy_status st = lite_tpu1_from_tflite(tflite_path, batch, &m);
    if (!st) st = lite_tpu1_lower(&m, out);
    if (!st && host_tail && tail_size) snprintf(host_tail, tail_size, "%s", m.host_tail);
    lite_tpu1_model_free(&m);
    return st;
}

sy_status sy_tpu1_program_read(const char *path, sy_tpu1_program **out) { return io_tpu1_read(path, out); }

sy_status sy_tpu1_program_write(const sy_tpu1_program *p, const char *path) { return io_tpu1_write(path, p); }

void sy_tpu1_program_free(sy_tpu1_program *p) { sy_tpu1_prog_free(p); }

void sy_tpu1_program_disassemble(const sy_tpu1_program *p, FILE *out) { io_tpu1_disassemble(p, out); }

void sy_tpu1_program_io(const sy_tpu1_program *p, sy_tpu1_io *input, sy_tpu1_io *output) {
    const sy_tpu1_tensor *t[2] = {&p->input, &p->output};
    sy_tpu1_io *o[2] = {input, output};
    for (int i = 0; i < 2; i++) {
        if (!o[i]) continue;
        o[i]->shape[0] = t[i]->n, o[i]->shape[1] = t[i]->h, o[i]->shape[2] = t[i]->w, o[i]->shape[3] = t[i]->c;
        o[i]->scale = t[i]->scale;
        o[i]->zero_point = t[i]->zero_point;
    }
}

sy_status sy_tpu1_run(const sy_tpu1_program *p, const int8_t *input, int8_t *output, sy_tpu1_counters *counters) {
    if (!p) return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_tpu1_run: no program");
    if (!input != !output)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "sy_tpu1_run: give both the input and the output, or neither to time the program");
    sy_tpu1_counters c;
    sy_status st = sy_tpu1_execute(p, input, output, &c);
    if (!st && counters) *counters = c;
    return st;
}
