/*
 * replicas.c - running a step on every replica: the data-parallel training
 * step of TPUStrategy, and forward-only steps for evaluate and predict.
 *
 * A replica set is one plan per replica, compiled from one graph: they
 * share the variable store (the weights and the optimizer's slots) and
 * each has its own activations and gradient block. A call runs `steps`
 * steps inside one parallel region of the strategy's threads -- one host
 * round trip, steps_per_execution steps -- with barriers between the
 * phases of a training step:
 *
 *   1. every replica: feed its shard, forward + backward (its gradients),
 *      read its outputs;                                        barrier
 *   2. all-reduce: replica 0's gradient block becomes the mean of all the
 *      blocks, summed in replica order; the elements are split into fixed
 *      chunks among the threads;                                barrier
 *   2b. (issue 17) with gradient clipping, weight decay or Nadam, thread 0
 *      runs the optimizer's once-a-step prologue on replica 0's block: a
 *      global norm must see every mean gradient;              barrier
 *   3. the optimizer's update from that block: its update ops are spread
 *      over the threads (each writes only its own parameter), or run by
 *      thread 0 when the kernels have a pool of their own;      barrier
 *
 * Every sum has a fixed order and every element one writer, so the result
 * is bitwise the same whatever the number of threads or their timing. A
 * failing replica (a label out of range) sets a flag; every thread still
 * passes every barrier, skipping the work, and the caller reports the first
 * failure.
 */
#include "distribute_internal.h"
#include "systolic/tpu.h"

#include <stdatomic.h>
#include <string.h>

#define REDUCE_CHUNK 4096 /* floats */

void replicas_free(replica_set *r) {
    if (!r) return;
    for (int32_t i = 0; r->plans && i < r->n; i++) sy_plan_free(r->plans[i]);
    sy_free(r->plans);
    sy_free(r->update_owner);
    sy_free(r);
}

/* Spread the update steps over the threads by size (largest first, each to
 * the least loaded thread): fixed by the shapes, so always the same split. */
static sy_status assign_updates(replica_set *r) {
    sy_plan *p = r->plans[0];
    int32_t first = plan_first_update(p), n = plan_step_count(p) - first, threads = r->strategy->threads;
    r->update_owner = sy_calloc((size_t)(n ? n : 1), sizeof *r->update_owner);
    int64_t *load = sy_calloc((size_t)threads, sizeof *load);
    bool *done = sy_calloc((size_t)(n ? n : 1), sizeof *done);
    if (!r->update_owner || !load || !done) {
        sy_free(load);
        sy_free(done);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "replicas: out of memory");
    }
    for (int32_t k = 0; k < n; k++) {
        int32_t big = -1;
        for (int32_t i = 0; i < n; i++)
            if (!done[i] && (big < 0 || plan_step_elements(p, first + i) > plan_step_elements(p, first + big))) big = i;
        int32_t t = 0;
        for (int32_t j = 1; j < threads; j++)
            if (load[j] < load[t]) t = j;
        done[big] = true;
        r->update_owner[big] = r->strategy->kernel_threads > 1 ? 0 : t;
        load[t] += plan_step_elements(p, first + big);
    }
    sy_free(load);
    sy_free(done);
    return SY_OK;
}

sy_status replicas_compile(sy_strategy *s, const sy_graph *g, const sy_plan_options *o, replica_set **out) {
    *out = NULL;
    replica_set *r = sy_calloc(1, sizeof *r);
    if (r) r->plans = sy_calloc((size_t)s->replicas, sizeof *r->plans);
    if (!r || !r->plans) {
        sy_free(r);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "replicas: out of memory");
    }
    r->strategy = s;
    r->n = s->replicas;
    sy_status st = SY_OK;
    /* issue 16, sim devices: an emulated chip's replicas run the sim
     * kernels (the reference kernels stay, for tests), and each must fit in
     * its core's share of the chip's HBM -- checked on the first replica's
     * plan, before the others are compiled. */
    sy_plan_options so = *o;
    char hbm_name[64];
    if (s->chip) {
        if (!so.backend || !strcmp(so.backend, "cpu")) so.backend = "sim";
        so.device_memory = (int64_t)(s->chip->hbm_bytes / s->chip->replicas);
        snprintf(hbm_name, sizeof hbm_name, "a TPU %s %s's HBM", s->chip->name, s->chip->replicas > 1 ? "core" : "chip");
        so.device_memory_name = hbm_name;
        o = &so;
    }
    for (int32_t i = 0; i < r->n && st == SY_OK; i++) {
        sy_plan_options ro = *o;
        ro.pool = s->kernel_pools ? s->kernel_pools[i] : NULL;
        ro.threads = s->kernel_threads;
        ro.seed = sy_mix64(o->seed ^ sy_mix64(0x5EB1CA00ull + (uint64_t)i)); /* each replica's own stream */
        st = sy_plan_compile(g, &ro, &r->plans[i]);
    }
    if (st == SY_OK && o->optimizer.kind != SY_OPTIMIZER_NONE) {
        size_t b0, bi;
        sy_plan_gradients(r->plans[0], &b0);
        for (int32_t i = 1; i < r->n; i++) {
            sy_plan_gradients(r->plans[i], &bi);
            SY_ASSERT(bi == b0); /* one graph and options: one layout */
        }
        st = assign_updates(r);
    }
    if (st) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        replicas_free(r);
        return sy_error(st, "%s", msg);
    }
    *out = r;
    return SY_OK;
}

