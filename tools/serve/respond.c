/* respond.c - OpenAI response bodies (respond.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "respond.h"

#include "../jsonout.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

void resp_meta_init(resp_meta *m, int chat, const char *model)
{
    static atomic_uint_fast64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t n = atomic_fetch_add(&counter, 1) + 1;
    uint64_t z = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)ts.tv_sec << 20) ^ n;
    snprintf(m->id, sizeof m->id, "%s-%016llx%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)z,
             (unsigned long long)n);
    m->created = (long long)ts.tv_sec;
    m->model = model;
    m->chat = chat;
}

void resp_usage_json(FILE *f, const resp_usage *u)
{
    fprintf(f,
            "{\"prompt_tokens\":%zu,\"completion_tokens\":%zu,\"total_tokens\":%zu,"
            "\"prompt_tokens_details\":{\"cached_tokens\":%zu}}",
            u->prompt, u->completion, u->prompt + u->completion, u->cached);
}

static void head(FILE *f, const resp_meta *m, const char *object)
{
    fputs("{\"id\":", f);
    json_string(f, m->id, strlen(m->id));
    fprintf(f, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object, m->created);
    json_string(f, m->model, strlen(m->model));
}

static void logprobs(FILE *f, const resp_piece *p)
{
    fputs(",\"logprobs\":", f);
    if (!p->lp) {
        fputs("null", f);
        return;
    }
    fputs("{\"content\":[", f);
    fwrite(p->lp, 1, p->lp_len, f);
    fputs("]}", f);
}

static void finish_json(FILE *f, const char *finish)
{
    fputs(",\"finish_reason\":", f);
    if (finish)
        fprintf(f, "\"%s\"", finish);
    else
        fputs("null", f);
}

void resp_whole(FILE *f, const resp_meta *m, const resp_piece *p, const char *finish, const resp_usage *u)
{
    head(f, m, m->chat ? "chat.completion" : "text_completion");
    fputs(",\"choices\":[{\"index\":0,", f);
    if (m->chat) {
        fputs("\"message\":{\"role\":\"assistant\",\"content\":", f);
        json_string(f, p->content ? p->content : "", p->content_len);
        if (p->reasoning_len) {
            fputs(",\"reasoning_content\":", f);
            json_string(f, p->reasoning, p->reasoning_len);
        }
        fputc('}', f);
    } else {
        fputs("\"text\":", f);
        json_string(f, p->content ? p->content : "", p->content_len);
    }
    logprobs(f, p);
    finish_json(f, finish);
    fputs("}],\"usage\":", f);
    resp_usage_json(f, u);
    fputc('}', f);
}

void resp_chunk(FILE *f, const resp_meta *m, int role, const resp_piece *p, const char *finish)
{
    head(f, m, m->chat ? "chat.completion.chunk" : "text_completion");
    fputs(",\"choices\":[{\"index\":0,", f);
    if (m->chat) {
        fputs("\"delta\":{", f);
        const char *sep = "";
        if (role) {
            fputs("\"role\":\"assistant\",\"content\":null", f);
            sep = ",";
        }
        if (p && p->content_len) {
            fprintf(f, "%s\"content\":", sep);
            json_string(f, p->content, p->content_len);
            sep = ",";
        }
        if (p && p->reasoning_len) {
            fprintf(f, "%s\"reasoning_content\":", sep);
            json_string(f, p->reasoning, p->reasoning_len);
        }
        fputc('}', f);
    } else {
        fputs("\"text\":", f);
        json_string(f, p && p->content ? p->content : "", p ? p->content_len : 0);
    }
    if (p && p->lp) {
        logprobs(f, p);
    } else {
        fputs(",\"logprobs\":null", f);
    }
    finish_json(f, finish);
    fputs("}]}", f);
}

void resp_usage_chunk(FILE *f, const resp_meta *m, const resp_usage *u)
{
    head(f, m, m->chat ? "chat.completion.chunk" : "text_completion");
    fputs(",\"choices\":[],\"usage\":", f);
    resp_usage_json(f, u);
    fputc('}', f);
}
