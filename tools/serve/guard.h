/*
 * guard.h - the connections of coli serve, kept from being used up by
 * clients that connect and send nothing, or drip their request a byte at
 * a time (docs/serving.md, "Limits"):
 *  - a connection waits at most idle_s for a request to begin, when it
 *    opens and between keep-alive requests;
 *  - a request's headers and body must all have arrived request_s after
 *    its first line;
 *  - at most per_client connections of one address (an IPv6 client: its
 *    /64) may be waiting so: one more closes that address's oldest idle
 *    connection, or is refused when none of them is idle;
 *  - at most max - reserve connections in all may be waiting: one more
 *    closes the oldest waiting connection (idle ones first), so that a new
 *    client always gets in and reserve connections are always left for
 *    requests that are complete;
 *  - a connection whose request is complete is never closed by the guard.
 * A connection closed while its headers arrive is answered first (408, or
 * 503 when it made room for another); an idle one is just closed.
 *
 * Plain POSIX, no HTTP library: http.c tells the guard what happens to
 * each connection, and the guard's thread closes (shutdown(2)) those that
 * waited too long; the HTTP library then sees the end of the stream and
 * cleans up. Times are seconds of a monotonic clock (guard_now).
 */
#ifndef COLI_SERVE_GUARD_H
#define COLI_SERVE_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

typedef struct guard guard;
typedef struct gconn gconn;

typedef struct guard_cfg {
    unsigned max;            /* connections in all */
    unsigned reserve;        /* of them, never taken by waiting ones */
    unsigned per_client;     /* waiting connections of one address; 0: no cap */
    double idle_s;           /* for a request to begin */
    double request_s;        /* for its headers and body, from its first line */
} guard_cfg;

/* Why the guard closed a connection. */
typedef enum gcut {
    GCUT_NONE,
    GCUT_IDLE,               /* no request began within idle_s */
    GCUT_TIMEOUT,            /* the request did not arrive within request_s */
    GCUT_CLIENT,             /* its address had per_client waiting */
    GCUT_CROWDED,            /* max - reserve were waiting */
    GCUT_STOPPING,           /* idle while the server stops */
    GCUT_COUNT
} gcut;

typedef struct guard_stats {
    unsigned open;           /* connections now; of them: */
    unsigned waiting;        /* waiting for their request */
    unsigned active;         /* with a complete request, being answered */
    uint64_t cut[GCUT_COUNT];
    uint64_t refused;        /* new connections turned away */
} guard_stats;

/* A guard for cfg (max > reserve); NULL when memory runs out. */
guard *guard_new(const guard_cfg *cfg);
/* Starts the thread that closes connections past their time: 0 or -1. */
int guard_start(guard *g);
/* Stops the thread and frees the guard (and any connection left). */
void guard_free(guard *g);
double guard_now(void);

/* Whether to take a new connection from addr (its place may be made by
 * closing another). */
int guard_admit(guard *g, const struct sockaddr *addr, socklen_t len, double now);
/* A connection taken (its socket fd); NULL when memory runs out. */
gconn *guard_open(guard *g, int fd, const struct sockaddr *addr, socklen_t len, double now);
/* It is gone: frees c. */
void guard_close(guard *g, gconn *c);

/* The steps of a request on c. Each returns 0, or -1 when the guard has
 * closed c already (the caller then drops it). */
int guard_begin(guard *g, gconn *c, double now);     /* its first line came */
int guard_headers(guard *g, gconn *c);               /* its headers are in */
/* A piece of its body came: -1 also when it is past its time, and then c
 * counts as answered (the caller replies 408). */
int guard_body(guard *g, gconn *c, double now);
int guard_complete(guard *g, gconn *c);              /* all of it is in */
/* Its response is done: c waits for the next request (keep-alive). */
void guard_idle(guard *g, gconn *c, double now);
/* Why c was closed (GCUT_NONE: it was not). */
gcut guard_cut_of(guard *g, const gconn *c);

/* Closes the connections past their time; the seconds to the next such
 * time (at most 1). The guard's thread calls it; tests call it with a
 * clock of their own. */
double guard_tick(guard *g, double now);
/* The server stops: idle connections are closed now and from now on. */
void guard_drain(guard *g);
void guard_stats_get(guard *g, guard_stats *out);
/* The name of a cut in logs and metrics ("idle", "request_timeout", ...). */
const char *guard_cut_name(gcut why);

#endif
