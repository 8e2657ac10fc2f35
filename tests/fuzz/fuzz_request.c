/* fuzz_request.c - libFuzzer target for coli serve's request parser
 * (tools/serve/api.c, chat.c): an OpenAI request body, as a completion and
 * as a chat through the Qwen3 template, must come out either as a request
 * whose fields are in their documented ranges or as a 4xx naming its
 * reason; never a crash, a leak or an unbounded run. */
#include <stdlib.h>
#include <string.h>

#include "fuzzutil.h"
#include "../../tools/serve/api.h"

/* The Qwen3 family's template (tests/data/templates/qwen3.jinja), read once. */
static chat_tmpl g_tmpl;
static coli_sampler_params g_defaults;

static char *read_text(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *p = f ? malloc(1 << 16) : NULL;
    *n = p ? fread(p, 1, 1 << 16, f) : 0;
    if (f)
        fclose(f);
    return p;
}

static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    coli_sampler_params_init(&g_defaults, sizeof g_defaults);
    size_t n = 0;
    char *src = read_text(COLI_SRCDIR "/tests/data/templates/qwen3.jinja", &n);
    FZ_CHECK(src != NULL, "cannot read the Qwen3 template");
    char err[256];
    FZ_CHECK(coli_chat_template_compile(src, n, &g_tmpl.t, err, sizeof err) == COLI_OK, "%s", err);
    g_tmpl.bos = "";
    g_tmpl.eos = "<|im_end|>";
    free(src);
}

static void check(const char *body, size_t len, int chat)
{
    api_req r;
    apierr e;
    memset(&r, 0, sizeof r);
    memset(&e, 0, sizeof e);
    if (api_parse(body, len, chat, &g_tmpl, &g_defaults, &r, &e) == 0) {
        FZ_CHECK(r.prompt != NULL, "a parsed request without a prompt");
        FZ_CHECK(r.n_stop <= API_MAX_STOP, "%zu stop strings", r.n_stop);
        FZ_CHECK(r.sp.temperature >= 0 && r.sp.temperature <= 2, "temperature %g", (double)r.sp.temperature);
        FZ_CHECK(r.sp.top_p > 0 && r.sp.top_p <= 1, "top_p %g", (double)r.sp.top_p);
        FZ_CHECK(r.sp.min_p >= 0 && r.sp.min_p <= 1, "min_p %g", (double)r.sp.min_p);
        FZ_CHECK(r.top_logprobs >= -1 && r.top_logprobs <= 20, "top_logprobs %d", r.top_logprobs);
        /* the sampler accepts what the parser let through */
        coli_sampler *s = NULL;
        FZ_CHECK(coli_sampler_create(&r.sp, &s) == COLI_OK, "the sampler refuses parsed settings");
        coli_sampler_free(s);
    } else {
        FZ_CHECK(e.status >= 400 && e.status < 600, "status %d", e.status);
        FZ_CHECK(e.message[0] != '\0', "an error without a message (status %d)", e.status);
    }
    api_req_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    check((const char *)data, size, 0);
    check((const char *)data, size, 1);
    return 0;
}
