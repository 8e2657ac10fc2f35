/*
 * bench.c - `coli bench`: prefill and decode speed in the shape of
 * llama-bench (pp512 / tg128, mean +- standard deviation over repetitions),
 * set against the memory bandwidth of the machine.
 *
 * Batch-1 decode cannot go faster than (memory bandwidth) / (weight bytes
 * read per token), so besides tokens per second the report gives the weight
 * bytes read per decoded token, the bandwidth measured by a read probe in
 * the same process, and the fraction of it that decoding achieved. For a
 * converted model streamed under a budget, the same holds for the disk:
 * the bytes the expert store read while decoding, against the random-read
 * bandwidth of --disk-probe.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "bench.h"
#include "logprob.h"
#include "errors.h"
#include "gpu_report.h"
#include "jsonout.h"
#include "mtp_report.h"
#include "store_report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PROBE_PASSES 5

static double now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int bench_online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (n < 1)
        return 1;
    return n > 1024 ? 1024 : (int)n;
}

/* ---- memory bandwidth probe ---------------------------------------------------- */

/* The size of a sysfs cache file ("32768K"), 0 if unreadable. */
static int64_t read_cache_size(const char *path)
{
    FILE *f = fopen(path, "r");
    long long v = 0;
    char unit = 0;

    if (f == NULL)
        return 0;
    if (fscanf(f, "%lld%c", &v, &unit) < 1 || v < 0)
        v = 0;
    fclose(f);
    return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : unit == 'G' ? v << 30 : v;
}

/* The first line of a small sysfs file into buf, "" if unreadable. */
static void read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");

    buf[0] = '\0';
    if (f == NULL)
        return;
    if (fgets(buf, (int)cap, f) == NULL)
        buf[0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

int64_t bench_llc_bytes(void)
{
    enum { MAX_SEEN = 256 };
    static char seen[MAX_SEEN][64]; /* shared_cpu_list of each cache counted */
    int n_seen = 0, best_level = 0, cpus = bench_online_cores();
    int64_t total = 0;
    char path[128], line[64];

    for (int cpu = 0; cpu < cpus; cpu++) {
        for (int idx = 0; idx < 16; idx++) {
            int level;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/level", cpu, idx);
            read_line(path, line, sizeof line);
            if (line[0] == '\0')
                break;
            level = atoi(line);
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/type", cpu, idx);
            read_line(path, line, sizeof line);
            if (strcmp(line, "Instruction") == 0 || level < best_level)
                continue;
            if (level > best_level) { /* a higher level: start the count again */
                best_level = level;
                total = 0;
                n_seen = 0;
            }
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/shared_cpu_list", cpu,
                     idx);
            read_line(path, line, sizeof line);
            int k = 0;
            while (k < n_seen && strcmp(seen[k], line) != 0)
                k++;
            if (k < n_seen || n_seen == MAX_SEEN)
                continue;
            snprintf(seen[n_seen++], sizeof seen[0], "%s", line);
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cache/index%d/size", cpu, idx);
            total += read_cache_size(path);
        }
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (total <= 0) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        total = l3 > 0 ? l3 : 0;
    }
#endif
    return total;
}

int64_t bench_probe_default_mib(int64_t llc_bytes)
{
    int64_t mib = llc_bytes > 0 ? (4 * llc_bytes + (1 << 20) - 1) >> 20 : 1024;

    return mib < 64 ? 64 : mib > 1024 ? 1024 : mib;
}

typedef struct probe_job {
    int64_t *data;
    size_t n;
    int fill;    /* 1: write the slice, 0: sum it */
    int64_t sum;
} probe_job;

/* Keeps the sums observable, so that the reads cannot be optimised away. */
static volatile int64_t g_probe_sink;

static void *probe_worker(void *arg)
{
    probe_job *j = arg;
    int64_t *p = j->data;
    size_t n = j->n, i;

    if (j->fill) {
        for (i = 0; i < n; i++)
            p[i] = (int64_t)i ^ 0x5555;
        return NULL;
    } else {
        /* Four independent sums: no loop-carried dependency limits the reads. */
        int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

        for (i = 0; i + 4 <= n; i += 4) {
            s0 += p[i];
            s1 += p[i + 1];
            s2 += p[i + 2];
            s3 += p[i + 3];
        }
        for (; i < n; i++)
            s0 += p[i];
        j->sum = s0 + s1 + s2 + s3;
    }
    return NULL;
}

