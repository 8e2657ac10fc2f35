/* serve.c - the serve subcommand: its options, start-up in the order that
 * lets /health answer while the model opens, and shutdown on a signal. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "serve.h"

#ifdef COLI_HAVE_MICROHTTPD

#include "../diag.h"
#include "gencfg.h"
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* The most API keys a key file may hold, and its size. */
#define KEYS_MAX 256
#define KEY_FILE_MAX ((size_t)1 << 20)

/* Seconds a response may make no progress (a client that reads none of
 * it), at least the guard's times so that they come first. */
#define SEND_TIMEOUT 60
/* Seconds the last answers of a stop get to be sent. */
#define STOP_FLUSH 2.0

/* Adds the key k[0..n) from where (an option or a variable, for the
 * message). An empty key would turn authentication off unseen, and one
 * with a blank or a control character can never arrive in a header as it
 * is: both are refused. */
static int add_key(server *s, const char *where, const char *k, size_t n)
{
    if (n == 0)
        return usage_error("%s: the API key is empty (leave the option out for a server without a key)",
                           where);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] <= ' ' || (unsigned char)k[i] == 0x7f)
            return usage_error("%s: the API key has a blank or a control character, which no client can send "
                               "in a header",
                               where);
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
        diag_printf(DIAG_ERROR, "%s: --api-key-file %s: %s", cli_prog, path, strerror(errno));
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
        char where[4200];
        snprintf(where, sizeof where, "--api-key-file %s", path);
        if (add_key(s, where, b, (size_t)(e - b)) != 0) {
            fclose(f);
            return EXIT_USAGE;
        }
    }
    fclose(f);
    if (s->n_keys == 0) {
        diag_printf(DIAG_ERROR, "%s: --api-key-file %s: no API key in the file", cli_prog, path);
        return 1;
    }
    return 0;
}

/* A number of seconds, opt's value. */
static int seconds(const args *a, int opt, double min, double max, double *out)
{
    if (!a->value[opt])
        return 0;
    return parse_real(cli_opts[opt].name, a->value[opt], min, max, out);
}

static int parse_limits(const args *a, server *s)
{
    int64_t v;
    int rc;
    guard_cfg *g = &s->limits;

    g->max = 512;
    g->per_client = 128;
    g->idle_s = 10;
    g->request_s = 10;
    s->stop_timeout = 30;
    if ((rc = seconds(a, O_REQUEST_TIMEOUT, 0.1, 3600, &g->request_s)) != 0 ||
        (rc = seconds(a, O_IDLE_TIMEOUT, 0.1, 3600, &g->idle_s)) != 0 ||
        (rc = seconds(a, O_STOP_TIMEOUT, 0, 86400, &s->stop_timeout)) != 0)
        return rc;
    if (a->value[O_MAX_CLIENT_CONNECTIONS]) {
        if ((rc = parse_int64("--max-client-connections", a->value[O_MAX_CLIENT_CONNECTIONS], 0, 65536, &v)) != 0)
            return rc;
        g->per_client = (unsigned)v;
    }
    /* kept for requests that are complete: every slot and queue place, and
     * a few for /health and /metrics */
    g->reserve = (unsigned)(s->parallel + s->queue) + 8;
    if (a->value[O_MAX_CONNECTIONS]) {
        if ((rc = parse_int64("--max-connections", a->value[O_MAX_CONNECTIONS], 1, 65536, &v)) != 0)
            return rc;
        if ((unsigned)v < g->reserve + 8)
            return usage_error("--max-connections %" PRId64 " leaves no room: it must be at least %u "
                               "(--parallel + --queue + 16)",
                               v, g->reserve + 8);
        g->max = (unsigned)v;
    }
    if (g->max < g->reserve + 8)
        g->max = g->reserve + 8;
    s->send_timeout = fmax(SEND_TIMEOUT, ceil(fmax(g->idle_s, g->request_s)) + 1);
    return 0;
}

/* Makes room for the connections' descriptors (a connection each, and
 * some for the model's files): the soft limit is raised as far as the hard
 * one allows. */
static int fd_room(const server *s)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)s->limits.max + 64 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        diag_printf(DIAG_ERROR, "%s: --max-connections %u needs %llu file descriptors, and this process may "
                                "open %llu (ulimit -n): lower --max-connections or raise the limit",
                    cli_prog, s->limits.max, (unsigned long long)need, (unsigned long long)rl.rlim_cur);
        return 1;
    }
    return 0;
}

