/*
 * sched.h - the slots and the scheduler thread: --parallel contexts of one
 * model, each with its own KV cache, and a bounded queue of jobs waiting
 * for one. One thread runs the model; each step evaluates every busy
 * slot's next piece (a chunk of its prompt, or its last token) in one
 * coli_eval_batch, then samples each slot and hands its text to its job.
 */
#ifndef COLI_SERVE_SCHED_H
#define COLI_SERVE_SCHED_H

#include "job.h"

typedef struct sched sched;

typedef struct sched_metrics {
    size_t queued, busy, slots;
    uint64_t kv_used, kv_total;        /* positions, over every slot */
    uint64_t requests, prompt_tokens, cached_tokens, generated_tokens;
    double ttft_sum;                   /* seconds, over ttft_count requests */
    uint64_t ttft_count;
    double gen_seconds;                /* time of steps that generated tokens */
} sched_metrics;

/* Creates the slots (contexts with ctx_opts, NULL: the model's) and
 * starts the thread. 0, or -1 with a message in err. */
int sched_start(coli_model *m, const coli_options *ctx_opts, int parallel, int queue_max, sched **out,
                char *err, size_t errcap);
/* Stops the thread and ends every job left, queued or running, with
 * FINISH_SHUTDOWN; later submissions are refused. Metrics can still be
 * read until sched_free. The number of jobs it ended. */
size_t sched_stop(sched *s);
/* Whether no job runs or waits. */
int sched_idle(sched *s);
void sched_free(sched *s);
/* Positions of each slot's context. */
size_t sched_slot_capacity(const sched *s);
/* Queues j (taking a reference): 0, or -1 when the queue is full. */
int sched_submit(sched *s, job *j);
void sched_metrics_get(sched *s, sched_metrics *out);
/* Seconds of a monotonic clock. */
double sched_now(void);

#endif
