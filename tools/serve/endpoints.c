/* endpoints.c - the endpoints that run no generation: /health, /models,
 * /metrics, /tokenize, /detokenize and /apply-template. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "server.h"

#include "../jsonout.h"
#include "io/json.h"

#include <microhttpd.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A body being written, and the reply made of it. */
typedef struct out {
    char *p;
    size_t n;
    FILE *f;
} out;

static int out_open(out *o, apierr *e)
{
    o->p = NULL;
    o->n = 0;
    o->f = open_memstream(&o->p, &o->n);
    return o->f ? 0 : api_fail(e, 500, NULL, "out of memory");
}

static int out_reply(out *o, int status, struct MHD_Response **resp)
{
    fclose(o->f);
    *resp = reply_json(o->p, o->n);
    return status;
}

/* The body as a JSON object: *doc to free, or -1 with e filled. */
static int body_object(const request *rq, coli__json_doc **doc, apierr *e)
{
    coli__err err;
    if (coli__json_parse(rq->body, rq->len, "the request body", doc, &err) != COLI_OK)
        return api_fail(e, 400, NULL, "%s", err.msg);
    if (coli__json_root(*doc)->type != COLI_JSON_OBJECT) {
        coli__json_free(*doc);
        *doc = NULL;
        return api_fail(e, 400, NULL, "the request body must be a JSON object");
    }
    return 0;
}

int ep_health(const request *rq, struct MHD_Response **resp)
{
    apierr e;
    if (!atomic_load(&rq->srv->ready)) {
        api_fail(&e, 503, NULL, "Loading model");
        return reply_error(&e, resp);
    }
    char *body = strdup("{\"status\":\"ok\"}");
    *resp = body ? reply_json(body, strlen(body)) : NULL;
    return 200;
}

int ep_models(const request *rq, struct MHD_Response **resp)
{
    apierr e;
    out o;
    if (out_open(&o, &e) != 0)
        return reply_error(&e, resp);
    fputs("{\"object\":\"list\",\"data\":[{\"id\":", o.f);
    json_string(o.f, rq->srv->model_name, strlen(rq->srv->model_name));
    fprintf(o.f, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"colibri\"}]}", rq->srv->started);
    return out_reply(&o, 200, resp);
}

