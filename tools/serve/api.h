/*
 * api.h - an OpenAI request body into what a job needs: the prompt (text
 * of /v1/completions, or messages through the chat template), sampling
 * settings over the server's defaults, stop strings, length, streaming
 * and logprobs. Unknown fields are ignored and null means the default;
 * a value of the wrong type or out of range is a 400 naming the field.
 */
#ifndef COLI_SERVE_API_H
#define COLI_SERVE_API_H

#include "apierr.h"
#include "chat.h"
#include "job.h"

/* Stop strings a request may give (as OpenAI allows). */
#define API_MAX_STOP 4

typedef struct api_req {
    char *prompt;          /* malloc'd */
    size_t prompt_len;
    size_t max_tokens;     /* 0: as many as the slot holds */
    coli_sampler_params sp;
    char *stop[API_MAX_STOP];
    size_t n_stop;
    int stream, include_usage;
    int top_logprobs;      /* -1: no logprobs */
} api_req;

/* Parses body: chat (messages through tmpl) or a completion (prompt). */
int api_parse(const char *body, size_t len, int chat, const chat_tmpl *tmpl, const coli_sampler_params *defaults,
              api_req *r, apierr *e);
void api_req_free(api_req *r);

#endif
