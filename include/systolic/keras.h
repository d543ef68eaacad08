/*
 * systolic/keras.h - Keras-style models: Sequential, layers, compile, fit,
 * evaluate, predict, summary.
 *
 * The Fashion-MNIST tutorial, as the TPU guide writes it in Keras:
 *
 *   sy_model *m;
 *   sy_model_new("sequential", &m);
 *   sy_layer conv = sy_layer_conv2d(64, 3, 3);
 *   conv.input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
 *   sy_model_add(m, &conv);
 *   sy_layer pool = sy_layer_max_pooling2d(2, 2);
 *   sy_model_add(m, &pool);
 *   sy_layer relu = sy_layer_activation(SY_ACTIVATION_RELU), flat = sy_layer_flatten();
 *   sy_model_add(m, &relu);
 *   sy_model_add(m, &flat);
 *   sy_layer dense = sy_layer_dense(10), soft = sy_layer_activation(SY_ACTIVATION_SOFTMAX);
 *   sy_model_add(m, &dense);
 *   sy_model_add(m, &soft);
 *
 *   sy_compile_options c = sy_compile_options_default();
 *   c.optimizer = sy_optimizer_adam(1e-3f);
 *   c.loss = "sparse_categorical_crossentropy";
 *   const char *metrics[] = {"sparse_categorical_accuracy"};
 *   c.metrics = metrics;
 *   c.n_metrics = 1;
 *   sy_model_compile(m, &c);
 *
 *   sy_fit_options f = sy_fit_options_default();
 *   f.batch_size = 1000; f.epochs = 5; f.steps_per_epoch = 60;
 *   f.x_val = x_test; f.y_val = y_test; f.validation_freq = 5;
 *   sy_history *h;
 *   sy_model_fit(m, x_train, y_train, &f, &h);
 *
 * Semantics follow tf.keras 2.x (docs/design/keras-semantics.md): layer
 * defaults, weight layouts (Dense kernels (in, out), Conv2D kernels HWIO,
 * NHWC activations), glorot_uniform kernels and zero biases, losses reduced
 * with SUM_OVER_BATCH_SIZE, a softmax/sigmoid output feeding a
 * cross-entropy computed from its logits. Shapes exclude the batch axis
 * (Keras's input_shape); a model is compiled once per batch size into
 * static-shape plans.
 *
 * Mistakes are refused as early as Keras refuses them, with the layer's name
 * and the shapes involved: an impossible layer stack at sy_model_add, an
 * unknown loss, optimizer or metric at sy_model_compile, data of the wrong
 * shape at fit/evaluate/predict.
 */
#ifndef SYSTOLIC_KERAS_H
#define SYSTOLIC_KERAS_H

#include "systolic/compiler.h"
#include "systolic/core.h"
#include "systolic/data.h"
#include "systolic/graph.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layers ---------------------------------------------------------------- */

typedef enum sy_activation {
    SY_ACTIVATION_LINEAR = 0,
    SY_ACTIVATION_RELU,
    SY_ACTIVATION_SIGMOID,
    SY_ACTIVATION_TANH,
    SY_ACTIVATION_SOFTMAX,
    /* issue 15, activations: Keras 2.15's other activation names */
    SY_ACTIVATION_ELU,          /* alpha 1 */
    SY_ACTIVATION_SELU,
    SY_ACTIVATION_GELU,         /* approximate=False, as the name gives it */
    SY_ACTIVATION_SWISH,        /* x sigmoid(x); "silu" reads as swish, which Keras writes */
    SY_ACTIVATION_SOFTPLUS,
    SY_ACTIVATION_SOFTSIGN,
    SY_ACTIVATION_HARD_SIGMOID, /* clip(0.2 x + 0.5, 0, 1) */
    SY_ACTIVATION_EXPONENTIAL,
    SY_ACTIVATION_RELU6         /* tf.nn.relu6, which Keras finds by the name */
} sy_activation;

/* Keras's name ("relu") and back; SY_ERR_NOT_FOUND lists the known names. */
const char *sy_activation_name(sy_activation activation);
sy_status sy_activation_from_name(const char *name, sy_activation *out);

typedef enum sy_layer_kind {
    SY_LAYER_DENSE = 1,
    SY_LAYER_CONV2D,
    SY_LAYER_MAX_POOLING2D,
    SY_LAYER_AVERAGE_POOLING2D,
    SY_LAYER_ACTIVATION,
    SY_LAYER_FLATTEN,
    SY_LAYER_RESHAPE,
    SY_LAYER_DROPOUT,
    SY_LAYER_EMBEDDING,
    SY_LAYER_LSTM,
    SY_LAYER_GRU,
    /* merge layers (several inputs) */
    SY_LAYER_ADD,
    SY_LAYER_SUBTRACT,
    SY_LAYER_MULTIPLY,
    SY_LAYER_AVERAGE,
    SY_LAYER_MAXIMUM,
    SY_LAYER_MINIMUM,
    SY_LAYER_CONCATENATE,
    /* the convolution family (issue 15) */
    SY_LAYER_DEPTHWISE_CONV2D,
    SY_LAYER_SEPARABLE_CONV2D,
    SY_LAYER_CONV2D_TRANSPOSE,
    SY_LAYER_ZERO_PADDING2D,
    SY_LAYER_CROPPING2D,
    SY_LAYER_UP_SAMPLING2D,
    SY_LAYER_GLOBAL_AVERAGE_POOLING2D,
    SY_LAYER_GLOBAL_MAX_POOLING2D,
    /* issue 15, activations */
    SY_LAYER_RELU,
    SY_LAYER_LEAKY_RELU,
    SY_LAYER_PRELU,
    SY_LAYER_ELU,
    SY_LAYER_SOFTMAX,
    SY_LAYER_RESCALING,
    /* normalization layers */
    SY_LAYER_BATCH_NORMALIZATION,
    SY_LAYER_LAYER_NORMALIZATION,
    /* issue 15, keras.applications: the Normalization preprocessing layer */
    SY_LAYER_NORMALIZATION,
    /* issue 17, sequence layers (layers/conv1d.c, pooling1d.c, simple_rnn.c, sequence_shape.c, spatial_dropout.c) */
    SY_LAYER_CONV1D = 100,
    SY_LAYER_MAX_POOLING1D,
    SY_LAYER_AVERAGE_POOLING1D,
    SY_LAYER_GLOBAL_MAX_POOLING1D,
    SY_LAYER_GLOBAL_AVERAGE_POOLING1D,
    SY_LAYER_SIMPLE_RNN,
    SY_LAYER_REPEAT_VECTOR,
    SY_LAYER_PERMUTE,
    SY_LAYER_SPATIAL_DROPOUT1D,
    SY_LAYER_SPATIAL_DROPOUT2D,
    SY_LAYER_BIDIRECTIONAL,
    SY_LAYER_TIME_DISTRIBUTED,
    /* issue 17, masking */
    SY_LAYER_MASKING,
    /* issue 15, nested models: a model used as a layer (sy_layer_model) */
    SY_LAYER_MODEL = 200
} sy_layer_kind;

/* A weight or activity penalty, Keras's regularizers (issue 15): L1(l1)
 * adds l1 * sum(|w|) to the loss, L2(l2) l2 * sum(w^2), L1L2 both. The
 * strings 'l1', 'l2' and 'l1_l2' are L1(0.01), L2(0.01) and
 * L1L2(0.01, 0.01). The factors are float32, as Keras keeps them. An
 * activity regularizer penalises the layer's output, divided by the batch
 * size. Penalties join the loss fit() trains on and the loss fit() and
 * evaluate() report, as in Keras. */
typedef enum sy_regularizer_kind {
    SY_REGULARIZER_NONE = 0,
    SY_REGULARIZER_L1,
    SY_REGULARIZER_L2,
    SY_REGULARIZER_L1L2
} sy_regularizer_kind;

typedef struct sy_regularizer {
    sy_regularizer_kind kind; /* NONE: none (Keras's None) */
    float l1, l2;
} sy_regularizer;

