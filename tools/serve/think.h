/*
 * think.h - splits a thinking model's reply: text between <think> and
 * </think> at its start is reasoning, the rest content. Text that could
 * still begin a tag is held back, so no partial tag reaches the content.
 */
#ifndef COLI_SERVE_THINK_H
#define COLI_SERVE_THINK_H

#include "sbuf.h"

typedef struct think {
    int state;      /* 0: undecided, 1: reasoning, 2: content */
    int trim;       /* 1: drop the blanks right after </think> */
    sbuf hold;
} think;

/* 1 when the prompt (trailing blanks aside) ends with <think>: templates
 * of models that always think open the block themselves, and the reply
 * begins inside it. */
int think_opened(const char *prompt, size_t len);
/* A splitter for a reply whose prompt opened the block (opened = 1) or
 * not. */
void think_start(think *t, int opened);

/* Feeds text; appends what is decided to reasoning and content. final:
 * the reply is complete, nothing is held back. */
void think_feed(think *t, const char *s, size_t n, int final, sbuf *reasoning, sbuf *content);
void think_free(think *t);

#endif
