/*
 * prompt.h - the prompt of generate and logits: --prompt, --prompt-file or
 * --prompt-ids, the file read whole (perplexity reads its --text-file so
 * too), and what to say when the prompt does not fit the context.
 */
#ifndef COLI_TOOLS_PROMPT_H
#define COLI_TOOLS_PROMPT_H

#include <colibri/colibri.h>

#include "options.h"

#include <stddef.h>
#include <stdint.h>

/* Why the prompt of n_prompt tokens does not fit ctx, and what makes room
 * (-c, or a shorter prompt), on stderr. */
void explain_context(const coli_context *ctx, const coli_model_info *info, size_t n_prompt);
/* Exactly one non-empty prompt: 0, or EXIT_USAGE after a message. */
int check_prompt_args(const args *a);
/* Reads the file path ("-": standard input) whole, at most 64 MiB, into a
 * NUL-terminated *text_out (the caller frees it), *len_out bytes without
 * the NUL; 0, 1 after an error naming the file, or EXIT_USAGE when empty. */
int read_prompt_file(const char *path, char **text_out, size_t *len_out);
/* The prompt as ids (*ids, *n_ids) or as text (*text, *text_len; from
 * --prompt-file, *file_text holds it for the caller to free); 0, or the
 * status of the failure after a message. */
int prompt_args(const args *a, int32_t **ids, size_t *n_ids, const char **text, size_t *text_len,
                char **file_text);
/* The ids of a text prompt into *ids (the caller frees it), *n_ids of
 * them; 0, or 1 after a message (the library's, or that the prompt is
 * empty once tokenized). */
int tokenize_prompt(coli_model *model, const char *text, size_t len, int add_special, int32_t **ids,
                    size_t *n_ids);

#endif /* COLI_TOOLS_PROMPT_H */
