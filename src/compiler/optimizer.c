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

sy_status optimizer_check(const sy_optimizer *o) {
    const char *name = o->kind == SY_OPTIMIZER_SGD ? "SGD" : o->kind == SY_OPTIMIZER_ADAM ? "Adam" : "RMSprop";
    if (o->kind == SY_OPTIMIZER_NONE) return SY_OK;
    if (o->kind != SY_OPTIMIZER_SGD && o->kind != SY_OPTIMIZER_ADAM && o->kind != SY_OPTIMIZER_RMSPROP)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "unknown optimizer kind %d; expected SGD, Adam or RMSprop", (int)o->kind);
    if (!(o->learning_rate >= 0))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: learning_rate %g must be >= 0", name, (double)o->learning_rate);
    if (o->kind != SY_OPTIMIZER_ADAM && !(o->momentum >= 0 && o->momentum <= 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: momentum %g must be in [0, 1]", name, (double)o->momentum);
    if (o->kind == SY_OPTIMIZER_ADAM && !(o->beta_1 >= 0 && o->beta_1 < 1 && o->beta_2 >= 0 && o->beta_2 < 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "Adam: beta_1 %g and beta_2 %g must be in [0, 1)", (double)o->beta_1,
                        (double)o->beta_2);
    if (o->kind == SY_OPTIMIZER_RMSPROP && !(o->rho >= 0 && o->rho <= 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "RMSprop: rho %g must be in [0, 1]", (double)o->rho);
    if (o->kind != SY_OPTIMIZER_SGD && !(o->epsilon >= 0))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: epsilon %g must be >= 0", name, (double)o->epsilon);
    return SY_OK;
}

static sy_node slot(sy_graph *g, sy_node param, const char *slot_name) {
    char name[512];
    const sy_node_rec *p = graph_node(g, param);
    snprintf(name, sizeof name, "%s/%s", p->name, slot_name);
    sy_dtype dt = p->dtype;
    sy_shape shape = p->shape;
    sy_node s = sy_graph_param(g, name, dt, shape, sy_init_zeros());
    if (s != SY_NONE) sy_graph_set_trainable(g, s, false);
    return s;
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
    sy_node in[5] = {param, grad, SY_NONE, SY_NONE, SY_NONE};
    int n = 2;
    sy_op op;
    switch (o->kind) {
    case SY_OPTIMIZER_SGD:
        op = SY_OP_SGD_UPDATE;
        if (o->momentum > 0) in[n++] = slot(g, param, "momentum");
        break;
    case SY_OPTIMIZER_ADAM:
        op = SY_OP_ADAM_UPDATE;
        in[n++] = slot(g, param, "m");
        in[n++] = slot(g, param, "v");
        if (o->amsgrad) in[n++] = slot(g, param, "vhat");
        break;
    default:
        op = SY_OP_RMSPROP_UPDATE;
        in[n++] = slot(g, param, "velocity");
        if (o->momentum > 0) in[n++] = slot(g, param, "momentum");
        if (o->centered) in[n++] = slot(g, param, "average_gradient");
        break;
    }
    return graph_add(g, op, in, n, &at, NULL);
}
