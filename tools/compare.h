/*
 * compare.h - `coli compare`: how far a model loaded in one weight format
 * strays from the same model in another (normally quantized against f32).
 */
#ifndef COLI_TOOLS_COMPARE_H
#define COLI_TOOLS_COMPARE_H

#include <colibri/colibri.h>

#include <stddef.h>
#include <stdint.h>

typedef struct compare_params {
    const char *model_dir;
    const char *name_test, *name_ref; /* format names, for the report */
    const int32_t *prompt;
    size_t n_prompt;
    int64_t greedy;                   /* greedy continuation length */
    int json;
} compare_params;

/*
 * Evaluates the prompt one position at a time in both models, comparing the
 * top-1 token and KL(ref || test) of the next-token distributions at every
 * position, then compares greedy continuations; prints the report.
 * Returns 0, or 1 after printing the library's message.
 */
int compare_run(coli_model *test, coli_model *ref, const compare_params *p);

#endif /* COLI_TOOLS_COMPARE_H */
