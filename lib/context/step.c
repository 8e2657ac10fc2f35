/* step.c - a context's pass of the decoder: on the device that holds
 * its layers, or on the CPU. */
#include <string.h>

#include "context/step.h"

/* The device's step, or the CPU's. A device that fails hands the context
 * to the CPU for good: the history is evaluated there first to rebuild the
 * CPU's cache, which gives the same bits as the device's. */
coli_status coli__ctx_forward(coli__ctx_core *c, const coli__fwd *f, uint64_t *read, coli__experts_counts *counts)
{
    if (!counts)
        counts = &c->gpu_counts;
    if (c->hist) /* a replay passes the history itself */
        memmove(c->hist + f->pos0, f->tokens, (size_t)f->n * sizeof *f->tokens);
    if (c->dev) {
        coli_status st = coli__device_forward(c->dev, c->pool, f, counts, &c->err);
        if (st == COLI_OK)
            return COLI_OK;
        coli__log(c->log, COLI_LOG_WARN, "GPU: a step on the device failed (%s); this context continues on "
                  "the CPU, re-reading its %d tokens", c->err.msg, f->pos0);
        coli__device_ctx_free(c->dev);
        c->dev = NULL;
        coli__err_clear(&c->err);
        if (f->pos0 > 0) {
            uint64_t r = 0;
            COLI_TRY(coli__forward(&c->m->dec, &c->kv, &c->scratch, c->pool, c->hist, f->pos0, 0, f->logits, &r, counts,
                                   &c->err));
        }
    }
    return coli__forward_run(&c->m->dec, &c->kv, &c->scratch, c->pool, f, read, counts, &c->err);
}
