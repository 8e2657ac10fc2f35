/* gencfg.c - sampling defaults from generation_config.json (gencfg.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gencfg.h"

#include "io/json.h"

#include <stdio.h>

void gencfg_defaults(const char *dir, coli_sampler_params *sp)
{
    char path[4096];
    coli__json_doc *doc = NULL;
    coli__err err;

    coli_sampler_params_init(sp, sizeof *sp);
    sp->temperature = 0.8f;
    sp->top_k = 40;
    sp->top_p = 0.95f;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (coli__json_parse_file(path, &doc, &err) != COLI_OK)
        return;
    const coli__json *g = coli__json_root(doc);
    double t = coli__json_get_num(g, "temperature", sp->temperature);
    double p = coli__json_get_num(g, "top_p", sp->top_p);
    double mp = coli__json_get_num(g, "min_p", sp->min_p);
    double rp = coli__json_get_num(g, "repetition_penalty", sp->repeat_penalty);
    int64_t k = coli__json_get_int(g, "top_k", sp->top_k);
    if (t >= 0 && t <= 100)
        sp->temperature = (float)t;
    if (p > 0 && p <= 1)
        sp->top_p = (float)p;
    if (mp >= 0 && mp <= 1)
        sp->min_p = (float)mp;
    if (rp > 0 && rp <= 10)
        sp->repeat_penalty = (float)rp;
    if (k >= 0 && k <= (1 << 20))
        sp->top_k = (int)k;
    if (!coli__json_get_bool(g, "do_sample", 1))
        sp->temperature = 0.0f;
    coli__json_free(doc);
}

