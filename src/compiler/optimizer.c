/*
 * optimizer.c - the optimizers as graph rewrites: for each trainable
 * parameter with a gradient, the slot variables its optimizer keeps and one
 * update op that applies tf.keras's rule in place (kernels in
 * backend/cpu/ref_kernels.inc; the rules are quoted in
 * docs/design/keras-semantics.md).
 *
 * Slots are variables named "<param>/<slot>" (Keras's slot names: momentum,
 * m, v, vhat, velocity, average_gradient), created zeroed in the store's slot
 * block, so train plans of one store share optimizer state.
 */
#include "compiler_internal.h"

#include <math.h>
#include <string.h>

sy_optimizer sy_optimizer_sgd(float learning_rate, double momentum, bool nesterov) {
    sy_optimizer o;
    memset(&o, 0, sizeof o);
    o.kind = SY_OPTIMIZER_SGD;
    o.learning_rate = learning_rate;
    o.momentum = momentum;
    o.nesterov = nesterov;
    return o;
}

sy_optimizer sy_optimizer_adam(float learning_rate) {
    sy_optimizer o;
    memset(&o, 0, sizeof o);
    o.kind = SY_OPTIMIZER_ADAM;
    o.learning_rate = learning_rate;
    o.beta_1 = 0.9;
    o.beta_2 = 0.999;
    o.epsilon = 1e-7;
    return o;
}

sy_optimizer sy_optimizer_rmsprop(float learning_rate) {
    sy_optimizer o;
    memset(&o, 0, sizeof o);
    o.kind = SY_OPTIMIZER_RMSPROP;
    o.learning_rate = learning_rate;
    o.rho = 0.9;
    o.epsilon = 1e-7;
    return o;
}

/* issue 17, optimizers */
static const char *const class_names[SY_OPTIMIZER_KIND_COUNT] = {
    [SY_OPTIMIZER_SGD] = "SGD",           [SY_OPTIMIZER_ADAM] = "Adam",       [SY_OPTIMIZER_RMSPROP] = "RMSprop",
    [SY_OPTIMIZER_ADAMW] = "AdamW",       [SY_OPTIMIZER_ADADELTA] = "Adadelta", [SY_OPTIMIZER_ADAGRAD] = "Adagrad",
    [SY_OPTIMIZER_ADAMAX] = "Adamax",     [SY_OPTIMIZER_ADAFACTOR] = "Adafactor", [SY_OPTIMIZER_NADAM] = "Nadam",
    [SY_OPTIMIZER_FTRL] = "Ftrl",         [SY_OPTIMIZER_LION] = "Lion",
};

const char *sy_optimizer_class_name(sy_optimizer_kind kind) {
    return (unsigned)kind < SY_OPTIMIZER_KIND_COUNT ? class_names[kind] : NULL;
}

/* tf.keras 2.15's defaults (keras/src/optimizers/<name>.py, __init__) */
sy_optimizer sy_optimizer_keras(sy_optimizer_kind kind) {
    sy_optimizer o;
    switch (kind) {
    case SY_OPTIMIZER_SGD: return sy_optimizer_sgd(0.01f, 0, false);
    case SY_OPTIMIZER_RMSPROP: return sy_optimizer_rmsprop(0.001f);
    default: o = sy_optimizer_adam(0.001f); break;
    }
    o.kind = kind;
    switch (kind) {
    case SY_OPTIMIZER_ADAMW: o.weight_decay = 0.004; break;
    case SY_OPTIMIZER_ADADELTA: o.rho = 0.95; break;
    case SY_OPTIMIZER_ADAGRAD: o.initial_accumulator_value = 0.1; break;
    case SY_OPTIMIZER_ADAFACTOR:
        o.beta_2_decay = -0.8;
        o.epsilon_1 = 1e-30;
        o.epsilon_2 = 1e-3;
        o.clip_threshold = 1.0;
        o.relative_step = true;
        break;
    case SY_OPTIMIZER_FTRL:
        o.learning_rate_power = -0.5;
        o.initial_accumulator_value = 0.1;
        break;
    case SY_OPTIMIZER_LION:
        o.learning_rate = 1e-4f;
        o.beta_2 = 0.99;
        break;
    default: break;
    }
    return o;
}

