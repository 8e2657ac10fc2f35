/* test_guard.c - coli serve's connection guard (tools/serve/guard.c) on
 * socket pairs with a clock of the test's own: the idle and request
 * deadlines, what a cut connection's peer reads (408, 503 or only the
 * end), the cap per address (IPv6 by /64), the room kept for complete
 * requests, and the stop. Each expectation is worked out from guard.h's
 * rules, not read back from the code. */
#include <config.h>

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../tools/serve/guard.h"
#include "testutil.h"

/* A connection: the guard's end and the client's. */
typedef struct pair {
    int server, client;
    gconn *c;
} pair;

static struct sockaddr_storage addr4(const char *ip)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    memset(&ss, 0, sizeof ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(40000);
    ck_assert_int_eq(inet_pton(AF_INET, ip, &a->sin_addr), 1);
    return ss;
}

static struct sockaddr_storage addr6(const char *ip)
{
    struct sockaddr_storage ss;
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    memset(&ss, 0, sizeof ss);
    a->sin6_family = AF_INET6;
    ck_assert_int_eq(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
    return ss;
}

static socklen_t len_of(const struct sockaddr_storage *ss)
{
    return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Admits and opens a connection from ss at time now. */
static pair open_from(guard *g, const struct sockaddr_storage *ss, double now)
{
    int sv[2];
    pair p;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    p.server = sv[0];
    p.client = sv[1];
    ck_assert_int_eq(guard_admit(g, (const struct sockaddr *)ss, len_of(ss), now), 1);
    p.c = guard_open(g, p.server, (const struct sockaddr *)ss, len_of(ss), now);
    ck_assert_ptr_nonnull(p.c);
    return p;
}

static pair open4(guard *g, const char *ip, double now)
{
    struct sockaddr_storage ss = addr4(ip);
    return open_from(g, &ss, now);
}

/* What the client end reads now: "open" when nothing came and the guard
 * did not close it, "" when only the end came, else the bytes. */
static const char *peer(const pair *p, char *buf, size_t cap)
{
    struct pollfd pf = {p->client, POLLIN, 0};
    if (poll(&pf, 1, 0) == 0)
        return "open";
    ssize_t n = recv(p->client, buf, cap - 1, MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN ? "open" : "";
    buf[n] = '\0';
    return buf;
}

static void done(guard *g, pair *p)
{
    guard_close(g, p->c);
    close(p->server);
    close(p->client);
}

static guard *make(unsigned max, unsigned reserve, unsigned per_client, double idle_s, double request_s)
{
    guard_cfg cfg = {max, reserve, per_client, idle_s, request_s};
    guard *g = guard_new(&cfg);
    ck_assert_ptr_nonnull(g);
    return g;
}

START_TEST(test_guard_idle_deadline)
{
    char buf[1024];
    guard *g = make(64, 8, 0, 5, 3);
    pair p = open4(g, "10.0.0.1", 100);
    guard_tick(g, 104.9);
    ck_assert_str_eq(peer(&p, buf, sizeof buf), "open");
    ck_assert_int_eq(guard_cut_of(g, p.c), GCUT_NONE);
    guard_tick(g, 105.1);
    /* idle: closed without an answer */
    ck_assert_str_eq(peer(&p, buf, sizeof buf), "");
    ck_assert_int_eq(guard_cut_of(g, p.c), GCUT_IDLE);
    guard_stats st;
    guard_stats_get(g, &st);
    ck_assert_uint_eq(st.cut[GCUT_IDLE], 1);
    ck_assert_uint_eq(st.open, 1); /* until the HTTP layer lets it go */
    ck_assert_uint_eq(st.waiting, 0);
    done(g, &p);
    guard_stats_get(g, &st);
    ck_assert_uint_eq(st.open, 0);
    guard_free(g);
}
END_TEST

START_TEST(test_guard_request_deadline)
{
    char buf[1024];
    guard *g = make(64, 8, 0, 5, 3);
    /* headers: answered 408 in the error envelope */
    pair h = open4(g, "10.0.0.1", 100);
    ck_assert_int_eq(guard_begin(g, h.c, 104), 0); /* 4 s idle: under 5 */
    guard_tick(g, 106.9);                          /* 2.9 s of request: under 3 */
    ck_assert_str_eq(peer(&h, buf, sizeof buf), "open");
    guard_tick(g, 107.1);
    const char *got = peer(&h, buf, sizeof buf);
    ck_assert_msg(strncmp(got, "HTTP/1.1 408 Request Timeout\r\n", 30) == 0, "got '%s'", got);
    ck_assert_ptr_nonnull(strstr(got, "Connection: close\r\n"));
    ck_assert_ptr_nonnull(strstr(got, "{\"error\":{\"message\":\"the request did not arrive within 3 s "
                                      "(--request-timeout)\",\"type\":\"invalid_request_error\",\"code\":408,"));
    ck_assert_int_eq(guard_cut_of(g, h.c), GCUT_TIMEOUT);
    /* a cut connection's next step is refused */
    ck_assert_int_eq(guard_headers(g, h.c), -1);
    /* body: the HTTP library may be writing (100 Continue): only closed */
    pair b = open4(g, "10.0.0.2", 100);
    ck_assert_int_eq(guard_begin(g, b.c, 100), 0);
    ck_assert_int_eq(guard_headers(g, b.c), 0);
    guard_tick(g, 103.1);
    ck_assert_str_eq(peer(&b, buf, sizeof buf), "");
    ck_assert_int_eq(guard_cut_of(g, b.c), GCUT_TIMEOUT);
    /* a body piece past the time: -1, answered by the caller, never cut */
    pair late = open4(g, "10.0.0.3", 100);
    ck_assert_int_eq(guard_begin(g, late.c, 100), 0);
    ck_assert_int_eq(guard_headers(g, late.c), 0);
    ck_assert_int_eq(guard_body(g, late.c, 102.9), 0);
    ck_assert_int_eq(guard_body(g, late.c, 103.2), -1);
    ck_assert_int_eq(guard_cut_of(g, late.c), GCUT_TIMEOUT);
    guard_tick(g, 200);
    ck_assert_str_eq(peer(&late, buf, sizeof buf), "open");
    guard_stats st;
    guard_stats_get(g, &st);
    ck_assert_uint_eq(st.cut[GCUT_TIMEOUT], 3);
    ck_assert_uint_eq(st.active, 1);
    done(g, &h);
    done(g, &b);
    done(g, &late);
    guard_free(g);
}
END_TEST

/* A complete request is never closed, however long it is answered; the
 * connection then waits for its next request afresh. */
START_TEST(test_guard_active_and_keepalive)
{
    char buf[1024];
    guard *g = make(64, 8, 0, 5, 3);
    pair p = open4(g, "10.0.0.1", 100);
    ck_assert_int_eq(guard_begin(g, p.c, 101), 0);
    ck_assert_int_eq(guard_headers(g, p.c), 0);
    ck_assert_int_eq(guard_body(g, p.c, 102), 0);
    ck_assert_int_eq(guard_complete(g, p.c), 0);
    guard_tick(g, 1000);
    ck_assert_str_eq(peer(&p, buf, sizeof buf), "open");
    guard_idle(g, p.c, 1000);
    guard_tick(g, 1004.9);
    ck_assert_str_eq(peer(&p, buf, sizeof buf), "open");
    guard_tick(g, 1005.1);
    ck_assert_str_eq(peer(&p, buf, sizeof buf), "");
    done(g, &p);
    guard_free(g);
}
END_TEST

START_TEST(test_guard_per_client)
{
    char buf[1024];
    guard *g = make(64, 8, 2, 5, 3);
    pair a = open4(g, "10.0.0.1", 100);
    pair b = open4(g, "10.0.0.1", 101);
    pair other = open4(g, "10.0.0.2", 99);
    /* a third of 10.0.0.1: its oldest idle one (a) makes room */
    pair c = open4(g, "10.0.0.1", 102);
    ck_assert_str_eq(peer(&a, buf, sizeof buf), "");
    ck_assert_int_eq(guard_cut_of(g, a.c), GCUT_CLIENT);
    ck_assert_str_eq(peer(&b, buf, sizeof buf), "open");
    ck_assert_str_eq(peer(&other, buf, sizeof buf), "open");
    /* both sending requests: none idle, so a new one is refused */
    ck_assert_int_eq(guard_begin(g, b.c, 103), 0);
    ck_assert_int_eq(guard_begin(g, c.c, 103), 0);
    struct sockaddr_storage x = addr4("10.0.0.1");
    ck_assert_int_eq(guard_admit(g, (const struct sockaddr *)&x, len_of(&x), 104), 0);
    ck_assert_str_eq(peer(&b, buf, sizeof buf), "open");
    ck_assert_str_eq(peer(&c, buf, sizeof buf), "open");
    /* one complete: a place of the cap is free again */
    ck_assert_int_eq(guard_headers(g, b.c), 0);
    ck_assert_int_eq(guard_complete(g, b.c), 0);
    pair d = open4(g, "10.0.0.1", 105);
    ck_assert_str_eq(peer(&c, buf, sizeof buf), "open");
    guard_stats st;
    guard_stats_get(g, &st);
    ck_assert_uint_eq(st.refused, 1);
    ck_assert_uint_eq(st.cut[GCUT_CLIENT], 1);
    done(g, &a);
    done(g, &b);
    done(g, &c);
    done(g, &d);
    done(g, &other);
    guard_free(g);
}
END_TEST

/* IPv6 clients count by /64; an IPv4 address mapped into IPv6 is that
 * IPv4 address. */
START_TEST(test_guard_addresses)
{
    char buf[1024];
    guard *g = make(64, 8, 1, 5, 3);
    struct sockaddr_storage s1 = addr6("2001:db8:1:2::1"), s2 = addr6("2001:db8:1:2:ffff::9");
    struct sockaddr_storage s3 = addr6("2001:db8:1:3::1");
    pair a = open_from(g, &s1, 100);
    pair b = open_from(g, &s2, 101); /* the same /64: a makes room */
    ck_assert_str_eq(peer(&a, buf, sizeof buf), "");
    pair c = open_from(g, &s3, 102); /* another /64 */
    ck_assert_str_eq(peer(&b, buf, sizeof buf), "open");
    struct sockaddr_storage m = addr6("::ffff:192.0.2.7");
    pair d = open4(g, "192.0.2.7", 103);
    pair e = open_from(g, &m, 104);
    ck_assert_str_eq(peer(&d, buf, sizeof buf), "");
    ck_assert_str_eq(peer(&c, buf, sizeof buf), "open");
    ck_assert_str_eq(peer(&e, buf, sizeof buf), "open");
    done(g, &a);
    done(g, &b);
    done(g, &c);
    done(g, &d);
    done(g, &e);
    guard_free(g);
}
END_TEST

/* max 8, reserve 4: 4 may wait. One more closes the oldest waiting, idle
 * ones first; one cut in its headers is answered 503; complete requests
 * are never chosen; past max a new connection is refused. */
START_TEST(test_guard_crowded)
{
    char buf[1024];
    guard *g = make(8, 4, 0, 50, 30);
    pair p[10];
    p[0] = open4(g, "10.0.0.1", 100);
    ck_assert_int_eq(guard_begin(g, p[0].c, 100), 0); /* the oldest, but sending its headers */
    p[1] = open4(g, "10.0.0.2", 101);
    p[2] = open4(g, "10.0.0.3", 102);
    p[3] = open4(g, "10.0.0.4", 103);
    p[4] = open4(g, "10.0.0.5", 104); /* the fifth waiting: p[1], the oldest idle, goes */
    ck_assert_str_eq(peer(&p[1], buf, sizeof buf), "");
    ck_assert_int_eq(guard_cut_of(g, p[1].c), GCUT_CROWDED);
    ck_assert_str_eq(peer(&p[0], buf, sizeof buf), "open");
    /* every waiting one in its headers: the oldest is answered 503 */
    for (int i = 2; i <= 4; i++)
        ck_assert_int_eq(guard_begin(g, p[i].c, 105), 0);
    p[5] = open4(g, "10.0.0.6", 106);
    const char *got = peer(&p[0], buf, sizeof buf);
    ck_assert_msg(strncmp(got, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0, "got '%s'", got);
    ck_assert_ptr_nonnull(strstr(got, "Retry-After: 1\r\n"));
    ck_assert_ptr_nonnull(strstr(got, "\"type\":\"unavailable_error\",\"code\":503"));
    /* the HTTP layer lets the two cut ones go */
    for (int i = 0; i <= 1; i++) {
        guard_close(g, p[i].c);
        p[i].c = NULL;
    }
    /* two complete (p[2], p[3]), the oldest two: never chosen */
    for (int i = 2; i <= 3; i++) {
        ck_assert_int_eq(guard_headers(g, p[i].c), 0);
        ck_assert_int_eq(guard_complete(g, p[i].c), 0);
    }
    p[6] = open4(g, "10.0.0.7", 107);
    p[7] = open4(g, "10.0.0.8", 108); /* waiting: p[4], p[5], p[6], p[7] */
    p[8] = open4(g, "10.0.0.9", 109); /* p[5], the oldest idle, goes */
    ck_assert_str_eq(peer(&p[5], buf, sizeof buf), "");
    ck_assert_str_eq(peer(&p[4], buf, sizeof buf), "open");
    ck_assert_str_eq(peer(&p[2], buf, sizeof buf), "open");
    ck_assert_str_eq(peer(&p[3], buf, sizeof buf), "open");
    p[9] = open4(g, "10.0.0.10", 110); /* p[6] goes; 8 open with p[5] and p[6] */
    ck_assert_str_eq(peer(&p[6], buf, sizeof buf), "");
    guard_stats st;
    guard_stats_get(g, &st);
    ck_assert_uint_eq(st.open, 8);
    ck_assert_uint_eq(st.active, 2);
    ck_assert_uint_eq(st.waiting, 4);
    struct sockaddr_storage x = addr4("10.0.0.11");
    ck_assert_int_eq(guard_admit(g, (const struct sockaddr *)&x, len_of(&x), 111), 0);
    guard_stats_get(g, &st);
    ck_assert_uint_eq(st.cut[GCUT_CROWDED], 4);
    ck_assert_uint_eq(st.refused, 1);
    for (int i = 0; i < 10; i++)
        done(g, &p[i]);
    guard_free(g);
}
END_TEST

START_TEST(test_guard_drain)
{
    char buf[1024];
    guard *g = make(64, 8, 0, 50, 30);
    pair idle = open4(g, "10.0.0.1", 100);
    pair busy = open4(g, "10.0.0.2", 100);
    pair sending = open4(g, "10.0.0.3", 100);
    ck_assert_int_eq(guard_begin(g, busy.c, 100), 0);
    ck_assert_int_eq(guard_headers(g, busy.c), 0);
    ck_assert_int_eq(guard_complete(g, busy.c), 0);
    ck_assert_int_eq(guard_begin(g, sending.c, 100), 0);
    guard_drain(g);
    ck_assert_str_eq(peer(&idle, buf, sizeof buf), "");
    ck_assert_int_eq(guard_cut_of(g, idle.c), GCUT_STOPPING);
    /* requests in flight go on, a request arriving may still complete */
    ck_assert_str_eq(peer(&busy, buf, sizeof buf), "open");
    ck_assert_str_eq(peer(&sending, buf, sizeof buf), "open");
    guard_tick(g, 101);
    ck_assert_str_eq(peer(&sending, buf, sizeof buf), "open");
    /* an answered one is closed instead of waiting for the next request */
    guard_idle(g, busy.c, 101);
    ck_assert_str_eq(peer(&busy, buf, sizeof buf), "");
    /* a connection that still comes in is closed at once */
    pair late = open4(g, "10.0.0.4", 102);
    ck_assert_str_eq(peer(&late, buf, sizeof buf), "");
    guard_stats st;
    guard_stats_get(g, &st);
    ck_assert_uint_eq(st.cut[GCUT_STOPPING], 3);
    done(g, &idle);
    done(g, &busy);
    done(g, &sending);
    done(g, &late);
    guard_free(g);
}
END_TEST

/* The guard's own thread closes what waited too long, on the real clock. */
START_TEST(test_guard_thread)
{
    guard *g = make(64, 8, 0, 0.2, 0.2);
    pair p = open4(g, "10.0.0.1", guard_now());
    ck_assert_int_eq(guard_start(g), 0);
    struct pollfd pf = {p.client, POLLIN, 0};
    ck_assert_int_eq(poll(&pf, 1, 5000), 1);
    char b;
    ck_assert_int_eq(recv(p.client, &b, 1, 0), 0);
    ck_assert_int_eq(guard_cut_of(g, p.c), GCUT_IDLE);
    done(g, &p);
    guard_free(g);
}
END_TEST

START_TEST(test_guard_config)
{
    guard_cfg bad = {8, 8, 0, 1, 1};
    ck_assert_ptr_null(guard_new(&bad)); /* no room for waiting connections */
    ck_assert_str_eq(guard_cut_name(GCUT_TIMEOUT), "request_timeout");
    ck_assert_str_eq(guard_cut_name(GCUT_CLIENT), "client_limit");
}
END_TEST

static Suite *guard_suite(void)
{
    Suite *s = suite_create("guard");
    TCase *t = tcase_create("guard");
    tcase_add_test(t, test_guard_idle_deadline);
    tcase_add_test(t, test_guard_request_deadline);
    tcase_add_test(t, test_guard_active_and_keepalive);
    tcase_add_test(t, test_guard_per_client);
    tcase_add_test(t, test_guard_addresses);
    tcase_add_test(t, test_guard_crowded);
    tcase_add_test(t, test_guard_drain);
    tcase_add_test(t, test_guard_thread);
    tcase_add_test(t, test_guard_config);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run_suite(guard_suite());
}
