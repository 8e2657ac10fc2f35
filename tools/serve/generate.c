/* generate.c - /v1/completions and /v1/chat/completions: the request
 * becomes a job for the scheduler; this thread (one per connection) waits
 * for it, whole or as server-sent events. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "server.h"

#include "api.h"
#include "respond.h"
#include "think.h"

#include <microhttpd.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Seconds of silence before a stream sends a ":" comment (a ping). */
#define PING_SECONDS 3

static const char *finish_name(finish_reason f)
{
    switch (f) {
    case FINISH_LENGTH: return "length";
    case FINISH_SHUTDOWN: return "server_shutdown";
    case FINISH_ERROR: return "error";
    default: return "stop";
    }
}

/* What a client is told of a job that failed: the detail (which may name
 * a file of the model) goes to the log only. */
static void job_failed(reqlog *log, const char *detail, apierr *e)
{
    snprintf(log->error, sizeof log->error, "%s", detail);
    api_fail(e, 500, NULL, "the server failed to generate the reply (its log has the detail)");
}

/* Waits on j's condition variable for at most secs seconds (mu held). */
static void wait_job(job *j, double secs)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_nsec * 1e-9 + secs;
    ts.tv_sec += (time_t)t;
    ts.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

/* Whether the client closed its side (a blocking request has no write to
 * tell). */
