/* chatcmd.c - coli chat (chatcmd.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "chatcmd.h"

#include "../jsonout.h"
#include "chat.h"
#include "gencfg.h"
#include "sbuf.h"
#include "think.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Ctrl-C: during a reply it stops the reply; at the prompt it ends. */
static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

/* One turn of the history. */
typedef struct turn {
    int assistant;
    char *text;
} turn;

typedef struct convo {
    turn *t;
    size_t n;
    const char *system;
} convo;

static void convo_add(convo *c, int assistant, const char *text, size_t len)
{
    c->t = xrealloc(c->t, (c->n + 1) * sizeof *c->t);
    c->t[c->n].assistant = assistant;
    c->t[c->n].text = xrealloc(NULL, len + 1);
    memcpy(c->t[c->n].text, text, len);
    c->t[c->n].text[len] = '\0';
    c->n++;
}

static void convo_clear(convo *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->t[i].text);
    c->n = 0;
}

/* The prompt of the history: a request body {"messages": [...]} through
 * the template, as coli serve renders it. */
static int render(const chat_tmpl *tmpl, const convo *c, char **prompt, size_t *len, apierr *e)
{
    char *body = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&body, &n);
    coli__json_doc *doc = NULL;
    coli__err err;
    int rc;

    if (!f)
        return api_fail(e, 500, NULL, "out of memory");
    fputs("{\"messages\":[", f);
    if (c->system) {
        fputs("{\"role\":\"system\",\"content\":", f);
        json_string(f, c->system, strlen(c->system));
        fputs(c->n ? "}," : "}", f);
    }
    for (size_t i = 0; i < c->n; i++) {
        fprintf(f, "%s{\"role\":\"%s\",\"content\":", i ? "," : "", c->t[i].assistant ? "assistant" : "user");
        json_string(f, c->t[i].text, strlen(c->t[i].text));
        fputc('}', f);
    }
    fputs("]}", f);
    fclose(f);
    if (coli__json_parse(body, n, "the conversation", &doc, &err) != COLI_OK)
        rc = api_fail(e, 500, NULL, "%s", err.msg);
    else
        rc = chat_render(tmpl, coli__json_root(doc), prompt, len, e);
    coli__json_free(doc);
    free(body);
    return rc;
}

typedef struct reply {
    sbuf text;
    int json;          /* --format json: the reply is printed whole, as JSON */
    int write_failed;
    long delay_ns;     /* COLI_SERVE_STEP_DELAY_MS: a pause a token, for tests */
} reply;

static int on_token(void *user, int32_t token, const char *text, size_t len)
{
    reply *r = user;
    (void)token;
    if (g_interrupted)
        return 1; /* the token is counted, not shown: the reply stops */
    if (r->delay_ns) {
        struct timespec d = {r->delay_ns / 1000000000L, r->delay_ns % 1000000000L};
        nanosleep(&d, NULL);
    }
    sbuf_add(&r->text, text, len);
    if (r->json)
        return 0;
    if ((len && fwrite(text, 1, len, stdout) != len) || fflush(stdout) != 0)
        r->write_failed = 1;
    return r->write_failed;
}

/* --format json: {"content":...,"reasoning_content":...,"finish_reason":...} */
static void print_json(const sbuf *content, const sbuf *reasoning, coli_stop_reason why)
{
    fputs("{\"content\":", stdout);
    json_string(stdout, content->p ? content->p : "", content->n);
    fputs(",\"reasoning_content\":", stdout);
    if (reasoning->n)
        json_string(stdout, reasoning->p, reasoning->n);
    else
        fputs("null", stdout);
    printf(",\"finish_reason\":\"%s\"}\n", why == COLI_STOP_EOS || why == COLI_STOP_STRING ? "stop" : "length");
}

