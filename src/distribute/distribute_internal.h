/*
 * distribute_internal.h - what the keras module uses of distribute: a set
 * of replica plans compiled from one graph, and running them for a number
 * of steps per host round trip.
 */
#ifndef SY_DISTRIBUTE_INTERNAL_H
#define SY_DISTRIBUTE_INTERNAL_H

#include "systolic/distribute.h"
#include "../compiler/compiler_internal.h"

struct sy_strategy {
    int32_t replicas;
    int32_t threads;       /* region threads: min(replicas, cores) */
    int32_t kernel_threads; /* per replica: cores / replicas when fewer replicas than cores, else 1 */
    sy_pool *region;       /* runs the replicas */
    sy_pool **kernel_pools; /* per replica when kernel_threads > 1, else NULL */
    const sy_tpu_chip *chip; /* issue 16: sim devices' chip; NULL on the CPU */
};

/* A strategy of `replicas` replicas on `cores` cores (the default strategy
 * of a model built outside any scope is 1 replica on all cores). */
sy_status strategy_new(int32_t replicas, int32_t cores, sy_strategy **out);

typedef struct replica_set {
    sy_strategy *strategy;
    int32_t n;
    sy_plan **plans;
    int32_t *update_owner; /* per update step of plans[0]: the region thread that runs it */
} replica_set;

/* Compile one plan per replica from g with options o (the strategy sets
 * each plan's pool, threads and random stream). With an optimizer, the
 * replicas' gradient blocks must have one layout (checked). */
sy_status replicas_compile(sy_strategy *s, const sy_graph *g, const sy_plan_options *o, replica_set **out);
void replicas_free(replica_set *r);

/* Callbacks from the replica threads, for replica `replica` of step `step`
 * (0-based within the call): fill the plan's inputs with its shard, and read
 * its outputs. Calls for different replicas run concurrently. */
typedef void (*replica_fn)(void *ctx, int64_t step, int32_t replica, sy_plan *plan);

/* `steps` training steps in one host round trip: each step, every replica
 * is fed and runs forward and backward; then the gradients are averaged in
 * replica order and one optimizer update runs (counted as one iteration). */
sy_status replicas_train(replica_set *r, int64_t steps, replica_fn feed, replica_fn read, void *ctx);
/* `steps` forward-only steps (evaluate, predict). */
sy_status replicas_infer(replica_set *r, int64_t steps, replica_fn feed, replica_fn read, void *ctx);

#endif
