/*
 * cmd_bench.c - `coli bench`: its command line, the test sizes fitted to
 * the model, and the disk probe; bench.c measures and reports.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "bench.h"
#include "commands.h"
#include "disk_probe.h"
#include "errors.h"
#include "help_texts.h"
#include "model_args.h"
#include "options.h"
#include "store_report.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- coli bench ----------------------------------------------------------- */

const char bench_synopsis[] =
    "Usage: coli bench [--model DIR] [OPTION]...\n"
    "Measure prefill and decode speed, in the manner of llama-bench: each\n"
    "repetition evaluates a prompt of random token ids in one batch (ppN), then\n"
    "decodes tokens one at a time, greedily, from an empty cache (tgN), or from\n"
    "a cache already holding --depth positions (ppN @ dD, tgN @ dD). Reports\n"
    "the mean and standard deviation of tokens per second over the repetitions,\n"
    "after one warm-up.\n"
    "Decode speed is set against memory bandwidth: the weight bytes read per\n"
    "token (as the library counts them, else estimated from the parameters read\n"
    "per token), and the read bandwidth of a probe run first in this process.\n";

const opthelp bench_options[] = {
    H_MODEL,
    H_WEIGHTS,
    H_Q4_GROUP,
    {O_THREADS, "worker threads, also used by the probe; 0 = all\nonline cores (default 0)"},
    H_CPU,
    H_KV_TYPE,
    H_MTP,
    H_GPU,
    H_STORE_BUT_IO,
    {O_IO_THREADS, "threads reading experts from disk, also the\nreaders of --disk-probe, 1-64 "
                   "(default 4)"},
    {O_PROMPT_TOKENS, "tokens of the prefill test; 0 = skip it\n(default 512, see below)"},
    {O_GEN_TOKENS, "tokens of the decode test; 0 = skip it\n(default 128, see below)"},
    {O_DEPTH, "positions in the KV cache before each test, as\nllama-bench -d: a prompt of N random ids is\n"
              "evaluated once, untimed, and every test starts\nthere (default 0)"},
    {O_STREAMS, "sequences the decode test runs together, 1-64:\neach step evaluates one token of each in one\npass "
                "(coli_eval_batch); the decode figure\nis their total (default 1)"},
    {O_REPETITIONS, "timed repetitions, at least 1 (default 5)"},
    {O_SEED, "seed of the prompt's random token ids (default 1)"},
    {O_PROBE_MIB, "size of the bandwidth probe's array in MiB\n(default: 4 times the last-level caches, "
                  "within\n64 and 1024)"},
    {O_NO_PROBE, "do not measure the memory bandwidth"},
    {O_DISK_PROBE, "measure the random-read bandwidth of the disk\nholding a converted model, in "
                   "reads of one expert\nrecord"},
    {O_RANDOM_DECODE, "decode random token ids instead of the greedy\ncontinuation (a random model's "
                      "greedy tokens\nrepeat, and so does its routing)"},
    {O_FORMAT, "text (a table) or json (one object) (default text)"},
    H_VERBOSE,
    H_END,
};

/* The help takes the probe's read limit from its constant. */
#define STR_(x) #x
#define STR(x) STR_(x)

const char bench_epilogue[] =
    "The defaults pp512 and tg128 are halved, those not given on the command line,\n"
    "until the depth, the prompt and the generated tokens fit the model's maximum\n"
    "positions (max_position_embeddings); the report names the sizes used. Sizes\n"
    "asked for explicitly are kept; together beyond it, they are refused.\n"
    "For a converted model the report has the expert store's figures over the\n"
    "timed repetitions, and the disk bytes it read per second of decode, set\n"
    "against the random-read bandwidth of the disk when --disk-probe measures\n"
    "it (at most " STR(DISK_PROBE_READS) " reads or about 2 seconds); and for any model the peak\n"
    "(getrusage) and current (/proc/self/statm) resident set of the process.\n";

/*
 * llama-bench's pp512 and tg128 need 640 positions, more than small models
 * have. The sizes not given on the command line are halved together (so
 * that they stay llama-bench's usual sizes) until the test fits max
 * positions; sizes given explicitly are the user's call, and when they alone
 * exceed the model nothing is shrunk (the library warns). Returns 1 if a
 * size was shrunk.
 */
static int fit_defaults(int64_t *pp, int pp_given, int64_t *tg, int tg_given, int64_t depth, int64_t max)
{
    int64_t fixed = (pp_given ? *pp : 0) + (tg_given ? *tg : 0) + depth;
    int shrunk = 0;

    if (max <= 0 || fixed >= max)
        return 0;
    while (*pp + *tg + depth > max) {
        int moved = 0;

        if (!pp_given && *pp > 1) {
            *pp /= 2;
            moved = 1;
        }
        if (!tg_given && *tg > 1) {
            *tg /= 2;
            moved = 1;
        }
        if (!moved)
            break;
        shrunk = 1;
    }
    return shrunk;
}

/* --disk-probe: reads of the store's record size from the model's file. */
static int run_disk_probe(const coli_model *model, const model_args *m, disk_probe *disk)
{
    coli_store_stats st;
    char path[4096];
    int n;

    if (store_report_read(model, &st) != 0)
        return 1;
    if (st.mode == COLI_STORE_RESIDENT || st.slot_bytes == 0) {
        fprintf(stderr, "%s: --disk-probe needs a converted model (coli convert); %s holds a "
                        "checkpoint\n",
                cli_prog, m->dir);
        return 1;
    }
    n = snprintf(path, sizeof path, "%s/model.coli", m->dir);
    if (n < 0 || (size_t)n >= sizeof path)
        return runtime_error(COLI_EINVAL, "--model: the directory name is too long");
    return disk_probe_run(path, st.slot_bytes, store_io_threads(&m->store), disk);
}