sy_regularizer sy_regularizer_l1(float l1);
sy_regularizer sy_regularizer_l2(float l2);
sy_regularizer sy_regularizer_l1_l2(float l1, float l2);

/* A number or a list of numbers as Keras keeps it (Rescaling's scale and
 * offset): a list when `list`, else v[0] alone; bit i of `integer` set when
 * v[i] is an integer in Keras's JSON ("scale": 2, not 2.0). */
#define SY_NUMBERS_MAX 16
typedef struct sy_numbers {
    bool list;
    int32_t n;
    uint32_t integer;
    double v[SY_NUMBERS_MAX];
} sy_numbers;

sy_numbers sy_numbers_scalar(double v);

/* issue 17: how Bidirectional joins its forward and backward outputs
 * (Keras's merge_mode; None, which gives both, is refused). */
typedef enum sy_merge_mode {
    SY_MERGE_CONCAT = 0, /* along the last axis, forward first */
    SY_MERGE_SUM,
    SY_MERGE_MUL,
    SY_MERGE_AVE
} sy_merge_mode;

/* A layer's configuration: Keras's constructor arguments. Make one with a
 * sy_layer_<kind>() function, which fills in Keras's defaults, then change
 * fields as Keras's keyword arguments would. Fields a kind does not use are
 * ignored. */
/* issue 16, mixed_bfloat16: Keras's dtype policies (tf.keras.mixed_precision.Policy), see
 * docs/design/mixed-precision.md. Under mixed_bfloat16 a layer keeps its variables in float32 and computes in
 * bfloat16: its inputs and variables are cast to bfloat16 and every op's result is rounded to bfloat16. */
typedef enum sy_dtype_policy {
    SY_POLICY_GLOBAL = 0,      /* the global policy when the layer joins a model (sy_keras_set_global_policy) */
    SY_POLICY_FLOAT32,         /* "float32" */
    SY_POLICY_MIXED_BFLOAT16,  /* "mixed_bfloat16" */
} sy_dtype_policy;

/* tf.keras.mixed_precision.set_global_policy(name): "float32" or "mixed_bfloat16"; other names are refused
 * (SY_ERR_UNSUPPORTED for Keras's other policies, SY_ERR_INVALID_ARGUMENT for unknown ones). It applies to
 * the layers added to models afterwards (sy_model_add, sy_model_call, model files read), as in Keras, where it
 * applies to layers constructed afterwards; process-wide. */
sy_status sy_keras_set_global_policy(const char *name);
const char *sy_keras_global_policy(void); /* "float32" or "mixed_bfloat16" */
/* A policy's name -> value, refused as sy_keras_set_global_policy refuses; what (NULL: nothing) begins the
 * error message. */
sy_status sy_dtype_policy_from_name(const char *name, const char *what, sy_dtype_policy *out);
const char *sy_dtype_policy_name(sy_dtype_policy p); /* SY_POLICY_GLOBAL: the global one's */
struct sy_model;
/* Every layer of m (and of the models nested in it) given the policy `name`, as if each had been made with
 * dtype=name; what the CLI's --dtype-policy does, for a model file whose layers say "float32". The weights
 * are kept; plans are compiled again on their next use. */
sy_status sy_model_set_dtype_policy(struct sy_model *m, const char *name);

typedef struct sy_layer {
    sy_layer_kind kind;
    const char *name;         /* NULL: Keras's automatic name (conv2d, conv2d_1, ...) */
    sy_shape input_shape;     /* first layer only: the input without the batch axis; rank 0: not given */
    sy_activation activation; /* Dense, Conv2D, Activation; LSTM, GRU: tanh */
    bool use_bias;            /* Dense, Conv2D, LSTM, GRU: true */
    int32_t units;            /* Dense, LSTM, GRU */
    int32_t filters;          /* Conv2D */
    int32_t kernel_size[2];   /* Conv2D */
    int32_t strides[2];       /* Conv2D: (1, 1); pooling: the pool size */
    int32_t pool_size[2];     /* pooling: (2, 2) */
    sy_padding padding;       /* Conv2D, pooling: valid */
    double rate;              /* Dropout; double as Keras keeps it (0.07500000000000001 is written back so) */
    uint64_t seed;            /* Dropout's mask stream; 0: derived from the model's seed */
    sy_shape target_shape;    /* Reshape, without the batch axis; one dimension may be -1 */
    sy_init kernel_initializer; /* Dense, Conv2D, LSTM, GRU: glorot_uniform (seed 0: from the model's seed) */
    sy_init bias_initializer;   /* Dense, Conv2D, LSTM, GRU: zeros */
    /* Embedding: input_dim words to vectors of output_dim; input_length, if
     * given, is the input's length (and the model's input shape when first);
     * mask_zero: index 0 is padding, masked (docs/design/masking.md) */
    int32_t input_dim, output_dim, input_length;
    bool mask_zero;
    sy_init embeddings_initializer; /* uniform(-0.05, 0.05) */
    /* LSTM, GRU */
    sy_activation recurrent_activation; /* sigmoid */
    bool return_sequences, return_state, go_backwards;
    bool unit_forget_bias;              /* LSTM: true (forget-gate biases start at 1) */
    bool reset_after;                   /* GRU: true, Keras 2's default (the only form here) */
    float dropout, recurrent_dropout;   /* of the inputs and of h(t-1); masks fixed per sequence */
    sy_init recurrent_initializer;      /* orthogonal */
    /* the convolution family (issue 15). Conv2D, DepthwiseConv2D,
     * SeparableConv2D and Conv2DTranspose also take kernel_size, strides,
     * padding, activation, use_bias and bias_initializer above; Conv2D,
     * SeparableConv2D and Conv2DTranspose filters and kernel_initializer. */
    int32_t dilation_rate[2];        /* (1, 1); more only with strides (1, 1), as Keras; Conv2DTranspose: (1, 1) only */
    int32_t groups;                  /* Conv2D: 1; filters and input channels must be multiples of it */
    int32_t depth_multiplier;        /* DepthwiseConv2D, SeparableConv2D: 1 (outputs per input channel) */
    sy_init depthwise_initializer;   /* DepthwiseConv2D, SeparableConv2D: glorot_uniform */
    sy_init pointwise_initializer;   /* SeparableConv2D: glorot_uniform */
    bool has_output_padding;         /* Conv2DTranspose: false (Keras's output_padding=None) */
    int32_t output_padding[2];       /* Conv2DTranspose, when has_output_padding: each below its stride */
    int32_t margins[2][2];           /* ZeroPadding2D's padding, Cropping2D's cropping: ((top, bottom), (left, right)) */
    int32_t size[2];                 /* UpSampling2D: (2, 2) */
    bool bilinear;                   /* UpSampling2D: interpolation 'bilinear' (true) or 'nearest' (false, the default) */
    bool keepdims;                   /* GlobalAveragePooling2D, GlobalMaxPooling2D: false */
    /* issue 17, sequence layers. Conv1D and the 1D poolings use entry 0 of
     * kernel_size, strides, dilation_rate and pool_size (the steps axis);
     * Conv1D's padding may also be causal. */
    bool causal;                     /* Conv1D: padding 'causal' (left padding of dilation * (kernel - 1)) */
    int32_t repeat_n;                /* RepeatVector: n */
    int32_t dims[SY_MAX_RANK];       /* Permute: the new order of the axes after the batch, 1-based */
    int32_t n_dims;
    bool unroll;                     /* SimpleRNN: false; kept for the JSON (the graph is unrolled either way) */
    /* Bidirectional and TimeDistributed wrap one layer, whose arguments
     * are this sy_layer's own fields (units, return_sequences, ...):
     * sy_layer_bidirectional(&lstm) copies them and sets these. */
    sy_layer_kind wrapped;           /* the inner layer's kind */
    sy_merge_mode merge_mode;        /* Bidirectional: concat */
    char wrapped_name[64];           /* the inner layer's name ("lstm"); empty: Keras's automatic one */
    bool wrapped_auto_named;         /* set by the model when it named the inner layer */
    /* issue 15, activations and regularizers */
    sy_regularizer kernel_regularizer, bias_regularizer; /* Dense, Conv2D: none */
    sy_regularizer activity_regularizer;                 /* Dense, Conv2D, Embedding: none (of the output) */
    sy_regularizer embeddings_regularizer;               /* Embedding: none */
    float max_value;          /* ReLU: INFINITY (Keras's None) */
    float negative_slope;     /* ReLU: 0 */
    float threshold;          /* ReLU: 0 */
    float alpha;              /* LeakyReLU: 0.3 (negative slope); ELU: 1 */
    sy_init alpha_initializer;        /* PReLU: zeros */
    sy_regularizer alpha_regularizer; /* PReLU: none */
    int32_t shared_axes[SY_MAX_RANK]; /* PReLU: axes (1 = the first after the batch) where alpha is one value */
    int32_t n_shared_axes;            /* 0: Keras's None */
    int32_t axis;             /* Softmax, Concatenate: -1 (an axis of the input with the batch axis 0); Softmax
                                 given a list of axes (Keras's axis=[1, 2]) has them in axes/n_axes instead */
    sy_numbers scale, offset; /* Rescaling: y = x * scale + offset, scalars or one value per last-axis channel */
    sy_shape noise_shape;     /* Dropout: the mask's shape with the batch axis, -1 for Keras's None (the input's
                                 dimension); the mask is shared along axes of 1. rank 0: None */
    /* normalization layers. axes (Keras's axis): the feature axes, counted in the batch
     * shape (1 is the first axis after the batch), negative from the end;
     * BatchNormalization takes one (-1), LayerNormalization one or more
     * (-1). Building the model resolves them to positive axes, as Keras's
     * build() does (its get_config then writes [rank]). */
    int32_t axes[SY_MAX_RANK];
    int32_t n_axes;
    double momentum;  /* BatchNormalization: 0.99, of the moving statistics */
    double epsilon;   /* 0.001 */
    bool center;      /* true: add beta */
    bool use_scale;   /* true: multiply by gamma (Keras's scale) */
    sy_init beta_initializer, gamma_initializer;                      /* zeros, ones */
    sy_init moving_mean_initializer, moving_variance_initializer;     /* BatchNormalization: zeros, ones */
    /* issue 15, keras.applications: Normalization(axis=-1, mean=None,
     * variance=None, invert=False). axes/n_axes above are its axis, the
     * axes kept (a mean and variance each), as given: (-1), n_axes 0 for
     * Keras's None (one mean and variance of everything). mean and
     * variance: n 0 for None, when they are the layer's weights (mean,
     * variance and count, not trainable, set by
     * sy_model_adapt_normalization or loaded); else constants, a number
     * or a list broadcast against the kept axes' shape. */
    sy_numbers mean, variance;
    bool invert;      /* y = mean + x * sqrt(variance) instead of (x - mean) / sqrt(variance) */
    /* issue 15, nested models: the model this layer is (SY_LAYER_MODEL) */
    const struct sy_model *model;
    /* issue 16, mixed_bfloat16: Keras's dtype argument; SY_POLICY_GLOBAL (0): the global policy */
    sy_dtype_policy dtype_policy;
    /* issue 17, masking: Masking's mask_value (0.0): steps whose features all equal it are masked */
    double mask_value;
} sy_layer;

