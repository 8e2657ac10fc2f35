/* fsum.h - the trees that end the float product and the sums of
 * docs/formats.md ("f32, bf16, f16", "The written order"), one inline
 * definition for every kernel file (internal). */
#ifndef COLI_FSUM_H
#define COLI_FSUM_H

/* u_l = (P_l + P_l+16) + (P_l+8 + P_l+24), then ((u0 + u4) + (u2 + u6)) +
 * ((u1 + u5) + (u3 + u7)): a butterfly with offsets 16, 8, 4, 2, 1. */
static inline float coli__fold32(const float *P)
{
    float u[8];
    for (int l = 0; l < 8; l++)
        u[l] = (P[l] + P[l + 16]) + (P[l + 8] + P[l + 24]);
    return ((u[0] + u[4]) + (u[2] + u[6])) + ((u[1] + u[5]) + (u[3] + u[7]));
}

/* ((O0 + O4) + (O2 + O6)) + ((O1 + O5) + (O3 + O7)): the tree of eight
 * partial sums. */
static inline float coli__fold8(const float *O)
{
    return ((O[0] + O[4]) + (O[2] + O[6])) + ((O[1] + O[5]) + (O[3] + O[7]));
}

#endif