#define REFUSE(...) return sy_error(SY_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/* The arguments every optimizer takes (keras/src/optimizers/optimizer.py). */
static sy_status check_common(const char *name, const sy_optimizer *o) {
    if (o->schedule.kind == SY_LR_SCHEDULE_NONE && !(o->learning_rate >= 0)) REFUSE("%s: learning_rate %g must be >= 0", name, (double)o->learning_rate);
    if (o->clipnorm != 0 && o->global_clipnorm != 0)
        REFUSE("%s: at most one of clipnorm and global_clipnorm can be set; received clipnorm=%g, global_clipnorm=%g",
               name, o->clipnorm, o->global_clipnorm);
    const struct { const char *what; double v; } nonneg[] = {{"weight_decay", o->weight_decay}, {"clipnorm", o->clipnorm},
                                                             {"clipvalue", o->clipvalue},
                                                             {"global_clipnorm", o->global_clipnorm}};
    for (size_t i = 0; i < sizeof nonneg / sizeof nonneg[0]; i++)
        if (!(nonneg[i].v >= 0) || isinf(nonneg[i].v))
            REFUSE("%s: %s %g must be a finite number >= 0 (0: not set)", name, nonneg[i].what, nonneg[i].v);
    return SY_OK;
}

sy_status optimizer_check(const sy_optimizer *o) {
    if (o->kind == SY_OPTIMIZER_NONE) return SY_OK;
    const char *name = sy_optimizer_class_name(o->kind);
    if (!name)
        REFUSE("unknown optimizer kind %d; expected SGD, Adam, RMSprop, AdamW, Adadelta, Adagrad, Adamax, Adafactor, "
               "Nadam, Ftrl or Lion",
               (int)o->kind);
    sy_status st = check_common(name, o);
    if (!st) st = sy_lr_schedule_check(&o->schedule); /* issue 17, learning-rate schedules */
    if (st) return st;
    sy_optimizer_kind k = o->kind;
    bool adam_like = k == SY_OPTIMIZER_ADAM || k == SY_OPTIMIZER_ADAMW || k == SY_OPTIMIZER_ADAMAX ||
                     k == SY_OPTIMIZER_NADAM;
    if ((k == SY_OPTIMIZER_SGD || k == SY_OPTIMIZER_RMSPROP) && !(o->momentum >= 0 && o->momentum <= 1))
        REFUSE("%s: momentum %g must be in [0, 1]", name, (double)o->momentum);
    if (adam_like && !(o->beta_1 >= 0 && o->beta_1 < 1 && o->beta_2 >= 0 && o->beta_2 < 1))
        REFUSE("%s: beta_1 %g and beta_2 %g must be in [0, 1)", name, (double)o->beta_1, (double)o->beta_2);
    if (k == SY_OPTIMIZER_LION && !(o->beta_1 > 0 && o->beta_1 <= 1))
        REFUSE("Lion: beta_1 %g must be in (0, 1]; otherwise the optimizer degenerates to SignSGD", o->beta_1);
    if (k == SY_OPTIMIZER_LION && !(o->beta_2 >= 0 && o->beta_2 <= 1))
        REFUSE("Lion: beta_2 %g must be in [0, 1]", o->beta_2);
    if ((k == SY_OPTIMIZER_RMSPROP || k == SY_OPTIMIZER_ADADELTA) && !(o->rho >= 0 && o->rho <= 1))
        REFUSE("%s: rho %g must be in [0, 1]", name, (double)o->rho);
    if (k != SY_OPTIMIZER_SGD && k != SY_OPTIMIZER_ADAFACTOR && k != SY_OPTIMIZER_FTRL && k != SY_OPTIMIZER_LION &&
        !(o->epsilon >= 0))
        REFUSE("%s: epsilon %g must be >= 0", name, (double)o->epsilon);
    if ((k == SY_OPTIMIZER_ADAGRAD || k == SY_OPTIMIZER_FTRL) && !(o->initial_accumulator_value >= 0))
        REFUSE("%s: initial_accumulator_value %g needs to be positive or zero", name, o->initial_accumulator_value);
    if (k == SY_OPTIMIZER_ADAGRAD && o->initial_accumulator_value == 0 && o->epsilon == 0)
        REFUSE("Adagrad: initial_accumulator_value and epsilon are both 0: the first update divides by zero");
    if (k == SY_OPTIMIZER_ADAFACTOR) {
        if (!(o->epsilon_1 >= 0 && o->epsilon_2 >= 0))
            REFUSE("Adafactor: epsilon_1 %g and epsilon_2 %g must be >= 0", o->epsilon_1, o->epsilon_2);
        if (!(o->clip_threshold > 0)) REFUSE("Adafactor: clip_threshold %g must be > 0", o->clip_threshold);
        if (!(o->beta_2_decay <= 0)) REFUSE("Adafactor: beta_2_decay %g must be <= 0", o->beta_2_decay);
    }
    if (k == SY_OPTIMIZER_FTRL) {
        if (!(o->learning_rate_power <= 0))
            REFUSE("Ftrl: learning_rate_power %g needs to be negative or zero", o->learning_rate_power);
        const struct { const char *what; double v; } reg[] = {
            {"l1_regularization_strength", o->l1_regularization_strength},
            {"l2_regularization_strength", o->l2_regularization_strength},
            {"l2_shrinkage_regularization_strength", o->l2_shrinkage_regularization_strength}, {"beta", o->beta}};
        for (size_t i = 0; i < sizeof reg / sizeof reg[0]; i++)
            if (!(reg[i].v >= 0)) REFUSE("Ftrl: %s %g needs to be positive or zero", reg[i].what, reg[i].v);
        if (o->schedule.kind == SY_LR_SCHEDULE_NONE && !(o->learning_rate > 0)) REFUSE("Ftrl: learning_rate %g must be > 0 (the update divides by it)", (double)o->learning_rate);
    }
    return SY_OK;
}

