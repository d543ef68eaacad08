/*
 * keras_internal.h - what the keras module's files share: the layer
 * implementations (one file each under layers/), the model's record, the
 * compiled plans, metrics, and the progress bar.
 *
 * A model is a list of layer configurations (sy_layer) plus, once the input
 * shape is known, each layer's output shape and weights (variables in the
 * model's sy_vars store, named "<layer>/<weight>"). Nothing is compiled
 * until the model is used: fit, evaluate and predict each ask for a plan of
 * their mode and batch size (plan cache in compile.c), built from a graph
 * that runs the layers' build functions in order.
 */
#ifndef SY_KERAS_INTERNAL_H
#define SY_KERAS_INTERNAL_H

#include "systolic/keras.h"
#include "../distribute/distribute_internal.h"

#define LAYER_MAX_WEIGHTS 6 /* issue 17: Bidirectional(LSTM) has 6 */
#define LAYER_NAME_MAX 64

/* ---- layer implementations --------------------------------------------------- */

typedef struct layer_weight {
    const char *name; /* "kernel", "bias", "lstm_cell/kernel": the variable is "<layer>/<name>" */
    sy_shape shape;
    sy_init init;
    bool non_trainable; /* state the optimizer leaves alone (BatchNormalization's moving_mean) */
    sy_regularizer regularizer; /* its penalty in the loss (kernel_regularizer, ...); kind NONE: none */
    bool int64; /* issue 15: an int64 variable in Keras (Normalization's count): held as float32, written to
                   .h5 files as int64 (docs/design/keras-applications.md) */
} layer_weight;

typedef struct layer_ctx {
    bool training;  /* dropout active, BatchNormalization on the batch's statistics */
    uint64_t seed;  /* the layer's stream (dropout) */
    bool gradients; /* the graph will be differentiated (training, or a test taking gradients without dropout) */
    sy_node mask;   /* issue 17, masking: the input's Keras mask (batch, steps) of 0/1; SY_NONE: none */
} layer_ctx;

struct rd;
struct jw;

/* One kind of layer: everything systolic knows of it, in its own file
 * under layers/. Inputs come as arrays: a layer that takes one input
 * (max_inputs 0) sees n_in == 1 and in[0] / x[0]; the model checks the
 * count before calling it. */
typedef struct layer_impl {
    sy_layer_kind kind;
    const char *class_name; /* Keras's class: "Conv2D" */
    const char *prefix;     /* automatic names: "conv2d" */
    /* Check the configuration against the input shapes (without the batch
     * axis) and give the output shape. On a mismatch return sy_error(...)
     * naming `name` and the shapes. */
    sy_status (*output_shape)(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out);
    /* The weights, in Keras's order; returns how many (<= LAYER_MAX_WEIGHTS).
     * NULL for a layer without weights. */
    int (*weights)(const sy_layer *l, const sy_shape *in, layer_weight *w);
    /* Add the layer's ops to g: x[i] (batch, in[i]...) -> (batch, out...);
     * w are the weights' param nodes in the order weights() gave. */
    sy_node (*build)(sy_graph *g, const sy_layer *l, const sy_node *x, int n_in, const sy_node *w,
                     const layer_ctx *ctx);
    /* How many inputs it takes: 0, 0 means exactly one; a merge layer 2 (or
     * 1) to LAYER_MAX_INPUTS. */
    int min_inputs, max_inputs;
    /* Its model JSON (keras_config.h): the arguments of its get_config()
     * besides the common ones, read into a sy_layer that holds defaults(),
     * and written after name, trainable, dtype and the input shape (set
     * *bad to the argument's name when Keras could not hold its value).
     * NULL json_read: the kind is read by config_read.c's own table. */
    const char *const *json_keys;
    sy_status (*json_read)(const struct rd *r, sy_layer *l);
    void (*json_write)(struct jw *w, const sy_layer *l, const char **bad);
    sy_layer (*defaults)(void);
    /* Set the arguments Keras's build() settles from the input shape (in,
     * without the batch axis): BatchNormalization's axis -1 becomes
     * [rank]. NULL: none. Called before output_shape when the model
     * builds the layer. */
    void (*resolve)(sy_layer *l, const sy_shape *in);
} layer_impl;

#define LAYER_MAX_INPUTS 64

const layer_impl *layer_impl_of(sy_layer_kind kind);
/* The kind whose Keras class is `cls` ("Conv2D"), or NULL. */
const layer_impl *layer_impl_by_class(const char *cls);
/* "Activation, Add, ..., InputLayer, ...": every class systolic reads, sorted. */
void keras_layer_names(char *buf, size_t size);

extern const layer_impl keras_dense, keras_conv2d, keras_max_pooling2d, keras_average_pooling2d,
    keras_activation_layer, keras_flatten, keras_reshape, keras_dropout, keras_embedding, keras_lstm, keras_gru;
extern const layer_impl keras_add, keras_subtract, keras_multiply, keras_average, keras_maximum, keras_minimum,
    keras_concatenate;
/* the convolution family (issue 15) */
extern const layer_impl keras_depthwise_conv2d, keras_separable_conv2d, keras_conv2d_transpose, keras_zero_padding2d,
    keras_cropping2d, keras_up_sampling2d, keras_global_average_pooling2d, keras_global_max_pooling2d;
/* issue 15, activations (layers/activations.c, layers/rescaling.c) */
extern const layer_impl keras_relu, keras_leaky_relu, keras_prelu, keras_elu, keras_softmax, keras_rescaling;
/* normalization layers (layers/normalization.c) */
extern const layer_impl keras_batch_normalization, keras_layer_normalization;
/* issue 15, nested models (nested.c): not in layer.c's impls[] (read by class name there), found by
 * layer_impl_of(SY_LAYER_MODEL) */
