/* convert_model.c - coli_convert: the loader's walk and conversion
 * (lib/model/weights.c) handed to the container writer below it
 * (lib/store/convert.c), which never calls up. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/sized.h"
#include "model/model.h"
#include "decoder/pieces.h"
#include "store/convert.h"

/* What the source's functions read: the job (the checkpoint and the
 * format) and the pieces of its family, which name their tensors. */
typedef struct conv_src {
    const coli__conv_job *job;
    coli__pieces pieces;
} conv_src;

static coli_status src_plan(void *user, coli__witem_fn fn, void *fn_user, coli__err *err)
{
    const conv_src *cs = user;
    const coli__conv_job *j = cs->job;
    return coli__weights_plan(j->cfg, &cs->pieces, j->ts, j->fmt, j->group, fn, fn_user, err);
}

static coli_status src_make(void *user, const coli__witem *it, void *dst, uint64_t bytes, coli__err *err)
{
    const coli__conv_job *j = ((const conv_src *)user)->job;
    coli__weights scratch;
    memset(&scratch, 0, sizeof scratch);
    coli__mat m;
    coli_status st = coli__weights_convert_item(j->cfg, j->ts, j->fmt, j->group, it, &scratch, &m, err);
    if (st == COLI_OK && (m.dt != it->target || coli__mat_bytes(&m) != bytes))
        st = coli__fail(err, COLI_EFORMAT, "tensor '%s': made as dtype %d, %llu bytes; the plan said %d, %llu",
                        it->name, (int)m.dt, (unsigned long long)coli__mat_bytes(&m), (int)it->target,
                        (unsigned long long)bytes);
    if (st == COLI_OK) {
        /* quantized arrays are one allocation: quants, scales, minimums */
        memcpy(dst, coli__mat_base(&m), bytes);
    }
    coli__weights_free(&scratch, NULL);
    return st;
}

/* The first version of coli_convert_params ended before progress. */
#define COLI__CONVERT_PARAMS_V1 offsetof(coli_convert_params, progress)

COLI_API void coli_convert_params_init(coli_convert_params *p, size_t struct_size)
{
    coli_convert_params d;
    memset(&d, 0, sizeof d);
    d.weights = COLI_WEIGHTS_Q4;
    d.q4_group = 32;
    coli__sized_init(p, &d, sizeof d, struct_size);
}

static coli_status convert(const coli_convert_params *p, const char *src, const char *out, coli__err *err)
{
    if (p->weights != COLI_WEIGHTS_BF16 && p->weights != COLI_WEIGHTS_Q8 && p->weights != COLI_WEIGHTS_Q4 &&
        p->weights != COLI_WEIGHTS_Q2)
        return coli__fail(err, COLI_EINVAL, "coli_convert: weights must be bf16, q8, q4 or q2 (got %d)",
                          (int)p->weights);
    int group = p->q4_group ? p->q4_group : 32;
    if (group != 32 && group != 64 && group != 128)
        return coli__fail(err, COLI_EINVAL, "coli_convert: q4 group %d is not 32, 64 or 128", group);
    struct stat a, b;
    if (stat(src, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return coli__fail(err, COLI_EINVAL, "coli_convert: the output directory '%s' is the checkpoint's own", out);
    coli__config cfg;
    memset(&cfg, 0, sizeof cfg);
    coli__tensor_set *ts = NULL;
    coli_status st = coli__config_load(src, &cfg, err);
    if (st == COLI_OK)
        st = coli__st_open_dir(src, &ts, err);
    /* the MTP layer goes in when the checkpoint has one: a model opened
     * from the container with COLI_OPT_MTP uses it, others skip it */
    char name[256];
    if (st == COLI_OK && cfg.n_mtp > 0 &&
        coli__st_find(ts, coli__tensor_name(cfg.family, COLI_T_MTP_EH_PROJ, cfg.n_trunk, 0, name, sizeof name)))
        st = coli__config_add_mtp(&cfg, src, err);
    conv_src cs;
    memset(&cs, 0, sizeof cs);
    if (st == COLI_OK)
        st = coli__pieces_pick(&cfg, &cs.pieces, err);
    if (st == COLI_OK) {
        coli__conv_job job = {
            .src_dir = src,
            .out_dir = out,
            .cfg = &cfg,
            .ts = ts,
            .fmt = p->weights,
            .group = p->weights == COLI_WEIGHTS_Q4 ? group : 32,
            .params = p,
            .src = {.plan = src_plan, .make = src_make},
        };
        cs.job = &job;
        job.src.user = &cs;
        st = coli__cont_write(&job, err);
    }
    coli__st_close(ts);
    coli__config_free(&cfg);
    return st;
}

COLI_API coli_status coli_convert(const char *model_dir, const char *out_dir, const coli_convert_params *params,
                                  char *errbuf, size_t errcap)
{
    coli__err err;
    coli__err_clear(&err);
    coli_convert_params p;
    coli_convert_params_init(&p, sizeof p);
    coli_status st = COLI_OK;
    if (!model_dir || !out_dir)
        st = coli__fail(&err, COLI_EINVAL, "coli_convert: NULL directory");
    else
        st = coli__sized_in(&p, params, sizeof p, COLI__CONVERT_PARAMS_V1, "coli_convert_params", &err);
    if (st == COLI_OK)
        st = convert(&p, model_dir, out_dir, &err);
    if (errbuf && errcap)
        snprintf(errbuf, errcap, "%s", st == COLI_OK ? "" : err.msg);
    return st;
}
