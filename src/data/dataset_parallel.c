/*
 * dataset_parallel.c - the transformations that may run on threads of
 * their own: map, prefetch and interleave.
 *
 * Their threads are plain pthreads owned by the iterator, never the
 * compute pool's (the model's replicas occupy that); an iterator starts
 * them when it is opened and stops and joins them when it is freed, after
 * which it frees its input. Every wait is on a condition variable; every
 * shared field is under the iterator's mutex. An error on a worker thread
 * is captured there (status and message, ds_error) and raised on the
 * consumer's thread in the place of the element it replaced, so elements
 * before it are still delivered and the message names the stage.
 *
 * map with num_parallel_calls > 1: each worker reserves places in a ring
 * of results, takes that many input elements under the input lock (which
 * numbers them), calls fn on them outside any lock and puts each result
 * at its number. The consumer takes results in number order, so the
 * output order is the input's whatever the timing. Places are reserved
 * before the input is read, so a number is never more than the ring's size
 * ahead of the consumer. A worker takes a chunk of elements at a time,
 * sized from the measured time of fn so that a chunk's work dwarfs the
 * locking around it, and at most two chunks per thread are in flight. A
 * worker wakes the consumer only when it fills the place the consumer
 * waits for.
 *
 * prefetch: one producer thread fills a FIFO up to buffer_size elements
 * and, once full, waits until it has drained to half. SY_AUTOTUNE starts
 * at one element and doubles the limit whenever the consumer finds the
 * buffer empty (it had to wait), up to DS_PREFETCH_MAX_ELEMENTS, and the
 * producer also stops while the buffer holds DS_PREFETCH_BUDGET bytes
 * (one element always fits). buffer_size 0 is no prefetching: the input's
 * own iterator.
 *
 * interleave: the consumer runs tf.data's sequential algorithm (below)
 * whatever num_parallel_calls is; only where an inner element and a newly
 * opened inner dataset come from differs. Sequentially, the consumer reads
 * them itself. In parallel, workers open the next input elements' datasets
 * ahead ("futures", up to cycle_length of them, taken in input order as
 * the algorithm asks for them) and read ahead, a chunk at a time, into
 * each open dataset's FIFO, refilled when it has drained to half, the
 * current cycle slot first. Opening (reading the input, calling fn,
 * opening the dataset) happens in input order under the input lock, so fn
 * and any stateful dataset it returns see the same sequence as
 * sequentially. The output is therefore identical to the sequential one.
 *
 * Each side signals the other only when it is waiting, and only for what
 * it waits for; the mutexes are glibc's adaptive ones. Measured hand-off
 * costs (16-core machine, elements of a few bytes): about 1 us per element
 * through prefetch or a parallel interleave, against 0.1-0.2 us
 * sequentially, so parallel stages pay where an element costs more than
 * that (a map that decodes, a batch); a map of 40 us per element ran 1.8,
 * 3.5 and 7x faster on 2, 4 and 8 threads.
 */
#define _GNU_SOURCE /* PTHREAD_MUTEX_ADAPTIVE_NP */
#include "data_internal.h"

#include <string.h>

/* ---- map ------------------------------------------------------------------------------ */

typedef struct map_state {
    sy_map_fn fn;
    void *ctx;
    int32_t threads; /* <= 1: on the consumer's thread */
    bool autotune;   /* SY_AUTOTUNE: threads only once fn proves costly */
} map_state;

/* fn on element `index` (in is consumed), its result checked against the
 * declared specs. */
static sy_status map_apply(const sy_dataset *d, sy_element *in, sy_element *out, int64_t index) {
    const map_state *s = d->state;
    sy_clear_error();
    sy_status st = s->fn(s->ctx, in, out);
    sy_element_clear(in);
    if (out->n < 0 || out->n > SY_ELEMENT_MAX) {
        int n = (int)out->n;
        out->n = 0; /* its components cannot be trusted: leaked rather than freed wrongly */
        return sy_error(SY_ERR_INVALID_ARGUMENT, "map: the function made %d components for element %lld; at most %d fit",
                        n, (long long)index, SY_ELEMENT_MAX);
    }
    if (st) {
        sy_element_clear(out);
        return ds_fn_error(st, "map", "function", index);
    }
    if (ds_element_fits(out, d->spec, d->n)) return SY_OK;
    char what[96];
    snprintf(what, sizeof what, "map: the function's output for element %lld:", (long long)index);
    st = ds_element_check(out, d->spec, d->n, what);
    sy_element_clear(out);
    return st;
}

typedef struct map_iter {
    ds_unary_iter u;
    int64_t index;
} map_iter;

static sy_status map_next(ds_iter *base, sy_element *out, bool *end) {
    map_iter *it = (map_iter *)base;
    sy_element in = {0};
    sy_status st = ds_next(it->u.input, &in, end);
    if (st || *end) return st;
    return map_apply(base->d, &in, out, it->index++);
}

static const ds_iter_ops map_iter_ops = {map_next, ds_unary_release};