/* Runs one pass (fill or sum) over all slices; returns its seconds, or a
 * negative value if a thread could not be started. */
static double probe_pass(probe_job *jobs, pthread_t *tids, int threads, int fill)
{
    double t0, t1;
    int k, started = 0, err = 0;

    for (k = 0; k < threads; k++)
        jobs[k].fill = fill;
    t0 = now_seconds();
    /* The calling thread takes the last slice itself. */
    for (k = 0; k < threads - 1; k++) {
        err = pthread_create(&tids[k], NULL, probe_worker, &jobs[k]);
        if (err != 0)
            break;
        started++;
    }
    probe_worker(&jobs[threads - 1]);
    for (k = 0; k < started; k++)
        pthread_join(tids[k], NULL);
    t1 = now_seconds();
    if (err != 0) {
        fprintf(stderr, "coli: cannot start a probe thread: %s\n", strerror(err));
        return -1.0;
    }
    if (!fill)
        for (k = 0; k < threads; k++)
            g_probe_sink += jobs[k].sum;
    return t1 - t0;
}

int bench_probe_bandwidth(int threads, int64_t mib, bench_probe *probe)
{
    size_t bytes = (size_t)mib << 20, n = bytes / sizeof(int64_t), per, at = 0;
    probe_job *jobs = NULL;
    pthread_t *tids = NULL;
    int64_t *data = NULL;
    double best = -1.0;
    int k, pass, rc = 1;

    memset(probe, 0, sizeof *probe);
    if (threads < 1)
        threads = 1;
    if ((uint64_t)threads > n)
        threads = (int)n;
    data = aligned_alloc(64, bytes);
    jobs = calloc((size_t)threads, sizeof *jobs);
    tids = calloc((size_t)threads, sizeof *tids);
    if (data == NULL || jobs == NULL || tids == NULL) {
        fprintf(stderr, "coli: out of memory for the %" PRId64 " MiB bandwidth probe "
                        "(--probe-mib sets its size, --no-probe skips it)\n", mib);
        goto done;
    }
    per = n / (size_t)threads;
    for (k = 0; k < threads; k++) {
        jobs[k].data = data + at;
        jobs[k].n = k == threads - 1 ? n - at : per;
        at += jobs[k].n;
    }
    /* Each thread writes the slice it will read: the pages exist (no shared
     * zero page) and sit near the thread that reads them. */
    if (probe_pass(jobs, tids, threads, 1) < 0)
        goto done;
    for (pass = 0; pass < PROBE_PASSES; pass++) {
        double s = probe_pass(jobs, tids, threads, 0);
        if (s < 0)
            goto done;
        if (best < 0 || s < best)
            best = s;
    }
    probe->done = 1;
    probe->threads = threads;
    probe->mib = mib;
    probe->passes = PROBE_PASSES;
    probe->gbs = best > 0 ? (double)bytes / best / 1e9 : NAN;
    rc = 0;
done:
    free(data);
    free(jobs);
    free(tids);
    return rc;
}

/* ---- resident set ------------------------------------------------------------- */

void bench_rss(uint64_t *peak, uint64_t *current)
{
    struct rusage ru;
    unsigned long long size = 0, resident = 0;
    long page = sysconf(_SC_PAGESIZE);
    FILE *f;

    *peak = 0;
    *current = 0;
    /* Linux counts ru_maxrss in KiB. */
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 0)
        *peak = (uint64_t)ru.ru_maxrss * 1024u;
    f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &size, &resident) == 2 && page > 0)
            *current = (uint64_t)resident * (uint64_t)page;
        fclose(f);
    }
    /* The two are read at different times: the peak is at least the last. */
    if (*peak < *current)
        *peak = *current;
}

/* ---- the benchmark ----------------------------------------------------------- */

/* xorshift64*: the prompt's token ids. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1du;
}

typedef struct summary {
    double mean, sd;
} summary;

/* Mean and sample standard deviation (n - 1), as llama-bench reports them. */
static summary summarize(const double *v, int64_t n)
{
    summary s = {NAN, NAN};
    double sum = 0.0, sq = 0.0;
    int64_t i;

    if (n <= 0)
        return s;
    for (i = 0; i < n; i++)
        sum += v[i];
    s.mean = sum / (double)n;
    for (i = 0; i < n; i++)
        sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = n > 1 ? sqrt(sq / (double)(n - 1)) : 0.0;
    return s;
}


