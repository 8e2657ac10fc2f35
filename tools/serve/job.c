/* job.c - a request shared by an HTTP thread and the scheduler (job.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

job *job_new(void)
{
    job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->top_logprobs = -1;
    return j;
}

void job_ref(job *j)
{
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void job_unref(job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last)
        return;
    for (size_t k = 0; k < j->n_stop; k++)
        free(j->stop[k]);
    free(j->prompt);
    sbuf_free(&j->text);
    sbuf_free(&j->lp);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void job_add_text(job *j, const char *text, size_t len, const char *lp, size_t lp_len)
{
    pthread_mutex_lock(&j->mu);
    /* out of memory loses text; the request still ends */
    if (len)
        sbuf_add(&j->text, text, len);
    if (lp_len) {
        if (j->lp.n)
            sbuf_add(&j->lp, ",", 1);
        sbuf_add(&j->lp, lp, lp_len);
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void job_finish(job *j, finish_reason why, const char *error)
{
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    j->finish = why;
    if (error)
        snprintf(j->error, sizeof j->error, "%s", error);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void job_mark_started(job *j, size_t cached)
{
    pthread_mutex_lock(&j->mu);
    j->started = 1;
    j->cached_tokens = cached;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void job_take(job *j, sbuf *text, sbuf *lp)
{
    *text = j->text;
    *lp = j->lp;
    memset(&j->text, 0, sizeof j->text);
    memset(&j->lp, 0, sizeof j->lp);
}
