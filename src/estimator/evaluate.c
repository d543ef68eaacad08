/*
 * evaluate.c - TPUEstimator.evaluate() and .predict().
 *
 * Both restore the newest checkpoint of model_dir first (without its lock:
 * an evaluator reads while a trainer writes, as TensorFlow's continuous
 * evaluation does), then run input_fn's batches one host round trip each
 * (replicas_infer). A batch is split among the replicas in shards of
 * ceil(rows / replicas) rows, so a last batch smaller than the rest runs
 * on a plan compiled for its size, its last shards padded with zero rows;
 * with use_tpu false (one replica) nothing is padded, and the numbers are
 * TensorFlow's on a CPU, exactly.
 *
 * evaluate: after each batch the host gathers the eval_metrics tensors --
 * each shard's real rows, in replica order, so the padding never reaches
 * them -- and calls metric_fn on them, which updates its streaming
 * metrics (metrics.c); the batch's loss, the mean of the shards' losses
 * weighted by their real rows, goes into "loss", the mean over batches, as
 * the Estimator's tf.metrics.mean(loss) does. The results are logged as
 * TensorFlow logs them ("Saving dict for global step 7: accuracy = 0.55,
 * global_step = 7, loss = 0.65475583") and written as summaries to
 * model_dir/eval at the global step.
 *
 * predict: each shard's real rows of every prediction are copied to their
 * examples' rows, so every example has exactly one row.
 */
#include "estimator_internal.h"

#include "../io/io_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows one value of node n's batch-major output holds: its values per row. */
static int64_t per_row(const est_plan *p, sy_node n) {
    sy_shape s = sy_graph_shape(p->g, n);
    return sy_shape_count(&s) / s.dims[0];
}

typedef struct infer_run {
    est_step *step;
    int64_t offset[1024 + 1]; /* each shard's first row in the batch */
    double loss;              /* sum of the shards' losses times their rows */
    char *out[SY_PREDICTIONS_MAX > SY_SPEC_TENSORS_MAX ? SY_PREDICTIONS_MAX : SY_SPEC_TENSORS_MAX];
    const sy_node *nodes;
    int32_t n_nodes;
} infer_run;

/* Each replica's real rows of the nodes into out[] at its shard's offset, and its loss. */
static void read_rows(void *ctx, int64_t step, int32_t replica, sy_plan *plan) {
    const est_run *run = ctx;
    infer_run *ir = run->user;
    const est_shard *sh = &run->steps[step].shards[replica];
    for (int32_t i = 0; i < ir->n_nodes; i++) {
        size_t row = (size_t)per_row(run->p, ir->nodes[i]) * 4; /* float32 or int32 */
        memcpy(ir->out[i] + (size_t)ir->offset[replica] * row,
               est_node_value(run->p, replica, plan, ir->nodes[i]), (size_t)sh->rows * row);
    }
}

/* The shards' offsets in their batch; their losses are summed after the run, in replica order. */
static void set_offsets(infer_run *ir, const est_step *s, int32_t replicas) {
    ir->offset[0] = 0;
    for (int32_t r = 0; r < replicas; r++) ir->offset[r + 1] = ir->offset[r] + s->shards[r].rows;
}

/* One batch through the plan for its shapes. */
static sy_status run_batch(sy_estimator *e, sy_mode mode, est_input *in, est_step *s, infer_run *ir,
                           est_plan **p, const char *what) {
    sy_status st = est_plan_get(e, mode, in, s, p);
    if (st) return st;
    set_offsets(ir, s, e->replicas);
    est_run run = {*p, s, e->replicas, read_rows, ir};
    if ((st = replicas_infer((*p)->rs, 1, est_feed, read_rows, &run))) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        return sy_error(st, "%s: %s", what, msg);
    }
    ir->loss = 0;
    if ((*p)->spec.loss != SY_NONE)
        for (int32_t r = 0; r < e->replicas; r++)
            ir->loss += (double)s->shards[r].rows *
                        *(const float *)sy_plan_output((*p)->rs->plans[r], (*p)->spec.loss);
    return SY_OK;
}

static sy_status open_input(sy_estimator *e, sy_mode mode, sy_input_fn input_fn, int64_t steps,
                            est_input *in, est_step *s) {
    sy_status st = est_input_open(e, mode, input_fn, in);
    if (!st && !steps && sy_dataset_cardinality(in->ds[0]) == SY_INFINITE)
        st = sy_error(SY_ERR_INVALID_ARGUMENT,
                      "%s: the input_fn's dataset repeats forever, so it would never end: %s",
                      in->what,
                      mode == SY_MODE_EVAL ? "give steps, or a dataset that ends"
                                           : "give a dataset that ends");
    if (!st) st = est_step_alloc(in, s);
    if (!st) st = est_restore(e, in->what);
    return st;
}

/* ---- evaluate ----------------------------------------------------------------------------------
 */

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* results: the metrics, loss and global_step, sorted by name; logged and written as TensorFlow
 * does. */
