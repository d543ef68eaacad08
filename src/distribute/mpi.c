/*
 * mpi.c - processes as hosts of replicas (issue 20, TPU Pods): starting MPI,
 * the job's hosts, the few collectives the strategy needs, and the watchdog
 * that turns a lost rank into an error instead of a hang.
 *
 * Every rank that resolves an "mpi" spec joins the job: the first time, it
 * starts MPI (MPI_THREAD_MULTIPLE: the heartbeat below runs on a thread of
 * its own) and duplicates MPI_COMM_WORLD twice, one communicator for the
 * strategy's collectives and one for heartbeats, both returning errors
 * rather than aborting. Joining gathers every rank's record (its node's
 * name, pid, replicas, cores, memory, and a hash of its executable), so
 * the cluster can list every host's replicas, and ranks started from
 * different builds are refused at once: their kernels might round
 * differently, and the promise is bitwise one result.
 *
 * The collectives are built from MPI's non-blocking calls, each completed
 * by wait_all(), which polls them (yielding, then sleeping a little, so
 * that ranks sharing cores do not steal them from each other) and between
 * polls asks the watchdog whether a rank is lost:
 *
 *   - a heartbeat thread sends a byte to every other rank every half
 *     second and notes when it last heard from each; a rank unheard for
 *     SYSTOLIC_MPI_TIMEOUT seconds (default 30) is lost -- killed, or its
 *     host gone -- and a wait names it in its error. A rank that is merely
 *     slow (a long checkpoint on the chief) keeps beating, so no fixed
 *     deadline on the collectives themselves fires falsely. Under mpirun's
 *     default behaviour a rank killed by a signal makes mpirun end the job
 *     within a second or two, naming the rank, before the watchdog would;
 *     the watchdog bounds the wait where the launcher does not
 *     (mpirun --enable-recovery, another launcher);
 *   - mpi_agree() is the one place ranks learn of each other's failures:
 *     an all-reduce of (lowest failing rank, a count), then that rank's
 *     status and message broadcast, so every rank returns the same error
 *     ("rank 1 of 2 (host h): ...") and the chief alone reports it;
 *   - the chain is the across-host half of the gradients' all-reduce
 *     (replicas.c): host h takes the sum of the hosts before it from
 *     h - 1, adds its own replicas' gradients in replica order and passes
 *     the sum on to h + 1; the last host's mean goes back down the chain.
 *     Blocks of the gradient travel separately, so hosts overlap: h adds
 *     block b while h + 1 adds block b - 1. The order of the additions is
 *     the order one process with every replica uses, which is what makes
 *     the result bitwise the same (a tree or ring would round differently).
 *
 * Without MPI (SY_HAVE_MPI undefined: not found, or -DSY_MPI=OFF) joining
 * says it was not built in, and the rest is never called.
 */
#include "distribute_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static char shared_error[2048]; /* the last error every rank returned alike (mpi_agree) */

bool sy_cluster_error_shared(void) {
    return shared_error[0] && strstr(sy_last_error(), shared_error) != NULL;
}

#ifndef SY_HAVE_MPI

bool mpi_built_in(void) {
    return false;
}
sy_status mpi_join(const mpi_host *mine, mpi_host **hosts, int32_t *rank, int32_t *size) {
    (void)mine;
    *hosts = NULL;
    *rank = 0;
    *size = 1;
    return sy_error(SY_ERR_UNSUPPORTED, "MPI is not built in");
}
int32_t sy_cluster_rank(void) {
    return 0;
}
int32_t sy_cluster_size(void) {
    return 1;
}
void sy_cluster_shutdown(bool ok) {
    (void)ok;
}
void sy_cluster_abort(int status) {
    (void)status;
}
sy_status mpi_agree(sy_status st, int64_t v, int64_t *lo, int64_t *hi) {
    if (lo) *lo = v;
    if (hi) *hi = v;
    return st;
}
sy_status mpi_allgatherv(const void *mine, void *all, const int64_t *bytes, const char *what) {
    (void)mine, (void)all, (void)bytes;
    return sy_error(SY_ERR_INTERNAL, "%s: MPI is not built in", what);
}
sy_status mpi_bcast(void *buf, int64_t bytes, int32_t root, const char *what) {
    (void)buf, (void)bytes, (void)root;
    return sy_error(SY_ERR_INTERNAL, "%s: MPI is not built in", what);
}
sy_status mpi_check_same(const char *what, const strategy_field *f, int32_t n) {
    (void)what, (void)f, (void)n;
    return SY_OK;
}
sy_status mpi_chain_new(int64_t n, int64_t block, mpi_chain **out) {
    (void)n, (void)block;
    *out = NULL;
    return sy_error(SY_ERR_INTERNAL, "all-reduce: MPI is not built in");
}
void mpi_chain_free(mpi_chain *c) {
    (void)c;
}
sy_status mpi_chain_start(mpi_chain *c) {
    (void)c;
    return SY_OK;
}
sy_status mpi_chain_partial(mpi_chain *c, int64_t b, const float **partial) {
    (void)c, (void)b;
    *partial = NULL;
    return SY_OK;
}
sy_status mpi_chain_pass(mpi_chain *c, int64_t b, const float *block) {
    (void)c, (void)b, (void)block;
    return SY_OK;
}
sy_status mpi_chain_finish(mpi_chain *c, float *g) {
    (void)c, (void)g;
    return SY_OK;
}