/* The mutex and the two conditions every threaded iterator here has. */
static void sync_init(pthread_mutex_t *mu, pthread_cond_t *a, pthread_cond_t *b) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    /* glibc's adaptive mutex spins a bounded while before it sleeps: the
     * lock is held for a few pushes or a pop, and sleeping on it cost more
     * than the work (interleaved reads of small records) */
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(mu, &attr);
    pthread_mutexattr_destroy(&attr);
    pthread_cond_init(a, NULL);
    pthread_cond_init(b, NULL);
}

/* Set *stop under mu, wake every thread waiting on `wake`, join the
 * started ones. */
static void threads_stop(pthread_mutex_t *mu, bool *stop, pthread_cond_t *wake, pthread_t *threads, int started) {
    pthread_mutex_lock(mu);
    *stop = true;
    pthread_cond_broadcast(wake);
    pthread_mutex_unlock(mu);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
}

static void sync_destroy(pthread_mutex_t *mu, pthread_cond_t *a, pthread_cond_t *b) {
    pthread_mutex_destroy(mu);
    pthread_cond_destroy(a);
    pthread_cond_destroy(b);
}

typedef struct pmap_slot {
    bool ready;
    ds_error error; /* in the element's place */
    sy_element e;
} pmap_slot;


typedef struct pmap_iter {
    ds_iter base;
    ds_iter *input;
    pthread_mutex_t mu, in_mu;
    pthread_cond_t result, space;
    bool sync;      /* mutexes and conditions initialised */
    bool inline_mode; /* SY_AUTOTUNE, before the threads start: fn on the consumer's thread */
    double inline_seconds; /* summed over inline_timed calls */
    int64_t inline_timed;
    int threads, started, cap;
    pthread_t *thread;
    pmap_slot *ring; /* cap places; element number k at k % cap */
    /* under in_mu */
    int64_t next_number;
    bool in_end;
    /* under mu */
    int64_t reserved, consumed, end_number; /* elements numbered below end_number, at most */
    int chunk;                              /* elements per reservation */
    int space_waiters;
    bool consumer_waits, input_done, stop;
} pmap_iter;

/* Places a worker may reserve now: 2 chunks per thread ahead of the
 * consumer at most, so slow functions on large elements keep few of them
 * in memory. mu held. */
static int64_t pmap_room(const pmap_iter *it) {
    int64_t limit = sy_min64(it->cap, 2 * (int64_t)it->threads * it->chunk);
    return limit - (it->reserved - it->consumed);
}

static void *pmap_worker(void *arg) {
    pmap_iter *it = arg;
    sy_element in[DS_CHUNK_MAX], out[DS_CHUNK_MAX];
    ds_error error[DS_CHUNK_MAX];
    for (;;) {
        pthread_mutex_lock(&it->mu);
        while (!it->stop && !it->input_done && pmap_room(it) < 1) {
            it->space_waiters++;
            pthread_cond_wait(&it->space, &it->mu);
            it->space_waiters--;
        }
        bool quit = it->stop || it->input_done;
        int want = quit ? 0 : (int)sy_min64(it->chunk, pmap_room(it));
        it->reserved += want;
        pthread_mutex_unlock(&it->mu);
        if (quit) return NULL;

        /* numbers k .. k + got - 1, in input order; an input error takes the
         * place after the last element read */
        int got = 0;
        bool end = false;
        sy_status st = SY_OK;
        pthread_mutex_lock(&it->in_mu);
        int64_t k = it->next_number;
        end = it->in_end;
        while (got < want && !end && !st) {
            in[got] = (sy_element){0};
            st = ds_next(it->input, &in[got], &end);
            if (!st && !end) got++;
        }
        it->next_number += got + (st ? 1 : 0);
        if (st || end) it->in_end = true;
        pthread_mutex_unlock(&it->in_mu);

        int made = got + (st ? 1 : 0);
        for (int i = 0; i < made; i++) out[i] = (sy_element){0}, error[i] = (ds_error){0};
        if (st) ds_error_capture(&error[got], st); /* before map_apply clears the message */
        double t0 = sy_now();
        for (int i = 0; i < got; i++) {
            sy_status fst = map_apply(it->base.d, &in[i], &out[i], k + i);
            if (!fst) continue;
            ds_error_capture(&error[i], fst); /* and nothing after it is needed */
            for (int j = i + 1; j < got; j++) sy_element_clear(&in[j]);
            for (int j = i + 1; j < made; j++) ds_error_clear(&error[j]);
            made = i + 1;
            st = fst;
            break;
        }
        double per = made ? (sy_now() - t0) / made : 0;

        pthread_mutex_lock(&it->mu);
        for (int i = 0; i < made; i++) {
            pmap_slot *slot = &it->ring[(k + i) % it->cap];
            slot->error = error[i];
            ds_element_move(&slot->e, &out[i]);
            slot->ready = true;
        }
        it->reserved -= want - made; /* places reserved but not filled */
        if (st || end) {
            it->input_done = true;
            it->end_number = sy_min64(it->end_number, k + made);
        }
        if (made && !st) it->chunk = ds_chunk_size(per, DS_CHUNK_MAX);
        if (it->consumer_waits && (it->input_done || (it->consumed >= k && it->consumed < k + made)))
            pthread_cond_signal(&it->result);
        if (it->input_done || (it->space_waiters && pmap_room(it) > 0)) pthread_cond_broadcast(&it->space);
        pthread_mutex_unlock(&it->mu);
        if (st || end) return NULL;
    }
}

