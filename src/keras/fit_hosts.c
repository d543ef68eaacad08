/*
 * fit_hosts.c - what fit(), evaluate() and predict() do differently when
 * the model's strategy spans several hosts (issue 20, TPU Pods: MPI ranks).
 *
 * The loops themselves (fit.c) hardly change: every host walks the same
 * global batches, feeds and reads only its own replicas' shards (the
 * replica callbacks get global indices), and after each round trip the
 * hosts share the shards' sums (replicas_share), so every host folds the
 * same numbers in the same order and every callback sees the same logs --
 * an early stop or a learning-rate change happens on all hosts at the same
 * step. Only the chief (host 0) prints progress and writes checkpoints.
 *
 * What a run's hosts must have alike is checked here before the first
 * step: the model (its variables' names and shapes, and a hash of their
 * values, which the seed and any loaded weights decide), the optimizer,
 * the loss, the batch size, the data's size (and, for arrays, a hash of
 * their bytes: each host holds them whole) and fit's options. Ranks
 * started with a different --seed or --batch-size are refused at once,
 * every rank naming the first rank that differs and how, instead of
 * training on gradients that mean nothing or waiting forever in a
 * collective the others never reach.
 */
#include "keras_internal.h"

#include <stdarg.h>
#include <string.h>

bool model_chief(const sy_model *m) {
    return !m->strategy || sy_strategy_host(m->strategy) == 0;
}

int32_t model_hosts(const sy_model *m) {
    return m->strategy ? sy_strategy_hosts(m->strategy) : 1;
}

int32_t model_local_replicas(const sy_model *m, int32_t *first) {
    if (!m->strategy) {
        *first = 0;
        return 1;
    }
    *first = m->strategy->first;
    return m->strategy->local;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    size_t i = 0;
    uint64_t word;
    for (; i + 8 <= n; i += 8) {
        memcpy(&word, b + i, 8);
        h = sy_mix64(h ^ word);
    }
    word = 0;
    memcpy(&word, b + i, n - i);
    return sy_mix64(h ^ word ^ n);
}

static void field(strategy_field *f, int32_t *n, const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    snprintf(f[*n].name, sizeof f[*n].name, "%s", name);
    vsnprintf(f[*n].value, sizeof f[*n].value, fmt, ap);
    va_end(ap);
    (*n)++;
}

sy_status fit_check_hosts(sy_model *m, const char *what, int64_t batch, int64_t samples, const sy_tensor *const *x,
                          int32_t n_x, const sy_tensor *const *y, int32_t n_y, const sy_fit_options *o) {
    if (model_hosts(m) < 2) return SY_OK;
    strategy_field f[16];
    memset(f, 0, sizeof f);
    int32_t n = 0;
    uint64_t layout = 0, values = 0;
    for (int32_t i = 0; m->vars && i < sy_vars_count(m->vars); i++) {
        sy_shape s = sy_vars_shape(m->vars, i);
        const char *name = sy_vars_name(m->vars, i);
        layout = hash_bytes(layout, name, strlen(name));
        layout = hash_bytes(layout, s.dims, (size_t)s.rank * sizeof s.dims[0]);
        values = hash_bytes(values, sy_vars_data(m->vars, i),
                            (size_t)sy_shape_count(&s) * sy_dtype_size(sy_vars_dtype(m->vars, i)));
    }
    field(f, &n, "model", "'%s' (%lld layers)", m->name, (long long)m->n_layers);
    field(f, &n, "seed", "%llu", (unsigned long long)m->seed);
    field(f, &n, "variables", "%d, layout %016llx", m->vars ? sy_vars_count(m->vars) : 0,
          (unsigned long long)layout);
    field(f, &n, "weight hash", "%016llx", (unsigned long long)values);
    const char *opt = sy_optimizer_class_name(m->optimizer.kind);
    field(f, &n, "optimizer", "%s (learning rate %.9g)", opt ? opt : "none",
          (double)m->optimizer.learning_rate);
    field(f, &n, "loss", "%s", m->n_outputs ? m->heads[0].loss_name : "");
    field(f, &n, "steps_per_execution", "%d", m->steps_per_execution);
    field(f, &n, "batch_size", "%lld", (long long)batch);
    field(f, &n, "samples", "%lld", (long long)samples);
    if (n_x + n_y > 0) { /* the same command on another dataset (mnist_cnn and fashion_mnist_cnn) differs here alone */
        uint64_t data = 0;
        for (int32_t i = 0; i < n_x + n_y; i++) {
            const sy_tensor *t = i < n_x ? x[i] : y[i - n_x];
            if (t) data = hash_bytes(data, sy_tensor_data(t), sy_tensor_bytes(t));
        }
        field(f, &n, "data", "%016llx (a hash of the arrays)", (unsigned long long)data);
    }
    if (o) {
        field(f, &n, "epochs", "%d (from %d)", o->epochs, o->initial_epoch);
        field(f, &n, "steps_per_epoch", "%lld", (long long)o->steps_per_epoch);
        field(f, &n, "fit seed", "%llu (shuffle %s)", (unsigned long long)o->seed,
              o->shuffle ? "on" : "off");
        field(f, &n, "resume", "%s", o->resume ? "yes" : "no");
    }
    return strategy_check_same(m->strategy, what, f, n);
}
