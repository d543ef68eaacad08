/*
 * systolic/estimator.h - TPUEstimator in C: a model_fn, an input_fn(params),
 * a RunConfig with its TPUConfig, and train / evaluate / predict that write
 * checkpoints and summaries to model_dir, on the replica engine that runs
 * Keras's fit (docs/design/estimator.md).
 *
 * TensorFlow's official mnist_tpu.py, in C (examples/mnist_estimator.c):
 *
 *   static sy_status model_fn(void *user, sy_graph *g, const sy_node *features,
 *                             int32_t n_features, sy_node labels, sy_mode mode,
 *                             const sy_params *params, sy_estimator_spec *spec) {
 *       sy_node logits = ...;                          // the model on the graph API
 *       if (mode == SY_MODE_PREDICT) {
 *           spec->predictions[0] = (sy_prediction){"logits", logits};
 *           spec->n_predictions = 1;
 *           return SY_OK;
 *       }
 *       spec->loss = sy_graph_reduce_mean(
 *           g, sy_graph_sparse_softmax_cross_entropy(g, logits, labels), NULL, 0, false);
 *       if (mode == SY_MODE_TRAIN) {
 *           sy_optimizer sgd = sy_optimizer_sgd(0.05f, 0, false);
 *           sgd.schedule = sy_lr_exponential_decay(0.05, 100000, 0.96, false);
 *           spec->train_op = sy_params_get(params, "use_tpu")
 *                                ? sy_cross_shard_optimizer_minimize(sgd, spec->loss)
 *                                : sy_optimizer_minimize(sgd, spec->loss);
 *       } else {
 *           spec->eval_metrics = (sy_eval_metrics){metric_fn, NULL, {labels, logits}, 2};
 *       }
 *       return SY_OK;
 *   }
 *
 *   sy_estimator_options o = sy_estimator_options_default();
 *   o.model_fn = model_fn;
 *   o.config.model_dir = "/tmp/mnist";
 *   o.config.tpu = "cpu:8";
 *   o.config.tpu_config.iterations_per_loop = 50;
 *   o.train_batch_size = o.eval_batch_size = 1024;
 *   sy_estimator *e;
 *   sy_estimator_new(&o, &e);
 *   sy_estimator_train(e, train_input_fn, 0, 1000);   // max_steps
 *   sy_logs results;
 *   sy_estimator_evaluate(e, eval_input_fn, 0, NULL, &results);
 *
 * Semantics are TPUEstimator's in TensorFlow 2.15 (tf.compat.v1.estimator.tpu):
 * params["batch_size"] is the per-core batch for model_fn under use_tpu and
 * the global one without; train(steps or max_steps) continues from the
 * newest checkpoint in model_dir, its global step included, and calls
 * input_fn anew; iterations_per_loop steps run per host round trip; a
 * CrossShardOptimizer is required for training on several TPU cores and
 * refused without a TPU. Where systolic differs -- evaluate covers the
 * whole eval set when steps is not given, padding under use_tpu; the
 * checkpoint format; "loss = ..." lines also with use_tpu false -- is in
 * docs/design/estimator.md. The library logs through sy_set_log
 * (INFO for TensorFlow's INFO lines) and never prints.
 */
#ifndef SYSTOLIC_ESTIMATOR_H
#define SYSTOLIC_ESTIMATOR_H

#include "systolic/compiler.h"
#include "systolic/core.h"
#include "systolic/data.h"
#include "systolic/graph.h"
#include "systolic/keras.h" /* sy_logs */

