/*
 * convert.c - `coli convert` (see convert.h).
 *
 * The library does the work and owns the output's atomicity (model.coli
 * is written under a temporary name and renamed when complete); the tool
 * draws a progress bar when standard error is a terminal and turns Ctrl-C
 * into a request to stop, which the library answers by removing its
 * temporary file.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "convert.h"

#include "demo_dir.h"
#include "errors.h"
#include "jsonout.h"

#include <colibri/colibri.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char convert_synopsis[] =
    "Usage: coli convert [--model DIR] --out DIR [OPTION]...\n"
    "Convert a Hugging Face checkpoint into a model directory laid out for\n"
    "streaming: its config and tokenizer files, and model.coli, which holds\n"
    "every weight in the chosen format and each expert as one aligned record\n"
    "(docs/container.md). Every command opens the result as it opens a\n"
    "checkpoint; --ram-gb then bounds the RAM its weights take, and the experts\n"
    "that do not fit are read from disk when they are routed to.\n";

const opthelp convert_options[] = {
    {O_MODEL, "Hugging Face model directory to convert (default:\nthe demo model)"},
    {O_OUT, "output directory, created if missing (required)"},
    {O_WEIGHTS, "weight format: bf16, q8, q4 or q2 (default q4)"},
    {O_Q4_GROUP, "group size of q4 weights: 32, 64 or 128 (default 32)"},
    {O_THREADS, "conversion threads; 0 = all online cores (default 0)"},
    {O_FORCE, "replace the model.coli of an earlier conversion in\nthe output directory"},
    {O_FORMAT, "text or json (default text)"},
    {O_VERBOSE, "say what is converted, to where and how, on\nstandard error before starting"},
    {O_COUNT, NULL},
};

const char convert_epilogue[] =
    "While it runs, standard error shows a progress bar when it is a terminal.\n"
    "At the end, one line on standard output (one JSON object with --format json)\n"
    "gives the bytes written, the seconds and the rate. model.coli appears only\n"
    "once complete: a failure, or Ctrl-C (exit status 130), leaves none behind.\n";

/* Set by Ctrl-C; the progress callback passes it on to the library. */
static volatile sig_atomic_t g_stop;

static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
    signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the program at once */
}

static double now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- progress ----------------------------------------------------------------- */

#define BAR_WIDTH 30
#define BAR_INTERVAL 0.1 /* seconds between redraws */

typedef struct progress_bar {
    int tty;      /* standard error is a terminal: draw */
    int drawn;    /* something is on the line */
    double start, last;
} progress_bar;

/* The library's progress callback, called by one thread at a time. */
static int on_progress(void *user, uint64_t done, uint64_t total)
{
    progress_bar *b = user;
    double t, frac, mbs;
    char bar[BAR_WIDTH + 1];
    int fill;

    if (g_stop)
        return 1; /* the library stops and removes its temporary file */
    if (!b->tty)
        return 0;
    t = now_seconds();
    if (done < total && b->drawn && t - b->last < BAR_INTERVAL)
        return 0;
    b->last = t;
    frac = total > 0 ? (double)done / (double)total : 1.0;
    if (frac > 1.0)
        frac = 1.0;
    fill = (int)(frac * BAR_WIDTH);
    memset(bar, '#', (size_t)fill);
    memset(bar + fill, '-', (size_t)(BAR_WIDTH - fill));
    bar[BAR_WIDTH] = '\0';
    mbs = t > b->start ? (double)done / (t - b->start) / 1e6 : 0.0;
    /* \r returns to the start of the line, ESC [K clears what is left of it. */
    fprintf(stderr, "\r%3d%% [%s] %.1f of %.1f MiB, %.1f MB/s\033[K", (int)(frac * 100.0), bar,
            (double)done / (1024.0 * 1024.0), (double)total / (1024.0 * 1024.0), mbs);
    fflush(stderr);
    b->drawn = 1;
    return 0;
}

