/*
 * model_args.c - opening the model (see model_args.h): the model options of
 * a command line, the library options they make, the open with its
 * messages, and the tokenizer calls that grow their buffers.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "demo_dir.h"
#include "diag.h"
#include "errors.h"
#include "gpu_report.h"
#include "model_args.h"
#include "options.h"
#include "store_report.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- opening the model ---------------------------------------------------- */

/* Warns when --threads asks for more threads than there are cores: it is
 * allowed (the library takes up to its bound), but decode will be slow. */
static void warn_threads(int64_t threads)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    if (cores > 0 && threads > cores)
        diag_printf(DIAG_WARNING, "%s: warning: %" PRId64 " threads exceed the %ld online cores; decode "
                        "will be slow\n",
                cli_prog, threads, cores);
}

/* A weight format by its library name (coli_weight_format_name). */
int parse_weights(const char *opt, const char *w, int64_t *out)
{
    for (int f = COLI_WEIGHTS_AUTO; f <= COLI_WEIGHTS_Q2; f++)
        if (strcmp(w, coli_weight_format_name((coli_weight_format)f)) == 0) {
            *out = f;
            return 0;
        }
    return usage_error("invalid value '%s' for %s (expected auto, f32, bf16, q8, q4 or q2)", w, opt);
}

/* --cpu: the values of COLI_OPT_CPU_KERNELS past 0 (auto). */
static int parse_cpu(const char *w, int64_t *out)
{
    static const char *const names[] = {"scalar", "avx2", "avx512", "amx"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(w, names[i]) == 0) {
            *out = (int64_t)i + 1;
            return 0;
        }
    return usage_error("invalid value '%s' for --cpu (expected scalar, avx2, avx512 or amx)", w);
}

/* --kv-type: the names of coli_kv_type's values. */
static const char *const g_kv_types[] = {"f32", "bf16"};

const char *kv_type_name(coli_kv_type t)
{
    return (unsigned)t < sizeof g_kv_types / sizeof g_kv_types[0] ? g_kv_types[t] : "unknown";
}

static int parse_kv_type(const char *w, int64_t *out)
{
    for (size_t i = 0; i < sizeof g_kv_types / sizeof g_kv_types[0]; i++)
        if (strcmp(w, g_kv_types[i]) == 0) {
            *out = (int64_t)i;
            return 0;
        }
    return usage_error("invalid value '%s' for --kv-type (expected f32 or bf16)", w);
}

int parse_model_args(const args *a, model_args *m)
{
    int rc;

    memset(m, 0, sizeof *m);
    if (a->value[O_MODEL] != NULL && a->value[O_MODEL][0] == '\0')
        return usage_error("--model needs a directory");
    m->dir = a->value[O_MODEL] ? a->value[O_MODEL] : demo_model_dir(); /* NULL: none */
    m->verbose = a->given[O_VERBOSE];
    if (a->value[O_WEIGHTS] != NULL) {
        m->have_weights = 1;
        if ((rc = parse_weights("--weights", a->value[O_WEIGHTS], &m->weights)) != 0)
            return rc;
    }
    if (a->value[O_Q4_GROUP] != NULL) {
        rc = option_in_bounds("--q4-group", COLI_OPT_Q4_GROUP, a->value[O_Q4_GROUP],
                              &m->q4_group);
        if (rc != 0)
            return rc;
        if (m->q4_group != 32 && m->q4_group != 64 && m->q4_group != 128)
            return usage_error("invalid value '%s' for --q4-group (expected 32, 64 or 128)",
                               a->value[O_Q4_GROUP]);
        if (!m->have_weights || m->weights != COLI_WEIGHTS_Q4)
            return usage_error("--q4-group applies only to --weights q4");
        m->have_q4_group = 1;
    }
    if (a->value[O_THREADS] != NULL) {
        rc = parse_threads("--threads", a->value[O_THREADS], &m->threads);
        if (rc != 0)
            return rc;
        m->have_threads = 1;
    }
    if (a->value[O_CONTEXT] != NULL) {
        rc = option_in_bounds("--context", COLI_OPT_CONTEXT, a->value[O_CONTEXT], &m->context);
        if (rc != 0)
            return rc;
        m->have_context = 1;
    }
    if (a->value[O_CPU] != NULL) {
        if ((rc = parse_cpu(a->value[O_CPU], &m->cpu)) != 0)
            return rc;
        m->have_cpu = 1;
    }
    if (a->value[O_KV_TYPE] != NULL) {
        if ((rc = parse_kv_type(a->value[O_KV_TYPE], &m->kv_type)) != 0)
            return rc;
        m->have_kv_type = 1;
    }
    m->mtp_guard = !a->given[O_NO_MTP_GUARD];
    if (a->given[O_MTP])
        m->mtp = 1;
    if (a->value[O_MTP_TOKENS] != NULL) {
        if (!a->given[O_MTP])
            return usage_error("--mtp-tokens needs --mtp");
        rc = option_in_bounds("--mtp-tokens", COLI_OPT_MTP, a->value[O_MTP_TOKENS], &m->mtp);
        if (rc != 0)
            return rc;
        if (m->mtp < 1)
            return usage_error("invalid value '%s' for --mtp-tokens (expected 1 to 8)", a->value[O_MTP_TOKENS]);
    }
    if (a->given[O_NO_MTP_GUARD] && !a->given[O_MTP])
        return usage_error("--no-mtp-guard needs --mtp");
    if ((rc = gpu_args_parse(a, &m->gpu)) != 0)
        return rc;
    if ((rc = store_args_parse(a, &m->store)) != 0)
        return rc;
    if (m->have_threads)
        warn_threads(m->threads);
    return 0;
}