int cmd_bench(const args *a)
{
    bench_params p;
    bench_probe probe;
    disk_probe disk;
    model_args m;
    coli_model_info info;
    coli_model *model = NULL;
    coli_options *ctx_opts = NULL;
    int64_t repetitions = 5, probe_mib = 0, llc_bytes = 0;
    int rc;

    memset(&p, 0, sizeof p);
    memset(&probe, 0, sizeof probe);
    memset(&disk, 0, sizeof disk);
    p.disk = &disk;
    p.random_decode = a->given[O_RANDOM_DECODE] > 0;
    p.prompt_tokens = 512;
    p.gen_tokens = 128;
    p.seed = 1;
    if ((rc = parse_format(a, 0, &p.json)) != 0)
        return rc;
    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    p.mtp = m.mtp;
    if (p.random_decode && p.mtp)
        return usage_error("--random-decode and --mtp cannot be used together (drafts follow the text)");
    if (a->value[O_PROMPT_TOKENS] &&
        (rc = parse_int64("--prompt-tokens", a->value[O_PROMPT_TOKENS], 0, 1 << 20,
                          &p.prompt_tokens)) != 0)
        return rc;
    if (a->value[O_GEN_TOKENS] &&
        (rc = parse_int64("--gen-tokens", a->value[O_GEN_TOKENS], 0, 1 << 20, &p.gen_tokens)) !=
            0)
        return rc;
    if (p.prompt_tokens == 0 && p.gen_tokens == 0)
        return usage_error("--prompt-tokens and --gen-tokens are both 0: nothing to measure");
    if (a->value[O_DEPTH] && (rc = parse_int64("--depth", a->value[O_DEPTH], 0, 1 << 24, &p.depth)) != 0)
        return rc;
    p.streams = 1;
    if (a->value[O_STREAMS] && (rc = parse_int64("--streams", a->value[O_STREAMS], 1, 64, &p.streams)) != 0)
        return rc;
    if (p.streams > 1 && p.mtp)
        return usage_error("--streams and --mtp cannot be used together (a drafting context has passes of its own)");
    if (p.streams > 1 && p.depth > 0)
        return usage_error("--streams and --depth cannot be used together");
    if (a->value[O_REPETITIONS] &&
        (rc = parse_int64("--repetitions", a->value[O_REPETITIONS], 1, 100000, &repetitions)) !=
            0)
        return rc;
    if (a->value[O_SEED] && (rc = parse_uint64("--seed", a->value[O_SEED], &p.seed)) != 0)
        return rc;
    if (a->value[O_PROBE_MIB] &&
        (rc = parse_int64("--probe-mib", a->value[O_PROBE_MIB], 1, INT64_C(1) << 24,
                          &probe_mib)) != 0)
        return rc;
    if (a->given[O_NO_PROBE] && a->value[O_PROBE_MIB] != NULL)
        return usage_error("--probe-mib and --no-probe cannot be used together");
    p.repetitions = repetitions;
    p.model_dir = m.dir;
    p.weights = m.have_weights ? (coli_weight_format)m.weights : COLI_WEIGHTS_AUTO;
    if (p.weights == COLI_WEIGHTS_Q4)
        p.q4_group = m.have_q4_group ? (int)m.q4_group : 32;
    p.threads = m.have_threads && m.threads > 0 ? (int)m.threads : bench_online_cores();

    /* The probe runs first, so that its array and the model are not in
     * memory together. The test sizes, which depend on the model, do not
     * matter to the model's loading: its one context is made afterwards,
     * with a capacity of exactly the sizes chosen, so one open suffices. */
    if (a->value[O_PROBE_MIB] == NULL && !a->given[O_NO_PROBE])
        probe_mib = bench_probe_default_mib(llc_bytes = bench_llc_bytes());
    if (!a->given[O_NO_PROBE] && bench_probe_bandwidth(p.threads, probe_mib, &probe) != 0)
        return 1;
    probe.llc_bytes = a->given[O_NO_PROBE] ? 0 : llc_bytes ? llc_bytes : bench_llc_bytes();
    /* The expert store of a converted model sets aside the KV cache of the
     * model's context: the test's, at most the sizes asked for, not the
     * model's maximum. */
    if (p.prompt_tokens + p.gen_tokens + p.depth <= (INT64_C(1) << 24)) {
        m.have_context = 1;
        m.context = p.prompt_tokens + p.gen_tokens + p.depth;
    }
    if (open_model(&m, &model) != 0)
        return 1;
    rc = 1; /* until bench_run says otherwise */
    if (get_info(model, &info) != 0)
        goto done;
    if (a->given[O_DISK_PROBE] && run_disk_probe(model, &m, &disk) != 0)
        goto done;
    p.max_positions = info.max_positions;
    p.sizes_fitted = fit_defaults(&p.prompt_tokens, a->value[O_PROMPT_TOKENS] != NULL,
                                  &p.gen_tokens, a->value[O_GEN_TOKENS] != NULL, p.depth,
                                  info.max_positions);
    m.have_context = 1;
    m.context = p.prompt_tokens + p.gen_tokens + p.depth;
    p.kv_type = kv_type_name(info.kv_type);
    if (make_options(&m, &ctx_opts) != 0)
        goto done;
    p.ctx_opts = ctx_opts;
    rc = bench_run(model, &p, &probe);
done:
    coli_options_free(ctx_opts);
    coli_model_free(model);
    return rc;
}
