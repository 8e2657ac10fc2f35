/*
 * consumer.c - an outside program built against the installed libcolibri
 * with pkg-config (see consumer.sh). It uses nothing but <colibri/colibri.h>.
 *
 * Usage: consumer DEMO_MODEL_DIR
 * Exits 0 only if every step worked.
 */
#include <colibri/colibri.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failures++;
}

int main(int argc, char **argv)
{
    const char *missing = "/nonexistent/libcolibri-consumer-model";
    const int codes[] = {COLI_OK, COLI_EINVAL, COLI_ENOENT, COLI_ENOSPC, COLI_EFORMAT};
    const size_t n_codes = sizeof codes / sizeof codes[0];
    coli_model *model = NULL;
    coli_context *ctx = NULL;
    coli_sampler *sampler = NULL;
    coli_sampler_params sp;
    coli_generate_params gp;
    coli_status st;
    int32_t prompt[64], out[8];
    size_t n_prompt = 0, n_out = 0, i, j;
    char text[512];
    size_t text_len = 0;

    setvbuf(stdout, NULL, _IOLBF, 0); /* keep stdout and stderr in order */
    if (argc != 2) {
        fprintf(stderr, "usage: %s DEMO_MODEL_DIR\n", argv[0]);
        return 2;
    }

    printf("libcolibri %s (header %s)\n", coli_version_string(), COLI_VERSION_STRING);
    check(coli_version_number() == COLI_VERSION_NUMBER, "coli_version_number() == COLI_VERSION_NUMBER");
    check(strcmp(coli_version_string(), COLI_VERSION_STRING) == 0,
          "coli_version_string() == COLI_VERSION_STRING");

    for (i = 0; i < n_codes; i++) {
        const char *s = coli_strerror(codes[i]);
        int ok = s != NULL && s[0] != '\0';
        for (j = 0; ok && j < i; j++)
            ok = strcmp(s, coli_strerror(codes[j])) != 0;
        check(ok, coli_status_name(codes[i]));
    }

    st = coli_model_open(missing, NULL, &model);
    check(st == COLI_ENOENT, "opening a missing model gives COLI_ENOENT");
    check(model != NULL && strstr(coli_model_errmsg(model), missing) != NULL,
          "the error message names the path");
    if (model != NULL)
        printf("  (%s: %s)\n", coli_strerror(st), coli_model_errmsg(model));
    coli_model_free(model);
    model = NULL;

    st = coli_model_open(argv[1], NULL, &model);
    check(st == COLI_OK, "opening the demo model");
    if (st != COLI_OK) {
        fprintf(stderr, "consumer: %s: %s\n", coli_strerror(st),
                model ? coli_model_errmsg(model) : argv[1]);
        goto done;
    }

    st = coli_tokenize(model, "In the beginning", strlen("In the beginning"), 1, prompt,
                       sizeof prompt / sizeof prompt[0], &n_prompt);
    check(st == COLI_OK && n_prompt > 0, "tokenizing \"In the beginning\"");
    if (st != COLI_OK || n_prompt == 0)
        goto done;

    st = coli_context_create(model, NULL, &ctx);
    check(st == COLI_OK, "creating a context");
    if (st != COLI_OK)
        goto done;
    coli_sampler_params_init(&sp, sizeof sp); /* greedy */
    st = coli_sampler_create(&sp, &sampler);
    check(st == COLI_OK, "creating a greedy sampler");
    if (st != COLI_OK)
        goto done;

    coli_generate_params_init(&gp, sizeof gp);
    gp.max_tokens = 8;
    st = coli_generate(ctx, prompt, n_prompt, sampler, &gp, out, 8, &n_out, NULL);
    check(st == COLI_OK && n_out >= 1 && n_out <= 8, "generating 8 tokens greedily");
    if (st != COLI_OK) {
        fprintf(stderr, "consumer: %s: %s\n", coli_strerror(st), coli_context_errmsg(ctx));
        goto done;
    }
    printf("tokens:");
    for (i = 0; i < n_out; i++)
        printf(" %" PRId32, out[i]);
    printf("\n");

    st = coli_detokenize(model, out, n_out, 1, text, sizeof text, &text_len);
    check(st == COLI_OK && text_len < sizeof text, "detokenizing them");
    if (st == COLI_OK)
        printf("text: In the beginning%s\n", text);

done:
    coli_sampler_free(sampler);
    coli_context_free(ctx);
    coli_model_free(model);
    printf("%s\n", failures ? "consumer: FAILED" : "consumer: all ok");
    return failures ? 1 : 0;
}
