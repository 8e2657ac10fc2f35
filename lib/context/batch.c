/* batch.c - several contexts of one model evaluated together. */
#include <stdlib.h>
#include <time.h>

#include "context/context.h"
#include "model/finite.h"

/* Checks every item before anything runs, so that a refusal changes no
 * context. */
static coli_status check_items(const coli_batch_item *items, size_t count)
{
    coli_context *first = items[0].ctx;
    for (size_t i = 0; i < count; i++) {
        coli_context *c = items[i].ctx;
        if (!c)
            return first ? coli__fail(&first->core.err, COLI_EINVAL, "coli_eval_batch: item %zu has no context", i)
                         : COLI_EINVAL;
        coli__err_clear(&c->core.err);
        if (c->core.m != first->core.m)
            return coli__fail(&c->core.err, COLI_EINVAL,
                              "coli_eval_batch: item %zu's context belongs to another model than item 0's", i);
        for (size_t j = 0; j < i; j++)
            if (items[j].ctx == c)
                return coli__fail(&c->core.err, COLI_EINVAL,
                                  "coli_eval_batch: items %zu and %zu name the same context", j, i);
        if (items[i].n == 0)
            continue;
        if (!items[i].tokens)
            return coli__fail(&c->core.err, COLI_EINVAL, "coli_eval_batch: item %zu: tokens is NULL", i);
        int vocab = c->core.m->cfg.vocab;
        for (size_t k = 0; k < items[i].n; k++)
            if (items[i].tokens[k] < 0 || items[i].tokens[k] >= vocab)
                return coli__fail(&c->core.err, COLI_EINVAL,
                                  "coli_eval_batch: item %zu: token id %ld at index %zu is outside the "
                                  "vocabulary [0, %d)",
                                  i, (long)items[i].tokens[k], k, vocab);
        if (items[i].n > (size_t)c->core.kv.n_ctx - c->core.pos)
            return coli__fail(&c->core.err, COLI_ENOSPC,
                              "coli_eval_batch: item %zu: the context is full: %zu tokens asked for at position "
                              "%zu, but it has %d positions",
                              i, items[i].n, c->core.pos, c->core.kv.n_ctx);
    }
    return COLI_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Contexts whose layers run on a device, or that draft with the MTP
 * layer, have passes of their own: they go one after another. */
static int shares_pass(const coli_context *c)
{
    return !c->core.dev && !c->core.mtp;
}

/* After the shared pass: each context keeps its positions unless its
 * logits came out non-finite. */
static coli_status settle(const coli_batch_item *it, size_t count, const size_t *order, size_t n_shared,
                          size_t total, double dt, uint64_t read)
{
    coli_status result = COLI_OK;
    for (size_t j = 0; j < n_shared; j++) {
        const coli_batch_item *x = &it[order[j]];
        coli_context *c = x->ctx;
        int vocab = c->core.m->cfg.vocab;
        size_t bad = coli__first_nonfinite(COLI_DT_F32, c->core.logits, (size_t)vocab);
        if (bad < (size_t)vocab) {
            c->core.has_logits = 0;
            coli__fail(&c->core.err, COLI_ERANGE,
                       "coli_eval_batch: non-finite logit at position %zu (token id %zu: %g)", c->core.pos + x->n - 1,
                       bad, (double)c->core.logits[bad]);
            coli__log(&c->opts.log, COLI_LOG_ERROR, "%s", c->core.err.msg);
            result = COLI_ERANGE;
            continue;
        }
        c->core.pos += x->n;
        c->core.has_logits = 1;
        /* the pass's time and reads, shared out by tokens */
        double share = (double)x->n / (double)total;
        if (x->n > 1) {
            c->core.stats.prefill_tokens += x->n;
            c->core.stats.prefill_seconds += dt * share;
        } else {
            c->core.stats.decode_tokens += x->n;
            c->core.stats.decode_seconds += dt * share;
            c->core.stats.decode_weight_bytes += (uint64_t)((double)read * share);
        }
    }
    (void)count;
    return result;
}

COLI_API coli_status coli_eval_batch(const coli_batch_item *items, size_t count)
{
    if (!items || count == 0)
        return COLI_EINVAL;
    coli_status st = check_items(items, count);
    if (st != COLI_OK)
        return st;
    size_t *order = malloc(count * sizeof *order);
    coli__seq *q = malloc(count * sizeof *q);
    if (!order || !q) {
        free(order);
        free(q);
        return coli__fail(&items[0].ctx->core.err, COLI_ENOMEM, "coli_eval_batch: out of memory for %zu items", count);
    }
    /* single tokens (decoding) first, so that they share the first chunk */
    size_t n_shared = 0, total = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < count; i++)
            if (items[i].n > 0 && shares_pass(items[i].ctx) && (items[i].n == 1) == (pass == 0)) {
                coli_context *c = items[i].ctx;
                q[n_shared] = (coli__seq){.kv = &c->core.kv, .tokens = items[i].tokens, .n = (int)items[i].n,
                                          .pos0 = (int)c->core.pos, .logits = c->core.logits};
                order[n_shared++] = i;
                total += items[i].n;
            }
    coli_status result = COLI_OK;
    if (n_shared > 0) {
        coli_context *c0 = items[order[0]].ctx;
        uint64_t read = 0;
        double t0 = now_s();
        st = coli__forward_batch(&c0->core.m->dec, q, (int)n_shared, &c0->core.scratch, c0->core.pool, &read,
                                 &c0->core.gpu_counts, &c0->core.err);
        double dt = now_s() - t0;
        if (st != COLI_OK) {
            for (size_t j = 0; j < n_shared; j++)
                items[order[j]].ctx->core.has_logits = 0;
            coli__log(&c0->opts.log, COLI_LOG_ERROR, "%s", c0->core.err.msg);
            result = st;
        } else {
            result = settle(items, count, order, n_shared, total, dt, read);
        }
    }
    free(order);
    free(q);
    /* the rest one after another */
    for (size_t i = 0; i < count; i++) {
        if (items[i].n == 0 || shares_pass(items[i].ctx))
            continue;
        st = coli_eval(items[i].ctx, items[i].tokens, items[i].n);
        if (st != COLI_OK && result == COLI_OK)
            result = st;
    }
    return result;
}
