/* speculate.c - multi-token prediction: the MTP layer's cache, drafts,
 * verification and the guard. */
#include <stdlib.h>
#include <string.h>

#include "context/sampler.h"
#include "context/speculate.h"
#include "context/step.h"

/* A verification's logits come from the device in one pass too. */
_Static_assert(COLI__MTP_MAX + 1 <= COLI__GPU_ALL_ROWS, "a verification has more rows than the device gives");

/* States kept for pairing: prompts are evaluated in pieces of at most
 * this many positions, so the memory does not grow with them. */
#define PIECE 256

/* While the guard has drafting off, the MTP layer's cache is not kept
 * (its pass reads experts of its own, from disk when they are streamed)
 * and no state is copied out: the states of the last positions are made
 * again to refill it when drafting is tried again. */
#define LAPSE_KEEP 16

/* The guard's measurements: steps per probe, tokens between probes. */
#define PROBE_STEPS 3
#define RECHECK_TOKENS 128
#define OFF_FIRST 64
#define OFF_MOST 1024
/* A draft position whose acceptance stays below this is not drafted. */
#define KEEP_RATE 0.25
#define KEEP_TRIES 32

typedef enum phase {
    G_PLAIN_PROBE, /* timing plain steps */
    G_DRAFT_PROBE, /* timing steps with drafts */
    G_ON,          /* drafting, timed as it goes */
    G_OFF          /* plain steps until the next probe */
} phase;

struct coli__mtp {
    int k_eff, guard; /* drafts per step now (COLI_OPT_MTP, fewer once a position is rarely accepted) */
    int H, V;
    /* the decoder's states of positions [mtp_pos, pend_end): row r is
     * position mtp_pos + r */
    float *pend;
    int cap;
    size_t mtp_pos, pend_end;
    int32_t tent; /* >= 0: slot mtp_pos already holds the pair with this token */
    int draft_row; /* the draft pair's row of mhid after a flush */
    int32_t *tok; /* [cap + 1] the MTP pass's tokens */
    float *mhid;  /* [cap + 2, H] its states after the head norm: a flush's rows, then two for chained drafts */
    float *dlogits;
    /* the verification */
    float *vlogits, *vhidden; /* [k + 1, V], [k + 1, H] */
    int32_t vtok[COLI__MTP_MAX + 1];
    int n_ver;
    uint64_t experts0;
    /* acceptance per draft position, for turning down */
    uint64_t tried[COLI__MTP_MAX], took[COLI__MTP_MAX];
    /* the guard */
    phase ph;
    int left;            /* steps left in a probe */
    uint64_t until;      /* tokens left before the next probe */
    uint64_t off_gap;
    double t_plain, t_draft; /* seconds per token measured, 0: not yet */
    double acc_s, acc_tok;   /* of the current measurement */
    int lapsed;              /* drafting was off: its cache is refilled from the last states only */
};

void coli__mtp_free(coli__mtp *s)
{
    if (!s)
        return;
    free(s->pend);
    free(s->tok);
    free(s->mhid);
    free(s->dlogits);
    free(s->vlogits);
    free(s->vhidden);
    free(s);
}

coli_status coli__mtp_create(coli__ctx_core *c, int k, int guard)
{
    const coli__config *cf = &c->m->cfg;
    if (cf->n_layers <= cf->n_trunk)
        return coli__fail(&c->err, COLI_EINVAL,
                          "COLI_OPT_MTP is %d for the context, but the model was opened without its MTP layer "
                          "(set COLI_OPT_MTP when opening it)",
                          k);
    coli__mtp *s = calloc(1, sizeof *s);
    if (!s)
        return coli__fail(&c->err, COLI_ENOMEM, "out of memory for multi-token prediction");
    s->k_eff = k;
    s->guard = guard;
    s->H = cf->hidden;
    s->V = cf->vocab;
    s->cap = PIECE + k + 2;
    s->tent = -1;
    const size_t H = (size_t)s->H, V = (size_t)s->V, cap = (size_t)s->cap;
    s->pend = malloc(cap * H * sizeof(float));
    s->tok = malloc((cap + 1) * sizeof *s->tok);
    s->mhid = malloc((cap + 2) * H * sizeof(float));
    s->dlogits = malloc(V * sizeof(float));
    s->vlogits = malloc(((size_t)k + 1) * V * sizeof(float));
    s->vhidden = malloc(((size_t)k + 1) * H * sizeof(float));
    if (!s->pend || !s->tok || !s->mhid || !s->dlogits || !s->vlogits || !s->vhidden) {
        coli__mtp_free(s);
        return coli__fail(&c->err, COLI_ENOMEM, "out of memory for multi-token prediction");
    }
    s->ph = guard ? G_PLAIN_PROBE : G_ON;
    s->left = PROBE_STEPS;
    s->off_gap = OFF_FIRST;
    c->mtp = s;
    return COLI_OK;
}