static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    char b;
    if (!i)
        return 0;
    ssize_t n = recv(i->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* ---- streaming ---------------------------------------------------------- */

typedef struct stream {
    job *j;
    reqlog *log;       /* the request's; used only while the stream is read */
    resp_meta meta;
    int include_usage, logprobs;
    think th;
    sbuf out;          /* bytes not yet sent */
    size_t off;
    int role_sent, finished;
} stream;

/* An event "data: <chunk>\n\n": begun into a memory stream, then
 * appended to the bytes to send. */
static void event_begin(FILE **f, char **p, size_t *n)
{
    *f = open_memstream(p, n);
    if (*f)
        fputs("data: ", *f);
}

static void event_end(stream *st, FILE *f, char **p, size_t *n)
{
    if (!f)
        return;
    fputs("\n\n", f);
    fclose(f); /* sets *p and *n */
    sbuf_add(&st->out, *p, *n);
    free(*p);
    *p = NULL;
}

/* Turns what the job has made since the last call into events. */
static void stream_fill(stream *st)
{
    job *j = st->j;
    sbuf text, lp;
    FILE *f;
    char *p = NULL;
    size_t n = 0;

    if (st->meta.chat && !st->role_sent) {
        event_begin(&f, &p, &n);
        if (f)
            resp_chunk(f, &st->meta, 1, NULL, NULL);
        event_end(st, f, &p, &n);
        st->role_sent = 1;
        return;
    }
    pthread_mutex_lock(&j->mu);
    if (!j->text.n && !j->lp.n && !j->done)
        wait_job(j, PING_SECONDS);
    if (!j->text.n && !j->lp.n && !j->done) {
        pthread_mutex_unlock(&j->mu);
        sbuf_str(&st->out, ":\n\n");
        return;
    }
    job_take(j, &text, &lp);
    int done = j->done;
    finish_reason why = j->finish;
    resp_usage u = {j->prompt_tokens, j->completion_tokens, j->cached_tokens};
    char error[sizeof j->error];
    memcpy(error, j->error, sizeof error);
    pthread_mutex_unlock(&j->mu);

    resp_piece piece;
    sbuf content = {0}, reasoning = {0};
    memset(&piece, 0, sizeof piece);
    if (st->meta.chat) {
        think_feed(&st->th, text.p ? text.p : "", text.n, done, &reasoning, &content);
        piece.content = content.p;
        piece.content_len = content.n;
        piece.reasoning = reasoning.p;
        piece.reasoning_len = reasoning.n;
    } else {
        piece.content = text.p;
        piece.content_len = text.n;
    }
    piece.lp = st->logprobs && lp.n ? lp.p : NULL;
    piece.lp_len = lp.n;
    if (piece.content_len || piece.reasoning_len || piece.lp) {
        event_begin(&f, &p, &n);
        if (f)
            resp_chunk(f, &st->meta, 0, &piece, NULL);
        event_end(st, f, &p, &n);
    }
    st->log->tokens = 1;
    st->log->prompt_tokens = u.prompt;
    st->log->completion_tokens = u.completion;
    if (done) {
        st->log->end = finish_name(why);
        event_begin(&f, &p, &n);
        if (f && why == FINISH_ERROR) {
            apierr e;
            job_failed(st->log, error, &e);
            api_error_json(f, &e);
        } else if (f) {
            resp_chunk(f, &st->meta, 0, NULL, finish_name(why));
        }
        event_end(st, f, &p, &n);
        if (why != FINISH_ERROR && st->include_usage) {
            event_begin(&f, &p, &n);
            if (f)
                resp_usage_chunk(f, &st->meta, &u);
            event_end(st, f, &p, &n);
        }
        if (why != FINISH_ERROR)
            sbuf_str(&st->out, "data: [DONE]\n\n");
        st->finished = 1;
    }
    sbuf_free(&text);
    sbuf_free(&lp);
    sbuf_free(&content);
    sbuf_free(&reasoning);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *st = cls;
    (void)pos;
    while (st->off == st->out.n) {
        st->off = st->out.n = 0;
        if (st->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        stream_fill(st);
    }
    size_t n = st->out.n - st->off;
    if (n > max)
        n = max;
    memcpy(buf, st->out.p + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* The response is gone (done, or the client went away): the scheduler
 * drops the job at its next step if it still runs. */
static void stream_free(void *cls)
{
    stream *st = cls;
    atomic_store(&st->j->cancel, 1);
    job_unref(st->j);
    think_free(&st->th);
    sbuf_free(&st->out);
    free(st);
}

/* ---- blocking ------------------------------------------------------------ */

static int whole(const request *rq, job *j, const resp_meta *meta, int logprobs, struct MHD_Response **resp)
{
    apierr e;
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        wait_job(j, 1.0);
        if (!j->done && client_gone(rq->conn)) {
            atomic_store(&j->cancel, 1);
            pthread_mutex_unlock(&j->mu);
            rq->log->end = "client_gone";
            api_fail(&e, 499, NULL, "the client went away");
            return reply_error(&e, resp);
        }
    }
    sbuf text, lp;
    job_take(j, &text, &lp);
    finish_reason why = j->finish;
    resp_usage u = {j->prompt_tokens, j->completion_tokens, j->cached_tokens};
    rq->log->tokens = 1;
    rq->log->prompt_tokens = u.prompt;
    rq->log->completion_tokens = u.completion;
    rq->log->end = finish_name(why);
    if (why == FINISH_ERROR)
        job_failed(rq->log, j->error, &e);
    else if (why == FINISH_SHUTDOWN)
        api_fail(&e, 503, NULL, "the server stopped before the request was done (--stop-timeout)");
    pthread_mutex_unlock(&j->mu);
    if (why == FINISH_ERROR || why == FINISH_SHUTDOWN) {
        sbuf_free(&text);
        sbuf_free(&lp);
        return reply_error(&e, resp);
    }
    resp_piece piece;
    sbuf content = {0}, reasoning = {0};
    think th;
    memset(&piece, 0, sizeof piece);
    think_start(&th, meta->thinking);
    if (meta->chat) {
        think_feed(&th, text.p ? text.p : "", text.n, 1, &reasoning, &content);
        piece.content = content.p;
        piece.content_len = content.n;
        piece.reasoning = reasoning.p;
        piece.reasoning_len = reasoning.n;
    } else {
        piece.content = text.p;
        piece.content_len = text.n;
    }
    piece.lp = logprobs ? (lp.p ? lp.p : "") : NULL;
    piece.lp_len = lp.n;
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (f) {
        resp_whole(f, meta, &piece, finish_name(why), &u);
        fclose(f);
    }
    think_free(&th);
    sbuf_free(&text);
    sbuf_free(&lp);
    sbuf_free(&content);
    sbuf_free(&reasoning);
    *resp = f ? reply_json(body, len) : NULL;
    return 200;
}

/* ---- both ---------------------------------------------------------------- */

/* The request as a job (its prompt tokenized), or NULL with e filled. */
static job *make_job(const request *rq, api_req *r, int chat, apierr *e)
{
    server *s = rq->srv;
    size_t cap = r->prompt_len + 8, n = 0;
    job *j = job_new();
    if (!j || !(j->prompt = malloc(cap * sizeof *j->prompt))) {
        job_unref(j);
        api_fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    /* a chat prompt has its special tokens in the template's text */
    coli_status st = coli_tokenize(s->model, r->prompt, r->prompt_len, !chat, j->prompt, cap, &n);
    if (st == COLI_ENOSPC && n > cap) {
        int32_t *more = realloc(j->prompt, n * sizeof *more);
        if (more) {
            j->prompt = more;
            st = coli_tokenize(s->model, r->prompt, r->prompt_len, !chat, j->prompt, n, &n);
        }
    }
    j->n_prompt = n;
    size_t room = sched_slot_capacity(s->sched);
    if (st != COLI_OK || n == 0) {
        if (st != COLI_OK)
            snprintf(rq->log->error, sizeof rq->log->error, "%s", coli_model_errmsg(s->model));
        api_fail(e, 400, chat ? "messages" : "prompt", "the prompt cannot be tokenized: %s",
                 st != COLI_OK ? coli_strerror(st) : "it has no tokens");
    } else if (n >= room) {
        api_fail(e, 400, chat ? "messages" : "prompt",
                 "the request (%zu prompt tokens) exceeds the available context size (%zu tokens per slot, "
                 "--ctx-size)",
                 n, room);
        e->type = "exceed_context_size_error";
    } else {
        j->max_tokens = r->max_tokens;
        j->sp = r->sp;
        for (size_t k = 0; k < r->n_stop; k++) {
            j->stop[k] = r->stop[k];
            r->stop[k] = NULL;
        }
        j->n_stop = r->n_stop;
        r->n_stop = 0;
        j->top_logprobs = r->top_logprobs;
        return j;
    }
    job_unref(j);
    return NULL;
}

static int generate(const request *rq, int chat, struct MHD_Response **resp)
{
    server *s = rq->srv;
    api_req r;
    apierr e;
    resp_meta meta;

    if (api_parse(rq->body, rq->len, chat, &s->tmpl, &s->defaults, &r, &e) != 0)
        return reply_error(&e, resp);
    job *j = make_job(rq, &r, chat, &e);
    int opened = chat && think_opened(r.prompt, r.prompt_len);
    int stream_it = r.stream, include_usage = r.include_usage, logprobs = r.top_logprobs >= 0;
    api_req_free(&r);
    if (!j)
        return reply_error(&e, resp);
    if (sched_submit(s->sched, j) != 0) {
        job_unref(j);
        api_fail(&e, 503, NULL, "the server is busy: every slot is taken and the queue is full (--queue)");
        return reply_error(&e, resp);
    }
    resp_meta_init(&meta, chat, s->model_name);
    meta.thinking = opened;
    snprintf(rq->log->id, sizeof rq->log->id, "%s", meta.id);
    if (!stream_it) {
        int status = whole(rq, j, &meta, logprobs, resp);
        job_unref(j);
        return status;
    }
    stream *st = calloc(1, sizeof *st);
    if (!st) {
        atomic_store(&j->cancel, 1);
        job_unref(j);
        api_fail(&e, 500, NULL, "out of memory");
        return reply_error(&e, resp);
    }
    st->j = j;
    st->log = rq->log;
    st->meta = meta;
    think_start(&st->th, meta.thinking);
    st->include_usage = include_usage;
    st->logprobs = logprobs;
    *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
    if (!*resp) {
        stream_free(st);
        return 500;
    }
    MHD_add_response_header(*resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(*resp, "Cache-Control", "no-cache");
    return 200;
}

int ep_completions(const request *rq, struct MHD_Response **resp)
{
    return generate(rq, 0, resp);
}

int ep_chat(const request *rq, struct MHD_Response **resp)
{
    return generate(rq, 1, resp);
}
