/*
 * activations.c - Keras's activation layers: ReLU, LeakyReLU, PReLU, ELU
 * and Softmax, with Keras 2.15's arguments, defaults and config.
 *
 * ReLU, LeakyReLU and ELU are one activation op each (backend.relu and
 * backend.elu as TensorFlow computes them: graph_activation), plain relu
 * when they reduce to it, so the compiler can fold it into a matmul or
 * conv. PReLU is Keras's own formula, relu(x) - alpha * relu(-x), with a
 * trainable alpha of the input's shape (one value along shared_axes),
 * broadcast over the batch. Softmax normalises along its axis, or, given
 * a list of axes (Keras's Softmax(axis=[1, 2]), issue 15), over all of them
 * at once as Keras 2.15 does: exp(x - reduce_logsumexp(x, axes)), the
 * logsumexp as TensorFlow's, max + log(sum(exp(x - max))); a list of one
 * axis is that axis's softmax.
 *
 * Keras keeps the float arguments as float32 (cast_to_floatx) and writes
 * float(that) to its JSON ("alpha": 0.30000001192092896); the layers here
 * keep floats too and write them the same way.
 */
#include "../keras_config.h"

#include <math.h>
#include <string.h>

sy_layer sy_layer_relu(void) {
    sy_layer l = sy_layer_activation(SY_ACTIVATION_LINEAR);
    l.kind = SY_LAYER_RELU;
    l.max_value = INFINITY;
    return l;
}

sy_layer sy_layer_leaky_relu(float alpha) {
    sy_layer l = sy_layer_activation(SY_ACTIVATION_LINEAR);
    l.kind = SY_LAYER_LEAKY_RELU;
    l.alpha = alpha;
    return l;
}

sy_layer sy_layer_prelu(void) {
    sy_layer l = sy_layer_activation(SY_ACTIVATION_LINEAR);
    l.kind = SY_LAYER_PRELU;
    l.alpha_initializer = sy_init_zeros();
    return l;
}

sy_layer sy_layer_elu(float alpha) {
    sy_layer l = sy_layer_activation(SY_ACTIVATION_LINEAR);
    l.kind = SY_LAYER_ELU;
    l.alpha = alpha;
    return l;
}

sy_layer sy_layer_softmax(int32_t axis) {
    sy_layer l = sy_layer_activation(SY_ACTIVATION_LINEAR);
    l.kind = SY_LAYER_SOFTMAX;
    l.axis = axis;
    return l;
}

static sy_layer relu_defaults(void) { return sy_layer_relu(); }
static sy_layer leaky_relu_defaults(void) { return sy_layer_leaky_relu(0.3f); }
static sy_layer prelu_defaults(void) { return sy_layer_prelu(); }
static sy_layer elu_defaults(void) { return sy_layer_elu(1.0f); }
static sy_layer softmax_defaults(void) { return sy_layer_softmax(-1); }

/* ---- shapes ---------------------------------------------------------------------------- */

static sy_status same_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    (void)n_in;
    const char *cls = sy_layer_class_name(l->kind);
    char s[SY_SHAPE_STR_MAX];
    switch (l->kind) {
    case SY_LAYER_RELU:
        if (!(l->max_value >= 0))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (ReLU): max_value of a ReLU layer cannot be a negative value, got %g",
                            name, (double)l->max_value);
        if (!(l->negative_slope >= 0) || !isfinite(l->negative_slope))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (ReLU): negative_slope of a ReLU layer cannot be a negative value, got %g",
                            name, (double)l->negative_slope);
        if (!(l->threshold >= 0) || !isfinite(l->threshold))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (ReLU): threshold of a ReLU layer cannot be a negative value, got %g",
                            name, (double)l->threshold);
        break;
    case SY_LAYER_LEAKY_RELU:
    case SY_LAYER_ELU:
        if (!isfinite(l->alpha))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (%s): alpha must be a number, got %g", name, cls, (double)l->alpha);
        break;
    case SY_LAYER_PRELU:
        if (l->n_shared_axes < 0 || l->n_shared_axes > SY_MAX_RANK)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (PReLU): %d shared_axes", name, l->n_shared_axes);
        for (int i = 0; i < l->n_shared_axes; i++)
            if (l->shared_axes[i] < 1 || l->shared_axes[i] > in->rank)
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "layer '%s' (PReLU): shared_axes entry %d is not an axis of the input %s (1 to %d; the "
                                "batch axis 0 is always shared)",
                                name, l->shared_axes[i], keras_shape_str(in, s, sizeof s), in->rank);
        break;
    case SY_LAYER_SOFTMAX:
        if (l->n_axes < 0 || l->n_axes > in->rank)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Softmax): %d axes for the input %s", name, l->n_axes,
                            keras_shape_str(in, s, sizeof s));
        for (int i = 0; i < (l->n_axes ? l->n_axes : 1); i++) {
            int32_t a = l->n_axes ? l->axes[i] : l->axis;
            if (a == 0 || a < -(in->rank + 1) || a > in->rank || a == -(in->rank + 1))
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "layer '%s' (Softmax): axis %d is not an axis of the input %s besides the batch's (1 to %d, "
                                "or -1 to -%d)",
                                name, a, keras_shape_str(in, s, sizeof s), in->rank, in->rank);
            for (int j = 0; j < i; j++)
                if ((l->axes[j] + in->rank + 1) % (in->rank + 1) == (a + in->rank + 1) % (in->rank + 1))
                    return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Softmax): axis %d is listed twice", name, a);
        }
        break;
    default: break;
    }
    *out = *in;
    return SY_OK;
}

