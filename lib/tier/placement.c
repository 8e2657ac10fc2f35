/* placement.c - the expert placement policy (see placement.h).
 *
 * Why round-robin over layers: every token runs every layer, one after the
 * other, so the time of a token is the sum over layers of the slowest of
 * (GPU part, CPU part). Filling layer 0 completely before layer 1 would
 * leave the last layers all on the CPU; taking expert e of every layer
 * before expert e + 1 makes a budget for half of the experts cover each
 * layer by about half, so every layer waits about equally on the CPU.
 * Among devices with the same load, the one holding fewer experts of the
 * expert's layer wins: with an even number of layers, plain alternation
 * would put each layer whole on one device, and a layer's experts on
 * several devices can be computed at once. */
#include <stdlib.h>

#include "tier/placement.h"

typedef struct item {
    int l, e;
    uint64_t hot;
} item;

static int by_order(const void *pa, const void *pb)
{
    const item *a = pa, *b = pb;
    if (a->hot != b->hot)
        return a->hot > b->hot ? -1 : 1;
    if (a->e != b->e)
        return a->e < b->e ? -1 : 1;
    return (a->l > b->l) - (a->l < b->l);
}

int coli__place(const uint64_t *sizes, int n_layers, int n_experts, const uint64_t *budgets, int n_devices,
                const uint64_t *hot, int *out, uint64_t *used)
{
    size_t n = (size_t)n_layers * (size_t)(n_experts > 0 ? n_experts : 0);
    for (size_t i = 0; i < n; i++)
        out[i] = -1;
    for (int d = 0; used && d < n_devices; d++)
        used[d] = 0;
    if (n == 0 || n_devices <= 0)
        return 0;
    item *it = malloc(n * sizeof *it);
    uint64_t *load = calloc((size_t)n_devices, sizeof *load);
    int *in_layer = calloc((size_t)n_devices * (size_t)n_layers, sizeof *in_layer); /* [d][l] */
    if (!it || !load || !in_layer) {
        free(it);
        free(load);
        free(in_layer);
        return -1;
    }
    size_t k = 0;
    for (int l = 0; l < n_layers; l++)
        for (int e = 0; e < n_experts; e++) {
            size_t i = (size_t)l * (size_t)n_experts + (size_t)e;
            if (sizes[i] > 0)
                it[k++] = (item){l, e, hot ? hot[i] : 0};
        }
    /* (hot, e, l) is a total order on distinct items: qsort's instability
     * cannot change the result */
    qsort(it, k, sizeof *it, by_order);
    int placed = 0;
    for (size_t j = 0; j < k; j++) {
        size_t i = (size_t)it[j].l * (size_t)n_experts + (size_t)it[j].e;
        int best = -1, l = it[j].l;
        for (int d = 0; d < n_devices; d++) {
            if (budgets[d] < load[d] || budgets[d] - load[d] < sizes[i])
                continue;
            if (best < 0 || load[d] < load[best] ||
                (load[d] == load[best] && in_layer[(size_t)d * n_layers + l] < in_layer[(size_t)best * n_layers + l]))
                best = d;
        }
        if (best < 0)
            continue;
        load[best] += sizes[i];
        in_layer[(size_t)best * n_layers + l]++;
        out[i] = best;
        placed++;
    }
    for (int d = 0; used && d < n_devices; d++)
        used[d] = load[d];
    free(it);
    free(load);
    free(in_layer);
    return placed;
}
