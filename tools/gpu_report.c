/*
 * gpu_report.c - the GPU expert tier in the coli tool (see gpu_report.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gpu_report.h"

#include "diag.h"
#include "errors.h"
#include "jsonout.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- options ---------------------------------------------------------------- */

/* A list the library takes: its own parser decides, so the tool cannot
 * accept what the library refuses or refuse what it accepts. */
static int check_devices(const char *list)
{
    coli_options *tmp = NULL;
    coli_status st = coli_options_create(&tmp);

    if (st != COLI_OK)
        return runtime_error(st, "cannot create options");
    st = coli_options_set_gpu_devices(tmp, list);
    coli_options_free(tmp);
    if (st == COLI_EINVAL)
        return usage_error("invalid value '%s' for --gpu-devices (expected distinct device "
                           "numbers 0-1023, at most 16, e.g. 0,1)", list);
    if (st != COLI_OK)
        return runtime_error(st, "--gpu-devices");
    return 0;
}

static int parse_expert_gb(const char *s, int64_t *mb)
{
    int64_t lo = 0, hi = 0;
    double gb = 0.0;
    int rc;

    if (coli_option_bounds(COLI_OPT_GPU_EXPERT_MB, &lo, &hi) != COLI_OK)
        return runtime_error(COLI_EINVAL, "no bounds for option --gpu-expert-gb");
    if ((rc = parse_real("--gpu-expert-gb", s, 0.0, (double)hi / 1024.0, &gb)) != 0)
        return rc;
    *mb = (int64_t)floor(gb * 1024.0);
    /* 0 is a real choice (no expert on the device); a tiny positive size
     * would silently mean the same, so it is refused. */
    if (gb > 0.0 && *mb < 1)
        return usage_error("value '%s' for --gpu-expert-gb is below 1 MiB (0 keeps every "
                           "expert on the CPU)", s);
    return 0;
}

int gpu_args_parse(const args *a, gpu_args *g)
{
    int rc;

    g->gpu = -1;
    g->devices = NULL;
    g->expert_mb = -1;
    g->release_host = a->given[O_RELEASE_HOST] > 0;
    g->experts_only = a->given[O_GPU_EXPERTS_ONLY] > 0;
    if (a->given[O_GPU] && a->given[O_NO_GPU])
        return usage_error("--gpu and --no-gpu cannot be used together");
    if (a->given[O_NO_GPU]) {
        if (a->value[O_GPU_DEVICES] != NULL)
            return usage_error("--gpu-devices and --no-gpu cannot be used together");
        if (a->value[O_GPU_EXPERT_GB] != NULL)
            return usage_error("--gpu-expert-gb and --no-gpu cannot be used together");
        if (g->experts_only)
            return usage_error("--gpu-experts-only and --no-gpu cannot be used together");
        g->gpu = 0;
    }
    if (a->given[O_GPU] || g->experts_only)
        g->gpu = 1;
    if (a->value[O_GPU_DEVICES] != NULL) {
        if ((rc = check_devices(a->value[O_GPU_DEVICES])) != 0)
            return rc;
        g->devices = a->value[O_GPU_DEVICES];
        g->gpu = 1;
    }
    if (a->value[O_GPU_EXPERT_GB] != NULL) {
        if ((rc = parse_expert_gb(a->value[O_GPU_EXPERT_GB], &g->expert_mb)) != 0)
            return rc;
        g->gpu = 1;
    }
    return 0;
}

int gpu_args_apply(const gpu_args *g, coli_options *opts)
{
    coli_status st;

    if (g->gpu >= 0 && (st = coli_options_set(opts, COLI_OPT_GPU, g->gpu)) != COLI_OK)
        return runtime_error(st, g->gpu ? "--gpu" : "--no-gpu");
    if (g->devices != NULL && (st = coli_options_set_gpu_devices(opts, g->devices)) != COLI_OK)
        return runtime_error(st, "--gpu-devices");
    if (g->expert_mb >= 0 &&
        (st = coli_options_set(opts, COLI_OPT_GPU_EXPERT_MB, g->expert_mb)) != COLI_OK)
        return runtime_error(st, "--gpu-expert-gb");
    if (g->release_host && (st = coli_options_set(opts, COLI_OPT_GPU_RELEASE_HOST, 1)) != COLI_OK)
        return runtime_error(st, "--release-host");
    if (g->experts_only && (st = coli_options_set(opts, COLI_OPT_GPU_LAYERS, 0)) != COLI_OK)
        return runtime_error(st, "--gpu-experts-only");
    return 0;
}

