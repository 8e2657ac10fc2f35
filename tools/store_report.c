/*
 * store_report.c - the expert store in the coli tool (see store_report.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "store_report.h"

#include "diag.h"
#include "errors.h"
#include "jsonout.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ---- options ---------------------------------------------------------------- */

void store_args_default(store_args *s)
{
    s->budget_mb = -1;
    s->ram_gb = NULL;
    s->slots = -1;
    s->io_threads = -1;
    s->no_prefetch = 0;
    s->no_hotset = 0;
}

static int parse_ram_gb(const char *s, int64_t *mb)
{
    int64_t lo = 0, hi = 0;
    double gb = 0.0;
    int rc;

    if (coli_option_bounds(COLI_OPT_MEM_BUDGET_MB, &lo, &hi) != COLI_OK)
        return runtime_error(COLI_EINVAL, "no bounds for option --ram-gb");
    if ((rc = parse_real("--ram-gb", s, 0.0, (double)hi / 1024.0, &gb)) != 0)
        return rc;
    *mb = (int64_t)floor(gb * 1024.0);
    /* 0 means no limit: a tiny positive budget must not silently mean it. */
    if (gb > 0.0 && *mb < 1)
        return usage_error("value '%s' for --ram-gb is below 1 MiB (0 means no limit)", s);
    return 0;
}

int store_args_parse(const args *a, store_args *s)
{
    int rc;

    store_args_default(s);
    s->no_prefetch = a->given[O_NO_PREFETCH] > 0;
    s->no_hotset = a->given[O_NO_HOTSET] > 0;
    if (a->value[O_RAM_GB] != NULL) {
        if ((rc = parse_ram_gb(a->value[O_RAM_GB], &s->budget_mb)) != 0)
            return rc;
        s->ram_gb = a->value[O_RAM_GB];
    }
    if (a->value[O_EXPERT_SLOTS] != NULL &&
        (rc = option_in_bounds("--expert-slots", COLI_OPT_EXPERT_SLOTS,
                               a->value[O_EXPERT_SLOTS], &s->slots)) != 0)
        return rc;
    if (a->value[O_IO_THREADS] != NULL &&
        (rc = option_in_bounds("--io-threads", COLI_OPT_IO_THREADS, a->value[O_IO_THREADS],
                               &s->io_threads)) != 0)
        return rc;
    return 0;
}

int store_args_apply(const store_args *s, coli_options *opts)
{
    coli_status st;

    if (s->budget_mb >= 0 &&
        (st = coli_options_set(opts, COLI_OPT_MEM_BUDGET_MB, s->budget_mb)) != COLI_OK)
        return runtime_error(st, "--ram-gb");
    if (s->slots >= 0 && (st = coli_options_set(opts, COLI_OPT_EXPERT_SLOTS, s->slots)) != COLI_OK)
        return runtime_error(st, "--expert-slots");
    if (s->io_threads >= 0 &&
        (st = coli_options_set(opts, COLI_OPT_IO_THREADS, s->io_threads)) != COLI_OK)
        return runtime_error(st, "--io-threads");
    if (s->no_prefetch && (st = coli_options_set(opts, COLI_OPT_PREFETCH, 0)) != COLI_OK)
        return runtime_error(st, "--no-prefetch");
    if (s->no_hotset && (st = coli_options_set(opts, COLI_OPT_HOTSET, 0)) != COLI_OK)
        return runtime_error(st, "--no-hotset");
    return 0;
}

int store_explain_open_failure(const store_args *s, int status, const char *msg)
{
    const char *at;
    unsigned long long mib = 0;
    int k = 0;

    if (status != COLI_ERANGE || msg == NULL)
        return 0;
    /* The library counts the budget in MiB; the user gave GiB. */
    if (s->ram_gb != NULL && strstr(msg, "COLI_OPT_MEM_BUDGET_MB") != NULL) {
        at = strstr(msg, "at least ");
        if (at != NULL && sscanf(at, "at least %llu MiB", &mib) == 1) {
            /* rounded up to what --ram-gb reads back as enough */
            double gb = ceil((double)mib * 1000.0 / 1024.0) / 1000.0;
            long long kv_pos = 0;
            double kv_mib = 0;
            const char *kv = strstr(msg, "the KV cache of ");
            char kv_text[96] = "";

            if (kv != NULL && sscanf(kv, "the KV cache of %lld positions (%lf MiB)", &kv_pos, &kv_mib) == 2)
                snprintf(kv_text, sizeof kv_text, ", the KV cache of %lld positions (%.1f MiB; -c lowers it)",
                         kv_pos, kv_mib);
            diag_printf(DIAG_ERROR, "%s: --ram-gb %s is too small for this model: its dense weights%s and the "
                            "experts one token routes to in a layer need %llu MiB; give at least "
                            "--ram-gb %.3f, or 0 for no limit\n",
                    cli_prog, s->ram_gb, kv_text, mib, gb);
        } else {
            diag_printf(DIAG_ERROR, "%s: --ram-gb %s is too small for this model: give more, or 0 for no limit\n",
                    cli_prog, s->ram_gb);
        }
        return 1;
    }
    if (s->slots > 0 && strstr(msg, "COLI_OPT_EXPERT_SLOTS") != NULL) {
        at = strstr(msg, "cannot hold the ");
        if (at != NULL && sscanf(at, "cannot hold the %d experts", &k) == 1)
            diag_printf(DIAG_ERROR, "%s: --expert-slots %" PRId64 " is too few for this model: one token routes "
                            "to %d experts in a layer; give at least %d, or 0 for as many as --ram-gb "
                            "leaves room for\n",
                    cli_prog, s->slots, k, k);
        else
            diag_printf(DIAG_ERROR, "%s: --expert-slots %" PRId64 " is too few for this model\n", cli_prog, s->slots);
        return 1;
    }
    return 0;
}