#else /* SY_HAVE_MPI */

#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define TAG_BEAT          1
#define TAG_UP            2 /* the chain's partial sums, host h to h + 1 */
#define TAG_DOWN          3 /* its result, back from h + 1 to h */
#define BEAT_PERIOD_NS    500000000L
#define DEFAULT_TIMEOUT_S 30.0

static struct {
    atomic_int state; /* 0 not started, 1 up, 2 shut down */
    bool owned;       /* MPI was started here, so it ends here */
    int rank, size;
    MPI_Comm comm, beat_comm;
    mpi_host *hosts;     /* every rank's record, for messages */
    double timeout;      /* seconds without a heartbeat that make a rank lost */
    atomic_llong *heard; /* per rank: when its last heartbeat came (ns, CLOCK_MONOTONIC) */
    pthread_t beat;
    bool beating;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
} w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

bool mpi_built_in(void) {
    return true;
}
int32_t sy_cluster_rank(void) {
    return atomic_load(&w.state) == 1 ? w.rank : 0;
}
int32_t sy_cluster_size(void) {
    return atomic_load(&w.state) == 1 ? w.size : 1;
}

/* ---- the watchdog ----------------------------------------------------------------------- */

static void *heartbeat(void *arg) {
    (void)arg;
    static const char byte = 1;
    MPI_Request *sent = calloc((size_t)w.size, sizeof *sent);
    if (!sent) return NULL; /* then this rank looks lost to the others: they stop, naming it */
    for (int p = 0; p < w.size; p++) sent[p] = MPI_REQUEST_NULL;
    pthread_mutex_lock(&w.mu);
    while (!w.stop) {
        pthread_mutex_unlock(&w.mu);
        for (int p = 0; p < w.size; p++) {
            int done = 1;
            if (p == w.rank) continue;
            if (sent[p] != MPI_REQUEST_NULL) MPI_Test(&sent[p], &done, MPI_STATUS_IGNORE);
            if (done) MPI_Isend(&byte, 1, MPI_CHAR, p, TAG_BEAT, w.beat_comm, &sent[p]);
        }
        for (;;) {
            int flag = 0;
            MPI_Status s;
            char in;
            if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_BEAT, w.beat_comm, &flag, &s) != MPI_SUCCESS ||
                !flag)
                break;
            MPI_Recv(&in, 1, MPI_CHAR, s.MPI_SOURCE, TAG_BEAT, w.beat_comm, MPI_STATUS_IGNORE);
            atomic_store(&w.heard[s.MPI_SOURCE], now_ns());
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* the condition variable's clock */
        ts.tv_nsec += BEAT_PERIOD_NS;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_mutex_lock(&w.mu);
        if (!w.stop) pthread_cond_timedwait(&w.cv, &w.mu, &ts);
    }
    pthread_mutex_unlock(&w.mu);
    for (int p = 0; p < w.size; p++) /* a byte each: they complete on their own */
        if (sent[p] != MPI_REQUEST_NULL) MPI_Request_free(&sent[p]);
    free(sent);
    return NULL;
}

/* The lowest rank not heard from for the timeout, or -1. */
static int lost_rank(void) {
    if (w.size < 2) return -1;
    long long now = now_ns(), limit = (long long)(w.timeout * 1e9);
    for (int p = 0; p < w.size; p++)
        if (p != w.rank && now - atomic_load(&w.heard[p]) > limit) return p;
    return -1;
}

