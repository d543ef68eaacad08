/*
 * lr_schedule.c - tf.keras 2.15's learning-rate schedules
 * (keras/src/optimizers/schedules/learning_rate_schedule.py), evaluated on
 * the host once a step.
 *
 * How it works: a plan whose optimizer has a schedule sets its learning
 * rate from the store's iteration count each time it is prepared for a
 * step (plan_prepare), before any kernel reads it. The replicas share the
 * store, and every replica prepares its plan in phase 1 of a step, before
 * thread 0 counts the step, so all of them, and the update that runs from
 * replica 0's plan, see schedule(iterations) -- Keras's
 * _compute_current_learning_rate at the top of apply_gradients, before
 * iterations.assign_add(1). A multi-step execution prepares the plans once
 * per step, so the rate follows each step; a run resumed from a checkpoint
 * restores the iteration count and with it the rate.
 *
 * The arithmetic is Keras's graph, op for op, in float32, as fit() runs it
 * (a tf.function, after grappler): every argument is cast to float32
 * (tf.cast(self.decay_steps, dtype)), the step too, and each TensorFlow op
 * rounds once (this file is compiled with -ffp-contract=off so that no
 * multiply and add fuse); divisions by constants are multiplies by float32
 * reciprocals and denormals flush to zero, as grappler and TensorFlow make
 * them. Where Keras mixes a Python float into Python arithmetic before the
 * tensor sees it -- CosineDecay's (1 - self.alpha) -- the double is computed
 * first and rounded once, as Python does. docs/design/lr-schedules.md has
 * the measurements.
 */
#include "compiler_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

static const char *const schedule_names[SY_LR_SCHEDULE_KIND_COUNT] = {
    [SY_LR_EXPONENTIAL_DECAY] = "ExponentialDecay",   [SY_LR_PIECEWISE_CONSTANT_DECAY] = "PiecewiseConstantDecay",
    [SY_LR_POLYNOMIAL_DECAY] = "PolynomialDecay",     [SY_LR_INVERSE_TIME_DECAY] = "InverseTimeDecay",
    [SY_LR_COSINE_DECAY] = "CosineDecay",             [SY_LR_COSINE_DECAY_RESTARTS] = "CosineDecayRestarts",
};

const char *sy_lr_schedule_class_name(sy_lr_schedule_kind kind) {
    return (unsigned)kind < SY_LR_SCHEDULE_KIND_COUNT ? schedule_names[kind] : NULL;
}

static sy_lr_schedule schedule_of(sy_lr_schedule_kind kind, double initial, double decay_steps) {
    sy_lr_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.initial_learning_rate = initial;
    s.decay_steps = decay_steps;
    return s;
}

sy_lr_schedule sy_lr_exponential_decay(double initial, double decay_steps, double decay_rate, bool staircase) {
    sy_lr_schedule s = schedule_of(SY_LR_EXPONENTIAL_DECAY, initial, decay_steps);
    s.decay_rate = decay_rate;
    s.staircase = staircase;
    return s;
}

sy_lr_schedule sy_lr_inverse_time_decay(double initial, double decay_steps, double decay_rate, bool staircase) {
    sy_lr_schedule s = sy_lr_exponential_decay(initial, decay_steps, decay_rate, staircase);
    s.kind = SY_LR_INVERSE_TIME_DECAY;
    return s;
}

sy_lr_schedule sy_lr_piecewise_constant_decay(int32_t n, const double *boundaries, const double *values) {
    sy_lr_schedule s = schedule_of(SY_LR_PIECEWISE_CONSTANT_DECAY, 0, 0);
    s.n_boundaries = n;
    for (int32_t i = 0; i >= 0 && i < n && i < SY_LR_SCHEDULE_MAX_BOUNDARIES; i++) s.boundaries[i] = boundaries[i];
    for (int32_t i = 0; i >= 0 && i <= n && i <= SY_LR_SCHEDULE_MAX_BOUNDARIES; i++) s.values[i] = values[i];
    return s;
}

sy_lr_schedule sy_lr_polynomial_decay(double initial, double decay_steps, double end_learning_rate, double power,
                                      bool cycle) {
    sy_lr_schedule s = schedule_of(SY_LR_POLYNOMIAL_DECAY, initial, decay_steps);
    s.end_learning_rate = end_learning_rate;
    s.power = power;
    s.cycle = cycle;
    return s;
}

sy_lr_schedule sy_lr_cosine_decay(double initial, double decay_steps, double alpha) {
    sy_lr_schedule s = schedule_of(SY_LR_COSINE_DECAY, initial, decay_steps);
    s.alpha = alpha;
    return s;
}