/* Whether the tier was asked for: as the library decides it (an option
 * wins, else COLI_CUDA=1). */
static int gpu_asked(const gpu_args *g)
{
    const char *env;

    if (g->gpu >= 0)
        return g->gpu;
    env = getenv("COLI_CUDA");
    return env != NULL && strcmp(env, "1") == 0;
}

void gpu_warn_unused(const gpu_args *g, const coli_model *model)
{
    static const char prefix[] = "not in use: ";
    coli_model_info info;
    const char *why = "no detail";

    if (!gpu_asked(g) || coli_model_gpu_devices(model) > 0)
        return;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (coli_model_get_info(model, &info) == COLI_OK && info.gpu_detail != NULL)
        why = info.gpu_detail;
    if (strncmp(why, prefix, sizeof prefix - 1) == 0)
        why += sizeof prefix - 1;
    diag_printf(DIAG_WARNING, "coli: warning: GPU tier not in use: %s\n", why);
}

int gpu_log_is_unused_warning(coli_log_level level, const char *message)
{
    static const char start[] = "GPU expert tier requested but ";

    return level == COLI_LOG_WARN && strncmp(message, start, sizeof start - 1) == 0;
}

/* ---- statistics --------------------------------------------------------------- */

int gpu_report_read(const coli_model *model, const coli_context *ctx, gpu_report *r)
{
    int n = coli_model_gpu_devices(model);

    memset(r, 0, sizeof *r);
    if (n > GPU_REPORT_MAX)
        n = GPU_REPORT_MAX;
    for (int d = 0; d < n; d++) {
        coli_status st;

        r->dev[d].struct_size = sizeof r->dev[d];
        st = coli_context_gpu_stats(ctx, d, &r->dev[d]);
        if (st != COLI_OK)
            return runtime_error(st, coli_context_errmsg(ctx));
    }
    r->n = n;
    return 0;
}

void gpu_report_since(gpu_report *r, const gpu_report *base)
{
    for (int d = 0; d < r->n && d < base->n; d++) {
        coli_gpu_stats *s = &r->dev[d];
        const coli_gpu_stats *b = &base->dev[d];

        s->calls -= b->calls;
        s->rows -= b->rows;
        s->failures -= b->failures;
        s->h2d_ns -= b->h2d_ns;
        s->kernel_ns -= b->kernel_ns;
        s->d2h_ns -= b->d2h_ns;
        s->h2d_bytes -= b->h2d_bytes;
        s->d2h_bytes -= b->d2h_bytes;
    }
}

void gpu_report_add_pairs(gpu_report *acc, const gpu_report *r)
{
    if (acc->n == 0)
        acc->n = r->n;
    for (int d = 0; d < acc->n && d < r->n; d++) {
        acc->dev[d].routed_pairs += r->dev[d].routed_pairs;
        acc->dev[d].gpu_pairs += r->dev[d].gpu_pairs;
        acc->dev[d].fallback_pairs += r->dev[d].fallback_pairs;
    }
}

void gpu_report_set_pairs(gpu_report *r, const gpu_report *acc)
{
    for (int d = 0; d < r->n && d < acc->n; d++) {
        coli_gpu_stats *s = &r->dev[d];

        s->routed_pairs = acc->dev[d].routed_pairs;
        s->gpu_pairs = acc->dev[d].gpu_pairs;
        s->fallback_pairs = acc->dev[d].fallback_pairs;
        s->gpu_expert_hit_rate =
            s->routed_pairs ? (double)s->gpu_pairs / (double)s->routed_pairs : 0.0;
    }
}

