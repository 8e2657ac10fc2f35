/* batch.c - several contexts of one model evaluated together. */
#include "model/context.h"

/* Checks every item before anything runs, so that a refusal changes no
 * context. */
static coli_status check_items(const coli_batch_item *items, size_t count)
{
    coli_context *first = items[0].ctx;
    for (size_t i = 0; i < count; i++) {
        coli_context *c = items[i].ctx;
        if (!c)
            return first ? coli__fail(&first->err, COLI_EINVAL, "coli_eval_batch: item %zu has no context", i)
                         : COLI_EINVAL;
        coli__err_clear(&c->err);
        if (c->m != first->m)
            return coli__fail(&c->err, COLI_EINVAL,
                              "coli_eval_batch: item %zu's context belongs to another model than item 0's", i);
        for (size_t j = 0; j < i; j++)
            if (items[j].ctx == c)
                return coli__fail(&c->err, COLI_EINVAL,
                                  "coli_eval_batch: items %zu and %zu name the same context", j, i);
        if (items[i].n == 0)
            continue;
        if (!items[i].tokens)
            return coli__fail(&c->err, COLI_EINVAL, "coli_eval_batch: item %zu: tokens is NULL", i);
        int vocab = c->m->cfg.vocab;
        for (size_t k = 0; k < items[i].n; k++)
            if (items[i].tokens[k] < 0 || items[i].tokens[k] >= vocab)
                return coli__fail(&c->err, COLI_EINVAL,
                                  "coli_eval_batch: item %zu: token id %ld at index %zu is outside the "
                                  "vocabulary [0, %d)",
                                  i, (long)items[i].tokens[k], k, vocab);
        if (items[i].n > (size_t)c->kv.n_ctx - c->pos)
            return coli__fail(&c->err, COLI_ENOSPC,
                              "coli_eval_batch: item %zu: the context is full: %zu tokens asked for at position "
                              "%zu, but it has %d positions",
                              i, items[i].n, c->pos, c->kv.n_ctx);
    }
    return COLI_OK;
}

COLI_API coli_status coli_eval_batch(const coli_batch_item *items, size_t count)
{
    if (!items || count == 0)
        return COLI_EINVAL;
    coli_status st = check_items(items, count);
    if (st != COLI_OK)
        return st;
    /* One context after another until the batched pass lands. */
    for (size_t i = 0; i < count; i++) {
        if (items[i].n == 0)
            continue;
        st = coli_eval(items[i].ctx, items[i].tokens, items[i].n);
        if (st != COLI_OK)
            return st;
    }
    return COLI_OK;
}
