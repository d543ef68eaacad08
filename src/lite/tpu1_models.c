/*
 * tpu1_models.c - the paper's workloads built directly as TPU v1 programs
 * (issue 18, point 5), for validating the emulator against Table 3 of
 * Jouppi et al. (ISCA 2017): multilayer perceptrons shaped like MLP0 and
 * MLP1, a convolution stack shaped like CNN0, and a stack of fully
 * connected layers for the roofline. Weights are seeded random int8 and
 * the requantization constants plausible ones: the counters do not depend
 * on values, and the programs still compute (slowly) if given inputs.
 *
 * Table 1 gives each app's layers, total weights and batch; the widths are
 * unpublished, so they are chosen here and in docs/design/tpu-v1.md. CNN0
 * is 16 3x3 convolutions of 256 channels on a 19x19 board at batch 8:
 * Table 1's 2,888 operations per weight byte is exactly 8 x 19 x 19, the
 * positions each weight meets.
 */
#include "lite_internal.h"

#include <string.h>

/* One layer on (n, hw, hw, c): a k x k convolution with SAME padding, stride 1 (k = 1 and hw = 1: fully
 * connected), relu, output scale chosen so that sums of random products land in int8's range. */
static sy_status add(lite_tpu1_model *m, int32_t n, int32_t hw, int32_t c, int32_t out_c, int32_t k, sy_rng *rng) {
    lite_tpu1_layer *l = lite_tpu1_add_layer(m, out_c);
    int64_t kk = (int64_t)k * k * c;
    if (l) l->weights = sy_malloc((size_t)(kk * out_c));
    if (!l || !l->weights)
        return sy_error(SY_ERR_OUT_OF_MEMORY, "TPU v1: out of memory for a %lld x %d layer", (long long)kk, out_c);
    l->n = n, l->h = l->w = l->oh = l->ow = hw, l->c = c;
    l->kh = l->kw = k, l->sh = l->sw = 1, l->pt = l->pl = (k - 1) / 2;
    snprintf(l->name, sizeof l->name, "layer %d", m->n_layers);
    for (int64_t i = 0; i < kk * out_c; i += 4) { /* four weights from each draw: tens of millions of them */
        uint32_t r = sy_rng_u32(rng);
        for (int64_t j = i; j < i + 4 && j < kk * out_c; j++, r >>= 8) l->weights[j] = (int8_t)((int32_t)(r & 0xff) % 255 - 127);
    }
    int32_t mult, shift;
    sy_q_multiplier(1.0 / (64.0 * (double)kk), &mult, &shift);
    for (int32_t ch = 0; ch < out_c; ch++) l->act.mult[ch] = mult, l->act.shift[ch] = shift;
    l->act.out_zp = 0, l->act.act_min = 0, l->act.act_max = 127; /* relu */
    return SY_OK;
}

static sy_status build(lite_tpu1_model *m, int32_t n, int32_t hw, int32_t k, const int32_t *widths, int32_t layers,
                       uint64_t seed) {
    sy_rng rng = sy_rng_new(seed, 18);
    sy_status st = SY_OK;
    for (int32_t i = 0; i < layers && !st; i++) st = add(m, n, hw, widths[i], widths[i + 1], k, &rng);
    m->input = (sy_tpu1_tensor){.n = n, .h = hw, .w = hw, .c = widths[0], .scale = 1.0f};
    m->output = (sy_tpu1_tensor){.n = n, .h = hw, .w = hw, .c = widths[layers], .scale = 1.0f};
    return st;
}

static const struct {
    const char *name;
    int32_t batch, hw, k, layers;
    int32_t widths[20];
} paper[] = {
    /* MLP0: 5 layers, 20M weights, batch 200 */
    {"mlp0", 200, 1, 1, 5, {2560, 2048, 2048, 2048, 2048, 1280}},
    /* MLP1: 4 layers, 5M weights, batch 168 */
    {"mlp1", 168, 1, 1, 4, {4096, 768, 768, 768, 768}},
    /* CNN0: 16 convolutions, 8M weights (here 9.4M: 256 channels fill the array), batch 8 on 19x19 */
    {"cnn0", 8, 19, 3, 16, {256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256}},
    /* the roofline's sweep: fully connected layers 256 -> 4096 -> 4096 -> 4096 -> 256 (35.7M weights; narrow ends
     * so that PCIe moves little), batch from the caller */
    {"fc", 1024, 1, 1, 4, {256, 4096, 4096, 4096, 256}},
};

const char *sy_tpu1_paper_models(void) { return "mlp0, mlp1, cnn0, fc"; }

sy_status sy_tpu1_paper_model(const char *name, int32_t batch, uint64_t seed, sy_tpu1_program **out) {
    *out = NULL;
    for (size_t i = 0; i < sizeof paper / sizeof paper[0]; i++) {
        if (strcmp(paper[i].name, name)) continue;
        if (batch < 0 || batch > 65536)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "TPU v1 model '%s': batch %d; give 1 to 65536 (0: the paper's %d)",
                            name, batch, paper[i].batch);
        lite_tpu1_model m = {0};
        sy_status st = build(&m, batch ? batch : paper[i].batch, paper[i].hw, paper[i].k, paper[i].widths,
                             paper[i].layers, seed);
        if (!st) st = lite_tpu1_lower(&m, out);
        lite_tpu1_model_free(&m);
        return st;
    }
    return sy_error(SY_ERR_NOT_FOUND, "TPU v1: no model '%s'; the paper's are: %s", name, sy_tpu1_paper_models());
}
