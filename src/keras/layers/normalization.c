/*
 * normalization.c - BatchNormalization and LayerNormalization, as tf.keras
 * 2.15 computes them, built from ordinary graph ops (reduce_mean for the
 * moments, rsqrt, broadcasting arithmetic) so that autodiff gives their
 * gradients, through the batch statistics too.
 *
 * BatchNormalization normalises each feature (the `axis`) over every other
 * axis. Training uses the batch's mean and biased variance and adds two
 * state updates (sy_graph_moving_average), moving_mean towards the batch
 * mean and moving_variance towards the batch variance, which the compiler
 * applies after the step; with replicas each replica normalises by its own
 * shard's statistics and the moving statistics move towards the replicas'
 * mean (docs/design/state-updates.md). Keras 2.15 takes two paths, and the
 * golden fixtures pin both:
 *   - 4D inputs normalised over axis 1 or 3 go through fused_batch_norm:
 *     y = (x - mean) * (rsqrt(var + eps) * gamma) + beta, epsilon at least
 *     1.001e-5, and the moving variance moves towards the Bessel-corrected
 *     variance var * n / (n - 1) (n values per feature);
 *   - every other input goes through tf.nn.moments and
 *     tf.nn.batch_normalization: inv = rsqrt(var + eps) * gamma,
 *     y = x * inv + (beta - mean * inv), and the moving variance moves
 *     towards the biased variance.
 * Inference uses the moving statistics in the same formulas.
 *
 * LayerNormalization normalises each sample over the `axis` list (the last
 * axis by default). Keras 2.15 takes fused_batch_norm when the axes are the
 * trailing ones and epsilon >= 1.001e-5: y = (x - mean) * rsqrt(var + eps)
 * * gamma + beta; otherwise tf.nn.batch_normalization's formula above.
 *
 * Both layers' model JSON follows Keras's get_config(); after build Keras
 * writes the axes as a list of positive axes ([1] for (None, C)), which the
 * `resolve` hook reproduces.
 */
#include "../keras_config.h"

#include <string.h>

#define FUSED_MIN_EPSILON 1.001e-5 /* tf.compat.v1.nn.fused_batch_norm raises epsilon to this */

static sy_init ones(void) {
    sy_init i = sy_init_zeros();
    i.kind = SY_INIT_ONES;
    return i;
}

static sy_layer norm_base(sy_layer_kind kind) {
    sy_layer l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    l.use_bias = true;
    l.strides[0] = l.strides[1] = 1;
    l.kernel_initializer = sy_init_glorot_uniform(0);
    l.bias_initializer = sy_init_zeros();
    l.axes[0] = -1;
    l.n_axes = 1;
    l.epsilon = 0.001;
    l.center = l.use_scale = true;
    l.beta_initializer = sy_init_zeros();
    l.gamma_initializer = ones();
    return l;
}

sy_layer sy_layer_batch_normalization(void) {
    sy_layer l = norm_base(SY_LAYER_BATCH_NORMALIZATION);
    l.momentum = 0.99;
    l.moving_mean_initializer = sy_init_zeros();
    l.moving_variance_initializer = ones();
    return l;
}

sy_layer sy_layer_layer_normalization(void) { return norm_base(SY_LAYER_LAYER_NORMALIZATION); }

/* ---- shapes ------------------------------------------------------------------------- */

/* Axis i of l in the batch shape of an input of rank `rank` (batch
 * included), or -1 if out of range. */
static int32_t axis_at(const sy_layer *l, int i, int rank) {
    int32_t a = l->axes[i] < 0 ? l->axes[i] + rank : l->axes[i];
    return a >= 1 && a < rank ? a : -1;
}

static sy_status norm_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    const char *cls = sy_layer_class_name(l->kind);
    char s[SY_SHAPE_STR_MAX];
    int rank = in->rank + 1;
    bool bn = l->kind == SY_LAYER_BATCH_NORMALIZATION;
    if (l->n_axes < 1 || l->n_axes > in->rank || (bn && l->n_axes != 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): axis must name %s, got %d axes", name, cls,
                        bn ? "one axis" : "1 to rank - 1 axes", l->n_axes);
    for (int i = 0; i < l->n_axes; i++) {
        int32_t a = axis_at(l, i, rank);
        if (a < 0)
            return sy_error(SY_ERR_SHAPE,
                            "layer '%s' (%s): axis %d is out of range for the input %s (axes 1 to %d, or -1 to -%d; "
                            "the batch axis 0 is not normalised)",
                            name, cls, l->axes[i], keras_shape_str(in, s, sizeof s), rank - 1, rank - 1);
        for (int j = 0; j < i; j++)
            if (axis_at(l, j, rank) == a)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): axis %d is listed twice", name, cls, a);
    }
    if (!(l->epsilon > 0))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): epsilon must be positive, got %g", name, cls,
                        l->epsilon);
    if (bn && !(l->momentum >= 0 && l->momentum <= 1))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): momentum must be in [0, 1], got %g", name, cls,
                        l->momentum);
    *out = *in;
    return SY_OK;
}