static int sampler_args(const args *a, const char *dir, coli_sampler_params *sp, int64_t *max_tokens)
{
    double x;
    int64_t i;
    uint64_t seed;
    int rc;

    gencfg_defaults(dir, sp);
    *max_tokens = 1024;
    if (a->value[O_MAX_TOKENS] && (rc = parse_int64("--max-tokens", a->value[O_MAX_TOKENS], 1, 1 << 24, max_tokens)))
        return rc;
    if (a->value[O_TEMPERATURE]) {
        if ((rc = parse_real("--temperature", a->value[O_TEMPERATURE], 0.0, 1e6, &x)) != 0)
            return rc;
        sp->temperature = (float)x;
    }
    if (a->value[O_TOP_K]) {
        if ((rc = parse_int64("--top-k", a->value[O_TOP_K], 0, 1 << 20, &i)) != 0)
            return rc;
        sp->top_k = (int)i;
    }
    if (a->value[O_TOP_P]) {
        if ((rc = parse_real("--top-p", a->value[O_TOP_P], 1e-6, 1.0, &x)) != 0)
            return rc;
        sp->top_p = (float)x;
    }
    if (a->value[O_MIN_P]) {
        if ((rc = parse_real("--min-p", a->value[O_MIN_P], 0.0, 1.0, &x)) != 0)
            return rc;
        sp->min_p = (float)x;
    }
    if (a->value[O_REPEAT_PENALTY]) {
        if ((rc = parse_real("--repeat-penalty", a->value[O_REPEAT_PENALTY], 1e-6, 1e6, &x)) != 0)
            return rc;
        sp->repeat_penalty = (float)x;
    }
    if (a->value[O_SEED]) {
        if ((rc = parse_uint64("--seed", a->value[O_SEED], &seed)) != 0)
            return rc;
        sp->seed = seed;
    }
    return 0;
}

/* One turn: renders the history, evaluates what the context lacks of it,
 * prints the reply as it comes and adds it to the history. 0, or 1 when
 * the conversation cannot go on. */
static int turn_run(coli_model *m, coli_context *ctx, coli_sampler *smp, const chat_tmpl *tmpl, convo *c,
                    int64_t max_tokens, int json, int32_t **held, size_t *n_held)
{
    char *prompt = NULL;
    size_t len = 0, n = 0, cap, n_out = 0;
    apierr e;
    coli_stop_reason why;

    if (render(tmpl, c, &prompt, &len, &e) != 0) {
        fprintf(stderr, "%s: %s\n", cli_prog, e.message);
        return 1;
    }
    cap = len + 8;
    int32_t *ids = xrealloc(NULL, cap * sizeof *ids);
    coli_status st = coli_tokenize(m, prompt, len, 0, ids, cap, &n);
    int opened = think_opened(prompt, len);
    free(prompt);
    size_t room = coli_context_capacity(ctx);
    if (st != COLI_OK || n == 0 || n >= room) {
        fprintf(stderr, "%s: the conversation (%zu tokens) does not fit the context (%zu): /clear starts over\n",
                cli_prog, n, room);
        free(ids);
        c->n--; /* the turn is dropped */
        free(c->t[c->n].text);
        return 0;
    }
    /* the context keeps what it shares with this prompt */
    size_t cp = 0;
    while (cp < *n_held && cp < n && (*held)[cp] == ids[cp])
        cp++;
    if (cp == n)
        cp--;
    if (coli_context_truncate(ctx, cp) != COLI_OK) {
        coli_context_reset(ctx);
        cp = 0;
    }
    size_t most = room - n;
    coli_generate_params gp;
    reply r;
    memset(&r, 0, sizeof r);
    r.json = json;
    const char *delay = getenv("COLI_SERVE_STEP_DELAY_MS");
    r.delay_ns = delay ? strtol(delay, NULL, 10) * 1000000L : 0;
    coli_generate_params_init(&gp, sizeof gp);
    gp.max_tokens = (size_t)max_tokens < most ? (size_t)max_tokens : most;
    gp.on_token = on_token;
    gp.user = &r;
    int32_t *out = xrealloc(NULL, gp.max_tokens * sizeof *out);
    st = coli_generate(ctx, ids + cp, n - cp, smp, &gp, out, gp.max_tokens, &n_out, &why);
    if (!json)
        fputc('\n', stdout);
    /* the tokens whose positions the context holds now */
    size_t pos = coli_context_position(ctx), kept = pos > n ? pos - n : 0;
    if (kept > n_out)
        kept = n_out;
    *held = xrealloc(*held, (n + kept + 1) * sizeof **held);
    memcpy(*held, ids, n * sizeof *ids);
    memcpy(*held + n, out, kept * sizeof *out);
    *n_held = pos < n ? pos : n + kept;
    free(ids);
    free(out);
    if (st != COLI_OK) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, coli_strerror(st), coli_context_errmsg(ctx));
        sbuf_free(&r.text);
        return 1;
    }
    /* the history keeps the answer, not the reasoning (as templates drop it) */
    think th;
    sbuf reasoning = {0}, content = {0};
    think_start(&th, opened);
    think_feed(&th, r.text.p ? r.text.p : "", r.text.n, 1, &reasoning, &content);
    convo_add(c, 1, content.p ? content.p : "", content.n);
    if (json)
        print_json(&content, &reasoning, why);
    if (fflush(stdout) != 0)
        r.write_failed = 1;
    think_free(&th);
    sbuf_free(&reasoning);
    sbuf_free(&content);
    sbuf_free(&r.text);
    return r.write_failed;
}

