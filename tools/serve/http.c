/* http.c - the libmicrohttpd glue of coli serve: one thread per
 * connection (an endpoint may block waiting for its job), each connection
 * watched by the guard (guard.h), bodies gathered up to --max-body, the
 * API key, routing, libmicrohttpd's own messages in our log, and a log
 * line per request. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "server.h"

#include "../diag.h"
#include "../jsonout.h"
#include "sbuf.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* Header and buffer space per connection (MHD's default is 32 KiB). */
#define CONN_MEMORY (64 * 1024)
/* Connections past the guard's --max-connections that libmicrohttpd still
 * takes: those the guard closed but whose threads have not yet ended. */
#define CONN_SLACK 16

typedef struct route {
    const char *path;        /* without the /v1 prefix */
    int v1_only;             /* 1: only under /v1; 0: with or without it; 2: never under /v1 */
    const char *method;
    endpoint_fn fn;
    int open;                /* 1: no API key needed */
} route;

static const route g_routes[] = {
    {"/health", 0, "GET", ep_health, 1},
    {"/models", 0, "GET", ep_models, 0},
    {"/completions", 0, "POST", ep_completions, 0},
    {"/chat/completions", 0, "POST", ep_chat, 0},
    {"/metrics", 0, "GET", ep_metrics, 0},
    {"/tokenize", 0, "POST", ep_tokenize, 0},
    {"/detokenize", 0, "POST", ep_detokenize, 0},
    {"/apply-template", 0, "POST", ep_apply_template, 0},
    /* the chat page: open, as a browser sends no key for it (the page
     * sends the one its user types) */
    {"/", 2, "GET", ep_web_index, 1},
    {"/chat.js", 2, "GET", ep_web_js, 1},
    {"/chat.css", 2, "GET", ep_web_css, 1},
};

/* One request's state across the calls MHD makes for it, from its first
 * line (on_uri) to its end (on_completed). */
typedef struct upload {
    server *srv;
    gconn *gc;
    int called;              /* the access handler has seen it */
    sbuf body;
    int too_big;
    int status;              /* sent; 0: none */
    double t0;               /* monotonic, at the first line */
    char time[40];           /* wall clock, at the first line */
    char client[64];
    char method[16], url[224];
    reqlog log;
} upload;

/* Equal in time that depends on the lengths only, not on where they differ. */
static int same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la; i++)
        d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0;
}

static int authorized(const server *s, struct MHD_Connection *c)
{
    if (s->n_keys == 0)
        return 1;
    const char *key = NULL, *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
        key = auth + 7;
    if (!key)
        key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    if (!key)
        return 0;
    int ok = 0;
    for (size_t i = 0; i < s->n_keys; i++)
        ok |= same_secret(key, s->keys[i]); /* every key is compared */
    return ok;
}

/* The route of path (NULL: unknown); when only the method differs, the
 * methods the path takes in allow ("" when the path is unknown). */
static const route *find_route(const char *url, const char *method, char *allow, size_t cap)
{
    const char *path = strncmp(url, "/v1/", 4) == 0 ? url + 3 : url;
    allow[0] = '\0';
    for (size_t i = 0; i < sizeof g_routes / sizeof g_routes[0]; i++) {
        if (strcmp(path, g_routes[i].path) != 0 || (g_routes[i].v1_only == 1 && path == url) ||
            (g_routes[i].v1_only == 2 && path != url))
            continue;
        int get = strcmp(g_routes[i].method, "GET") == 0;
        if (strcmp(method, g_routes[i].method) == 0 || (strcmp(method, "HEAD") == 0 && get))
            return &g_routes[i];
        size_t n = strlen(allow);
        snprintf(allow + n, cap - n, "%s%s%s", n ? ", " : "", g_routes[i].method, get ? ", HEAD" : "");
    }
    return NULL;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, upload *u, int status, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO; /* out of memory: drop the connection */
    char ka[48];
    /* clients that read it (Node's) close an idle connection before we do */
    snprintf(ka, sizeof ka, "timeout=%d", u->srv->limits.idle_s >= 1 ? (int)u->srv->limits.idle_s : 1);
    MHD_add_response_header(r, "Keep-Alive", ka);
    if (atomic_load(&u->srv->draining))
        MHD_add_response_header(r, "Connection", "close");
    u->status = status;
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *c, upload *u, apierr *e)
{
    struct MHD_Response *r = NULL;
    int status = reply_error(e, &r);
    return send_reply(c, u, status, r);
}

static void client_name(struct MHD_Connection *c, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(out, cap, "-");
    if (!i || !i->client_addr)
        return;
    if (i->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)i->client_addr)->sin_addr, out, (socklen_t)cap);
    else if (i->client_addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)i->client_addr)->sin6_addr, out, (socklen_t)cap);
}