/* The last component of a directory name, for the table. */
static void base_name(const char *dir, char *out, size_t cap)
{
    size_t len = strlen(dir), start;

    while (len > 1 && dir[len - 1] == '/')
        len--;
    start = len;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    if (len - start + 1 > cap)
        len = start + cap - 1;
    memcpy(out, dir + start, len - start);
    out[len - start] = '\0';
}

typedef struct bench_result {
    summary pp, tg;          /* tokens per second, timed here */
    summary pp_lib, tg_lib;  /* the same, as the library's statistics time them */
    double *pp_samples, *tg_samples;
    uint64_t weight_bytes_per_token;
    const char *weight_bytes_source;
    double achieved_gbs, bw_fraction;
    const coli_model *model;
    gpu_report gpu;          /* per device, over the timed repetitions */
    coli_store_stats store;  /* the expert store, over the timed repetitions */
    uint64_t decode_disk_bytes; /* of them, read while decoding */
    double decode_seconds;      /* the decode tests' time */
    double decode_disk_mb_s, disk_fraction;
    uint64_t rss_peak, rss_now;
    double depth_seconds;    /* filling the cache to the depth, once, untimed in the tests */
    coli_stats mtp;          /* multi-token prediction, over the timed repetitions */
} bench_result;

/* Decode weight bytes per token: measured by the library when it counts
 * them, else estimated from the parameters read per token. */
static void weight_bytes(coli_model *model, const bench_params *p, uint64_t bytes,
                         uint64_t tokens, bench_result *r)
{
    uint64_t active = 0;

    if (bytes > 0 && tokens > 0) {
        r->weight_bytes_per_token = (bytes + tokens / 2) / tokens;
        r->weight_bytes_source = "measured";
    } else if (coli_model_weight_bytes(model, p->weights, NULL, &active) == COLI_OK &&
               active > 0) {
        r->weight_bytes_per_token = active;
        r->weight_bytes_source = "estimated";
    } else {
        r->weight_bytes_per_token = 0;
        r->weight_bytes_source = "unavailable";
    }
}

/* "tg128", or "tg128 @ d4096" at a depth, as llama-bench names its tests. */
static void test_name(char *buf, size_t cap, const char *kind, int64_t n, int64_t depth)
{
    if (depth > 0)
        snprintf(buf, cap, "%s%" PRId64 " @ d%" PRId64, kind, n, depth);
    else
        snprintf(buf, cap, "%s%" PRId64, kind, n);
}

