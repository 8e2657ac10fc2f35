/*
 * perplexity.h - `coli perplexity`: the perplexity of a model on a text, and
 * optionally how far its next-token distributions stray from the same model
 * in a reference format (mean KL divergence, top-token agreement), in the
 * manner of llama.cpp's llama-perplexity.
 */
#ifndef COLI_TOOLS_PERPLEXITY_H
#define COLI_TOOLS_PERPLEXITY_H

#include <colibri/colibri.h>

#include <stddef.h>
#include <stdint.h>

typedef struct perplexity_params {
    const char *model_dir, *text_file;  /* for the report */
    const char *name_test, *name_ref;   /* format names; name_ref NULL without a reference */
    const int32_t *tokens;
    size_t n_tokens;
    size_t window;                      /* tokens per window, >= 2 */
    const coli_options *ctx_opts;       /* the contexts' options: a window's positions, threads, log */
    int json;
} perplexity_params;

/*
 * Splits the tokens into windows of p->window tokens (one window of all of
 * them when there are fewer; a remainder shorter than a window is left
 * out), evaluates each window from an empty context one token at a time,
 * and scores every token of its second half (from index window/2, at least
 * 1) by its log-probability under the logits of the position before it.
 * With ref, the same positions are evaluated in ref too, for KL(ref || test)
 * and the share of positions whose most likely tokens agree. Prints the
 * report. Returns 0, or 1 after printing the library's message.
 */
int perplexity_run(coli_model *test, coli_model *ref, const perplexity_params *p);

#endif /* COLI_TOOLS_PERPLEXITY_H */
