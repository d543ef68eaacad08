/*
 * conv_layers.h - what the convolution layers' files share (conv2d.c,
 * depthwise_conv2d.c, conv2d_transpose.c): checking the arguments every
 * Keras Conv layer has, their output size, and the part of get_config()
 * they all write in the same order (Keras's base Conv class).
 */
#ifndef SY_KERAS_CONV_LAYERS_H
#define SY_KERAS_CONV_LAYERS_H

#include "../keras_config.h"

/* The keys of get_config() that Keras's base Conv class writes, in its
 * order: the head of every conv layer's json_keys. */
#define CONV_BASE_KEYS                                                                                              \
    "filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "groups", "activation",         \
        "use_bias", "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",             \
        "kernel_constraint", "bias_constraint"

/* dilation_rate[i] and groups, 0 read as 1 (a sy_layer filled by hand). */
static inline int32_t conv_dilation(const sy_layer *l, int i) {
    return l->dilation_rate[i] > 1 ? l->dilation_rate[i] : 1;
}
static inline int32_t conv_groups(const sy_layer *l) {
    return l->groups > 1 ? l->groups : 1;
}

/* kernel_size, strides, dilation_rate positive, padding valid or same,
 * dilation only with unit strides (Keras's own refusals), and an input of
 * shape (H, W, C); refused naming layer `name` of class `cls`. */
sy_status conv_check(const sy_layer *l, const char *name, const char *cls, const sy_shape *in);
/* The output size of a conv with l's kernel_size, strides, padding and
 * dilation over in (H, W, C); an error if it would be empty. */
sy_status conv_out_hw(const sy_layer *l, const char *name, const char *cls, const sy_shape *in,
                      int64_t *oh, int64_t *ow);
/* The weights of Conv2D and Conv1D: "kernel" of shape `kernel` with l's
 * kernel initializer and regularizer, then "bias" (filters,) when
 * use_bias. Returns how many. */
int conv_kernel_bias(const sy_layer *l, sy_shape kernel, layer_weight *w);
/* The graph op's options from l. */
sy_conv2d_options conv_options_of(const sy_layer *l);

/* Reading Keras's Conv config: filters (when `filters`), kernel_size,
 * strides, padding, data_format, dilation_rate, groups, activation,
 * use_bias, bias_initializer, and the bias's regularizer and constraint
 * (null). */
sy_status conv_json_read(const rd *r, sy_layer *l, bool filters);
/* Writing it: [filters,] kernel_size, strides, padding, data_format,
 * dilation_rate, groups, activation, use_bias. */
void conv_json_write(jw *w, const sy_layer *l, bool filters);
/* issue 17: what Conv2D and Conv1D write after that: both initializers,
 * the kernel, bias and activity regularizers, the constraints (null). */
void conv_json_write_tail(jw *w, const sy_layer *l, const char **bad);
/* An initializer argument; *bad names it when Keras could not hold it. */
void conv_json_init(jw *w, const char *key, const sy_init *init, const char **bad);

#endif