/* A slot variable "<param>/<slot_name>" of the given shape, filled as init says. */
static sy_node slot_of(sy_graph *g, sy_node param, const char *slot_name, sy_shape shape, sy_init init) {
    char name[512];
    const sy_node_rec *p = graph_node(g, param);
    snprintf(name, sizeof name, "%s/%s", p->name, slot_name);
    sy_node s = sy_graph_param(g, name, p->dtype, shape, init);
    if (s != SY_NONE) sy_graph_set_trainable(g, s, false);
    return s;
}

static sy_node slot(sy_graph *g, sy_node param, const char *slot_name) {
    return slot_of(g, param, slot_name, graph_node(g, param)->shape, sy_init_zeros());
}

sy_node optimizer_add_update(sy_graph *g, const sy_optimizer *o, sy_node param, sy_node grad) {
    sy_attrs at;
    memset(&at, 0, sizeof at);
    at.opt.momentum = (float)o->momentum;
    at.opt.nesterov = o->nesterov;
    at.opt.beta_1 = (float)o->beta_1;
    at.opt.beta_2 = (float)o->beta_2;
    at.opt.epsilon = (float)o->epsilon;
    at.opt.rho = (float)o->rho;
    at.opt.one_minus_beta_1 = (float)(1.0 - o->beta_1);
    at.opt.one_minus_beta_2 = (float)(1.0 - o->beta_2);
    at.opt.one_minus_rho = (float)(1.0 - o->rho);
    at.opt.centered = o->centered;
    at.opt.amsgrad = o->amsgrad;
    /* issue 17, optimizers */
    at.opt.beta_2_decay = (float)o->beta_2_decay;
    at.opt.epsilon_1 = (float)o->epsilon_1;
    at.opt.epsilon_2 = (float)o->epsilon_2;
    at.opt.clip_threshold = (float)o->clip_threshold;
    at.opt.relative_step = o->relative_step;
    at.opt.lr_power = (float)-o->learning_rate_power; /* Keras: tf.pow(accum, -learning_rate_power) */
    at.opt.l1 = (float)o->l1_regularization_strength;
    at.opt.l2 = (float)o->l2_regularization_strength;
    at.opt.two_l2_shrinkage = (float)(2 * o->l2_shrinkage_regularization_strength); /* Python's 2 * l2s */
    at.opt.ftrl_beta = (float)o->beta;
    const sy_shape shape = graph_node(g, param)->shape;
    sy_node in[5] = {param, grad, SY_NONE, SY_NONE, SY_NONE};
    int n = 2;
    sy_op op;
    switch (o->kind) {
    case SY_OPTIMIZER_SGD:
        op = SY_OP_SGD_UPDATE;
        if (o->momentum > 0) in[n++] = slot(g, param, "momentum");
        break;
    case SY_OPTIMIZER_ADAM:
    case SY_OPTIMIZER_ADAMW: /* Adam's rule; the weight decay runs before it (optimizer_before_update) */
        op = SY_OP_ADAM_UPDATE;
        in[n++] = slot(g, param, "m");
        in[n++] = slot(g, param, "v");
        if (o->amsgrad) in[n++] = slot(g, param, "vhat");
        break;
    case SY_OPTIMIZER_RMSPROP:
        op = SY_OP_RMSPROP_UPDATE;
        in[n++] = slot(g, param, "velocity");
        if (o->momentum > 0) in[n++] = slot(g, param, "momentum");
        if (o->centered) in[n++] = slot(g, param, "average_gradient");
        break;
    case SY_OPTIMIZER_ADADELTA:
        op = SY_OP_ADADELTA_UPDATE;
        in[n++] = slot(g, param, "accumulated_grad");
        in[n++] = slot(g, param, "accumulated_delta_var");
        break;
    case SY_OPTIMIZER_ADAGRAD:
        op = SY_OP_ADAGRAD_UPDATE;
        in[n++] = slot_of(g, param, "accumulator", shape, sy_init_constant(o->initial_accumulator_value));
        break;
    case SY_OPTIMIZER_ADAMAX:
        op = SY_OP_ADAMAX_UPDATE;
        in[n++] = slot(g, param, "m");
        in[n++] = slot(g, param, "u");
        break;
    case SY_OPTIMIZER_ADAFACTOR:
        op = SY_OP_ADAFACTOR_UPDATE;
        in[n++] = slot(g, param, "v");
        if (shape.rank >= 2) { /* factored: r drops the last axis, c the next-to-last (Keras's build) */
            sy_shape r = shape, c = shape;
            r.rank--;
            c.rank--;
            c.dims[c.rank - 1] = shape.dims[shape.rank - 1];
            in[n++] = slot_of(g, param, "r", r, sy_init_zeros());
            in[n++] = slot_of(g, param, "c", c, sy_init_zeros());
        }
        break;
    case SY_OPTIMIZER_NADAM: {
        op = SY_OP_NADAM_UPDATE;
        in[n++] = slot(g, param, "m");
        in[n++] = slot(g, param, "v");
        /* one scalar for all weights, named like no weight's slot: made with the first weight's update */
        sy_node u = SY_NONE;
        for (int64_t i = 0; i < g->n_nodes && u == SY_NONE; i++)
            if (g->nodes[i].op == SY_OP_PARAM && strcmp(g->nodes[i].name, NADAM_U_PRODUCT) == 0) u = (sy_node)i;
        if (u == SY_NONE) {
            u = sy_graph_param(g, NADAM_U_PRODUCT, graph_node(g, param)->dtype, sy_shape_of(0), sy_init_constant(1));
            if (u != SY_NONE) sy_graph_set_trainable(g, u, false);
        }
        in[n++] = u;
        break;
    }
    case SY_OPTIMIZER_FTRL:
        op = SY_OP_FTRL_UPDATE;
        in[n++] = slot_of(g, param, "accumulator", shape, sy_init_constant(o->initial_accumulator_value));
        in[n++] = slot(g, param, "linear");
        break;
    default:
        op = SY_OP_LION_UPDATE;
        in[n++] = slot(g, param, "m");
        break;
    }
    for (int i = 2; i < n; i++)
        if (in[i] == SY_NONE) return SY_NONE;
    return graph_add(g, op, in, n, &at, NULL);
}