static gconn *conn_guard(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* ---- the connection's life: the guard is told ------------------------------ */

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    server *s = cls;
    return guard_admit(s->guard, addr, len, guard_now()) ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *a = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = a ? a->client_addr : NULL;
        socklen_t len = !sa ? 0 : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        /* out of memory leaves it unguarded: libmicrohttpd's own timeout still ends it */
        *socket_context = fd ? guard_open(s->guard, fd->connect_fd, sa, len, guard_now()) : NULL;
    } else {
        guard_close(s->guard, *socket_context);
        *socket_context = NULL;
    }
}

/* The first line of a request came: its state begins here, so that one
 * cut before its headers are in is still logged. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    server *s = cls;
    upload *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->srv = s;
    u->gc = conn_guard(c);
    u->t0 = guard_now();
    diag_time(u->time, sizeof u->time);
    client_name(c, u->client, sizeof u->client);
    snprintf(u->url, sizeof u->url, "%s", uri);
    if (u->gc)
        guard_begin(s->guard, u->gc, u->t0); /* a cut one is dropped at its first call */
    return u;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls)
{
    server *s = cls;
    upload *u = *con_cls;
    apierr e;
    (void)version;

    if (!u)
        return MHD_NO; /* no memory for it in on_uri */
    if (!u->called) {
        u->called = 1;
        snprintf(u->method, sizeof u->method, "%s", method);
        snprintf(u->url, sizeof u->url, "%s", url);
        if (u->gc && guard_headers(s->guard, u->gc) != 0)
            return MHD_NO;
        /* a declared length over the cap is refused before it is read */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->max_body) {
            if (u->gc)
                guard_complete(s->guard, u->gc);
            api_fail(&e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", s->max_body);
            return send_error(c, u, &e);
        }
        return MHD_YES;
    }
    if (*data_size) {
        if (u->gc && guard_body(s->guard, u->gc, guard_now()) != 0) {
            if (guard_cut_of(s->guard, u->gc) != GCUT_TIMEOUT)
                return MHD_NO; /* closed by the guard */
            api_fail(&e, 408, NULL, "the request did not arrive within %g s (--request-timeout)",
                     s->limits.request_s);
            return send_error(c, u, &e);
        }
        if (!u->too_big && u->body.n + *data_size > s->max_body)
            u->too_big = 1;
        if (!u->too_big && sbuf_add(&u->body, data, *data_size) != 0)
            return MHD_NO;
        *data_size = 0;
        return MHD_YES;
    }
    if (u->gc && guard_complete(s->guard, u->gc) != 0)
        return MHD_NO;
    if (u->too_big) {
        api_fail(&e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", s->max_body);
        return send_error(c, u, &e);
    }
    char allow[64];
    const route *rt = find_route(url, method, allow, sizeof allow);
    if (!rt) {
        if (allow[0]) {
            api_fail(&e, 405, NULL, "%s is not allowed on %s (it takes %s)", method, url, allow);
            struct MHD_Response *r = NULL;
            int status = reply_error(&e, &r);
            if (r)
                MHD_add_response_header(r, "Allow", allow);
            return send_reply(c, u, status, r);
        }
        api_fail(&e, 404, NULL, "no such endpoint: %s", url);
        return send_error(c, u, &e);
    }
    if (!rt->open && !authorized(s, c)) {
        api_fail(&e, 401, NULL, "Invalid API Key");
        return send_error(c, u, &e);
    }
    if (atomic_load(&s->draining)) {
        api_fail(&e, 503, NULL, "the server is stopping");
        return send_error(c, u, &e);
    }
    if (rt->fn != ep_health && !atomic_load(&s->ready)) {
        api_fail(&e, 503, NULL, "Loading model");
        return send_error(c, u, &e);
    }
    request rq = {s, c, u->body.p ? u->body.p : "", u->body.n, &u->log};
    struct MHD_Response *r = NULL;
    int status = rt->fn(&rq, &r);
    return send_reply(c, u, status, r);
}

/* ---- the log line of a request ----------------------------------------------- */

/* How the request ended, as its log line says. */
static const char *end_of(const upload *u, gcut cut, enum MHD_RequestTerminationCode toe)
{
    if (cut != GCUT_NONE)
        return guard_cut_name(cut);
    if (toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN)
        return "server_shutdown";
    if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED)
        return "send_timeout";
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !(u->log.end && strcmp(u->log.end, "server_shutdown") == 0))
        return u->status ? "client_gone" : "closed";
    return u->log.end ? u->log.end : "ok";
}

static void log_text(const upload *u, int status, double ms, const char *end)
{
    diag d;
    FILE *f = diag_begin(&d, DIAG_INFO);
    fprintf(f, "coli serve: %s %s %d client=%s ms=%.0f", u->method[0] ? u->method : "-", u->url, status,
            u->client, ms);
    if (u->log.tokens)
        fprintf(f, " prompt=%zu completion=%zu", u->log.prompt_tokens, u->log.completion_tokens);
    fprintf(f, " end=%s", end);
    if (u->log.id[0])
        fprintf(f, " id=%s", u->log.id);
    if (u->log.error[0])
        fprintf(f, " error=\"%s\"", u->log.error);
    fprintf(f, " time=%s\n", u->time);
    diag_end(&d);
}

