/* http.c - the libmicrohttpd glue of coli serve: one thread per
 * connection (an endpoint may block waiting for its job), bodies gathered
 * up to --max-body, the API key, routing, and a log line per request. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "server.h"

#include "../jsonout.h"
#include "sbuf.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* Header and buffer space per connection (MHD's default is 32 KiB). */
#define CONN_MEMORY (64 * 1024)
/* Idle connections are closed after this many seconds. */
#define CONN_TIMEOUT 600

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

/* One request's state across the calls MHD makes for it. */
typedef struct upload {
    sbuf body;
    int too_big;
    int status;
    char method[16], url[224]; /* for the log */
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

/* The route of path (NULL: unknown); *wrong_method when only the method
 * differs. */
static const route *find_route(const char *url, const char *method, int *wrong_method)
{
    const char *path = strncmp(url, "/v1/", 4) == 0 ? url + 3 : url;
    *wrong_method = 0;
    for (size_t i = 0; i < sizeof g_routes / sizeof g_routes[0]; i++) {
        if (strcmp(path, g_routes[i].path) != 0 || (g_routes[i].v1_only == 1 && path == url) ||
            (g_routes[i].v1_only == 2 && path != url))
            continue;
        if (strcmp(method, g_routes[i].method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(g_routes[i].method, "GET") == 0))
            return &g_routes[i];
        *wrong_method = 1;
    }
    return NULL;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, upload *u, int status, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO; /* out of memory: drop the connection */
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls)
{
    server *s = cls;
    upload *u = *con_cls;
    apierr e;
    (void)version;

    if (!u) {
        if (!(u = calloc(1, sizeof *u)))
            return MHD_NO;
        *con_cls = u;
        snprintf(u->method, sizeof u->method, "%s", method);
        snprintf(u->url, sizeof u->url, "%s", url);
        /* a declared length over the cap is refused before it is read */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->max_body) {
            api_fail(&e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", s->max_body);
            return send_error(c, u, &e);
        }
        return MHD_YES;
    }
    if (*data_size) {
        if (!u->too_big && u->body.n + *data_size > s->max_body)
            u->too_big = 1;
        if (!u->too_big && sbuf_add(&u->body, data, *data_size) != 0)
            return MHD_NO;
        *data_size = 0;
        return MHD_YES;
    }
    if (u->too_big) {
        api_fail(&e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", s->max_body);
        return send_error(c, u, &e);
    }
    int wrong = 0;
    const route *rt = find_route(url, method, &wrong);
    if (!rt) {
        if (wrong)
            api_fail(&e, 405, NULL, "%s is not allowed on %s", method, url);
        else
            api_fail(&e, 404, NULL, "no such endpoint: %s", url);
        return send_error(c, u, &e);
    }
    if (!rt->open && !authorized(s, c)) {
        api_fail(&e, 401, NULL, "Invalid API Key");
        return send_error(c, u, &e);
    }
    if (rt->fn != ep_health && !atomic_load(&s->ready)) {
        api_fail(&e, 503, NULL, "Loading model");
        return send_error(c, u, &e);
    }
    request rq = {s, c, u->body.p ? u->body.p : "", u->body.n};
    struct MHD_Response *r = NULL;
    int status = rt->fn(&rq, &r);
    return send_reply(c, u, status, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    upload *u = *con_cls;
    (void)c;
    if (!u)
        return;
    if (u->status) {
        server *s = cls;
        int gone = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
        if (s->json_log) {
            flockfile(stderr);
            fputs("{\"method\":", stderr);
            json_string(stderr, u->method, strlen(u->method));
            fputs(",\"path\":", stderr);
            json_string(stderr, u->url, strlen(u->url));
            fprintf(stderr, ",\"status\":%d,\"client_gone\":%s}\n", u->status, gone ? "true" : "false");
            funlockfile(stderr);
        } else {
            fprintf(stderr, "coli serve: %s %s %d%s\n", u->method, u->url, u->status,
                    gone ? " (the client went away)" : "");
        }
    }
    sbuf_free(&u->body);
    free(u);
    *con_cls = NULL;
}

int http_start(server *s, char *err, size_t errcap)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *addr;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;

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
    /* connections: the slots and the queue, plus room for /health and /metrics */
    unsigned limit = (unsigned)(s->parallel + s->queue) * 2 + 16;
    s->daemon = MHD_start_daemon(flags, (uint16_t)s->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
                                 MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned)CONN_TIMEOUT, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errcap, "cannot listen on %s port %d", s->host, s->port);
        return -1;
    }
    return 0;
}

void http_stop(server *s)
{
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
}

int http_port(const server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? (int)i->port : s->port;
}
