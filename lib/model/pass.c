/* pass.c - the products of a pass, counting the weight bytes they read. */
#include "model/pass.h"

coli_status coli__pass_mm(coli__pass *b, const coli__mat *w, const float *x, int n, float *y)
{
    b->read += coli__mat_bytes(w);
    return coli__matmul(b->m->cpuk, b->pool, w, x, n, y);
}

coli_status coli__pass_mm_multi(coli__pass *b, const coli__mm *t, int n)
{
    for (int i = 0; i < n; i++)
        b->read += coli__mm_bytes(&t[i]);
    return coli__matmul_multi(b->m->cpuk, b->pool, t, n);
}
