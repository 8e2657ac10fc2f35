/* convert.h - the container writer behind coli_convert (internal).
 *
 * The writer lays out and writes model.coli (docs/container.md); what goes
 * in it comes from the loader, handed down as a coli__conv_source by
 * coli_convert (lib/model/convert_model.c), so that this layer never calls
 * the one above it. */
#ifndef COLI_CONVERT_H
#define COLI_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"

/* How a matrix is treated by the quantized load formats (docs/formats.md);
 * the container records it with each tensor. */
typedef enum coli__mat_kind {
    COLI_MAT_BIG = 0,  /* attention, dense MLP, experts: the chosen format */
    COLI_MAT_OUT = 1,  /* output projection: q8 under any quantized format */
    COLI_MAT_KEEP = 2  /* router, embedding: as stored */
} coli__mat_kind;

/* How much of a matrix one token reads. */
typedef enum coli__mat_role {
    COLI_ROLE_DENSE = 0,   /* all of it */
    COLI_ROLE_EXPERT = 1,  /* top_k of n_experts such matrices */
    COLI_ROLE_EMBED = 2,   /* one row */
    COLI_ROLE_TIED_OUT = 3 /* the tied output projection (no tensor of its own) */
} coli__mat_role;

/* One tensor of a conversion plan (coli__weights_plan). */
typedef struct coli__witem {
    const char *name;          /* as the container names it */
    const char *src;           /* the checkpoint tensor it is made from */
    int rows, cols;            /* a vector: 1 row of cols values */
    int is_vec;
    coli__mat_kind kind;
    coli__mat_role role;
    coli__dtype stored, target;
    int layer, expert, which;  /* expert -1: not an expert; which: 0 gate, 1 up, 2 down */
} coli__witem;
typedef coli_status (*coli__witem_fn)(void *user, const coli__witem *it, coli__err *err);

/* The loader's side of a conversion. */
typedef struct coli__conv_source {
    /* Walks the tensors loading would make, in its order, calling fn with
     * each; nothing is converted. */
    coli_status (*plan)(void *user, coli__witem_fn fn, void *fn_user, coli__err *err);
    /* Makes planned tensor it as loading would: exactly bytes bytes at dst
     * (called from several threads at once). */
    coli_status (*make)(void *user, const coli__witem *it, void *dst, uint64_t bytes, coli__err *err);
    void *user;
} coli__conv_source;

/* One conversion, its options checked by the caller. */
typedef struct coli__conv_job {
    const char *src_dir, *out_dir;
    const coli__config *cfg;
    const coli__tensor_set *ts;       /* the checkpoint: pages of converted tensors are given back */
    coli_weight_format fmt;
    int group;                        /* q4 group; 32 for the other formats */
    const coli_convert_params *params; /* threads, overwrite, progress */
    coli__conv_source src;
} coli__conv_job;

/* Writes out_dir/model.coli (through a temporary name, renamed into place
 * once synced) and copies config.json and the tokenizer files next to it. */
coli_status coli__cont_write(const coli__conv_job *cj, coli__err *err);

#endif
