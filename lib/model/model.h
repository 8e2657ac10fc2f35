/* model.h - a loaded model: config, mapped tensors, weights in the chosen
 * format, tokenizer (internal). A model is read-only once open, so many
 * contexts may use it at once.
 *
 * lib/model/ is opening a model: its options, the loader (weights.c and
 * the files loader.h names), conversion, and this struct. It may include
 * the folders below it (decoder, store, gpu, chat, io, cpu, base); the
 * GPU tier (lib/tier/), contexts (lib/context/) and the public face
 * (lib/open.c, lib/api.c) use it. */
#ifndef COLI_MODEL_H
#define COLI_MODEL_H

#include "io/model_config.h"
#include "base/error.h"
#include "cpu/kernels.h"
#include "base/log.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "decoder/decoder.h"
#include "decoder/weights.h"
#include "model/options.h"
#include "store/convert.h"

struct coli_model {
    coli__err err;
    int ok;                          /* 0: open failed; only errmsg and free work */
    char *dir;
    coli__opts opts;
    coli__config cfg;
    coli__tensor_set *ts;
    coli__tokenizer *tok;
    coli__weights w;
    coli_weight_format wfmt;
    char weights_detail[192];        /* for coli_model_info */
    struct coli__container *cont;    /* a converted model's model.coli; NULL: a checkpoint */
    struct coli__store *store;       /* its experts in host memory; NULL: a checkpoint */
    struct coli__tier *gpu;          /* GPU expert tier; NULL: every expert on the CPU */
    struct coli__device *dev;        /* layers on a device (lib/tier/device.c); NULL: none */
    char gpu_detail[160];            /* why or how the tier is used, for coli_model_info */
    const coli__cpuk *cpuk;          /* CPU kernel set (COLI_OPT_CPU_KERNELS) */
    coli__pieces pieces;             /* of cfg.family */
    coli__decoder dec;               /* what the forward pass runs on (lib/decoder/decoder.h) */
    char *chat_template;             /* tokenizer_config.json or chat_template.jinja; NULL: none */
    char **special;                  /* name, text, name, text...: tokenizer_config's *_token */
    size_t n_special;                /* pairs in special */
};

/* The loader's hold on the host copies of experts, handed down at open
 * (lib/model/model.c): the tier releases and rebuilds them through it
 * instead of calling the loader. */
typedef struct coli__expert_source {
    /* Drops the host copies the loader allocated of the experts with
     * resident[l * E + e] >= 0, setting host[l * E + e] to 0 for each;
     * *freed: their bytes; *mapped: 1 when some are mapped from the
     * checkpoint (no copy of their own). COLI_ENOMEM: none was dropped. */
    coli_status (*release)(void *user, const signed char *resident, unsigned char *host, uint64_t *freed,
                           int *mapped);
    /* Rebuilds the dropped host copies of expert e of layer l exactly as
     * loaded at open. */
    coli_status (*reload)(void *user, int l, int e, coli__err *err);
    void *user;
} coli__expert_source;

struct coli__container;

/* ---- opening (lib/open.c calls these in this order, the GPU tier's open
 * between coli__model_load and coli__model_finish) ---- */

/* The options (NULL: the defaults) and the directory, which must exist. */
coli_status coli__model_init(coli_model *m, const char *dir, const struct coli_options *opts);
/* CPU kernels, config, pieces and weights (a checkpoint's, or a
 * container's with its store); gpu_on: the GPU tier will be asked for
 * (the CPU's x16 layout is then left out). */
coli_status coli__model_load(coli_model *m, int gpu_on);
/* The tokenizer, the end-of-sequence ids and the chat template. */
coli_status coli__model_finish(coli_model *m);
/* The loader's side of the GPU tier's host copies. */
coli__expert_source coli__model_expert_source(coli_model *m);
/* Everything a model holds but its handle, its directory and its message
 * (the GPU tier is closed first): safe on a model half opened. */
void coli__model_release(coli_model *m);
/* Fails the model: the message goes to the log too; returns st. */
coli_status coli__model_fail(coli_model *m, coli_status st);
/* COLI_OK for a model that opened. */
coli_status coli__model_usable(const coli_model *m);
/* coli_model_info of what the model holds (the GPU tier's fields aside). */
void coli__model_info_fill(const coli_model *m, coli_model_info *info);

/* Loads every weight of cfg from ts in format fmt, checking names and
 * shapes, each piece of pieces (lib/decoder/pieces.h) its own;
 * quantization uses threads threads (0: every online core; the same bytes
 * for any); x16: q8 and q4 matrices that fit take the x16 layout
 * (lib/cpu/qlayout.c), for the CPU only. */
coli_status coli__weights_load(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                               const coli__tensor_set *ts, coli_weight_format fmt, int q4_group, int threads, int x16,
                               coli__err *err);
void coli__weights_free(coli__weights *w, const coli__config *cfg);
/* Points every weight of cfg into a container's mapping (docs/container.md):
 * nothing is converted; names, shapes and dtypes are checked. */
coli_status coli__weights_load_container(coli__weights *w, const coli__config *cfg, const coli__pieces *pieces,
                                         const struct coli__container *c, coli__err *err);
/* Walks the tensors coli__weights_load would load, in its order, checking
 * each against ts and calling fn with it; nothing is converted. */
coli_status coli__weights_plan(const coli__config *cfg, const coli__pieces *pieces, const coli__tensor_set *ts,
                               coli_weight_format fmt, int q4_group, coli__witem_fn fn, void *user, coli__err *err);
/* Makes one planned tensor of a model of config cfg as the loader would:
 * *out's memory belongs to scratch (free it with coli__weights_free(scratch,
 * NULL)) or to ts. */
coli_status coli__weights_convert_item(const coli__config *cfg, const coli__tensor_set *ts, coli_weight_format fmt,
                                       int q4_group, const coli__witem *it, coli__weights *scratch, coli__mat *out,
                                       coli__err *err);
/* Drops the host copies the loader allocated of the experts with
 * resident[l * E + e] >= 0 (an expert resident on a GPU), setting
 * host[l * E + e] to 0 for each: their data (or q.qs) becomes NULL and
 * their memory goes back (the pages, when it lies in a region). *freed:
 * the bytes dropped; *mapped: 1 when some point into the checkpoint's
 * mapping, which costs no memory of its own. COLI_ENOMEM: nothing dropped. */
coli_status coli__weights_release_experts(coli__weights *w, const coli__config *cfg, const signed char *resident,
                                          unsigned char *host, uint64_t *freed, int *mapped);
/* Loads again the matrices of expert e of layer l whose host copy was
 * released, from the checkpoint, exactly as at open. */
coli_status coli__weights_reload_expert(coli__weights *w, const coli__config *cfg, const coli__tensor_set *ts,
                                        coli_weight_format fmt, int q4_group, int l, int e, coli__err *err);
/* The in-memory dtype of a matrix of this kind when loaded in fmt. */
coli__dtype coli__weights_target(coli_weight_format fmt, coli__mat_kind kind, coli__dtype stored, int cols,
                                 int q4_group);
/* Bytes all weights would take in fmt, and the bytes one token reads. */
void coli__weights_bytes(const coli__weights *w, const coli__config *cfg, coli_weight_format fmt, int q4_group,
                         uint64_t *total, uint64_t *active);

/* The message buffer for a failing call on an open model, private to the
 * calling thread (coli_model_errmsg reads it back on the same thread). */
coli__err *coli__model_err(const coli_model *m);

#endif