static sy_status pmap_start(pmap_iter *it);

/* SY_AUTOTUNE starts inline, timing fn (each of the first
 * DS_AUTOTUNE_PROBE calls, then one in DS_AUTOTUNE_SAMPLE: reading the
 * clock costs a few percent of a cheap map); once the calls timed show it
 * costs more than DS_PARALLEL_MIN_SECONDS each, the workers start from the
 * next element on. Handing an element to and from a thread costs
 * a few microseconds of CPU and a context switch now and then, which on a
 * machine whose cores the model's replicas keep busy is worth paying only
 * for work that dwarfs it (measured: a 3 us map took 540 ms of CPU for
 * 60,000 elements on 2 threads against 300 ms inline, and slowed training
 * beside it by 4-7%). */
static sy_status pmap_next_inline(pmap_iter *it, sy_element *out, bool *end) {
    sy_element in = {0};
    sy_status st = ds_next(it->input, &in, end);
    if (st || *end) return st;
    if (it->consumed >= DS_AUTOTUNE_PROBE && it->consumed % DS_AUTOTUNE_SAMPLE)
        return map_apply(it->base.d, &in, out, it->consumed++);
    double t0 = sy_now();
    st = map_apply(it->base.d, &in, out, it->consumed++);
    it->inline_seconds += sy_now() - t0;
    it->inline_timed++;
    if (!st && it->consumed >= DS_AUTOTUNE_PROBE &&
        it->inline_seconds > DS_PARALLEL_MIN_SECONDS * (double)it->inline_timed) {
        it->inline_mode = false; /* the workers number on from here */
        it->next_number = it->reserved = it->consumed;
        if ((st = pmap_start(it))) sy_element_clear(out);
    }
    return st;
}

static sy_status pmap_next(ds_iter *base, sy_element *out, bool *end) {
    pmap_iter *it = (pmap_iter *)base;
    if (it->inline_mode) return pmap_next_inline(it, out, end);
    pthread_mutex_lock(&it->mu);
    pmap_slot *slot;
    while (!(slot = &it->ring[it->consumed % it->cap])->ready) {
        if (it->input_done && it->consumed >= it->end_number) {
            pthread_mutex_unlock(&it->mu);
            *end = true;
            return SY_OK;
        }
        it->consumer_waits = true;
        pthread_cond_wait(&it->result, &it->mu);
        it->consumer_waits = false;
    }
    ds_error error = slot->error;
    slot->error = (ds_error){0};
    ds_element_move(out, &slot->e);
    slot->ready = false;
    it->consumed++;
    if (it->space_waiters) pthread_cond_signal(&it->space);
    pthread_mutex_unlock(&it->mu);
    if (!error.status) return SY_OK;
    sy_status st = ds_error_raise(&error);
    ds_error_clear(&error);
    return st;
}

static void pmap_release(ds_iter *base) {
    pmap_iter *it = (pmap_iter *)base;
    if (it->sync) {
        threads_stop(&it->mu, &it->stop, &it->space, it->thread, it->started);
        sync_destroy(&it->mu, &it->result, &it->space);
        pthread_mutex_destroy(&it->in_mu);
    }
    for (int i = 0; it->ring && i < it->cap; i++) {
        sy_element_clear(&it->ring[i].e);
        ds_error_clear(&it->ring[i].error);
    }
    sy_free(it->ring);
    sy_free(it->thread);
    ds_iter_free(it->input);
}

static const ds_iter_ops pmap_iter_ops = {pmap_next, pmap_release};

/* The workers. */
static sy_status pmap_start(pmap_iter *it) {
    it->started = ds_threads_start(it->thread, it->threads, pmap_worker, it);
    if (it->started < it->threads)
        return sy_error(SY_ERR_OUT_OF_MEMORY, "map: could not start thread %d of %d", it->started + 1, it->threads);
    return SY_OK;
}

static sy_status map_open(const sy_dataset *d, ds_iter **out) {
    const map_state *s = d->state;
    if (s->threads <= 1) return ds_unary_open(d, sizeof(map_iter), &map_iter_ops, out);
    pmap_iter *it = ds_iter_alloc(sizeof(pmap_iter), &pmap_iter_ops, d);
    if (!it) return sy_error(SY_ERR_OUT_OF_MEMORY, "map: out of memory");
    it->threads = s->threads;
    it->cap = 2 * s->threads * DS_CHUNK_MAX;
    it->chunk = 1;
    it->end_number = INT64_MAX;
    it->inline_mode = s->autotune;
    it->ring = sy_calloc((size_t)it->cap, sizeof *it->ring);
    it->thread = sy_calloc((size_t)it->threads, sizeof *it->thread);
    sy_status st = it->ring && it->thread ? ds_open(d->input[0], &it->input)
                                          : sy_error(SY_ERR_OUT_OF_MEMORY, "map: out of memory");
    if (!st) {
        sync_init(&it->mu, &it->result, &it->space);
        it->sync = true;
        pthread_mutex_init(&it->in_mu, NULL);
        if (!it->inline_mode) st = pmap_start(it);
    }
    if (st) {
        ds_iter_free(&it->base);
        return st;
    }
    *out = &it->base;
    return SY_OK;
}