extern const layer_impl keras_model_layer;
/* issue 15, keras.applications (layers/preprocessing_normalization.c) */
extern const layer_impl keras_normalization;
/* issue 17, sequence layers (layers/conv1d.c, pooling1d.c, simple_rnn.c, sequence_shape.c, spatial_dropout.c) */
extern const layer_impl keras_conv1d, keras_max_pooling1d, keras_average_pooling1d, keras_global_max_pooling1d,
    keras_global_average_pooling1d, keras_simple_rnn, keras_repeat_vector, keras_permute, keras_spatial_dropout1d,
    keras_spatial_dropout2d, keras_bidirectional, keras_time_distributed;
/* issue 17, masking (layers/masking.c): the Masking layer; the mask a layer's output carries, from
 * its inputs in[n_in] and their masks in_mask (SY_NONE: none) as Keras's compute_mask gives it
 * (SY_NONE: none; a layer Keras cannot give a mask is refused, naming it); a loss's elements l
 * (batch, steps) weighted by the output's mask as Keras 2.15 does: each sample's sum(l * mask) *
 * rows / sum(mask), whose mean over the rows is sum(l mask) / sum(mask) -- rows and sums over the
 * real rows (batch,) of 1 when given (padding rows 0) */
extern const layer_impl keras_masking;
sy_status keras_output_mask(sy_graph *g, const sy_layer *l, const char *name, const sy_node *in, const sy_node *in_mask,
                            int n_in, sy_node *out);
sy_node keras_loss_mask(sy_graph *g, sy_node l, sy_node mask, sy_node real);
/* The mask (batch, steps) a recurrent layer or pooling gets, or SY_NONE; refused (naming the layer) when it
 * does not fit x (batch, steps, ...). */
sy_node keras_steps_mask(sy_graph *g, const layer_ctx *ctx, sy_node x, const char *cls);
/* How many of layers[0 .. index) took Keras's automatic name of `kind`
 * (wrapped layers too: Bidirectional(LSTM()) uses up an "lstm"). */
int64_t keras_auto_name_count(const sy_model *m, int64_t index, sy_layer_kind kind);
/* Layer i, a wrapper without an inner name: name its inner layer as Keras
 * would ("lstm", "lstm_1", ...); nothing for other layers. */
void keras_wrapper_name(sy_model *m, int64_t i);

/* A 2-D pooling layer's strides: its strides, or (Keras's strides=None, stored as 0) its pool size. */
void keras_pool2d_strides(const sy_layer *l, int32_t s[2]);

/* Every activation name systolic reads, for messages. */
#define KERAS_ACTIVATION_NAMES                                                                                         \
    "linear, relu, sigmoid, tanh, softmax, elu, selu, gelu, swish (silu), softplus, softsign, hard_sigmoid, "          \
    "exponential, relu6"
#define KERAS_ACTIVATION_LAST SY_ACTIVATION_RELU6

/* The sy_act of a Keras activation that can run inside another op: relu,
 * sigmoid, tanh (SY_ACT_NONE for the others, linear included). */
int keras_act_code(sy_activation a);
/* issue 15, recurrent activations: the function of a Keras activation as
 * sy_act_params (SY_AF_*, up to SY_AF_SCAN_COUNT), for the recurrent
 * scans' general cell; false for softmax, which is no elementwise function. */
bool keras_act_params(sy_activation a, sy_act_params *p);

/* Apply a Keras activation (softmax over the last axis). */
sy_node keras_activate(sy_graph *g, sy_activation act, sy_node x);
/* The batch shape: (batch, s...). */
sy_shape keras_batch_shape(int64_t batch, const sy_shape *s);
/* "(None, 26, 26, 64)" */
char *keras_shape_str(const sy_shape *s, char *buf, size_t size);

/* ---- regularizers (regularizers.c; issue 15) ---------------------------------------- */

/* Keras's penalty on w: l1 * sum(|w|) + l2 * sum(w^2), a scalar; SY_NONE
 * when r adds nothing. */
sy_node keras_penalty(sy_graph *g, const sy_regularizer *r, sy_node w);
/* The penalties layer l adds after it is built over x (batch, in...) with
 * weights w (its weights() order) into y: each regularized weight's (a
 * scalar) and its activity regularizer's on y per sample (batch,), added to
 * acc (SY_NONE: nothing yet). Returns the new total, SY_NONE if still none. */
/* issue 16, mixed_bfloat16 (dtype_policy.c). A layer joining a model takes the global policy if it has none
 * (refusing a value that is no policy); name names it. */
sy_status keras_policy_fix(sy_layer *l, const char *name);
/* impl->build under l's policy: under mixed_bfloat16 its inputs and its n_w weights cast to bfloat16 and its
 * ops bfloat16 ops (the normalization layers: float32 inside, the output rounded). */
sy_node keras_policy_build(sy_graph *g, const layer_impl *impl, const sy_layer *l, const sy_node *x, int n_in,
                           const sy_node *w, int n_w, const layer_ctx *ctx);
sy_node keras_layer_penalties(sy_graph *g, const sy_layer *l, sy_node x, const sy_node *w, sy_node y, sy_node acc);
/* The per-sample loss (batch,) with the penalties (keras_layer_penalties'
 * total, SY_NONE: none) added to every sample, so that its mean -- the loss
 * fit() trains on and reports, and evaluate()'s, padded rows left out --
 * is Keras's loss plus its regularization losses. */
sy_node keras_regularization_loss(sy_graph *g, sy_node per_example, sy_node penalties);

/* ---- losses and metrics --------------------------------------------------------- */

typedef enum keras_loss {
    KERAS_LOSS_SPARSE_CATEGORICAL_CE = 1,
    KERAS_LOSS_CATEGORICAL_CE,
    KERAS_LOSS_BINARY_CE,
    KERAS_LOSS_MSE,
    KERAS_LOSS_FN /* issue 17: the keras_loss op's, model_head.fn */
} keras_loss;

