/* step.h - a context's pass of the decoder, wherever its layers run
 * (internal). Used by lib/context/context.c and lib/context/speculate.c. */
#ifndef COLI_STEP_H
#define COLI_STEP_H

#include "context/core.h"

/* A pass of the decoder (f->h_in NULL) on the device or the CPU; the
 * tokens join the history at f->pos0. A device that fails hands the
 * context to the CPU for good. counts: the tiers' work, or NULL for the
 * context's own. */
coli_status coli__ctx_forward(coli__ctx_core *c, const coli__fwd *f, uint64_t *read, coli__experts_counts *counts);

#endif
