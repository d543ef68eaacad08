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
    int32_t replicas; /* in sync: every host's */
    int32_t local;    /* issue 20: this host's, replicas first .. first + local - 1 */
    int32_t first;
    int32_t hosts, host; /* issue 20: MPI ranks, and this one (1 and 0 on one host) */
    int32_t
        *host_first; /* (hosts + 1): host h runs replicas host_first[h] .. host_first[h + 1] - 1 */
    int32_t threads; /* region threads: min(local, cores) */
    int32_t kernel_threads;  /* per replica: cores / local when fewer replicas than cores, else 1 */
    sy_pool *region;         /* runs the replicas */
    sy_pool **kernel_pools;  /* per replica when kernel_threads > 1, else NULL */
    const sy_tpu_chip *chip; /* issue 16: sim devices' chip; NULL on the CPU */
};

/* A strategy of `replicas` replicas on `cores` cores (the default strategy
 * of a model built outside any scope is 1 replica on all cores). */
sy_status strategy_new(int32_t replicas, int32_t cores, sy_strategy **out);

/* issue 20: the host (MPI rank) this process is in the cluster, 0 on one. */
int32_t cluster_this_host(const sy_cluster *c);

/* issue 20: the first failing host's status and message on every host
 * ("rank R of H (host N): ..."), st itself on one; after a step only one
 * host could fail (the chief's checkpoint, a host's input). */
sy_status strategy_agree(const sy_strategy *s, sy_status st);
/* issue 20: bytes of buf from the chief (host 0) to every host; a no-op on one. */
sy_status strategy_bcast(const sy_strategy *s, void *buf, int64_t bytes, const char *what);
/* The host that runs global replica i. */
int32_t strategy_host_of(const sy_strategy *s, int32_t replica);

/* issue 20: what the hosts of a run must have alike (a model's seed, the
 * batch size), by name, as text. */
typedef struct strategy_field {
    char name[32];
    char value[96];
} strategy_field;
/* SY_ERR_INVALID_ARGUMENT on every host, naming the first host whose
 * fields differ from host 0's and how, unless all are alike; SY_OK on one
 * host. A collective call. */
sy_status strategy_check_same(const sy_strategy *s, const char *what, const strategy_field *fields,
                              int32_t n);

/* ---- MPI (issue 20, mpi.c) ------------------------------------------------------------- */

/* One rank's record, gathered from every rank when it joins the job. */
typedef struct mpi_host {
    char name[64];    /* its node's (gethostname) */
    int32_t replicas; /* the replicas it runs */
    int32_t cores;
    int64_t memory; /* bytes */
    int64_t pid;
    uint64_t build; /* a hash of its executable */
} mpi_host;

bool mpi_built_in(void);
/* Join the job (starting MPI the first time; a collective call): *hosts
 * becomes every rank's record (sy_free it), mine giving this one's
 * replicas, cores and memory. Ranks of different builds are refused. */
sy_status mpi_join(const mpi_host *mine, mpi_host **hosts, int32_t *rank, int32_t *size);
/* Every rank's st becomes the lowest failing rank's (status and message,
 * "rank R of H (host N): ..."); *lo and *hi (each may be NULL) the least
 * and greatest v of any rank. A collective call. */
sy_status mpi_agree(sy_status st, int64_t v, int64_t *lo, int64_t *hi);
/* Every rank's bytes[rank] bytes from `mine`, one after another in rank
 * order, into `all`. */
sy_status mpi_allgatherv(const void *mine, void *all, const int64_t *bytes, const char *what);
sy_status mpi_bcast(void *buf, int64_t bytes, int32_t root, const char *what);
sy_status mpi_check_same(const char *what, const strategy_field *fields, int32_t n);

/* The chain of the all-reduce across hosts (replicas.c): per reduction,
 * start; then for each block b (of `block` floats; n in all) wait for the
 * partial sum of the hosts before this one (NULL on the first) and, once
 * this host's sum (or the last host's mean) of the block is in place, pass
 * it on; finish leaves the last host's result in g (n) on every host. */