/* ---- the MTP layer's cache ----------------------------------------------------- */

/* The MTP pass over the pairs not in its cache yet, and with draft >= 0
 * the pair of the last state with draft, whose logits land in s->dlogits
 * (its state after the head norm in s->mhid's row n - 1). The last state
 * stays pending: the token after it is not known for sure. */
static coli_status flush(coli__ctx_core *c, int32_t draft)
{
    coli__mtp *s = c->mtp;
    size_t start = s->mtp_pos;
    if (s->tent >= 0 && s->pend_end > start + 1) {
        /* the slot was written by a draft with the token that came */
        if (c->hist[start + 1] == s->tent)
            start++;
        s->tent = -1;
    }
    if (s->pend_end == 0)
        return COLI_OK; /* nothing evaluated yet */
    size_t last = s->pend_end - 1, np = last > start ? last - start : 0;
    int n = (int)np + (draft >= 0);
    s->draft_row = n - 1;
    if (n > 0) {
        for (size_t i = 0; i < np; i++)
            s->tok[i] = c->hist[start + 1 + i];
        if (draft >= 0)
            s->tok[np] = draft;
        const coli__fwd f = {
            .tokens = s->tok,
            .n = n,
            .pos0 = (int)start,
            .h_in = s->pend + (start - s->mtp_pos) * (size_t)s->H,
            .logits = s->dlogits,
            .hidden = draft >= 0 && s->k_eff > 1 ? s->mhid : NULL,
        };
        uint64_t r = 0;
        COLI_TRY(coli__forward_run(&c->m->dec, &c->kv, &c->scratch, c->pool, &f, &r, &c->gpu_counts, &c->err));
        c->stats.decode_weight_bytes += r;
    }
    /* the last state becomes row 0 */
    if (last > s->mtp_pos)
        memmove(s->pend, s->pend + (last - s->mtp_pos) * (size_t)s->H, (size_t)s->H * sizeof(float));
    s->mtp_pos = last;
    s->tent = draft;
    return COLI_OK;
}

/* Back from the guard's pause: the MTP layer's cache is refilled from the
 * states of the last LAPSE_KEEP positions only (catch_up makes those it
 * does not have); the slots before keep what they held (drafts read them;
 * tokens never depend on them). */
static void lapse(coli__ctx_core *c)
{
    coli__mtp *s = c->mtp;
    size_t from = c->pos > LAPSE_KEEP ? c->pos - LAPSE_KEEP : 0;
    if (s->mtp_pos >= from)
        return;
    if (s->pend_end > from)
        memmove(s->pend, s->pend + (from - s->mtp_pos) * (size_t)s->H,
                (s->pend_end - from) * (size_t)s->H * sizeof(float));
    else
        s->pend_end = from;
    s->mtp_pos = from;
    s->tent = -1;
}

/* Evaluates again the positions whose states were lost (a cut), so that
 * pend reaches c->pos. The decoder's cache gets the same bits again. */
static coli_status catch_up(coli__ctx_core *c)
{
    coli__mtp *s = c->mtp;
    if (s->lapsed) {
        lapse(c);
        s->lapsed = 0;
    }
    while (s->pend_end < c->pos) {
        size_t room = (size_t)s->cap - (s->pend_end - s->mtp_pos);
        if (room == 0) {
            COLI_TRY(flush(c, -1));
            continue;
        }
        size_t n = c->pos - s->pend_end < room ? c->pos - s->pend_end : room;
        const coli__fwd f = {
            .tokens = c->hist + s->pend_end,
            .n = (int)n,
            .pos0 = (int)s->pend_end,
            .logits = s->vlogits,
            .hidden = s->pend + (s->pend_end - s->mtp_pos) * (size_t)s->H,
        };
        COLI_TRY(coli__ctx_forward(c, &f, NULL, NULL));
        s->pend_end += n;
    }
    return COLI_OK;
}

