/*
 * conv1d.c - Conv1D (issue 17): y = activation(conv1d(x, kernel) + bias)
 * over (batch, steps, channels), kernel (kernel_size, channels / groups,
 * filters) as Keras holds it, padding valid, same or causal, with
 * dilation_rate and groups.
 *
 * It runs as Conv2D on a (batch, 1, steps, channels) view, with the kernel
 * seen as (1, kernel_size, channels / groups, filters): both reshapes cost
 * nothing, and tf.keras itself computes Conv1D as a 2D convolution over an
 * added axis, so the numbers are the 2D op's. Causal padding is what Keras
 * does: dilation * (kernel_size - 1) zeros before the first step (tf.pad),
 * then a valid convolution, so step t sees steps <= t only.
 *
 * Also the helpers the sequence layers share (sequence_layers.h).
 */
#include "conv_layers.h"
#include "sequence_layers.h"

#include <string.h>

/* ---- shared by the sequence layers ---------------------------------------------------- */

sy_status rd_single(const rd *r, const char *key, bool required, int32_t def, int32_t *out) {
    json_t *v = rd_get(r, key);
    if (!v) {
        if (required)
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "the argument '%s' is missing", key);
        *out = def;
        return SY_OK;
    }
    json_t *a = json_is_array(v) && json_array_size(v) == 1 ? json_array_get(v, 0) : v;
    if (!json_is_integer(a) || json_integer_value(a) < 1 || json_integer_value(a) > INT32_MAX)
        return rd_err(r, SY_ERR_INVALID_ARGUMENT,
                      "%s must be a positive integer or a list of one, got %s", key,
                      keras_json_show(v).s);
    *out = (int32_t)json_integer_value(a);
    return SY_OK;
}

void jw_single(jw *w, int32_t n) {
    jw_open(w, true);
    jw_int(w, n);
    jw_close(w);
}

sy_status seq_check_rank2(const char *name, const char *cls, const sy_shape *in) {
    char s[SY_SHAPE_STR_MAX];
    if (in->rank == 2) return SY_OK;
    return sy_error(SY_ERR_SHAPE,
                    "layer '%s' (%s): expected an input of shape (None, steps, channels), got %s",
                    name, cls, keras_shape_str(in, s, sizeof s));
}

sy_node seq_as_2d(sy_graph *g, sy_node x) {
    sy_shape s = sy_graph_shape(g, x);
    return sy_graph_reshape(g, x, sy_shape_of(4, s.dims[0], (int64_t)1, s.dims[1], s.dims[2]));
}

sy_node seq_from_2d(sy_graph *g, sy_node x) {
    sy_shape s = sy_graph_shape(g, x);
    return sy_graph_reshape(g, x, sy_shape_of(3, s.dims[0], s.dims[2], s.dims[3]));
}

/* ---- Conv1D ------------------------------------------------------------------------------ */

sy_layer sy_layer_conv1d(int32_t filters, int32_t kernel_size) {
    sy_layer l = sy_layer_conv2d(filters, kernel_size, 1);
    l.kind = SY_LAYER_CONV1D;
    return l;
}

/* The 2D layer Conv1D runs as: (1, k) kernels over (1, steps); causal
 * padding is done before, so the 2D conv is valid. */
static sy_layer as_conv2d(const sy_layer *l) {
    sy_layer c = *l;
    c.kernel_size[0] = 1, c.kernel_size[1] = l->kernel_size[0];
    c.strides[0] = 1, c.strides[1] = l->strides[0];
    c.dilation_rate[0] = 1, c.dilation_rate[1] = conv_dilation(l, 0);
    if (l->causal) c.padding = SY_PADDING_VALID;
    return c;
}

static int64_t causal_pad(const sy_layer *l) {
    return l->causal ? (int64_t)conv_dilation(l, 0) * (l->kernel_size[0] - 1) : 0;
}

static sy_status conv1d_output_shape(const sy_layer *l, const char *name, const sy_shape *in,
                                     int n_in, sy_shape *out) {
    (void)n_in;
    char s[SY_SHAPE_STR_MAX];
    sy_status st = seq_check_rank2(name, "Conv1D", in);
    if (st) return st;
    if (l->filters <= 0 || l->groups < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Conv1D): filters %d and groups %d must be positive", name,
                        l->filters, l->groups);
    if (l->filters % conv_groups(l) || in->dims[1] % conv_groups(l))
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (Conv1D): filters (%d) and input channels (%lld, input %s) "
                        "must be multiples of "
                        "groups (%d)",
                        name, l->filters, (long long)in->dims[1], keras_shape_str(in, s, sizeof s),
                        conv_groups(l));
    if (l->causal && l->padding != SY_PADDING_VALID)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Conv1D): causal is a padding of its own", name);
    sy_layer c = as_conv2d(l);
    sy_shape in2 = sy_shape_of(3, (int64_t)1, in->dims[0] + causal_pad(l), in->dims[1]);
    if ((st = conv_check(&c, name, "Conv1D", &in2))) return st;
    int64_t steps, pad;
    sy_conv_out(in2.dims[1], sy_dilated(l->kernel_size[0], conv_dilation(l, 0)), l->strides[0],
                c.padding, &steps, &pad);
    if (steps <= 0)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (Conv1D): the kernel of %d steps%s does not fit in the input "
                        "%s with padding "
                        "'valid'; the output would be empty",
                        name, l->kernel_size[0], conv_dilation(l, 0) > 1 ? " (dilated)" : "",
                        keras_shape_str(in, s, sizeof s));
    *out = sy_shape_of(2, steps, (int64_t)l->filters);
    return SY_OK;
}