typedef struct mpi_chain mpi_chain;
/* The block replicas.c passes: 1 MiB (bench/bench_allreduce.c --block
 * measures others; smaller blocks pay MPI's per-message cost more often) */
#define CHAIN_BLOCK (1 << 18) /* floats */
sy_status mpi_chain_new(int64_t n, int64_t block, mpi_chain **out);
void mpi_chain_free(mpi_chain *c);
sy_status mpi_chain_start(mpi_chain *c);
sy_status mpi_chain_partial(mpi_chain *c, int64_t b, const float **partial);
sy_status mpi_chain_pass(mpi_chain *c, int64_t b, const float *block);
sy_status mpi_chain_finish(mpi_chain *c, float *g);

typedef struct replica_set {
    sy_strategy *strategy;
    int32_t n; /* this host's replicas (issue 20); plans[i] is global replica strategy->first + i */
    sy_plan **plans;
    sy_plan *tpu; /* issue 16: on an emulated chip, the step as the TPU runs it (tpu_view), for the cost model */
    int32_t *update_owner; /* per update step of plans[0]: the region thread that runs it */
    mpi_chain
        *chain; /* issue 20: the all-reduce across hosts (training on several hosts), else NULL */
} replica_set;

/* Compile one plan per replica from g with options o (the strategy sets
 * each plan's pool, threads and random stream). With an optimizer, the
 * replicas' gradient blocks must have one layout (checked). */
sy_status replicas_compile(sy_strategy *s, const sy_graph *g, const sy_plan_options *o,
                           replica_set **out);
void replicas_free(replica_set *r);

/* Callbacks from the replica threads, for replica `replica` of step `step`
 * (0-based within the call): fill the plan's inputs with its shard, and read
 * its outputs. Calls for different replicas run concurrently. On several
 * hosts (issue 20) `replica` is the global index, and only this host's
 * replicas are called. */
typedef void (*replica_fn)(void *ctx, int64_t step, int32_t replica, sy_plan *plan);

/* `steps` training steps in one host round trip: each step, every replica
 * is fed and runs forward and backward; then the gradients are averaged in
 * replica order and one optimizer update runs (counted as one iteration). */
sy_status replicas_train(replica_set *r, int64_t steps, replica_fn feed, replica_fn read,
                         void *ctx);
/* `steps` forward-only steps (evaluate, predict). On several hosts both
 * return the first failing host's error on every host (strategy_agree). */
sy_status replicas_infer(replica_set *r, int64_t steps, replica_fn feed, replica_fn read,
                         void *ctx);

/* ---- several hosts (issue 20; each a no-op on one) --------------------------------- */

/* Before a host round trip: st (this host's input) agreed as by
 * strategy_agree, and *steps the least (or, with most, the greatest) any
 * host has fed: a host whose data ends first ends training for all; in
 * evaluate and predict the others pad. */
sy_status replicas_agree_steps(const replica_set *r, sy_status st, int64_t *steps, bool most);
/* records (steps, every replica) of `size` bytes, each host having written
 * those of its replicas: afterwards every host holds all of them. */
sy_status replicas_share(const replica_set *r, void *records, size_t size, int64_t steps);
/* rows (n, row bytes) of predictions over batches of `per` rows a replica,
 * each host having written those its replicas ran: afterwards every host
 * holds all of them. */
sy_status replicas_share_rows(const replica_set *r, void *rows, size_t row, int64_t n, int64_t per);
/* Every host's n rows of `row` bytes, from a dataset sharded by host as
 * tf.data's shard(hosts, host) deals (element i to host i % hosts), back
 * in the order of the whole: *all (sy_malloc'd, *n_all rows). */
sy_status replicas_gather_dealt(const replica_set *r, const void *rows, size_t row, int64_t n,
                                void **all, int64_t *n_all);

#endif