sy_layer sy_layer_dense(int32_t units);
sy_layer sy_layer_conv2d(int32_t filters, int32_t kernel_h, int32_t kernel_w);
sy_layer sy_layer_max_pooling2d(int32_t pool_h, int32_t pool_w);
sy_layer sy_layer_average_pooling2d(int32_t pool_h, int32_t pool_w);
sy_layer sy_layer_activation(sy_activation activation);
sy_layer sy_layer_flatten(void);
sy_layer sy_layer_reshape(sy_shape target_shape);
sy_layer sy_layer_dropout(double rate);
sy_layer sy_layer_embedding(int32_t input_dim, int32_t output_dim);
sy_layer sy_layer_lstm(int32_t units);
sy_layer sy_layer_gru(int32_t units);
/* Merge layers, called on a list of tensors (sy_model_call). */
sy_layer sy_layer_add(void);
sy_layer sy_layer_subtract(void); /* exactly two inputs: a - b */
sy_layer sy_layer_multiply(void);
sy_layer sy_layer_average(void);
sy_layer sy_layer_maximum(void);
sy_layer sy_layer_minimum(void);
sy_layer sy_layer_concatenate(int32_t axis); /* Keras's default axis is -1 */
/* the convolution family (issue 15), with Keras's defaults */
sy_layer sy_layer_depthwise_conv2d(int32_t kernel_h, int32_t kernel_w);
sy_layer sy_layer_separable_conv2d(int32_t filters, int32_t kernel_h, int32_t kernel_w);
sy_layer sy_layer_conv2d_transpose(int32_t filters, int32_t kernel_h, int32_t kernel_w);
sy_layer sy_layer_zero_padding2d(int32_t top, int32_t bottom, int32_t left, int32_t right);
sy_layer sy_layer_cropping2d(int32_t top, int32_t bottom, int32_t left, int32_t right);
sy_layer sy_layer_up_sampling2d(int32_t size_h, int32_t size_w);
sy_layer sy_layer_global_average_pooling2d(void);
sy_layer sy_layer_global_max_pooling2d(void);
/* issue 15, activations: Keras's defaults, ReLU() ... Rescaling(scale, offset=0.0) */
sy_layer sy_layer_relu(void);
sy_layer sy_layer_leaky_relu(float alpha);
sy_layer sy_layer_prelu(void);
sy_layer sy_layer_elu(float alpha);
sy_layer sy_layer_softmax(int32_t axis);
sy_layer sy_layer_rescaling(double scale, double offset);
/* Keras's BatchNormalization(): axis -1, momentum 0.99, epsilon 0.001,
 * center and scale. Weights gamma, beta (trainable), moving_mean and
 * moving_variance (not trainable). Training normalises by the batch's
 * statistics (each replica by its shard's) and moves the moving ones
 * towards them; inference uses the moving statistics. */
sy_layer sy_layer_batch_normalization(void);
/* Keras's LayerNormalization(): axis -1, epsilon 0.001, center, scale;
 * weights gamma, beta of the normalised axes' shape. */
sy_layer sy_layer_layer_normalization(void);
/* issue 15, keras.applications: Keras's Normalization(): axis -1, mean
 * and variance None (weights: mean zeros, variance ones, count 0, none
 * trainable; Keras's adapt() sets them), invert false. y = (x - mean) /
 * max(sqrt(variance), 1e-7). */
sy_layer sy_layer_normalization(void);

/* issue 15, nested models: a built model (Sequential or Functional, one
 * input and one output) used as a layer of another, as Keras calls a model
 * on a tensor or adds it to a Sequential model. Named as the inner model
 * (Keras's layer name is the model's name). The outer model takes a copy
 * of the inner one -- its structure and its weights as they are when it
 * is added (sy_model_add) or first called (sy_model_call); the copy's
 * weights are the outer model's variables from then on, trained and saved
 * with it, and `inner` stays the caller's, unchanged by the outer's
 * training (unlike Keras, where both are one object). Calling the layer
 * again (sy_model_call_again with its name) shares the copy's weights. */
sy_layer sy_layer_model(const struct sy_model *inner);

/* issue 17, sequence layers, with Keras 2.15's defaults. Inputs are
 * (steps, channels) without the batch axis; docs/design/sequence-layers.md. */