static sy_status report(sy_estimator *e, const sy_metrics *m, double loss, const char *name,
                        sy_logs *results) {
    int64_t gs = sy_vars_iterations(e->vars);
    const char *names[SY_LOGS_MAX];
    int32_t n = 0;
    for (int32_t i = 0; i < metrics_count(m) && n < SY_LOGS_MAX - 2; i++)
        if (strcmp(metrics_name(m, i), "loss") && strcmp(metrics_name(m, i), "global_step"))
            names[n++] = metrics_name(m, i);
    names[n++] = "loss";
    names[n++] = "global_step";
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    memset(results, 0, sizeof *results);
    char line[4096], v[32];
    size_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        bool step = strcmp(names[i], "global_step") == 0;
        float value = step                            ? (float)gs
                      : strcmp(names[i], "loss") == 0 ? (float)loss
                                                      : (float)sy_metrics_value(m, names[i]);
        logs_set(results, names[i], step ? (double)gs : (double)value);
        if (step)
            snprintf(v, sizeof v, "%lld", (long long)gs);
        else
            est_float(value, v, sizeof v);
        if (at < sizeof line)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s%s = %s", i ? ", " : "",
                                   names[i], v);
    }
    sy_log(SY_LOG_INFO, "Saving dict for global step %lld: %s", (long long)gs, line);
    if (!e->model_dir) return SY_OK;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/eval%s%s", e->model_dir, name ? "_" : "", name ? name : "");
    io_events *w;
    sy_status st = io_events_open(dir, &w);
    for (int32_t i = 0; !st && i < n; i++)
        if (strcmp(names[i], "global_step"))
            st = io_events_scalar(w, names[i], gs, (float)sy_logs_get(results, names[i]));
    sy_status cs = io_events_close(w);
    return st ? st : cs;
}

/* The eval_metrics tensors of a batch as host tensors of its real rows. */
static sy_status metric_tensors(const est_plan *p, int64_t rows, sy_tensor **t, infer_run *ir) {
    const sy_eval_metrics *m = &p->spec.eval_metrics;
    for (int32_t i = 0; i < m->n_tensors; i++) {
        sy_shape s = sy_graph_shape(p->g, m->tensors[i]);
        s.dims[0] = rows;
        sy_status st = sy_tensor_new(sy_graph_dtype(p->g, m->tensors[i]), s, &t[i]);
        if (st) return st;
        ir->out[i] = sy_tensor_data(t[i]);
    }
    ir->nodes = m->tensors;
    ir->n_nodes = m->metric_fn ? m->n_tensors : 0;
    return SY_OK;
}

sy_status sy_estimator_evaluate(sy_estimator *e, sy_input_fn input_fn, int64_t steps,
                                const char *name, sy_logs *results) {
    if (results) memset(results, 0, sizeof *results);
    if (steps < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "evaluate: Must specify steps > 0, given: %lld",
                        (long long)steps);
    if (name && (!*name || strchr(name, '/')))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "evaluate: name '%s' names the directory eval_<name>: give a name "
                        "without '/'",
                        name);
    est_input in;
    est_step s;
    memset(&s, 0, sizeof s);
    sy_metrics *m = NULL;
    sy_status st = open_input(e, SY_MODE_EVAL, input_fn, steps, &in, &s);
    if (!st) st = metrics_new(&m);
    double loss_sum = 0;
    int64_t batches = 0;
    bool end = false;
    while (!st && (!steps || batches < steps)) {
        if ((st = est_input_next(&in, &s, &end)) || end) break;
        est_plan *p = NULL;
        infer_run ir = {.step = &s};
        sy_tensor *t[SY_SPEC_TENSORS_MAX] = {0};
        if (!(st = est_plan_get(e, SY_MODE_EVAL, &in, &s, &p)))
            st = metric_tensors(p, s.rows, t, &ir);
        if (!st) st = run_batch(e, SY_MODE_EVAL, &in, &s, &ir, &p, "evaluate");
        const sy_eval_metrics *em = p ? &p->spec.eval_metrics : NULL;
        if (!st && em->metric_fn) {
            st = em->metric_fn(em->user, (const sy_tensor *const *)t, em->n_tensors, m);
            if (st) {
                char msg[2048];
                snprintf(msg, sizeof msg, "%s", sy_last_error());
                st = sy_error(st, "evaluate: metric_fn failed on batch %lld: %s",
                              (long long)batches + 1, msg);
            }
        }
        for (int32_t i = 0; i < SY_SPEC_TENSORS_MAX; i++) sy_tensor_free(t[i]);
        loss_sum += ir.loss / (double)s.rows; /* the batch's loss, a mean over its rows */
        batches++;
    }
    if (!st && batches == 0)
        st = sy_error(SY_ERR_INVALID_ARGUMENT,
                      "evaluate: the input_fn's dataset gave no batch to evaluate");
    if (!st) {
        sy_logs r;
        st = report(e, m, loss_sum / (double)batches, name, &r);
        if (!st && results) *results = r;
    }
    metrics_free(m);
    est_step_free(&s);
    est_input_close(&in);
    return st;
}

