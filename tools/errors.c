/*
 * errors.c - how the coli tool reports a failure of the library (see
 * errors.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "errors.h"

#include "diag.h"

#include <colibri/colibri.h>

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The library names its options as the API spells them; a user of the tool
 * typed these. The options in other units (MiB for GiB) are the callers'
 * to explain: --ram-gb in store_report.c, --gpu-expert-gb in gpu_report.c. */
static const struct {
    const char *api, *flag;
} g_flags[] = {
    {"COLI_OPT_WEIGHTS", "--weights"},
    {"COLI_OPT_THREADS", "--threads"},
    {"COLI_OPT_CONTEXT", "--context"},
    {"COLI_OPT_Q4_GROUP", "--q4-group"},
    {"COLI_OPT_EXPERT_SLOTS", "--expert-slots"},
    {"COLI_OPT_IO_THREADS", "--io-threads"},
    {"COLI_OPT_CPU_KERNELS", "--cpu"},
    {"COLI_OPT_GPU_LAYERS", "--gpu-experts-only"},
    {"COLI_OPT_KV_TYPE", "--kv-type"},
    {"COLI_OPT_MTP_GUARD", "--no-mtp-guard"},
    {"COLI_OPT_MTP", "--mtp"},
};

void print_translated(FILE *f, const char *msg)
{
    while (*msg != '\0') {
        const char *hit = strstr(msg, "COLI_OPT_");
        size_t i, n;

        if (hit == NULL) {
            fputs(msg, f);
            return;
        }
        fwrite(msg, 1, (size_t)(hit - msg), f);
        for (i = 0; i < sizeof g_flags / sizeof g_flags[0]; i++) {
            n = strlen(g_flags[i].api);
            /* whole names only: COLI_OPT_THREADS is not COLI_OPT_THREADS_X */
            if (strncmp(hit, g_flags[i].api, n) == 0 && hit[n] != '_' && (hit[n] < 'A' || hit[n] > 'Z'))
                break;
        }
        if (i < sizeof g_flags / sizeof g_flags[0]) {
            fputs(g_flags[i].flag, f);
            msg = hit + strlen(g_flags[i].api);
        } else {
            fputs("COLI_OPT_", f);
            msg = hit + strlen("COLI_OPT_");
        }
    }
}

/* Reports a failure of the library and returns 1. */
int runtime_error(int status, const char *detail)
{
    diag d;
    FILE *f = diag_begin(&d, DIAG_ERROR);
    if (detail != NULL && detail[0] != '\0') {
        fprintf(f, "coli: %s: ", coli_strerror(status));
        print_translated(f, detail);
        fputc('\n', f);
    } else {
        fprintf(f, "coli: %s\n", coli_strerror(status));
    }
    diag_end(&d);
    return 1;
}

/* "Qwen/Qwen3-30B-A3B": one slash between two plain names. */
static int looks_like_hub_id(const char *s)
{
    const char *slash = strchr(s, '/');

    if (slash == NULL || slash == s || slash[1] == '\0' || strchr(slash + 1, '/') != NULL || s[0] == '.')
        return 0;
    for (; *s != '\0'; s++)
        if (!(*s == '/' || *s == '-' || *s == '_' || *s == '.' || (*s >= '0' && *s <= '9') ||
              (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
            return 0;
    return 1;
}

static int is_gguf_name(const char *name)
{
    size_t n = strlen(name);

    return n > 5 && strcmp(name + n - 5, ".gguf") == 0;
}

/* A .gguf file in dir, into name; 0 if none. */
static int find_gguf(const char *dir, char *name, size_t size)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;

    if (d == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL)
        if (is_gguf_name(e->d_name)) {
            snprintf(name, size, "%s", e->d_name);
            found = 1;
        }
    closedir(d);
    return found;
}

#define WHAT_WE_READ                                                                      \
    "coli reads Hugging Face model directories (config.json and *.safetensors) and " \
    "downloads nothing"

void explain_model_path(const char *prog, const char *dir)
{
    struct stat sb;
    char gguf[256];

    if (stat(dir, &sb) != 0) {
        if (looks_like_hub_id(dir))
            diag_printf(DIAG_ERROR, "%s: '%s' looks like a Hugging Face Hub name; %s: download it first (e.g. "
                            "huggingface-cli download %s --local-dir DIR) and give --model DIR\n",
                    prog, dir, WHAT_WE_READ, dir);
        return;
    }
    if (S_ISREG(sb.st_mode) && is_gguf_name(dir)) {
        diag_printf(DIAG_ERROR, "%s: %s is a GGUF file (llama.cpp's format); %s: give the directory of the "
                        "original checkpoint\n",
                prog, dir, WHAT_WE_READ);
        return;
    }
    if (S_ISDIR(sb.st_mode) && find_gguf(dir, gguf, sizeof gguf))
        diag_printf(DIAG_ERROR, "%s: %s holds a GGUF file (%s), llama.cpp's format; %s: give the directory "
                        "of the original checkpoint\n",
                prog, dir, gguf, WHAT_WE_READ);
}

int eval_one(coli_context *c, int32_t tok)
{
    coli_status st = coli_eval(c, &tok, 1);
    return st == COLI_OK ? 0 : runtime_error(st, coli_context_errmsg(c));
}