/* ---- before the updates: clipping, weight decay, Nadam's u_product ----------------- */

bool optimizer_has_prologue(const sy_optimizer *o) {
    return o->kind != SY_OPTIMIZER_NONE && (o->clipnorm > 0 || o->clipvalue > 0 || o->global_clipnorm > 0 ||
                                            o->weight_decay > 0 || o->kind == SY_OPTIMIZER_NADAM);
}

/* sum of squares of a weight's gradient, in double */
static double sum_squares(const optimizer_var *v) {
    double s = 0;
    if (v->dtype == SY_F64)
        for (int64_t i = 0; i < v->n; i++) s += ((const double *)v->g)[i] * ((const double *)v->g)[i];
    else
        for (int64_t i = 0; i < v->n; i++) s += (double)((const float *)v->g)[i] * ((const float *)v->g)[i];
    return s;
}

/* g = g * mul / div elementwise (div 1: a plain scale), in the gradient's float type */
static void scale_grad(const optimizer_var *v, float mul, float div) {
    if (v->dtype == SY_F64) {
        double *g = v->g;
        for (int64_t i = 0; i < v->n; i++) g[i] = g[i] * mul / div;
    } else {
        float *g = v->g;
        for (int64_t i = 0; i < v->n; i++) g[i] = g[i] * mul / div;
    }
}

