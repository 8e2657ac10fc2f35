/* tier.h - the GPU tier's host side as its files share it (internal):
 * tier_env.c (its implementation and its options resolved with the
 * environment), tier_open.c (placement and upload at open, close),
 * experts.c (the routed experts run, with the failure policy), tier_api.c
 * (coli_gpu_* and the statistics). lib/tier/experts.h is what the rest
 * of the library calls. */
#ifndef COLI_TIER_H
#define COLI_TIER_H

#include <pthread.h>
#include <stdatomic.h>

#include "tier/experts.h"

#define MAX_FAILS 3
#define MAXD COLI_GPU_MAX_DEVICES

struct coli__tier {
    const coli__gpu_ops *ops;
    coli__gpu *g;
    int n_dev;
    coli__gpu_devinfo info[MAXD];
    int L, E;
    signed char *dev;     /* [L * E] device of each expert, -1: CPU */
    int *h;               /* [L * E * 3] gate, up, down handles */
    unsigned char *host;  /* [L * E] 0: host copies released */
    coli__expert_source src; /* releases and rebuilds host copies */
    uint64_t res_experts[MAXD], res_bytes[MAXD];
    pthread_mutex_t mu;   /* the failure state and host rebuilds */
    pthread_mutex_t dev_mu[MAXD]; /* one call at a time on a device */
    int fails_in_row[MAXD];
    atomic_int disabled[MAXD];
    unsigned warned[MAXD]; /* bit -status: that kind of failure was logged */
    int released;          /* some host copies were released at open */
    int out_h, out_dev;    /* the output projection, when resident (else -1) */
    coli__gpu_expert *jobs; /* [n_dev * E] each device's job list, used under dev_mu */
};

/* The tier's settings: the API's options, else the environment's. */
typedef struct coli__tier_conf {
    int on;
    int devices[MAXD], n_devices; /* n_devices -1: every visible device */
    int64_t budget;               /* bytes per device; -1: free memory less a reserve */
    int release_host;
    int64_t fail_after;
} coli__tier_conf;

/* API options win; what they leave unset comes from the environment. Every
 * variable that is read is checked, whether the tier is on or not, so that
 * a typo is found where it is made. */
coli_status coli__tier_resolve(const coli__opts *o, coli__tier_conf *gc, coli__err *err);

#endif