/* Keras's build(): negative axes become positive ones of the batch shape. */
static void norm_resolve(sy_layer *l, const sy_shape *in) {
    for (int i = 0; i < l->n_axes; i++)
        if (l->axes[i] < 0 && l->axes[i] + in->rank + 1 >= 1) l->axes[i] += in->rank + 1;
}

/* The shape of gamma and beta: the normalised axes' (BatchNormalization's
 * feature axis, LayerNormalization's axes). */
static sy_shape param_shape(const sy_layer *l, const sy_shape *in) {
    sy_shape p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < l->n_axes; i++) p.dims[p.rank++] = in->dims[axis_at(l, i, in->rank + 1) - 1];
    return p;
}

static int norm_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    sy_shape ps = param_shape(l, in);
    int n = 0;
    if (l->use_scale) w[n++] = (layer_weight){.name = "gamma", .shape = ps, .init = l->gamma_initializer, .non_trainable = false};
    if (l->center) w[n++] = (layer_weight){.name = "beta", .shape = ps, .init = l->beta_initializer, .non_trainable = false};
    if (l->kind == SY_LAYER_BATCH_NORMALIZATION) {
        w[n++] = (layer_weight){.name = "moving_mean", .shape = ps, .init = l->moving_mean_initializer, .non_trainable = true};
        w[n++] = (layer_weight){.name = "moving_variance", .shape = ps, .init = l->moving_variance_initializer,
                                .non_trainable = true};
    }
    return n;
}

/* ---- graphs ------------------------------------------------------------------------- */

/* The normalised axes, resolved, in batch-shape terms; whether they are
 * the trailing ones (then parameters broadcast as they are). */
typedef struct norm_axes {
    int32_t axis[SY_MAX_RANK];
    int n;
    bool trailing;
    sy_shape bshape; /* 1 on every axis but the normalised ones */
} norm_axes;

static norm_axes axes_of(const sy_layer *l, const sy_shape *xs) {
    norm_axes a;
    memset(&a, 0, sizeof a);
    a.bshape.rank = xs->rank;
    for (int i = 0; i < xs->rank; i++) a.bshape.dims[i] = 1;
    bool in[SY_MAX_RANK] = {false};
    for (int i = 0; i < l->n_axes; i++) {
        a.axis[a.n++] = axis_at(l, i, xs->rank);
        in[a.axis[a.n - 1]] = true;
        a.bshape.dims[a.axis[a.n - 1]] = xs->dims[a.axis[a.n - 1]];
    }
    a.trailing = true;
    for (int i = xs->rank - a.n; i < xs->rank; i++) a.trailing &= in[i];
    return a;
}

/* p (param shape) seen with the input's rank: only where the axes are not
 * the trailing ones does broadcasting need the reshape. */
static sy_node bcast(sy_graph *g, const norm_axes *a, sy_node p) {
    if (p == SY_NONE || a->trailing) return p;
    return sy_graph_reshape(g, p, a->bshape);
}

static sy_node scalar(sy_graph *g, double v) { return sy_graph_fill(g, SY_F32, sy_shape_of(0), v); }

