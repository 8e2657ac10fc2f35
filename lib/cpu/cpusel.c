/* cpusel.c - picks a model's CPU kernel set (see cpusel.h). */
#include <string.h>

#include "colibri/colibri.h"
#include "cpu/cpu.h"
#include "cpu/cpusel.h"

static const char *const NAMES[] = {"auto", "scalar", "avx2", "avx512", "amx"};

static int has(int which, unsigned features)
{
    unsigned need = coli__cpuk_needs(which);
    return (features & need) == need && coli__cpuk_get(which) != NULL;
}

coli_status coli__cpusel_pick(int64_t opt, const char *env, unsigned features, const coli__cpuk **out,
                              coli__err *err)
{
    int which = (int)opt;
    if (opt < COLI__CPUK_AUTO || opt > COLI__CPUK_AMX)
        return coli__fail(err, COLI_EINVAL, "COLI_OPT_CPU_KERNELS: %lld is not 0 to 4", (long long)opt);
    if (which == COLI__CPUK_AUTO && env) {
        for (which = COLI__CPUK_SCALAR; which <= COLI__CPUK_AMX; which++)
            if (strcmp(env, NAMES[which]) == 0)
                break;
        if (which > COLI__CPUK_AMX)
            return coli__fail(err, COLI_EINVAL,
                              "environment variable COLI_CPU: '%s' is not scalar, avx2, avx512 or amx", env);
    }
    if (which == COLI__CPUK_AUTO)
        which = has(COLI__CPUK_AMX, features)      ? COLI__CPUK_AMX
                : has(COLI__CPUK_AVX512, features) ? COLI__CPUK_AVX512
                : has(COLI__CPUK_AVX2, features)   ? COLI__CPUK_AVX2
                                                   : COLI__CPUK_SCALAR;
    if (!has(which, features)) {
        int n2 = has(COLI__CPUK_AVX2, features), n5 = has(COLI__CPUK_AVX512, features);
        int na = has(COLI__CPUK_AMX, features);
        return coli__fail(err, COLI_EUNSUPPORTED,
                          "COLI_OPT_CPU_KERNELS %s%s: this CPU (or build) has only scalar%s%s%s", NAMES[which],
                          opt ? "" : " (from COLI_CPU)", n2 ? ", avx2" : "", n5 ? ", avx512" : "", na ? ", amx" : "");
    }
    *out = coli__cpuk_get(which);
    return COLI_OK;
}

COLI_API int coli_cpu_kernels_usable(int64_t set)
{
    if (set < COLI__CPUK_SCALAR || set > COLI__CPUK_AMX)
        return 0;
    return has((int)set, coli__cpu_features());
}