sy_lr_schedule sy_lr_cosine_decay_restarts(double initial, double first_decay_steps, double t_mul, double m_mul,
                                           double alpha) {
    sy_lr_schedule s = schedule_of(SY_LR_COSINE_DECAY_RESTARTS, initial, first_decay_steps);
    s.t_mul = t_mul;
    s.m_mul = m_mul;
    s.alpha = alpha;
    return s;
}

#define REFUSE(...) return sy_error(SY_ERR_INVALID_ARGUMENT, __VA_ARGS__)

sy_status sy_lr_schedule_check(const sy_lr_schedule *s) {
    if (s->kind == SY_LR_SCHEDULE_NONE) return SY_OK;
    const char *name = sy_lr_schedule_class_name(s->kind);
    if (!name)
        REFUSE("unknown learning rate schedule kind %d; expected ExponentialDecay, PiecewiseConstantDecay, "
               "PolynomialDecay, InverseTimeDecay, CosineDecay or CosineDecayRestarts",
               (int)s->kind);
    if (s->kind == SY_LR_PIECEWISE_CONSTANT_DECAY) {
        if (s->n_boundaries < 1 || s->n_boundaries > SY_LR_SCHEDULE_MAX_BOUNDARIES)
            REFUSE("PiecewiseConstantDecay: %d boundaries; expected 1 to %d (and one more value than boundaries)",
                   s->n_boundaries, SY_LR_SCHEDULE_MAX_BOUNDARIES);
        for (int32_t i = 0; i < s->n_boundaries; i++) {
            if (!isfinite(s->boundaries[i]) || (i > 0 && !(s->boundaries[i] > s->boundaries[i - 1])))
                REFUSE("PiecewiseConstantDecay: boundaries must be finite and strictly increasing; boundaries[%d] is "
                       "%g after %g",
                       i, s->boundaries[i], i > 0 ? s->boundaries[i - 1] : -INFINITY);
        }
        for (int32_t i = 0; i <= s->n_boundaries; i++)
            if (!isfinite(s->values[i])) REFUSE("PiecewiseConstantDecay: values[%d] is %g; expected a finite number", i, s->values[i]);
        return SY_OK;
    }
    const char *steps = s->kind == SY_LR_COSINE_DECAY_RESTARTS ? "first_decay_steps" : "decay_steps";
    if (!isfinite(s->initial_learning_rate))
        REFUSE("%s: initial_learning_rate %g must be a finite number", name, s->initial_learning_rate);
    if (!(s->decay_steps > 0) || isinf(s->decay_steps))
        REFUSE("%s: %s %g must be a finite number > 0 (the step is divided by it)", name, steps, s->decay_steps);
    const struct { const char *what; double v; bool used; } finite[] = {
        {"decay_rate", s->decay_rate, s->kind == SY_LR_EXPONENTIAL_DECAY || s->kind == SY_LR_INVERSE_TIME_DECAY},
        {"end_learning_rate", s->end_learning_rate, s->kind == SY_LR_POLYNOMIAL_DECAY},
        {"power", s->power, s->kind == SY_LR_POLYNOMIAL_DECAY},
        {"alpha", s->alpha, s->kind == SY_LR_COSINE_DECAY || s->kind == SY_LR_COSINE_DECAY_RESTARTS},
        {"warmup_target", s->warmup_target, s->kind == SY_LR_COSINE_DECAY && s->has_warmup_target},
        {"m_mul", s->m_mul, s->kind == SY_LR_COSINE_DECAY_RESTARTS}};
    for (size_t i = 0; i < sizeof finite / sizeof finite[0]; i++)
        if (finite[i].used && !isfinite(finite[i].v))
            REFUSE("%s: %s %g must be a finite number", name, finite[i].what, finite[i].v);
    if (s->kind == SY_LR_COSINE_DECAY && (!(s->warmup_steps >= 0) || isinf(s->warmup_steps)))
        REFUSE("CosineDecay: warmup_steps %g must be a finite number >= 0", s->warmup_steps);
    if (s->kind == SY_LR_COSINE_DECAY_RESTARTS && (!(s->t_mul > 0) || isinf(s->t_mul)))
        REFUSE("CosineDecayRestarts: t_mul %g must be a finite number > 0 (each period is t_mul times the last)",
               s->t_mul);
    return SY_OK;
}

/* TensorFlow runs with denormals flushed to zero (FTZ/DAZ): a rate that
 * decays below FLT_MIN is 0, not a denormal. */
static float ftz(float x) { return fabsf(x) < FLT_MIN ? 0.0f : x; }

/* Grappler's constant folding turns x / c, c a constant, into
 * x * (1 / c) with 1 / c rounded to float32 (ReduceDivToReciprocalMul).
 * It does so in every schedule's graph except inside the tf.cond branches
 * of CosineDecay with warmup, whose operands arrive as the branch's inputs. */