typedef enum keras_metric {
    KERAS_METRIC_SPARSE_CATEGORICAL_ACCURACY = 1,
    KERAS_METRIC_CATEGORICAL_ACCURACY,
    KERAS_METRIC_BINARY_ACCURACY,
    KERAS_METRIC_MSE, /* issue 15: mean_squared_error (mse), mean_absolute_error (mae) */
    KERAS_METRIC_MAE,
    /* issue 17, losses and metrics (metrics.c) */
    KERAS_METRIC_TOP_K,        /* top_k_categorical_accuracy */
    KERAS_METRIC_SPARSE_TOP_K, /* sparse_top_k_categorical_accuracy */
    KERAS_METRIC_MAPE,
    KERAS_METRIC_MSLE,
    KERAS_METRIC_RMSE,         /* RootMeanSquaredError: sqrt of the epoch's mean */
    KERAS_METRIC_AUC,          /* confusion counts at num_thresholds thresholds */
    KERAS_METRIC_PRECISION,
    KERAS_METRIC_RECALL
} keras_metric;

/* the doubles of every metric's running state together (fit_sums.metric) */
#define METRIC_STATE_MAX 1024
/* issue 17: AUC's label_weights, one per label of the output's last axis */
#define METRIC_LABEL_WEIGHTS_MAX 32
/* a metric with its arguments as compile() takes it: "AUC(curve='PR', label_weights=[...])" */
#define METRIC_TEXT_MAX 256

typedef struct metric_spec {
    keras_metric kind;
    char name[40]; /* as compile() got it, the logs' name with one output: "accuracy", "mse" */
    /* issue 17, losses and metrics: Keras's metric class (training_config
     * writes {"class_name": ...}, not MeanMetricWrapper), its arguments,
     * and its running state: n_state doubles at fit_sums.metric[state] */
    bool cls;
    int32_t k;              /* top-k: 5 */
    int32_t num_thresholds; /* AUC: 200 */
    bool pr;                /* AUC: curve PR (else ROC) */
    bool has_threshold;     /* Precision, Recall: thresholds given (else null: 0.5) */
    double threshold;
    /* issue 17, metric options: Precision and Recall's thresholds given as a list of one ([0.5]),
     * top_k (0: None) and class_id (-1: None); AUC's summation_method (0 interpolation, 1 minoring,
     * 2 majoring), multi_label, num_labels (0: None), label_weights (n_label_weights of them; 0:
     * None) and from_logits; labels: the output's last axis (compile), the labels a multi-label AUC
     * keeps a state for */
    bool threshold_list;
    int32_t top_k, class_id;
    int32_t summation;
    bool multi_label, from_logits;
    int32_t num_labels, n_label_weights, labels;
    float label_weights[METRIC_LABEL_WEIGHTS_MAX];
    int32_t state, n_state;
    bool weighted; /* issue 17, fit arguments: compile's weighted_metrics (state[n_state - 1]: the weights' sum) */
    bool masked;   /* issue 17, masking: its output carries a Keras mask, which weights its steps
                      (state[n_state - 1]:   the weights' sum) */
    char
        given[METRIC_TEXT_MAX]; /* as compile() got it ("AUC(curve='PR')"), to compile again with */
} metric_spec;

/* A metric that compile() knows beyond the accuracies, mse and mae: its
 * name as Keras's, or with arguments as "AUC(curve=PR, num_thresholds=50)"
 * or "TopKCategoricalAccuracy(k=2)", into out (kind, logs name, arguments;
 * out->state is set by compile). sparse: the labels are class indices.
 * SY_ERR_NOT_FOUND with no message when the name is not one of these. */
sy_status metric_resolve(const char *where, const char *text, bool sparse, metric_spec *out);
/* issue 17: check ms's arguments against the output it watches (its shape without the batch axis:
 * class_id and label_weights within its last axis, a multi-label AUC's num_labels that axis) and
 * set ms->labels. */
sy_status metric_check_output(const char *where, const sy_shape *out, metric_spec *ms);
/* The state's size of a metric (1 for the means). */
int32_t metric_state_size(const metric_spec *ms);
/* Add `rows` rows of predictions (rows, per_row) and labels to ms's state. */
void metric_update(const metric_spec *ms, const float *pred, const void *labels, int64_t rows, int64_t per_row,
                   double *state);
/* issue 17, masking: the same for a metric of a masked output (ms->masked) or a weighted one: rows
 * samples of `steps` rows of predictions each, row r weighing sw[r / steps] (sw NULL: 1; with
 * per_step, temporal sample weights, sw[r]) times mask[r] (NULL: 1), as Keras's update_state(y,
 * pred, sample_weight=mask (* sample_weight)); the weights' sum goes to state[ms->n_state - 1], the
 * count of the metric's mean. */
void metric_update_masked(const metric_spec *ms, const float *pred, const void *labels,
                          const float *sw, const float *mask, int64_t rows, int64_t steps,
                          int64_t per_row, bool per_step, double *state);
/* The metric's value from its state; count: the rows of predictions seen. */
double metric_value(const metric_spec *ms, const double *state, double count);
/* The metric as training_config writes it (name: its logs name). */
struct json_t *metric_json(const metric_spec *ms, const char *name);
/* A training_config's metric object (class_name, config) as a name
 * metric_resolve takes, into buf; NULL if it is not one of these. */
const char *metric_text_from_json(const struct json_t *v, const char *prefix, char *buf, size_t size);

/* Per-sample metric value for `rows` samples: pred (rows, classes...),
 * labels as the loss takes them (int32 class indices for sparse, else float
 * of pred's shape). Adds the sum over rows to *sum. */