sy_layer sy_layer_conv1d(int32_t filters, int32_t kernel_size); /* strides 1, padding valid, dilation 1, groups 1 */
sy_layer sy_layer_max_pooling1d(int32_t pool_size);             /* strides None (the pool size), valid */
sy_layer sy_layer_average_pooling1d(int32_t pool_size);
sy_layer sy_layer_global_max_pooling1d(void);     /* keepdims false */
sy_layer sy_layer_global_average_pooling1d(void); /* keepdims false */
sy_layer sy_layer_simple_rnn(int32_t units);      /* tanh, glorot_uniform / orthogonal / zeros */
sy_layer sy_layer_repeat_vector(int32_t n);       /* (features) -> (n, features) */
sy_layer sy_layer_permute(const int32_t *dims, int32_t n_dims); /* dims 1-based, as Keras's */
sy_layer sy_layer_spatial_dropout1d(double rate); /* whole channels of (steps, channels) */
sy_layer sy_layer_spatial_dropout2d(double rate); /* whole channels of (height, width, channels) */
/* issue 17, masking: Masking(mask_value): masks the steps of (steps, features) whose features all equal
 * mask_value and zeroes them; LSTM, GRU, SimpleRNN, Bidirectional and GlobalAveragePooling1D then skip them */
sy_layer sy_layer_masking(double mask_value);
/* Bidirectional(layer): an LSTM, GRU or SimpleRNN run forwards and
 * backwards (go_backwards flipped), merge_mode concat; its weights are
 * forward_<name>/... then backward_<name>/... as Keras names them. */
sy_layer sy_layer_bidirectional(const sy_layer *inner);
/* TimeDistributed(layer): inner applied to every step of (steps, ...) with
 * one set of weights; Dense, Conv1D, Conv2D, the poolings, Flatten,
 * Activation, Dropout and Reshape may be inside. */
sy_layer sy_layer_time_distributed(const sy_layer *inner);

/* Keras's class name of a kind ("Conv2D"). */
const char *sy_layer_class_name(sy_layer_kind kind);

/* ---- models ------------------------------------------------------------------ */

typedef struct sy_model sy_model;

/* An empty Sequential model named `name` (NULL: "sequential"). Created
 * inside a strategy's scope (systolic/distribute.h), it runs one replica
 * per device of that strategy, which must outlive it; outside any scope,
 * one replica whose kernels use every core. */
sy_status sy_model_new(const char *name, sy_model **out);
void sy_model_free(sy_model *m);

/* Seed of the model's random streams: initial weights, dropout masks and
 * shuffling (default 0, so runs are reproducible). Setting it draws the
 * initial weights of the layers already added again. */
void sy_model_set_seed(sy_model *m, uint64_t seed);

/* Append a layer (the configuration is copied, the name too). Once the
 * input shape is known -- from the first layer's input_shape -- every layer
 * is built when added: its output shape is inferred and its weights are
 * created and initialised; a layer that cannot follow the one before it is
 * refused (SY_ERR_SHAPE or SY_ERR_INVALID_ARGUMENT) with its name and the
 * shapes, and the model is left as it was. */
sy_status sy_model_add(sy_model *m, const sy_layer *layer);

/* Give the input shape when the first layer did not (Keras's build()). */
sy_status sy_model_build(sy_model *m, sy_shape input_shape);

const char *sy_model_name(const sy_model *m);
int32_t sy_model_layer_count(const sy_model *m);
const sy_layer *sy_model_layer(const sy_model *m, int32_t index); /* name filled in */
sy_shape sy_model_input_shape(const sy_model *m);                 /* without the batch axis */
sy_shape sy_model_output_shape(const sy_model *m, int32_t layer); /* without the batch axis */
int64_t sy_model_param_count(const sy_model *m, int32_t layer);   /* -1: the whole model */

/* The weights, in Keras's order (layer by layer; kernel before bias), named
 * as Keras names them ("conv2d/kernel:0"). The data is the live float32
 * storage: writing it sets the weight (Keras's set_weights). */
int32_t sy_model_weight_count(const sy_model *m);
const char *sy_model_weight_name(const sy_model *m, int32_t index);
sy_shape sy_model_weight_shape(const sy_model *m, int32_t index);
float *sy_model_weight_data(sy_model *m, int32_t index);
/* The index of the weight named `name` (with or without ":0"), or -1. */
int32_t sy_model_find_weight(const sy_model *m, const char *name);

/* issue 15, keras.applications: Keras's Normalization.adapt(data,
 * batch_size) on the model's Normalization layer named `layer`: data
 * float32 (samples, the layer's input shape...), taken batch_size samples
 * at a time (0: 32) into the mean, variance and count weights as Keras's
 * update_state merges each batch's moments. Refused for a layer given
 * constant mean and variance, as Keras refuses it. */
sy_status sy_model_adapt_normalization(sy_model *m, const char *layer, const sy_tensor *data, int64_t batch_size);

/* ---- Functional models ------------------------------------------------------- */

/* A Functional model is built as Keras's functional API builds one:
 *
 *   sy_model *m;
 *   sy_model_new_functional("resnet_block", &m);
 *   int32_t x, h, y;
 *   sy_model_input(m, sy_shape_of(3, (int64_t)32, (int64_t)32, (int64_t)16), NULL, NULL, &x); // Input
 *   sy_layer conv = sy_layer_conv2d(16, 3, 3);
 *   conv.padding = SY_PADDING_SAME;
 *   sy_model_call(m, &conv, &x, 1, &h);                   // Conv2D(...)(x)
 *   sy_layer add = sy_layer_add();
 *   int32_t both[2] = {x, h};
 *   sy_model_call(m, &add, both, 2, &y);                   // Add()([x, h])
 *   sy_model_set_outputs(m, &y, 1);                        // Model(x, y)
 *
 * Tensors are int32 handles of the model's nodes. A layer is built at its
 * first call (output shape inferred, weights created, shapes checked, so a
 * mismatch is refused at the call naming the layer and the shapes);
 * calling a layer again (sy_model_call_again) shares its weights.
 * sy_model_set_outputs ends the model as Model(inputs, outputs): it is
 * refused, naming what, for an output a model input does not lead to
 * ("graph disconnected"), a layer that leads to no output, or a name used
 * twice; the layers then take Keras's model.layers order (by depth from
 * the inputs), which is the order of the weights, the JSON and the
 * summary. A Sequential model is the chain case of the same graph. The
 * model's inputs are those made with sy_model_input, in that order. */

/* An empty Functional model named `name` (NULL: "model"), with
 * sy_model_new's strategy scope. */
sy_status sy_model_new_functional(const char *name, sy_model **out);
/* keras.Input(shape, name, dtype): shape without the batch axis, every
 * dimension known; name NULL: "input_1", "input_2", ...; dtype NULL:
 * "float32" (or "int32", "int64", "uint8", "float16", "float64": fed as
 * the first layer takes them). */
sy_status sy_model_input(sy_model *m, sy_shape shape, const char *name, const char *dtype, int32_t *out);
/* layer(inputs): a new layer (configuration copied, named as sy_model_add
 * names) called on n tensors; *out is its output. On an error the model is
 * as it was. */
sy_status sy_model_call(sy_model *m, const sy_layer *layer, const int32_t *inputs, int n, int32_t *out);
/* The layer named `layer_name` called again, sharing its weights: its
 * inputs must have the shapes of its first call's. */
sy_status sy_model_call_again(sy_model *m, const char *layer_name, const int32_t *inputs, int n, int32_t *out);
/* Model(inputs, outputs): the outputs, in order. */
sy_status sy_model_set_outputs(sy_model *m, const int32_t *outputs, int n);
int32_t sy_model_input_count(const sy_model *m);
int32_t sy_model_output_count(const sy_model *m);

/* Keras's summary table (layers, output shapes, parameter counts) to out:
 * a Functional model that is not a plain chain gets the "Connected to"
 * column, an InputLayer row per input, as Keras prints it. */
void sy_model_summary(const sy_model *m, FILE *out);

/* ---- compile ------------------------------------------------------------------- */

/* One output's part of compile(): Keras's list (or dict) entry. */
/* issue 17, losses and metrics: a loss's arguments, those of its Keras
 * Loss class (sy_loss_args_default gives Keras's defaults). Given (a
 * non-NULL loss_args), the loss is Keras's Loss object and training_config
 * writes it as {"class_name", "config"}; NULL is the plain name. Arguments
 * the loss does not take must keep their defaults. */