int store_io_threads(const store_args *s)
{
    return s->io_threads > 0 ? (int)s->io_threads : 4;
}

/* ---- statistics --------------------------------------------------------------- */

int store_report_read(const coli_model *model, coli_store_stats *st)
{
    coli_status rc;

    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    rc = coli_model_store_stats(model, st);
    if (rc != COLI_OK)
        return runtime_error(rc, coli_model_errmsg(model));
    return 0;
}

void store_report_since(coli_store_stats *r, const coli_store_stats *base)
{
    r->gets -= base->gets;
    r->hits -= base->hits;
    r->misses -= base->misses;
    r->disk_reads -= base->disk_reads;
    r->disk_bytes -= base->disk_bytes;
    r->prefetch_reads -= base->prefetch_reads;
    r->prefetch_used -= base->prefetch_used;
    r->predicted -= base->predicted;
    r->predicted_right -= base->predicted_right;
    r->stall_ns -= base->stall_ns;
    r->evictions -= base->evictions;
    r->prefetch_accuracy =
        r->predicted ? (double)r->predicted_right / (double)r->predicted : 0.0;
}

const char *store_mode_name(coli_store_mode mode)
{
    switch (mode) {
    case COLI_STORE_RESIDENT: return "resident";
    case COLI_STORE_MAPPED: return "mapped";
    case COLI_STORE_STREAMED: return "streamed";
    }
    return "unknown";
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

const char *store_size_text(char *buf, size_t cap, uint64_t bytes)
{
    if (bytes >= (uint64_t)1 << 30)
        snprintf(buf, cap, "%.2f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
    else if (bytes >= (uint64_t)1 << 20)
        snprintf(buf, cap, "%.2f MiB", mib(bytes));
    else
        snprintf(buf, cap, "%.1f KiB", (double)bytes / 1024.0);
    return buf;
}

static double hit_rate(const coli_store_stats *s)
{
    return s->gets ? (double)s->hits / (double)s->gets : 0.0;
}

/* "streamed, 12 of 96 experts in RAM" and the like. */
static void slots_text(FILE *f, const coli_store_stats *s)
{
    if (s->mode == COLI_STORE_STREAMED)
        fprintf(f, "streamed, %" PRIu64 " of %" PRIu64 " experts in RAM", s->slots, s->experts);
    else if (s->mode == COLI_STORE_MAPPED)
        fprintf(f, "mapped, all %" PRIu64 " experts in model.coli's mapping", s->experts);
    else
        fprintf(f, "resident, all %" PRIu64 " experts loaded at open", s->experts);
}

void store_report_text(FILE *f, int width, const coli_store_stats *s)
{
    fprintf(f, "%-*s ", width, "store:");
    slots_text(f, s);
    fprintf(f, "; %" PRIu64 " gets, %" PRIu64 " hits, %" PRIu64 " misses (hit rate %.4f); "
               "%.1f MiB read from disk; prefetch accuracy %.4f; stall %.3f s\n",
            s->gets, s->hits, s->misses, hit_rate(s), mib(s->disk_bytes), s->prefetch_accuracy,
            (double)s->stall_ns / 1e9);
}

void store_report_json(FILE *f, const coli_store_stats *s)
{
    fprintf(f, ",\"store\":{\"mode\":\"%s\",\"direct_io\":%s,\"experts\":%" PRIu64
               ",\"slots\":%" PRIu64 ",\"slot_bytes\":%" PRIu64 ",\"hot_pinned\":%" PRIu64
               ",\"dense_bytes\":%" PRIu64 ",\"gets\":%" PRIu64 ",\"hits\":%" PRIu64
               ",\"misses\":%" PRIu64 ",\"hit_rate\":",
            store_mode_name(s->mode), s->direct_io ? "true" : "false", s->experts, s->slots,
            s->slot_bytes, s->hot_pinned, s->dense_bytes, s->gets, s->hits, s->misses);
    json_real(f, hit_rate(s), "%.6f");
    fprintf(f, ",\"disk_reads\":%" PRIu64 ",\"disk_bytes\":%" PRIu64
               ",\"prefetch_reads\":%" PRIu64 ",\"prefetch_used\":%" PRIu64
               ",\"predicted\":%" PRIu64 ",\"predicted_right\":%" PRIu64
               ",\"prefetch_accuracy\":",
            s->disk_reads, s->disk_bytes, s->prefetch_reads, s->prefetch_used, s->predicted,
            s->predicted_right);
    json_real(f, s->prefetch_accuracy, "%.6f");
    fprintf(f, ",\"stall_s\":%.6f,\"evictions\":%" PRIu64 "}", (double)s->stall_ns / 1e9,
            s->evictions);
}