static void print_text(const bench_params *p, const coli_model_info *info,
                       const bench_probe *probe, const bench_result *r)
{
    char name[64], size[32], params[32], weights[32], test[48], record[32];
    int w = 5, tw = 7;

    base_name(p->model_dir, name, sizeof name);
    if ((int)strlen(name) > w)
        w = (int)strlen(name);
    if (info->weight_bytes >= (uint64_t)1 << 30)
        snprintf(size, sizeof size, "%.2f GiB", (double)info->weight_bytes / (1024.0 * 1024 * 1024));
    else
        snprintf(size, sizeof size, "%.2f MiB", (double)info->weight_bytes / (1024.0 * 1024));
    if (info->n_params_total >= 1000000000)
        snprintf(params, sizeof params, "%.2f B", (double)info->n_params_total / 1e9);
    else
        snprintf(params, sizeof params, "%.2f M", (double)info->n_params_total / 1e6);
    if (p->weights == COLI_WEIGHTS_AUTO && info->weights_name != NULL)
        snprintf(weights, sizeof weights, "%s", info->weights_name);
    else if (p->q4_group > 0)
        snprintf(weights, sizeof weights, "%s/g%d", coli_weight_format_name(p->weights), p->q4_group);
    else
        snprintf(weights, sizeof weights, "%s", coli_weight_format_name(p->weights));

    if (p->depth > 0) { /* "tg128 @ d4096": the test column widens */
        test_name(test, sizeof test, "pp", p->prompt_tokens > p->gen_tokens ? p->prompt_tokens : p->gen_tokens,
                  p->depth);
        tw = (int)strlen(test) > tw ? (int)strlen(test) : tw;
    }
    printf("| %-*s | %10s | %8s | %-7s | %7s | %*s | %20s |\n", w, "model", "size", "params",
           "weights", "threads", tw, "test", "t/s");
    printf("| %.*s | ---------: | -------: | ------- | ------: | %.*s: | -------------------: |\n",
           w, "------------------------------------------------------------------", tw - 1,
           "----------------------------------------");
    if (p->prompt_tokens > 0) {
        char ts[48];
        test_name(test, sizeof test, "pp", p->prompt_tokens, p->depth);
        snprintf(ts, sizeof ts, "%.2f \xc2\xb1 %.2f", r->pp.mean, r->pp.sd);
        /* The width counts bytes; "±" takes two. */
        printf("| %-*s | %10s | %8s | %-7s | %7d | %*s | %21s |\n", w, name, size, params, weights,
               p->threads, tw, test, ts);
    }
    if (p->gen_tokens > 0) {
        char ts[48];
        test_name(test, sizeof test, "tg", p->gen_tokens, p->depth);
        snprintf(ts, sizeof ts, "%.2f \xc2\xb1 %.2f", r->tg.mean, r->tg.sd);
        printf("| %-*s | %10s | %8s | %-7s | %7d | %*s | %21s |\n", w, name, size, params, weights,
               p->threads, tw, test, ts);
    }
    putchar('\n');
    if (p->sizes_fitted)
        printf("test sizes:              pp%" PRId64 " + tg%" PRId64
               " (defaults halved to fit the model's %d positions)\n",
               p->prompt_tokens, p->gen_tokens, p->max_positions);
    printf("repetitions:             %" PRId64 " (after one warm-up)\n", p->repetitions);
    if (p->streams > 1)
        printf("streams:                 %" PRId64 " decoded together; tg is their total (%.2f tok/s each)\n",
               p->streams, r->tg.mean / (double)p->streams);
    printf("kv cache:                %s\n", p->kv_type ? p->kv_type : "f32");
    if (p->depth > 0)
        printf("depth:                   %" PRId64 " positions, filled once in %.2f s (%.2f tok/s), untimed\n",
               p->depth, r->depth_seconds, r->depth_seconds > 0 ? (double)p->depth / r->depth_seconds : NAN);
    if (r->weight_bytes_per_token > 0)
        printf("weight bytes per token:  %" PRIu64 " (%.1f MiB, %s)\n", r->weight_bytes_per_token,
               (double)r->weight_bytes_per_token / (1024.0 * 1024.0),
               strcmp(r->weight_bytes_source, "measured") == 0
                   ? "measured by the library"
                   : "estimated from the parameters read per token");
    else
        printf("weight bytes per token:  unavailable for this format\n");
    if (probe->done)
        printf("memory read bandwidth:   %.2f GB/s (probe: %d threads, %" PRId64
               " MiB, best of %d passes; last-level cache %.1f MiB)\n",
               probe->gbs, probe->threads, probe->mib, probe->passes,
               (double)probe->llc_bytes / (1024.0 * 1024.0));
    else
        printf("memory read bandwidth:   not measured (--no-probe)\n");
    if (isfinite(r->achieved_gbs)) {
        printf("decode weight reads:     %.2f GB/s", r->achieved_gbs);
        if (isfinite(r->bw_fraction))
            printf(" = %.1f%% of the measured bandwidth", 100.0 * r->bw_fraction);
        putchar('\n');
    }
    if (p->disk->done)
        printf("disk random reads:       %.1f MB/s, %.1f reads/s (probe: %" PRIu64 " reads of "
               "%s, %d readers, %s)\n",
               p->disk->mb_s, p->disk->reads_s, p->disk->reads,
               store_size_text(record, sizeof record, p->disk->record_bytes), p->disk->readers,
               p->disk->direct ? "O_DIRECT" : "page cache dropped");
    if (isfinite(r->decode_disk_mb_s)) {
        printf("decode disk reads:       %.1f MB/s (%.1f MiB in %.3f s)", r->decode_disk_mb_s,
               (double)r->decode_disk_bytes / (1024.0 * 1024.0), r->decode_seconds);
        if (isfinite(r->disk_fraction))
            printf(" = %.1f%% of the disk probe", 100.0 * r->disk_fraction);
        putchar('\n');
    }
    gpu_report_text(stdout, 24, r->model, &r->gpu);
    if (r->store.mode != COLI_STORE_RESIDENT)
        store_report_text(stdout, 24, &r->store);
    printf("resident set:            ");
    if (r->rss_peak > 0)
        printf("peak %.1f MiB", (double)r->rss_peak / (1024.0 * 1024.0));
    else
        printf("peak unavailable");
    if (r->rss_now > 0)
        printf(", now %.1f MiB", (double)r->rss_now / (1024.0 * 1024.0));
    if (probe->done)
        printf(" (the peak includes the bandwidth probe's %" PRId64 " MiB)", probe->mib);
    putchar('\n');
    fflush(stdout);
    mtp_report_text(stdout, &r->mtp, p->mtp);
}