void metric_accumulate(keras_metric kind, const float *pred, const void *labels, int64_t rows, int64_t per_row,
                       double *sum);

/* ---- issue 17, losses and metrics (losses.c) ------------------------------------------ */

struct model_head;
/* Resolve a loss by Keras's name or class name into h (its kind, fn, name,
 * from_logits and arguments; args NULL: the defaults, a plain name),
 * refusing unknown names and arguments the loss does not take, with
 * `where` opening the message. out is the output's shape (batch axis
 * left out), for the losses that need classes. */
sy_status keras_loss_resolve(const char *where, const char *name, bool from_logits, const sy_loss_args *args,
                             const sy_shape *out, struct model_head *h);
/* Output j's unweighted loss per sample element, (batch, ...) without
 * the last axis, from pred and the labels y. */
sy_node keras_loss_build(sy_model *m, int32_t j, sy_graph *g, sy_node pred, sy_node y);
/* issue 17, masking: the same, pred's Keras mask (SY_NONE: none) weighting its steps and, with
 * ignore_class, valid (the labels' shape, 1 where the label is not ignore_class; SY_NONE: none) its
 * entries, their count taken over the real rows (batch,) of 1 (padding 0; SY_NONE: every row)
 * (keras_loss_mask); temporal sample weights: each step's loss (batch, T) times step_weight
 * (batch, T) (SY_NONE: none) before the mean over the steps or the mask's normalisation */
sy_node keras_loss_build_masked(sy_model *m, int32_t j, sy_graph *g, sy_node pred, sy_node y,
                                sy_node mask, sy_node valid, sy_node real, sy_node step_weight);
/* h's loss as training_config writes it: the name, or the Loss object
 * ({"class_name", "config"}) with Keras's keys in Keras's order. */
struct json_t *keras_loss_json(const struct model_head *h);
/* A training_config's loss (a name or a Loss object) into name,
 * from_logits and args (set when an object: *has_args). `path` opens
 * messages. */
sy_status keras_loss_from_json(const char *path, const struct json_t *loss, const char **name, bool *from_logits,
                               sy_loss_args *args, bool *has_args);

/* ---- the model ---------------------------------------------------------------- */

/* compile()'s warning (losses.c) when output j's loss has from_logits set
 * but pred, that output in g, is a softmax's or sigmoid's: once per compile. */
void keras_loss_warn_logits(sy_model *m, int32_t j, const sy_graph *g, sy_node pred);

typedef enum plan_mode { MODE_TRAIN, MODE_EVAL, MODE_PREDICT, MODE_COUNT } plan_mode;

#define MODEL_MAX_IO 16
#define HEAD_MAX_METRICS 8

/* The plans of one mode at one batch size -- one per replica of the
 * model's strategy, compiled from one graph -- and the nodes the host feeds
 * and reads: one x per model input, one y, pred and loss per output. */
typedef struct model_plan {
    sy_graph *g;
    replica_set *rs;
    int64_t batch;                 /* per replica */
    sy_node x[MODEL_MAX_IO];       /* the model's inputs (m->n_inputs) */
    sy_node y[MODEL_MAX_IO];       /* labels per output (SY_NONE in predict) */
    sy_node pred[MODEL_MAX_IO];    /* the model's outputs (m->n_outputs) */
    sy_node out_loss[MODEL_MAX_IO]; /* each output's loss per sample (batch,), unweighted but by
                                     * temporal weights (sw_steps); SY_NONE in predict */
    sy_node per_example;           /* the total loss per sample (batch,); SY_NONE in predict */
    sy_node loss;                  /* mean loss (scalar); SY_NONE in predict */
    /* issue 17, fit arguments: with sample weights (the model's sample_weighted when compiled), each sample's
     * weight (batch,), which multiplies per_example before the penalties; SY_NONE without */
    sy_node sw;
    bool weighted;
    /* issue 17: 0, or T: sw is (batch, T), a weight per step multiplying each output's loss */
    int64_t sw_steps;
    /* issue 17, masking: each output's Keras mask (batch, steps...), an output of train and
     * evaluate plans for its metrics (SY_NONE: none); with a mask or ignore_class, which rows are
     * real (batch,): 1, padding 0, for the losses' count of valid entries (SY_NONE: not needed) */
    sy_node mask[MODEL_MAX_IO];
    sy_node real;
    /* issue 17, losses: with ignore_class, output j's valid labels (batch, label shape...) of 1, 0
     * where the label is ignore_class -- fed by the host, which feeds class 0 in y there (SY_NONE:
     * none) */
    sy_node valid[MODEL_MAX_IO];
} model_plan;

/* compile()'s loss and metrics for one output (Keras's per-output loss,
 * loss weight and metrics). */
typedef struct model_head { /* issue 17: a struct tag, for losses.c's prototypes */
    keras_loss loss;
    char loss_name[48];
    bool from_logits;
    /* issue 17, losses and metrics: KERAS_LOSS_FN's function, the loss's
     * arguments, and whether it was given as a Loss object (with
     * arguments or from_logits: training_config writes its class) */
    sy_loss_fn fn;
    sy_loss_args args;         /* args.name NULL: object_name holds it */
    bool object;
    char object_name[48];
    double weight; /* loss_weights' entry: 1 by default */
    metric_spec metrics[HEAD_MAX_METRICS];
    int32_t n_metrics;
} model_head;

/* How compile() was given its losses, as training_config writes them
 * back: one for all, a list in output order, or a dict by output name. */
typedef enum loss_form { LOSS_SINGLE, LOSS_LIST, LOSS_DICT } loss_form;