int chat_run(const args *a, coli_model *model, const char *dir)
{
    chat_tmpl tmpl;
    coli_sampler_params sp;
    coli_sampler *smp = NULL;
    coli_context *ctx = NULL;
    convo c;
    int64_t max_tokens;
    char err[600], *line = NULL;
    size_t cap = 0;
    int32_t *held = NULL;
    size_t n_held = 0;
    int rc, json;

    memset(&c, 0, sizeof c);
    c.system = a->value[O_SYSTEM];
    if ((rc = parse_format(a, 0, &json)) != 0)
        return rc;
    if ((rc = sampler_args(a, dir, &sp, &max_tokens)) != 0)
        return rc;
    if (chat_tmpl_init(&tmpl, model, a->value[O_CHAT_TEMPLATE_FILE], err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", cli_prog, err);
        return 1;
    }
    rc = 1;
    if (!tmpl.t) {
        fprintf(stderr, "%s: %s\n", cli_prog, tmpl.why);
        goto done;
    }
    coli_status st = coli_sampler_create(&sp, &smp);
    if (st == COLI_OK)
        st = coli_context_create(model, NULL, &ctx);
    if (st != COLI_OK) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, coli_strerror(st), coli_model_errmsg(model));
        goto done;
    }
    /* without SA_RESTART, so that Ctrl-C at the prompt ends the read */
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
    rc = 0;
    for (;;) {
        g_interrupted = 0;
        errno = 0;
        ssize_t got = getline(&line, &cap, stdin);
        if (got < 0) {
            if (g_interrupted)
                fputc('\n', stderr);
            break;
        }
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (got == 0)
            continue;
        if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0)
            break;
        if (strcmp(line, "/clear") == 0) {
            convo_clear(&c);
            fprintf(stderr, "%s: the history is cleared\n", cli_prog);
            continue;
        }
        convo_add(&c, 0, line, (size_t)got);
        if ((rc = turn_run(model, ctx, smp, &tmpl, &c, max_tokens, json, &held, &n_held)) != 0)
            break;
        if (g_interrupted)
            fprintf(stderr, "%s: [the reply was stopped]\n", cli_prog);
    }
    sigaction(SIGINT, &old_sa, NULL);
done:
    free(line);
    free(held);
    convo_clear(&c);
    free(c.t);
    coli_context_free(ctx);
    coli_sampler_free(smp);
    chat_tmpl_free(&tmpl);
    return rc;
}