static int conv1d_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    return conv_kernel_bias(
        l, sy_shape_of(3, (int64_t)l->kernel_size[0], in->dims[1] / conv_groups(l), (int64_t)l->filters), w);
}

/* x (B, T, C), kernel (k, C / groups, F), bias (F) -> (B, T', F) */
static sy_node conv1d_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in,
                            const sy_node *w, const layer_ctx *ctx) {
    (void)n_in, (void)ctx;
    sy_node x = in[0];
    if (l->causal) {
        int64_t before[3] = {0, causal_pad(l), 0}, after[3] = {0, 0, 0};
        x = sy_graph_pad(g, x, before, after);
    }
    sy_layer c = as_conv2d(l);
    sy_conv2d_options o = conv_options_of(&c);
    o.groups = conv_groups(l);
    sy_shape ks = sy_graph_shape(g, w[0]);
    sy_node k =
        sy_graph_reshape(g, w[0], sy_shape_of(4, (int64_t)1, ks.dims[0], ks.dims[1], ks.dims[2]));
    sy_node h = seq_from_2d(g, sy_graph_conv2d_ex(g, seq_as_2d(g, x), k, &o));
    if (l->use_bias) h = sy_graph_bias_add(g, h, w[1]);
    return keras_activate(g, l->activation, h);
}

static const char *const conv1d_keys[] = {CONV_BASE_KEYS, "input_dim", NULL};

static sy_status conv1d_json_read(const rd *r, sy_layer *l) {
    static const char *const nulls[] = {"kernel_constraint", "bias_constraint", NULL};
    sy_status st;
    int64_t groups;
    json_t *p = rd_get(r, "padding");
    const char *ps = p && json_is_string(p) ? json_string_value(p) : p ? "" : "valid";
    if (!strcmp(ps, "valid") || !strcmp(ps, "same") || !strcmp(ps, "causal")) {
        l->padding = !strcmp(ps, "same") ? SY_PADDING_SAME : SY_PADDING_VALID;
        l->causal = !strcmp(ps, "causal");
    } else {
        return rd_err(r, SY_ERR_INVALID_ARGUMENT,
                      "padding must be \"valid\", \"same\" or \"causal\", got %s",
                      keras_json_show(p).s);
    }
    if ((st = rd_i32(r, "filters", true, 0, 1, &l->filters)) ||
        (st = rd_single(r, "kernel_size", true, 0, &l->kernel_size[0])) ||
        (st = rd_single(r, "strides", false, 1, &l->strides[0])) || (st = rd_data_format(r)) ||
        (st = rd_single(r, "dilation_rate", false, 1, &l->dilation_rate[0])) ||
        (st = rd_int(r, "groups", false, 1, 1, INT32_MAX, &groups)) ||
        (st = rd_activation(r, "activation", SY_ACTIVATION_LINEAR, false, &l->activation)) ||
        (st = rd_bool(r, "use_bias", true, &l->use_bias)) ||
        (st = rd_init(r, "kernel_initializer", l->kernel_initializer, &l->kernel_initializer)) ||
        (st = rd_init(r, "bias_initializer", l->bias_initializer, &l->bias_initializer)) ||
        (st = rd_regularizer(r, "kernel_regularizer", &l->kernel_regularizer)) ||
        (st = rd_regularizer(r, "bias_regularizer", &l->bias_regularizer)) ||
        (st = rd_nulls(r, nulls)))
        return st;
    l->groups = (int32_t)groups;
    return SY_OK;
}

static void conv1d_json_write(jw *w, const sy_layer *l, const char **bad) {
    jw_key(w, "filters");
    jw_int(w, l->filters);
    jw_key(w, "kernel_size");
    jw_single(w, l->kernel_size[0]);
    jw_key(w, "strides");
    jw_single(w, l->strides[0]);
    jw_key(w, "padding");
    jw_str(w, l->causal ? "causal" : l->padding == SY_PADDING_SAME ? "same" : "valid");
    jw_key(w, "data_format");
    jw_str(w, "channels_last");
    jw_key(w, "dilation_rate");
    jw_single(w, conv_dilation(l, 0));
    jw_key(w, "groups");
    jw_int(w, conv_groups(l));
    jw_key(w, "activation");
    jw_str(w, sy_activation_name(l->activation));
    jw_key(w, "use_bias");
    jw_bool(w, l->use_bias);
    conv_json_write_tail(w, l, bad);
}

static sy_layer conv1d_defaults(void) {
    return sy_layer_conv1d(0, 0);
}

const layer_impl keras_conv1d = {
    .kind = SY_LAYER_CONV1D,
    .class_name = "Conv1D",
    .prefix = "conv1d",
    .output_shape = conv1d_output_shape,
    .weights = conv1d_weights,
    .build = conv1d_build,
    .json_keys = conv1d_keys,
    .json_read = conv1d_json_read,
    .json_write = conv1d_json_write,
    .defaults = conv1d_defaults,
};