typedef struct model_layer {
    sy_layer cfg;                 /* cfg.name points at name[] */
    char name[LAYER_NAME_MAX];
    bool auto_named;              /* named by the model (Keras counts these per class) */
    int32_t born;                 /* creation index: seeds its initial weights and dropout stream */
    sy_shape in_shape;            /* its first call's first input, without the batch axis */
    sy_shape out_shape;           /* of its first call, without the batch axis */
    int32_t calls;                /* calls in the model (Keras's inbound nodes); > 1: shared weights */
    bool multiple;                /* called on inputs of different shapes: summary says "multiple" */
    int32_t n_weights;
    int32_t weight_var[LAYER_MAX_WEIGHTS]; /* indices in the model's vars */
    int64_t params;
    uint32_t non_trainable;       /* bit j: weight j is not trainable (layer_weight.non_trainable) */
    int64_t non_trainable_params;
    /* issue 15, nested models: the model this layer is (kind
     * SY_LAYER_MODEL), the outer model's own copy (nested.c); its layers'
     * weight_var index the outer model's store. NULL: not a model. */
    sy_model *sub;
    uint32_t int64_weights;       /* bit j: weight j is int64 in Keras's files (layer_weight.int64) */
} model_layer;

/* One node of the model's graph: a model input, or one call of a layer
 * (Keras's Node). Nodes are in creation order, which is an order in which
 * they can run: a call's inputs exist before it. */
typedef struct model_node {
    int32_t layer;      /* index in layers[]; -1: model input number `input` */
    int32_t input;
    int32_t call;       /* the layer's call number: Keras's node index */
    int32_t in_off, n_in; /* input nodes: edges[in_off .. in_off + n_in) */
    sy_shape shape;     /* output, without the batch axis */
} model_node;

typedef struct model_input {
    char name[LAYER_NAME_MAX]; /* the InputLayer's name; empty: Keras's default */
    char dtype[16];            /* "float32" (empty), "int32", ... */
    sy_shape shape;
    int32_t node;
} model_input;

struct sy_model {
    char name[LAYER_NAME_MAX];
    model_layer *layers;
    int64_t n_layers, cap_layers;
    sy_shape input_shape; /* of the first input */
    bool built; /* the input shape is known */
    uint64_t seed;
    sy_vars *vars;
    bool stop_training;
    bool sample_weighted; /* issue 17, fit arguments: plans compiled now take sample weights (model_plan.sw) */
    /* with them: 0, one per sample; T, one per step (model_plan.sw_steps) */
    int64_t sample_weight_steps;

    /* The graph of layer calls (functional.c). A Sequential model's is the
     * chain input -> layers[0] -> layers[1] ..., made again whenever a
     * layer is added; a Functional model's is made by its calls. */
    bool functional;
    model_node *nodes;
    int64_t n_nodes, cap_nodes;
    int32_t *edges;
    int64_t n_edges, cap_edges;
    model_input inputs[MODEL_MAX_IO];
    int32_t n_inputs;
    int32_t outputs[MODEL_MAX_IO]; /* nodes */
    int32_t n_outputs;
    /* Keras's model.layers order (InputLayers included, as -1 - input):
     * a Functional model's, from its outputs back (functional_finish). */
    int32_t *order;
    int32_t n_order;

    /* compile() */
    bool compiled;
    sy_optimizer optimizer;
    /* issue 17, learning-rate schedules: a rate a callback set while a schedule runs
     * (Keras's _current_learning_rate), valid while iterations + 1 == lr_set_at */
    float lr_set;
    int64_t lr_set_at;
    model_head heads[MODEL_MAX_IO]; /* per output (m->n_outputs); a Sequential model's one */
    loss_form form;                 /* how the losses were given */
    int32_t dict_order[MODEL_MAX_IO]; /* LOSS_DICT: the outputs in the order their keys were given */
    bool loss_weights_given;        /* training_config writes them (else null) */
    bool logits_warned; /* losses.c's warning given since compile() */
    char backend[16];
    int32_t steps_per_execution;
    sy_strategy *strategy;     /* the scope's at sy_model_new, or own_strategy */
    sy_strategy *own_strategy; /* one replica on all cores, outside any scope */
    model_plan plans[MODE_COUNT];

    /* issue 15, nested models: a model nested in another (model_layer.sub)
     * keeps its variables in the outer model's store, named with
     * var_prefix characters of "<nested model>/" before "<layer>/<weight>",
     * and does not free it. */
    bool vars_borrowed;
    int32_t var_prefix;
};

/* SY_OK if the model can be compiled and run now (its outputs are set). */
sy_status model_runnable(const sy_model *m, const char *what);
/* The model's (first) output shape, without the batch axis. */
sy_shape model_output_shape(const sy_model *m);
/* Output j's shape, without the batch axis, and its name: the layer's
 * (Keras's model.output_names). */
sy_shape model_output_shape_at(const sy_model *m, int32_t j);
const char *model_output_name(const sy_model *m, int32_t j);
/* Input i's shape, without the batch axis. */
sy_shape model_input_shape_at(const sy_model *m, int32_t i);
/* The metrics of every output together (the sums' and logs' count). */
int32_t model_metric_count(const sy_model *m);
/* issue 17: the doubles of their states together (fit_sums.metric's used part). */
int32_t model_metric_state_count(const sy_model *m);
/* The layer that first takes input 0 (an Embedding makes it int32), or NULL. */
const model_layer *model_first_layer(const sy_model *m);
/* The same for input i. */
const model_layer *model_first_layer_of(const sy_model *m, int32_t i);
/* A Sequential model's chain of nodes, made again from its layers. */
sy_status model_chain_nodes(sy_model *m);
/* Check a Functional model's graph once its outputs are set and put its
 * layers in Keras's model.layers order (Keras's _map_graph_network). */
sy_status functional_finish(sy_model *m);
/* A layer's call on nodes `in` (n of them): checks their count and shapes
 * (building the layer at its first call) and appends the node. */