static void log_to_stderr(void *user, coli_log_level level, const char *message)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    int verbose = *(const int *)user;

    /* Errors also come back as the status of the failing call, which is
     * printed once; show them here only when asked to be verbose. */
    if (level == COLI_LOG_ERROR && !verbose)
        return;
    /* open_model says it once, with the model's detail. */
    if (!verbose && gpu_log_is_unused_warning(level, message))
        return;
    diag d;
    FILE *f = diag_begin(&d, level == COLI_LOG_ERROR ? DIAG_ERROR : level == COLI_LOG_WARN ? DIAG_WARNING : DIAG_INFO);
    fprintf(f, "coli: %s: ", (unsigned)level < 4 ? names[level] : "log");
    print_translated(f, message); /* our option names for the library's */
    fputc('\n', f);
    diag_end(&d);
}

/* The library options that m asks for. On failure prints the message and
 * returns 1. */
int make_options(model_args *m, coli_options **out)
{
    coli_options *opts = NULL;
    coli_status st;

    *out = NULL;
    st = coli_options_create(&opts);
    if (st != COLI_OK)
        return runtime_error(st, "cannot create options");
    if (m->have_weights && (st = coli_options_set(opts, COLI_OPT_WEIGHTS, m->weights)) != COLI_OK) {
        runtime_error(st, "--weights");
        goto fail;
    }
    if (m->have_threads && (st = coli_options_set(opts, COLI_OPT_THREADS, m->threads)) != COLI_OK) {
        runtime_error(st, "--threads");
        goto fail;
    }
    if (m->have_context && (st = coli_options_set(opts, COLI_OPT_CONTEXT, m->context)) != COLI_OK) {
        runtime_error(st, "--context");
        goto fail;
    }
    if (m->have_q4_group &&
        (st = coli_options_set(opts, COLI_OPT_Q4_GROUP, m->q4_group)) != COLI_OK) {
        runtime_error(st, "--q4-group");
        goto fail;
    }
    if (m->have_cpu && (st = coli_options_set(opts, COLI_OPT_CPU_KERNELS, m->cpu)) != COLI_OK) {
        runtime_error(st, "--cpu");
        goto fail;
    }
    if (m->have_kv_type && (st = coli_options_set(opts, COLI_OPT_KV_TYPE, m->kv_type)) != COLI_OK) {
        runtime_error(st, "--kv-type");
        goto fail;
    }
    if (m->mtp && ((st = coli_options_set(opts, COLI_OPT_MTP, m->mtp)) != COLI_OK ||
                   (st = coli_options_set(opts, COLI_OPT_MTP_GUARD, m->mtp_guard)) != COLI_OK)) {
        runtime_error(st, "--mtp");
        goto fail;
    }
    if (gpu_args_apply(&m->gpu, opts) != 0)
        goto fail;
    if (store_args_apply(&m->store, opts) != 0)
        goto fail;
    st = coli_options_set_log(opts, log_to_stderr, &m->verbose,
                              m->verbose ? COLI_LOG_DEBUG : COLI_LOG_WARN);
    if (st != COLI_OK) {
        runtime_error(st, "cannot set the log callback");
        goto fail;
    }
    *out = opts;
    return 0;
fail:
    coli_options_free(opts);
    return 1;
}

