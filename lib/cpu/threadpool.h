/* threadpool.h - a fixed pool of worker threads for data-parallel loops.
 *
 * coli__pool_run splits [0, n) into chunks of `grain` handed out in order
 * through an atomic counter; the calling thread works too. Which thread
 * computes a chunk varies, so callers must make each index's result
 * independent of the others (each output row written by one task): then
 * results are identical for any thread count. */
#ifndef COLI_THREADPOOL_H
#define COLI_THREADPOOL_H

#include <stdint.h>
#include "base/error.h"

typedef struct coli__pool coli__pool;

/* fn computes indices [begin, end); thread is in [0, size). */
typedef void (*coli__task_fn)(void *arg, int64_t begin, int64_t end, int thread);

/* n_threads <= 0 means the number of online cores. */
coli_status coli__pool_create(int n_threads, coli__pool **out, coli__err *err);
void coli__pool_free(coli__pool *pool);
int coli__pool_size(const coli__pool *pool);
/* Runs fn over [0, n) and returns when all of it is done. Not reentrant. */
void coli__pool_run(coli__pool *pool, int64_t n, int64_t grain, coli__task_fn fn, void *arg);

/* Memory the next jobs will read: up to COLI__POOL_HINTS regions that
 * workers waiting for work prefetch (into L2, spilling to L3) while the
 * caller works alone, so that those jobs start from cache. Replaces the
 * previous hint; only speed depends on it. */
#define COLI__POOL_HINTS 16
void coli__pool_hint(coli__pool *pool, const void *const *base, const size_t *len, int n);

/* Number of online cores (at least 1). */
int coli__cpu_count(void);

#endif
