/*
 * cmd_tokens.c - the commands that show the model's view of a text:
 * `coli logits` (the next-token logits of a prompt), `coli tokenize` and
 * `coli detokenize`.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "commands.h"
#include "errors.h"
#include "help_texts.h"
#include "jsonout.h"
#include "model_args.h"
#include "options.h"
#include "prompt.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- coli logits ---------------------------------------------------------- */

const char logits_synopsis[] =
    "Usage: coli logits [--model DIR] --prompt TEXT [OPTION]...\n"
    "  or:  coli logits [--model DIR] --prompt-file FILE [OPTION]...\n"
    "  or:  coli logits [--model DIR] --prompt-ids ID,ID,... [OPTION]...\n"
    "Run the model on the prompt and print the next-token logits of its last\n"
    "position, for the whole vocabulary.\n";

const opthelp logits_options[] = {
    H_MODEL,
    {O_PROMPT, "prompt text, tokenized with the model's tokenizer"},
    {O_PROMPT_FILE, "read the prompt text from FILE ('-': standard\ninput), byte for byte, "
                    "at most 64 MiB"},
    {O_PROMPT_IDS, "prompt as token ids apart by commas or spaces\n(as coli tokenize prints them)"},
    {O_NO_SPECIAL, "do not add the tokenizer's special tokens to the\nprompt text"},
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CONTEXT,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "json ({\"logits\":[...]}) or text (one per line)\n(default json)"},
    H_VERBOSE,
    H_END,
};

int cmd_logits(const args *a)
{
    model_args m;
    coli_model_info info;
    coli_model *model = NULL;
    coli_context *ctx = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0, text_len = 0;
    const char *text = NULL; /* the prompt text, if not ids */
    char *file_text = NULL;
    const float *logits;
    int json, rc, i;
    coli_status st;

    if ((rc = parse_format(a, 1, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if ((rc = check_prompt_args(a)) != 0)
        return rc;
    if ((rc = prompt_args(a, &prompt, &n_prompt, &text, &text_len, &file_text)) != 0)
        return rc;

    rc = 1;
    if (open_model(&m, &model) != 0 || get_info(model, &info) != 0)
        goto done;
    if (text != NULL) {
        if (tokenize_prompt(model, text, text_len, !a->given[O_NO_SPECIAL], &prompt, &n_prompt) != 0)
            goto done;
    }
    st = coli_context_create(model, NULL, &ctx);
    if (st != COLI_OK) {
        runtime_error(st, ctx ? coli_context_errmsg(ctx) : coli_model_errmsg(model));
        goto done;
    }
    st = coli_eval(ctx, prompt, n_prompt);
    if (st != COLI_OK) {
        runtime_error(st, coli_context_errmsg(ctx));
        if (st == COLI_ENOSPC)
            explain_context(ctx, &info, n_prompt);
        goto done;
    }
    logits = coli_context_logits(ctx);
    if (logits == NULL) {
        runtime_error(COLI_ESTATE, "no logits after evaluation");
        goto done;
    }
    if (json) {
        fputs("{\"logits\":[", stdout);
        for (i = 0; i < info.vocab_size; i++) {
            if (i)
                fputc(',', stdout);
            json_real(stdout, logits[i], "%.9g");
        }
        fputs("]}\n", stdout);
    } else {
        for (i = 0; i < info.vocab_size; i++)
            printf("%.9g\n", logits[i]);
    }
    rc = 0;
done:
    coli_context_free(ctx);
    coli_model_free(model);
    free(prompt);
    free(file_text);
    return rc;
}

/* ---- coli tokenize -------------------------------------------------------- */

const char tokenize_synopsis[] =
    "Usage: coli tokenize [--model DIR] --text STR [OPTION]...\n"
    "Print the token ids of a text.\n";

const opthelp tokenize_options[] = {
    H_MODEL,
    {O_TEXT, "the UTF-8 text to encode"},
    {O_NO_SPECIAL, "do not add the tokenizer's special tokens"},
    {O_FORMAT, "text (ids separated by spaces) or json\n({\"ids\":[...]}) (default text)"},
    H_VERBOSE,
    H_END,
};

int cmd_tokenize(const args *a)
{
    model_args m;
    coli_model *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0, i;
    int json, rc;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (a->value[O_TEXT] == NULL)
        return usage_error("--text is required");
    m.gpu.gpu = 0; /* only the tokenizer is used: no weights to place */

    rc = 1;
    if (open_model(&m, &model) != 0)
        goto done;
    if (tokenize_text(model, a->value[O_TEXT], strlen(a->value[O_TEXT]), !a->given[O_NO_SPECIAL],
                      &ids, &n) != 0)
        goto done;
    if (json) {
        fputs("{\"ids\":", stdout);
        json_ids(stdout, ids, n);
        fputs("}\n", stdout);
    } else {
        for (i = 0; i < n; i++)
            printf("%s%" PRId32, i ? " " : "", ids[i]);
        putchar('\n');
    }
    rc = 0;
done:
    coli_model_free(model);
    free(ids);
    return rc;
}

/* ---- coli detokenize ------------------------------------------------------ */

const char detokenize_synopsis[] =
    "Usage: coli detokenize [--model DIR] --ids ID,ID,... [OPTION]...\n"
    "Print the text of a list of token ids.\n";

const opthelp detokenize_options[] = {
    H_MODEL,
    {O_IDS, "token ids apart by commas or spaces"},
    {O_SKIP_SPECIAL, "leave special tokens out of the text"},
    {O_FORMAT, "text or json ({\"text\":\"...\"}) (default text)"},
    H_VERBOSE,
    H_END,
};

int cmd_detokenize(const args *a)
{
    model_args m;
    coli_model *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char *text = NULL;
    int json, rc;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (a->value[O_IDS] == NULL)
        return usage_error("--ids is required");
    if ((rc = parse_ids("--ids", a->value[O_IDS], 1, &ids, &n)) != 0)
        return rc;
    m.gpu.gpu = 0; /* only the tokenizer is used: no weights to place */

    rc = 1;
    if (open_model(&m, &model) != 0)
        goto done;
    if (detokenize_ids(model, ids, n, a->given[O_SKIP_SPECIAL], &text, &len) != 0)
        goto done;
    if (json) {
        fputs("{\"text\":", stdout);
        json_string(stdout, text, len);
        fputs("}\n", stdout);
    } else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
    }
    rc = 0;
done:
    coli_model_free(model);
    free(ids);
    free(text);
    return rc;
}
