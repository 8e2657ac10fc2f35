/* pass.c - the products of a pass, counting the weight bytes they read. */
#include "decoder/pass.h"

coli_status coli__pass_mm(coli__pass *b, const coli__mat *w, const float *x, int n, float *y)
{
    const coli__decoder_place *p = &b->d->place;
    b->read += coli__mat_bytes(w);
    if (p->mm && p->mm(p->user, w, x, n, y) == COLI_OK)
        return COLI_OK; /* a device holds w */
    return coli__matmul(b->d->cpuk, b->pool, w, x, n, y);
}

int coli__pass_room(int last, int n_ctx)
{
    int r = (last + 1023) / 1024 * 1024;
    return r < n_ctx ? r : n_ctx;
}

coli_status coli__pass_mm_multi(coli__pass *b, const coli__mm *t, int n)
{
    for (int i = 0; i < n; i++)
        b->read += coli__mm_bytes(&t[i]);
    return coli__matmul_multi(b->d->cpuk, b->pool, t, n);
}