sy_status model_call(sy_model *m, int32_t layer, const int32_t *in, int n, int32_t *node);
/* Name a new layer (Keras's automatic names) and append it, unbuilt. */
sy_status model_new_layer(sy_model *m, const sy_layer *layer, int32_t *index);
/* Keras's summary with the "Connected to" column. */
void functional_summary(const sy_model *m, FILE *out);
/* true if the model prints as a Sequential one (Keras's sequential_like). */
bool functional_sequential_like(const sy_model *m);

/* Add the model's layers to g: inputs[i] (batch, input i's shape...) is the
 * model's i-th input (m->n_inputs of them); outputs[j] gets its j-th output
 * (m->n_outputs). False when the graph failed (sy_graph_status says why).
 * Weights are params named as the model's variables, so a plan compiled
 * with the model's store uses them. */
/* issue 17, masking: as keras_build_layers, out_masks[j] receiving output j's Keras mask (SY_NONE: none) */
bool keras_build_layers_masked(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *outputs, sy_node *out_masks,
                               bool training, bool gradients, sy_node *penalties);
bool keras_build_layers(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *outputs, bool training, bool gradients,
                        sy_node *penalties);
/* issue 18, quantization: the inference graph (no dropout), values[i] receiving model node i's output
 * (m->n_nodes of them: every layer call's, the inputs' too), as the calibrator reads them. */
bool keras_build_nodes(sy_model *m, sy_graph *g, const sy_node *inputs, sy_node *values);

/* The plans for `mode` at `batch` rows per replica, compiled on first use
 * (or when the batch size changes). */
sy_status model_plan_get(sy_model *m, plan_mode mode, int64_t batch, model_plan **out);
int32_t model_replicas(const sy_model *m);
void model_plans_free(sy_model *m);

/* The per-sample shape and dtype output j's loss wants its labels in. */
sy_shape model_label_shape(const sy_model *m, int32_t j);
sy_dtype model_label_dtype(const sy_model *m, int32_t j);
/* What input i is fed as: int32 word indices before an Embedding (or an
 * int Input), float32 otherwise (Keras casts the data the same way). */
sy_dtype model_input_dtype(const sy_model *m, int32_t i);

/* ---- issue 15, nested models (nested.c) ---------------------------------------------- */

/* Layer i of m is a model (model_layer.sub): make its copy of the inner
 * model l->model in m's store, with its weights, and set its parameter
 * counts. Called when the layer is built (its first call). */
sy_status nested_build(sy_model *m, int64_t i);
/* Refuse layer i's model when it is not built, has several inputs or
 * outputs, or holds m itself (a cycle). */
sy_status nested_check(const sy_model *m, int64_t i);
/* The variables of layer i (indices in m's store): its own weights, or a
 * nested model's, in Keras's model.weights order -- or, with legacy, in
 * the order Keras's .h5 lists them (_legacy_weights: the trainable ones,
 * then the others). Returns how many; writes at most max. */
int32_t model_layer_vars(const sy_model *m, int64_t i, bool legacy, int32_t *vars, int32_t max);
/* Keras's name of variable v of layer i, without ":0": "dense/kernel" --
 * a nested model's variables are named as the inner model names them. */
const char *model_var_keras_name(const sy_model *m, int64_t i, int32_t v);
/* issue 17, optimizers (optimizer_weights.c): a full model file's optimizer_weights group as tf.keras 2.15
 * writes it (iteration:0, then the slots), written when m has trained; read after m was compiled from the
 * file's training_config (a list that does not fit the optimizer is skipped with Keras's warning). */
typedef struct h5_file h5_file;
sy_status optimizer_weights_write(h5_file *f, int64_t root, const sy_model *m);
sy_status optimizer_weights_read(sy_model *m, h5_file *f, int64_t root);
/* "Functional" or "Sequential": a layer's class as Keras prints it. */
const char *model_layer_class(const model_layer *L);
/* A layer's call number as Keras's JSON writes it: a nested model's own
 * node is node 0, so its calls in the outer model count from 1. */
int32_t model_node_index(const sy_model *m, const model_node *n);

/* ---- Keras model JSON (config.c, config_read.c) --------------------------------------------------- */

/* sy_model_from_json over `size` bytes (no NUL needed), refusing a model
 * whose weights would hold more than max_params values in all (before any
 * is allocated): the fuzz target reads arbitrary bytes with a small limit. */
sy_status keras_model_from_json_bytes(const char *json, size_t size, int64_t max_params, sy_model **out);
/* A JSON value for a message, as Python's json.dumps writes it, cut at
 * about 100 characters ("(absent)" for NULL; config.c). */
typedef struct keras_shown {
    char s[128];
} keras_shown;
struct json_t;
keras_shown keras_json_show(const struct json_t *v);

/* ---- the progress bar (Keras's Progbar, through the callback interface) -------- */

typedef struct progbar {
    FILE *out;
    int verbose;      /* 1 or 2 */
    bool dynamic;     /* a terminal: redraw in place */
    int64_t target;   /* steps */
    int epochs;       /* "Epoch i/n" printed when > 1 */
    double start, last_update, after_first_step;
    int64_t seen;
    int total_width;
    /* issue 16, trace and roofline: on an emulated TPU, the chip's time per
     * step (0: none) shown beside the host's, "(TPU v2-8: 1.70ms/step)" */
    double tpu_step_s;
    char tpu_name[32];
} progbar;

void progbar_init(progbar *p, FILE *out, int verbose, int64_t target);
/* issue 16, trace and roofline: the emulated chip's seconds per step of
 * fit's training plan p (the cost model's, sy_plan_profile, with the
 * model's replicas and steps_per_execution) and the slice's name ("v2-8")
 * into name; 0 when the model's strategy is not an emulated TPU's. */
