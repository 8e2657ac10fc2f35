/*
 * respond.h - the JSON bodies of OpenAI's responses: a whole completion or
 * chat completion, the chunks of a stream (one per event), and usage.
 */
#ifndef COLI_SERVE_RESPOND_H
#define COLI_SERVE_RESPOND_H

#include <stddef.h>
#include <stdio.h>

typedef struct resp_meta {
    char id[48];          /* "chatcmpl-..." or "cmpl-..." */
    long long created;    /* Unix seconds */
    const char *model;
    int chat;
    int thinking;         /* the chat prompt opened a <think> block (think.h) */
} resp_meta;

typedef struct resp_usage {
    size_t prompt, completion, cached;
} resp_usage;

/* A piece of a reply: content and reasoning text, logprob entries (JSON
 * objects apart by commas; lp NULL: logprobs were not asked for). */
typedef struct resp_piece {
    const char *content, *reasoning, *lp;
    size_t content_len, reasoning_len, lp_len;
} resp_piece;

void resp_meta_init(resp_meta *m, int chat, const char *model);
void resp_usage_json(FILE *f, const resp_usage *u);
/* The blocking response; finish: "stop" or "length". */
void resp_whole(FILE *f, const resp_meta *m, const resp_piece *p, const char *finish, const resp_usage *u);
/* One stream chunk: role (chat's first chunk), the piece, finish or NULL. */
void resp_chunk(FILE *f, const resp_meta *m, int role, const resp_piece *p, const char *finish);
/* The chunk of stream_options.include_usage: no choices, the usage. */
void resp_usage_chunk(FILE *f, const resp_meta *m, const resp_usage *u);

#endif
