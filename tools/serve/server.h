/*
 * server.h - the state `coli serve` shares between its files: settings,
 * the model once it is open, the scheduler, the chat template; and the
 * request the HTTP layer hands to an endpoint.
 */
#ifndef COLI_SERVE_SERVER_H
#define COLI_SERVE_SERVER_H

#include <colibri/colibri.h>

#include <stdatomic.h>
#include <stddef.h>

#include "apierr.h"
#include "chat.h"
#include "guard.h"
#include "sched.h"

struct MHD_Daemon;
struct MHD_Connection;
struct MHD_Response;

/* The chat page's files (web.c). */
#define WEB_FILES 3

typedef struct server {
    /* settings */
    const char *host;
    int port;
    size_t max_body;
    char **keys;             /* API keys; none: open */
    size_t n_keys;
    const char *model_name;  /* --alias or the model directory's name */
    int parallel, queue;
    int json_log;            /* --format json: a JSON object a line on stderr */
    guard_cfg limits;        /* connections and their times (guard.h) */
    double send_timeout;     /* seconds a response may make no progress */
    double stop_timeout;     /* seconds in-flight requests get after a stop signal */
    /* state */
    atomic_int ready;        /* 1 once the model is open and the slots run */
    atomic_int draining;     /* 1 once a stop signal came: new requests get 503 */
    guard *guard;
    size_t vocab;            /* token ids are below it */
    coli_model *model;
    sched *sched;
    chat_tmpl tmpl;
    coli_sampler_params defaults;
    long long started;       /* Unix seconds */
    struct MHD_Daemon *daemon;
    char *web[WEB_FILES];    /* the chat page, or NULL (web.c) */
    size_t web_len[WEB_FILES];
} server;

/* What an endpoint tells the log line of its request (http.c writes it
 * when the request ends). */
typedef struct reqlog {
    char id[48];             /* the response's id; "" for none */
    int tokens;              /* 1: the counts below are the request's */
    size_t prompt_tokens, completion_tokens;
    const char *end;         /* how a generation ended ("stop", "length",
                              * "error", "server_shutdown"); NULL: answered */
    char error[256];         /* what failed, for the log only: a client
                              * never sees a server path or internal name */
} reqlog;

/* A request as an endpoint sees it: the whole body has arrived. */
typedef struct request {
    server *srv;
    struct MHD_Connection *conn;
    const char *body;
    size_t len;
    reqlog *log;
} request;

/* An endpoint: fills *resp and returns the HTTP status. */
typedef int (*endpoint_fn)(const request *rq, struct MHD_Response **resp);

/* Responses (reply.c): body is malloc'd and taken over. */
struct MHD_Response *reply_json(char *body, size_t len);
int reply_error(const apierr *e, struct MHD_Response **resp);

/* Endpoints (endpoints.c, generate.c). */
int ep_health(const request *rq, struct MHD_Response **resp);
int ep_models(const request *rq, struct MHD_Response **resp);
int ep_metrics(const request *rq, struct MHD_Response **resp);
int ep_tokenize(const request *rq, struct MHD_Response **resp);
int ep_detokenize(const request *rq, struct MHD_Response **resp);
int ep_apply_template(const request *rq, struct MHD_Response **resp);
int ep_completions(const request *rq, struct MHD_Response **resp);
int ep_chat(const request *rq, struct MHD_Response **resp);

/* The chat page (web.c): its files from dir (NULL: COLI_WEB_DIR, else the
 * installed page), or none with a warning. */
void web_load(server *s, const char *dir);
void web_free(server *s);
int ep_web_index(const request *rq, struct MHD_Response **resp);
int ep_web_js(const request *rq, struct MHD_Response **resp);
int ep_web_css(const request *rq, struct MHD_Response **resp);

/* The HTTP daemon (http.c): listens at once (the model may still be
 * opening: /health says 503 until ready). 0, or -1 with a message. */
int http_start(server *s, char *err, size_t errcap);
/* Stops taking connections (the listening socket is closed); those open
 * go on until http_stop. */
void http_quiesce(server *s);
/* Connections whose request is being answered. */
unsigned http_active(server *s);
void http_stop(server *s);
/* The port it listens on (for --port 0). */
int http_port(const server *s);

#endif
