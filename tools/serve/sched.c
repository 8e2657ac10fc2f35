/* sched.c - slots, the queue and the scheduler thread (sched.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "sched.h"

#include "../jsonout.h"
#include "../logprob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Prompt tokens a slot evaluates per step: long prompts are cut up so that
 * decoding slots keep making tokens meanwhile. */
#define PROMPT_CHUNK 256

typedef struct slot {
    coli_context *ctx;
    coli_sampler *smp;
    coli_text_stream *ts;
    job *j;              /* NULL: idle */
    int32_t *toks;       /* the tokens whose positions the KV cache holds */
    size_t n_toks, cap_toks;
    size_t done;         /* prompt tokens evaluated */
    int gen;             /* 1: the prompt is in, decoding */
    int32_t next;        /* the token to evaluate next when decoding */
    size_t n_gen, max;
    uint64_t used;       /* for least recently used */
} slot;

struct sched {
    coli_model *m;
    slot *slots;
    int n_slots;
    size_t capacity;
    pthread_t thread;
    int running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    job **queue;         /* FIFO ring */
    int q_max, q_head, q_n;
    uint64_t tick;
    sched_metrics met;   /* counters (queued, busy and kv filled in on reading) */
    size_t vocab;
    coli_batch_item *items;
    slot **item_slot;
    slot **failed;       /* of a step: slots whose evaluation failed */
    long delay_ns;       /* COLI_SERVE_STEP_DELAY_MS: a pause after each step, for tests */
};

double sched_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i])
        i++;
    return i;
}

/* Frees what the slot's job needed; the KV cache stays for the next. */
static void slot_release(sched *s, slot *sl)
{
    coli_sampler_free(sl->smp);
    coli_text_stream_free(sl->ts);
    sl->smp = NULL;
    sl->ts = NULL;
    job_unref(sl->j);
    sl->j = NULL;
    sl->used = ++s->tick;
}

static void slot_fail(sched *s, slot *sl, const char *msg)
{
    job_finish(sl->j, FINISH_ERROR, msg);
    coli_context_reset(sl->ctx); /* its positions are in doubt */
    sl->n_toks = 0;
    slot_release(s, sl);
}

/* Starts j on sl: the KV cache keeps the longest common prefix. */
static void slot_assign(sched *s, slot *sl, job *j)
{
    size_t cp = common_prefix(sl->toks, sl->n_toks, j->prompt, j->n_prompt);
    if (cp == j->n_prompt)
        cp--; /* the last prompt token is evaluated again for its logits */
    sl->j = j;
    sl->gen = 0;
    sl->n_gen = 0;
    size_t room = s->capacity - j->n_prompt;
    sl->max = j->max_tokens && j->max_tokens < room ? j->max_tokens : room;
    if (coli_context_truncate(sl->ctx, cp) != COLI_OK) {
        coli_context_reset(sl->ctx);
        cp = 0;
    }
    sl->n_toks = sl->done = cp;
    if (sl->cap_toks < s->capacity) {
        int32_t *t = realloc(sl->toks, s->capacity * sizeof *t);
        if (!t) {
            slot_fail(s, sl, "out of memory");
            return;
        }
        sl->toks = t;
        sl->cap_toks = s->capacity;
    }
    coli_status st = coli_sampler_create(&j->sp, &sl->smp);
    if (st == COLI_OK)
        st = coli_sampler_accept(sl->smp, j->prompt, j->n_prompt);
    if (st == COLI_OK)
        st = coli_text_stream_create(s->m, j->prompt, j->n_prompt, (const char *const *)j->stop, j->n_stop,
                                     &sl->ts);
    if (st != COLI_OK) {
        slot_fail(s, sl, coli_strerror(st));
        return;
    }
    s->met.requests++;
    s->met.prompt_tokens += j->n_prompt;
    s->met.cached_tokens += cp;
    pthread_mutex_lock(&j->mu);
    j->prompt_tokens = j->n_prompt;
    pthread_mutex_unlock(&j->mu);
    job_mark_started(j, cp);
}