double progbar_tpu_step(const sy_model *m, const model_plan *p, char *name, size_t size);
/* A log value as Keras's progress bar shows it: "%.4f", or "%.4e" at
 * magnitudes up to 1e-3; "nan" for every NaN, as Python writes it. */
/* Keras's Progbar.update(current, values, finalize). */
void progbar_update(progbar *p, int64_t current, const sy_logs *logs, bool finalize);

/* ---- the arrays of fit, evaluate and predict (fit_checks.c) --------------------- */

/* t's samples: its first dimension (0 for a scalar). */
int64_t fit_samples(const sy_tensor *t);
/* "a, b": the model's input names, or its output names. */
void fit_io_names(const sy_model *m, bool outputs, char *buf, size_t size);
/* The arrays given to fit, evaluate or predict (what): n_x of them for the
 * model's inputs (named xname), n_y (when y is given) for its outputs'
 * labels; each checked against its input or output, and every one with as
 * many samples. */
sy_status fit_check_data(const sy_model *m, const char *what, const char *xname, const sy_tensor *const *x,
                         int32_t n_x, const char *yname, const sy_tensor *const *y, int32_t n_y);

/* ---- several hosts (issue 20, fit_hosts.c) --------------------------------------- */

/* Whether this process is the chief (host 0), which alone prints fit's
 * progress and writes its checkpoints; true on one host. */
bool model_chief(const sy_model *m);
/* The hosts (MPI ranks) of the model's strategy, 1 on one; and this host's
 * replicas, global indices *first .. *first + n - 1. */
int32_t model_hosts(const sy_model *m);
int32_t model_local_replicas(const sy_model *m, int32_t *first);
/* Before fit (o), evaluate or predict (o NULL) starts on several hosts:
 * SY_ERR_INVALID_ARGUMENT on every host, naming what differs, unless every
 * host has the same model, weights, seed, optimizer, loss, steps per
 * execution, batch size (batch), data size (samples), arrays (x and y: a
 * hash of their bytes; NULL for a dataset, whose shards differ) and fit
 * options. */
sy_status fit_check_hosts(sy_model *m, const char *what, int64_t batch, int64_t samples, const sy_tensor *const *x,
                          int32_t n_x, const sy_tensor *const *y, int32_t n_y, const sy_fit_options *o);

/* ---- checkpoints (model_checkpoint.c) -------------------------------------------- */

/* An epoch's (or evaluation's) running sums. */
typedef struct fit_sums {
    double loss;                     /* the total */
    double out_loss[MODEL_MAX_IO];   /* each output's (several outputs) */
    double metric[METRIC_STATE_MAX]; /* every output's metrics' states in turn (metric_spec.state) */
    int64_t seen;
} fit_sums;

#define CKPT_RNG_MAX 16

/* Where fit() is, besides the variables: what a checkpoint holds. */
typedef struct fit_position {
    int32_t epoch;  /* the epoch under way (the next one when step is 0) */
    int64_t step;   /* its steps already run */
    fit_sums sums;  /* their sums */
    /* arrays: the sample stream's seed, passes begun and place in the pass */
    uint64_t stream_seed;
    int64_t pass, pos;
    /* a dataset: an iterator is open, the pipeline's random state when it
     * was opened and now, and the elements taken from it */
    bool iter_open;
    int64_t consumed;
    int32_t n_rng;
    uint64_t rng_open[CKPT_RNG_MAX], rng_now[CKPT_RNG_MAX];
    /* issue 20: the hosts whose shards of the dataset those elements were (1 on one host) */
    int32_t hosts;
} fit_position;

/* fit()'s start with options o: nothing without o->model_dir; else make
 * the directory and take its lock into *lock (SY_ERR_STATE naming the pid
 * of another run holding it), refuse a directory that holds checkpoints
 * unless o->resume, and with resume load the newest valid one into m
 * (weights, slots, step count) and *p, setting *resumed; damaged newer
 * ones are skipped with a warning. *lock is -1 or held, also on an error:
 * give it to checkpoint_end, always, when fit ends. */
sy_status checkpoint_begin(sy_model *m, const sy_fit_options *o, fit_position *p, bool *resumed, int *lock);
/* Release the lock checkpoint_begin took (-1: none). */
void checkpoint_end(int lock);

/* issue 19: the model directory's machinery for whoever owns the variables -- fit()'s model, or
 * an estimator's variable store (m NULL: refusals name variables, not layers; the seed is not
 * held to; the manifest's position is the start and no learning rate is kept). */
typedef struct ckpt_owner {
    const char *what;      /* opens messages: "fit", "train", "evaluate" */
    const char *name;      /* the model's name, in the manifest and in refusals */
    sy_vars *vars;         /* every variable: the weights and the optimizer's slots */
    uint64_t seed;
    const char *optimizer; /* Keras's class name of the optimizer ("SGD"), or "none" */
    sy_model *m;           /* fit's model, or NULL */
} ckpt_owner;

ckpt_owner ckpt_owner_of(sy_model *m, const char *what);
/* Open dir for a run that writes it: make it, take its lock into *lock (-1 or held, also on an
 * error: give it to checkpoint_end), remove what a killed writer left; refuse a directory that
 * holds checkpoints unless resume, and with resume load the newest valid one (damaged newer ones
 * skipped with a warning and renamed '*.damaged'; another model's refused). *step: the global
 * step loaded, -1 for none. p: fit's position (only with o->m). */
sy_status ckpt_dir_begin(const ckpt_owner *o, const char *dir, bool resume, fit_position *p, int64_t *step, int *lock);
/* The newest valid checkpoint of dir loaded without its lock, for a run that only reads
 * (evaluate, predict) while another may write: damaged ones are skipped with a warning and left
 * where they are. *step: its global step, -1 when dir holds none (or does not exist). */
