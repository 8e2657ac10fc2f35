/* hotset.h - model.coli.hot, the routing counts kept next to a converted
 * model (docs/container.md) (internal). */
#ifndef COLI_HOTSET_H
#define COLI_HOTSET_H

#include <stdint.h>

#include "base/log.h"

#define COLI_HOT_FILE "model.coli.hot"

/* Adds the counts of dir/model.coli.hot to counts[L * E]. 0 when read;
 * -1 when absent, or (with a warning) damaged or for another shape. */
int coli__hot_load(const char *dir, int L, int E, uint64_t *counts, const coli__logger *log);
/* Writes counts[L * E] through a temporary name. 0 on success; -1 (with
 * an info message) when the directory is not writable. */
int coli__hot_save(const char *dir, int L, int E, const uint64_t *counts, const coli__logger *log);

#endif
