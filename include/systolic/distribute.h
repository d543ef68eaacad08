/*
 * systolic/distribute.h - the cluster resolver and the replica strategy:
 * TPUStrategy's semantics on the cores of this machine.
 *
 *   sy_cluster *c;
 *   sy_cluster_resolve("cpu:8", &c);         // NULL: $SYSTOLIC_TPU, else "local"
 *   sy_strategy *s;
 *   sy_strategy_new(c, &s);
 *   sy_strategy_scope_enter(s);              // with strategy.scope():
 *   ... sy_model_new, sy_model_add, sy_model_compile ...
 *   sy_strategy_scope_exit(s);
 *   ... sy_model_fit: each step, 8 replicas run on 125 rows each ...
 *
 * A strategy runs one replica of the compiled step per device. Each step,
 * the global batch is split into equal shards, one per replica; the
 * replicas run forward and backward concurrently, each on its own copy of
 * the plan's buffers; their gradients are averaged in replica order (the
 * same bits whatever the thread count or scheduling); one optimizer update
 * then changes the shared weights (CrossShardOptimizer semantics). The
 * replicas run on the strategy's threads, one per core at most; more
 * replicas than cores take turns, and fewer get the spare cores for their
 * kernels.
 */
#ifndef SYSTOLIC_DISTRIBUTE_H
#define SYSTOLIC_DISTRIBUTE_H

#include "systolic/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the cluster resolver ---------------------------------------------------------- */

typedef enum sy_device_kind {
    SY_DEVICE_CPU = 0,
    SY_DEVICE_SIM /* a core of an emulated TPU chip (issue 16): the sim backend, its chip's figures */
} sy_device_kind;

typedef struct sy_tpu_chip sy_tpu_chip; /* systolic/tpu.h */

typedef struct sy_device {
    char name[64];       /* "/job:localhost/replica:0/task:0/device:CPU:3" */
    sy_device_kind kind;
    int32_t replica;     /* its index among the replicas in sync */
    const sy_tpu_chip *chip; /* SY_DEVICE_SIM: the chip it is a core of; NULL otherwise */
} sy_device;

typedef struct sy_cluster sy_cluster;

/* Resolve a device spec (the role of TPUClusterResolver):
 *   local    every core of this machine, one replica each (and the GPUs,
 *            once a GPU backend is built in);
 *   cpu      the same on the CPU alone;
 *   cpu:N    N replicas on the CPU, 1 <= N <= 1024 (N may exceed the cores);
 *   sim:vX-N an emulated Cloud TPU slice (issue 16), named as Cloud TPU's
 *            accelerator types are: chip vX (v2, v3, v4; systolic/tpu.h),
 *            N TensorCores. A replica per core (v2, v3), per chip (v4's
 *            megacore): sim:v3-8 has 8, sim:v3-32 32, sim:v4-8 4. Its
 *            devices are SY_DEVICE_SIM with their chip; slices Cloud TPU
 *            does not offer (sim:v3-7) are refused with those it does.
 * spec NULL or "" falls back to $SYSTOLIC_TPU, then to "local". Unknown or
 * malformed specs (SY_ERR_INVALID_ARGUMENT) and device kinds this build
 * lacks (gpu, tpu: SY_ERR_UNSUPPORTED) are refused with the known forms. */
sy_status sy_cluster_resolve(const char *spec, sy_cluster **out);
void sy_cluster_free(sy_cluster *c);
const char *sy_cluster_spec(const sy_cluster *c); /* as resolved, e.g. "cpu:8" */
int32_t sy_cluster_device_count(const sy_cluster *c);
const sy_device *sy_cluster_device(const sy_cluster *c, int32_t index);
int32_t sy_cluster_host_cores(const sy_cluster *c);
int64_t sy_cluster_host_memory(const sy_cluster *c); /* bytes */

/* ---- the strategy --------------------------------------------------------------------- */

typedef struct sy_strategy sy_strategy;

/* A strategy over the cluster's devices, with its threads. The cluster may
 * be freed afterwards. Free the models that use it first. */
sy_status sy_strategy_new(const sy_cluster *cluster, sy_strategy **out);
void sy_strategy_free(sy_strategy *s);
int32_t sy_strategy_num_replicas_in_sync(const sy_strategy *s);
/* Threads the strategy runs its replicas on (at most the host's cores). */
int32_t sy_strategy_threads(const sy_strategy *s);
/* issue 16, sim devices: the emulated chip the replicas run on, NULL on
 * the CPU. Its plans run the sim backend's kernels (the MXU's numerics;
 * a "ref" backend asked for stays ref), and a plan whose weights,
 * optimizer slots, gradients and activations exceed a replica's share of
 * the chip's HBM is refused when compiled (SY_ERR_OUT_OF_MEMORY), naming
 * each size. */
const sy_tpu_chip *sy_strategy_chip(const sy_strategy *s);

/* Keras's `with strategy.scope():` on this thread: models created between
 * enter and exit use the strategy. Scopes nest; NULL for none. */
void sy_strategy_scope_enter(sy_strategy *s);
void sy_strategy_scope_exit(sy_strategy *s);
sy_strategy *sy_strategy_current(void);

#ifdef __cplusplus
}
#endif
#endif
