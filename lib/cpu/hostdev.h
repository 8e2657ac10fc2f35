/* hostdev.h - marks inline functions that the CPU code and the GPU tier
 * share, so that both compile the very same arithmetic (internal). */
#ifndef COLI_HOSTDEV_H
#define COLI_HOSTDEV_H

#if defined(__CUDACC__) || defined(__HIPCC__)
#define COLI__HD __host__ __device__
#else
#define COLI__HD
#endif

#endif