/* Leaves an empty line where the bar was, for what is printed next. */
static void bar_clear(progress_bar *b)
{
    if (b->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    b->drawn = 0;
}

/* ---- the command ------------------------------------------------------------------ */

static int parse_convert_weights(const char *w, coli_weight_format *out)
{
    /* the formats a container holds: those coli_convert_params takes */
    static const coli_weight_format F[] = {COLI_WEIGHTS_BF16, COLI_WEIGHTS_Q8, COLI_WEIGHTS_Q4, COLI_WEIGHTS_Q2};

    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
        if (strcmp(w, coli_weight_format_name(F[i])) == 0) {
            *out = F[i];
            return 0;
        }
    return usage_error("invalid value '%s' for --weights (expected bf16, q8, q4 or q2)", w);
}


static void print_summary(int json, const char *model, const char *out, const char *path,
                          coli_weight_format fmt, int group, uint64_t bytes, double seconds)
{
    double mbs = seconds > 0 ? (double)bytes / seconds / 1e6 : 0.0;

    if (json) {
        printf("{\"model\":");
        json_string(stdout, model, strlen(model));
        printf(",\"out\":");
        json_string(stdout, out, strlen(out));
        printf(",\"file\":");
        json_string(stdout, path, strlen(path));
        printf(",\"weights\":\"%s\"", coli_weight_format_name(fmt));
        if (fmt == COLI_WEIGHTS_Q4)
            printf(",\"q4_group\":%d", group);
        printf(",\"bytes\":%" PRIu64 ",\"seconds\":", bytes);
        json_real(stdout, seconds, "%.3f");
        printf(",\"mb_s\":");
        json_real(stdout, mbs, "%.1f");
        printf("}\n");
        return;
    }
    printf("%s: %s", path, coli_weight_format_name(fmt));
    if (fmt == COLI_WEIGHTS_Q4)
        printf(" (groups of %d)", group);
    printf(", %" PRIu64 " bytes (%.1f MiB) written in %.2f s, %.1f MB/s\n", bytes,
           (double)bytes / (1024.0 * 1024.0), seconds, mbs);
}

/* A directory that coli convert wrote, without the checkpoint it came
 * from: converting it again has nothing to read. Says so and returns 1. */
static int already_converted(const char *model)
{
    static const char *const checkpoint[] = {"model.safetensors", "model.safetensors.index.json"};
    char p[4096];
    struct stat sb;

    if ((size_t)snprintf(p, sizeof p, "%s/model.coli", model) >= sizeof p || stat(p, &sb) != 0)
        return 0;
    for (size_t i = 0; i < sizeof checkpoint / sizeof checkpoint[0]; i++)
        if ((size_t)snprintf(p, sizeof p, "%s/%s", model, checkpoint[i]) < sizeof p && stat(p, &sb) == 0)
            return 0;
    fprintf(stderr, "%s: %s is already converted (it holds model.coli and no checkpoint): give the "
                    "directory of the original checkpoint to convert it again\n",
            cli_prog, model);
    return 1;
}

int cmd_convert(const args *a)
{
    const char *model = a->value[O_MODEL], *out = a->value[O_OUT];
    coli_weight_format fmt = COLI_WEIGHTS_Q4;
    int64_t group = 32, threads = 0;
    coli_convert_params p;
    progress_bar bar;
    char errbuf[1024], path[4096];
    struct stat sb;
    double t0, t1;
    size_t len;
    int json, rc;
    coli_status st;

    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if (model != NULL && model[0] == '\0')
        return usage_error("--model needs a directory");
    if (out == NULL)
        return usage_error("--out DIR is required: the directory to write the converted model in");
    if (out[0] == '\0')
        return usage_error("--out needs a directory");
    if (a->value[O_WEIGHTS] != NULL && (rc = parse_convert_weights(a->value[O_WEIGHTS], &fmt)) != 0)
        return rc;
    if (a->value[O_Q4_GROUP] != NULL) {
        rc = option_in_bounds("--q4-group", COLI_OPT_Q4_GROUP, a->value[O_Q4_GROUP], &group);
        if (rc != 0)
            return rc;
        if (group != 32 && group != 64 && group != 128)
            return usage_error("invalid value '%s' for --q4-group (expected 32, 64 or 128)",
                               a->value[O_Q4_GROUP]);
        if (fmt != COLI_WEIGHTS_Q4)
            return usage_error("--q4-group applies only to --weights q4");
    }
    if (a->value[O_THREADS] != NULL &&
        (rc = parse_threads("--threads", a->value[O_THREADS], &threads)) != 0)
        return rc;
    if (model == NULL && (model = demo_model_dir()) == NULL)
        return runtime_error(COLI_ENOENT, "no demo model (not installed?): give --model DIR or "
                                          "set COLI_DEMO_MODEL");
    if (already_converted(model))
        return 1;
    len = strlen(out);
    if ((size_t)snprintf(path, sizeof path, "%s%smodel.coli", out,
                         out[len - 1] == '/' ? "" : "/") >= sizeof path)
        return runtime_error(COLI_EINVAL, "--out: the directory name is too long");
    /* The library refuses too, but cannot name our option. */
    if (!a->given[O_FORCE] && stat(path, &sb) == 0) {
        fprintf(stderr, "%s: %s exists: give --force to replace it, or another --out\n", cli_prog,
                path);
        return 1;
    }

    if (a->given[O_VERBOSE]) {
        fprintf(stderr, "%s: converting %s into %s: weights %s", cli_prog, model, path,
                coli_weight_format_name(fmt));
        if (fmt == COLI_WEIGHTS_Q4)
            fprintf(stderr, ", group %" PRId64, group);
        fprintf(stderr, ", %" PRId64 " threads (0: all online cores)\n", threads);
    }
    coli_convert_params_init(&p, sizeof p);
    p.weights = fmt;
    p.q4_group = (int)group;
    p.threads = (int)threads;
    p.overwrite = a->given[O_FORCE] > 0;
    p.progress = on_progress;
    p.user = &bar;
    memset(&bar, 0, sizeof bar);
    bar.tty = isatty(STDERR_FILENO);
    errbuf[0] = '\0';
    g_stop = 0;
    signal(SIGINT, on_sigint);
    t0 = bar.start = now_seconds();
    st = coli_convert(model, out, &p, errbuf, sizeof errbuf);
    t1 = now_seconds();
    signal(SIGINT, SIG_DFL);
    bar_clear(&bar);
    if (st == COLI_ECANCELED && g_stop) {
        fprintf(stderr, "%s: interrupted (Ctrl-C): %s was not written\n", cli_prog, path);
        return 130;
    }
    if (st == COLI_EIO && errbuf[0] != '\0') {
        /* the message holds the system's own reason; "input/output error"
         * before it would be a second, wrong one */
        fprintf(stderr, "%s: %s\n", cli_prog, errbuf);
        return 1;
    }
    if (st != COLI_OK) {
        runtime_error(st, errbuf);
        explain_model_path(cli_prog, model);
        return 1;
    }
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "%s: %s: converted, but cannot be read back\n", cli_prog, path);
        return 1;
    }
    print_summary(json, model, out, path, fmt, (int)group, (uint64_t)sb.st_size, t1 - t0);
    return 0;
}
