/* threadpool.c - workers that spin briefly, then sleep on a condition
 * variable, waiting for the next generation of work. Spinning keeps the
 * many small per-layer loops of a decode step cheap; sleeping keeps idle
 * contexts from burning cores.
 *
 * A job waits only for the workers that joined it. A worker joins by
 * counting itself in while the job is open; the caller closes the job
 * once every chunk is handed out and waits for the ones inside. A worker
 * that the kernel (or the hypervisor) kept off its core meanwhile misses
 * the job instead of stalling it: with as many threads as cores and one
 * core shared with another program, waiting for every worker made each
 * of a decode step's many small jobs last a time slice. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/threadpool.h"

#define SPIN_ROUNDS 20000

struct coli__pool {
    int size;                 /* workers + the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t done_cv;
    pthread_cond_t started_cv;
    int started;              /* workers that have begun (under mu) */
    /* Each field that many cores touch at once has a cache line of its
     * own: the spinning workers read generation and quit, so a write to a
     * neighbour (a worker taking a chunk, or checking out) would send the
     * line round every core, about 15 times 15 transfers per hand-out
     * with 16 threads. */
    /* the current job: written by the caller before it bumps generation */
    _Alignas(64) coli__task_fn fn;
    void *arg;
    int64_t n, grain;
    _Alignas(64) atomic_uint generation; /* bumped for each job */
    atomic_int quit;
    _Alignas(64) atomic_llong next;      /* next chunk start */
    /* the job's tag (generation << 1 | closed) above the count of workers
     * inside it: one word, so that joining checks the tag atomically */
    _Alignas(64) _Atomic uint64_t state;
    /* memory the next jobs will read, prefetched by idle workers; on its
     * own cache lines, away from the fields every hand-out writes */
    _Alignas(64) atomic_size_t hint_off; /* next byte of the regions, as one sequence */
    atomic_size_t hint_total;             /* their lengths' sum */
    atomic_uintptr_t hint_base[COLI__POOL_HINTS];
    atomic_size_t hint_len[COLI__POOL_HINTS];
};

typedef struct worker_arg {
    coli__pool *pool;
    int id;
} worker_arg;

int coli__cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void work(coli__pool *p, int id)
{
    for (;;) {
        int64_t b = atomic_fetch_add_explicit(&p->next, p->grain, memory_order_relaxed);
        if (b >= p->n)
            break;
        int64_t e = b + p->grain < p->n ? b + p->grain : p->n;
        p->fn(p->arg, b, e, id);
    }
}

#define HINT_STEP 4096

/* One HINT_STEP of the hinted regions into this core's caches, or 0 when
 * none is left. A stale region only wastes a prefetch: prefetches never
 * fault, and the address is formed as an integer. */
static int prefetch_hint(coli__pool *p)
{
    /* a plain load first: spinning workers must not keep writing the line */
    if (atomic_load_explicit(&p->hint_off, memory_order_relaxed) >=
        atomic_load_explicit(&p->hint_total, memory_order_relaxed))
        return 0;
    size_t o = atomic_fetch_add_explicit(&p->hint_off, HINT_STEP, memory_order_relaxed);
    for (int i = 0; i < COLI__POOL_HINTS; i++) {
        size_t len = atomic_load_explicit(&p->hint_len[i], memory_order_relaxed);
        if (o < len) {
            uintptr_t a = atomic_load_explicit(&p->hint_base[i], memory_order_relaxed) + o;
            size_t n = len - o < HINT_STEP ? len - o : HINT_STEP;
            for (size_t k = 0; k < n; k += 64)
                __builtin_prefetch((const void *)(a + k), 0, 1);
            return 1;
        }
        o -= len;
    }
    return 0;
}

void coli__pool_hint(coli__pool *p, const void *const *base, const size_t *len, int n)
{
    if (!p || p->size == 1)
        return;
    size_t total = 0;
    atomic_store_explicit(&p->hint_total, 0, memory_order_relaxed);
    atomic_store_explicit(&p->hint_off, 0, memory_order_relaxed);
    for (int i = 0; i < COLI__POOL_HINTS; i++) {
        size_t l = i < n && base[i] ? len[i] : 0;
        atomic_store_explicit(&p->hint_base[i], i < n ? (uintptr_t)base[i] : 0, memory_order_relaxed);
        atomic_store_explicit(&p->hint_len[i], l, memory_order_relaxed);
        total += l;
    }
    atomic_store_explicit(&p->hint_total, total, memory_order_relaxed);
}

