/* guard.c - connections kept from being used up by idle or slow clients
 * (guard.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "guard.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef enum gstate {
    GS_IDLE,      /* waiting for a request to begin */
    GS_HEADERS,   /* its headers arriving: nothing has been sent on it */
    GS_BODY,      /* its body arriving */
    GS_ACTIVE,    /* complete: being answered */
    GS_CUT        /* closed by the guard, not yet gone */
} gstate;

/* An address as the caps count it: IPv4 whole, IPv6 by its /64. */
typedef struct gaddr {
    int family;
    unsigned char b[8];
} gaddr;

struct gconn {
    gconn *prev, *next;
    int fd;
    gaddr addr;
    gstate state;
    gcut cut;
    double since;    /* idle since, or the request's first line */
};

struct guard {
    guard_cfg cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int running, stop, draining;
    gconn *head, *tail;
    unsigned open;
    guard_stats st;
    char r408[512], r503[512];  /* what a connection cut in its headers gets */
    size_t n408, n503;
};

double guard_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void key_of(const struct sockaddr *sa, socklen_t len, gaddr *k)
{
    memset(k, 0, sizeof *k);
    if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        k->family = AF_INET;
        memcpy(k->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a, mapped, sizeof mapped) == 0) { /* an IPv4 client on an IPv6 socket */
            k->family = AF_INET;
            memcpy(k->b, a + 12, 4);
        } else {
            k->family = AF_INET6;
            memcpy(k->b, a, 8);
        }
    }
}

static int same_addr(const gaddr *a, const gaddr *b)
{
    return a->family == b->family && memcmp(a->b, b->b, sizeof a->b) == 0;
}

static int waiting(const gconn *c)
{
    return c->state == GS_IDLE || c->state == GS_HEADERS || c->state == GS_BODY;
}

static int canned(char *buf, size_t cap, int status, const char *reason, const char *extra, const char *msg)
{
    char body[320];
    int nb = snprintf(body, sizeof body,
                      "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"code\":%d,\"param\":null}}", msg,
                      status == 408 ? "invalid_request_error" : "unavailable_error", status);
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\n%s"
                     "Content-Length: %d\r\n\r\n%s",
                     status, reason, extra, nb, body);
    return n > 0 && (size_t)n < cap ? n : 0;
}

guard *guard_new(const guard_cfg *cfg)
{
    if (cfg->max <= cfg->reserve)
        return NULL;
    guard *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->cfg = *cfg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->mu, NULL);
    char msg[200];
    snprintf(msg, sizeof msg, "the request did not arrive within %g s (--request-timeout)", cfg->request_s);
    g->n408 = (size_t)canned(g->r408, sizeof g->r408, 408, "Request Timeout", "", msg);
    g->n503 = (size_t)canned(g->r503, sizeof g->r503, 503, "Service Unavailable", "Retry-After: 1\r\n",
                             "too many connections are waiting to send a request; retry");
    return g;
}

