/* state.cu - what every file of the GPU tier reads of its state: the
 * message of a failed runtime call, fault injection, the arrays of a
 * resident tensor and its view as a product. The bottom of lib/gpu/: it
 * calls no other file here, and the kernel families, the pipeline and
 * backend.cu call it. */
#include "gpu/compat.h"

#include "gpu/kern.h"

coli_status coli__cuda_fail(coli__err *err, cudaError_t e, const char *what)
{
    return coli__fail(err, e == cudaErrorMemoryAllocation ? COLI_ENOMEM : COLI_EGPU, "GPU tier: %s: %s (%s)", what,
                      cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Whether this thread's launches may overlap the kernel before them
 * (compat.h, coli_launch): the pipe turns it on around its steps, on
 * devices that have it. */
static thread_local int g_pdl;

void coli__gpu_pdl_set(int on)
{
    g_pdl = on;
}

int coli__gpu_pdl(void)
{
    return g_pdl;
}

/* Fault injection: every fallible call counts; past the limit it fails. */
coli_status coli__gpu_injected(coli__gpu *g, coli__err *err)
{
    if (g->fail_after >= 0 && g->n_calls >= g->fail_after)
        return coli__fail(err, COLI_EGPU, "GPU tier: injected fault (COLI_GPU_FAIL_AFTER=%lld, call %lld)",
                          (long long)g->fail_after, (long long)g->n_calls + 1);
    g->n_calls++;
    return COLI_OK;
}

/* Bytes of each array of m: quants (or values), scales, minimums. */
void coli__gpu_array_bytes(const coli__gpu_mat *m, size_t *a, size_t *b, size_t *c)
{
    size_t rc = (size_t)m->rows * (size_t)m->cols;
    *a = *b = *c = 0;
    switch (m->dt) {
    case COLI_DT_F32:
        *a = rc * 4;
        break;
    case COLI_DT_BF16:
        *a = rc * 2;
        break;
    case COLI_DT_Q8:
        *a = rc;
        *b = rc / QK * 2;
        break;
    case COLI_DT_Q4:
        *a = rc / 2;
        *b = rc / (size_t)m->group * 2;
        break;
    case COLI_DT_Q2:
        *a = rc / 4;
        *b = rc / QK * 2;
        *c = rc / QK * 2;
        break;
    default:
        break;
    }
}

void coli__gpu_view(const tensor *t, prod *pr)
{
    size_t a, b, c;
    coli__gpu_array_bytes(&t->shape, &a, &b, &c);
    char *base = (char *)t->mem;
    memset(pr, 0, sizeof *pr);
    pr->dt = t->shape.dt;
    pr->group = t->shape.dt == COLI_DT_Q4 ? t->shape.group : QK;
    pr->rows = t->shape.rows;
    pr->cols = t->shape.cols;
    if (pr->dt == COLI_DT_F32 || pr->dt == COLI_DT_BF16) {
        pr->w = base;
    } else {
        pr->qs = (const uint8_t *)base;
        pr->d = (const uint16_t *)(base + coli__align256(a));
        pr->m = c ? (const uint16_t *)(base + coli__align256(a) + coli__align256(b)) : NULL;
    }
}

tensor *coli__gpu_lookup(coli__gpu *g, int handle)
{
    if (!g || handle < 0 || handle >= g->n_t || !g->t[handle].used)
        return NULL;
    return &g->t[handle];
}
