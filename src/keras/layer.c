/*
 * layer.c - layer configurations: the constructors that fill in Keras's
 * defaults, the table of layer implementations (one file each in layers/),
 * activations by name, and the shape helpers the layers share.
 */
#include "keras_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static sy_layer base(sy_layer_kind kind) {
    sy_layer l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    l.use_bias = true;
    l.strides[0] = l.strides[1] = 1;
    l.kernel_initializer = sy_init_glorot_uniform(0);
    l.bias_initializer = sy_init_zeros();
    return l;
}

sy_layer sy_layer_dense(int32_t units) {
    sy_layer l = base(SY_LAYER_DENSE);
    l.units = units;
    return l;
}

sy_layer sy_layer_conv2d(int32_t filters, int32_t kernel_h, int32_t kernel_w) {
    sy_layer l = base(SY_LAYER_CONV2D);
    l.filters = filters;
    l.kernel_size[0] = kernel_h;
    l.kernel_size[1] = kernel_w;
    l.dilation_rate[0] = l.dilation_rate[1] = 1;
    l.groups = 1;
    return l;
}

static sy_layer pooling(sy_layer_kind kind, int32_t pool_h, int32_t pool_w) {
    sy_layer l = base(kind);
    l.pool_size[0] = pool_h;
    l.pool_size[1] = pool_w;
    l.strides[0] = l.strides[1] = 0; /* Keras's strides=None: the pool size */
    return l;
}

sy_layer sy_layer_max_pooling2d(int32_t pool_h, int32_t pool_w) {
    return pooling(SY_LAYER_MAX_POOLING2D, pool_h, pool_w);
}
sy_layer sy_layer_average_pooling2d(int32_t pool_h, int32_t pool_w) {
    return pooling(SY_LAYER_AVERAGE_POOLING2D, pool_h, pool_w);
}

sy_layer sy_layer_activation(sy_activation activation) {
    sy_layer l = base(SY_LAYER_ACTIVATION);
    l.activation = activation;
    return l;
}

sy_layer sy_layer_flatten(void) { return base(SY_LAYER_FLATTEN); }

sy_layer sy_layer_reshape(sy_shape target_shape) {
    sy_layer l = base(SY_LAYER_RESHAPE);
    l.target_shape = target_shape;
    return l;
}

sy_layer sy_layer_dropout(double rate) {
    sy_layer l = base(SY_LAYER_DROPOUT);
    l.rate = rate;
    return l;
}

sy_layer sy_layer_embedding(int32_t input_dim, int32_t output_dim) {
    sy_layer l = base(SY_LAYER_EMBEDDING);
    l.input_dim = input_dim;
    l.output_dim = output_dim;
    l.embeddings_initializer = sy_init_uniform(-0.05, 0.05, 0);
    return l;
}

static sy_layer recurrent(sy_layer_kind kind, int32_t units) {
    sy_layer l = base(kind);
    l.units = units;
    l.activation = SY_ACTIVATION_TANH;
    l.recurrent_activation = SY_ACTIVATION_SIGMOID;
    l.unit_forget_bias = true;
    l.reset_after = true;
    l.recurrent_initializer = sy_init_orthogonal(1.0, 0);
    return l;
}

sy_layer sy_layer_lstm(int32_t units) { return recurrent(SY_LAYER_LSTM, units); }
sy_layer sy_layer_gru(int32_t units) { return recurrent(SY_LAYER_GRU, units); }

static const layer_impl *const impls[] = {
    &keras_dense,   &keras_conv2d,  &keras_max_pooling2d, &keras_average_pooling2d, &keras_activation_layer,
    &keras_flatten, &keras_reshape, &keras_dropout,       &keras_embedding,         &keras_lstm,
    &keras_gru,
    /* merge layers */
    &keras_add, &keras_subtract, &keras_multiply, &keras_average, &keras_maximum, &keras_minimum, &keras_concatenate,
    /* the convolution family (issue 15) */
    &keras_depthwise_conv2d, &keras_separable_conv2d, &keras_conv2d_transpose, &keras_zero_padding2d,
    &keras_cropping2d, &keras_up_sampling2d, &keras_global_average_pooling2d, &keras_global_max_pooling2d,
    /* issue 15, activations */
    &keras_relu, &keras_leaky_relu, &keras_prelu, &keras_elu, &keras_softmax, &keras_rescaling,
    /* normalization layers */
    &keras_batch_normalization, &keras_layer_normalization,
    &keras_normalization, /* issue 15, keras.applications */
    /* issue 17, sequence layers */
    &keras_conv1d, &keras_max_pooling1d, &keras_average_pooling1d, &keras_global_max_pooling1d,
    &keras_global_average_pooling1d, &keras_simple_rnn, &keras_repeat_vector, &keras_permute,
    &keras_spatial_dropout1d, &keras_spatial_dropout2d, &keras_bidirectional, &keras_time_distributed,
    &keras_masking, /* issue 17, masking */
};

const layer_impl *layer_impl_of(sy_layer_kind kind) {
    if (kind == SY_LAYER_MODEL) return &keras_model_layer; /* issue 15, nested models: not read by class name */
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (impls[i]->kind == kind) return impls[i];
    return NULL;
}