coli_status coli__mtp_eval(coli__ctx_core *c, const int32_t *tokens, size_t n, uint64_t *read)
{
    coli__mtp *s = c->mtp;
    uint64_t total = 0;
    if (s->ph == G_OFF) {
        /* the guard's pause: no state is kept (lapse refills the cache) */
        const coli__fwd f = {.tokens = tokens, .n = (int)n, .pos0 = (int)c->pos, .logits = c->logits};
        return coli__ctx_forward(c, &f, read, NULL);
    }
    COLI_TRY(catch_up(c));
    for (size_t done = 0; done < n;) {
        size_t room = (size_t)s->cap - (s->pend_end - s->mtp_pos);
        if (room == 0) {
            COLI_TRY(flush(c, -1));
            continue;
        }
        size_t m = n - done < room ? n - done : room;
        const coli__fwd f = {
            .tokens = tokens + done,
            .n = (int)m,
            .pos0 = (int)(c->pos + done),
            .logits = c->logits,
            .hidden = s->pend + (s->pend_end - s->mtp_pos) * (size_t)s->H,
        };
        uint64_t r = 0;
        COLI_TRY(coli__ctx_forward(c, &f, &r, NULL));
        s->pend_end += m;
        total += r;
        done += m;
    }
    if (read)
        *read = total;
    return COLI_OK;
}

void coli__mtp_truncate(coli__ctx_core *c, size_t n)
{
    coli__mtp *s = c->mtp;
    if (!s)
        return;
    if (n == 0 || s->mtp_pos > n - 1) {
        /* the slots past position n - 1 go; its state must be made again */
        s->mtp_pos = n ? n - 1 : 0;
        s->pend_end = s->mtp_pos;
        s->tent = -1;
    } else if (s->pend_end > n) {
        s->pend_end = n;
    }
}

/* ---- drafting and verification ------------------------------------------------- */

coli_status coli__mtp_propose(coli__ctx_core *c, int32_t t, int k, uint64_t *read)
{
    coli__mtp *s = c->mtp;
    const size_t H = (size_t)s->H, V = (size_t)s->V;
    COLI_TRY(catch_up(c));
    COLI_TRY(flush(c, t));
    /* drafts are the MTP layer's most likely tokens (docs/formats.md) */
    s->vtok[0] = t;
    s->vtok[1] = coli__argmax(s->dlogits, V);
    const float *h = s->mhid + (size_t)s->draft_row * H;
    for (int j = 2; j <= k; j++) {
        /* chained: the MTP layer's own state stands for the decoder's, at
         * slots the verified states overwrite later */
        float *out = s->mhid + ((size_t)s->cap + (size_t)(j & 1)) * H; /* never the row read */
        const coli__fwd f = {
            .tokens = &s->vtok[j - 1],
            .n = 1,
            .pos0 = (int)c->pos + j - 2,
            .h_in = h,
            .logits = s->dlogits,
            .hidden = out,
        };
        uint64_t r = 0;
        COLI_TRY(coli__forward_run(&c->m->dec, &c->kv, &c->scratch, c->pool, &f, &r, &c->gpu_counts, &c->err));
        c->stats.decode_weight_bytes += r;
        s->vtok[j] = coli__argmax(s->dlogits, V);
        h = out;
    }
    s->n_ver = k + 1;
    s->experts0 = c->gpu_counts.experts;
    const coli__fwd f = {
        .tokens = s->vtok,
        .n = k + 1,
        .pos0 = (int)c->pos,
        .logits = s->vlogits,
        .all_logits = 1,
        .hidden = s->vhidden,
    };
    return coli__ctx_forward(c, &f, read, NULL);
}

const float *coli__mtp_logits(const coli__ctx_core *c, int j)
{
    return c->mtp->vlogits + (size_t)j * (size_t)c->mtp->V;
}

int32_t coli__mtp_draft(const coli__ctx_core *c, int j)
{
    return j >= 1 && j < c->mtp->n_ver ? c->mtp->vtok[j] : -1;
}

/* The guard's measurement of the current phase is done: what next. */
static void decide(coli__mtp *s)
{
    s->acc_s = s->acc_tok = 0;
    if (s->t_plain <= 0) {
        s->ph = G_PLAIN_PROBE;
        s->left = PROBE_STEPS;
    } else if (s->t_draft <= 0) {
        s->ph = G_DRAFT_PROBE;
        s->left = PROBE_STEPS;
    } else if (s->t_draft < s->t_plain) {
        s->ph = G_ON;
        s->until = RECHECK_TOKENS;
        s->off_gap = OFF_FIRST;
    } else {
        s->ph = G_OFF;
        s->lapsed = 1;
        s->until = s->off_gap;
        s->off_gap = s->off_gap * 2 > OFF_MOST ? OFF_MOST : s->off_gap * 2;
    }
}

