/*
 * bench.h - `coli bench`: the measurements (bench.c).
 *
 * cmd_bench.c parses the command line and opens the model; bench.c
 * probes the memory bandwidth, times prefill and decode, and prints the
 * report.
 */
#ifndef COLI_TOOLS_BENCH_H
#define COLI_TOOLS_BENCH_H

#include <colibri/colibri.h>

#include "disk_probe.h"

#include <stdint.h>

typedef struct bench_params {
    const char *model_dir;       /* as given, for the report */
    coli_weight_format weights;  /* the format the model was opened with */
    int q4_group;                /* group size of q4 weights (0 unless q4) */
    int threads;                 /* worker threads in use (0 resolved to the cores) */
    int64_t prompt_tokens;       /* tokens of the prefill test (0: no prefill test) */
    int64_t gen_tokens;          /* tokens of the decode test (0: no decode test) */
    int64_t depth;               /* positions in the cache before each test (llama-bench -d) */
    const char *kv_type;         /* the KV cache's type, for the report */
    int64_t repetitions;         /* timed repetitions, after one warm-up */
    uint64_t seed;               /* seeds the prompt's token ids */
    int json;                    /* 1: one JSON object, 0: a table */
    const coli_options *ctx_opts; /* options of the benchmark's context, whose
                                     capacity is depth + prompt_tokens + gen_tokens */
    int max_positions;           /* the model's, for the report */
    int sizes_fitted;            /* 1: default sizes were shrunk to fit max_positions */
    const disk_probe *disk;      /* the disk probe (done 0 when not run) */
    int64_t streams;             /* sequences the decode test runs together (1: one) */
    int random_decode;           /* 1: decode feeds random ids, not the greedy token */
    int64_t mtp;                 /* drafts per step of multi-token prediction (0: none); decode
                                    then runs coli_generate, greedy */
} bench_params;

/* The result of the memory bandwidth probe. */
typedef struct bench_probe {
    int done;      /* 0 when the probe was skipped */
    int threads;
    int64_t mib;   /* size of the array read */
    int64_t llc_bytes; /* the last-level caches it was sized against (0: unknown) */
    int passes;
    double gbs;    /* best pass: bytes / seconds / 1e9 */
} bench_probe;

/* Online cores, at least 1. */
int bench_online_cores(void);

/*
 * Memory read bandwidth: threads threads each sum their share of an array of
 * mib MiB of int64 (allocated and written first), best of several passes.
 * Returns 0, or 1 after printing a message (out of memory, thread failure).
 */
int bench_probe_bandwidth(int threads, int64_t mib, bench_probe *probe);

/* Bytes of the machine's last-level caches: each cache of the highest level
 * that sysfs lists counted once, else sysconf's L3 size; 0 if unknown. */
int64_t bench_llc_bytes(void);

/* The probe's default size in MiB: 4 times llc_bytes, so that the caches
 * cannot serve the reads, within 64 MiB and 1 GiB (1 GiB when unknown). */
int64_t bench_probe_default_mib(int64_t llc_bytes);

/* The process's peak resident set (getrusage's ru_maxrss) and the current
 * one (/proc/self/statm), in bytes; 0 for what cannot be read. */
void bench_rss(uint64_t *peak, uint64_t *current);

/*
 * Runs the benchmark on an open model, in a context made with ctx_opts, and
 * prints the report on stdout.
 * Returns 0, or 1 after printing the library's message.
 */
int bench_run(coli_model *model, const bench_params *p, const bench_probe *probe);

#endif /* COLI_TOOLS_BENCH_H */
