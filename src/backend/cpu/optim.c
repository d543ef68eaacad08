/*
 * optim.c - the optimizer updates on the cpu backend: SGD (plain, momentum,
 * Nesterov), Adam and RMSprop (plain, momentum, centered), in place.
 *
 * The rules are tf.keras 2.15's (docs/design/keras-semantics.md §3) in the
 * reference kernels' operation order. An update reads the gradient and the
 * parameter and its slots and writes them back: a few flops per element and
 * 12 to 28 bytes of traffic, so it is memory-bound and the loops are written
 * to vectorise: one pass per element, restrict pointers, float math (sqrtf,
 * one division), and per-call constants hoisted out.
 *
 * The result is tf.keras's to the bit (test_golden checks it): Adam's bias
 * correction alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) is computed
 * once per call in float32 with float32 powers (sy_adam_alpha), the
 * constants 1 - beta and 1 - rho are rounded to float from the doubles as
 * Keras does in Python, RMSprop multiplies by 1 / sqrt as Keras's rsqrt, and
 * this file is compiled without FMA contraction (CMakeLists.txt), so each
 * multiply and add rounds separately as in TensorFlow's kernels.
 *
 * Each variant (momentum or not, Nesterov or not, centered or not) is its
 * own loop, selected once per call, so no loop branches per element.
 *
 * Parts are fixed runs of CHUNK elements; an element's update does not
 * depend on any other, so the split is free to follow the size alone.
 */
#include "cpu_internal.h"

#define CHUNK 16384

/* ---- raw updates over n elements ------------------------------------------ */

static void sgd_update_f32_fast(float *restrict w, const float *restrict g, float lr, int64_t n) {
    for (int64_t i = 0; i < n; i++) w[i] -= lr * g[i];
}

static void sgd_momentum_update_f32_fast(float *restrict w, float *restrict vel, const float *restrict g, float lr,
                                         float mom, bool nesterov, int64_t n) {
    if (nesterov) {
        for (int64_t i = 0; i < n; i++) {
            float v = -g[i] * lr + vel[i] * mom;
            vel[i] = v;
            w[i] += -g[i] * lr + v * mom;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            float v = -g[i] * lr + vel[i] * mom;
            vel[i] = v;
            w[i] += v;
        }
    }
}

/* vhat: the running maximum of v (amsgrad), or NULL */
static void adam_update_f32_fast(float *restrict w, float *restrict m, float *restrict v, float *restrict vhat,
                                 const float *restrict g, float alpha, float one_minus_b1, float one_minus_b2, float eps,
                                 int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = m[i] + (gi - m[i]) * one_minus_b1;
        float vi = v[i] + (gi * gi - v[i]) * one_minus_b2;
        m[i] = mi;
        v[i] = vi;
        if (vhat) vi = vhat[i] = vhat[i] > vi ? vhat[i] : vi;
        w[i] -= mi * alpha / (sqrtf(vi) + eps);
    }
}

/* Inlined into each of its four callers with constant flags, so every
 * variant is a straight loop. */
static inline __attribute__((always_inline)) void rmsprop_any(float *restrict w, float *restrict ms,
                                                              float *restrict mom_slot, float *restrict mg,
                                                              const float *restrict g, float lr, float rho,
                                                              float one_minus_rho, float eps, float mom, bool has_mom,
                                                              bool centered, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float s = rho * ms[i] + one_minus_rho * gi * gi;
        ms[i] = s;
        float denom = s;
        if (centered) {
            float a = rho * mg[i] + one_minus_rho * gi;
            mg[i] = a;
            denom -= a * a;
        }
        float inc = lr * gi * (1.0f / sqrtf(denom + eps)); /* Keras: lr * g * rsqrt(denominator) */
        if (has_mom) {
            float u = mom * mom_slot[i] + inc;
            mom_slot[i] = u;
            w[i] -= u;
        } else {
            w[i] -= inc;
        }
    }
}

static void rmsprop_update_f32_fast(float *restrict w, float *restrict ms, const float *restrict g, float lr,
                                    float rho, float one_minus_rho, float eps, int64_t n) {
    rmsprop_any(w, ms, NULL, NULL, g, lr, rho, one_minus_rho, eps, 0, false, false, n);
}
static void rmsprop_momentum_update_f32_fast(float *restrict w, float *restrict ms, float *restrict mom_slot,
                                             const float *restrict g, float lr, float rho, float one_minus_rho,
                                             float eps, float mom, int64_t n) {
    rmsprop_any(w, ms, mom_slot, NULL, g, lr, rho, one_minus_rho, eps, mom, true, false, n);
}
static void rmsprop_centered_update_f32_fast(float *restrict w, float *restrict ms, float *restrict mg,
                                             const float *restrict g, float lr, float rho, float one_minus_rho,
                                             float eps, int64_t n) {
    rmsprop_any(w, ms, NULL, mg, g, lr, rho, one_minus_rho, eps, 0, false, true, n);
}
static void rmsprop_momentum_centered_update_f32_fast(float *restrict w, float *restrict ms, float *restrict mom_slot,
                                                      float *restrict mg, const float *restrict g, float lr, float rho,
                                                      float one_minus_rho, float eps, float mom, int64_t n) {
    rmsprop_any(w, ms, mom_slot, mg, g, lr, rho, one_minus_rho, eps, mom, true, true, n);
}

