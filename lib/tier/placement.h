/* placement.h - which device holds each routed expert (internal, no GPU
 * dependency: a plain function of sizes, budgets and optional hotness). */
#ifndef COLI_PLACEMENT_H
#define COLI_PLACEMENT_H

#include <stdint.h>

/*
 * Assigns experts whole to devices. sizes[l * n_experts + e] is the bytes
 * expert e of layer l takes on a device (0: no such expert, e.g. a dense
 * layer: it stays at -1). budgets[d] is what device d may hold. hot (may be
 * NULL) counts how often each expert was routed.
 *
 * Order: with hot, most routed first; otherwise, and among equal counts,
 * round-robin over layers (expert 0 of every layer, then expert 1 of every
 * layer, ...). Each expert goes to the least-loaded device (fewest bytes
 * placed; on ties, fewest experts of the same layer, then lowest index)
 * that still has room for it; one that fits
 * nowhere stays on the CPU and the next ones are still tried.
 *
 * out[l * n_experts + e] receives the device or -1; used[d] (may be NULL)
 * the bytes placed on d. Returns the number of experts placed, or -1 when
 * memory for the order runs out (out is then all -1).
 */
int coli__place(const uint64_t *sizes, int n_layers, int n_experts, const uint64_t *budgets, int n_devices,
                const uint64_t *hot, int *out, uint64_t *used);

#endif