/* ---- weights and graphs ------------------------------------------------------------------ */

/* PReLU's alpha: the input's shape with 1 along shared_axes. */
static int prelu_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    sy_shape s = *in;
    for (int i = 0; i < l->n_shared_axes; i++)
        if (l->shared_axes[i] >= 1 && l->shared_axes[i] <= s.rank) s.dims[l->shared_axes[i] - 1] = 1;
    w[0] = (layer_weight){.name = "alpha", .shape = s, .init = l->alpha_initializer, .regularizer = l->alpha_regularizer};
    return 1;
}

/* Softmax over several axes, as Keras 2.15's Softmax.call: exp(x -
 * reduce_logsumexp(x, axes, keepdims)). The max's gradient paths cancel
 * (TensorFlow stops them), so the gradient is the softmax's. */
static sy_node softmax_axes(sy_graph *g, sy_node x, const sy_layer *l) {
    int rank = sy_graph_shape(g, x).rank;
    int32_t axes[SY_MAX_RANK];
    for (int i = 0; i < l->n_axes; i++) axes[i] = l->axes[i] < 0 ? l->axes[i] + rank : l->axes[i];
    sy_node m = sy_graph_reduce_max(g, x, axes, l->n_axes, true);
    sy_node sum = sy_graph_reduce_sum(g, sy_graph_exp(g, sy_graph_sub(g, x, m)), axes, l->n_axes, true);
    return sy_graph_exp(g, sy_graph_sub(g, x, sy_graph_add(g, sy_graph_log(g, sum), m)));
}

static sy_node act_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w, const layer_ctx *ctx) {
    sy_node x = in[0];
    (void)n_in, (void)ctx;
    switch (l->kind) {
    case SY_LAYER_RELU: /* backend.relu(x, alpha=negative_slope, max_value, threshold) */
        if (l->negative_slope == 0 && isinf(l->max_value) && l->threshold == 0) return sy_graph_relu(g, x);
        return graph_activation(g, x, SY_AF_RELU, l->negative_slope, l->max_value, l->threshold);
    case SY_LAYER_LEAKY_RELU: /* backend.relu(x, alpha): tf.nn.leaky_relu, or relu for alpha 0 */
        if (l->alpha == 0) return sy_graph_relu(g, x);
        return graph_activation(g, x, SY_AF_RELU, l->alpha, INFINITY, 0);
    case SY_LAYER_ELU: return graph_activation(g, x, SY_AF_ELU, l->alpha, 0, 0);
    case SY_LAYER_PRELU: /* pos + neg, neg = -alpha * relu(-x) */
        return sy_graph_add(g, sy_graph_relu(g, x), sy_graph_mul(g, sy_graph_neg(g, w[0]), sy_graph_relu(g, sy_graph_neg(g, x))));
    case SY_LAYER_SOFTMAX:
        if (l->n_axes > 1) return softmax_axes(g, x, l);
        return sy_graph_softmax(g, x, l->n_axes ? l->axes[0] : l->axis);
    default: return x;
    }
}

/* ---- JSON -------------------------------------------------------------------------------- */

/* A float argument: a number (>= 0 when nonneg); null allowed (INFINITY) when nullable. */
static sy_status rd_real(const rd *r, const char *key, float def, bool nullable, float *out) {
    json_t *v = rd_get(r, key);
    if (nullable && v && json_is_null(v)) {
        *out = INFINITY;
        return SY_OK;
    }
    if (v && !json_is_number(v))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "%s must be a number%s, got %s", key, nullable ? " or null" : "",
                      keras_json_show(v).s);
    return rd_float(r, key, false, def, out);
}

static void jw_real_key(jw *w, const char *key, float v, bool nullable) {
    jw_key(w, key);
    if (nullable && isinf(v)) jw_null(w);
    else jw_real(w, (double)v, false); /* float(np.float32(v)), as Keras writes it */
}

static const char *const relu_keys[] = {"max_value", "negative_slope", "threshold", NULL};
static sy_status relu_read(const rd *r, sy_layer *l) {
    sy_status st;
    if ((st = rd_real(r, "max_value", INFINITY, true, &l->max_value)) ||
        (st = rd_real(r, "negative_slope", 0, false, &l->negative_slope)) || (st = rd_real(r, "threshold", 0, false, &l->threshold)))
        return st;
    return SY_OK;
}
static void relu_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_real_key(w, "max_value", l->max_value, true);
    jw_real_key(w, "negative_slope", l->negative_slope, false);
    jw_real_key(w, "threshold", l->threshold, false);
}