static sy_node bn_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w,
                        const layer_ctx *ctx) {
    (void)n_in;
    sy_node x = in[0];
    sy_shape xs = sy_graph_shape(g, x);
    norm_axes a = axes_of(l, &xs);
    int k = 0;
    sy_node gamma = l->use_scale ? w[k++] : SY_NONE, beta = l->center ? w[k++] : SY_NONE;
    sy_node moving_mean = w[k], moving_var = w[k + 1];
    bool fused = xs.rank == 4 && (a.axis[0] == 1 || a.axis[0] == 3); /* Keras's _fused_can_be_used */
    double eps = fused && l->epsilon < FUSED_MIN_EPSILON ? FUSED_MIN_EPSILON : l->epsilon;
    int32_t red[SY_MAX_RANK];
    int n_red = 0;
    int64_t per_feature = 1;
    for (int i = 0; i < xs.rank; i++)
        if (i != a.axis[0]) red[n_red++] = i, per_feature *= xs.dims[i];
    sy_node mean = moving_mean, var = moving_var, centered = SY_NONE;
    if (ctx->training) {
        mean = sy_graph_reduce_mean(g, x, red, n_red, false);
        centered = sy_graph_sub(g, x, bcast(g, &a, mean));
        var = sy_graph_reduce_mean(g, sy_graph_mul(g, centered, centered), red, n_red, false);
        /* fused_batch_norm hands back var * n / (n - 1) for the moving variance */
        sy_node var_update = fused && per_feature > 1
                                 ? sy_graph_mul(g, var, scalar(g, (double)per_feature / (double)(per_feature - 1)))
                                 : var;
        sy_graph_moving_average(g, moving_mean, mean, l->momentum);
        sy_graph_moving_average(g, moving_var, var_update, l->momentum);
    }
    sy_node inv = sy_graph_rsqrt(g, sy_graph_add(g, var, scalar(g, eps)));
    if (gamma != SY_NONE) inv = sy_graph_mul(g, inv, gamma);
    if (fused) {
        if (centered == SY_NONE) centered = sy_graph_sub(g, x, bcast(g, &a, mean));
        sy_node y = sy_graph_mul(g, centered, bcast(g, &a, inv));
        return beta != SY_NONE ? sy_graph_add(g, y, bcast(g, &a, beta)) : y;
    }
    sy_node shift = sy_graph_mul(g, mean, inv);
    shift = beta != SY_NONE ? sy_graph_sub(g, beta, shift) : sy_graph_neg(g, shift);
    return sy_graph_add(g, sy_graph_mul(g, x, bcast(g, &a, inv)), bcast(g, &a, shift));
}

static sy_node ln_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w,
                        const layer_ctx *ctx) {
    (void)n_in, (void)ctx;
    sy_node x = in[0];
    sy_shape xs = sy_graph_shape(g, x);
    norm_axes a = axes_of(l, &xs);
    int k = 0;
    sy_node gamma = l->use_scale ? bcast(g, &a, w[k++]) : SY_NONE, beta = l->center ? bcast(g, &a, w[k++]) : SY_NONE;
    sy_node mean = sy_graph_reduce_mean(g, x, a.axis, a.n, true);
    sy_node centered = sy_graph_sub(g, x, mean);
    sy_node var = sy_graph_reduce_mean(g, sy_graph_mul(g, centered, centered), a.axis, a.n, true);
    sy_node inv = sy_graph_rsqrt(g, sy_graph_add(g, var, scalar(g, l->epsilon)));
    if (a.trailing && l->epsilon >= FUSED_MIN_EPSILON) { /* Keras's fused path */
        sy_node y = sy_graph_mul(g, centered, inv);
        if (gamma != SY_NONE) y = sy_graph_mul(g, y, gamma);
        return beta != SY_NONE ? sy_graph_add(g, y, beta) : y;
    }
    if (gamma != SY_NONE) inv = sy_graph_mul(g, inv, gamma);
    sy_node shift = sy_graph_mul(g, mean, inv);
    shift = beta != SY_NONE ? sy_graph_sub(g, beta, shift) : sy_graph_neg(g, shift);
    return sy_graph_add(g, sy_graph_mul(g, x, inv), shift);
}

/* ---- model JSON ------------------------------------------------------------------------ */

static const char *const bn_keys[] = {"axis", "momentum", "epsilon", "center", "scale", "beta_initializer",
                                      "gamma_initializer", "moving_mean_initializer", "moving_variance_initializer",
                                      "beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                                      "renorm", "renorm_clipping", "renorm_momentum", "fused", "virtual_batch_size",
                                      "adjustment", "synchronized", NULL};
static const char *const ln_keys[] = {"axis", "epsilon", "center", "scale", "beta_initializer", "gamma_initializer",
                                      "beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                                      NULL};
static const char *const nulls[] = {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                                    NULL};

/* axis: an integer or a list of them. */
static sy_status rd_axis(const rd *r, sy_layer *l) {
    json_t *v = rd_get(r, "axis");
    if (!v) return SY_OK;
    if (json_is_integer(v)) {
        l->axes[0] = (int32_t)json_integer_value(v);
        l->n_axes = 1;
        if (json_integer_value(v) >= -SY_MAX_RANK && json_integer_value(v) < SY_MAX_RANK) return SY_OK;
    } else if (json_is_array(v) && json_array_size(v) >= 1 && json_array_size(v) < SY_MAX_RANK) {
        l->n_axes = 0;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (!json_is_integer(e) || json_integer_value(e) < -SY_MAX_RANK || json_integer_value(e) >= SY_MAX_RANK)
                break;
            l->axes[l->n_axes++] = (int32_t)json_integer_value(e);
        }
        if ((size_t)l->n_axes == json_array_size(v)) return SY_OK;
    }
    return rd_err(r, SY_ERR_INVALID_ARGUMENT, "axis must be an integer or a list of integers (axes of the input), got %s",
                  keras_json_show(v).s);
}

