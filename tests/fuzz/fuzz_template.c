/* fuzz_template.c - libFuzzer target for the chat template engine
 * (lib/chat, through the public API).
 *
 * Input: a template, a NUL byte, then the variables as JSON; without a NUL
 * the whole input is the template and the variables are a fixed small
 * conversation. Whatever the input: no crash, no leak, a bounded run, and
 * every refusal is one of the documented statuses with a message; an
 * output is NUL-terminated at its length. */
#include <string.h>

#include "fuzzutil.h"

static const char default_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"hi\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>x</think>ok\", \"tool_calls\": [{\"function\":"
    " {\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}, {\"role\": \"tool\", \"content\": \"r\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], \"add_generation_prompt\": true,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const char *sep = memchr(src, '\0', size);
    size_t tn = sep ? (size_t)(sep - src) : size;
    const char *vars = sep ? sep + 1 : default_vars;
    size_t vn = sep ? size - tn - 1 : strlen(default_vars);

    char err[256];
    coli_chat_template *t = NULL;
    coli_status st = coli_chat_template_compile(src, tn, &t, err, sizeof err);
    if (st != COLI_OK) {
        FZ_CHECK(t == NULL, "a failed compile returned a template");
        FZ_CHECK(st == COLI_EFORMAT || st == COLI_ERANGE || st == COLI_ENOMEM, "compile gave %s",
                 coli_status_name(st));
        FZ_CHECK(err[0] != '\0', "compile failed (%s) without a message", coli_status_name(st));
        return 0;
    }
    char *out = NULL;
    size_t n = 0;
    st = coli_chat_template_render(t, vars, vn, &out, &n, err, sizeof err);
    if (st == COLI_OK) {
        FZ_CHECK(out != NULL && out[n] == '\0', "output not NUL-terminated at its length");
    } else {
        FZ_CHECK(out == NULL, "a failed render returned output");
        FZ_CHECK(st == COLI_EINVAL || st == COLI_EFORMAT || st == COLI_ERANGE || st == COLI_ENOMEM,
                 "render gave %s", coli_status_name(st));
        FZ_CHECK(err[0] != '\0', "render failed (%s) without a message", coli_status_name(st));
    }
    coli_free(out);
    coli_chat_template_free(t);
    return 0;
}