static const char *const alpha_keys[] = {"alpha", NULL};
static sy_status leaky_relu_read(const rd *r, sy_layer *l) { return rd_real(r, "alpha", 0.3f, false, &l->alpha); }
static sy_status elu_read(const rd *r, sy_layer *l) { return rd_real(r, "alpha", 1.0f, false, &l->alpha); }
static void alpha_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_real_key(w, "alpha", l->alpha, false);
}

static const char *const prelu_keys[] = {"alpha_initializer", "alpha_regularizer", "alpha_constraint", "shared_axes", NULL};
static sy_status prelu_read(const rd *r, sy_layer *l) {
    sy_status st;
    if ((st = rd_init(r, "alpha_initializer", l->alpha_initializer, &l->alpha_initializer)) ||
        (st = rd_regularizer(r, "alpha_regularizer", &l->alpha_regularizer)) || (st = rd_null(r, "alpha_constraint")))
        return st;
    json_t *v = rd_get(r, "shared_axes");
    l->n_shared_axes = 0;
    if (!v || json_is_null(v)) return SY_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (n > SY_MAX_RANK)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "shared_axes %s: at most %d axes", keras_json_show(v).s, SY_MAX_RANK);
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(a) || json_integer_value(a) < 1 || json_integer_value(a) > SY_MAX_RANK)
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "shared_axes must be null, an axis or a list of axes (1, 2, ...), got %s",
                          keras_json_show(v).s);
        l->shared_axes[l->n_shared_axes++] = (int32_t)json_integer_value(a);
    }
    return SY_OK;
}
static void prelu_write(jw *w, const sy_layer *l, const char **bad) {
    jw_key(w, "alpha_initializer");
    if (!jw_init(w, &l->alpha_initializer) && !*bad) *bad = "alpha_initializer";
    jw_key(w, "alpha_regularizer");
    jw_regularizer(w, &l->alpha_regularizer);
    jw_key(w, "alpha_constraint");
    jw_null(w);
    jw_key(w, "shared_axes"); /* Keras keeps an int as a list of one */
    if (!l->n_shared_axes) jw_null(w);
    else {
        jw_open(w, true);
        for (int i = 0; i < l->n_shared_axes; i++) jw_int(w, l->shared_axes[i]);
        jw_close(w);
    }
}

static const char *const softmax_keys[] = {"axis", NULL};
static sy_status softmax_read(const rd *r, sy_layer *l) {
    json_t *v = rd_get(r, "axis"), *e;
    size_t i;
    if (!v || !json_is_array(v)) return rd_i32(r, "axis", false, -1, -SY_MAX_RANK, &l->axis);
    l->n_axes = 0; /* a list of axes (issue 15), kept as a list: Keras writes it back as given */
    json_array_foreach(v, i, e) {
        if (i >= SY_MAX_RANK || !json_is_integer(e) || json_integer_value(e) <= -SY_MAX_RANK ||
            json_integer_value(e) >= SY_MAX_RANK)
            break;
        l->axes[l->n_axes++] = (int32_t)json_integer_value(e);
    }
    if (l->n_axes == 0 || (size_t)l->n_axes != json_array_size(v))
        return rd_err(r, SY_ERR_INVALID_ARGUMENT, "axis must be an integer or a list of integers (axes of the input), got %s",
                      keras_json_show(v).s);
    return SY_OK;
}
static void softmax_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "axis");
    if (!l->n_axes) {
        jw_int(w, l->axis);
        return;
    }
    jw_open(w, true);
    for (int i = 0; i < l->n_axes; i++) jw_int(w, l->axes[i]);
    jw_close(w);
}

#define ACT_IMPL(var, KIND, cls, pfx, wfn, keys, rdfn, wrfn, dflt)                                                     \
    const layer_impl var = {                                                                                           \
        .kind = KIND,                                                                                                  \
        .class_name = cls,                                                                                             \
        .prefix = pfx,                                                                                                 \
        .output_shape = same_shape,                                                                                    \
        .weights = wfn,                                                                                                \
        .build = act_build,                                                                                            \
        .json_keys = keys,                                                                                             \
        .json_read = rdfn,                                                                                             \
        .json_write = wrfn,                                                                                            \
        .defaults = dflt,                                                                                              \
    }

ACT_IMPL(keras_relu, SY_LAYER_RELU, "ReLU", "re_lu", NULL, relu_keys, relu_read, relu_write, relu_defaults);
ACT_IMPL(keras_leaky_relu, SY_LAYER_LEAKY_RELU, "LeakyReLU", "leaky_re_lu", NULL, alpha_keys, leaky_relu_read, alpha_write,
         leaky_relu_defaults);
ACT_IMPL(keras_prelu, SY_LAYER_PRELU, "PReLU", "p_re_lu", prelu_weights, prelu_keys, prelu_read, prelu_write, prelu_defaults);
ACT_IMPL(keras_elu, SY_LAYER_ELU, "ELU", "elu", NULL, alpha_keys, elu_read, alpha_write, elu_defaults);
ACT_IMPL(keras_softmax, SY_LAYER_SOFTMAX, "Softmax", "softmax", NULL, softmax_keys, softmax_read, softmax_write,
         softmax_defaults);