static void json_samples(const char *key, const double *v, int64_t n)
{
    int64_t i;

    printf(",\"%s\":[", key);
    for (i = 0; i < n; i++) {
        if (i)
            putchar(',');
        json_real(stdout, v[i], "%.3f");
    }
    putchar(']');
}

static void print_json(const bench_params *p, const coli_model_info *info,
                       const bench_probe *probe, const bench_result *r)
{
    const char *arch = info->architecture ? info->architecture : "";
    const char *wname = p->weights == COLI_WEIGHTS_AUTO && info->weights_name != NULL
                            ? info->weights_name
                            : coli_weight_format_name(p->weights);

    printf("{\"model\":");
    json_string(stdout, p->model_dir, strlen(p->model_dir));
    printf(",\"architecture\":");
    json_string(stdout, arch, strlen(arch));
    printf(",\"n_params_total\":%" PRId64 ",\"n_params_active\":%" PRId64
           ",\"weight_bytes\":%" PRIu64 ",\"weights\":",
           info->n_params_total, info->n_params_active, info->weight_bytes);
    json_string(stdout, wname, strlen(wname));
    if (p->q4_group > 0)
        printf(",\"q4_group\":%d", p->q4_group);
    printf(",\"threads\":%d,\"prompt_tokens\":%" PRId64 ",\"gen_tokens\":%" PRId64
           ",\"repetitions\":%" PRId64 ",\"seed\":%" PRIu64,
           p->threads, p->prompt_tokens, p->gen_tokens, p->repetitions, p->seed);
    printf(",\"streams\":%" PRId64, p->streams > 1 ? p->streams : 1);
    printf(",\"max_positions\":%d,\"sizes_fitted\":%s", p->max_positions,
           p->sizes_fitted ? "true" : "false");
    printf(",\"depth\":%" PRId64 ",\"depth_seconds\":", p->depth);
    json_real(stdout, p->depth > 0 ? r->depth_seconds : NAN, "%.6f");
    printf(",\"kv_type\":\"%s\"", p->kv_type ? p->kv_type : "f32");
    printf(",\"prefill_tok_s\":");
    json_real(stdout, r->pp.mean, "%.3f");
    printf(",\"prefill_tok_s_sd\":");
    json_real(stdout, r->pp.sd, "%.3f");
    printf(",\"decode_tok_s\":");
    json_real(stdout, r->tg.mean, "%.3f");
    printf(",\"decode_tok_s_sd\":");
    json_real(stdout, r->tg.sd, "%.3f");
    printf(",\"prefill_tok_s_lib\":");
    json_real(stdout, r->pp_lib.mean, "%.3f");
    printf(",\"decode_tok_s_lib\":");
    json_real(stdout, r->tg_lib.mean, "%.3f");
    json_samples("prefill_samples", r->pp_samples, p->prompt_tokens > 0 ? p->repetitions : 0);
    json_samples("decode_samples", r->tg_samples, p->gen_tokens > 0 ? p->repetitions : 0);
    printf(",\"weight_bytes_per_token\":%" PRIu64 ",\"weight_bytes_source\":\"%s\"",
           r->weight_bytes_per_token, r->weight_bytes_source);
    printf(",\"mem_bw_gbs\":");
    json_real(stdout, probe->done ? probe->gbs : NAN, "%.3f");
    if (probe->done)
        printf(",\"mem_bw_threads\":%d,\"mem_bw_mib\":%" PRId64, probe->threads, probe->mib);
    else
        printf(",\"mem_bw_threads\":null,\"mem_bw_mib\":null");
    printf(",\"llc_bytes\":%" PRId64, probe->llc_bytes);
    printf(",\"achieved_gbs\":");
    json_real(stdout, r->achieved_gbs, "%.3f");
    printf(",\"bw_fraction\":");
    json_real(stdout, r->bw_fraction, "%.4f");
    printf(",\"disk_probe_mb_s\":");
    json_real(stdout, p->disk->done ? p->disk->mb_s : NAN, "%.3f");
    if (p->disk->done)
        printf(",\"disk_probe_reads_s\":%.3f,\"disk_probe_reads\":%" PRIu64
               ",\"disk_probe_readers\":%d,\"disk_probe_record_bytes\":%" PRIu64
               ",\"disk_probe_direct\":%s",
               p->disk->reads_s, p->disk->reads, p->disk->readers, p->disk->record_bytes,
               p->disk->direct ? "true" : "false");
    else
        printf(",\"disk_probe_reads_s\":null,\"disk_probe_reads\":null,\"disk_probe_readers\":null,"
               "\"disk_probe_record_bytes\":null,\"disk_probe_direct\":null");
    printf(",\"decode_disk_bytes\":%" PRIu64 ",\"decode_disk_mb_s\":", r->decode_disk_bytes);
    json_real(stdout, r->decode_disk_mb_s, "%.3f");
    printf(",\"decode_disk_fraction\":");
    json_real(stdout, r->disk_fraction, "%.4f");
    store_report_json(stdout, &r->store);
    printf(",\"rss_peak_bytes\":%" PRIu64 ",\"rss_bytes\":%" PRIu64, r->rss_peak, r->rss_now);
    mtp_report_json(stdout, &r->mtp, p->mtp);
    gpu_report_json(stdout, r->model, &r->gpu);
    printf("}\n");
}