/* Ends the slot's job with why, after the text held back. */
static void slot_finish(sched *s, slot *sl, finish_reason why)
{
    const char *t = "";
    size_t len = 0;
    if (coli_text_stream_flush(sl->ts, &t, &len) == COLI_OK && len)
        job_add_text(sl->j, t, len, NULL, 0);
    pthread_mutex_lock(&sl->j->mu);
    sl->j->completion_tokens = sl->n_gen;
    sl->j->done_at = sched_now();
    pthread_mutex_unlock(&sl->j->mu);
    job_finish(sl->j, why, NULL);
    slot_release(s, sl);
}

/* One logprob entry in OpenAI's shape for token, from the raw logits. */
static char *logprob_entry(sched *s, const float *logits, int32_t token, int k, size_t *len)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return NULL;
    double lse = logprob_lse(logits, s->vocab);
    int32_t ids[20];
    double lp[20];
    char text[256];
    size_t n;
    logprob_top(logits, s->vocab, lse, (size_t)k, ids, lp);
    for (int i = -1; i < k; i++) {
        int32_t id = i < 0 ? token : ids[i];
        double v = i < 0 ? logprob_of(logits, lse, token) : lp[i];
        if (coli_detokenize(s->m, &id, 1, 0, text, sizeof text, &n) != COLI_OK)
            n = 0;
        if (n >= sizeof text)
            n = sizeof text - 1;
        fputs(i < 1 ? "{\"token\":" : ",{\"token\":", f);
        json_string(f, text, n);
        fputs(",\"logprob\":", f);
        json_real(f, v, "%.6g");
        fputs(",\"bytes\":[", f);
        for (size_t b = 0; b < n; b++)
            fprintf(f, "%s%u", b ? "," : "", (unsigned char)text[b]);
        fputs(i < 0 ? "],\"top_logprobs\":[" : "]}", f);
    }
    fputs("]}", f);
    fclose(f);
    *len = size;
    return buf;
}

/* Samples the slot's next token and passes on its text. */
static void slot_sample(sched *s, slot *sl)
{
    job *j = sl->j;
    const float *logits = coli_context_logits(sl->ctx);
    int32_t tok = 0;
    coli_status st = logits ? coli_sample(sl->smp, sl->ctx, &tok) : COLI_ESTATE;
    if (st != COLI_OK) {
        slot_fail(s, sl, coli_strerror(st));
        return;
    }
    sl->n_gen++;
    s->met.generated_tokens++;
    double now = sl->n_gen == 1 ? sched_now() : 0;
    if (sl->n_gen == 1) {
        s->met.ttft_sum += now - j->queued_at;
        s->met.ttft_count++;
    }
    pthread_mutex_lock(&j->mu);
    if (sl->n_gen == 1)
        j->first_token_at = now;
    j->completion_tokens = sl->n_gen; /* so far: a request cut short logs what it got */
    pthread_mutex_unlock(&j->mu);
    if (coli_model_is_eos(s->m, tok)) {
        slot_finish(s, sl, FINISH_STOP);
        return;
    }
    const char *t = "";
    size_t len = 0, lp_len = 0;
    int stopped = 0;
    if (coli_text_stream_push(sl->ts, tok, &t, &len, &stopped) != COLI_OK) {
        slot_fail(s, sl, "decoding the generated text failed");
        return;
    }
    char *lp = j->top_logprobs >= 0 ? logprob_entry(s, logits, tok, j->top_logprobs, &lp_len) : NULL;
    job_add_text(j, t, len, lp, lp ? lp_len : 0);
    free(lp);
    if (stopped)
        slot_finish(s, sl, FINISH_STOP);
    else if (sl->n_gen >= sl->max || coli_context_position(sl->ctx) + 1 > s->capacity)
        slot_finish(s, sl, FINISH_LENGTH);
    else
        sl->next = tok;
}

/* The idle slot for j: the longest common prefix, else the least
 * recently used. */
static slot *pick_slot(sched *s, const job *j)
{
    slot *best = NULL;
    size_t best_cp = 0;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->j)
            continue;
        size_t cp = common_prefix(sl->toks, sl->n_toks, j->prompt, j->n_prompt);
        if (!best || cp > best_cp || (cp == best_cp && sl->used < best->used)) {
            best = sl;
            best_cp = cp;
        }
    }
    return best;
}