sy_status ckpt_dir_load_newest(const ckpt_owner *o, const char *dir, int64_t *step);
/* Write dir/ckpt-<global step>.syckpt atomically and keep the newest `keep`. */
sy_status ckpt_dir_save(const ckpt_owner *o, const char *dir, int32_t keep, const fit_position *p);
/* Write "ckpt-<global step>.syckpt" in o->model_dir and drop the oldest
 * beyond o->keep_checkpoint_max. */
sy_status checkpoint_save(sy_model *m, const sy_fit_options *o, const fit_position *p);
/* Load one checkpoint file into m, checked whole first. */
sy_status checkpoint_load(sy_model *m, const char *path, fit_position *p);
/* The same from the file's bytes, named `what` in messages (the fuzz
 * target's way in). */
sy_status checkpoint_load_bytes(sy_model *m, const uint8_t *buf, size_t n, const char *what, fit_position *p);

/* ---- issue 17, fit arguments (sample_weight.c) ---------------------------------- */

/* sample_weight (NULL: none) of n samples (n < 0: any) and class_weight (cw[0 .. n_cw), NULL: none) as fit
 * takes them, refused as Keras refuses them; `what` opens the messages. */
sy_status fit_check_weights(const sy_model *m, const char *what, const sy_tensor *sw, const double *cw, int32_t n_cw,
                            int64_t n);
/* The weight class_weight gives row `row` of labels y (its class: argmax, or the label rounded). */
sy_status fit_class_weight_of(const char *what, const double *cw, int32_t n_cw, const sy_tensor *y, int64_t row,
                              float *out);
/* A weighted metric's update (ms->weighted): rows samples, each pred_rows rows of per_row
 * predictions, sample r weighing w[r] (NULL: 1 each), or with per_step its row t w[r * pred_rows +
 * t]; the weights' sum goes to state[ms->n_state - 1]. */
void metric_update_weighted(const metric_spec *ms, const float *pred, const void *labels,
                            const float *w, int64_t rows, int64_t pred_rows, int64_t per_row,
                            bool per_step, double *state);
/* The steps of a sample_weight of shape s: 0 for one weight per sample ((n,), (n, 1)), T for one
 * per step of a sequence output ((n, T), (n, T, 1)), -1 for a shape that is neither. */
int64_t fit_weight_steps(sy_shape s);
/* Weights of shape s with `steps` (> 0) steps against m's outputs: each output's loss must be one
 * value per step of as many steps, (batch, steps) -- an output (steps, C) -- as Keras multiplies
 * the losses by the weights. */
sy_status fit_check_weight_steps(const sy_model *m, const char *what, const sy_shape *s,
                                 int64_t steps);
/* Every sample's weight (n floats, a new array the caller sy_frees) from sample_weight or from class_weight and
 * the labels y; *out NULL when neither is given. */
sy_status fit_sample_weights(const char *what, const sy_tensor *sw, const double *cw, int32_t n_cw, const sy_tensor *y,
                             int64_t n, float **out);
/* Keras's train_validation_split: arrays[i] (NULL entries stay NULL) cut into new tensors train[i] (the first
 * floor(n (1 - split)) rows) and val[i] (the rest), which the caller frees. */
sy_status fit_validation_split(double split, const sy_tensor *const *arrays, int32_t n_arrays, sy_tensor **train,
                               sy_tensor **val);

/* ModelCheckpoint's filepath as Python's str.format(epoch=epoch + 1, batch=batch + 1 (batch >= 0), **logs)
 * (checkpoint_callbacks.c); SY_ERR_NOT_FOUND with Keras's KeyError words for a name not there. */
sy_status keras_format_path(const char *filepath, int32_t epoch, int64_t batch, const sy_logs *logs, char *out,
                            size_t size);
/* cb is a BackupAndRestore callback: its directory, save_freq and delete_checkpoint. */
bool keras_backup_of(const sy_callback *cb, const char **dir, int64_t *save_freq, bool *delete_checkpoint);
/* Writes a backup of where fit() is now: the epoch done (epoch_end), or the steps run so far. */
typedef sy_status (*keras_backup_save_fn)(void *ctx, bool epoch_end);
/* fit() lends BackupAndRestore callback cb (nothing else) the way to write its backups, which its
 * hooks call at its place among the callbacks, as Keras's do; save NULL takes it back. */
void keras_backup_attach(const sy_callback *cb, keras_backup_save_fn save, void *ctx);
/* Remove a BackupAndRestore directory's checkpoints and lock, then the directory if that leaves it empty. */
void keras_backup_delete(const char *dir);

/* dst (count values) = row `row` of t (rows of count values, any numeric dtype) converted to
 * float32, or to int32 (dst_type SY_I32: labels, word indices), as fit() feeds its arrays
 * (fit.c; issue 19: the estimator feeds its batches so). */
void keras_copy_row(void *dst, sy_dtype dst_type, const sy_tensor *t, int64_t row, int64_t count);

/* ---- logs and history (logs.c) ------------------------------------------------ */

/* Set `name` to value (added at the end if new; dropped beyond SY_LOGS_MAX). */
void logs_set(sy_logs *logs, const char *name, double value);
/* The names joined by commas into buf (size bytes), as Keras's warnings list them; returns buf. */
const char *logs_names_joined(const sy_logs *logs, char *buf, size_t size);
sy_status history_new(sy_history **out);
sy_status history_append(sy_history *h, int32_t epoch, const sy_logs *logs);

/* Python's repr(float), as Keras's files hold numbers: the shortest string
 * that reads back to v ("0.1", "1e-05", "1e+16", "100.0", "nan", "-inf");
 * 32 bytes always suffice (callbacks.c). */
char *keras_float_repr(double v, char *buf, size_t size);
/* issue 19: numpy's str of an np.float32 ("0.55", "1e-05"): TensorFlow's log lines print them. */
char *keras_float32_repr(float v, char *buf, size_t size);

#endif
