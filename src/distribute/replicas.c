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
 *
 * issue 20, TPU Pods: on several hosts each runs its own replicas (global
 * indices first .. first + n - 1, each plan seeded by its global index) and
 * phase 2 becomes hierarchical: block by block (CHAIN_BLOCK floats), thread
 * 0 takes the sum of the hosts before this one from the chain (mpi.c), the
 * threads add it and then this host's replicas in replica order -- the very
 * additions, in the very order, one process with every replica makes --
 * the last host scales by 1/R, and thread 0 passes the block on; the mean
 * comes back down the chain into replica 0's block on every host. Each
 * host then runs the same update on the same bits. A host that failed in
 * phase 1 still passes its blocks along, so no host waits forever, and at
 * the round trip's end every host returns the first failing host's error.
 * Hosts that feed shards to replicas they do not run never need them, so
 * the caller shares the outputs read (replicas_share) when it needs them.
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
    sy_plan_free(r->tpu);
    sy_free(r->update_owner);
    mpi_chain_free(r->chain);
    sy_free(r);
}

/* Spread the update steps over the threads by size (largest first, each to
 * the least loaded thread): fixed by the shapes, so always the same split. */
static sy_status assign_updates(replica_set *r) {
    sy_plan *p = r->plans[0];
    int32_t first = plan_first_update(p), n = plan_step_count(p) - first,
            threads = r->strategy->threads;
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
            if (!done[i] &&
                (big < 0 || plan_step_elements(p, first + i) > plan_step_elements(p, first + big)))
                big = i;
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

sy_status replicas_compile(sy_strategy *s, const sy_graph *g, const sy_plan_options *o,
                           replica_set **out) {
    *out = NULL;
    replica_set *r = sy_calloc(1, sizeof *r);
    if (r) r->plans = sy_calloc((size_t)s->replicas, sizeof *r->plans);
    if (!r || !r->plans) {
        sy_free(r);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "replicas: out of memory");
    }
    r->strategy = s;
    r->n = s->local;
    sy_status st = SY_OK;
    /* issue 16, sim devices: an emulated chip's replicas run the sim
     * kernels (the reference kernels stay, for tests), and each must fit in
     * its core's share of the chip's HBM -- checked on the TPU's view of
     * the step (below), before any replica's plan is compiled. */
    sy_plan_options so = *o;
    char hbm_name[64];
    if (s->chip) {
        if (!so.backend || !strcmp(so.backend, "cpu")) so.backend = "sim";
        so.device_memory = (int64_t)(s->chip->hbm_bytes / s->chip->replicas);
        snprintf(hbm_name, sizeof hbm_name, "a TPU %s %s's HBM", s->chip->name,
                 s->chip->replicas > 1 ? "core" : "chip");
        so.device_memory_name = hbm_name;
        o = &so;
    }
    /* On the emulated TPU the step as the TPU runs it -- what the cost model reads and the HBM holds --
     * is a plan of its own (tpu_view), compiled first: the host plans below fuse what the sim kernels
     * fuse, which the cost model does not assume of XLA (docs/design/tpu-cost-model.md, section 3). */
    if (so.backend && !strcmp(so.backend, "sim")) {
        sy_plan_options to = so;
        to.tpu_view = true;
        to.pool = NULL;
        st = sy_plan_compile(g, &to, &r->tpu);
        so.device_memory = 0; /* checked on the TPU's view */
        o = &so;
    }
    for (int32_t i = 0; i < r->n && st == SY_OK; i++) {
        sy_plan_options ro = *o;
        ro.pool = s->kernel_pools ? s->kernel_pools[i] : NULL;
        ro.threads = s->kernel_threads;
        /* each replica's own stream, by its index among every host's replicas */
        ro.seed = sy_mix64(o->seed ^ sy_mix64(0x5EB1CA00ull + (uint64_t)(s->first + i)));
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
        if (st == SY_OK && s->hosts > 1)
            st = mpi_chain_new((int64_t)(b0 / sizeof(float)), CHAIN_BLOCK, &r->chain);
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
    const float
        *partial;      /* issue 20: the chain's block being added, from the hosts before this one */
    bool chain_broken; /* issue 20: thread 0's: MPI failed, so it stops calling it */
} run_ctx;

static void fail(run_ctx *c, sy_status st);

static void fail(run_ctx *c, sy_status st) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&c->failed, &expected, 1)) {
        c->status = st;
        snprintf(c->error, sizeof c->error, "%s", sy_last_error());
    }
}