static sy_status rd_double(const rd *r, const char *key, double *out) {
    json_t *v = rd_get(r, key);
    if (!v) return SY_OK;
    if (!json_is_number(v)) return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be a number, got %s", key, keras_json_show(v).s);
    *out = json_number_value(v);
    return SY_OK;
}

static sy_status norm_read(const rd *r, sy_layer *l) {
    sy_status st;
    if ((st = rd_axis(r, l)) || (st = rd_double(r, "epsilon", &l->epsilon)) ||
        (st = rd_bool(r, "center", true, &l->center)) || (st = rd_bool(r, "scale", true, &l->use_scale)) ||
        (st = rd_init(r, "beta_initializer", l->beta_initializer, &l->beta_initializer)) ||
        (st = rd_init(r, "gamma_initializer", l->gamma_initializer, &l->gamma_initializer)) || (st = rd_nulls(r, nulls)))
        return st;
    if (l->kind != SY_LAYER_BATCH_NORMALIZATION) return SY_OK;
    static const char *const unsupported[] = {"renorm_clipping", "virtual_batch_size", "adjustment", NULL};
    if ((st = rd_double(r, "momentum", &l->momentum)) ||
        (st = rd_init(r, "moving_mean_initializer", l->moving_mean_initializer, &l->moving_mean_initializer)) ||
        (st = rd_init(r, "moving_variance_initializer", l->moving_variance_initializer,
                      &l->moving_variance_initializer)) ||
        (st = rd_bool_only(r, "renorm", false)) || (st = rd_bool_only(r, "synchronized", false)) ||
        (st = rd_nulls(r, unsupported)))
        return st;
    json_t *fused = rd_get(r, "fused"), *rm = rd_get(r, "renorm_momentum");
    /* fused=False would take the other path (biased moving variance for 4D inputs): not supported */
    if (fused && !json_is_null(fused) && !json_is_true(fused))
        return rd_err(r, SY_ERR_UNSUPPORTED, "fused %s is not supported (supported: null, true)", keras_json_show(fused).s);
    if (rm && !json_is_number(rm))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "renorm_momentum must be a number, got %s", keras_json_show(rm).s);
    return SY_OK;
}

static void norm_write(jw *w, const sy_layer *l, const char **bad) {
    bool bn = l->kind == SY_LAYER_BATCH_NORMALIZATION;
    jw_key(w, "axis");
    if (l->n_axes == 1 && l->axes[0] < 0) { /* not built: Keras writes the argument as given */
        jw_int(w, l->axes[0]);
    } else {
        jw_open(w, true);
        for (int i = 0; i < l->n_axes; i++) jw_int(w, l->axes[i]);
        jw_close(w);
    }
    if (bn) {
        jw_key(w, "momentum");
        jw_real(w, l->momentum, false);
    }
    jw_key(w, "epsilon");
    jw_real(w, l->epsilon, false);
    jw_key(w, "center");
    jw_bool(w, l->center);
    jw_key(w, "scale");
    jw_bool(w, l->use_scale);
    const struct {
        const char *key;
        const sy_init *init;
    } inits[] = {{"beta_initializer", &l->beta_initializer},
                 {"gamma_initializer", &l->gamma_initializer},
                 {"moving_mean_initializer", &l->moving_mean_initializer},
                 {"moving_variance_initializer", &l->moving_variance_initializer}};
    for (int i = 0; i < (bn ? 4 : 2); i++) {
        jw_key(w, inits[i].key);
        if (!jw_init(w, inits[i].init) && !*bad) *bad = inits[i].key;
    }
    jw_nulls(w, nulls);
}

static sy_layer bn_defaults(void) { return sy_layer_batch_normalization(); }
static sy_layer ln_defaults(void) { return sy_layer_layer_normalization(); }

const layer_impl keras_batch_normalization = {
    .kind = SY_LAYER_BATCH_NORMALIZATION,
    .class_name = "BatchNormalization",
    .prefix = "batch_normalization",
    .output_shape = norm_output_shape,
    .weights = norm_weights,
    .build = bn_build,
    .json_keys = bn_keys,
    .json_read = norm_read,
    .json_write = norm_write,
    .defaults = bn_defaults,
    .resolve = norm_resolve,
};

const layer_impl keras_layer_normalization = {
    .kind = SY_LAYER_LAYER_NORMALIZATION,
    .class_name = "LayerNormalization",
    .prefix = "layer_normalization",
    .output_shape = norm_output_shape,
    .weights = norm_weights,
    .build = ln_build,
    .json_keys = ln_keys,
    .json_read = norm_read,
    .json_write = norm_write,
    .defaults = ln_defaults,
    .resolve = norm_resolve,
};
