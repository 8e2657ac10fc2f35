/* api.c - version and compiled-in features.
 *
 * The public face sits on top of lib/: every public function is marked
 * COLI_API where its subsystem implements it, and this file holds the
 * ones that belong to no subsystem. */
#include "colibri/colibri.h"

COLI_API unsigned coli_version_number(void)
{
    return COLI_VERSION_NUMBER;
}

COLI_API const char *coli_version_string(void)
{
    return COLI_VERSION_STRING;
}

COLI_API int coli_has_feature(coli_feature feature)
{
    switch (feature) {
    case COLI_FEATURE_THREADS:
        return 1;
    /* configure --with-cuda or --with-hip (config.h) */
#if defined(COLI_GPU_CUDA)
    case COLI_FEATURE_GPU:
    case COLI_FEATURE_CUDA:
        return 1;
    case COLI_FEATURE_HIP:
        return 0;
#elif defined(COLI_GPU_HIP)
    case COLI_FEATURE_GPU:
    case COLI_FEATURE_HIP:
        return 1;
    case COLI_FEATURE_CUDA:
        return 0;
#else
    case COLI_FEATURE_GPU:
    case COLI_FEATURE_CUDA:
    case COLI_FEATURE_HIP:
        return 0;
#endif
    }
    return 0;
}