static void log_json(const upload *u, int status, double ms, const char *end)
{
    flockfile(stderr);
    fprintf(stderr, "{\"time\":\"%s\",\"level\":\"info\",\"event\":\"request\",\"client\":", u->time);
    json_string(stderr, u->client, strlen(u->client));
    fputs(",\"method\":", stderr);
    json_string(stderr, u->method, strlen(u->method));
    fputs(",\"path\":", stderr);
    json_string(stderr, u->url, strlen(u->url));
    fprintf(stderr, ",\"status\":%d,\"duration_ms\":%.1f", status, ms);
    if (u->log.tokens)
        fprintf(stderr, ",\"prompt_tokens\":%zu,\"completion_tokens\":%zu", u->log.prompt_tokens,
                u->log.completion_tokens);
    fputs(",\"end\":", stderr);
    json_string(stderr, end, strlen(end));
    if (u->log.id[0]) {
        fputs(",\"id\":", stderr);
        json_string(stderr, u->log.id, strlen(u->log.id));
    }
    if (u->log.error[0]) {
        fputs(",\"error\":", stderr);
        json_string(stderr, u->log.error, strlen(u->log.error));
    }
    fputs("}\n", stderr);
    fflush(stderr);
    funlockfile(stderr);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    server *s = cls;
    upload *u = *con_cls;
    if (!u)
        return;
    gcut cut = u->gc ? guard_cut_of(s->guard, u->gc) : GCUT_NONE;
    int status = u->status;
    if (!status) { /* libmicrohttpd's own answer, to a malformed request */
        const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
        status = i ? (int)i->http_status : 0;
    }
    /* what the guard answered for a request cut in its headers */
    if (!status && !u->called && (cut == GCUT_TIMEOUT || cut == GCUT_CROWDED || cut == GCUT_CLIENT))
        status = cut == GCUT_TIMEOUT ? 408 : 503;
    const char *end = end_of(u, cut, toe);
    /* a keep-alive connection that never began its next request is no request */
    if (status || u->called || cut != GCUT_NONE) {
        double ms = (guard_now() - u->t0) * 1e3;
        if (s->json_log)
            log_json(u, status, ms, end);
        else
            log_text(u, status, ms, end);
    }
    if (u->gc && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        guard_idle(s->guard, u->gc, guard_now());
    sbuf_free(&u->body);
    free(u);
    *con_cls = NULL;
}

/* libmicrohttpd's own messages, as ours; but for the one it gives when a
 * request is cut short, which blames the client also when the guard cut
 * it: the request's own line says how it ended. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    diag d;
    (void)cls;
    if (strncmp(fmt, "Connection was closed by remote side with incomplete request", 61) == 0)
        return;
    FILE *f = diag_begin(&d, DIAG_WARNING);
    fputs("coli serve: libmicrohttpd: ", f);
    vfprintf(f, fmt, ap);
    if (fmt[0] && fmt[strlen(fmt) - 1] != '\n')
        fputc('\n', f);
    diag_end(&d);
}

/* ---- the daemon ------------------------------------------------------------------ */

int http_start(server *s, char *err, size_t errcap)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *addr;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
                     MHD_USE_ITC; /* ITC: MHD_quiesce_daemon */

    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, s->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)s->port);
        addr = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, s->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)s->port);
        addr = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errcap, "--host %s: not an IPv4 or IPv6 address", s->host);
        return -1;
    }
    if (!(s->guard = guard_new(&s->limits)) || guard_start(s->guard) != 0) {
        snprintf(err, errcap, "cannot start the connection guard");
        return -1;
    }
    /* the logger first: libmicrohttpd reads its options in order */
    s->daemon = MHD_start_daemon(flags, (uint16_t)s->port, on_accept, s, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                                 on_mhd_log, s, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_NOTIFY_COMPLETED,
                                 on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                 MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                 (size_t)CONN_MEMORY, MHD_OPTION_CONNECTION_LIMIT, s->limits.max + CONN_SLACK,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->send_timeout, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errcap, "cannot listen on %s port %d", s->host, s->port);
        return -1;
    }
    return 0;
}

void http_quiesce(server *s)
{
    if (!s->daemon)
        return;
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    guard_drain(s->guard);
}

unsigned http_active(server *s)
{
    guard_stats st;
    if (!s->guard)
        return 0;
    guard_stats_get(s->guard, &st);
    return st.active;
}

void http_stop(server *s)
{
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    guard_free(s->guard);
    s->guard = NULL;
}

int http_port(const server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? (int)i->port : s->port;
}