static const ds_kind map_kind = {"map", map_open, NULL};

/* SY_AUTOTUNE, 0 or 1 (sequential), or a thread count; *threads gets it. */
static sy_status parallel_calls(int32_t n, const char *what, int32_t *threads) {
    if (n < SY_AUTOTUNE || n > 1024)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: num_parallel_calls is %d; expected SY_AUTOTUNE (-1) or 0 to 1024",
                        what, (int)n);
    *threads = n == SY_AUTOTUNE ? ds_autotune_threads() : n;
    return SY_OK;
}

sy_status sy_dataset_map(const sy_dataset *in, sy_map_fn fn, void *ctx, int32_t num_parallel_calls,
                         const sy_component_spec *out_specs, int32_t n_out, sy_dataset **out) {
    if (out) *out = NULL;
    if (!fn) return sy_error(SY_ERR_INVALID_ARGUMENT, "map: the function is NULL");
    int32_t threads = 0;
    sy_status st = parallel_calls(num_parallel_calls, "map", &threads);
    if (!st) st = ds_specs_check(out_specs, n_out, "map");
    if (!st) st = ds_transform_new(&map_kind, sizeof(map_state), in, out);
    if (st) return st;
    map_state *s = (*out)->state;
    s->fn = fn;
    s->ctx = ctx;
    s->threads = threads;
    s->autotune = num_parallel_calls == SY_AUTOTUNE;
    ds_node_set_specs(*out, out_specs, n_out);
    return SY_OK;
}

/* ---- prefetch ----------------------------------------------------------------------------- */

typedef struct prefetch_state {
    int64_t buffer_size; /* SY_AUTOTUNE or >= 1 */
} prefetch_state;

typedef struct prefetch_iter {
    ds_iter base;
    ds_iter *input; /* the producer's */
    pthread_mutex_t mu;
    pthread_cond_t data, space;
    bool sync, autotune;
    int started;
    pthread_t thread;
    /* under mu */
    ds_queue q;
    int64_t limit;
    bool consumer_waits, producer_waits, done, stop;
    ds_error error; /* after the queued elements */
} prefetch_iter;

static bool prefetch_full(const prefetch_iter *it) {
    return it->q.count >= it->limit || (it->autotune && it->q.count > 0 && it->q.bytes >= DS_PREFETCH_BUDGET);
}

/* A full buffer is refilled once it has drained to half, not element by
 * element: fewer wake-ups for the producer. */
static bool prefetch_half(const prefetch_iter *it) {
    return it->q.count <= it->limit / 2 && (!it->autotune || it->q.bytes < DS_PREFETCH_BUDGET / 2);
}

static void *prefetch_producer(void *arg) {
    prefetch_iter *it = arg;
    for (;;) {
        pthread_mutex_lock(&it->mu);
        if (prefetch_full(it))
            while (!it->stop && !prefetch_half(it)) {
                it->producer_waits = true;
                pthread_cond_wait(&it->space, &it->mu);
                it->producer_waits = false;
            }
        bool stop = it->stop;
        pthread_mutex_unlock(&it->mu);
        if (stop) return NULL;
        sy_element e = {0};
        bool end;
        ds_error error = {0};
        sy_status st = ds_next(it->input, &e, &end);
        pthread_mutex_lock(&it->mu);
        if (!st && !end) st = ds_queue_push(&it->q, &e, "prefetch");
        if (st) {
            sy_element_clear(&e);
            ds_error_capture(&error, st);
            it->error = error;
        }
        it->done = st || end;
        bool done = it->done;
        if (it->consumer_waits) pthread_cond_signal(&it->data);
        pthread_mutex_unlock(&it->mu);
        if (done) return NULL;
    }
}

static sy_status prefetch_next(ds_iter *base, sy_element *out, bool *end) {
    prefetch_iter *it = (prefetch_iter *)base;
    pthread_mutex_lock(&it->mu);
    bool waited = false;
    while (it->q.count == 0 && !it->done) {
        waited = it->consumer_waits = true;
        pthread_cond_wait(&it->data, &it->mu);
        it->consumer_waits = false;
    }
    if (it->q.count > 0) {
        ds_queue_pop(&it->q, out);
        if (it->autotune && waited) it->limit = sy_min64(2 * it->limit, DS_PREFETCH_MAX_ELEMENTS);
        if (it->producer_waits && prefetch_half(it)) pthread_cond_signal(&it->space);
        pthread_mutex_unlock(&it->mu);
        return SY_OK;
    }
    pthread_mutex_unlock(&it->mu);
    if (it->error.status) return ds_error_raise(&it->error);
    *end = true;
    return SY_OK;
}

static void prefetch_release(ds_iter *base) {
    prefetch_iter *it = (prefetch_iter *)base;
    if (it->sync) {
        threads_stop(&it->mu, &it->stop, &it->space, &it->thread, it->started);
        sync_destroy(&it->mu, &it->data, &it->space);
    }
    ds_queue_clear(&it->q);
    ds_error_clear(&it->error);
    ds_iter_free(it->input);
}

