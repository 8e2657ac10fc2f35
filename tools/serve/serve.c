/* serve.c - the serve subcommand: its options, start-up in the order that
 * lets /health answer while the model opens, and shutdown on a signal. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "serve.h"

#ifdef COLI_HAVE_MICROHTTPD

#include "gencfg.h"
#include "server.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The most API keys a key file may hold, and its size. */
#define KEYS_MAX 256
#define KEY_FILE_MAX ((size_t)1 << 20)

static int add_key(server *s, const char *k, size_t n)
{
    if (n == 0)
        return 0;
    if (s->n_keys == KEYS_MAX)
        return usage_error("more than %d API keys", KEYS_MAX);
    s->keys = xrealloc(s->keys, (s->n_keys + 1) * sizeof *s->keys);
    s->keys[s->n_keys] = xrealloc(NULL, n + 1);
    memcpy(s->keys[s->n_keys], k, n);
    s->keys[s->n_keys++][n] = '\0';
    return 0;
}

/* --api-key-file: one key a line; blanks around it and lines that start
 * with '#' are ignored. */
static int read_keys(server *s, const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, path, strerror(errno));
        return 1;
    }
    while (fgets(line, sizeof line, f)) {
        char *b = line, *e;
        while (*b == ' ' || *b == '\t')
            b++;
        e = b + strlen(b);
        while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (*b == '#' || e == b)
            continue;
        if (add_key(s, b, (size_t)(e - b)) != 0) {
            fclose(f);
            return EXIT_USAGE;
        }
    }
    fclose(f);
    if (s->n_keys == 0) {
        fprintf(stderr, "%s: %s: no API key in the file\n", cli_prog, path);
        return 1;
    }
    return 0;
}

static int parse_serve_args(const args *a, const char *dir, server *s)
{
    int64_t v;
    int rc;

    if ((rc = parse_format(a, 0, &s->json_log)) != 0)
        return rc;
    s->host = a->value[O_HOST] ? a->value[O_HOST] : "127.0.0.1";
    s->port = 8080;
    s->parallel = 4;
    s->queue = 16;
    s->max_body = (size_t)16 << 20;
    if (a->value[O_PORT]) {
        if ((rc = parse_int64("--port", a->value[O_PORT], 0, 65535, &v)) != 0)
            return rc;
        s->port = (int)v;
    }
    if (a->value[O_PARALLEL]) {
        if ((rc = parse_int64("--parallel", a->value[O_PARALLEL], 1, 256, &v)) != 0)
            return rc;
        s->parallel = (int)v;
    }
    if (a->value[O_QUEUE]) {
        if ((rc = parse_int64("--queue", a->value[O_QUEUE], 1, 65536, &v)) != 0)
            return rc;
        s->queue = (int)v;
    }
    if (a->value[O_MAX_BODY]) {
        if ((rc = parse_int64("--max-body", a->value[O_MAX_BODY], 1024, (int64_t)1 << 30, &v)) != 0)
            return rc;
        s->max_body = (size_t)v;
    }
    for (int i = 0; i < a->given[O_API_KEY]; i++)
        if ((rc = add_key(s, a->values[O_API_KEY][i], strlen(a->values[O_API_KEY][i]))) != 0)
            return rc;
    if (a->value[O_API_KEY_FILE] && (rc = read_keys(s, a->value[O_API_KEY_FILE])) != 0)
        return rc;
    if (a->value[O_ALIAS]) {
        s->model_name = a->value[O_ALIAS];
    } else {
        /* the directory's name, without trailing slashes */
        static char name[256];
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            n--;
        size_t b = n;
        while (b > 0 && dir[b - 1] != '/')
            b--;
        snprintf(name, sizeof name, "%.*s", (int)(n - b), dir + b);
        s->model_name = name;
    }
    return 0;
}

int serve_run(const args *a, const char *dir, serve_open_fn open, void *user)
{
    server s;
    char err[600];
    sigset_t sigs;
    int sig = 0, rc = 1;

    memset(&s, 0, sizeof s);
    if ((rc = parse_serve_args(a, dir, &s)) != 0)
        goto out;
    rc = 1;
    s.started = (long long)time(NULL);
    /* the signals are taken by sigwait below, in no other thread */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    web_load(&s, a->value[O_WEB_DIR]);
    if (http_start(&s, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", cli_prog, err);
        goto out;
    }
    fprintf(stderr, "%s: listening on http://%s:%d/ (loading %s)\n", cli_prog, s.host, http_port(&s), dir);
    if (open(user, &s.model) != 0)
        goto out;
    gencfg_defaults(dir, &s.defaults);
    if (chat_tmpl_init(&s.tmpl, s.model, a->value[O_CHAT_TEMPLATE_FILE], err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", cli_prog, err);
        goto out;
    }
    if (!s.tmpl.t)
        fprintf(stderr, "%s: warning: chat completions are refused: %s\n", cli_prog, s.tmpl.why);
    if (sched_start(s.model, NULL, s.parallel, s.queue, &s.sched, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", cli_prog, err);
        goto out;
    }
    atomic_store(&s.ready, 1);
    fprintf(stderr, "%s: ready: model '%s', %d slots of %zu positions, queue %d\n", cli_prog, s.model_name,
            s.parallel, sched_slot_capacity(s.sched), s.queue);
    sigwait(&sigs, &sig);
    fprintf(stderr, "%s: stopping (%s)\n", cli_prog, sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
out:
    atomic_store(&s.ready, 0);
    sched_stop(s.sched); /* waiting requests end with an error */
    http_stop(&s);
    web_free(&s);
    sched_free(s.sched);
    chat_tmpl_free(&s.tmpl);
    coli_model_free(s.model);
    for (size_t i = 0; i < s.n_keys; i++)
        free(s.keys[i]);
    free(s.keys);
    return rc;
}

#else /* !COLI_HAVE_MICROHTTPD */

#include <stdio.h>

int serve_run(const args *a, const char *dir, serve_open_fn open, void *user)
{
    (void)a;
    (void)dir;
    (void)open;
    (void)user;
    fprintf(stderr, "coli serve: coli was built without libmicrohttpd (configure --with-microhttpd)\n");
    return 1;
}

#endif
