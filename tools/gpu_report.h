/*
 * gpu_report.h - the GPU expert tier in the coli tool: its options (--gpu,
 * --no-gpu, --gpu-devices, --gpu-expert-gb, --release-host,
 * --gpu-experts-only), `coli gpu`,
 * and the per-device figures that generate, info and bench report.
 *
 * Options left out leave the library's options unset, so that the
 * environment variables (COLI_CUDA, COLI_GPU, COLI_GPUS, CUDA_EXPERT_GB,
 * CUDA_RELEASE_HOST) decide, as the library documents.
 */
#ifndef COLI_TOOLS_GPU_REPORT_H
#define COLI_TOOLS_GPU_REPORT_H

#include <colibri/colibri.h>

#include "options.h"

#include <stdint.h>
#include <stdio.h>

/* The GPU options of one command line. */
typedef struct gpu_args {
    int gpu;             /* -1: not given (COLI_CUDA decides), 0: --no-gpu, 1: --gpu or implied */
    const char *devices; /* --gpu-devices, NULL if not given */
    int64_t expert_mb;   /* --gpu-expert-gb in MiB (rounded down), -1 if not given */
    int release_host;    /* 1: --release-host */
    int experts_only;    /* 1: --gpu-experts-only */
} gpu_args;

/* Reads and checks the GPU options of a; 0 or EXIT_USAGE after a message
 * naming the option. */
int gpu_args_parse(const args *a, gpu_args *g);
/* Sets the options g asks for on opts; 0, or 1 after a message. */
int gpu_args_apply(const gpu_args *g, coli_options *opts);
/* Prints "coli: warning: GPU tier not in use: <why>" on stderr when g (or
 * COLI_CUDA=1, g leaving it open) asked for the tier and the model runs
 * every expert on the CPU. */
void gpu_warn_unused(const gpu_args *g, const coli_model *model);
/* 1 for a log message of the library that gpu_warn_unused says again. */
int gpu_log_is_unused_warning(coli_log_level level, const char *message);

/* The statistics of every device of a context's model. */
#define GPU_REPORT_MAX 16
typedef struct gpu_report {
    int n; /* devices the model's tier uses */
    coli_gpu_stats dev[GPU_REPORT_MAX];
} gpu_report;

/* Reads the statistics of every device of model that ctx runs; 0, or 1
 * after a message. */
int gpu_report_read(const coli_model *model, const coli_context *ctx, gpu_report *r);
/* Takes base's model-wide counts (calls, rows, failures, times, bytes) off
 * r's, so that r covers what ran after base was read. */
void gpu_report_since(gpu_report *r, const gpu_report *base);
/* Adds r's per-context pair counts to acc's (acc->n set from r when 0). */
void gpu_report_add_pairs(gpu_report *acc, const gpu_report *r);
/* Replaces r's pair counts and hit rates with acc's. */
void gpu_report_set_pairs(gpu_report *r, const gpu_report *acc);

/* "gpu: <detail>", then two lines per device ("gpu 0: ..."); labels are
 * padded to width columns. */
void gpu_report_text(FILE *f, int width, const coli_model *model, const gpu_report *r);
/* The member ,"gpu":{"tier":...,"detail":...,"devices":[...]} of an object
 * being written (r NULL or r->n 0: an empty array). */
void gpu_report_json(FILE *f, const coli_model *model, const gpu_report *r);

/* `coli gpu` */
extern const char gpu_synopsis[];
extern const opthelp gpu_options[];
extern const char gpu_epilogue[];
int cmd_gpu(const args *a);

#endif /* COLI_TOOLS_GPU_REPORT_H */