typedef struct sy_loss_args {
    double label_smoothing;     /* binary/categorical crossentropy and their focal forms: 0 */
    int32_t axis; /* the class axis, Keras's count (1 is the first after the batch): -1 */
    double delta;               /* Huber: 1 */
    double alpha, gamma;        /* the focal crossentropies: 0.25, 2 */
    bool apply_class_balancing; /* BinaryFocalCrossentropy: false */
    bool has_ignore_class; /* SparseCategoricalCrossentropy's ignore_class: labels of that class
                              count in neither the loss nor its mean (Keras 2.15); false: Keras's
                              None */
    int32_t ignore_class;
    const char *name;           /* the Loss object's name; NULL: Keras's default ("huber_loss", ...) */
} sy_loss_args;

sy_loss_args sy_loss_args_default(void);

typedef struct sy_compile_output {
    const char *output;          /* the output layer's name (Keras's dict key); NULL: by position (list) */
    const char *loss;            /* NULL: the options' loss (and from_logits) */
    bool from_logits;            /* with loss: the loss takes logits */
    const char *const *metrics;  /* this output's metrics (Keras's list of lists); none: the options'
                                    flat metrics, if any */
    int32_t n_metrics;
    const sy_loss_args *loss_args; /* issue 17: with loss, its arguments (NULL: Keras's defaults, the plain name) */
    /* issue 17: this output's weighted_metrics (Keras's list of lists); none: the options' flat
     * weighted_metrics, if any */
    const char *const *weighted_metrics;
    int32_t n_weighted_metrics;
} sy_compile_output;

typedef struct sy_compile_options {
    sy_optimizer optimizer;      /* default: RMSprop(0.001), as Keras's compile() */
    const char *loss;            /* Keras's name or class name: every tf.keras 2.15 built-in loss
                                    (docs/design/losses-metrics.md lists them and their aliases) */
    bool from_logits;            /* the loss takes logits */
    const char *const *metrics;  /* Keras's names: accuracy (acc), sparse_categorical_accuracy, ...;
                                    docs/design/losses-metrics.md lists them (issue 17), with
                                    arguments as "AUC(curve=PR)", "TopKCategoricalAccuracy(k=3)" */
    int32_t n_metrics;
    const char *backend;         /* "cpu" (default) or "ref" */
    int32_t steps_per_execution; /* steps per host round trip: 1; the progress bar and
                                    callbacks see every n-th step, results are the same */
    int32_t threads;             /* outside a strategy scope: kernel threads; 0: one per core */
    /* Several outputs (issue 15), Keras's compile(loss=[...] or {...},
     * loss_weights=..., metrics=[[...], ...]). Without `outputs`, `loss`
     * and `from_logits` apply to every output, as Keras's single loss does,
     * and so does a flat `metrics` list (each output gets its own copy,
     * logged as "<output>_<metric>"). With `outputs`, entry i is Keras's
     * list entry i -- output i, in sy_model_set_outputs' order -- or, when
     * its `output` names an output layer, Keras's dict entry for it; every
     * output needs one entry. loss_weights (NULL: 1 each, Keras's None)
     * parallel `outputs` when it is given, else the model's outputs; the
     * training loss is sum(loss_weight_i * loss_i) plus the regularization
     * penalties. A one-output model is the case n = 1 of all this. */
    const sy_compile_output *outputs;
    int32_t n_outputs;
    const double *loss_weights;
    int32_t n_loss_weights;
    const sy_loss_args *loss_args; /* issue 17: the loss's arguments (NULL: Keras's defaults, the plain name) */
    /* issue 17, fit arguments: Keras's weighted_metrics, for every output: weighted by fit's and
     * evaluate's sample weights (class_weight's too), where `metrics` are not (Keras 2.15). Logged
     * after every output's metrics, named as Keras names them: "weighted_<name>" when a metric
     * already has the name. A saved model's training_config holds them as Keras writes them (a list
     * per output). Per output: sy_compile_output.weighted_metrics. */
    const char *const *weighted_metrics;
    int32_t n_weighted_metrics;
} sy_compile_options;

sy_compile_options sy_compile_options_default(void);

/* Parse an optimizer name (Keras's: "sgd", "adam", "rmsprop", "adamw", "adadelta", "adagrad",
 * "adamax", "adafactor", "nadam", "ftrl", "lion"; any case) with tf.keras 2.15's defaults.
 * SY_ERR_NOT_FOUND lists the names. */
sy_status sy_optimizer_from_name(const char *name, sy_optimizer *out);

/* Configure training. The model must have its input shape. Unknown names
 * are refused with the list of known ones; a loss that cannot take the
 * model's output (binary_crossentropy after a 10-way softmax is fine, a
 * sparse loss on a rank-0 output is not) is refused with both shapes. */
sy_status sy_model_compile(sy_model *m, const sy_compile_options *options);

/* ---- logs and history ---------------------------------------------------------- */

/* Named values: loss and metrics of a step, an epoch or an evaluation, in
 * Keras's order (loss, metrics, then val_loss, val_ metrics). */
#define SY_LOGS_MAX 64
typedef struct sy_logs {
    int32_t n;
    char names[SY_LOGS_MAX][128]; /* "val_<output>_<metric>" fits */
    double values[SY_LOGS_MAX];
} sy_logs;

/* The value named `name`; NAN if absent. */
double sy_logs_get(const sy_logs *logs, const char *name);
/* A logged value as Keras's progress bar prints it: rounded to float32
 * (Keras's logs are float32), four decimals, or %.4e at 1e-3 and below (a
 * scheduled learning rate), "nan" for a NaN. */
void sy_logs_format_value(char *buf, size_t size, double v);

typedef struct sy_history sy_history;
void sy_history_free(sy_history *h);
int32_t sy_history_epochs(const sy_history *h);
/* The logs of the i-th epoch run (epoch number sy_history_epoch(h, i)). */
const sy_logs *sy_history_logs(const sy_history *h, int32_t i);
int32_t sy_history_epoch(const sy_history *h, int32_t i);

/* ---- callbacks -------------------------------------------------------------------- */

/* Hooks fit() calls, Keras's Callback. Any may be NULL. A non-OK status
 * stops fit(), which returns it. Epochs are 0-based as in Keras. */
typedef struct sy_callback {
    void *ctx;
    sy_status (*on_train_begin)(void *ctx, sy_model *m);
    sy_status (*on_epoch_begin)(void *ctx, sy_model *m, int32_t epoch);
    /* After each host round trip; `step` is the last step run in the epoch
     * (0-based); logs hold the epoch's running means. */
    sy_status (*on_train_batch_end)(void *ctx, sy_model *m, int64_t step, const sy_logs *logs);
    sy_status (*on_epoch_end)(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs);
    sy_status (*on_train_end)(void *ctx, sy_model *m, const sy_logs *logs);
    /* Releases ctx: set by the sy_callback_* constructors below, which own
     * state; NULL for a callback whose ctx the caller owns. */
    void (*free)(void *ctx);
} sy_callback;

/* Release a callback made by a sy_callback_* constructor (cb->free(ctx));
 * a no-op for NULL or a callback without free. */
void sy_callback_free(sy_callback *cb);

/* Ask fit() to stop (Keras's model.stop_training): from on_train_batch_end,
 * after that batch -- the epoch then ends as usual (validation,
 * on_epoch_end) without its checkpoint; from on_epoch_end, after that
 * epoch. */
void sy_model_stop_training(sy_model *m);

/* Optimizer steps applied so far (Keras's optimizer.iterations): the global
 * step, across epochs and fit() calls. 0 before the first. */
int64_t sy_model_iterations(const sy_model *m);
/* The compiled optimizer's learning rate (0 before compile): Keras's optimizer.learning_rate,
 * with a schedule the rate of the last step run (the first step's before any), or what
 * sy_model_set_learning_rate set since. */
