/* compare.c - `coli compare`: top-1 agreement, KL divergence and greedy
 * agreement of one weight format against another. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "errors.h"
#include "jsonout.h"
#include "logprob.h"

int compare_run(coli_model *test, coli_model *ref, const compare_params *p)
{
    coli_model_info info = {.struct_size = sizeof info};
    coli_context *ct = NULL, *cr = NULL;
    coli_status st = coli_model_get_info(ref, &info);
    if (st != COLI_OK)
        return runtime_error(st, coli_model_errmsg(ref));
    const int V = info.vocab_size;
    int rc = 1;
    if ((st = coli_context_create(test, NULL, &ct)) != COLI_OK) {
        runtime_error(st, coli_model_errmsg(test));
        goto done;
    }
    if ((st = coli_context_create(ref, NULL, &cr)) != COLI_OK) {
        runtime_error(st, coli_model_errmsg(ref));
        goto done;
    }
    size_t same = 0, greedy_same = 0;
    double kl_sum = 0, kl_max = 0;
    for (size_t i = 0; i < p->n_prompt; i++) {
        if (eval_one(ct, p->prompt[i]) || eval_one(cr, p->prompt[i]))
            goto done;
        const float *a = coli_context_logits(cr), *b = coli_context_logits(ct);
        double k = logprob_kl(a, logprob_lse(a, (size_t)V), b, logprob_lse(b, (size_t)V), (size_t)V);
        same += logprob_argmax(a, (size_t)V) == logprob_argmax(b, (size_t)V);
        kl_sum += k;
        kl_max = k > kl_max ? k : kl_max;
    }
    /* Greedy continuations, each model following its own choices: the
     * length of the common prefix is what a user would see. */
    int diverged = 0;
    for (int64_t i = 0; i < p->greedy; i++) {
        int32_t tr = logprob_argmax(coli_context_logits(cr), (size_t)V);
        int32_t tt = logprob_argmax(coli_context_logits(ct), (size_t)V);
        if (tr != tt)
            diverged = 1;
        if (!diverged)
            greedy_same++;
        if (i + 1 < p->greedy && (eval_one(ct, tt) || eval_one(cr, tr)))
            goto done;
    }
    double top1 = (double)same / (double)p->n_prompt, kl_mean = kl_sum / (double)p->n_prompt;
    if (p->json) {
        printf("{\"model\":");
        json_string(stdout, p->model_dir, strlen(p->model_dir));
        printf(",\"weights\":\"%s\",\"against\":\"%s\",\"positions\":%zu,\"top1_agreement\":", p->name_test,
               p->name_ref, p->n_prompt);
        json_real(stdout, top1, "%.4f");
        printf(",\"mean_kl\":");
        json_real(stdout, kl_mean, "%.6g");
        printf(",\"max_kl\":");
        json_real(stdout, kl_max, "%.6g");
        printf(",\"greedy_tokens\":%lld,\"greedy_agreement\":%zu}\n", (long long)p->greedy, greedy_same);
    } else {
        printf("model:             %s\n", p->model_dir);
        printf("weights:           %s against %s\n", p->name_test, p->name_ref);
        printf("top-1 agreement:   %.2f%% of %zu positions\n", 100 * top1, p->n_prompt);
        printf("KL divergence:     mean %.4g, max %.4g\n", kl_mean, kl_max);
        printf("greedy agreement:  first %zu of %lld tokens equal\n", greedy_same, (long long)p->greedy);
    }
    rc = 0;
done:
    coli_context_free(ct);
    coli_context_free(cr);
    return rc;
}