static bool failed(run_ctx *c) {
    return atomic_load_explicit(&c->failed, memory_order_acquire) != 0;
}

/* Phase 1 for the replicas of thread t. */
static void forward_backward(run_ctx *c, int64_t step, int t) {
    replica_set *r = c->r;
    for (int32_t i = t; i < r->n && !failed(c); i += r->strategy->threads) {
        sy_plan *p = r->plans[i];
        int32_t global = r->strategy->first + i;
        c->feed(c->user, step, global, p);
        plan_prepare(p);
        sy_status st = plan_run_steps(p, 0, c->train ? plan_first_update(p) : plan_step_count(p));
        if (st) {
            fail(c, st);
            return;
        }
        c->read(c->user, step, global, p);
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

/* Thread 0's turn at the chain: unless it broke (MPI itself failed, a host
 * was lost: then this host stops talking to MPI and the caller ends the
 * job), a host takes part whether its replicas failed or not, so that no
 * other host waits for it. */
static void chain_call(run_ctx *c, sy_status st) {
    if (st) {
        c->chain_broken = true;
        fail(c, st);
    }
}

/* issue 20, phase 2 on several hosts: block by block along the chain (the
 * elements of the block in hand split among the threads as on one host);
 * thread 0 then counts the step. */
static void all_reduce_hosts(run_ctx *c, int t) {
    replica_set *r = c->r;
    const sy_strategy *s = r->strategy;
    size_t bytes;
    float *g0 = sy_plan_gradients(r->plans[0], &bytes);
    int64_t n = (int64_t)(bytes / sizeof(float)), blocks = (n + CHAIN_BLOCK - 1) / CHAIN_BLOCK;
    bool last = s->host == s->hosts - 1;
    float inv = 1.0f / (float)s->replicas;
    if (t == 0 && !c->chain_broken) chain_call(c, mpi_chain_start(r->chain));
    for (int64_t blk = 0; blk < blocks; blk++) {
        if (t == 0) {
            c->partial = NULL;
            if (!c->chain_broken) chain_call(c, mpi_chain_partial(r->chain, blk, &c->partial));
        }
        sy_barrier_wait(&c->barrier);
        int64_t first = blk * CHAIN_BLOCK, end = first + CHAIN_BLOCK < n ? first + CHAIN_BLOCK : n;
        int64_t chunks = (end - first + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
        for (int64_t k = t; k < chunks && !failed(c); k += s->threads) {
            int64_t b = first + k * REDUCE_CHUNK,
                    e = b + REDUCE_CHUNK < end ? b + REDUCE_CHUNK : end;
            /* the hosts before this one, then this host's replicas in order: one process's sum */
            if (c->partial)
                for (int64_t j = b; j < e; j++) g0[j] = c->partial[j - first] + g0[j];
            for (int32_t i = 1; i < r->n; i++) {
                const float *gi = sy_plan_gradients(r->plans[i], NULL);
                for (int64_t j = b; j < e; j++) g0[j] += gi[j];
            }
            if (last)
                for (int64_t j = b; j < e; j++) g0[j] *= inv;
        }
        sy_barrier_wait(&c->barrier);
        if (t == 0 && !c->chain_broken) chain_call(c, mpi_chain_pass(r->chain, blk, g0 + first));
    }
    if (t == 0 && !c->chain_broken) chain_call(c, mpi_chain_finish(r->chain, g0));
    if (t == 0 && !failed(c)) sy_plan_vars(r->plans[0])->iterations++; /* as on one host, below */
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
        if (r->chain) { /* issue 20: several hosts; all of them take part, failed or not */
            all_reduce_hosts(c, t);
        } else if (!failed(c)) {
            if (r->n > 1) all_reduce(c, t);
            /* every replica has taken this step's iteration count (phase 1),
             * and the update steps use plans[0]'s: count it now */
            if (t == 0) sy_plan_vars(r->plans[0])->iterations++;
        }
        sy_barrier_wait(&c->barrier);
        if (plan_has_before_update(
                r->plans[0])) { /* issue 17: clipping and weight decay see the mean gradients */
            if (t == 0 && !failed(c)) plan_before_update(r->plans[0]);
            sy_barrier_wait(&c->barrier);
        }
        if (!failed(c)) update(c, t);
        sy_barrier_wait(&c->barrier);
    }
}

static sy_status run(replica_set *r, int64_t steps, bool train, replica_fn feed, replica_fn read,
                     void *user) {
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
    if (failed(&c)) st = sy_error(c.status, "%s", c.error);
    if (c.chain_broken)
        return st; /* a host is lost: no agreeing with it (the caller ends the job) */
    return strategy_agree(r->strategy,
                          st); /* issue 20: every host, the first failing host's error */
}

sy_status replicas_train(replica_set *r, int64_t steps, replica_fn feed, replica_fn read,
                         void *ctx) {
    return run(r, steps, true, feed, read, ctx);
}

sy_status replicas_infer(replica_set *r, int64_t steps, replica_fn feed, replica_fn read,
                         void *ctx) {
    return run(r, steps, false, feed, read, ctx);
}

/* ---- several hosts (issue 20) -------------------------------------------------------------- */

sy_status replicas_agree_steps(const replica_set *r, sy_status st, int64_t *steps, bool most) {
    const sy_strategy *s = r->strategy;
    if (s->hosts < 2) return st;
    int64_t lo, hi;
    st = mpi_agree(st, *steps, &lo, &hi);
    *steps = most ? hi : lo;
    return st;
}

/* Bytes each host contributes when each contributes `per_replica` bytes for each of its replicas.
 */
static sy_status host_bytes(const sy_strategy *s, int64_t per_replica, int64_t **out) {
    int64_t *b = sy_malloc((size_t)s->hosts * sizeof *b);
    if (!b) return sy_error(SY_ERR_OUT_OF_MEMORY, "sharing across hosts: out of memory");
    for (int32_t h = 0; h < s->hosts; h++)
        b[h] = per_replica * (s->host_first[h + 1] - s->host_first[h]);
    *out = b;
    return SY_OK;
}

sy_status replicas_share(const replica_set *r, void *records, size_t size, int64_t steps) {
    const sy_strategy *s = r->strategy;
    if (s->hosts < 2 || steps == 0) return SY_OK;
    const char *what = "sharing the replicas' losses and metrics across hosts";
    int64_t *bytes = NULL;
    sy_status st = host_bytes(s, steps * (int64_t)size, &bytes);
    if (st) return st;
    /* (steps, replicas) -> per host (steps, its replicas), and back */
    char *mine = sy_malloc((size_t)bytes[s->host] + 1),
         *all = sy_malloc((size_t)steps * s->replicas * size + 1);
    if (!mine || !all) st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    char *rec = records;
    for (int64_t k = 0; !st && k < steps; k++)
        memcpy(mine + (size_t)(k * s->local) * size,
               rec + (size_t)(k * s->replicas + s->first) * size, (size_t)s->local * size);
    if (!st) st = mpi_allgatherv(mine, all, bytes, what);
    for (int32_t h = 0, at = 0; !st && h < s->hosts; h++) {
        int32_t f = s->host_first[h], n = s->host_first[h + 1] - f;
        for (int64_t k = 0; k < steps; k++, at += n)
            memcpy(rec + (size_t)(k * s->replicas + f) * size, all + (size_t)at * size,
                   (size_t)n * size);
    }
    sy_free(bytes);
    sy_free(mine);
    sy_free(all);
    return st;
}

sy_status replicas_share_rows(const replica_set *r, void *rows, size_t row, int64_t n,
                              int64_t per) {
    const sy_strategy *s = r->strategy;
    if (s->hosts < 2 || n == 0) return SY_OK;
    const char *what = "sharing the predictions across hosts";
    /* row i ran on replica (i % global) / per: hosts own runs of rows, in batch order */
    int64_t global = per * s->replicas;
    int64_t *bytes = sy_calloc((size_t)s->hosts, sizeof *bytes);
    char *mine = sy_malloc((size_t)n * row), *all = sy_malloc((size_t)n * row);
    sy_status st = SY_OK;
    if (!bytes || !mine || !all) st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    char *src = rows;
    for (int64_t i = 0; !st && i < n; i++) {
        int32_t h = strategy_host_of(s, (int32_t)((i % global) / per));
        if (h == s->host) memcpy(mine + bytes[h], src + (size_t)i * row, row);
        bytes[h] += (int64_t)row;
    }
    if (!st) st = mpi_allgatherv(mine, all, bytes, what);
    if (!st) {
        int64_t *at = sy_calloc((size_t)s->hosts + 1, sizeof *at);
        if (!at) st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        for (int32_t h = 0; !st && h < s->hosts; h++) at[h + 1] = at[h] + bytes[h];
        for (int64_t i = 0; !st && i < n; i++) {
            int32_t h = strategy_host_of(s, (int32_t)((i % global) / per));
            memcpy(src + (size_t)i * row, all + at[h], row);
            at[h] += (int64_t)row;
        }
        sy_free(at);
    }
    sy_free(bytes);
    sy_free(mine);
    sy_free(all);
    return st;
}

sy_status replicas_gather_dealt(const replica_set *r, const void *rows, size_t row, int64_t n,
                                void **all, int64_t *n_all) {
    const sy_strategy *s = r->strategy;
    const char *what = "gathering the predictions of every host";
    *all = NULL;
    *n_all = 0;
    int64_t *counts = sy_calloc((size_t)s->hosts, sizeof *counts),
            *bytes = sy_calloc((size_t)s->hosts, sizeof *bytes);
    sy_status st =
        counts && bytes ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    int64_t mine = n, total = 0;
    for (int32_t h = 0; h < s->hosts; h++) bytes[h] = (int64_t)sizeof(int64_t);
    if (!st) st = mpi_allgatherv(&mine, counts, bytes, what);
    for (int32_t h = 0; !st && h < s->hosts; h++) {
        bytes[h] = counts[h] * (int64_t)row;
        total += counts[h];
    }
    /* shard(H, h) dealt element i to host i % H: host h's k-th is element k * H + h */
    for (int32_t h = 0; !st && h < s->hosts; h++)
        if (counts[h] != total / s->hosts + (h < total % s->hosts))
            st = sy_error(SY_ERR_INVALID_ARGUMENT,
                          "%s: host %d has %lld of %lld rows, not what a dataset dealt by host "
                          "(shard(%d, %d)) gives",
                          what, h, (long long)counts[h], (long long)total, s->hosts, h);
    char *gathered = NULL, *out = NULL;
    if (!st) {
        gathered = sy_malloc((size_t)total * row + 1);
        out = sy_malloc((size_t)total * row + 1);
        if (!gathered || !out)
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld rows", what,
                          (long long)total);
    }
    if (!st) st = mpi_allgatherv(rows, gathered, bytes, what);
    int64_t at = 0;
    for (int32_t h = 0; !st && h < s->hosts; at += counts[h], h++)
        for (int64_t k = 0; k < counts[h]; k++)
            memcpy(out + (size_t)(k * s->hosts + h) * row, gathered + (size_t)(at + k) * row, row);
    sy_free(counts);
    sy_free(bytes);
    sy_free(gathered);
    if (st) {
        sy_free(out);
        return st;
    }
    *all = out;
    *n_all = total;
    return SY_OK;
}