/* ---- kernels ------------------------------------------------------------------ */

typedef struct optim_job {
    float *w, *s1, *s2, *s3; /* parameter and up to three slots */
    const float *g;
    int64_t n;
    int variant;
    float lr, a, b, c, d; /* per-optimizer constants */
} optim_job;

enum { SGD, SGD_MOMENTUM, SGD_NESTEROV, ADAM, RMSPROP, RMSPROP_MOM, RMSPROP_CENTERED, RMSPROP_MOM_CENTERED };

static void optim_part(void *ctx, int64_t part) {
    const optim_job *j = ctx;
    int64_t b = part * CHUNK, n = sy_min64(CHUNK, j->n - b);
    float *w = j->w + b, *s1 = j->s1 ? j->s1 + b : NULL, *s2 = j->s2 ? j->s2 + b : NULL;
    float *s3 = j->s3 ? j->s3 + b : NULL;
    const float *g = j->g + b;
    switch (j->variant) {
    case SGD: sgd_update_f32_fast(w, g, j->lr, n); break;
    case SGD_MOMENTUM: sgd_momentum_update_f32_fast(w, s1, g, j->lr, j->a, false, n); break;
    case SGD_NESTEROV: sgd_momentum_update_f32_fast(w, s1, g, j->lr, j->a, true, n); break;
    case ADAM: adam_update_f32_fast(w, s1, s2, s3, g, j->a, j->b, j->c, j->d, n); break;
    case RMSPROP: rmsprop_update_f32_fast(w, s1, g, j->lr, j->a, j->d, j->b, n); break;
    case RMSPROP_MOM: rmsprop_momentum_update_f32_fast(w, s1, s2, g, j->lr, j->a, j->d, j->b, j->c, n); break;
    case RMSPROP_CENTERED: rmsprop_centered_update_f32_fast(w, s1, s2, g, j->lr, j->a, j->d, j->b, n); break;
    case RMSPROP_MOM_CENTERED:
        rmsprop_momentum_centered_update_f32_fast(w, s1, s2, s3, g, j->lr, j->a, j->d, j->b, j->c, n);
        break;
    default: SY_ASSERT(!"unknown optimizer variant");
    }
}

static void run_job(const sy_kargs *k, optim_job *j) {
    j->n = sy_shape_count(&k->in_shape[0]);
    j->w = k->in[0];
    j->g = k->in[1];
    j->lr = k->ex->learning_rate;
    sy_parallel_parts(k->ex, (j->n + CHUNK - 1) / CHUNK, optim_part, j);
}

/* inputs: param, grad [, velocity] */
static void sgd_update_run(const sy_kargs *k) {
    optim_job j = {.variant = SGD};
    if (k->n_in > 2) {
        j.variant = k->attr->opt.nesterov ? SGD_NESTEROV : SGD_MOMENTUM;
        j.s1 = k->in[2];
        j.a = k->attr->opt.momentum;
    }
    run_job(k, &j);
}

/* inputs: param, grad, m, v */
static void adam_update_run(const sy_kargs *k) {
    optim_job j = {.variant = ADAM, .s1 = k->in[2], .s2 = k->in[3], .s3 = k->n_in > 4 ? k->in[4] : NULL};
    j.a = sy_adam_alpha(k->ex->learning_rate, k->attr->opt.beta_1, k->attr->opt.beta_2, k->ex->iterations + 1);
    j.b = k->attr->opt.one_minus_beta_1;
    j.c = k->attr->opt.one_minus_beta_2;
    j.d = k->attr->opt.epsilon;
    run_job(k, &j);
}

/* inputs: param, grad, ms [, momentum if momentum > 0] [, mean grad if centered] */
static void rmsprop_update_run(const sy_kargs *k) {
    bool has_mom = k->attr->opt.momentum > 0, centered = k->attr->opt.centered;
    optim_job j = {.s1 = k->in[2], .a = k->attr->opt.rho, .b = k->attr->opt.epsilon, .c = k->attr->opt.momentum,
                   .d = k->attr->opt.one_minus_rho};
    j.variant = has_mom ? (centered ? RMSPROP_MOM_CENTERED : RMSPROP_MOM) : centered ? RMSPROP_CENTERED : RMSPROP;
    if (has_mom || centered) j.s2 = k->in[3];
    if (has_mom && centered) j.s3 = k->in[4];
    run_job(k, &j);
}

const sy_kernel sy_cpu_sgd_update = {sgd_update_run, NULL, NULL};
const sy_kernel sy_cpu_adam_update = {adam_update_run, NULL, NULL};
const sy_kernel sy_cpu_rmsprop_update = {rmsprop_update_run, NULL, NULL};