/* Complete n requests, or fail naming a lost rank. */
static sy_status wait_all(int n, MPI_Request *req, const char *what) {
    for (long spins = 0;; spins++) {
        int done = 0;
        if (MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            return sy_error(SY_ERR_IO, "%s: MPI failed on rank %d of %d", what, w.rank, w.size);
        if (done) return SY_OK;
        int lost = lost_rank();
        if (lost >= 0) {
            const mpi_host *h = &w.hosts[lost];
            return sy_error(
                SY_ERR_IO,
                "%s: rank %d of %d (host %s, pid %lld) is lost: nothing heard from it for %.0f s "
                "(SYSTOLIC_MPI_TIMEOUT); it was killed or its host is down, so rank %d stops",
                what, lost, w.size, h->name, (long long)h->pid, w.timeout, w.rank);
        }
        /* A few polls at once (a partner a microsecond behind), then give the core away: ranks
         * often share cores, and a spinning one delays the very rank it waits for. */
        if (spins < 64) continue;
        if (spins < 1024) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- joining and leaving ------------------------------------------------------------------- */

/* A hash of this process's executable: ranks of one build have one. */
static uint64_t build_hash(void) {
    FILE *f = fopen("/proc/self/exe", "rb");
    uint64_t h = 0x5157A11C0FFEEull;
    if (!f) return h;
    static uint64_t buf[1 << 15];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (n % 8) memset((char *)buf + n, 0, 8 - n % 8);
        for (size_t i = 0; i < (n + 7) / 8; i++) h = sy_mix64(h ^ buf[i]);
        h = sy_mix64(h ^ n);
    }
    fclose(f);
    return h;
}

static sy_status start(void) {
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return sy_error(SY_ERR_IO, "MPI: MPI_Init_thread failed");
        w.owned = true;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE)
        return sy_error(SY_ERR_UNSUPPORTED,
                        "MPI: this MPI library gives thread level %d where systolic needs "
                        "MPI_THREAD_MULTIPLE (%d) "
                        "for its heartbeat thread",
                        provided, MPI_THREAD_MULTIPLE);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &w.comm) != MPI_SUCCESS ||
        MPI_Comm_dup(MPI_COMM_WORLD, &w.beat_comm) != MPI_SUCCESS)
        return sy_error(SY_ERR_IO, "MPI: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(w.comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(w.beat_comm, MPI_ERRORS_RETURN);
    w.timeout = DEFAULT_TIMEOUT_S;
    const char *t = getenv("SYSTOLIC_MPI_TIMEOUT");
    if (t && *t) {
        char *end;
        double v = strtod(t, &end);
        if (*end || !(v > 0 && v < 1e7))
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "$SYSTOLIC_MPI_TIMEOUT is '%s': expected the seconds without a "
                            "heartbeat after which a "
                            "rank counts as lost (default %.0f)",
                            t, DEFAULT_TIMEOUT_S);
        w.timeout = v;
    }
    w.heard = calloc((size_t)w.size, sizeof *w.heard);
    w.hosts = calloc((size_t)w.size, sizeof *w.hosts);
    if (!w.heard || !w.hosts) return sy_error(SY_ERR_OUT_OF_MEMORY, "MPI: out of memory");
    long long now = now_ns();
    for (int p = 0; p < w.size; p++) atomic_init(&w.heard[p], now);
    if (w.size > 1) {
        w.stop = false;
        if (pthread_create(&w.beat, NULL, heartbeat, NULL) != 0)
            return sy_error(SY_ERR_IO, "MPI: cannot start the heartbeat thread");
        w.beating = true;
    }
    atomic_store(&w.state, 1);
    return SY_OK;
}