#ifdef __cplusplus
extern "C" {
#endif

/* tf.estimator.ModeKeys. */
typedef enum sy_mode { SY_MODE_TRAIN = 0, SY_MODE_EVAL, SY_MODE_PREDICT } sy_mode;
/* TensorFlow's names: "train", "eval", "infer". */
const char *sy_mode_name(sy_mode mode);

/* ---- params ------------------------------------------------------------------------ */

/* The params dict: names to numbers or strings. The estimator copies the
 * caller's and adds "batch_size" (for input_fn and model_fn) and "use_tpu"
 * (for model_fn) before each call, as TPUEstimator does. */
typedef struct sy_params sy_params;

sy_status sy_params_new(sy_params **out);
void sy_params_free(sy_params *p); /* NULL: nothing */
/* Set key (copied) to a number or a string (copied), replacing what it held.
 * SY_ERR_INVALID_ARGUMENT for an empty key. */
sy_status sy_params_set(sy_params *p, const char *key, double value);
sy_status sy_params_set_string(sy_params *p, const char *key, const char *value);
bool sy_params_has(const sy_params *p, const char *key);
/* The number (NAN when absent or a string), the string (NULL when absent or
 * a number). */
double sy_params_get(const sy_params *p, const char *key);
const char *sy_params_get_string(const sy_params *p, const char *key);
/* params["batch_size"]: 0 when absent (a batch size TPUEstimator was not given). */
int64_t sy_params_batch_size(const sy_params *p);

/* ---- RunConfig --------------------------------------------------------------------- */

/* How input_fn feeds the cores when training under use_tpu
 * (tf.estimator.tpu.InputPipelineConfig). */
typedef enum sy_input_pipeline {
    SY_PER_SHARD_V1 = 1, /* TF's False: input_fn once per core, each giving per-core batches */
    SY_PER_HOST_V1 =
        2, /* TF's True: input_fn once per host, giving the host's batch, split among its cores */
    SY_PER_HOST_V2 =
        3 /* input_fn once per host, giving per-core batches; core i takes every i-th */
} sy_input_pipeline;

/* tf.estimator.tpu.TPUConfig. */
typedef struct sy_tpu_config {
    int64_t iterations_per_loop; /* 2: training steps per host round trip (use_tpu) */
    int32_t num_shards; /* 0 (TF's None); deprecated and ignored, as TPUEstimator: the TPU's cores
                           shard (a warning when they differ) */
    sy_input_pipeline per_host_input_for_training; /* SY_PER_HOST_V1 (TF's True) */
} sy_tpu_config;

sy_tpu_config sy_tpu_config_default(void);

/* tf.estimator.tpu.RunConfig, TensorFlow's defaults. */
typedef struct sy_run_config {
    const char *model_dir; /* checkpoints and summaries (copied); NULL: none, the variables kept in
                              memory */
    const char
        *tpu; /* the TPU (TPUClusterResolver's tpu) as a device spec of sy_cluster_resolve:
                 "cpu:8", "sim:v3-8"; NULL: $SYSTOLIC_TPU, else "local". Only with use_tpu. */
    int64_t save_summary_steps;     /* 100; 0: no summaries */
    int64_t save_checkpoints_steps; /* 0 (TF's None): every save_checkpoints_secs instead */
    double save_checkpoints_secs;   /* 600, used when save_checkpoints_steps is 0; 0 with it: at
                                       train's start and end only */
    int32_t keep_checkpoint_max;    /* 5 */
    int64_t log_step_count_steps;   /* 100; 0: no "loss = ..." and "global_step/sec" lines */
    uint64_t tf_random_seed;        /* 0: the plans' random streams (dropout) derive from it */
    sy_tpu_config tpu_config;
} sy_run_config;

sy_run_config sy_run_config_default(void);

/* ---- EstimatorSpec -------------------------------------------------------------------- */

/* optimizer.minimize(loss, global_step): the train_op. */
typedef struct sy_train_op {
    sy_optimizer optimizer; /* kind NONE: no train_op */
    sy_node loss;           /* the scalar it minimizes */
    bool cross_shard;       /* wrapped in tf.tpu.CrossShardOptimizer */
} sy_train_op;

sy_train_op sy_optimizer_minimize(sy_optimizer optimizer, sy_node loss);
/* tf.tpu.CrossShardOptimizer(optimizer).minimize(loss, global_step): the
 * shards' gradients averaged before one update. Required for training on
 * several cores under use_tpu; refused with use_tpu false, where
 * TensorFlow has no shards to sum over. */
sy_train_op sy_cross_shard_optimizer_minimize(sy_optimizer optimizer, sy_node loss);

/* The streaming metrics of one evaluate() (tf.compat.v1.metrics). */
typedef struct sy_metrics sy_metrics;

/* metric_fn(*tensors): runs on the host after every evaluation batch with
 * the batch's `tensors` -- the eval_metrics nodes, every shard's rows
 * concatenated along the first (batch) axis, the padding left out -- and
 * updates its metrics with the sy_metrics_* calls below (each call is the
 * metric's update_op; the values at the end are evaluate()'s results). */
typedef sy_status (*sy_metric_fn)(void *user, const sy_tensor *const *tensors, int32_t n,
                                  sy_metrics *metrics);

#define SY_SPEC_TENSORS_MAX 8
#define SY_PREDICTIONS_MAX  8

/* TPUEstimatorSpec.eval_metrics = (metric_fn, tensors). */
typedef struct sy_eval_metrics {
    sy_metric_fn metric_fn;               /* NULL: none */
    void *user;                           /* metric_fn's first argument */
    sy_node tensors[SY_SPEC_TENSORS_MAX]; /* float32 or int32, batch-major */
    int32_t n_tensors;
} sy_eval_metrics;

/* One entry of the predictions dict. */
typedef struct sy_prediction {
    const char *name; /* copied */
    sy_node node;     /* batch-major */
} sy_prediction;

/* TPUEstimatorSpec. model_fn gets it with loss SY_NONE and nothing else set. */
typedef struct sy_estimator_spec {
    sy_node loss;                                  /* TRAIN, EVAL: a scalar (required) */
    sy_train_op train_op;                          /* TRAIN (required) */
    sy_eval_metrics eval_metrics;                  /* EVAL (required under use_tpu) */
    sy_prediction predictions[SY_PREDICTIONS_MAX]; /* PREDICT (at least one) */
    int32_t n_predictions;
} sy_estimator_spec;

/* ---- streaming metrics (tf.compat.v1.metrics) -------------------------------------------- */

/* Each adds one batch to the metric `name` (made at its first call; the
 * name takes one kind of metric per evaluate()). labels and predictions
 * have the same number of values (TensorFlow's shapes after squeezing),
 * weights (NULL: 1 each) one per value or one per row of the first axis.
 * Any numeric dtype. SY_ERR_SHAPE naming the metric and both shapes for
 * counts that do not match; SY_ERR_INVALID_ARGUMENT for a name already
 * used by another kind.
 *   accuracy: the weighted fraction of labels == predictions
 *   mean: the weighted mean of values
 *   mean_absolute_error, mean_squared_error, root_mean_squared_error:
 *     the weighted mean of |p - l|, (p - l)^2, and the root of the latter
 *   precision, recall: labels and predictions read as booleans (non-zero),
 *     tp / (tp + fp) and tp / (tp + fn), 0 when nothing counts. */
sy_status sy_metrics_accuracy(sy_metrics *m, const char *name, const sy_tensor *labels,
                              const sy_tensor *predictions, const sy_tensor *weights);
sy_status sy_metrics_mean(sy_metrics *m, const char *name, const sy_tensor *values,
                          const sy_tensor *weights);
sy_status sy_metrics_mean_absolute_error(sy_metrics *m, const char *name, const sy_tensor *labels,
                                         const sy_tensor *predictions, const sy_tensor *weights);
sy_status sy_metrics_mean_squared_error(sy_metrics *m, const char *name, const sy_tensor *labels,
                                        const sy_tensor *predictions, const sy_tensor *weights);
sy_status sy_metrics_root_mean_squared_error(sy_metrics *m, const char *name,
                                             const sy_tensor *labels, const sy_tensor *predictions,
                                             const sy_tensor *weights);
sy_status sy_metrics_precision(sy_metrics *m, const char *name, const sy_tensor *labels,
                               const sy_tensor *predictions, const sy_tensor *weights);
sy_status sy_metrics_recall(sy_metrics *m, const char *name, const sy_tensor *labels,
                            const sy_tensor *predictions, const sy_tensor *weights);
/* The metric's value so far (the value tensor); NAN for a name not made. */
double sy_metrics_value(const sy_metrics *m, const char *name);

/* tf.argmax(x, axis=-1) on the host, for metric_fns: x (..., C) of any
 * numeric dtype -> a new int32 tensor (...), the first index of the largest
 * value in each row. SY_ERR_SHAPE for a scalar or C = 0. */
sy_status sy_tensor_argmax(const sy_tensor *x, sy_tensor **out);

/* ---- the estimator ----------------------------------------------------------------------- */

/* input_fn(params): a new dataset of batches (the estimator frees it). Each
 * element is (features..., labels): the first n_features components are
 * the features, the next one (if any) the labels. params["batch_size"] is
 * what TPUEstimator gives: under use_tpu per core (SY_PER_SHARD_V1,
 * SY_PER_HOST_V2) or per host (SY_PER_HOST_V1, the default, and always for
 * evaluate and predict); the global batch with use_tpu false.
 * params["context.invocation_index"] and ["context.total_invocations"] are
 * TPUContext.current_input_fn_deployment()'s: under SY_PER_SHARD_V1 the
 * core this call feeds of the cores (e.g. to shard the input by), else 0
 * of 1, the one host. */
typedef sy_status (*sy_input_fn)(void *user, const sy_params *params, sy_dataset **out);

/* model_fn(features, labels, mode, params): build the model on g for mode.
 * features[i] is the graph input of the i-th feature component with the
 * per-core batch first (static shapes: one graph per batch shape), float32
 * for floating and uint8 data, int32 for other integers; labels likewise
 * (SY_NONE in PREDICT, or when the input has none). params holds the
 * estimator's params, "batch_size" (per core under use_tpu, global without)
 * and "use_tpu" (1 or 0). Variables are graph params: a name is one
 * variable, shared by every mode's graph and checkpointed. Fill spec;
 * a non-OK status stops the call that built it, with its message. */
typedef sy_status (*sy_model_fn)(void *user, sy_graph *g, const sy_node *features,
                                 int32_t n_features, sy_node labels, sy_mode mode,
                                 const sy_params *params, sy_estimator_spec *spec);

typedef struct sy_estimator_options {
    sy_model_fn model_fn;       /* required */
    void *user;                 /* model_fn's and input_fn's first argument */
    sy_run_config config;       /* sy_run_config_default() */
    const sy_params *params;    /* NULL: none; copied. "batch_size", "context" and "context.*"
                                   (sy_input_fn) are reserved */
    bool use_tpu;               /* true, as TPUEstimator: replicas on config.tpu's cores */
    int64_t train_batch_size;   /* global; 0 (TF's None): required under use_tpu */
    int64_t eval_batch_size;    /* global; 0: required for evaluate under use_tpu */
    int64_t predict_batch_size; /* global; 0: required for predict under use_tpu */
    int32_t n_features;         /* the dataset components that are features: 1 */
    const char *name;           /* the model's name in checkpoints: "model_fn" */
} sy_estimator_options;

sy_estimator_options sy_estimator_options_default(void);

typedef struct sy_estimator sy_estimator;

/* TPUEstimator(model_fn, config, params, use_tpu, *_batch_size). Resolves
 * config.tpu under use_tpu (a strategy of one replica per core); with
 * use_tpu false one replica uses every core. SY_ERR_INVALID_ARGUMENT with
 * TensorFlow's words for a missing model_fn, train_batch_size under use_tpu,
 * a batch size that is not positive or does not divide by the cores,
 * reserved params keys,
 * iterations_per_loop < 1, a bad n_features; the resolver's errors for a
 * bad spec. Nothing is compiled and model_dir is not touched yet. */
sy_status sy_estimator_new(const sy_estimator_options *options, sy_estimator **out);
void sy_estimator_free(sy_estimator *e); /* NULL: nothing */

/* Train: steps more steps, or up to global step max_steps (give one; 0 for
 * the other), or with both 0 until the input ends (not under use_tpu).
 * With a model_dir: holds its lock (as fit does), continues from the newest
 * valid checkpoint (global step kept), saves one at the start if none is
 * at the current step, every save_checkpoints_steps (or _secs) at a loop's
 * end, and at the end; writes the "loss", "learning_rate",
 * "global_step/sec" and "examples/sec" summaries to model_dir. Refused
 * before anything is written: a model_fn without a loss or train_op, a
 * train_op without CrossShardOptimizer on several cores under use_tpu or
 * with one without a TPU, batches whose shapes are not static under use_tpu
 * (naming the component and dimension), another model's checkpoints in
 * model_dir. A run that fails part way keeps the checkpoints it wrote. */
sy_status sy_estimator_train(sy_estimator *e, sy_input_fn input_fn, int64_t steps,
                             int64_t max_steps);

/* Evaluate from the newest checkpoint in model_dir (the variables as they
 * are without one): `steps` batches, or with 0 the whole input exactly
 * once (a last partial batch runs as it is with use_tpu false; under
 * use_tpu padded with zero-weight rows to the shards). results: the
 * metrics, "loss" (the mean of the batches' losses) and "global_step",
 * by name in sorted order; also written as summaries to model_dir/eval
 * (eval_<name> when name is given) at the global step. */
sy_status sy_estimator_evaluate(sy_estimator *e, sy_input_fn input_fn, int64_t steps,
                                const char *name, sy_logs *results);

/* Every prediction of every example of the input, in order, each exactly
 * once whatever the batch and shard counts: one tensor per predictions
 * entry, (examples, ...). */
typedef struct sy_predictions sy_predictions;

sy_status sy_estimator_predict(sy_estimator *e, sy_input_fn input_fn, sy_predictions **out);
void sy_predictions_free(sy_predictions *p); /* NULL: nothing */
int64_t sy_predictions_examples(const sy_predictions *p);
int32_t sy_predictions_count(const sy_predictions *p);
const char *sy_predictions_name(const sy_predictions *p, int32_t index);
/* The entry named `name`, owned by p; NULL when there is none. */
const sy_tensor *sy_predictions_get(const sy_predictions *p, const char *name);

/* The global step (optimizer steps applied, as restored or trained). */
int64_t sy_estimator_global_step(const sy_estimator *e);
/* The variable store every mode's graph uses. A variable created here
 * (sy_vars_add) before the first call is the one model_fn's param of that
 * name gets: a way to give it chosen initial values. */
sy_vars *sy_estimator_vars(sy_estimator *e);
/* The replicas training runs on: the TPU's cores under use_tpu, else 1. */
int32_t sy_estimator_num_replicas(const sy_estimator *e);

#ifdef __cplusplus
}
#endif
#endif