static const char *model_detail(const coli_model *model)
{
    coli_model_info info;

    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (coli_model_get_info(model, &info) != COLI_OK || info.gpu_detail == NULL)
        return "unknown";
    return info.gpu_detail;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

void gpu_report_text(FILE *f, int width, const coli_model *model, const gpu_report *r)
{
    int n = r != NULL ? r->n : 0;

    fprintf(f, "%-*s %s\n", width, "gpu:", model_detail(model));
    for (int d = 0; d < n; d++) {
        const coli_gpu_stats *s = &r->dev[d];
        char label[32];
        int w;

        snprintf(label, sizeof label, "gpu %d:", s->ordinal);
        w = (int)strlen(label) > width ? (int)strlen(label) : width; /* continuation indent */
        fprintf(f, "%-*s %s%s, %" PRIu64 " experts resident (%.1f MiB), hit rate %.4f (%" PRIu64
                   " of %" PRIu64 " routed pairs)\n",
                width, label, s->name, s->usable ? "" : " (given up after failures)",
                s->resident_experts, (double)s->resident_bytes / (1024.0 * 1024.0),
                s->gpu_expert_hit_rate, s->gpu_pairs, s->routed_pairs);
        fprintf(f, "%-*s %" PRIu64 " calls, %" PRIu64 " rows; h2d %.3f ms, kernel %.3f ms, d2h "
                   "%.3f ms; %" PRIu64 " failures\n",
                w, "", s->calls, s->rows, ms(s->h2d_ns), ms(s->kernel_ns), ms(s->d2h_ns),
                s->failures);
        if (s->resident_dense_bytes)
            fprintf(f, "%-*s layers here: %.1f MiB dense, KV cache %.1f MiB, scratch %.1f MiB; %" PRIu64
                       " steps (%.3f ms), %" PRIu64 " from a graph, %" PRIu64 " waits for the CPU's experts\n",
                    w, "", (double)s->resident_dense_bytes / 1048576.0, (double)s->kv_bytes / 1048576.0,
                    (double)s->scratch_bytes / 1048576.0, s->steps, ms(s->step_ns), s->graph_launches,
                    s->host_syncs);
        uint64_t ph = 0;
        for (int i = 0; i < COLI_GPU_N_PHASES; i++)
            ph += s->phase_ns[i];
        if (ph) {
            fprintf(f, "%-*s phases:", w, "");
            for (int i = 0; i < COLI_GPU_N_PHASES; i++)
                fprintf(f, " %s %.3f ms%s", coli_gpu_phase_name(i), ms(s->phase_ns[i]),
                        i + 1 < COLI_GPU_N_PHASES ? "," : "\n");
        }
    }
}

void gpu_report_json(FILE *f, const coli_model *model, const gpu_report *r)
{
    const char *tier = coli_gpu_tier();
    const char *detail = model_detail(model);
    int n = r != NULL ? r->n : 0;

    fputs(",\"gpu\":{\"tier\":", f);
    json_string(f, tier, strlen(tier));
    fputs(",\"detail\":", f);
    json_string(f, detail, strlen(detail));
    fputs(",\"devices\":[", f);
    for (int d = 0; d < n; d++) {
        const coli_gpu_stats *s = &r->dev[d];

        fprintf(f, "%s{\"ordinal\":%d,\"name\":", d ? "," : "", s->ordinal);
        json_string(f, s->name, strnlen(s->name, sizeof s->name));
        fprintf(f, ",\"usable\":%s,\"resident_experts\":%" PRIu64 ",\"resident_bytes\":%" PRIu64
                   ",\"calls\":%" PRIu64 ",\"rows\":%" PRIu64 ",\"routed_pairs\":%" PRIu64
                   ",\"gpu_pairs\":%" PRIu64 ",\"fallback_pairs\":%" PRIu64
                   ",\"gpu_expert_hit_rate\":",
                s->usable ? "true" : "false", s->resident_experts, s->resident_bytes, s->calls,
                s->rows, s->routed_pairs, s->gpu_pairs, s->fallback_pairs);
        json_real(f, s->gpu_expert_hit_rate, "%.6f");
        fprintf(f, ",\"h2d_ms\":%.3f,\"kernel_ms\":%.3f,\"d2h_ms\":%.3f,\"h2d_bytes\":%" PRIu64
                   ",\"d2h_bytes\":%" PRIu64 ",\"failures\":%" PRIu64 "}",
                ms(s->h2d_ns), ms(s->kernel_ns), ms(s->d2h_ns), s->h2d_bytes, s->d2h_bytes,
                s->failures);
    }
    fputs("]}", f);
}

/* ---- coli gpu ------------------------------------------------------------------- */

const char gpu_synopsis[] =
    "Usage: coli gpu [OPTION]...\n"
    "List what the library sees of the GPU expert tier: the tier compiled in,\n"
    "and each device with its index, name, architecture, wave width, and free\n"
    "and total memory.\n";

const opthelp gpu_options[] = {
    {O_FORMAT, "text or json (default text)"},
    {O_VERBOSE, "also print, on standard error, each device's\nordinal and the environment variables "
                "that pick\nthe devices"},
    {O_COUNT, NULL},
};

const char gpu_epilogue[] =
    "Commands that load a model use the tier with --gpu (or COLI_CUDA=1), on the\n"
    "devices of --gpu-devices (or COLI_GPUS, COLI_GPU), by default all of these.\n";

static const char no_tier[] =
    "the library was built without a GPU tier; build one with ./configure --with-cuda\n"
    "or ./configure --with-hip\n";

int cmd_gpu(const args *a)
{
    const char *tier = coli_gpu_tier();
    int none = strcmp(tier, "none") == 0;
    int n = 0, json, rc;
    coli_status st;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    st = coli_gpu_count(&n);
    if (st != COLI_OK)
        return runtime_error(st, "cannot count the GPU devices");
    if (a->given[O_VERBOSE]) {
        /* What decides the devices a model uses and the ones listed here. */
        static const char *const vars[] = {"COLI_CUDA", "COLI_GPUS", "COLI_GPU", "CUDA_EXPERT_GB",
                                           "CUDA_RELEASE_HOST", "CUDA_VISIBLE_DEVICES",
                                           "HIP_VISIBLE_DEVICES"};
        for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
            const char *v = getenv(vars[k]);
            fprintf(stderr, "%s: %s%s%s\n", cli_prog, vars[k], v ? "=" : " unset", v ? v : "");
        }
    }
    if (json) {
        fputs("{\"tier\":", stdout);
        json_string(stdout, tier, strlen(tier));
        fputs(",\"devices\":[", stdout);
    } else {
        printf("tier: %s\n", tier);
        if (none)
            fputs(no_tier, stdout);
        else if (n == 0)
            puts("no device");
    }
    for (int i = 0; i < n; i++) {
        coli_gpu_device dev;

        memset(&dev, 0, sizeof dev);
        dev.struct_size = sizeof dev;
        st = coli_gpu_device_get(i, &dev);
        if (st != COLI_OK) {
            if (json)
                fputs("]}\n", stdout); /* what was written stays valid */
            return runtime_error(st, "cannot query a GPU device");
        }
        if (json) {
            fprintf(stdout, "%s{\"index\":%d,\"ordinal\":%d,\"name\":", i ? "," : "", i,
                    dev.ordinal);
            json_string(stdout, dev.name, strnlen(dev.name, sizeof dev.name));
            fputs(",\"arch\":", stdout);
            json_string(stdout, dev.arch, strnlen(dev.arch, sizeof dev.arch));
            printf(",\"wave\":%d,\"free_bytes\":%" PRIu64 ",\"total_bytes\":%" PRIu64 "}",
                   dev.wave, dev.free_bytes, dev.total_bytes);
        } else {
            if (a->given[O_VERBOSE])
                fprintf(stderr, "%s: device %d is the runtime's device %d\n", cli_prog, i, dev.ordinal);
            printf("device %d: %.*s, %.*s, wave %d, %.0f MiB free of %.0f MiB\n", i,
                   (int)sizeof dev.name, dev.name, (int)sizeof dev.arch, dev.arch, dev.wave,
                   (double)dev.free_bytes / (1024.0 * 1024.0),
                   (double)dev.total_bytes / (1024.0 * 1024.0));
        }
    }
    if (json)
        fputs("]}\n", stdout);
    return 0;
}