double sy_model_learning_rate(const sy_model *m);
/* issue 17, learning-rate schedules and the callbacks that set the rate */
/* Set the learning rate (Keras's backend.set_value(optimizer.lr, v)), rounded to float32; the
 * next step uses it. With a schedule Keras lets the value be set but the next step computes
 * the schedule's again: so here (docs/design/lr-schedules.md). SY_ERR_STATE before compile,
 * SY_ERR_INVALID_ARGUMENT for a negative or non-finite rate. */
sy_status sy_model_set_learning_rate(sy_model *m, double learning_rate);
/* A schedule from its text form, NAME:key=value,... (the CLI's --lr-schedule): NAME Keras's class
 * name or its snake_case (exponential_decay, piecewise_constant_decay, polynomial_decay,
 * inverse_time_decay, cosine_decay, cosine_decay_restarts), keys Keras's arguments, values numbers,
 * true/false, or lists split by '/' (boundaries=100/200,values=0.1/0.01/0.001).
 * initial_learning_rate, when not given, is the argument (NAN: required; a float32 value such as
 * an optimizer's learning_rate is taken as its shortest decimal, 0.001f as 0.001). Refused
 * (SY_ERR_INVALID_ARGUMENT, SY_ERR_UNSUPPORTED for an unknown NAME) as a model file's would be. */
sy_status sy_lr_schedule_parse(const char *text, double initial_learning_rate, sy_lr_schedule *out);

/* CSVLogger(filename, separator, append), byte for byte as tf.keras 2.15
 * writes it (docs/design/callbacks.md). The file is opened at train begin --
 * truncated, or with append kept, the header then written only if the
 * file is missing or empty -- and closed at train end. The columns are
 * fixed at the first epoch's end: "epoch" (0-based), then the logs' names
 * sorted, then, when none starts with "val_", "val_" + each (so a run that
 * validates every other epoch has them). One row per epoch, flushed:
 * fields split by `separator`, lines ended "\r\n", values as Python's
 * str(float) ("0.5", "1e-05", "nan"), NA for a value the epoch lacks, a
 * field holding the separator, '"' or a line break quoted as Python's csv
 * module does. SY_ERR_INVALID_ARGUMENT for an empty filename or a NUL
 * separator; a file that cannot be opened is SY_ERR_IO at train begin
 * (fit() returns it), naming the path. Free with sy_callback_free. */
sy_status sy_callback_csv_logger(const char *filename, char separator, bool append, sy_callback *out);

/* EarlyStopping: Keras's arguments and defaults, and Keras 2.15's
 * behaviour step for step (docs/design/callbacks.md). After each epoch the
 * monitored value counts as an improvement when it beats the best so far
 * by more than |min_delta|; training stops (sy_model_stop_training) once
 * `patience` epochs in a row brought none -- never after the first epoch.
 * An improvement that does not also beat `baseline` does not restart the
 * count. A monitored value missing from an epoch's logs is skipped with a
 * warning (sy_log) that lists the names present, as Keras's is. With
 * restore_best_weights, every weight of the best epoch is written back
 * when training stops (not when it runs out of epochs, as in Keras 2.15). */
typedef struct sy_early_stopping_options {
    const char *monitor;       /* "val_loss" (copied) */
    double min_delta;          /* 0; its sign is ignored, as Keras's abs() */
    int32_t patience;          /* 0; must be >= 0 */
    int32_t verbose;           /* 0; 1: "Restoring model weights from the end of the best epoch: N." and
                                  "Epoch N: early stopping" (1-based, Keras's wording) to `progress` */
    const char *mode;          /* "auto" (max for names ending in acc, accuracy or auc, else min), "min" or "max" */
    bool has_baseline;         /* baseline given (Keras's None otherwise) */
    double baseline;
    bool restore_best_weights; /* false */
    int32_t start_from_epoch;  /* 0: epochs before it are not monitored (a warm-up) */
    FILE *progress;            /* where verbose messages go: NULL is stderr, as fit()'s progress bar */
} sy_early_stopping_options;

sy_early_stopping_options sy_early_stopping_options_default(void);
/* SY_ERR_INVALID_ARGUMENT, with the value, for an empty monitor, an unknown
 * mode, a negative patience, start_from_epoch or verbose, a min_delta that
 * is not finite or a NaN baseline. */
sy_status sy_callback_early_stopping(const sy_early_stopping_options *options, sy_callback *out);

/* What an EarlyStopping callback knows, Keras's attributes of the same
 * names: stopped_epoch (0-based; 0 while it has not stopped training),
 * best (the best monitored value, +-inf before one), best_epoch and wait
 * (epochs since the last improvement). Reset at each train begin. */
typedef struct sy_early_stopping_state {
    int32_t stopped_epoch, best_epoch, wait;
    double best;
} sy_early_stopping_state;

/* SY_ERR_INVALID_ARGUMENT for a callback not made by sy_callback_early_stopping. */
sy_status sy_callback_early_stopping_state(const sy_callback *cb, sy_early_stopping_state *out);

/* TerminateOnNaN(): after each host round trip, a "loss" in the logs that
 * is NaN or infinite prints "Batch N: Invalid loss, terminating training"
 * (N the 0-based step in the epoch, Keras's wording) to `progress` (NULL:
 * stderr) and stops training after that batch (sy_model_stop_training).
 * Without it fit() goes on, as Keras's does, and warns (sy_log) once when
 * the loss first stops being a finite number. Nothing to free (free is
 * NULL); sy_callback_free is harmless. */
sy_status sy_callback_terminate_on_nan(FILE *progress, sy_callback *out);

/* issue 17, fit arguments: ModelCheckpoint(filepath, monitor, verbose,
 * save_best_only, save_weights_only, mode, save_freq,
 * initial_value_threshold), Keras 2.15's decisions, file names and
 * messages (docs/design/fit-arguments.md). filepath is formatted as
 * Python's str.format(epoch=epoch + 1, batch=batch + 1, **logs):
 * "w-{epoch:02d}-{val_loss:.2f}.h5"; a name the logs lack fails fit with
 * Keras's words ("Failed to format this callback filepath: ... Reason:
 * 'val_acc'"). Each save writes an HDF5 file (sy_model_save, or
 * sy_model_save_weights with save_weights_only) atomically, making its
 * directory when missing. */
typedef struct sy_model_checkpoint_options {
    const char *filepath;          /* required (copied) */
    const char *monitor;           /* "val_loss" (copied) */
    int32_t verbose;               /* 0; 1: "Epoch 1: val_loss improved from inf to 0.12345, saving model to ..." */
    bool save_best_only;           /* false: every save_freq; true: only when monitor improves */
    bool save_weights_only;        /* false: the whole model */
    const char *mode;              /* "auto" (max when monitor contains "acc", as Keras), "min", "max" */
    int64_t save_freq;             /* 0: Keras's 'epoch'; N: every N batches */
    bool has_initial_value_threshold;
    double initial_value_threshold; /* the best to beat at first (else +-inf) */
    FILE *progress;                /* verbose messages: NULL is stderr */
} sy_model_checkpoint_options;

sy_model_checkpoint_options sy_model_checkpoint_options_default(void);
/* SY_ERR_INVALID_ARGUMENT for an empty filepath or monitor, a filepath whose fields cannot be formatted
 * (a bad spec, '{' unclosed), a negative save_freq. Free with sy_callback_free. */
sy_status sy_callback_model_checkpoint(const sy_model_checkpoint_options *options, sy_callback *out);

/* BackupAndRestore(backup_dir, save_freq, delete_checkpoint): the callback
 * backs the run up in backup_dir -- a model_dir checkpoint (weights,
 * optimizer slots and step count, learning rate, position), the newest only
 * -- from its hooks, when Keras's does: at its on_epoch_end (save_freq 0,
 * Keras's 'epoch'), or after every save_freq-th on_train_batch_end call
 * (counted on across fit() calls) and not at epochs' ends. A fit() started
 * again with the callback after an interruption resumes from it (a backup
 * made at an epoch's last step: at the next epoch), with Keras's epoch
 * numbering and, with the same seed, the input where it was, so the final
 * weights are those of a run never interrupted, bit for bit (unless a
 * callback acts again at the resumed epoch's beginning, as a
 * LearningRateScheduler does in Keras too). When training
 * ends (not when it fails) the backup is deleted unless delete_checkpoint is
 * false. Not with model_dir. Free with sy_callback_free. */
