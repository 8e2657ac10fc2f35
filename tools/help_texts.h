/*
 * help_texts.h - the help texts of the options that several commands
 * share, as rows of their opthelp tables (options.h): the model, weights,
 * threads, context, CPU, KV cache, MTP, GPU and expert store options.
 */
#ifndef COLI_TOOLS_HELP_TEXTS_H
#define COLI_TOOLS_HELP_TEXTS_H

#include "options.h"

/* ---- help texts shared by the commands ------------------------------------ */

#define H_MODEL {O_MODEL, "Hugging Face model directory (default: the demo\nmodel)"}
#define H_WEIGHTS                                                                     \
    {O_WEIGHTS, "weights in memory: auto, f32, bf16, q8, q4 or q2\n(default auto: as " \
                "the checkpoint stores them)"}
#define H_Q4_GROUP {O_Q4_GROUP, "group size of q4 weights: 32, 64 or 128 (default 32)"}
#define H_THREADS                                                                  \
    {O_THREADS, "worker threads; 0 = all online cores (default 0);\nmore than the " \
                "online cores is allowed, with a warning"}
#define H_CONTEXT \
    {O_CONTEXT, "KV cache positions; 0 = the model's maximum, at\nmost 4096 (default 0)"}
#define H_VERBOSE {O_VERBOSE, "print the library's log messages on standard error"}
#define H_CPU                                                                         \
    {O_CPU, "CPU kernel set: scalar, avx2, avx512 or amx\n(default: COLI_CPU, else the best this " \
            "CPU\nhas); every set gives the same logits"}
#define H_MTP                                                                               \
    {O_MTP, "multi-token prediction: the model's MTP layer\ndrafts tokens, one pass of the model " \
            "verifies\nthem; the output does not change (GLM-4.5)"},                         \
    {O_MTP_TOKENS, "drafts per step with --mtp, 1-8 (default 1)"},                            \
    {O_NO_MTP_GUARD, "draft at every step, even where the measured cost\nsays drafting is " \
                     "slower (default: it turns\nitself off then)"}
#define H_KV_TYPE                                                                          \
    {O_KV_TYPE, "KV cache type: f32 or bf16 (default: COLI_KV_TYPE,\nelse f32); bf16 halves " \
                "the cache and rounds each\nkey and value to bf16"}
/* The GPU expert tier (gpu_report.c); unset, the environment decides. */
#define H_GPU                                                                             \
    {O_GPU, "run on the GPU: the layers, and the routed experts\nthat fit (default: on when " \
            "COLI_CUDA=1)"},                                                             \
    {O_NO_GPU, "run every expert on the CPU, whatever COLI_CUDA\nsays"},                   \
    {O_GPU_DEVICES, "GPU devices to use, e.g. 0,1 (default: COLI_GPUS\nor COLI_GPU, else " \
                    "every visible device); implies\n--gpu"},                             \
    {O_GPU_EXPERT_GB, "GiB of each device for experts, may be fractional\n(default: "      \
                      "CUDA_EXPERT_GB, else the free memory less\na reserve); implies --gpu"}, \
    {O_RELEASE_HOST, "free the host copy of each expert once it is on a\nGPU (default: "   \
                     "CUDA_RELEASE_HOST=1 turns it on)"},                                   \
    {O_GPU_EXPERTS_ONLY, "keep only experts on the GPU; the CPU runs the\nlayers (default: "  \
                         "the layers run on the first\ndevice when their weights fit); "     \
                         "implies --gpu"}
/* The expert store of converted models (store_report.c). */
#define H_STORE_BUT_IO                                                                     \
    {O_RAM_GB, "GiB of RAM for the weights of a converted model,\nmay be fractional; "      \
               "experts that do not fit are\nread from disk when routed to (default 0: no\n" \
               "limit, model.coli is mapped)"},                                             \
    {O_EXPERT_SLOTS, "experts a converted model holds in RAM (default 0:\nas many as "      \
                     "--ram-gb leaves room for)"},                                          \
    {O_NO_PREFETCH, "read experts from disk only when routed to, not\none layer ahead"},    \
    {O_NO_HOTSET, "do not read or update model.coli.hot, the routing\ncounts that pick "    \
                  "the experts pinned in RAM"}
#define H_STORE \
    H_STORE_BUT_IO, {O_IO_THREADS, "threads reading experts from disk, 1-64 (default 4)"}
#define H_END {O_COUNT, NULL}

#endif /* COLI_TOOLS_HELP_TEXTS_H */
