/*
 * strategy.c - the replica strategy's threads, and its scope.
 *
 * R replicas on C cores: the replicas run on a region pool of T = min(R, C)
 * threads, thread t taking replicas t, t + T, t + 2T, ... When R < C the
 * spare cores go to the replicas' kernels: each replica gets a kernel pool
 * of C / R threads (its region thread is thread 0 of it), since a replica
 * would otherwise leave cores idle (DESIGN.md §5). With R >= C every
 * kernel runs on the one thread of its replica.
 *
 * issue 20: on several hosts (MPI ranks) R is every host's replicas and
 * the threads and kernel pools are sized by this host's share of them.
 */
#include "distribute_internal.h"
#include "systolic/tpu.h"

#include <string.h>

void sy_strategy_free(sy_strategy *s) {
    if (!s) return;
    if (s->kernel_pools)
        for (int32_t i = 0; i < s->local; i++) sy_pool_free(s->kernel_pools[i]);
    sy_free(s->kernel_pools);
    sy_pool_free(s->region);
    sy_free(s->host_first);
    sy_free(s);
}

/* per_host[h] replicas on each of `hosts` hosts, this one `host` with `cores` cores. */
static sy_status make(const int32_t *per_host, int32_t hosts, int32_t host, int32_t cores,
                      sy_strategy **out) {
    *out = NULL;
    sy_strategy *s = sy_calloc(1, sizeof *s);
    if (s) s->host_first = sy_calloc((size_t)hosts + 1, sizeof *s->host_first);
    if (!s || !s->host_first) {
        sy_free(s);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "strategy: out of memory");
    }
    for (int32_t h = 0; h < hosts; h++) s->host_first[h + 1] = s->host_first[h] + per_host[h];
    s->hosts = hosts;
    s->host = host;
    s->replicas = s->host_first[hosts];
    s->first = s->host_first[host];
    s->local = per_host[host];
    int32_t local = s->local;
    s->threads = local < cores ? local : cores;
    s->kernel_threads = local < cores ? cores / local : 1;
    sy_status st = sy_pool_new(s->threads, &s->region);
    if (st == SY_OK && s->kernel_threads > 1) {
        s->kernel_pools = sy_calloc((size_t)local, sizeof *s->kernel_pools);
        if (!s->kernel_pools) st = sy_error(SY_ERR_OUT_OF_MEMORY, "strategy: out of memory");
        for (int32_t i = 0; st == SY_OK && i < local; i++)
            st = sy_pool_new(s->kernel_threads, &s->kernel_pools[i]);
    }
    if (st) {
        sy_strategy_free(s);
        return st;
    }
    *out = s;
    return SY_OK;
}

sy_status strategy_new(int32_t replicas, int32_t cores, sy_strategy **out) {
    *out = NULL;
    if (replicas < 1 || cores < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "strategy: %d replicas on %d cores", replicas,
                        cores);
    return make(&replicas, 1, 0, cores, out);
}

sy_status sy_strategy_new(const sy_cluster *cluster, sy_strategy **out) {
    const sy_device *d0 = sy_cluster_device(cluster, 0);
    if (d0 && d0->chip && d0->chip->inference_only) { /* issue 18 */
        *out = NULL;
        return sy_error(SY_ERR_UNSUPPORTED,
                        "device spec '%s': the TPU v1 runs int8 inference programs, not Keras models' steps; run an "
                        "int8 .tflite model on it with `systolic predict|evaluate MODEL.tflite --tpu sim:v1` "
                        "(sy_lite_model_set_device) or `systolic profile MODEL.tflite --tpu sim:v1`",
                        sy_cluster_spec(cluster));
    }
    int32_t hosts = sy_cluster_hosts(cluster), n = sy_cluster_device_count(cluster);
    int32_t *per_host = sy_calloc((size_t)hosts, sizeof *per_host);
    if (!per_host) return sy_error(SY_ERR_OUT_OF_MEMORY, "strategy: out of memory");
    for (int32_t i = 0; i < n; i++)
        per_host[sy_cluster_device(cluster, i)->host]++; /* numbered host by host */
    sy_status st =
        make(per_host, hosts, cluster_this_host(cluster), sy_cluster_host_cores(cluster), out);
    sy_free(per_host);
    if (st == SY_OK) (*out)->chip = sy_cluster_device(cluster, 0)->chip; /* one kind per cluster */
    return st;
}

sy_status strategy_agree(const sy_strategy *s, sy_status st) {
    return s && s->hosts > 1 ? mpi_agree(st, 0, NULL, NULL) : st;
}

sy_status strategy_bcast(const sy_strategy *s, void *buf, int64_t bytes, const char *what) {
    return s && s->hosts > 1 ? mpi_bcast(buf, bytes, 0, what) : SY_OK;
}

sy_status strategy_check_same(const sy_strategy *s, const char *what, const strategy_field *fields,
                              int32_t n) {
    return s && s->hosts > 1 ? mpi_check_same(what, fields, n) : SY_OK;
}

int32_t strategy_host_of(const sy_strategy *s, int32_t replica) {
    int32_t h = 0;
    while (h + 1 < s->hosts && replica >= s->host_first[h + 1]) h++;
    return h;
}

int32_t sy_strategy_num_replicas_in_sync(const sy_strategy *s) {
    return s->replicas;
}
int32_t sy_strategy_local_replicas(const sy_strategy *s) {
    return s->local;
}
int32_t sy_strategy_hosts(const sy_strategy *s) {
    return s->hosts;
}
int32_t sy_strategy_host(const sy_strategy *s) {
    return s->host;
}
int32_t sy_strategy_threads(const sy_strategy *s) {
    return s->threads;
}
const sy_tpu_chip *sy_strategy_chip(const sy_strategy *s) {
    return s ? s->chip : NULL;
}

/* ---- scope ----------------------------------------------------------------------- */

#define MAX_SCOPE_DEPTH 16
static _Thread_local sy_strategy *scope_stack[MAX_SCOPE_DEPTH];
static _Thread_local int scope_depth;

void sy_strategy_scope_enter(sy_strategy *s) {
    if (scope_depth < MAX_SCOPE_DEPTH) scope_stack[scope_depth] = s;
    scope_depth++;
}

void sy_strategy_scope_exit(sy_strategy *s) {
    (void)s;
    if (scope_depth > 0) scope_depth--;
}

sy_strategy *sy_strategy_current(void) {
    if (scope_depth == 0) return NULL;
    return scope_depth <= MAX_SCOPE_DEPTH ? scope_stack[scope_depth - 1]
                                          : scope_stack[MAX_SCOPE_DEPTH - 1];
}