/* Evaluates the step's items (without mu); a failing one is taken out of
 * item_slot into failed, to fail its job alone. */
static void eval_step(sched *s, size_t count)
{
    if (coli_eval_batch(s->items, count) == COLI_OK)
        return;
    for (size_t i = 0; i < count; i++) {
        slot *sl = s->item_slot[i];
        size_t pos = coli_context_position(sl->ctx), want = sl->n_toks + s->items[i].n;
        if (pos == want)
            continue; /* it went through */
        if (coli_context_truncate(sl->ctx, sl->n_toks) != COLI_OK ||
            coli_eval(sl->ctx, s->items[i].tokens, s->items[i].n) != COLI_OK) {
            s->item_slot[i] = NULL;
            s->failed[i] = sl;
        }
    }
}

static void *run(void *arg)
{
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        for (;;) {
            int busy = 0;
            for (int i = 0; i < s->n_slots; i++)
                busy += s->slots[i].j != NULL;
            /* the queue goes to idle slots, oldest first */
            while (s->q_n > 0 && busy < s->n_slots && !s->stopping) {
                job *j = s->queue[s->q_head];
                s->q_head = (s->q_head + 1) % s->q_max;
                s->q_n--;
                if (atomic_load(&j->cancel)) {
                    job_unref(j);
                    continue;
                }
                slot_assign(s, pick_slot(s, j), j);
                busy = 0;
                for (int i = 0; i < s->n_slots; i++)
                    busy += s->slots[i].j != NULL;
            }
            if (busy || s->stopping)
                break;
            pthread_cond_wait(&s->cv, &s->mu);
        }
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        /* slots change under mu (metrics read them); the model runs without it */
        size_t count = 0;
        int decoding = 0;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (!sl->j)
                continue;
            if (atomic_load(&sl->j->cancel)) { /* the client went away */
                job_finish(sl->j, FINISH_ERROR, "canceled");
                slot_release(s, sl);
                continue;
            }
            coli_batch_item *it = &s->items[count];
            it->ctx = sl->ctx;
            if (sl->gen) {
                it->tokens = &sl->next;
                it->n = 1;
                decoding = 1;
            } else {
                size_t left = sl->j->n_prompt - sl->done;
                it->tokens = sl->j->prompt + sl->done;
                it->n = left < PROMPT_CHUNK ? left : PROMPT_CHUNK;
            }
            s->item_slot[count++] = sl;
        }
        pthread_mutex_unlock(&s->mu);
        if (count == 0)
            continue;
        double t0 = sched_now();
        memset(s->failed, 0, count * sizeof *s->failed);
        eval_step(s, count);
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < count; i++)
            if (s->failed[i])
                slot_fail(s, s->failed[i], coli_context_errmsg(s->failed[i]->ctx));
        for (size_t i = 0; i < count; i++) {
            slot *sl = s->item_slot[i];
            if (!sl)
                continue;
            memcpy(sl->toks + sl->n_toks, s->items[i].tokens, s->items[i].n * sizeof *sl->toks);
            sl->n_toks += s->items[i].n;
            if (!sl->gen) {
                sl->done += s->items[i].n;
                if (sl->done < sl->j->n_prompt)
                    continue;
                sl->gen = 1;
            }
            slot_sample(s, sl);
        }
        if (decoding)
            s->met.gen_seconds += sched_now() - t0;
        pthread_mutex_unlock(&s->mu);
        if (s->delay_ns) {
            struct timespec d = {s->delay_ns / 1000000000L, s->delay_ns % 1000000000L};
            nanosleep(&d, NULL);
        }
    }
    return NULL;
}

