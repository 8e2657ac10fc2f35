/* cpusel.h - which CPU kernel set a model uses (internal). */
#ifndef COLI_CPUSEL_H
#define COLI_CPUSEL_H

#include <stdint.h>

#include "base/error.h"
#include "cpu/kernels.h"

/*
 * The set for COLI_OPT_CPU_KERNELS opt (COLI__CPUK_*): a set other than
 * AUTO wins; AUTO leaves it to env (COLI_CPU's value, NULL if unset:
 * "scalar", "avx2" or "avx512"), then the best set. features are the
 * COLI_CPU_* bits of the CPU (coli__cpu_features(), or fewer in tests).
 * COLI_EINVAL for a malformed env, COLI_EUNSUPPORTED for a set that the CPU
 * or the build lacks, each with a message naming the variable or option.
 */
coli_status coli__cpusel_pick(int64_t opt, const char *env, unsigned features, const coli__cpuk **out,
                              coli__err *err);

#endif
