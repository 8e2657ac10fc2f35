/* api.c - request bodies into requests (api.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A number field: 0 absent or null, 1 read into *out, -1 wrong (e filled). */
static int num(const coli__json *root, const char *name, double min, double max, double *out, apierr *e)
{
    const coli__json *v = coli__json_get(root, name);
    if (!v || v->type == COLI_JSON_NULL)
        return 0;
    if (v->type != COLI_JSON_NUMBER)
        return api_fail(e, 400, name, "%s must be a number", name);
    double x = coli__json_num(v);
    if (!(x >= min && x <= max))
        return api_fail(e, 400, name, "%s must be between %g and %g (got %g)", name, min, max, x);
    *out = x;
    return 1;
}

/* An integer field, as num. */
static int integer(const coli__json *root, const char *name, int64_t min, int64_t max, int64_t *out, apierr *e)
{
    const coli__json *v = coli__json_get(root, name);
    if (!v || v->type == COLI_JSON_NULL)
        return 0;
    if (v->type != COLI_JSON_NUMBER || !v->is_int)
        return api_fail(e, 400, name, "%s must be an integer", name);
    if (v->integer < min || v->integer > max)
        return api_fail(e, 400, name, "%s must be between %lld and %lld (got %lld)", name, (long long)min,
                        (long long)max, (long long)v->integer);
    *out = v->integer;
    return 1;
}

/* A boolean field, as num. */
static int boolean(const coli__json *root, const char *name, int *out, apierr *e)
{
    const coli__json *v = coli__json_get(root, name);
    if (!v || v->type == COLI_JSON_NULL)
        return 0;
    if (v->type != COLI_JSON_BOOL)
        return api_fail(e, 400, name, "%s must be true or false", name);
    *out = v->boolean;
    return 1;
}

static int add_stop(api_req *r, const coli__json *s, apierr *e)
{
    if (s->type != COLI_JSON_STRING)
        return api_fail(e, 400, "stop", "stop must be a string or an array of strings");
    if (s->len == 0 || memchr(s->str, 0, s->len))
        return api_fail(e, 400, "stop", "a stop string must be non-empty text");
    if (r->n_stop == API_MAX_STOP)
        return api_fail(e, 400, "stop", "at most %d stop strings", API_MAX_STOP);
    if (!(r->stop[r->n_stop] = strdup(s->str)))
        return api_fail(e, 500, NULL, "out of memory");
    r->n_stop++;
    return 0;
}

static uint64_t random_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    static unsigned counter;
    return (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 32) ^
           __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

/* The sampling fields over the defaults. */
static int sampling(const coli__json *root, api_req *r, apierr *e)
{
    double x;
    int64_t i;
    int rc;

    if ((rc = num(root, "temperature", 0, 2, &x, e)) < 0)
        return -1;
    if (rc)
        r->sp.temperature = (float)x;
    if ((rc = num(root, "top_p", 0, 1, &x, e)) < 0)
        return -1;
    if (rc)
        r->sp.top_p = x > 0 ? (float)x : 1e-6f; /* 0: the most likely only */
    if ((rc = integer(root, "top_k", 0, 1 << 20, &i, e)) < 0)
        return -1;
    if (rc)
        r->sp.top_k = (int)i;
    if ((rc = num(root, "min_p", 0, 1, &x, e)) < 0)
        return -1;
    if (rc)
        r->sp.min_p = (float)x;
    if ((rc = num(root, "frequency_penalty", -2, 2, &x, e)) < 0)
        return -1;
    if (rc)
        r->sp.frequency_penalty = (float)x;
    if ((rc = num(root, "presence_penalty", -2, 2, &x, e)) < 0)
        return -1;
    if (rc)
        r->sp.presence_penalty = (float)x;
    if ((rc = num(root, "repeat_penalty", 0.01, 10, &x, e)) < 0)
        return -1;
    if (rc)
        r->sp.repeat_penalty = (float)x;
    if ((rc = integer(root, "seed", INT64_MIN, INT64_MAX, &i, e)) < 0)
        return -1;
    r->sp.seed = rc && i >= 0 ? (uint64_t)i : random_seed(); /* -1: random, as llama.cpp */
    return 0;
}

