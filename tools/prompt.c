/*
 * prompt.c - the prompt of generate and logits (see prompt.h): which of
 * --prompt, --prompt-file and --prompt-ids gives it, the file read whole,
 * and the message when it does not fit the context.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "errors.h"
#include "model_args.h"
#include "options.h"
#include "prompt.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why the context is full, and what makes room: -c up to the model's
 * maximum, or a shorter prompt past it. The numbers are the context's and
 * the model's own. */
void explain_context(const coli_context *ctx, const coli_model_info *info, size_t n_prompt)
{
    size_t cap = coli_context_capacity(ctx);

    if (n_prompt > (size_t)info->max_positions)
        fprintf(stderr, "%s: the prompt has %zu tokens, more than the model's %d positions: shorten it\n",
                cli_prog, n_prompt, info->max_positions);
    else
        fprintf(stderr, "%s: the prompt has %zu tokens, more than the context's %zu positions: -c %zu or "
                        "more makes room for it (up to the model's %d)\n",
                cli_prog, n_prompt, cap, n_prompt, info->max_positions);
}

/* Exactly one non-empty prompt: --prompt, --prompt-file or --prompt-ids. */
int check_prompt_args(const args *a)
{
    static const int ids[] = {O_PROMPT, O_PROMPT_FILE, O_PROMPT_IDS};
    const char *first = NULL;
    size_t i;

    for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (a->value[ids[i]] == NULL)
            continue;
        if (first != NULL)
            return usage_error("%s and %s cannot be used together", first, cli_opts[ids[i]].name);
        first = cli_opts[ids[i]].name;
    }
    if (first == NULL)
        return usage_error("a prompt is needed: --prompt TEXT, --prompt-file FILE or "
                           "--prompt-ids LIST");
    if (a->value[O_PROMPT] != NULL && a->value[O_PROMPT][0] == '\0')
        return usage_error("the prompt is empty: --prompt needs a text");
    if (a->value[O_PROMPT_FILE] != NULL && a->value[O_PROMPT_FILE][0] == '\0')
        return usage_error("--prompt-file needs a file name ('-' for standard input)");
    return 0;
}

/* The limit of --prompt-file: far beyond any context, small enough to read. */
#define PROMPT_FILE_MAX ((size_t)64 << 20)

/*
 * Reads the prompt file whole ("-": standard input), as it is: no newline is
 * stripped, as llama.cpp keeps its prompt files. The text is NUL-terminated
 * for convenience; *len excludes the NUL. Returns 0, 1 after an error
 * naming the file, or EXIT_USAGE when it is empty.
 */
int read_prompt_file(const char *path, char **text_out, size_t *len_out)
{
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "standard input" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 1;

    *text_out = NULL;
    *len_out = 0;
    if (f == NULL) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, path, strerror(errno));
        return 1;
    }
    for (;;) {
        size_t n;

        if (len == cap) {
            if (cap > PROMPT_FILE_MAX) {
                fprintf(stderr, "%s: %s: larger than the %zu MiB that --prompt-file reads\n",
                        cli_prog, name, PROMPT_FILE_MAX >> 20);
                goto done;
            }
            /* One byte past the limit tells a file over it apart. */
            cap = cap ? 2 * cap : 4096;
            if (cap > PROMPT_FILE_MAX + 1)
                cap = PROMPT_FILE_MAX + 1;
            buf = xrealloc(buf, cap + 1);
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, name, strerror(errno));
        goto done;
    }
    if (len == 0) {
        rc = usage_error("the prompt is empty: %s has no bytes", name);
        goto done;
    }
    buf[len] = '\0';
    *text_out = buf;
    *len_out = len;
    buf = NULL;
    rc = 0;
done:
    if (!is_stdin)
        fclose(f);
    free(buf);
    return rc;
}

/* The prompt as ids (--prompt-ids: *ids) or as text (--prompt, or
 * --prompt-file: *file_text holds the file's copy, for the caller to
 * free); check_prompt_args has made sure at most one is given. */
int prompt_args(const args *a, int32_t **ids, size_t *n_ids, const char **text, size_t *text_len,
                char **file_text)
{
    int rc;

    if (a->value[O_PROMPT_IDS] != NULL)
        return parse_ids("--prompt-ids", a->value[O_PROMPT_IDS], 0, ids, n_ids);
    if (a->value[O_PROMPT] != NULL) {
        *text = a->value[O_PROMPT];
        *text_len = strlen(*text);
    } else if (a->value[O_PROMPT_FILE] != NULL) {
        if ((rc = read_prompt_file(a->value[O_PROMPT_FILE], file_text, text_len)) != 0)
            return rc;
        *text = *file_text;
    }
    return 0;
}

int tokenize_prompt(coli_model *model, const char *text, size_t len, int add_special, int32_t **ids,
                    size_t *n_ids)
{
    if (tokenize_text(model, text, len, add_special, ids, n_ids) != 0)
        return 1;
    if (*n_ids == 0) {
        runtime_error(COLI_EINVAL, "the prompt is empty after tokenization");
        return 1;
    }
    return 0;
}
