/* ucase.c - simple case mappings by ranges of Unicode. */
#include "chat/ucase.h"

/* Ranges where upper and lower alternate: first is upper when even_upper. */
typedef struct pairs {
    uint32_t lo, hi;
    int even_upper;
} pairs;

static const pairs alternating[] = {
    {0x0100, 0x012F, 1}, {0x0132, 0x0137, 1}, {0x0139, 0x0148, 0}, {0x014A, 0x0177, 1},
    {0x0179, 0x017E, 0}, {0x01CD, 0x01DC, 0}, {0x01DE, 0x01EF, 1}, {0x01F8, 0x021F, 1},
    {0x0222, 0x0233, 1}, {0x0246, 0x024F, 1}, {0x03D8, 0x03EF, 1}, {0x0460, 0x0481, 1},
    {0x048A, 0x04BF, 1}, {0x04C1, 0x04CE, 0}, {0x04D0, 0x052F, 1}, {0x1E00, 0x1E95, 1},
    {0x1EA0, 0x1EFF, 1},
};

/* Ranges of lower case letters whose upper case is delta below. */
typedef struct shift {
    uint32_t lo, hi, delta;
} shift;

static const shift shifted[] = {
    {'a', 'z', 32},          {0x00E0, 0x00F6, 32},     {0x00F8, 0x00FE, 32}, {0x03B1, 0x03C1, 32},
    {0x03C3, 0x03CB, 32},    {0x03AD, 0x03AF, 37},     {0x03CD, 0x03CE, 63}, {0x0430, 0x044F, 32},
    {0x0450, 0x045F, 80},    {0x0561, 0x0586, 48},     {0x2170, 0x217F, 16}, {0x24D0, 0x24E9, 26},
    {0xFF41, 0xFF5A, 32},
};

/* Single letters: lower, upper. */
static const uint32_t singles[][2] = {
    {0x00FF, 0x0178}, {0x0131, 'I'}, {0x017F, 'S'}, {0x00B5, 0x039C}, {0x03AC, 0x0386}, {0x03CC, 0x038C},
    {0x03C2, 0x03A3}, {0x04CF, 0x04C0},
};

static int in_pairs(uint32_t cp, int *is_upper)
{
    for (unsigned i = 0; i < sizeof alternating / sizeof alternating[0]; i++) {
        const pairs *p = &alternating[i];
        if (cp >= p->lo && cp <= p->hi) {
            int even = ((cp - p->lo) & 1) == 0;
            *is_upper = even == p->even_upper;
            return 1;
        }
    }
    return 0;
}

uint32_t coli__tcase_upper(uint32_t cp)
{
    for (unsigned i = 0; i < sizeof shifted / sizeof shifted[0]; i++)
        if (cp >= shifted[i].lo && cp <= shifted[i].hi)
            return cp - shifted[i].delta;
    for (unsigned i = 0; i < sizeof singles / sizeof singles[0]; i++)
        if (cp == singles[i][0])
            return singles[i][1];
    int up;
    if (in_pairs(cp, &up))
        return up ? cp : cp - 1;
    return cp;
}

uint32_t coli__tcase_lower(uint32_t cp)
{
    for (unsigned i = 0; i < sizeof shifted / sizeof shifted[0]; i++)
        if (cp >= shifted[i].lo - shifted[i].delta && cp <= shifted[i].hi - shifted[i].delta)
            return cp + shifted[i].delta;
    for (unsigned i = 0; i < sizeof singles / sizeof singles[0]; i++)
        if (cp == singles[i][1] && singles[i][1] != 'I' && singles[i][1] != 'S' && singles[i][0] != 0x00B5 &&
            singles[i][0] != 0x03C2)
            return singles[i][0];
    int up;
    if (in_pairs(cp, &up))
        return up ? cp + 1 : cp;
    return cp;
}

int coli__tcase_cased(uint32_t cp)
{
    return coli__tcase_upper(cp) != cp || coli__tcase_lower(cp) != cp || cp == 0x00DF;
}