sy_status mpi_join(const mpi_host *mine, mpi_host **hosts, int32_t *rank, int32_t *size) {
    *hosts = NULL;
    int state = atomic_load(&w.state);
    if (state == 2)
        return sy_error(
            SY_ERR_STATE,
            "MPI was shut down in this process (sy_cluster_shutdown): it cannot start again");
    if (state == 0) {
        sy_status st = start();
        if (st) return st;
    }
    mpi_host me = *mine;
    me.build = build_hash();
    me.pid = (int64_t)getpid();
    if (gethostname(me.name, sizeof me.name) != 0) snprintf(me.name, sizeof me.name, "?");
    me.name[sizeof me.name - 1] = '\0';
    mpi_host *all = sy_calloc((size_t)w.size, sizeof *all);
    if (!all) return sy_error(SY_ERR_OUT_OF_MEMORY, "MPI: out of memory");
    MPI_Request r;
    sy_status st = SY_OK;
    if (MPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, w.comm, &r) !=
        MPI_SUCCESS)
        st = sy_error(SY_ERR_IO, "MPI: starting the job: MPI_Iallgather failed");
    if (!st) st = wait_all(1, &r, "MPI: starting the job");
    if (st) {
        sy_free(all);
        return st;
    }
    memcpy(w.hosts, all, (size_t)w.size * sizeof *all);
    for (int p = 1; p < w.size; p++)
        if (all[p].build != all[0].build) {
            snprintf(shared_error, sizeof shared_error,
                     "the ranks run different builds of systolic %s: rank %d (host %s) runs build "
                     "%016llx, rank 0 "
                     "(host %s) build %016llx (a hash of the executable); their kernels may round "
                     "differently, so "
                     "start every rank from one build",
                     sy_version(), p, all[p].name, (unsigned long long)all[p].build, all[0].name,
                     (unsigned long long)all[0].build);
            sy_free(all);
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s", shared_error);
        }
    *hosts = all;
    *rank = w.rank;
    *size = w.size;
    return SY_OK;
}

static void stop_heartbeat(void) {
    if (!w.beating) return;
    pthread_mutex_lock(&w.mu);
    w.stop = true;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(w.beat, NULL);
    w.beating = false;
}

void sy_cluster_shutdown(bool ok) {
    if (atomic_load(&w.state) != 1) return;
    bool clean = true;
    if (ok && w.size > 1) { /* none leaves while another may still wait for it */
        MPI_Request r;
        clean = MPI_Ibarrier(w.comm, &r) == MPI_SUCCESS &&
                wait_all(1, &r, "MPI: ending the job") == SY_OK;
    }
    stop_heartbeat();
    if (!clean) MPI_Abort(MPI_COMM_WORLD, 1); /* a rank is lost: finalizing would wait for it */
    MPI_Comm_free(&w.comm);
    MPI_Comm_free(&w.beat_comm);
    if (w.owned) MPI_Finalize();
    free(w.heard);
    free(w.hosts);
    w.heard = NULL;
    w.hosts = NULL;
    atomic_store(&w.state, 2);
}

void sy_cluster_abort(int status) {
    if (atomic_load(&w.state) != 1) return;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
}

/* ---- collectives ---------------------------------------------------------------------------- */

sy_status mpi_agree(sy_status st, int64_t v, int64_t *lo, int64_t *hi) {
    if (lo) *lo = v;
    if (hi) *hi = v;
    if (atomic_load(&w.state) != 1 || w.size < 2) return st;
    /* the lowest failing rank, the least and greatest v, and 0 when every rank failed */
    int64_t in[4] = {st ? w.rank : w.size, v, -v, st ? 0 : -1}, out[4];
    char mine[1900];
    if (st) snprintf(mine, sizeof mine, "%.1899s", sy_last_error());
    MPI_Request r;
    if (MPI_Iallreduce(in, out, 4, MPI_INT64_T, MPI_MIN, w.comm, &r) != MPI_SUCCESS)
        return sy_error(SY_ERR_IO, "MPI: MPI_Iallreduce failed on rank %d", w.rank);
    sy_status ws = wait_all(1, &r, "MPI: agreeing on a step");
    if (ws) return ws;
    if (lo) *lo = out[1];
    if (hi) *hi = -out[2];
    if (out[0] == w.size) return SY_OK;
    int from = (int)out[0];
    struct {
        int32_t status;
        char message[1900]; /* room left in shared_error for the rank and host */
    } e;
    memset(&e, 0, sizeof e);
    if (w.rank == from) {
        e.status = (int32_t)st;
        memcpy(e.message, mine, sizeof mine);
    }
    if (MPI_Ibcast(&e, (int)sizeof e, MPI_BYTE, from, w.comm, &r) != MPI_SUCCESS)
        return sy_error(SY_ERR_IO, "MPI: MPI_Ibcast failed on rank %d", w.rank);
    if ((ws = wait_all(1, &r, "MPI: hearing of a failure"))) return ws;
    if (out[3] == 0) /* every rank failed: the lowest's words, as each would say them */
        snprintf(shared_error, sizeof shared_error, "%s", e.message);
    else
        snprintf(shared_error, sizeof shared_error, "rank %d of %d (host %s): %s", from, w.size,
                 w.hosts[from].name, e.message);
    return sy_error((sy_status)e.status, "%s", shared_error);
}