/* Evaluates tokens and reports a failure with the context's message. */
static int eval_tokens(coli_context *ctx, const int32_t *tokens, size_t n)
{
    coli_status st = coli_eval(ctx, tokens, n);

    if (st != COLI_OK)
        return runtime_error(st, coli_context_errmsg(ctx));
    return 0;
}

/* Decode by coli_generate from tok, greedy, n tokens past it, whatever
 * they are: the path multi-token prediction takes. */
static int generate_greedy(coli_context *ctx, int32_t tok, int64_t n)
{
    coli_sampler *s = NULL;
    coli_generate_params gp;
    coli_status st = coli_sampler_create(NULL, &s);

    if (st != COLI_OK)
        return runtime_error(st, "cannot create a sampler");
    coli_generate_params_init(&gp, sizeof gp);
    gp.max_tokens = (size_t)n;
    gp.ignore_eos = 1;
    st = coli_generate(ctx, &tok, 1, s, &gp, NULL, 0, NULL, NULL);
    coli_sampler_free(s);
    if (st != COLI_OK)
        return runtime_error(st, coli_context_errmsg(ctx));
    return 0;
}

/* The decode test with --streams: n steps, each one token of every
 * stream in one coli_eval_batch. next[s] starts each stream. */
static int decode_streams(coli_context *const *c, int64_t streams, int32_t *next, int64_t n, int vocab,
                          int random_decode, uint64_t *state)
{
    coli_batch_item it[64];
    for (int64_t i = 0; i < n; i++) {
        for (int64_t s = 0; s < streams; s++)
            it[s] = (coli_batch_item){c[s], &next[s], 1};
        coli_status st = coli_eval_batch(it, (size_t)streams);
        if (st != COLI_OK)
            return runtime_error(st, coli_context_errmsg(c[0]));
        for (int64_t s = 0; s < streams; s++)
            next[s] = random_decode ? (int32_t)(next_random(state) % (uint64_t)vocab)
                                    : logprob_argmax(coli_context_logits(c[s]), vocab);
    }
    return 0;
}

/* Forgets the positions from n on (n = 0: all of them). */
static int truncate_to(coli_context *ctx, int64_t n)
{
    coli_status st = coli_context_truncate(ctx, (size_t)n);

    if (st != COLI_OK)
        return runtime_error(st, coli_context_errmsg(ctx));
    return 0;
}

