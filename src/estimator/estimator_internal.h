/*
 * estimator_internal.h - what the estimator's files share: the estimator's
 * record, the plans it compiles from model_fn's graphs, and the input it
 * takes from input_fn's datasets, step by step.
 *
 *   estimator.c  params, RunConfig, the estimator, model_fn's plans, the input
 *   train.c      train(): the loop, its log lines, summaries and checkpoints
 *   evaluate.c   evaluate() and predict()
 *   metrics.c    the streaming tf.metrics and tf.argmax for metric_fns
 *
 * The estimator sits on the engine below it: a plan set per (mode, shapes)
 * compiled by distribute's replicas_compile and run by replicas_train /
 * replicas_infer (steps_per_execution's machinery), the model directory of
 * keras/model_checkpoint.c (ckpt_owner), io's event files.
 */
#ifndef SY_ESTIMATOR_INTERNAL_H
#define SY_ESTIMATOR_INTERNAL_H

#include "systolic/estimator.h"
#include "../keras/keras_internal.h" /* ckpt_owner, keras_copy_row, keras_float32_repr, logs_set */

#define EST_PLANS                                                                                  \
    8 /* plan sets kept: a mode's full batch and its last, smaller one, per mode, and spares */
#define EST_NAME_MAX 64

/* One compiled model_fn graph: a mode, the shapes it was built for, and
 * one plan per replica. */
typedef struct est_plan {
    bool used;
    uint64_t stamp; /* when last used: the oldest goes first when the cache is full */
    sy_mode mode;
    int32_t n_in; /* fed components: the features, then the labels if any */
    sy_component_spec
        in[SY_ELEMENT_MAX]; /* per replica: the batch first; dtype as fed (float32, int32) */
    sy_graph *g;
    replica_set *rs;
    sy_node inputs[SY_ELEMENT_MAX];
    sy_estimator_spec spec;
    char names[SY_PREDICTIONS_MAX][EST_NAME_MAX]; /* the predictions' names, spec's point here */
    void **in_ptr; /* (replicas, n_in): where each replica's input is fed */
    void *spare;   /* the host buffers of inputs the graph does not read */
} est_plan;

typedef struct param_entry {
    char *key;
    char *str; /* NULL: a number */
    double num;
} param_entry;

struct sy_params {
    param_entry *v;
    int64_t n, cap;
};

struct sy_estimator {
    sy_estimator_options o; /* its strings point at the copies below */
    char *model_dir, *tpu, *name;
    sy_params *params;
    sy_strategy *strategy;
    int32_t replicas;
    sy_vars *vars;
    est_plan plans[EST_PLANS];
    uint64_t clock;
    sy_optimizer optimizer; /* the last train_op's: checkpoints name it */
};

/* A copy of p with "batch_size" (when > 0) and, for model_fn, "use_tpu" set. */
sy_status params_with(const sy_params *p, int64_t batch_size, int use_tpu, sy_params **out);

/* The model directory's owner: the estimator's variables. */
ckpt_owner est_owner(sy_estimator *e, const char *what);
/* evaluate and predict: the newest valid checkpoint of model_dir, or the
 * variables as they are when there is none (said at INFO, TensorFlow's
 * words), `what` naming the call. */
sy_status est_restore(sy_estimator *e, const char *what);

/* ---- the input --------------------------------------------------------------------------- */

/* A replica's share of a step: rows [row, row + rows) of element e, then
 * zero rows (padding) up to the plan's batch. */
typedef struct est_shard {
    const sy_element *e;
    int64_t row, rows;
} est_shard;

/* One step's data: the elements it took and every replica's shard. */
typedef struct est_step {
    sy_element *elems;
    int32_t n_elems;
    est_shard *shards; /* (replicas) */
    int64_t rows;      /* real rows, all shards together */
    int64_t batch;     /* rows per replica of the plan it runs on */
} est_step;

/* input_fn's datasets for one call and their iterators. */
typedef struct est_input {
    sy_dataset **ds;
    sy_iterator **it;
    int32_t n;     /* pipelines: one, or one per core (SY_PER_SHARD_V1) */
    int32_t take;  /* elements a step takes from each: the replicas (SY_PER_HOST_V2), else 1 */
    int32_t split; /* shards an element is split into: the replicas (per host), else 1 */
    int32_t replicas;
    int32_t n_fed; /* components fed to the graph: the features and the labels if there are any */
    bool labels;   /* the last of them is the labels */
    const char *what; /* "train", "evaluate", "predict" */
} est_input;

/* Call input_fn as TPUEstimator would for mode (params["batch_size"] per
 * core, per host or global) and check its datasets: enough components,
 * numbers not strings, shapes known past the batch axis, and under
 * use_tpu in TRAIN fully static (the message names the component and
 * dimension) with a batch that divides among the cores. */
sy_status est_input_open(sy_estimator *e, sy_mode mode, sy_input_fn input_fn, est_input *in);
void est_input_close(est_input *in);
/* The next step's data into s (sized by est_step_alloc), or *end when the
 * input has no whole step left (a dataset error is returned). */
sy_status est_input_next(est_input *in, est_step *s, bool *end);
sy_status est_step_alloc(const est_input *in, est_step *s);
void est_step_clear(est_step *s); /* the elements */
void est_step_free(est_step *s);

/* ---- plans -------------------------------------------------------------------------------- */

/* The plan set for mode and the step's shapes, built by calling model_fn
 * and compiled on first use; its spec checked for the mode (a loss, a
 * train_op and its CrossShardOptimizer, eval_metrics under use_tpu,
 * predictions, batch-major tensors). */
sy_status est_plan_get(sy_estimator *e, sy_mode mode, const est_input *in, const est_step *s,
                       est_plan **out);
/* A replica's callbacks for replicas_train/infer: est_feed fills a
 * replica's inputs with its shard of step[step_index] (ctx: est_run). */
typedef struct est_run {
    est_plan *p;
    est_step *steps;
    int32_t replicas;
    replica_fn read; /* then this, with the same ctx */
    void *user;
} est_run;
void est_feed(void *ctx, int64_t step, int32_t replica, sy_plan *plan);
/* A graph node's values for replica `replica` after a run: an output, or
 * an input (the labels as fed). */
const void *est_node_value(const est_plan *p, int32_t replica, sy_plan *plan, sy_node node);

/* ---- logging ------------------------------------------------------------------------------ */

/* numpy's str of a float32 (keras_float32_repr). */
const char *est_float(float v, char *buf, size_t size);

/* ---- streaming metrics (metrics.c) -------------------------------------------------------- */

sy_status metrics_new(sy_metrics **out);
void metrics_free(sy_metrics *m);
int32_t metrics_count(const sy_metrics *m);
const char *metrics_name(const sy_metrics *m, int32_t i);

#endif