sy_status mpi_allgatherv(const void *mine, void *all, const int64_t *bytes, const char *what) {
    int *counts = calloc((size_t)w.size, sizeof *counts), *at = calloc((size_t)w.size, sizeof *at);
    if (!counts || !at) {
        free(counts);
        free(at);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    }
    int64_t total = 0;
    for (int p = 0; p < w.size; p++) {
        counts[p] = (int)bytes[p];
        at[p] = (int)total;
        total += bytes[p];
    }
    sy_status st = SY_OK;
    MPI_Request r;
    if (total > 0x7fffffff)
        st = sy_error(SY_ERR_UNSUPPORTED,
                      "%s: %lld bytes from every host at once, more than one MPI call moves", what,
                      (long long)total);
    else if (MPI_Iallgatherv(mine, counts[w.rank], MPI_BYTE, all, counts, at, MPI_BYTE, w.comm,
                             &r) != MPI_SUCCESS)
        st = sy_error(SY_ERR_IO, "%s: MPI_Iallgatherv failed on rank %d", what, w.rank);
    else
        st = wait_all(1, &r, what);
    free(counts);
    free(at);
    return st;
}

sy_status mpi_bcast(void *buf, int64_t bytes, int32_t root, const char *what) {
    for (int64_t at = 0; at < bytes;) { /* MPI counts are ints */
        int n = bytes - at > (1 << 30) ? 1 << 30 : (int)(bytes - at);
        MPI_Request r;
        if (MPI_Ibcast((char *)buf + at, n, MPI_BYTE, root, w.comm, &r) != MPI_SUCCESS)
            return sy_error(SY_ERR_IO, "%s: MPI_Ibcast failed on rank %d", what, w.rank);
        sy_status st = wait_all(1, &r, what);
        if (st) return st;
        at += n;
    }
    return SY_OK;
}

sy_status mpi_check_same(const char *what, const strategy_field *f, int32_t n) {
    if (atomic_load(&w.state) != 1 || w.size < 2) return SY_OK;
    int64_t *bytes = malloc((size_t)w.size * sizeof *bytes);
    strategy_field *all = malloc((size_t)w.size * (size_t)n * sizeof *all);
    sy_status st = bytes && all ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    for (int p = 0; !st && p < w.size; p++) bytes[p] = (int64_t)((size_t)n * sizeof *f);
    if (!st) st = mpi_allgatherv(f, all, bytes, what);
    for (int p = 1; !st && p < w.size; p++) {
        const strategy_field *a = all + (size_t)p * (size_t)n;
        size_t len = 0;
        char diff[1400] = "";
        for (int32_t i = 0; i < n && len < sizeof diff; i++)
            if (strcmp(a[i].name, f[i].name) || strcmp(a[i].value, all[i].value))
                len +=
                    (size_t)snprintf(diff + len, sizeof diff - len, "%s%s %s where rank 0 has %s",
                                     len ? "; " : "", a[i].name, a[i].value, all[i].value);
        if (!len) continue;
        snprintf(shared_error, sizeof shared_error,
                 "%s: the ranks were not started alike: rank %d (host %s) has %s; start every rank "
                 "with the same "
                 "command, model and data",
                 what, p, w.hosts[p].name, diff);
        st = sy_error(SY_ERR_INVALID_ARGUMENT, "%s", shared_error);
    }
    free(bytes);
    free(all);
    return st;
}

/* ---- the chain of the all-reduce ---------------------------------------------------------------
 */

struct mpi_chain {
    int64_t n, block, blocks;
    float *partials; /* (n): the sums of the hosts before this one, as they come */
    MPI_Request *up_recv, *up_send, *down_recv, *down_send; /* (blocks) each */
};

#define CHAIN_WHAT "all-reduce of the gradients across hosts"

static int64_t block_len(const mpi_chain *c, int64_t b) {
    int64_t e = (b + 1) * c->block < c->n ? (b + 1) * c->block : c->n;
    return e - b * c->block;
}