static const ds_iter_ops prefetch_iter_ops = {prefetch_next, prefetch_release};

static sy_status prefetch_open(const sy_dataset *d, ds_iter **out) {
    const prefetch_state *s = d->state;
    if (s->buffer_size == 0) return ds_open(d->input[0], out);
    prefetch_iter *it = ds_iter_alloc(sizeof(prefetch_iter), &prefetch_iter_ops, d);
    if (!it) return sy_error(SY_ERR_OUT_OF_MEMORY, "prefetch: out of memory");
    it->autotune = s->buffer_size == SY_AUTOTUNE;
    it->limit = it->autotune ? 1 : s->buffer_size;
    sy_status st = ds_open(d->input[0], &it->input);
    if (!st) {
        sync_init(&it->mu, &it->data, &it->space);
        it->sync = true;
        it->started = ds_threads_start(&it->thread, 1, prefetch_producer, it);
        if (!it->started) st = sy_error(SY_ERR_OUT_OF_MEMORY, "prefetch: could not start its thread");
    }
    if (st) {
        ds_iter_free(&it->base);
        return st;
    }
    *out = &it->base;
    return SY_OK;
}

static const ds_kind prefetch_kind = {"prefetch", prefetch_open, NULL};

sy_status sy_dataset_prefetch(const sy_dataset *in, int64_t buffer_size, sy_dataset **out) {
    if (buffer_size < 0 && buffer_size != SY_AUTOTUNE) {
        if (out) *out = NULL;
        return sy_error(SY_ERR_INVALID_ARGUMENT, "prefetch: buffer_size is %lld; expected SY_AUTOTUNE (-1) or >= 0",
                        (long long)buffer_size);
    }
    sy_status st = ds_transform_new(&prefetch_kind, sizeof(prefetch_state), in, out);
    if (st) return st;
    ((prefetch_state *)(*out)->state)->buffer_size = buffer_size;
    return SY_OK;
}

/* ---- interleave ---------------------------------------------------------------------------- */

typedef struct il_state {
    sy_interleave_fn fn;
    void *ctx;
    int32_t cycle, block, threads; /* threads <= 1: sequential */
} il_state;

/* Read-ahead per open inner dataset: a FIFO of at least IL_QUEUE_MIN
 * elements (2 x block_length when larger) and at most IL_ENTRY_BYTES,
 * refilled when it has drained to half. */
#define IL_QUEUE_MIN 256
#define IL_ENTRY_BYTES ((size_t)4 << 20)

/* An open inner dataset: the dataset made from input element `index`. */
typedef struct il_entry {
    ds_iter *it;
    int64_t index;
    int64_t read; /* elements read from it */
    /* parallel, under mu */
    ds_queue q;
    int chunk; /* elements a worker reads in one turn (ds_chunk_size) */
    bool busy, ended;
    bool refilling; /* drained to half and not yet full again */
    ds_error error; /* after the queued elements */
    struct il_entry *next_free;
} il_entry;

typedef struct il_iter {
    ds_iter base;
    ds_iter *input;
    /* the sequential algorithm's state: the consumer's (slots written under
     * mu when parallel, as workers read them) */
    il_entry **slot; /* cycle of them; NULL: empty */
    int32_t cycle_index, block_index, num_open;
    bool end_of_input;
    il_entry *pool, *free; /* cycle + futures entries, and the unused ones */
    int64_t opened;       /* input elements read (sequential) */
    /* parallel */
    bool parallel, sync;
    int32_t futures, qcap, started; /* qcap: elements a FIFO holds at most */
    pthread_t *thread;
    pthread_mutex_t mu, in_mu;
    pthread_cond_t work, ready;
    atomic_int current; /* the consumer's cycle index: the workers' first choice */
    /* under in_mu */
    int64_t next_input;
    bool in_end;
    /* under mu */
    il_entry **future; /* futures of them; input element k at k % futures */
    int64_t fut_taken, fut_reserved, end_at;
    bool consumer_waits, input_done, stop;
} il_iter;

static il_entry *entry_get(il_iter *it) {
    il_entry *e = it->free;
    SY_ASSERT(e);
    it->free = e->next_free;
    return e;
}

/* Close an entry (not busy) and return it to the pool; mu held when
 * parallel (the inner iterator is freed outside it by the caller). */
static void entry_put(il_iter *it, il_entry *e) {
    ds_queue_clear(&e->q);
    ds_error_clear(&e->error);
    *e = (il_entry){.next_free = it->free};
    it->free = e;
}

/* Read the next input element, make its dataset with fn and open it into
 * e; *got false at the end of the input. Called in input order (in_mu). */