static float recip(float c) { return 1.0f / c; }

/* CosineDecay's _decay_function: 0.5 * (1 + cos(pi * step / decay_steps)),
 * then (1 - alpha) * that + alpha with alpha a Python float. Outside a
 * tf.cond, constant folding also pushes pi into the reciprocal:
 * pi * (step * (1 / d)) becomes (pi * (1 / d)) * step. */
static float cosine_decay(const sy_lr_schedule *s, float step, float decay_steps, float from, bool in_cond) {
    float pi = (float)M_PI;
    float angle = in_cond ? pi * (step / decay_steps) : (pi * recip(decay_steps)) * step;
    float cosine = 0.5f * (1.0f + cosf(angle));
    float decayed = (float)(1.0 - s->alpha) * cosine + (float)s->alpha;
    return from * decayed;
}

/* CosineDecayRestarts.__call__ (alpha, t_mul, m_mul cast to float32 first).
 * TensorFlow's log is Eigen's, which can differ from logf in the last bit;
 * it only decides i_restart, so only a step at a period's very edge could
 * tell them apart. */
static float cosine_restarts(const sy_lr_schedule *s, float step) {
    float initial = (float)s->initial_learning_rate, first = (float)s->decay_steps, alpha = (float)s->alpha;
    float t_mul = (float)s->t_mul, m_mul = (float)s->m_mul;
    float fraction = step * recip(first), i_restart;
    if (t_mul == 1.0f) {
        i_restart = floorf(fraction);
        fraction -= i_restart;
    } else {
        i_restart = floorf(recip(logf(t_mul)) * logf(1.0f - fraction * (1.0f - t_mul)));
        float t_i = ftz(powf(t_mul, i_restart));
        float sum_r = recip(1.0f - t_mul) * (1.0f - t_i);
        fraction = (fraction - sum_r) / t_i;
    }
    float m_fac = ftz(powf(m_mul, i_restart));
    float cosine = (1.0f + cosf((float)M_PI * fraction)) * (0.5f * m_fac);
    float decayed = (1.0f - alpha) * cosine + alpha;
    return initial * decayed;
}

/* Each as the graph tf.keras 2.15's fit() runs (a tf.function, after
 * grappler), which is what training sees; eager calls of a schedule divide
 * where the graph multiplies by a reciprocal, and differ in the last bit. */
static float schedule_value(const sy_lr_schedule *s, int64_t iteration) {
    float step = (float)iteration, initial = (float)s->initial_learning_rate, decay_steps = (float)s->decay_steps;
    switch (s->kind) {
    case SY_LR_EXPONENTIAL_DECAY: {
        float p = step * recip(decay_steps);
        if (s->staircase) p = floorf(p);
        return initial * ftz(powf((float)s->decay_rate, p));
    }
    case SY_LR_INVERSE_TIME_DECAY: {
        float p = step * recip(decay_steps);
        if (s->staircase) p = floorf(p);
        return initial / (1.0f + (float)s->decay_rate * p);
    }
    case SY_LR_PIECEWISE_CONSTANT_DECAY: {
        /* the boundaries are cast to the step's int64 (tf.cast truncates) */
        int32_t i = 0;
        while (i < s->n_boundaries && iteration > (int64_t)s->boundaries[i]) i++;
        return (float)s->values[i];
    }
    case SY_LR_POLYNOMIAL_DECAY: {
        float end = (float)s->end_learning_rate, power = (float)s->power, p;
        if (s->cycle) {
            float multiplier = step == 0 ? 1.0f : ceilf(step * recip(decay_steps));
            p = step / (decay_steps * multiplier);
        } else {
            p = (step < decay_steps ? step : decay_steps) * recip(decay_steps);
        }
        return (initial - end) * ftz(powf(1.0f - p, power)) + end;
    }
    case SY_LR_COSINE_DECAY: {
        if (!s->has_warmup_target)
            return cosine_decay(s, step < decay_steps ? step : decay_steps, decay_steps, initial, false);
        float target = (float)s->warmup_target, warmup = (float)s->warmup_steps, end = decay_steps + warmup;
        if (step > end) step = end;
        if (step < warmup) return (target - initial) * (step / warmup) + initial;
        return cosine_decay(s, step - warmup, decay_steps, target, true);
    }
    case SY_LR_COSINE_DECAY_RESTARTS: return cosine_restarts(s, step);
    default: return NAN;
    }
}

float sy_lr_schedule_value(const sy_lr_schedule *s, int64_t iteration) { return ftz(schedule_value(s, iteration)); }