sy_status sy_callback_backup_and_restore(const char *backup_dir, int64_t save_freq, bool delete_checkpoint,
                                         sy_callback *out);

/* issue 17, learning-rate callbacks (lr_callbacks.c; docs/design/lr-schedules.md). Both set the
 * rate with sy_model_set_learning_rate and, at each epoch's end, add "lr" (the rate, as Python
 * shows Keras's np.float32) to fit()'s logs, which the callbacks after them and the history see. */

/* ReduceLROnPlateau: Keras's arguments and defaults and Keras 2.15's behaviour step for step.
 * At each epoch's end the monitored value improves when it beats the best by more than
 * min_delta (below it in min mode, above in max; auto is max when the name contains "acc",
 * as Keras's ReduceLROnPlateau reads it); after `patience` epochs without one, outside the
 * cooldown, the rate becomes max(lr * factor, min_lr) if lr > min_lr, then `cooldown` epochs
 * do not count. A monitor missing from the logs is a warning (sy_log) listing the names. */
typedef struct sy_reduce_lr_options {
    const char *monitor; /* "val_loss" (copied) */
    double factor;       /* 0.1; must be < 1 (Keras's message) and >= 0 */
    int32_t patience;    /* 10 */
    int32_t verbose;     /* 0; 1: "Epoch N: ReduceLROnPlateau reducing learning rate to X." to progress */
    const char *mode;    /* "auto", "min" or "max"; another is warned about and read as auto, as Keras */
    double min_delta;    /* 1e-4 */
    int32_t cooldown;    /* 0 */
    double min_lr;       /* 0 */
    FILE *progress;      /* NULL: stderr */
} sy_reduce_lr_options;

sy_reduce_lr_options sy_reduce_lr_options_default(void);
/* SY_ERR_INVALID_ARGUMENT for factor >= 1 or < 0, a negative patience, cooldown or verbose, an
 * empty monitor, a non-finite min_delta or a negative min_lr. Free with sy_callback_free. */
sy_status sy_callback_reduce_lr_on_plateau(const sy_reduce_lr_options *options, sy_callback *out);
/* Keras's attributes: wait, cooldown_counter, best (+-inf before a value). */
typedef struct sy_reduce_lr_state {
    int32_t wait, cooldown_counter;
    double best;
} sy_reduce_lr_state;
sy_status sy_callback_reduce_lr_state(const sy_callback *cb, sy_reduce_lr_state *out);

/* LearningRateScheduler(schedule, verbose): at each epoch's beginning the rate becomes
 * schedule(user, epoch, lr) -- epoch 0-based, lr the current rate (a float32 widened) -- which
 * must be a finite number >= 0 (else fit() stops with SY_ERR_INVALID_ARGUMENT naming it);
 * verbose 1 prints "Epoch N: LearningRateScheduler setting learning rate to X." to progress
 * (NULL: stderr). Free with sy_callback_free. */
typedef double (*sy_lr_schedule_fn)(void *user, int32_t epoch, double learning_rate);
sy_status sy_callback_learning_rate_scheduler(sy_lr_schedule_fn schedule, void *user, int32_t verbose, FILE *progress,
                                              sy_callback *out);

/* TensorBoard(log_dir, update_freq): event files under log_dir/train and
 * log_dir/validation with Keras's tags (epoch_loss, epoch_<metric>,
 * epoch_learning_rate; batch_<name> every update_freq steps). */
typedef struct sy_tensorboard_options {
    const char *log_dir;  /* "logs" */
    int64_t update_freq;  /* 0: per epoch (Keras's "epoch"); N: also every N training steps */
} sy_tensorboard_options;

sy_tensorboard_options sy_tensorboard_options_default(void);
sy_status sy_callback_tensorboard(const sy_tensorboard_options *options, sy_callback *out);

/* ---- saving and loading (Keras's HDF5 and JSON files) ---------------------------------- */

/* model.save_weights(path) in tf.keras 2.x's HDF5 layout: root attributes
 * layer_names, backend, keras_version; a group per layer with its
 * weight_names; datasets named as the weights ("conv2d/kernel:0"). The
 * file is written whole to a temporary name and renamed. */
sy_status sy_model_save_weights(const sy_model *m, const char *path);
/* model.load_weights(path): a weights file, or the model_weights of a full
 * model file. Layers with weights are matched in order, as Keras does;
 * every count and shape is checked before any weight changes, and a
 * mismatch names the layer and both shapes. */
sy_status sy_model_load_weights(sy_model *m, const char *path);

/* model.to_json(): a new NUL-terminated string (free with sy_free). */
sy_status sy_model_to_json(const sy_model *m, char **json);
/* keras.models.model_from_json: a new, built, uncompiled model (inside a
 * strategy scope as sy_model_new). Layers and arguments not supported are
 * refused by name, with the list of those that are. */
sy_status sy_model_from_json(const char *json, sy_model **out);

/* model.save(path) as a full Keras .h5: model_config, model_weights and,
 * when compiled, training_config. Written whole to a temporary name and
 * renamed. */
sy_status sy_model_save(const sy_model *m, const char *path);
/* keras.models.load_model(path) of a .h5 file: the model, its weights and,
 * when the file holds a training_config, compiled with it. */
sy_status sy_model_load(const char *path, sy_model **out);

/* ---- fit, evaluate, predict -------------------------------------------------------- */

typedef struct sy_fit_options {
    int64_t batch_size;        /* 32 */
    int32_t epochs;            /* 1 */
    int64_t steps_per_epoch;   /* 0: ceil(samples / batch_size) */
    const sy_tensor *x_val, *y_val; /* validation_data; NULL: none */
    int64_t validation_batch_size; /* 0: batch_size */
    int64_t validation_steps;  /* batches of the validation data to evaluate: 0 (Keras's None) all of it */
    int32_t validation_freq;   /* validate after every n-th epoch: 1 */
    bool shuffle;              /* reshuffle the samples before each pass: true */
    int32_t initial_epoch;     /* 0 */
    uint64_t seed;             /* shuffling stream (besides the model's seed): 0 */
    int32_t verbose;           /* 0 silent, 1 progress bar, 2 one line per epoch: 1 */
    FILE *progress;            /* where the progress bar goes: NULL is stderr */
    const sy_callback *callbacks;
    int32_t n_callbacks;
    /* Checkpoints (tf.estimator's RunConfig): with model_dir set, a
     * checkpoint at every epoch's end and every save_checkpoints_steps
     * steps (0: epochs only) holding weights, optimizer slots, step, epoch,
     * RNG states and the input position; the newest keep_checkpoint_max
     * are kept, as DIR/ckpt-<global step>.syckpt. resume continues from
     * the newest (none yet: from the start), and the run ends with the
     * weights, bit for bit, of one never interrupted; a dataset must be
     * the same pipeline built again. Without resume a model_dir that
     * already holds checkpoints is refused. A checkpoint of another model,
     * optimizer or seed is refused naming what differs, before any weight
     * changes; a damaged one (truncated, a bad CRC or manifest) is skipped
     * with a warning (sy_log) naming it and why, the resume going on from
     * the newest valid one and renaming the damaged ones '*.damaged' (none
     * valid: SY_ERR_CORRUPT listing them). fit holds model_dir's lock from
     * start to end, callbacks included: flock on DIR/.lock, which holds
     * its pid. A second fit on the directory meanwhile -- in another
     * process or this one, e.g. another model's -- fails at once with
     * SY_ERR_STATE naming that pid. The lock goes when fit returns, or
     * when the process dies, however; a child forked during fit shares it
     * until it exits or execs (docs/design/checkpoints.md). */
    const char *model_dir;          /* NULL: none */
    int64_t save_checkpoints_steps; /* 0 */
    int32_t keep_checkpoint_max;    /* 5 */
    bool resume;                    /* false */
    /* validation_data of a model with several inputs or outputs (issue
     * 15): one array per input and one label array per output, as
     * sy_model_fit_multi takes them; instead of x_val and y_val. */
    const sy_tensor *const *x_val_list;
    int32_t n_x_val;
    const sy_tensor *const *y_val_list;
    int32_t n_y_val;
    /* issue 17, fit arguments (docs/design/fit-arguments.md). sample_weight: each
     * sample's weight, (samples,) or (samples, 1), any numeric dtype; the loss
     * becomes Keras's sum(w * loss) / batch_size and weighted_metrics are
     * weighted, `metrics` not (Keras 2.15). For outputs (T, C) whose loss is
     * one value per step, a weight per step, (samples, T) or (samples, T, 1):
     * sum(w * loss) / (batch_size * T). A dataset gives them as its
     * elements' component after the labels: (x, y, sample_weight).
     * class_weight: Keras's {class: weight} dict as an array for the classes
     * 0 .. n_class_weight - 1 (every class from 0 must be there, as Keras
     * asks); each sample weighs class_weight[its class] (the label, rounded,
     * or the argmax of a one-hot label); one output only, never with
     * sample_weight. validation_split: the last fraction of the arrays (x, y
     * and sample_weight, cut before any shuffling) held out as validation
     * data, as Keras's; ignored when x_val is given, refused for a dataset. */
    const sy_tensor *sample_weight;
    const double *class_weight;
    int32_t n_class_weight;
    double validation_split;
    const sy_tensor *val_sample_weight; /* validation_data's third element (x_val, y_val, weights); NULL: none */
} sy_fit_options;

