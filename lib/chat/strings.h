/* strings.h - Python's str methods as templates call them, and the
 * helpers the filters share with them (strings.c). */
#ifndef COLI_CHAT_STRINGS_H
#define COLI_CHAT_STRINGS_H

#include "chat/builtins.h"

/* The ASCII classes of str's methods (bytes from 0x80 count as letters). */
static inline int coli__tch_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static inline int coli__tch_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

static inline int coli__tch_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}

static inline int coli__tch_alpha(unsigned char c)
{
    return coli__tch_upper(c) || coli__tch_lower(c) || c >= 0x80;
}

static inline int coli__tch_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline int coli__tch_alnum(unsigned char c)
{
    return coli__tch_alpha(c) || coli__tch_digit(c);
}

/* s's method m called with a. */
coli_status coli__tstr_method(coli__trt *rt, const coli__tv *s, const char *m, const coli__targs *a, coli__tv *out);
/* mode: 0 lower, 1 upper, 2 capitalize, 3 swapcase, 4 title. */
coli_status coli__tstr_case(coli__trt *rt, const coli__tv *s, int mode, coli__tv *out);
/* str.strip (lstrip: right 0, rstrip: left 0); chars NULL or None: blanks. */
coli_status coli__tstr_strip(coli__trt *rt, const coli__tv *s, const coli__tv *chars, int left, int right,
                             coli__tv *out);
coli_status coli__tstr_replace(coli__trt *rt, const coli__tv *s, const coli__tv *old, const coli__tv *new_,
                               const coli__tv *count, coli__tv *out);
/* sep.join(items), each item's attr (may be NULL); as_str: items made strings. */
coli_status coli__tstr_join(coli__trt *rt, const coli__tv *sep, const coli__tv *items, const coli__tv *attr, int as_str,
                            coli__tv *out);
coli_status coli__tstr_splitlines(coli__trt *rt, const coli__tv *s, coli__tv *out);
/* str.isupper (upper 1) or str.islower (0). */
int coli__tstr_cased(const coli__tv *s, int upper);

#endif