int sched_start(coli_model *m, const coli_options *ctx_opts, int parallel, int queue_max, sched **out,
                char *err, size_t errcap)
{
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    *out = NULL;
    sched *s = calloc(1, sizeof *s);
    if (!s || coli_model_get_info(m, &info) != COLI_OK) {
        snprintf(err, errcap, "%s", s ? coli_model_errmsg(m) : "out of memory");
        free(s);
        return -1;
    }
    s->m = m;
    s->vocab = (size_t)info.vocab_size;
    s->n_slots = parallel;
    s->q_max = queue_max > 0 ? queue_max : 1;
    s->slots = calloc((size_t)parallel, sizeof *s->slots);
    s->queue = calloc((size_t)s->q_max, sizeof *s->queue);
    s->items = calloc((size_t)parallel, sizeof *s->items);
    s->item_slot = calloc((size_t)parallel, sizeof *s->item_slot);
    s->failed = calloc((size_t)parallel, sizeof *s->failed);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (!s->slots || !s->queue || !s->items || !s->item_slot || !s->failed) {
        snprintf(err, errcap, "out of memory for %d slots", parallel);
        sched_free(s);
        return -1;
    }
    for (int i = 0; i < parallel; i++) {
        coli_status st = coli_context_create(m, ctx_opts, &s->slots[i].ctx);
        if (st != COLI_OK) {
            snprintf(err, errcap, "slot %d: %s: %s", i, coli_strerror(st), coli_model_errmsg(m));
            sched_free(s);
            return -1;
        }
    }
    s->capacity = coli_context_capacity(s->slots[0].ctx);
    /* tests make requests slow enough to disconnect from or queue behind */
    const char *delay = getenv("COLI_SERVE_STEP_DELAY_MS");
    if (delay && atol(delay) > 0 && atol(delay) <= 10000)
        s->delay_ns = atol(delay) * 1000000L;
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        snprintf(err, errcap, "cannot start the scheduler thread");
        sched_free(s);
        return -1;
    }
    s->running = 1;
    *out = s;
    return 0;
}

size_t sched_stop(sched *s)
{
    size_t ended = 0;
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->running)
        pthread_join(s->thread, NULL);
    s->running = 0;
    pthread_mutex_lock(&s->mu);
    for (; s->q_n > 0; s->q_n--, s->q_head = (s->q_head + 1) % s->q_max) {
        job *j = s->queue[s->q_head];
        ended += !atomic_load(&j->cancel);
        job_finish(j, FINISH_SHUTDOWN, "the server stopped before the request was done");
        job_unref(j);
    }
    for (int i = 0; s->slots && i < s->n_slots; i++)
        if (s->slots[i].j) {
            slot *sl = &s->slots[i];
            const char *t = "";
            size_t len = 0;
            /* the text held back for a stop string is the client's too */
            if (sl->ts && coli_text_stream_flush(sl->ts, &t, &len) == COLI_OK && len)
                job_add_text(sl->j, t, len, NULL, 0);
            pthread_mutex_lock(&sl->j->mu);
            sl->j->completion_tokens = sl->n_gen;
            pthread_mutex_unlock(&sl->j->mu);
            ended += !atomic_load(&sl->j->cancel);
            job_finish(sl->j, FINISH_SHUTDOWN, "the server stopped before the request was done");
            slot_release(s, sl);
        }
    pthread_mutex_unlock(&s->mu);
    return ended;
}

int sched_idle(sched *s)
{
    pthread_mutex_lock(&s->mu);
    int idle = s->q_n == 0;
    for (int i = 0; idle && i < s->n_slots; i++)
        idle = s->slots[i].j == NULL;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

void sched_free(sched *s)
{
    if (!s)
        return;
    sched_stop(s);
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        coli_context_free(s->slots[i].ctx);
        free(s->slots[i].toks);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->slots);
    free(s->queue);
    free(s->items);
    free(s->item_slot);
    free(s->failed);
    free(s);
}

size_t sched_slot_capacity(const sched *s)
{
    return s->capacity;
}

int sched_submit(sched *s, job *j)
{
    pthread_mutex_lock(&s->mu);
    if (s->q_n >= s->q_max || s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    job_ref(j);
    j->queued_at = sched_now();
    s->queue[(s->q_head + s->q_n) % s->q_max] = j;
    s->q_n++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void sched_metrics_get(sched *s, sched_metrics *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->met;
    out->queued = (size_t)s->q_n;
    out->slots = (size_t)s->n_slots;
    out->busy = 0;
    out->kv_used = 0;
    for (int i = 0; i < s->n_slots; i++) {
        out->busy += s->slots[i].j != NULL;
        out->kv_used += s->slots[i].n_toks;
    }
    out->kv_total = (uint64_t)s->capacity * (uint64_t)s->n_slots;
    pthread_mutex_unlock(&s->mu);
}