/* Opens m->dir. On failure prints the message and returns 1. */
int open_model(model_args *m, coli_model **out)
{
    coli_options *opts = NULL;
    coli_model *model = NULL;
    coli_status st;
    int rc = 1;

    *out = NULL;
    if (m->dir == NULL)
        return runtime_error(COLI_ENOENT, "no demo model in " COLI_PKGDATADIR
                                          "/demo (not installed?): give --model DIR or set "
                                          "COLI_DEMO_MODEL");
    if (make_options(m, &opts) != 0)
        return 1;
    st = coli_model_open(m->dir, opts, &model);
    if (st != COLI_OK) {
        const char *msg = model ? coli_model_errmsg(model) : "";
        if (store_explain_open_failure(&m->store, st, msg)) {
            /* said in the tool's options and units */
        } else if (msg == NULL || msg[0] == '\0') {
            diag_printf(DIAG_ERROR, "coli: %s: %s\n", coli_strerror(st), m->dir);
        } else if (strstr(msg, m->dir) == NULL) {
            diag d;
            FILE *f = diag_begin(&d, DIAG_ERROR);
            fprintf(f, "coli: %s: %s: ", coli_strerror(st), m->dir);
            print_translated(f, msg);
            fputc('\n', f);
            diag_end(&d);
        } else {
            runtime_error(st, msg);
        }
        explain_model_path(cli_prog, m->dir);
        coli_model_free(model);
        model = NULL;
        goto done;
    }
    gpu_warn_unused(&m->gpu, model);
    *out = model;
    rc = 0;
done:
    coli_options_free(opts);
    return rc;
}

int get_info(coli_model *model, coli_model_info *info)
{
    coli_status st;

    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    st = coli_model_get_info(model, info);
    if (st != COLI_OK)
        return runtime_error(st, coli_model_errmsg(model));
    return 0;
}

/* Tokenizes text, growing the buffer as coli_tokenize asks. */
int tokenize_text(coli_model *model, const char *text, size_t len, int add_special,
                  int32_t **ids_out, size_t *n_out)
{
    size_t cap = len + 8, need = 0;
    int32_t *ids = xrealloc(NULL, cap * sizeof *ids);
    coli_status st;

    for (;;) {
        st = coli_tokenize(model, text, len, add_special, ids, cap, &need);
        if (st != COLI_ENOSPC || need <= cap)
            break;
        cap = need;
        ids = xrealloc(ids, cap * sizeof *ids);
    }
    if (st != COLI_OK) {
        free(ids);
        return runtime_error(st, coli_model_errmsg(model));
    }
    *ids_out = ids;
    *n_out = need;
    return 0;
}

/* Detokenizes ids into a NUL-terminated string, growing the buffer as asked. */
int detokenize_ids(coli_model *model, const int32_t *ids, size_t n, int skip_special,
                   char **text_out, size_t *len_out)
{
    size_t cap = 256, need = 0;
    char *buf = xrealloc(NULL, cap);
    coli_status st;

    for (;;) {
        st = coli_detokenize(model, ids, n, skip_special, buf, cap, &need);
        if (st == COLI_OK && need < cap)
            break;
        if (st != COLI_OK && st != COLI_ENOSPC)
            break;
        /* ENOSPC, or exactly full with no room for the NUL: grow. */
        if (need + 1 <= cap) {
            st = COLI_ENOSPC; /* the library said too small without a size */
            break;
        }
        cap = need + 1;
        buf = xrealloc(buf, cap);
    }
    if (st != COLI_OK) {
        free(buf);
        return runtime_error(st, coli_model_errmsg(model));
    }
    buf[need] = '\0';
    *text_out = buf;
    *len_out = need;
    return 0;
}

const char *weights_label(const coli_model_info *info)
{
    return info->weights_name != NULL ? info->weights_name : coli_weight_format_name(info->weights);
}
