/*
 * perplexity.c - `coli perplexity` (see perplexity.h).
 *
 * Token by token, through the public coli_eval: the library gives the
 * logits of the last evaluated position only, and in f32 a prompt evaluated
 * token by token has the bits of one evaluated as a batch, so the figures
 * are those of `coli logits` at every prefix.
 */
#include "perplexity.h"

#include "errors.h"
#include "jsonout.h"
#include "logprob.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A context of one window's positions (opts): its KV cache is no larger. */
static int make_context(coli_model *model, const coli_options *opts, coli_context **out)
{
    coli_status st = coli_context_create(model, opts, out);

    if (st != COLI_OK)
        return runtime_error(st, *out ? coli_context_errmsg(*out) : coli_model_errmsg(model));
    return 0;
}

int perplexity_run(coli_model *test, coli_model *ref, const perplexity_params *p)
{
    coli_model_info info = {.struct_size = sizeof info};
    coli_context *ct = NULL, *cr = NULL;
    size_t window = p->window < p->n_tokens ? p->window : p->n_tokens;
    size_t n_windows = p->n_tokens / window, scored = 0, agree = 0;
    double nll = 0, nll_ref = 0, kl_sum = 0, kl_max = 0;
    int rc = 1;
    coli_status st;

    if ((st = coli_model_get_info(test, &info)) != COLI_OK)
        return runtime_error(st, coli_model_errmsg(test));
    const size_t V = (size_t)info.vocab_size;
    if (make_context(test, p->ctx_opts, &ct) != 0 || (ref && make_context(ref, p->ctx_opts, &cr) != 0))
        goto done;
    for (size_t w = 0; w < n_windows; w++) {
        const int32_t *tok = p->tokens + w * window;
        size_t first = window / 2; /* a window has at least 2 tokens */

        coli_context_reset(ct);
        if (cr)
            coli_context_reset(cr);
        for (size_t k = 0; k + 1 < window; k++) {
            if (eval_one(ct, tok[k]) || (cr && eval_one(cr, tok[k])))
                goto done;
            if (k + 1 < first)
                continue;
            /* token k+1 scored by the logits after 0..k */
            const float *lt = coli_context_logits(ct);
            double lse = logprob_lse(lt, V);
            nll -= logprob_of(lt, lse, tok[k + 1]);
            if (cr) {
                const float *lr = coli_context_logits(cr);
                double lse_r = logprob_lse(lr, V), k1 = logprob_kl(lr, lse_r, lt, lse, V);
                nll_ref -= logprob_of(lr, lse_r, tok[k + 1]);
                kl_sum += k1;
                kl_max = k1 > kl_max ? k1 : kl_max;
                agree += logprob_argmax(lr, V) == logprob_argmax(lt, V);
            }
            scored++;
        }
    }
    double mean = nll / (double)scored, ppl = exp(mean);
    double ppl_ref = exp(nll_ref / (double)scored), kl = kl_sum / (double)scored;
    double top = (double)agree / (double)scored;
    if (p->json) {
        printf("{\"model\":");
        json_string(stdout, p->model_dir, strlen(p->model_dir));
        printf(",\"text_file\":");
        json_string(stdout, p->text_file, strlen(p->text_file));
        printf(",\"weights\":\"%s\",\"tokens\":%zu,\"context\":%zu,\"windows\":%zu,\"scored\":%zu",
               p->name_test, p->n_tokens, window, n_windows, scored);
        printf(",\"mean_nll\":");
        json_real(stdout, mean, "%.17g");
        printf(",\"perplexity\":");
        json_real(stdout, ppl, "%.17g");
        if (cr) {
            printf(",\"against\":\"%s\",\"perplexity_against\":", p->name_ref);
            json_real(stdout, ppl_ref, "%.17g");
            printf(",\"mean_kl\":");
            json_real(stdout, kl, "%.17g");
            printf(",\"max_kl\":");
            json_real(stdout, kl_max, "%.17g");
            printf(",\"top1_agreement\":");
            json_real(stdout, top, "%.6f");
        }
        printf("}\n");
    } else {
        printf("model:              %s\n", p->model_dir);
        printf("weights:            %s\n", p->name_test);
        printf("text:               %s, %zu tokens\n", p->text_file, p->n_tokens);
        printf("windows:            %zu of %zu tokens, %zu tokens scored (the second half of each)\n",
               n_windows, window, scored);
        printf("perplexity:         %.4f (mean NLL %.6f)\n", ppl, mean);
        if (cr) {
            printf("against:            %s, perplexity %.4f\n", p->name_ref, ppl_ref);
            printf("KL divergence:      mean %.6g, max %.6g (KL(%s || %s), nats)\n", kl, kl_max, p->name_ref,
                   p->name_test);
            printf("top-1 agreement:    %.2f%% of the scored positions\n", 100 * top);
        }
    }
    rc = 0;
done:
    coli_context_free(ct);
    coli_context_free(cr);
    return rc;
}