#define CLOSED ((uint64_t)1 << 32)
#define INSIDE 0xffffffffu

static uint64_t open_state(unsigned generation)
{
    return (uint64_t)(uint32_t)(generation << 1) << 32;
}

/* Counts the worker into job `generation` unless it is closed or past. */
static int join_job(coli__pool *p, unsigned generation)
{
    uint64_t want = open_state(generation);
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    while ((s & ~(uint64_t)INSIDE) == want)
        if (atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acquire,
                                                  memory_order_acquire))
            return 1;
    return 0;
}

static void leave_job(coli__pool *p)
{
    uint64_t s = atomic_fetch_sub_explicit(&p->state, 1, memory_order_acq_rel) - 1;
    if ((s & INSIDE) == 0 && (s & CLOSED)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *worker_main(void *vp)
{
    worker_arg *wa = vp;
    coli__pool *p = wa->pool;
    int id = wa->id;
    free(wa);
    /* begun: what the C library sets aside for this thread (its malloc
     * arena, at its first free) is set aside before coli__pool_create
     * returns, not at some later moment of the caller's */
    pthread_mutex_lock(&p->mu);
    p->started++;
    pthread_cond_signal(&p->started_cv);
    pthread_mutex_unlock(&p->mu);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->quit) && spins < SPIN_ROUNDS) {
            if (!prefetch_hint(p))
                cpu_relax();
            spins++;
        }
        if (g == seen && !atomic_load(&p->quit)) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            return NULL;
        seen = g;
        /* the job's fields are read only inside it: the caller rewrites
         * them once the last worker inside has left */
        if (!join_job(p, g))
            continue;
        work(p, id);
        leave_job(p);
    }
}

coli_status coli__pool_create(int n_threads, coli__pool **out, coli__err *err)
{
    *out = NULL;
    if (n_threads <= 0)
        n_threads = coli__cpu_count();
    if (n_threads > 1024)
        n_threads = 1024;
    /* its alignment (64, for the hint lines) is more than calloc's */
    size_t bytes = (sizeof(coli__pool) + 63) & ~(size_t)63;
    coli__pool *p = aligned_alloc(64, bytes);
    if (!p)
        return coli__fail(err, COLI_ENOMEM, "out of memory creating a thread pool");
    memset(p, 0, bytes);
    p->size = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    pthread_cond_init(&p->started_cv, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->state, CLOSED);
    atomic_init(&p->quit, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->hint_off, 0);
    atomic_init(&p->hint_total, 0);
    for (int i = 0; i < COLI__POOL_HINTS; i++) {
        atomic_init(&p->hint_base[i], 0);
        atomic_init(&p->hint_len[i], 0);
    }
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            p->size = 1; /* no worker to join */
            coli__pool_free(p);
            return coli__fail(err, COLI_ENOMEM, "out of memory creating a thread pool");
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->pool = p;
            wa->id = i;
        }
        int rc = wa ? pthread_create(&p->threads[i - 1], NULL, worker_main, wa) : -1;
        if (rc != 0) {
            free(wa);
            p->size = i; /* only the ones started are joined */
            coli__pool_free(p);
            return coli__fail(err, COLI_ENOMEM, "cannot start worker thread %d of %d", i, n_threads);
        }
    }
    /* a pool's memory is the same whenever the caller allocates after it
     * (the KV cache's "at most N positions fit" holds on the next run) */
    pthread_mutex_lock(&p->mu);
    while (p->started < n_threads - 1)
        pthread_cond_wait(&p->started_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    *out = p;
    return COLI_OK;
}

void coli__pool_free(coli__pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->size; i++)
        pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->started_cv);
    free(p);
}

int coli__pool_size(const coli__pool *p)
{
    return p ? p->size : 1;
}

void coli__pool_run(coli__pool *p, int64_t n, int64_t grain, coli__task_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!p || p->size == 1 || n <= grain) {
        fn(arg, 0, n, 0);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->grain = grain;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    unsigned g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->state, open_state(g), memory_order_release);
    atomic_store_explicit(&p->generation, g, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    /* every chunk is handed out: no one joins now, and the ones inside
     * finish theirs */
    uint64_t s = atomic_fetch_or_explicit(&p->state, CLOSED, memory_order_acq_rel) | CLOSED;
    int spins = 0;
    while ((s & INSIDE) && spins < SPIN_ROUNDS * 4) {
        cpu_relax();
        spins++;
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
    if (s & INSIDE) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->state) & INSIDE)
            pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