/* Adds a step to the guard's measurement. */
static void note(coli__ctx_core *c, int drafted, double seconds, int tokens)
{
    coli__mtp *s = c->mtp;
    /* a step of the other kind (no room left to draft) is not measured */
    if (!s->guard || drafted != (s->ph == G_ON || s->ph == G_DRAFT_PROBE))
        return;
    s->acc_s += seconds;
    s->acc_tok += tokens;
    uint64_t t = (uint64_t)tokens;
    switch (s->ph) {
    case G_PLAIN_PROBE:
    case G_DRAFT_PROBE:
        if (--s->left > 0)
            return;
        if (s->ph == G_PLAIN_PROBE)
            s->t_plain = s->acc_s / s->acc_tok;
        else
            s->t_draft = s->acc_s / s->acc_tok;
        break;
    case G_ON:
    case G_OFF:
        if (s->until > t) {
            s->until -= t;
            return;
        }
        /* this window measured one kind; time the other again */
        if (s->ph == G_ON) {
            s->t_draft = s->acc_s / s->acc_tok;
            s->t_plain = 0;
        } else {
            s->t_plain = s->acc_s / s->acc_tok;
            s->t_draft = 0;
        }
        break;
    }
    phase was = s->ph;
    decide(s);
    if (s->ph == G_OFF && was != G_OFF)
        c->stats.mtp_guard_offs++;
}

int coli__mtp_drafts_now(const coli__ctx_core *c)
{
    const coli__mtp *s = c->mtp;
    if (!s)
        return 0;
    return s->ph == G_OFF || s->ph == G_PLAIN_PROBE ? 0 : s->k_eff;
}

int coli__mtp_plan(coli__ctx_core *c, int most)
{
    int k = coli__mtp_drafts_now(c);
    return k < most ? k : most;
}

void coli__mtp_note_plain(coli__ctx_core *c, double seconds)
{
    c->stats.mtp_plain_tokens++;
    note(c, 0, seconds, 1);
}

void coli__mtp_commit(coli__ctx_core *c, int j, double seconds)
{
    coli__mtp *s = c->mtp;
    const size_t H = (size_t)s->H, V = (size_t)s->V;
    const int k = s->n_ver - 1;
    /* the states of the kept positions wait to be paired with the tokens
     * after them; the slots the chained drafts wrote are written again */
    memcpy(s->pend + (s->pend_end - s->mtp_pos) * H, s->vhidden, ((size_t)j + 1) * H * sizeof(float));
    s->pend_end += (size_t)j + 1;
    memcpy(c->logits, s->vlogits + (size_t)j * V, V * sizeof(float));
    c->pos += (size_t)j + 1;
    c->has_logits = 1;
    /* statistics */
    const coli__config *cf = &c->m->cfg;
    uint64_t one = (uint64_t)cf->top_k * (uint64_t)(cf->n_moe_layers - (cf->n_layers - cf->n_trunk));
    uint64_t read = c->gpu_counts.experts - s->experts0;
    c->stats.mtp_steps++;
    c->stats.mtp_drafted += (uint64_t)k;
    c->stats.mtp_accepted += (uint64_t)j;
    c->stats.mtp_tokens += (uint64_t)j + 1;
    c->stats.mtp_extra_experts += read > one ? read - one : 0;
    /* a draft position accepted too rarely is not drafted any more */
    for (int i = 0; i < k && i <= j; i++) {
        s->tried[i]++;
        s->took[i] += i < j;
    }
    if (s->guard)
        while (s->k_eff > 1 && s->tried[s->k_eff - 1] >= KEEP_TRIES &&
               (double)s->took[s->k_eff - 1] < KEEP_RATE * (double)s->tried[s->k_eff - 1])
            s->k_eff--;
    note(c, 1, seconds, j + 1);
}

coli_status coli__mtp_peek(coli__ctx_core *c, int32_t next, float *logits)
{
    COLI_TRY(catch_up(c));
    COLI_TRY(flush(c, next));
    memcpy(logits, c->mtp->dlogits, (size_t)c->mtp->V * sizeof(float));
    return COLI_OK;
}