int bench_run(coli_model *model, const bench_params *p, const bench_probe *probe)
{
    coli_model_info info;
    coli_context *ctx = NULL, *streams[64] = {NULL};
    bench_result r;
    gpu_report gpu_base, gpu_pairs;
    coli_store_stats store_base, s2, s3;
    int32_t *prompt = NULL, *depth_ids;
    double *pp_lib = NULL, *tg_lib = NULL;
    uint64_t state, wbytes = 0, wtokens = 0;
    int64_t rep, i, reps = p->repetitions;
    size_t n_samples = (size_t)(reps > 0 ? reps : 1);
    coli_status st;
    int rc = 1;

    memset(&r, 0, sizeof r);
    memset(&gpu_base, 0, sizeof gpu_base);
    memset(&gpu_pairs, 0, sizeof gpu_pairs);
    memset(&store_base, 0, sizeof store_base);
    memset(&s2, 0, sizeof s2);
    memset(&s3, 0, sizeof s3);
    r.model = model;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    st = coli_model_get_info(model, &info);
    if (st != COLI_OK)
        return runtime_error(st, coli_model_errmsg(model));
    if (info.vocab_size <= 0)
        return runtime_error(COLI_EFORMAT, "the model reports no vocabulary");

    r.pp_samples = calloc(n_samples, sizeof(double));
    r.tg_samples = calloc(n_samples, sizeof(double));
    pp_lib = calloc(n_samples, sizeof(double));
    tg_lib = calloc(n_samples, sizeof(double));
    prompt = malloc((size_t)(p->depth + p->prompt_tokens + 1) * sizeof *prompt);
    if (!r.pp_samples || !r.tg_samples || !pp_lib || !tg_lib || !prompt) {
        runtime_error(COLI_ENOMEM, "benchmark buffers");
        goto done;
    }
    /* Seeded random ids; the extra one starts decoding when there is no prompt. */
    state = p->seed * 0x9e3779b97f4a7c15u + 0x632be59bd9b4e019u;
    if (state == 0)
        state = 1;
    for (i = 0; i <= p->prompt_tokens; i++)
        prompt[i] = (int32_t)(next_random(&state) % (uint64_t)info.vocab_size);
    depth_ids = prompt + p->prompt_tokens + 1;
    for (i = 0; i < p->depth; i++)
        depth_ids[i] = (int32_t)(next_random(&state) % (uint64_t)info.vocab_size);

    st = coli_context_create(model, p->ctx_opts, &ctx);
    if (st != COLI_OK) {
        runtime_error(st, ctx ? coli_context_errmsg(ctx) : coli_model_errmsg(model));
        goto done;
    }
    streams[0] = ctx;
    for (i = 1; i < p->streams; i++) {
        st = coli_context_create(model, p->ctx_opts, &streams[i]);
        if (st != COLI_OK) {
            runtime_error(st, coli_model_errmsg(model));
            goto done;
        }
    }
    /* As llama-bench -d: the cache is filled once; each test truncates it
     * back to the depth (the positions before stay) and starts there. */
    if (p->depth > 0) {
        double t0 = now_seconds();
        if (eval_tokens(ctx, depth_ids, (size_t)p->depth) != 0)
            goto done;
        r.depth_seconds = now_seconds() - t0;
    }

    /* Repetition -1 is the warm-up: caches, page faults, thread start-up. */
    for (rep = -1; rep < reps; rep++) {
        double t0, t1, t2 = 0.0, t3 = 0.0;
        coli_stats stats;
        int32_t tok = prompt[p->prompt_tokens];

        if (truncate_to(ctx, p->depth) != 0)
            goto done;
        coli_context_stats_reset(ctx);
        t0 = t1 = now_seconds();
        if (p->prompt_tokens > 0) {
            if (eval_tokens(ctx, prompt, (size_t)p->prompt_tokens) != 0)
                goto done;
            t1 = now_seconds();
            tok = logprob_argmax(coli_context_logits(ctx), info.vocab_size);
        }
        if (p->gen_tokens > 0) {
            /* As llama-bench's tgN: decoding starts from the depth (an
             * empty cache by default), not after the prompt (whose
             * attention would be timed too). */
            if (truncate_to(ctx, p->depth) != 0)
                goto done;
            if (store_report_read(model, &s2) != 0)
                goto done;
            t2 = now_seconds();
            if (p->streams > 1) {
                int32_t next[64];
                next[0] = tok;
                for (i = 1; i < p->streams; i++) {
                    if (truncate_to(streams[i], 0) != 0)
                        goto done;
                    next[i] = (int32_t)(next_random(&state) % (uint64_t)info.vocab_size);
                }
                t2 = now_seconds();
                if (decode_streams(streams, p->streams, next, p->gen_tokens, info.vocab_size, p->random_decode,
                                   &state) != 0)
                    goto done;
            } else if (p->mtp > 0) {
                /* the same gen_tokens evaluations: tok, then gen_tokens - 1 generated */
                if (generate_greedy(ctx, tok, p->gen_tokens - 1) != 0)
                    goto done;
            } else {
                for (i = 0; i < p->gen_tokens; i++) {
                    if (eval_tokens(ctx, &tok, 1) != 0)
                        goto done;
                    tok = p->random_decode ? (int32_t)(next_random(&state) % (uint64_t)info.vocab_size)
                                           : logprob_argmax(coli_context_logits(ctx), info.vocab_size);
                }
            }
            t3 = now_seconds();
            if (store_report_read(model, &s3) != 0)
                goto done;
        }
        memset(&stats, 0, sizeof stats);
        stats.struct_size = sizeof stats;
        st = coli_context_stats(ctx, &stats);
        if (st != COLI_OK) {
            runtime_error(st, coli_context_errmsg(ctx));
            goto done;
        }
        /* The tier's model-wide counts are taken from after the warm-up;
         * its per-context pair counts are reset with the statistics. */
        if (gpu_report_read(model, ctx, &r.gpu) != 0 || store_report_read(model, &r.store) != 0)
            goto done;
        if (rep < 0) {
            gpu_base = r.gpu;
            store_base = r.store;
            continue;
        }
        if (p->gen_tokens > 0) {
            r.decode_disk_bytes += s3.disk_bytes - s2.disk_bytes;
            r.decode_seconds += t3 - t2;
        }
        gpu_report_add_pairs(&gpu_pairs, &r.gpu);
        mtp_report_add(&r.mtp, &stats);
        r.pp_samples[rep] = t1 > t0 ? (double)p->prompt_tokens / (t1 - t0) : NAN;
        r.tg_samples[rep] = t3 > t2 ? (double)(p->gen_tokens * p->streams) / (t3 - t2) : NAN;
        pp_lib[rep] = stats.prefill_tok_s > 0 ? stats.prefill_tok_s : NAN;
        /* with streams, a context's statistics hold its share of each pass */
        tg_lib[rep] = stats.decode_tok_s > 0 && p->streams <= 1 ? stats.decode_tok_s : NAN;
        /* A one-token prompt counts as a decode step in the library's
         * statistics: only the decode test's own steps are counted here. */
        if (p->prompt_tokens != 1) {
            wbytes += stats.decode_weight_bytes;
            wtokens += stats.decode_tokens;
        }
    }

    r.pp = p->prompt_tokens > 0 ? summarize(r.pp_samples, reps) : (summary){NAN, NAN};
    r.tg = p->gen_tokens > 0 ? summarize(r.tg_samples, reps) : (summary){NAN, NAN};
    r.pp_lib = p->prompt_tokens > 1 ? summarize(pp_lib, reps) : (summary){NAN, NAN};
    r.tg_lib = p->gen_tokens > 0 && p->prompt_tokens != 1 ? summarize(tg_lib, reps)
                                                          : (summary){NAN, NAN};
    gpu_report_since(&r.gpu, &gpu_base);
    gpu_report_set_pairs(&r.gpu, &gpu_pairs);
    store_report_since(&r.store, &store_base);
    /* Only a streamed store reads from disk; a mapped file's page faults
     * are not counted. */
    r.decode_disk_mb_s = NAN;
    r.disk_fraction = NAN;
    if (r.store.mode == COLI_STORE_STREAMED && p->gen_tokens > 0 && r.decode_seconds > 0) {
        r.decode_disk_mb_s = (double)r.decode_disk_bytes / r.decode_seconds / 1e6;
        if (p->disk->done && p->disk->mb_s > 0)
            r.disk_fraction = r.decode_disk_mb_s / p->disk->mb_s;
    }
    bench_rss(&r.rss_peak, &r.rss_now);
    weight_bytes(model, p, wbytes, wtokens, &r);
    r.achieved_gbs = NAN;
    r.bw_fraction = NAN;
    if (r.weight_bytes_per_token > 0 && isfinite(r.tg.mean)) {
        r.achieved_gbs = r.tg.mean * (double)r.weight_bytes_per_token / 1e9;
        if (probe->done && probe->gbs > 0)
            r.bw_fraction = r.achieved_gbs / probe->gbs;
    }
    if (p->json)
        print_json(p, &info, probe, &r);
    else
        print_text(p, &info, probe, &r);
    rc = 0;
done:
    for (i = 1; i < p->streams; i++)
        coli_context_free(streams[i]);
    coli_context_free(ctx);
    free(prompt);
    free(r.pp_samples);
    free(r.tg_samples);
    free(pp_lib);
    free(tg_lib);
    return rc;
}