const layer_impl *layer_impl_by_class(const char *cls) {
    for (size_t i = 0; cls && i < sizeof impls / sizeof impls[0]; i++)
        if (strcmp(impls[i]->class_name, cls) == 0) return impls[i];
    return NULL;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

void keras_layer_names(char *buf, size_t size) {
    const char *names[sizeof impls / sizeof impls[0] + 1];
    size_t n = 0, used = 0;
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) names[n++] = impls[i]->class_name;
    names[n++] = "InputLayer";
    qsort(names, n, sizeof names[0], by_name);
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
}

const char *sy_layer_class_name(sy_layer_kind kind) {
    const layer_impl *impl = layer_impl_of(kind);
    return impl ? impl->class_name : "?";
}

/* ---- activations ------------------------------------------------------------------ */

static const char *const activation_names[] = {"linear",   "relu",     "sigmoid",      "tanh",        "softmax",
                                               "elu",      "selu",     "gelu",         "swish",       "softplus",
                                               "softsign", "hard_sigmoid", "exponential", "relu6"};
#define N_ACTIVATIONS (int)(sizeof activation_names / sizeof activation_names[0])

const char *sy_activation_name(sy_activation a) {
    return (unsigned)a < (unsigned)N_ACTIVATIONS ? activation_names[a] : "?";
}

sy_status sy_activation_from_name(const char *name, sy_activation *out) {
    if (!name || !*name) name = "linear"; /* Keras's activation=None */
    for (int i = 0; i < N_ACTIVATIONS; i++)
        if (strcasecmp(name, activation_names[i]) == 0) {
            *out = (sy_activation)i;
            return SY_OK;
        }
    if (strcasecmp(name, "silu") == 0) { /* Keras's alias: the same function, written back as swish */
        *out = SY_ACTIVATION_SWISH;
        return SY_OK;
    }
    return sy_error(SY_ERR_NOT_FOUND, "unknown activation '%s'; known: %s", name, KERAS_ACTIVATION_NAMES);
}

sy_node keras_activate(sy_graph *g, sy_activation act, sy_node x) {
    switch (act) {
    case SY_ACTIVATION_RELU: return sy_graph_relu(g, x);
    case SY_ACTIVATION_SIGMOID: return sy_graph_sigmoid(g, x);
    case SY_ACTIVATION_TANH: return sy_graph_tanh(g, x);
    case SY_ACTIVATION_SOFTMAX: return sy_graph_softmax(g, x, -1);
    /* issue 15, activations */
    case SY_ACTIVATION_EXPONENTIAL: return sy_graph_exp(g, x);
    default: {
        sy_act_params p;
        if (keras_act_params(act, &p) && p.fn < SY_AF_COUNT) return graph_activation(g, x, p.fn, p.a, p.b, p.c);
        return x;
    }
    }
}

bool keras_act_params(sy_activation a, sy_act_params *p) {
    *p = (sy_act_params){.fn = SY_AF_LINEAR};
    switch (a) {
    case SY_ACTIVATION_LINEAR: return true;
    case SY_ACTIVATION_RELU: *p = (sy_act_params){.fn = SY_AF_RELU, .b = INFINITY}; return true;
    case SY_ACTIVATION_SIGMOID: p->fn = SY_AF_SIGMOID; return true;
    case SY_ACTIVATION_TANH: p->fn = SY_AF_TANH; return true;
    case SY_ACTIVATION_ELU: *p = (sy_act_params){.fn = SY_AF_ELU, .a = 1.0f}; return true;
    case SY_ACTIVATION_SELU: p->fn = SY_AF_SELU; return true;
    case SY_ACTIVATION_GELU: p->fn = SY_AF_GELU; return true;
    case SY_ACTIVATION_SWISH: p->fn = SY_AF_SWISH; return true;
    case SY_ACTIVATION_SOFTPLUS: p->fn = SY_AF_SOFTPLUS; return true;
    case SY_ACTIVATION_SOFTSIGN: p->fn = SY_AF_SOFTSIGN; return true;
    case SY_ACTIVATION_HARD_SIGMOID: p->fn = SY_AF_HARD_SIGMOID; return true;
    case SY_ACTIVATION_EXPONENTIAL: p->fn = SY_AF_EXP; return true;
    case SY_ACTIVATION_RELU6: *p = (sy_act_params){.fn = SY_AF_RELU, .b = 6.0f}; return true;
    default: return false; /* softmax */
    }
}

/* ---- shapes ------------------------------------------------------------------------- */

sy_shape keras_batch_shape(int64_t batch, const sy_shape *s) {
    sy_shape b;
    memset(&b, 0, sizeof b);
    b.rank = s->rank + 1;
    b.dims[0] = batch;
    for (int i = 0; i < s->rank; i++) b.dims[i + 1] = s->dims[i];
    return b;
}

char *keras_shape_str(const sy_shape *s, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "(None");
    for (int i = 0; i < s->rank && used < size; i++) used += (size_t)snprintf(buf + used, size - used, ", %lld", (long long)s->dims[i]);
    if (used < size) snprintf(buf + used, size - used, ")");
    return buf;
}

int keras_act_code(sy_activation a) {
    switch (a) {
    case SY_ACTIVATION_RELU: return SY_ACT_RELU;
    case SY_ACTIVATION_SIGMOID: return SY_ACT_SIGMOID;
    case SY_ACTIVATION_TANH: return SY_ACT_TANH;
    default: return SY_ACT_NONE;
    }
}