sy_fit_options sy_fit_options_default(void);

/* Train. x: (samples, input_shape...) of any dtype (converted to float32 as
 * Keras casts); y: labels of the loss's form -- class indices (samples,) or
 * (samples, 1) for a sparse loss, else the model's output shape. The samples
 * are an endless stream of passes over x, each pass in a new order when
 * shuffle is set; every step takes a full batch from it (a pass that does
 * not divide by the batch size runs on into the next), so every step has the
 * compiled static shape. *history (may be NULL) receives the epochs' logs. */
sy_status sy_model_fit(sy_model *m, const sy_tensor *x, const sy_tensor *y, const sy_fit_options *options,
                       sy_history **history);

typedef struct sy_evaluate_options {
    int64_t batch_size; /* 32 */
    int64_t steps;      /* batches to evaluate, from the first: 0 (Keras's None) all of them */
    int32_t verbose;    /* 0, 1 (progress bar) or 2: 1 */
    FILE *progress;     /* NULL: stderr */
    /* issue 17, fit arguments: each sample's weight (samples,), or each step's (samples, T), as fit's
     * sample_weight; NULL: 1 each */
    const sy_tensor *sample_weight;
} sy_evaluate_options;

sy_evaluate_options sy_evaluate_options_default(void);

/* Loss and metrics over every sample of (x, y) (or over the first `steps`
 * batches). The last partial batch is padded and the padding left out of
 * every result, so the whole dataset is covered exactly whatever the batch
 * size. */
sy_status sy_model_evaluate(sy_model *m, const sy_tensor *x, const sy_tensor *y, const sy_evaluate_options *options,
                            sy_logs *results);

/* The model's output for every sample of x: a float32 tensor (samples,
 * output_shape...) the caller frees. Batching as evaluate. */
sy_status sy_model_predict(sy_model *m, const sy_tensor *x, const sy_evaluate_options *options, sy_tensor **out);

/* The same for a model with several inputs and outputs (issue 15), as
 * Keras's fit([x1, x2], [y1, y2]): x holds one array per model input (in
 * sy_model_input order), y one label array per output (in
 * sy_model_set_outputs order), every one with the same number of samples;
 * each is checked against its input or output, and a mismatch names it
 * (the input layer, the output layer) and both shapes. The logs are
 * Keras's: "loss" (the weighted sum of the outputs' losses plus the
 * regularization penalties), then "<output>_loss" per output (unweighted),
 * then "<output>_<metric>" per output and metric, then the same with
 * "val_". With one input and one output these are sy_model_fit, _evaluate
 * and _predict (and the logs "loss" and "<metric>"). predict gives one new
 * tensor per output in out[0 .. n_out), n_out the model's outputs. */
sy_status sy_model_fit_multi(sy_model *m, const sy_tensor *const *x, int32_t n_x, const sy_tensor *const *y,
                             int32_t n_y, const sy_fit_options *options, sy_history **history);
sy_status sy_model_evaluate_multi(sy_model *m, const sy_tensor *const *x, int32_t n_x, const sy_tensor *const *y,
                                  int32_t n_y, const sy_evaluate_options *options, sy_logs *results);
sy_status sy_model_predict_multi(sy_model *m, const sy_tensor *const *x, int32_t n_x,
                                 const sy_evaluate_options *options, sy_tensor **out, int32_t n_out);

/* ---- datasets (systolic/data.h) ------------------------------------------------------ */

/* fit, evaluate and predict on a dataset, as Keras takes a tf.data.Dataset:
 * each element is a batch, (x, y) for fit and evaluate (x alone, or (x, y)
 * with y ignored, for predict). Training needs a static batch dimension
 * (batch with drop_remainder, as a TPU does), the global batch, which is
 * split among the replicas; evaluate and predict pad a smaller last batch
 * and leave the padding out of every result. For fit, options' batch_size,
 * shuffle, x_val and y_val are not used (the dataset decides; validation is
 * a dataset too, may be NULL); steps_per_epoch 0 means one pass per epoch
 * (the dataset must be finite), else that many steps per epoch from one
 * iteration that goes on across epochs, stopping with a warning if the
 * data runs out, as Keras does. A model with several inputs and outputs
 * takes elements (x1, ..., xn, y1, ..., ym) -- its inputs, then its
 * outputs' labels, flat -- and sy_model_predict_dataset_multi gives one
 * tensor per output. */
sy_status sy_model_fit_dataset(sy_model *m, const sy_dataset *train, const sy_dataset *validation,
                               const sy_fit_options *options, sy_history **history);
sy_status sy_model_evaluate_dataset(sy_model *m, const sy_dataset *data, const sy_evaluate_options *options,
                                    sy_logs *results);
sy_status sy_model_predict_dataset(sy_model *m, const sy_dataset *data, const sy_evaluate_options *options,
                                   sy_tensor **out);
sy_status sy_model_predict_dataset_multi(sy_model *m, const sy_dataset *data, const sy_evaluate_options *options,
                                         sy_tensor **out, int32_t n_out);

/* ---- issue 16, cost model: a model's step on an emulated TPU ---------------------------------- */

typedef struct sy_tpu_chip sy_tpu_chip;             /* systolic/tpu.h */
typedef struct sy_profile sy_profile;               /* systolic/profile.h */
typedef struct sy_profile_options sy_profile_options;

/* The cost on `chip` of one step of m at `batch` rows per replica: a
 * training step (m compiled) or, with training false, a predict step
 * (sy_plan_profile says what is counted). The step is compiled as fit or
 * predict compiles it, one plan per replica of m's strategy: build m under
 * a one-replica strategy (or none) to compile one, and give the replicas
 * the chip runs in options->replicas. *out is freed with sy_profile_free. */
sy_status sy_model_profile(sy_model *m, const sy_tpu_chip *chip, int64_t batch, bool training,
                           const sy_profile_options *options, sy_profile **out);

/* issue 21: print to `out` the step m compiles to at `batch` rows per replica -- a training step (m
 * compiled) or, with training false, a predict step -- as sy_plan_summary does
 * (systolic/compiler.h): each kernel, the model's ops fused into it, its buffers, and the arena's
 * total. Compiles the plans fit or predict would use (kept for them). */
sy_status sy_model_plan_summary(sy_model *m, int64_t batch, bool training, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
