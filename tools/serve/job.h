/*
 * job.h - one request between the HTTP thread that waits for it and the
 * scheduler thread that runs it: what it asks for, and what has come of
 * it so far, guarded by a mutex and a condition variable. Both sides hold
 * a reference; the last to let go frees it.
 */
#ifndef COLI_SERVE_JOB_H
#define COLI_SERVE_JOB_H

#include <colibri/colibri.h>

#include "sbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define JOB_MAX_STOP 8

/* SHUTDOWN: the server stopped before the job was done (the stop's
 * deadline passed). */
typedef enum finish_reason { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_ERROR, FINISH_SHUTDOWN } finish_reason;

typedef struct job {
    /* the request, fixed once queued */
    int32_t *prompt;
    size_t n_prompt;
    size_t max_tokens;          /* 0: as many as the slot's context holds */
    coli_sampler_params sp;
    char *stop[JOB_MAX_STOP];
    size_t n_stop;
    int top_logprobs;           /* -1: no logprobs; else 0..20 alternatives */
    double queued_at;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    atomic_int cancel;        /* the client went away: the scheduler drops the job */
    /* results, appended by the scheduler under mu */
    sbuf text;                  /* generated text not yet taken by the HTTP side */
    sbuf lp;                    /* logprob entries (JSON objects apart by commas) not yet taken */
    int started;                /* a slot took it */
    int done;
    finish_reason finish;
    char error[256];
    size_t prompt_tokens, cached_tokens, completion_tokens;
    double first_token_at, done_at;
} job;

/* A job with one reference; NULL when memory runs out. */
job *job_new(void);
void job_ref(job *j);
void job_unref(job *j);

/* Scheduler side (they lock mu themselves and wake the waiter). */
void job_add_text(job *j, const char *text, size_t len, const char *lp, size_t lp_len);
void job_finish(job *j, finish_reason why, const char *error);
void job_mark_started(job *j, size_t cached);

/* HTTP side, with mu held: moves the pending text and logprobs to the
 * caller's buffers (which it frees). */
void job_take(job *j, sbuf *text, sbuf *lp);

#endif