static void metric(FILE *f, const char *name, const char *type, const char *help, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

int ep_metrics(const request *rq, struct MHD_Response **resp)
{
    sched_metrics m;
    apierr e;
    out o;
    if (out_open(&o, &e) != 0)
        return reply_error(&e, resp);
    sched_metrics_get(rq->srv->sched, &m);
    metric(o.f, "coli_queue_depth", "gauge", "Requests waiting for a slot.", (double)m.queued);
    metric(o.f, "coli_slots_busy", "gauge", "Slots running a request.", (double)m.busy);
    metric(o.f, "coli_slots_total", "gauge", "Slots (--parallel).", (double)m.slots);
    metric(o.f, "coli_kv_positions_used", "gauge", "KV cache positions filled, over all slots.", (double)m.kv_used);
    metric(o.f, "coli_kv_positions_total", "gauge", "KV cache positions, over all slots.", (double)m.kv_total);
    metric(o.f, "coli_requests_total", "counter", "Requests that got a slot.", (double)m.requests);
    metric(o.f, "coli_prompt_tokens_total", "counter", "Prompt tokens of those requests.", (double)m.prompt_tokens);
    metric(o.f, "coli_prompt_tokens_cached_total", "counter", "Prompt tokens found in a slot's KV cache.",
           (double)m.cached_tokens);
    metric(o.f, "coli_generated_tokens_total", "counter", "Tokens generated.", (double)m.generated_tokens);
    fprintf(o.f, "# HELP coli_time_to_first_token_seconds Time from arrival to the first token.\n"
                 "# TYPE coli_time_to_first_token_seconds summary\n"
                 "coli_time_to_first_token_seconds_sum %.17g\ncoli_time_to_first_token_seconds_count %" PRIu64 "\n",
            m.ttft_sum, m.ttft_count);
    guard_stats g;
    guard_stats_get(rq->srv->guard, &g);
    metric(o.f, "coli_connections_open", "gauge", "TCP connections open.", (double)g.open);
    metric(o.f, "coli_connections_waiting", "gauge",
           "Connections idle or still sending their request (--idle-timeout, --request-timeout).",
           (double)g.waiting);
    fputs("# HELP coli_connections_closed_total Connections the server closed, by why "
          "(docs/serving.md, Limits).\n# TYPE coli_connections_closed_total counter\n",
          o.f);
    for (int k = GCUT_IDLE; k < GCUT_COUNT; k++)
        fprintf(o.f, "coli_connections_closed_total{reason=\"%s\"} %" PRIu64 "\n", guard_cut_name((gcut)k),
                g.cut[k]);
    metric(o.f, "coli_connections_refused_total", "counter",
           "New connections refused (--max-connections, --max-client-connections).", (double)g.refused);
    metric(o.f, "coli_generation_tokens_per_second", "gauge",
           "Tokens generated per second of the steps that generated them.",
           m.gen_seconds > 0 ? (double)m.generated_tokens / m.gen_seconds : 0.0);
    fclose(o.f);
    *resp = MHD_create_response_from_buffer(o.n, o.p, MHD_RESPMEM_MUST_FREE);
    if (*resp)
        MHD_add_response_header(*resp, "Content-Type", "text/plain; version=0.0.4");
    else
        free(o.p);
    return 200;
}

int ep_tokenize(const request *rq, struct MHD_Response **resp)
{
    coli__json_doc *doc = NULL;
    apierr e;
    out o;
    if (body_object(rq, &doc, &e) != 0)
        return reply_error(&e, resp);
    const coli__json *root = coli__json_root(doc), *content = coli__json_get(root, "content");
    const coli__json *special = coli__json_get(root, "add_special");
    if (!content || content->type != COLI_JSON_STRING) {
        coli__json_free(doc);
        api_fail(&e, 400, "content", "content must be a string");
        return reply_error(&e, resp);
    }
    if (special && special->type != COLI_JSON_BOOL && special->type != COLI_JSON_NULL) {
        coli__json_free(doc);
        api_fail(&e, 400, "add_special", "add_special must be true or false");
        return reply_error(&e, resp);
    }
    size_t cap = (size_t)content->len + 8, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    coli_status st = ids ? coli_tokenize(rq->srv->model, content->str, content->len,
                                         special && special->type == COLI_JSON_BOOL && special->boolean, ids, cap,
                                         &n)
                         : COLI_ENOMEM;
    coli__json_free(doc);
    if (st != COLI_OK || out_open(&o, &e) != 0) {
        free(ids);
        api_fail(&e, 500, NULL, "tokenizing failed: %s", coli_strerror(st));
        return reply_error(&e, resp);
    }
    fputs("{\"tokens\":", o.f);
    json_ids(o.f, ids, n);
    fputc('}', o.f);
    free(ids);
    return out_reply(&o, 200, resp);
}

int ep_detokenize(const request *rq, struct MHD_Response **resp)
{
    coli__json_doc *doc = NULL;
    apierr e;
    out o;
    if (body_object(rq, &doc, &e) != 0)
        return reply_error(&e, resp);
    const coli__json *tokens = coli__json_get(coli__json_root(doc), "tokens");
    if (!tokens || tokens->type != COLI_JSON_ARRAY) {
        coli__json_free(doc);
        api_fail(&e, 400, "tokens", "tokens must be an array of token ids");
        return reply_error(&e, resp);
    }
    size_t n = tokens->len;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < n; i++) {
        const coli__json *t = &tokens->items[i];
        if (t->type != COLI_JSON_NUMBER || !t->is_int || t->integer < 0 ||
            (uint64_t)t->integer >= (uint64_t)rq->srv->vocab) {
            free(ids);
            coli__json_free(doc);
            api_fail(&e, 400, "tokens", "tokens[%zu] is not a token id (0 to %zu)", i,
                     rq->srv->vocab ? rq->srv->vocab - 1 : 0);
            return reply_error(&e, resp);
        }
        ids[i] = (int32_t)t->integer;
    }
    coli__json_free(doc);
    size_t len = 0;
    char one;
    coli_status st = ids ? coli_detokenize(rq->srv->model, ids, n, 0, &one, 1, &len) : COLI_ENOMEM;
    char *text = st == COLI_OK || st == COLI_ENOSPC ? malloc(len + 1) : NULL;
    if (text)
        st = coli_detokenize(rq->srv->model, ids, n, 0, text, len + 1, &len);
    free(ids);
    if (!text || st != COLI_OK) {
        free(text);
        /* the library's message names the tokenizer's file: for the log only */
        snprintf(rq->log->error, sizeof rq->log->error, "%s", coli_model_errmsg(rq->srv->model));
        api_fail(&e, st == COLI_EINVAL ? 400 : 500, "tokens", "the tokens cannot be detokenized: %s",
                 coli_strerror(st));
        return reply_error(&e, resp);
    }
    if (out_open(&o, &e) != 0) {
        free(text);
        return reply_error(&e, resp);
    }
    fputs("{\"content\":", o.f);
    json_string(o.f, text, len);
    fputc('}', o.f);
    free(text);
    return out_reply(&o, 200, resp);
}

int ep_apply_template(const request *rq, struct MHD_Response **resp)
{
    coli__json_doc *doc = NULL;
    apierr e;
    out o;
    char *prompt = NULL;
    size_t len = 0;
    if (body_object(rq, &doc, &e) != 0)
        return reply_error(&e, resp);
    int rc = chat_render(&rq->srv->tmpl, coli__json_root(doc), &prompt, &len, &e);
    coli__json_free(doc);
    if (rc != 0 || out_open(&o, &e) != 0) {
        free(prompt);
        return reply_error(&e, resp);
    }
    fputs("{\"prompt\":", o.f);
    json_string(o.f, prompt, len);
    fputc('}', o.f);
    free(prompt);
    return out_reply(&o, 200, resp);
}