static sy_status il_open_entry(il_iter *it, int64_t index, il_entry *e, bool *got) {
    const sy_dataset *d = it->base.d;
    const il_state *s = d->state;
    sy_element x = {0};
    bool end;
    *got = false;
    sy_status st = ds_next(it->input, &x, &end);
    if (st || end) return st;
    *got = true;
    sy_dataset *inner = NULL;
    sy_clear_error();
    st = s->fn(s->ctx, &x, &inner);
    sy_element_clear(&x);
    if (st) {
        sy_dataset_free(inner);
        return ds_fn_error(st, "interleave", "function", index);
    }
    if (!inner)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "interleave: the function made no dataset for element %lld",
                        (long long)index);
    for (int32_t c = 0; c < d->n && !st; c++) {
        const sy_component_spec *a = c < inner->n ? &inner->spec[c] : NULL, *b = &d->spec[c];
        if (inner->n != d->n || a->dtype != b->dtype || a->shape.rank != b->shape.rank) {
            char x1[DS_SPEC_STR_MAX], x2[DS_SPEC_STR_MAX];
            st = sy_error(SY_ERR_SHAPE, "interleave: the function's dataset for element %lld has %d components "
                          "(component %d: %s) but the declared spec is %d (%s)", (long long)index, (int)inner->n,
                          (int)c, a ? ds_spec_format(a, x1, sizeof x1) : "none", (int)d->n,
                          ds_spec_format(b, x2, sizeof x2));
        }
    }
    if (!st) st = ds_open(inner, &e->it);
    sy_dataset_free(inner);
    e->index = index;
    e->chunk = 1;
    return st;
}

/* One element of e's dataset, checked against the declared specs. */
static sy_status il_read(const sy_dataset *d, il_entry *e, sy_element *out, bool *end) {
    sy_status st = ds_next(e->it, out, end);
    if (st || *end) return st;
    if (ds_element_fits(out, d->spec, d->n)) {
        e->read++;
        return SY_OK;
    }
    char what[128];
    snprintf(what, sizeof what, "interleave: element %lld of the dataset made from input element %lld:",
             (long long)e->read, (long long)e->index);
    st = ds_element_check(out, d->spec, d->n, what);
    sy_element_clear(out);
    return st;
}

/* -- parallel: the workers -- */

/* Whether e's FIFO wants reading: it is open and idle, and has drained to
 * half (elements and bytes) or is being refilled and is not yet full. So
 * a worker, once woken, fills the FIFO in a run of chunks, rather than
 * waking for every chunk the consumer takes. mu held. */
static bool il_full(const il_iter *it, const il_entry *e) {
    return e->q.count >= it->qcap || e->q.bytes >= IL_ENTRY_BYTES;
}

static bool il_wants_read(const il_iter *it, const il_entry *e) {
    if (!e || !e->it || e->busy || e->ended || e->error.status) return false;
    return e->refilling ? !il_full(it, e) : e->q.count <= it->qcap / 2 && e->q.bytes < IL_ENTRY_BYTES / 2;
}

/* The open entry most worth reading ahead, or NULL: the slots from the
 * consumer's, then the futures in input order. mu held. */
static il_entry *il_pick(il_iter *it) {
    const il_state *s = it->base.d->state;
    int32_t cur = atomic_load_explicit(&it->current, memory_order_relaxed);
    for (int32_t i = 0; i < s->cycle + it->futures; i++) {
        il_entry *e = i < s->cycle ? it->slot[(cur + i) % s->cycle]
                                   : it->future[(it->fut_taken + i - s->cycle) % it->futures];
        if (il_wants_read(it, e)) return e;
    }
    return NULL;
}

/* Read a chunk of e's elements outside the lock, then queue them. mu held
 * on entry and on return. */
static void il_work_read(il_iter *it, il_entry *e) {
    sy_element x[DS_CHUNK_MAX];
    int want = (int)sy_min64(e->chunk, it->qcap - e->q.count), got = 0;
    size_t room = IL_ENTRY_BYTES - e->q.bytes;
    e->busy = true;
    pthread_mutex_unlock(&it->mu);
    bool end = false;
    ds_error error = {0};
    sy_status st = SY_OK;
    double t0 = sy_now();
    while (got < want && !st && !end) {
        x[got] = (sy_element){0};
        st = il_read(it->base.d, e, &x[got], &end);
        if (st || end) break;
        size_t bytes = ds_element_bytes(&x[got++]);
        room = room > bytes ? room - bytes : 0;
        if (!room) break;
    }
    double per = got ? (sy_now() - t0) / got : 0;
    if (st) ds_error_capture(&error, st);
    pthread_mutex_lock(&it->mu);
    sy_status pushed = SY_OK; /* the elements read before an error go first */
    for (int i = 0; i < got; i++) {
        if (!pushed) pushed = ds_queue_push(&e->q, &x[i], "interleave");
        if (pushed && !error.status) ds_error_capture(&error, pushed);
        sy_element_clear(&x[i]); /* what was not queued */
    }
    if (got && !error.status) e->chunk = ds_chunk_size(per, DS_CHUNK_MAX);
    e->error = error;
    e->ended = end;
    e->busy = false;
    e->refilling = !il_full(it, e);
    if (it->consumer_waits) pthread_cond_signal(&it->ready);
}

