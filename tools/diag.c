/*
 * diag.c - the coli tool's messages on standard error, text or JSON lines
 * (see diag.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "diag.h"

#include "jsonout.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int g_json;

static const char *const g_names[] = {"error", "warning", "info"};

void diag_set_json(int on)
{
    atomic_store(&g_json, on != 0);
}

int diag_is_json(void)
{
    return atomic_load(&g_json);
}

void diag_time(char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
}

void diag_json_head(FILE *f, diag_level level)
{
    char t[40];
    diag_time(t, sizeof t);
    fprintf(f, "{\"time\":\"%s\",\"level\":\"%s\"", t, g_names[level]);
}

FILE *diag_begin(diag *d, diag_level level)
{
    d->level = level;
    d->buf = NULL;
    d->len = 0;
    d->f = diag_is_json() ? open_memstream(&d->buf, &d->len) : NULL;
    if (!d->f) {
        /* text, or no memory for a stream: plain lines as they come */
        flockfile(stderr);
        return stderr;
    }
    return d->f;
}

/* Drops prefix from *s when it is there. */
static int skip(const char **s, size_t *n, const char *prefix)
{
    size_t k = strlen(prefix);
    if (*n < k || memcmp(*s, prefix, k) != 0)
        return 0;
    *s += k;
    *n -= k;
    return 1;
}

static void json_line(diag_level level, const char *s, size_t n)
{
    if (!skip(&s, &n, "coli serve: "))
        skip(&s, &n, "coli: ");
    if (skip(&s, &n, "warning: "))
        level = level == DIAG_ERROR ? level : DIAG_WARNING;
    else if (skip(&s, &n, "error: "))
        level = DIAG_ERROR;
    diag_json_head(stderr, level);
    fputs(",\"msg\":", stderr);
    json_string(stderr, s, n);
    fputs("}\n", stderr);
}

void diag_end(diag *d)
{
    if (!d->f) {
        fflush(stderr);
        funlockfile(stderr);
        return;
    }
    fclose(d->f);
    d->f = NULL;
    flockfile(stderr);
    const char *p = d->buf, *end = d->buf + d->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        if (e > p)
            json_line(d->level, p, (size_t)(e - p));
        p = nl ? nl + 1 : end;
    }
    fflush(stderr);
    funlockfile(stderr);
    free(d->buf);
    d->buf = NULL;
}

void diag_printf(diag_level level, const char *fmt, ...)
{
    diag d;
    va_list ap;
    FILE *f = diag_begin(&d, level);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    size_t n = strlen(fmt);
    if (n == 0 || fmt[n - 1] != '\n')
        fputc('\n', f);
    diag_end(&d);
}