/* Keras's apply_gradients before update_step: clip the gradients
 * (_clip_gradients: clipnorm per weight, else global_clipnorm over all of them,
 * else clipvalue), then decay each weight (_apply_weight_decay:
 * w -= w * weight_decay * lr). Each as TensorFlow computes it: tf.clip_by_norm
 * scales by clipnorm / max(norm, clipnorm) even when the norm is below it,
 * tf.clip_by_global_norm by clip * min(1 / norm, 1 / clip). Norms are summed in
 * double (TensorFlow sums in float32: the two differ in the last bits). */
void optimizer_before_update(const sy_optimizer *o, float lr, int64_t iterations, const optimizer_var *vars,
                             int32_t n, void *u_product) {
    if (o->clipnorm > 0) {
        float clip = (float)o->clipnorm;
        for (int32_t i = 0; i < n; i++) {
            float norm = (float)sqrt((double)(float)sum_squares(&vars[i]));
            scale_grad(&vars[i], clip, norm > clip ? norm : clip);
        }
    } else if (o->global_clipnorm > 0) {
        double s = 0;
        for (int32_t i = 0; i < n; i++) s += sum_squares(&vars[i]);
        float norm = (float)sqrt(s), clip = (float)o->global_clipnorm;
        float inv = 1.0f / norm, inv_clip = 1.0f / clip;
        float scale = clip * (inv < inv_clip ? inv : inv_clip) + (norm - norm); /* NaN when the norm is not finite */
        for (int32_t i = 0; i < n; i++) scale_grad(&vars[i], scale, 1.0f);
    } else if (o->clipvalue > 0) {
        float c = (float)o->clipvalue;
        for (int32_t i = 0; i < n; i++) {
            if (vars[i].dtype == SY_F64) {
                double *g = vars[i].g;
                for (int64_t j = 0; j < vars[i].n; j++) g[j] = g[j] < -c ? -c : g[j] > c ? c : g[j];
            } else {
                float *g = vars[i].g;
                for (int64_t j = 0; j < vars[i].n; j++) g[j] = g[j] < -c ? -c : g[j] > c ? c : g[j];
            }
        }
    }
    if (o->weight_decay > 0) {
        float wd = (float)o->weight_decay;
        for (int32_t i = 0; i < n; i++) {
            if (vars[i].dtype == SY_F64) {
                double *w = vars[i].w;
                for (int64_t j = 0; j < vars[i].n; j++) w[j] -= w[j] * wd * lr;
            } else {
                float *w = vars[i].w;
                for (int64_t j = 0; j < vars[i].n; j++) w[j] -= w[j] * wd * lr;
            }
        }
    }
    if (o->kind == SY_OPTIMIZER_NADAM && u_product) { /* u_product *= u_t, once a step (Keras's eager path) */
        float t = (float)(iterations + 1), b1 = (float)o->beta_1;
        float u_t = b1 * (1.0f - 0.5f * powf(0.96f, t));
        if (vars[0].dtype == SY_F64) *(double *)u_product = *(double *)u_product * u_t;
        else *(float *)u_product = *(float *)u_product * u_t;
    }
}