static int is_loopback(const char *host)
{
    struct in_addr a4;
    return strcmp(host, "::1") == 0 || (inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
}

static int parse_serve_args(const args *a, const char *dir, server *s)
{
    int64_t v;
    int rc;

    if ((rc = parse_format(a, 0, &s->json_log)) != 0)
        return rc;
    diag_set_json(s->json_log);
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
    if ((rc = parse_limits(a, s)) != 0)
        return rc;
    for (int i = 0; i < a->given[O_API_KEY]; i++)
        if ((rc = add_key(s, "--api-key", a->values[O_API_KEY][i], strlen(a->values[O_API_KEY][i]))) != 0)
            return rc;
    if (a->value[O_API_KEY_FILE] && (rc = read_keys(s, a->value[O_API_KEY_FILE])) != 0)
        return rc;
    /* the variable, when no option gives a key; set but empty is refused
     * whatever the options say, as it most likely means a key went missing */
    const char *env = getenv("COLI_API_KEY");
    if (env && !env[0])
        return usage_error("COLI_API_KEY is set but empty: give it the key, or unset it for a server "
                           "without a key");
    if (env && s->n_keys == 0 && (rc = add_key(s, "COLI_API_KEY", env, strlen(env))) != 0)
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

/* Waits for the requests in flight to finish, up to the stop's deadline
 * (a second signal cuts it short), then ends what is left (each stream
 * with a finish chunk and [DONE]) and gives their answers a moment to go
 * out. */
static void drain(server *s, const sigset_t *sigs)
{
    double t0 = sched_now(), deadline = t0 + s->stop_timeout;
    int again = 0;
    atomic_store(&s->draining, 1);
    http_quiesce(s); /* no new connection; idle ones are closed */
    while ((!s->sched || !sched_idle(s->sched) || http_active(s) > 0) && sched_now() < deadline) {
        struct timespec ts = {0, 50 * 1000000L};
        int sig = sigtimedwait(sigs, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) {
            again = 1;
            break;
        }
    }
    size_t cut = sched_stop(s->sched);
    if (cut)
        diag_printf(DIAG_WARNING, "%s: warning: %zu request%s cut %s: each ends with finish_reason "
                                  "\"server_shutdown\" (their log lines say end=server_shutdown)",
                    cli_prog, cut, cut == 1 ? " was" : "s were",
                    again ? "by a second signal" : "at the --stop-timeout deadline");
    for (double t1 = sched_now(); http_active(s) > 0 && sched_now() < t1 + STOP_FLUSH;) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    diag_printf(DIAG_INFO, "%s: stopped after %.1f s", cli_prog, sched_now() - t0);
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
    if (fd_room(&s) != 0)
        goto out;
    s.started = (long long)time(NULL);
    /* the signals are taken by sigwait below, in no other thread */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    web_load(&s, a->value[O_WEB_DIR]);
    if (http_start(&s, err, sizeof err) != 0) {
        diag_printf(DIAG_ERROR, "%s: %s", cli_prog, err);
        goto out;
    }
    diag_printf(DIAG_INFO, "%s: listening on http://%s:%d/ (loading %s)", cli_prog, s.host, http_port(&s), dir);
    if (s.n_keys == 0 && !is_loopback(s.host))
        diag_printf(DIAG_WARNING, "%s: warning: no API key on %s: anyone who reaches the port can use the "
                                  "model (--api-key-file FILE or COLI_API_KEY)",
                    cli_prog, s.host);
    if (open(user, &s.model) != 0)
        goto out;
    gencfg_defaults(dir, &s.defaults);
    if (chat_tmpl_init(&s.tmpl, s.model, a->value[O_CHAT_TEMPLATE_FILE], err, sizeof err) != 0) {
        diag_printf(DIAG_ERROR, "%s: %s", cli_prog, err);
        goto out;
    }
    if (!s.tmpl.t)
        diag_printf(DIAG_WARNING, "%s: warning: chat completions are refused: %s", cli_prog, s.tmpl.why);
    coli_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (coli_model_get_info(s.model, &info) != COLI_OK) {
        diag_printf(DIAG_ERROR, "%s: %s", cli_prog, coli_model_errmsg(s.model));
        goto out;
    }
    s.vocab = (size_t)info.vocab_size;
    if (sched_start(s.model, NULL, s.parallel, s.queue, &s.sched, err, sizeof err) != 0) {
        diag_printf(DIAG_ERROR, "%s: %s", cli_prog, err);
        goto out;
    }
    atomic_store(&s.ready, 1);
    diag_printf(DIAG_INFO, "%s: ready: model '%s', %d slots of %zu positions, queue %d", cli_prog, s.model_name,
                s.parallel, sched_slot_capacity(s.sched), s.queue);
    sigwait(&sigs, &sig);
    diag_printf(DIAG_INFO, "%s: stopping (%s): no new connections; the requests in flight have %g s to finish",
                cli_prog, sig == SIGINT ? "SIGINT" : "SIGTERM", s.stop_timeout);
    drain(&s, &sigs);
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
