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
 *
 * issue 20, TPU Pods: under mpirun, "mpi" (or "mpi:cpu:N") makes every MPI
 * rank a host of the job, with its own replicas; the replicas of all hosts
 * are one set in sync, numbered host by host. The gradients are summed
 * within each host and then along the hosts in rank order, so H hosts of N
 * replicas give bitwise the results of one process with H x N. Host 0 is
 * the chief: it alone prints fit's progress and writes its checkpoints.
 *
 *   mpirun -np 4 ./train       // each rank: sy_cluster_resolve("mpi:cpu:2", &c)
 *   ...                        // 8 replicas in sync; sy_cluster_rank() == 0 writes
 *   sy_cluster_shutdown();     // at the end of main, on every rank
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
    int32_t host;        /* issue 20: the MPI rank (TensorFlow's task) it runs on; 0 on one host */
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
 *   mpi      issue 20: every MPI rank of the job (mpirun -np H) a host,
 *            with one replica per core of its own; a collective call on
 *            every rank, which starts MPI the first time;
 *   mpi:cpu:N the same with N replicas on each host.
 * spec NULL or "" falls back to $SYSTOLIC_TPU, then to "local". Unknown or
 * malformed specs (SY_ERR_INVALID_ARGUMENT) and device kinds this build
 * lacks (gpu, tpu, and mpi without MPI built in: SY_ERR_UNSUPPORTED) are
 * refused with the known forms. Ranks running different builds of systolic
 * are refused (SY_ERR_INVALID_ARGUMENT), naming them. */
sy_status sy_cluster_resolve(const char *spec, sy_cluster **out);
void sy_cluster_free(sy_cluster *c);
const char *sy_cluster_spec(const sy_cluster *c); /* as resolved, e.g. "cpu:8" */
int32_t sy_cluster_device_count(const sy_cluster *c); /* every host's */
const sy_device *sy_cluster_device(const sy_cluster *c, int32_t index);
int32_t sy_cluster_host_cores(const sy_cluster *c);   /* this host's */
int64_t sy_cluster_host_memory(const sy_cluster *c); /* bytes */
/* issue 20: the hosts (MPI ranks) of the cluster, 1 without MPI; and host
 * h's name (its node's), cores and memory in bytes (h from 0 to hosts - 1). */
int32_t sy_cluster_hosts(const sy_cluster *c);
const char *sy_cluster_host_name(const sy_cluster *c, int32_t host);
int32_t sy_cluster_cores_of(const sy_cluster *c, int32_t host);
int64_t sy_cluster_memory_of(const sy_cluster *c, int32_t host);

/* ---- the job of processes (issue 20, MPI) ------------------------------------------ */

/* This process's rank in the MPI job once an "mpi" spec has been resolved
 * (0: the chief, which alone writes files and prints), and the number of
 * ranks; 0 and 1 otherwise. */
int32_t sy_cluster_rank(void);
int32_t sy_cluster_size(void);
/* Whether the last error (sy_last_error) is one every rank of the job
 * returned alike -- ranks that disagree at start-up, a failure on one rank
 * that the others were told of -- so that the chief alone reports it and
 * every rank may end normally (sy_cluster_shutdown). Any other error on a
 * job of several ranks leaves the others waiting: end the job with
 * sy_cluster_abort. */
bool sy_cluster_error_shared(void);
/* End MPI on this rank, on every rank at the end of main; with ok, after
 * every rank has got here (so none still waits for this one). A no-op
 * without MPI. Free every strategy first. */
void sy_cluster_shutdown(bool ok);
/* End the whole job now with exit status `status` (MPI_Abort), after an
 * error the other ranks do not share; a no-op without MPI. */
void sy_cluster_abort(int status);

/* ---- the strategy --------------------------------------------------------------------- */

typedef struct sy_strategy sy_strategy;

/* A strategy over the cluster's devices, with its threads. The cluster may
 * be freed afterwards. Free the models that use it first. */
sy_status sy_strategy_new(const sy_cluster *cluster, sy_strategy **out);
void sy_strategy_free(sy_strategy *s);
int32_t sy_strategy_num_replicas_in_sync(const sy_strategy *s); /* every host's */
/* issue 20: this host's replicas, the hosts (MPI ranks) and this one's index
 * (0: the chief); 1, 0 and the replicas in sync on one host. */
int32_t sy_strategy_local_replicas(const sy_strategy *s);
int32_t sy_strategy_hosts(const sy_strategy *s);
int32_t sy_strategy_host(const sy_strategy *s);
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