static void *watch(void *arg)
{
    guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        pthread_mutex_unlock(&g->mu);
        double now = guard_now(), wait = guard_tick(g, now), t = now + wait;
        struct timespec ts = {(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
        pthread_mutex_lock(&g->mu);
        if (!g->stop)
            pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int guard_start(guard *g)
{
    if (pthread_create(&g->thread, NULL, watch, g) != 0)
        return -1;
    g->running = 1;
    return 0;
}

void guard_free(guard *g)
{
    if (!g)
        return;
    if (g->running) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
    }
    while (g->head) {
        gconn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* Closes c for why (mu held). The HTTP library's thread of c only reads
 * while its headers arrive, so an answer written here cannot mix with
 * one of its own. */
static void cut(guard *g, gconn *c, gcut why)
{
    if (c->state == GS_HEADERS && (why == GCUT_TIMEOUT || why == GCUT_CROWDED || why == GCUT_CLIENT)) {
        const char *r = why == GCUT_TIMEOUT ? g->r408 : g->r503;
        size_t n = why == GCUT_TIMEOUT ? g->n408 : g->n503;
        if (n)
            (void)!send(c->fd, r, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    shutdown(c->fd, SHUT_RDWR);
    c->state = GS_CUT;
    c->cut = why;
    g->st.cut[why]++;
}

/* The waiting connection that has waited longest, of addr when given;
 * only idle ones when idle_only. NULL: none. */
static gconn *oldest(guard *g, const gaddr *addr, int idle_only)
{
    gconn *best = NULL;
    for (gconn *c = g->head; c; c = c->next) {
        if (!waiting(c) || (idle_only && c->state != GS_IDLE) || (addr && !same_addr(&c->addr, addr)))
            continue;
        if (!best || c->since < best->since)
            best = c;
    }
    return best;
}

int guard_admit(guard *g, const struct sockaddr *addr, socklen_t len, double now)
{
    gaddr k;
    int ok = 1;
    (void)now;
    key_of(addr, len, &k);
    pthread_mutex_lock(&g->mu);
    if (g->stop || g->open >= g->cfg.max) {
        ok = 0;
    } else {
        unsigned all = 0, mine = 0;
        for (gconn *c = g->head; c; c = c->next)
            if (waiting(c)) {
                all++;
                mine += same_addr(&c->addr, &k);
            }
        if (g->cfg.per_client && mine >= g->cfg.per_client) {
            gconn *v = oldest(g, &k, 1);
            if (v) {
                cut(g, v, GCUT_CLIENT);
                all--;
            } else {
                ok = 0;
            }
        }
        if (ok && all >= g->cfg.max - g->cfg.reserve) {
            gconn *v = oldest(g, NULL, 1);
            if (!v)
                v = oldest(g, NULL, 0);
            if (v)
                cut(g, v, GCUT_CROWDED);
        }
    }
    if (!ok)
        g->st.refused++;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

gconn *guard_open(guard *g, int fd, const struct sockaddr *addr, socklen_t len, double now)
{
    gconn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    key_of(addr, len, &c->addr);
    c->state = GS_IDLE;
    c->since = now;
    pthread_mutex_lock(&g->mu);
    c->prev = g->tail;
    if (g->tail)
        g->tail->next = c;
    else
        g->head = c;
    g->tail = c;
    g->open++;
    if (g->draining)
        cut(g, c, GCUT_STOPPING);
    pthread_mutex_unlock(&g->mu);
    return c;
}

void guard_close(guard *g, gconn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        g->tail = c->prev;
    g->open--;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

/* Moves c from one state to the next, unless it was cut (mu taken here). */
static int step(guard *g, gconn *c, gstate to, double now, int set_since)
{
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    if (c->state == GS_CUT) {
        rc = -1;
    } else {
        c->state = to;
        if (set_since)
            c->since = now;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int guard_begin(guard *g, gconn *c, double now)
{
    return step(g, c, GS_HEADERS, now, 1);
}

int guard_headers(guard *g, gconn *c)
{
    return step(g, c, GS_BODY, 0, 0);
}

int guard_body(guard *g, gconn *c, double now)
{
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    if (c->state == GS_CUT) {
        rc = -1;
    } else if (now - c->since > g->cfg.request_s) {
        /* answered by the caller; counted as cut so the log says why */
        c->state = GS_ACTIVE;
        c->cut = GCUT_TIMEOUT;
        g->st.cut[GCUT_TIMEOUT]++;
        rc = -1;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int guard_complete(guard *g, gconn *c)
{
    return step(g, c, GS_ACTIVE, 0, 0);
}

void guard_idle(guard *g, gconn *c, double now)
{
    pthread_mutex_lock(&g->mu);
    if (c->state != GS_CUT) {
        c->state = GS_IDLE;
        c->since = now;
        c->cut = GCUT_NONE;
        if (g->draining)
            cut(g, c, GCUT_STOPPING);
    }
    pthread_mutex_unlock(&g->mu);
}

gcut guard_cut_of(guard *g, const gconn *c)
{
    pthread_mutex_lock(&g->mu);
    gcut why = c ? c->cut : GCUT_NONE;
    pthread_mutex_unlock(&g->mu);
    return why;
}

double guard_tick(guard *g, double now)
{
    double next = 1.0;
    pthread_mutex_lock(&g->mu);
    for (gconn *c = g->head; c; c = c->next) {
        if (!waiting(c))
            continue;
        double limit = c->state == GS_IDLE ? g->cfg.idle_s : g->cfg.request_s;
        double left = c->since + limit - now;
        if (c->state == GS_IDLE && g->draining)
            cut(g, c, GCUT_STOPPING);
        else if (left < 0)
            cut(g, c, c->state == GS_IDLE ? GCUT_IDLE : GCUT_TIMEOUT);
        else if (left < next)
            next = left;
    }
    pthread_mutex_unlock(&g->mu);
    return next + 0.01; /* just past the deadline, not just before it */
}

void guard_drain(guard *g)
{
    pthread_mutex_lock(&g->mu);
    g->draining = 1;
    for (gconn *c = g->head; c; c = c->next)
        if (c->state == GS_IDLE)
            cut(g, c, GCUT_STOPPING);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void guard_stats_get(guard *g, guard_stats *out)
{
    pthread_mutex_lock(&g->mu);
    *out = g->st;
    out->open = g->open;
    out->waiting = out->active = 0;
    for (gconn *c = g->head; c; c = c->next) {
        out->waiting += (unsigned)waiting(c);
        out->active += c->state == GS_ACTIVE;
    }
    pthread_mutex_unlock(&g->mu);
}

const char *guard_cut_name(gcut why)
{
    static const char *const names[GCUT_COUNT] = {"none", "idle", "request_timeout", "client_limit", "crowded",
                                                  "stopping"};
    return (unsigned)why < GCUT_COUNT ? names[why] : "unknown";
}