static int parse_root(const coli__json *root, int chat, const chat_tmpl *tmpl, api_req *r, apierr *e)
{
    int64_t i;
    int rc, b;

    if (root->type != COLI_JSON_OBJECT)
        return api_fail(e, 400, NULL, "the request body must be a JSON object");
    if (sampling(root, r, e) != 0)
        return -1;
    if ((rc = integer(root, "max_tokens", 1, INT32_MAX, &i, e)) < 0)
        return -1;
    if (rc)
        r->max_tokens = (size_t)i;
    if ((rc = integer(root, "max_completion_tokens", 1, INT32_MAX, &i, e)) < 0)
        return -1;
    if (rc)
        r->max_tokens = (size_t)i;
    if ((rc = integer(root, "n", 1, 1, &i, e)) < 0)
        return -1;
    if (boolean(root, "stream", &r->stream, e) < 0)
        return -1;
    const coli__json *so = coli__json_get(root, "stream_options");
    if (so && so->type != COLI_JSON_NULL) {
        if (so->type != COLI_JSON_OBJECT)
            return api_fail(e, 400, "stream_options", "stream_options must be an object");
        if (boolean(so, "include_usage", &r->include_usage, e) < 0)
            return api_fail(e, 400, "stream_options.include_usage", "stream_options.include_usage must be true or false");
    }
    const coli__json *stop = coli__json_get(root, "stop");
    if (stop && stop->type == COLI_JSON_ARRAY) {
        for (uint32_t k = 0; k < stop->len; k++)
            if (add_stop(r, &stop->items[k], e) != 0)
                return -1;
    } else if (stop && stop->type != COLI_JSON_NULL && add_stop(r, stop, e) != 0) {
        return -1;
    }
    b = 0;
    if (boolean(root, "logprobs", &b, e) < 0)
        return -1;
    if ((rc = integer(root, "top_logprobs", 0, 20, &i, e)) < 0)
        return -1;
    if (rc && !b)
        return api_fail(e, 400, "top_logprobs", "top_logprobs needs logprobs: true");
    r->top_logprobs = b ? (rc ? (int)i : 0) : -1;
    if (chat)
        return chat_render(tmpl, root, &r->prompt, &r->prompt_len, e);
    const coli__json *p = coli__json_get(root, "prompt");
    if (p && p->type == COLI_JSON_ARRAY && p->len == 1)
        p = &p->items[0]; /* one prompt in a list */
    if (!p || p->type != COLI_JSON_STRING)
        return api_fail(e, 400, "prompt", "prompt must be a string");
    if (p->len == 0)
        return api_fail(e, 400, "prompt", "prompt is empty");
    if (!(r->prompt = malloc((size_t)p->len + 1)))
        return api_fail(e, 500, NULL, "out of memory");
    memcpy(r->prompt, p->str, (size_t)p->len + 1);
    r->prompt_len = p->len;
    return 0;
}

int api_parse(const char *body, size_t len, int chat, const chat_tmpl *tmpl, const coli_sampler_params *defaults,
              api_req *r, apierr *e)
{
    coli__json_doc *doc = NULL;
    coli__err err;

    memset(r, 0, sizeof *r);
    r->sp = *defaults;
    r->top_logprobs = -1;
    if (coli__json_parse(body, len, "the request body", &doc, &err) != COLI_OK)
        return api_fail(e, 400, NULL, "%s", err.msg);
    int rc = parse_root(coli__json_root(doc), chat, tmpl, r, e);
    coli__json_free(doc);
    if (rc != 0)
        api_req_free(r);
    return rc;
}

void api_req_free(api_req *r)
{
    for (size_t k = 0; k < r->n_stop; k++)
        free(r->stop[k]);
    free(r->prompt);
    memset(r, 0, sizeof *r);
}
