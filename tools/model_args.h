/*
 * model_args.h - opening the model in the coli tool: the options that every
 * subcommand opening a model shares (--model, --weights, --threads,
 * --context, --cpu, --kv-type, --mtp, the GPU and store options), the
 * library options they make, and the calls on the open model that the
 * commands share (its info, the tokenizer).
 */
#ifndef COLI_TOOLS_MODEL_ARGS_H
#define COLI_TOOLS_MODEL_ARGS_H

#include <colibri/colibri.h>

#include "gpu_report.h"
#include "options.h"
#include "store_report.h"

#include <stddef.h>
#include <stdint.h>

/* Settings shared by every subcommand that opens a model. */
typedef struct model_args {
    const char *dir;
    int have_weights, have_threads, have_context, have_q4_group, have_cpu, have_kv_type;
    int64_t weights, threads, context, q4_group, cpu, kv_type;
    int64_t mtp;   /* drafts per step; 0: no multi-token prediction */
    int mtp_guard;
    int verbose;
    gpu_args gpu;
    store_args store;
} model_args;

/* Reads the model options of a into m (m->dir: --model, else the demo
 * model, NULL when there is none); 0 or EXIT_USAGE after a message. */
int parse_model_args(const args *a, model_args *m);
/* A weight format by its library name (coli_weight_format_name), the value
 * of option opt; 0 or EXIT_USAGE after a message. */
int parse_weights(const char *opt, const char *w, int64_t *out);
/* The name of a KV cache type: "f32", "bf16", or "unknown". */
const char *kv_type_name(coli_kv_type t);
/* The library options that m asks for, their log on standard error; 0, or
 * 1 after a message. */
int make_options(model_args *m, coli_options **out);
/* Opens m->dir with make_options's options; 0, or 1 after a message. */
int open_model(model_args *m, coli_model **out);
/* The model's info, struct_size set; 0, or 1 after the library's message. */
int get_info(coli_model *model, coli_model_info *info);
/* The weights' name as info gives it ("mixed"), else their format's. */
const char *weights_label(const coli_model_info *info);
/* Tokenizes text into *ids_out (the caller frees it), *n_out ids; 0, or 1
 * after the library's message. */
int tokenize_text(coli_model *model, const char *text, size_t len, int add_special,
                  int32_t **ids_out, size_t *n_out);
/* The text of ids, NUL-terminated, into *text_out (the caller frees it),
 * *len_out bytes without the NUL; 0, or 1 after the library's message. */
int detokenize_ids(coli_model *model, const int32_t *ids, size_t n, int skip_special,
                   char **text_out, size_t *len_out);

#endif /* COLI_TOOLS_MODEL_ARGS_H */