/* ---- predict
 * -------------------------------------------------------------------------------------- */

struct sy_predictions {
    int32_t n;
    int64_t examples;
    char names[SY_PREDICTIONS_MAX][EST_NAME_MAX];
    sy_tensor *t[SY_PREDICTIONS_MAX];
};

void sy_predictions_free(sy_predictions *p) {
    if (!p) return;
    for (int32_t i = 0; i < p->n; i++) sy_tensor_free(p->t[i]);
    sy_free(p);
}

int64_t sy_predictions_examples(const sy_predictions *p) {
    return p ? p->examples : 0;
}
int32_t sy_predictions_count(const sy_predictions *p) {
    return p ? p->n : 0;
}
const char *sy_predictions_name(const sy_predictions *p, int32_t index) {
    return p && index >= 0 && index < p->n ? p->names[index] : NULL;
}

const sy_tensor *sy_predictions_get(const sy_predictions *p, const char *name) {
    for (int32_t i = 0; p && name && i < p->n; i++)
        if (strcmp(p->names[i], name) == 0) return p->t[i];
    return NULL;
}

/* Growing row buffers, one per prediction. */
typedef struct pred_buf {
    char *data[SY_PREDICTIONS_MAX];
    int64_t cap; /* rows */
    int64_t rows;
} pred_buf;

static sy_status grow(pred_buf *b, const est_plan *p, int64_t need) {
    if (need <= b->cap) return SY_OK;
    int64_t cap = sy_max64(need, 2 * b->cap);
    for (int32_t i = 0; i < p->spec.n_predictions; i++) {
        int64_t row = per_row(p, p->spec.predictions[i].node) * 4;
        char *d = sy_realloc_array(b->data[i], (size_t)(b->cap * row), (size_t)(cap * row), 1);
        if (!d)
            return sy_error(SY_ERR_OUT_OF_MEMORY, "predict: out of memory for %lld examples",
                            (long long)cap);
        b->data[i] = d;
    }
    b->cap = cap;
    return SY_OK;
}

static sy_status collect(const est_plan *p, pred_buf *b, sy_predictions **out) {
    sy_predictions *r = sy_calloc(1, sizeof *r);
    if (!r) return sy_error(SY_ERR_OUT_OF_MEMORY, "predict: out of memory");
    r->examples = b->rows;
    sy_status st = SY_OK;
    for (int32_t i = 0; !st && i < p->spec.n_predictions; i++) {
        sy_node n = p->spec.predictions[i].node;
        sy_shape s = sy_graph_shape(p->g, n);
        s.dims[0] = b->rows;
        snprintf(r->names[i], sizeof r->names[i], "%s", p->spec.predictions[i].name);
        st = sy_tensor_new_uninit(sy_graph_dtype(p->g, n), s, &r->t[i]);
        if (!st) {
            r->n = i + 1;
            memcpy(sy_tensor_data(r->t[i]), b->data[i], sy_tensor_bytes(r->t[i]));
        }
    }
    if (st) {
        sy_predictions_free(r);
        return st;
    }
    *out = r;
    return SY_OK;
}

sy_status sy_estimator_predict(sy_estimator *e, sy_input_fn input_fn, sy_predictions **out) {
    *out = NULL;
    est_input in;
    est_step s;
    memset(&s, 0, sizeof s);
    pred_buf b;
    memset(&b, 0, sizeof b);
    sy_status st = open_input(e, SY_MODE_PREDICT, input_fn, 0, &in, &s);
    est_plan *p = NULL, *first = NULL;
    bool end = false;
    while (!st) {
        if ((st = est_input_next(&in, &s, &end)) || end) break;
        infer_run ir = {.step = &s};
        if ((st = est_plan_get(e, SY_MODE_PREDICT, &in, &s, &p))) break;
        if (!first) first = p;
        if ((st = grow(&b, p, b.rows + s.rows))) break;
        sy_node nodes[SY_PREDICTIONS_MAX];
        for (int32_t i = 0; i < p->spec.n_predictions; i++) {
            nodes[i] = p->spec.predictions[i].node;
            ir.out[i] = b.data[i] + (size_t)(b.rows * per_row(p, nodes[i]) * 4);
        }
        ir.nodes = nodes;
        ir.n_nodes = p->spec.n_predictions;
        if ((st = run_batch(e, SY_MODE_PREDICT, &in, &s, &ir, &p, "predict"))) break;
        b.rows += s.rows;
    }
    if (!st && !first)
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "predict: the input_fn's dataset gave no batch");
    if (!st) st = collect(p, &b, out);
    for (int32_t i = 0; i < SY_PREDICTIONS_MAX; i++) sy_free(b.data[i]);
    est_step_free(&s);
    est_input_close(&in);
    return st;
}
