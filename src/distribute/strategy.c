/*
 * strategy.c - the replica strategy's threads, and its scope.
 *
 * R replicas on C cores: the replicas run on a region pool of T = min(R, C)
 * threads, thread t taking replicas t, t + T, t + 2T, ... When R < C the
 * spare cores go to the replicas' kernels: each replica gets a kernel pool
 * of C / R threads (its region thread is thread 0 of it), since a replica
 * would otherwise leave cores idle (DESIGN.md §5). With R >= C every
 * kernel runs on the one thread of its replica.
 */
#include "distribute_internal.h"

#include <string.h>

void sy_strategy_free(sy_strategy *s) {
    if (!s) return;
    if (s->kernel_pools)
        for (int32_t i = 0; i < s->replicas; i++) sy_pool_free(s->kernel_pools[i]);
    sy_free(s->kernel_pools);
    sy_pool_free(s->region);
    sy_free(s);
}

sy_status strategy_new(int32_t replicas, int32_t cores, sy_strategy **out) {
    *out = NULL;
    if (replicas < 1 || cores < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "strategy: %d replicas on %d cores", replicas, cores);
    sy_strategy *s = sy_calloc(1, sizeof *s);
    if (!s) return sy_error(SY_ERR_OUT_OF_MEMORY, "strategy: out of memory");
    s->replicas = replicas;
    s->threads = replicas < cores ? replicas : cores;
    s->kernel_threads = replicas < cores ? cores / replicas : 1;
    sy_status st = sy_pool_new(s->threads, &s->region);
    if (st == SY_OK && s->kernel_threads > 1) {
        s->kernel_pools = sy_calloc((size_t)replicas, sizeof *s->kernel_pools);
        if (!s->kernel_pools) st = sy_error(SY_ERR_OUT_OF_MEMORY, "strategy: out of memory");
        for (int32_t i = 0; st == SY_OK && i < replicas; i++) st = sy_pool_new(s->kernel_threads, &s->kernel_pools[i]);
    }
    if (st) {
        sy_strategy_free(s);
        return st;
    }
    *out = s;
    return SY_OK;
}

sy_status sy_strategy_new(const sy_cluster *cluster, sy_strategy **out) {
    sy_status st = strategy_new(sy_cluster_device_count(cluster), sy_cluster_host_cores(cluster), out);
    if (st == SY_OK) (*out)->chip = sy_cluster_device(cluster, 0)->chip; /* one kind per cluster */
    return st;
}

int32_t sy_strategy_num_replicas_in_sync(const sy_strategy *s) { return s->replicas; }
int32_t sy_strategy_threads(const sy_strategy *s) { return s->threads; }
const sy_tpu_chip *sy_strategy_chip(const sy_strategy *s) { return s ? s->chip : NULL; }

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
    return scope_depth <= MAX_SCOPE_DEPTH ? scope_stack[scope_depth - 1] : scope_stack[MAX_SCOPE_DEPTH - 1];
}