sy_status mpi_chain_new(int64_t n, int64_t block, mpi_chain **out) {
    *out = NULL;
    mpi_chain *c = sy_calloc(1, sizeof *c);
    if (!c) return sy_error(SY_ERR_OUT_OF_MEMORY, CHAIN_WHAT ": out of memory");
    c->n = n;
    c->block = block;
    c->blocks = (n + block - 1) / block;
    size_t nb = (size_t)(c->blocks ? c->blocks : 1);
    c->partials = sy_malloc((size_t)(n ? n : 1) * sizeof(float));
    c->up_recv = sy_malloc(nb * sizeof(MPI_Request));
    c->up_send = sy_malloc(nb * sizeof(MPI_Request));
    c->down_recv = sy_malloc(nb * sizeof(MPI_Request));
    c->down_send = sy_malloc(nb * sizeof(MPI_Request));
    if (!c->partials || !c->up_recv || !c->up_send || !c->down_recv || !c->down_send) {
        mpi_chain_free(c);
        return sy_error(SY_ERR_OUT_OF_MEMORY, CHAIN_WHAT ": out of memory for %lld floats",
                        (long long)n);
    }
    for (size_t b = 0; b < nb; b++)
        c->up_recv[b] = c->up_send[b] = c->down_recv[b] = c->down_send[b] = MPI_REQUEST_NULL;
    *out = c;
    return SY_OK;
}

void mpi_chain_free(mpi_chain *c) {
    if (!c) return;
    sy_free(c->partials);
    sy_free(c->up_recv);
    sy_free(c->up_send);
    sy_free(c->down_recv);
    sy_free(c->down_send);
    sy_free(c);
}

static sy_status chain_failed(const char *call) {
    return sy_error(SY_ERR_IO, CHAIN_WHAT ": %s failed on rank %d", call, w.rank);
}

sy_status mpi_chain_start(mpi_chain *c) {
    if (w.rank == 0) return SY_OK;
    for (int64_t b = 0; b < c->blocks; b++)
        if (MPI_Irecv(c->partials + b * c->block, (int)block_len(c, b), MPI_FLOAT, w.rank - 1,
                      TAG_UP, w.comm, &c->up_recv[b]) != MPI_SUCCESS)
            return chain_failed("MPI_Irecv");
    return SY_OK;
}

sy_status mpi_chain_partial(mpi_chain *c, int64_t b, const float **partial) {
    *partial = NULL;
    if (w.rank == 0) return SY_OK;
    sy_status st = wait_all(1, &c->up_recv[b], CHAIN_WHAT);
    if (!st) *partial = c->partials + b * c->block;
    return st;
}

sy_status mpi_chain_pass(mpi_chain *c, int64_t b, const float *block) {
    bool last = w.rank == w.size - 1;
    MPI_Request *r = last ? &c->down_send[b] : &c->up_send[b];
    if (MPI_Isend(block, (int)block_len(c, b), MPI_FLOAT, last ? w.rank - 1 : w.rank + 1,
                  last ? TAG_DOWN : TAG_UP, w.comm, r) != MPI_SUCCESS)
        return chain_failed("MPI_Isend");
    return SY_OK;
}

sy_status mpi_chain_finish(mpi_chain *c, float *g) {
    int nb = (int)c->blocks;
    if (w.rank == w.size - 1) return wait_all(nb, c->down_send, CHAIN_WHAT);
    /* g's blocks went up the chain: once sent, the result can land in them */
    sy_status st = wait_all(nb, c->up_send, CHAIN_WHAT);
    for (int64_t b = 0; !st && b < c->blocks; b++)
        if (MPI_Irecv(g + b * c->block, (int)block_len(c, b), MPI_FLOAT, w.rank + 1, TAG_DOWN,
                      w.comm, &c->down_recv[b]) != MPI_SUCCESS)
            st = chain_failed("MPI_Irecv");
    for (int64_t b = 0; !st && b < c->blocks; b++) {
        st = wait_all(1, &c->down_recv[b], CHAIN_WHAT);
        if (!st && w.rank > 0 &&
            MPI_Isend(g + b * c->block, (int)block_len(c, b), MPI_FLOAT, w.rank - 1, TAG_DOWN,
                      w.comm, &c->down_send[b]) != MPI_SUCCESS)
            st = chain_failed("MPI_Isend");
    }
    if (!st && w.rank > 0) st = wait_all(nb, c->down_send, CHAIN_WHAT);
    return st;
}

#endif /* SY_HAVE_MPI */