static void il_work_open(il_iter *it) {
    it->fut_reserved++;
    il_entry *e = entry_get(it);
    pthread_mutex_unlock(&it->mu);
    bool got = false;
    sy_status st = SY_OK;
    ds_error error = {0};
    pthread_mutex_lock(&it->in_mu);
    int64_t k = it->next_input;
    bool observed_end = false;
    if (!it->in_end) {
        st = il_open_entry(it, k, e, &got);
        if (st) ds_error_capture(&error, st);
        if (got || st) it->next_input++;
        if (!got || st) it->in_end = observed_end = true;
    }
    pthread_mutex_unlock(&it->in_mu);
    pthread_mutex_lock(&it->mu);
    if (!got && !st) { /* the input has ended: no entry */
        it->fut_reserved--;
        entry_put(it, e);
        if (observed_end) it->end_at = k;
    } else {
        e->error = error;
        e->index = k;
        it->future[k % it->futures] = e;
        if (st) it->end_at = k + 1; /* nothing after an error is needed */
        pthread_cond_signal(&it->work); /* an idle worker may read it ahead */
    }
    if (observed_end) it->input_done = true;
    if (it->consumer_waits) pthread_cond_signal(&it->ready);
}

static void *il_worker(void *arg) {
    il_iter *it = arg;
    pthread_mutex_lock(&it->mu);
    while (!it->stop) {
        il_entry *cur = it->slot[atomic_load_explicit(&it->current, memory_order_relaxed)];
        il_entry *e = il_pick(it);
        if (e && e == cur)
            il_work_read(it, e); /* the consumer's next element first */
        else if (!it->input_done && it->fut_reserved - it->fut_taken < it->futures)
            il_work_open(it);
        else if (e)
            il_work_read(it, e);
        else
            pthread_cond_wait(&it->work, &it->mu);
    }
    pthread_mutex_unlock(&it->mu);
    return NULL;
}

/* -- the consumer's two sources: an element of a slot's dataset, the next
 * input element's dataset -- */

static sy_status il_take(il_iter *it, il_entry *e, sy_element *out, bool *end) {
    if (!it->parallel) return il_read(it->base.d, e, out, end);
    pthread_mutex_lock(&it->mu);
    while (e->q.count == 0 && !e->ended && !e->error.status) {
        it->consumer_waits = true;
        pthread_cond_wait(&it->ready, &it->mu);
        it->consumer_waits = false;
    }
    sy_status st = SY_OK;
    if (e->q.count > 0) {
        bool wanted = il_wants_read(it, e);
        ds_queue_pop(&e->q, out);
        if (!wanted && il_wants_read(it, e)) pthread_cond_signal(&it->work); /* drained to half */
    } else if (e->error.status) {
        st = ds_error_raise(&e->error);
    } else {
        *end = true;
    }
    pthread_mutex_unlock(&it->mu);
    return st;
}

/* The next input element's entry into slot `i`, or none at the end. */
static sy_status il_fill(il_iter *it, int32_t i, bool *got) {
    if (!it->parallel) {
        il_entry *e = entry_get(it);
        sy_status st = il_open_entry(it, it->opened, e, got);
        if (*got) it->opened++;
        if (st || !*got) {
            ds_iter_free(e->it);
            entry_put(it, e);
            return st;
        }
        it->slot[i] = e;
        return SY_OK;
    }
    pthread_mutex_lock(&it->mu);
    il_entry **f;
    while (!*(f = &it->future[it->fut_taken % it->futures]) && !(it->input_done && it->fut_taken >= it->end_at)) {
        it->consumer_waits = true;
        pthread_cond_wait(&it->ready, &it->mu);
        it->consumer_waits = false;
    }
    il_entry *e = *f;
    sy_status st = SY_OK;
    *got = e != NULL;
    if (e) {
        *f = NULL;
        it->fut_taken++;
        pthread_cond_signal(&it->work);
        if (e->error.status && !e->it) /* opening it failed: the input stops here */
            st = ds_error_raise(&e->error);
        it->slot[i] = e;
    }
    pthread_mutex_unlock(&it->mu);
    return st;
}

static void il_close(il_iter *it, int32_t i) {
    il_entry *e = it->slot[i];
    if (it->parallel) pthread_mutex_lock(&it->mu);
    it->slot[i] = NULL;
    if (it->parallel) pthread_mutex_unlock(&it->mu);
    ds_iter_free(e->it);
    e->it = NULL;
    if (it->parallel) pthread_mutex_lock(&it->mu);
    entry_put(it, e);
    if (it->parallel) pthread_mutex_unlock(&it->mu);
}

static void il_advance(il_iter *it) {
    const il_state *s = it->base.d->state;
    it->block_index = 0;
    it->cycle_index = (it->cycle_index + 1) % s->cycle;
    atomic_store_explicit(&it->current, it->cycle_index, memory_order_relaxed);
}

