/*
 * pool.c - the persistent thread pool.
 *
 * One pool, created once, runs every parallel region: replicas, kernel
 * splits, pipeline stages. A region is published by bumping `generation`
 * under the mutex and broadcasting; each worker runs fn(ctx, index, count)
 * and decrements `pending`; the last one signals `done`. The caller runs
 * index 0 itself, so a region of count 1 costs one function call.
 *
 * Waking a sleeping thread costs microseconds, which adds up over the many
 * small regions of a recurrent step, so a worker first waits a short while
 * on the atomic generation counter (with a pause hint) before it sleeps on
 * the condition variable. That is a bounded wait on a C11 atomic, not a spin
 * on a volatile flag. With more threads than cores (cpu:8 on a 2-core
 * machine) the waiter that spins holds the core the thread it waits for
 * needs, and every region cost a millisecond of spinning: a pool or barrier
 * larger than the machine sleeps at once (spin budget 0).
 *
 * Threads, mutexes and condition variables are POSIX's rather than C11's:
 * glibc's thrd_create and mtx_lock bypass the symbols ThreadSanitizer
 * intercepts, so under TSan a C11 thread crashed at its first instrumented
 * call and locks were invisible to the race detector.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "core_internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <pthread.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define SPIN_ITERS 20000

typedef struct worker {
    struct sy_pool *pool;
    int index;
    pthread_t thread;
    atomic_uint assigned; /* the generation this worker takes part in */
} worker;

struct sy_pool {
    int size;
    int spin; /* iterations to spin before sleeping: SPIN_ITERS, or 0 when oversubscribed */
    worker *workers; /* size - 1 of them; the caller is index 0 */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    atomic_uint generation;
    atomic_int pending;
    bool stop;
    sy_pool_fn fn;
    void *ctx;
    int count;
};

static void *worker_main(void *arg) {
    worker *w = arg;
    sy_pool *p = w->pool;
    unsigned seen = 0; /* the pool starts at generation 0; a thread that starts late must not skip region 1 */
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               spins < p->spin) {
            CPU_RELAX();
            spins++;
        }
        if (gen == seen) {
            pthread_mutex_lock(&p->mu);
            while ((gen = atomic_load(&p->generation)) == seen && !p->stop) pthread_cond_wait(&p->wake, &p->mu);
            bool stop = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stop) return NULL;
        }
        seen = gen;
        /* A worker left out of this region must not read fn/ctx/count: the
         * caller may already be publishing the next region. Only a worker
         * stamped with this generation runs it (and the caller waits for it). */
        if (atomic_load_explicit(&w->assigned, memory_order_acquire) == gen) {
            p->fn(p->ctx, w->index, p->count);
            if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
                pthread_mutex_lock(&p->mu);
                pthread_cond_signal(&p->done);
                pthread_mutex_unlock(&p->mu);
            }
        }
    }
}

int sy_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

sy_status sy_pool_new(int threads, sy_pool **out) {
    *out = NULL;
    if (threads < 0 || threads > 1024)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "thread pool: %d threads requested; expected 0 (one per core) to 1024", threads);
    if (threads == 0) threads = sy_cpu_count();
    sy_pool *p = sy_calloc(1, sizeof *p);
    if (!p) return sy_error(SY_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
    p->size = threads;
    p->spin = threads <= sy_cpu_count() ? SPIN_ITERS : 0;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    if (threads > 1) {
        p->workers = sy_calloc((size_t)threads - 1, sizeof *p->workers);
        if (!p->workers) {
            sy_pool_free(p);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "thread pool: out of memory");
        }
    }
    for (int i = 1; i < threads; i++) {
        worker *w = &p->workers[i - 1];
        w->pool = p;
        w->index = i;
        atomic_init(&w->assigned, 0);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            p->size = i; /* only the started ones are joined */
            sy_pool_free(p);
            return sy_error(SY_ERR_OUT_OF_MEMORY, "thread pool: could not start thread %d of %d", i, threads);
        }
    }
    *out = p;
    return SY_OK;
}

void sy_pool_free(sy_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->size; i++) pthread_join(p->workers[i - 1].thread, NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    sy_free(p->workers);
    sy_free(p);
}

int sy_pool_size(const sy_pool *p) { return p ? p->size : 1; }

void sy_pool_run(sy_pool *p, sy_pool_fn fn, void *ctx, int count) {
    if (!p || count <= 1) {
        if (count >= 1) fn(ctx, 0, 1);
        return;
    }
    SY_ASSERT(count <= p->size);
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->count = count;
    atomic_store(&p->pending, count - 1);
    unsigned gen = atomic_load(&p->generation) + 1;
    for (int i = 1; i < count; i++) atomic_store_explicit(&p->workers[i - 1].assigned, gen, memory_order_relaxed);
    atomic_store_explicit(&p->generation, gen, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    fn(ctx, 0, count);

    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0 && spins < p->spin) {
        CPU_RELAX();
        spins++;
    }
    if (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

/* ---- barriers -------------------------------------------------------------------
 * The last thread to arrive bumps the generation and wakes the sleepers;
 * the others wait for the generation to change, spinning a short while
 * first (replicas reach a barrier within microseconds of each other). */

typedef struct barrier_impl {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count, arrived, spin;
    atomic_uint generation;
} barrier_impl;

sy_status sy_barrier_init(sy_barrier *b, int count) {
    barrier_impl *i = sy_calloc(1, sizeof *i);
    if (!i) return sy_error(SY_ERR_OUT_OF_MEMORY, "barrier: out of memory");
    pthread_mutex_init(&i->mu, NULL);
    pthread_cond_init(&i->cv, NULL);
    i->count = count;
    i->spin = count <= sy_cpu_count() ? SPIN_ITERS : 0;
    atomic_init(&i->generation, 0);
    b->impl = i;
    return SY_OK;
}

void sy_barrier_destroy(sy_barrier *b) {
    barrier_impl *i = b->impl;
    if (!i) return;
    pthread_cond_destroy(&i->cv);
    pthread_mutex_destroy(&i->mu);
    sy_free(i);
    b->impl = NULL;
}

void sy_barrier_wait(sy_barrier *b) {
    barrier_impl *i = b->impl;
    if (i->count <= 1) return;
    pthread_mutex_lock(&i->mu);
    unsigned gen = atomic_load_explicit(&i->generation, memory_order_relaxed);
    if (++i->arrived == i->count) {
        i->arrived = 0;
        atomic_store_explicit(&i->generation, gen + 1, memory_order_release);
        pthread_cond_broadcast(&i->cv);
        pthread_mutex_unlock(&i->mu);
        return;
    }
    pthread_mutex_unlock(&i->mu);
    for (int spins = 0; spins < i->spin; spins++) {
        if (atomic_load_explicit(&i->generation, memory_order_acquire) != gen) return;
        CPU_RELAX();
    }
    pthread_mutex_lock(&i->mu);
    while (atomic_load_explicit(&i->generation, memory_order_acquire) == gen) pthread_cond_wait(&i->cv, &i->mu);
    pthread_mutex_unlock(&i->mu);
}
