/* context.h - a context (internal): its core (core.h), which its pass and
 * its multi-token prediction take, and its options; lib/context/context.c
 * and lib/context/batch.c use the whole. */
#ifndef COLI_CONTEXT_H
#define COLI_CONTEXT_H

#include "context/core.h"

struct coli_context {
    coli__ctx_core core;
    coli__opts opts;
};

#endif