/* tf.data's InterleaveDatasetOp, step for step. */
static sy_status il_next(ds_iter *base, sy_element *out, bool *end) {
    il_iter *it = (il_iter *)base;
    const il_state *s = base->d->state;
    while (!it->end_of_input || it->num_open > 0) {
        if (it->slot[it->cycle_index]) {
            bool inner_end = false;
            sy_status st = il_take(it, it->slot[it->cycle_index], out, &inner_end);
            if (st) return st;
            if (!inner_end) {
                if (++it->block_index == s->block) il_advance(it);
                return SY_OK;
            }
            il_close(it, it->cycle_index);
            it->num_open--;
            il_advance(it);
        } else if (!it->end_of_input) {
            bool got;
            sy_status st = il_fill(it, it->cycle_index, &got);
            if (st) return st;
            if (got)
                it->num_open++;
            else
                it->end_of_input = true;
        } else {
            il_advance(it);
        }
    }
    *end = true;
    return SY_OK;
}

static void il_release(ds_iter *base) {
    il_iter *it = (il_iter *)base;
    const il_state *s = base->d->state;
    if (it->sync) {
        threads_stop(&it->mu, &it->stop, &it->work, it->thread, it->started);
        sync_destroy(&it->mu, &it->work, &it->ready);
        pthread_mutex_destroy(&it->in_mu);
    }
    for (int32_t i = 0; it->pool && i < s->cycle + it->futures; i++) {
        ds_iter_free(it->pool[i].it);
        ds_queue_clear(&it->pool[i].q);
        ds_error_clear(&it->pool[i].error);
    }
    sy_free(it->pool);
    sy_free(it->slot);
    sy_free(it->future);
    sy_free(it->thread);
    ds_iter_free(it->input);
}

static const ds_iter_ops il_iter_ops = {il_next, il_release};

static sy_status il_open(const sy_dataset *d, ds_iter **out) {
    const il_state *s = d->state;
    il_iter *it = ds_iter_alloc(sizeof(il_iter), &il_iter_ops, d);
    if (!it) return sy_error(SY_ERR_OUT_OF_MEMORY, "interleave: out of memory");
    it->parallel = s->threads > 1;
    it->futures = it->parallel ? s->cycle : 0;
    it->qcap = (int32_t)sy_max64(2 * (int64_t)s->block, IL_QUEUE_MIN);
    int32_t entries = s->cycle + it->futures;
    it->slot = sy_calloc((size_t)s->cycle, sizeof *it->slot);
    it->pool = sy_calloc((size_t)entries, sizeof *it->pool);
    bool ok = it->slot && it->pool;
    if (it->parallel) {
        it->future = sy_calloc((size_t)it->futures, sizeof *it->future);
        it->thread = sy_calloc((size_t)s->threads, sizeof *it->thread);
        ok = ok && it->future && it->thread;
    }
    for (int32_t i = entries - 1; ok && i >= 0; i--) {
        it->pool[i].next_free = it->free;
        it->free = &it->pool[i];
    }
    atomic_init(&it->current, 0);
    it->end_at = INT64_MAX;
    sy_status st = ok ? ds_open(d->input[0], &it->input) : sy_error(SY_ERR_OUT_OF_MEMORY, "interleave: out of memory");
    if (!st && it->parallel) {
        sync_init(&it->mu, &it->work, &it->ready);
        it->sync = true;
        pthread_mutex_init(&it->in_mu, NULL);
        it->started = ds_threads_start(it->thread, s->threads, il_worker, it);
        if (it->started < s->threads)
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "interleave: could not start thread %d of %d", it->started + 1,
                          s->threads);
    }
    if (st) {
        ds_iter_free(&it->base);
        return st;
    }
    *out = &it->base;
    return SY_OK;
}

static const ds_kind interleave_kind = {"interleave", il_open, NULL};

sy_status sy_dataset_interleave(const sy_dataset *in, sy_interleave_fn fn, void *ctx, int32_t cycle_length,
                                int32_t block_length, int32_t num_parallel_calls, const sy_component_spec *out_specs,
                                int32_t n_out, sy_dataset **out) {
    if (out) *out = NULL;
    if (!fn) return sy_error(SY_ERR_INVALID_ARGUMENT, "interleave: the function is NULL");
    if (cycle_length < 1 && cycle_length != SY_AUTOTUNE)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "interleave: cycle_length is %d; expected SY_AUTOTUNE (-1) or >= 1",
                        (int)cycle_length);
    if (cycle_length > 4096 || block_length < 1 || block_length > (1 << 20))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "interleave: cycle_length %d and block_length %d; expected at most "
                        "4096 and 1 to 2^20", (int)cycle_length, (int)block_length);
    int32_t threads = 0;
    sy_status st = parallel_calls(num_parallel_calls, "interleave", &threads);
    if (!st) st = ds_specs_check(out_specs, n_out, "interleave");
    if (!st) st = ds_transform_new(&interleave_kind, sizeof(il_state), in, out);
    if (st) return st;
    il_state *s = (*out)->state;
    s->fn = fn;
    s->ctx = ctx;
    s->cycle = cycle_length == SY_AUTOTUNE ? ds_autotune_threads() : cycle_length;
    s->block = block_length;
    /* More readers than open datasets (cycle and futures) would only wait. */
    s->threads = threads > 2 * s->cycle ? 2 * s->cycle : threads;
    ds_node_set_specs(*out, out_specs, n_out);
    (*out)->cardinality = in->cardinality == 0 ? 0 : SY_UNKNOWN;
    return SY_OK;
}