/* ---- running ------------------------------------------------------------------------ */

typedef struct run_ctx {
    replica_set *r;
    int64_t steps;
    bool train;
    replica_fn feed, read;
    void *user;
    sy_barrier barrier;
    atomic_int failed;
    sy_status status;
    char error[2048];
} run_ctx;

static void fail(run_ctx *c, sy_status st) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&c->failed, &expected, 1)) {
        c->status = st;
        snprintf(c->error, sizeof c->error, "%s", sy_last_error());
    }
}

static bool failed(run_ctx *c) { return atomic_load_explicit(&c->failed, memory_order_acquire) != 0; }

/* Phase 1 for the replicas of thread t. */
static void forward_backward(run_ctx *c, int64_t step, int t) {
    replica_set *r = c->r;
    for (int32_t i = t; i < r->n && !failed(c); i += r->strategy->threads) {
        sy_plan *p = r->plans[i];
        c->feed(c->user, step, i, p);
        plan_prepare(p);
        sy_status st = plan_run_steps(p, 0, c->train ? plan_first_update(p) : plan_step_count(p));
        if (st) {
            fail(c, st);
            return;
        }
        c->read(c->user, step, i, p);
    }
}

/* Phase 2: replica 0's gradients become the mean over the replicas. */
static void all_reduce(run_ctx *c, int t) {
    replica_set *r = c->r;
    size_t bytes;
    float *g0 = sy_plan_gradients(r->plans[0], &bytes);
    int64_t n = (int64_t)(bytes / sizeof(float)), chunks = (n + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
    float inv = 1.0f / (float)r->n;
    for (int64_t k = t; k < chunks; k += r->strategy->threads) {
        int64_t b = k * REDUCE_CHUNK, e = b + REDUCE_CHUNK < n ? b + REDUCE_CHUNK : n;
        for (int32_t i = 1; i < r->n; i++) {
            const float *gi = sy_plan_gradients(r->plans[i], NULL);
            for (int64_t j = b; j < e; j++) g0[j] += gi[j];
        }
        for (int64_t j = b; j < e; j++) g0[j] *= inv;
    }
}

/* Phase 3: thread t's share of the optimizer's update steps. */
static void update(run_ctx *c, int t) {
    sy_plan *p = c->r->plans[0];
    int32_t first = plan_first_update(p), n = plan_step_count(p) - first;
    for (int32_t k = 0; k < n && !failed(c); k++) {
        if (c->r->update_owner[k] != t) continue;
        sy_status st = plan_run_steps(p, first + k, first + k + 1);
        if (st) fail(c, st);
    }
}

static void region(void *arg, int t, int count) {
    (void)count;
    run_ctx *c = arg;
    replica_set *r = c->r;
    for (int64_t step = 0; step < c->steps; step++) {
        forward_backward(c, step, t);
        if (!c->train) continue; /* replicas are independent: no barrier */
        sy_barrier_wait(&c->barrier);
        if (!failed(c)) {
            if (r->n > 1) all_reduce(c, t);
            /* every replica has taken this step's iteration count (phase 1),
             * and the update steps use plans[0]'s: count it now */
            if (t == 0) sy_plan_vars(r->plans[0])->iterations++;
        }
        sy_barrier_wait(&c->barrier);
        if (plan_has_before_update(r->plans[0])) { /* issue 17: clipping and weight decay see the mean gradients */
            if (t == 0 && !failed(c)) plan_before_update(r->plans[0]);
            sy_barrier_wait(&c->barrier);
        }
        if (!failed(c)) update(c, t);
        sy_barrier_wait(&c->barrier);
    }
}

static sy_status run(replica_set *r, int64_t steps, bool train, replica_fn feed, replica_fn read, void *user) {
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.steps = steps;
    c.train = train;
    c.feed = feed;
    c.read = read;
    c.user = user;
    atomic_init(&c.failed, 0);
    sy_status st = sy_barrier_init(&c.barrier, r->strategy->threads);
    if (st) return st;
    sy_pool_run(r->strategy->region, region, &c, r->strategy->threads);
    sy_barrier_destroy(&c.barrier);
    if (failed(&c)) return sy_error(c.status, "%s", c.error);
    return SY_OK;
}

sy_status replicas_train(replica_set *r, int64_t steps, replica_fn feed, replica_fn read, void *ctx) {
    return run(r, steps, true, feed, read, ctx);
}

sy_status replicas_infer(replica_set *r, int64_t steps, replica_fn feed, replica_fn read, void *ctx) {
    return run(r, steps, false, feed, read, ctx);
}
