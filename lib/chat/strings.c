/* strings.c - Python's str methods as templates call them: case,
 * strip, split, replace, find, join and the tests of str (isdigit...). */
#include <stdlib.h>
#include <string.h>

#include "chat/strings.h"
#include "chat/targs.h"
#include "chat/ucase.h"
#include "io/unicode.h"

coli_status coli__tstr_case(coli__trt *rt, const coli__tv *s, int mode, coli__tv *out)
{
    /* mode 0 lower, 1 upper, 2 capitalize, 3 Python title, 4 Jinja title */
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    int word_start = 1, prev_cased = 0;
    for (size_t i = 0; i < s->s.n;) {
        uint32_t cp;
        size_t k, w;
        if (!coli__utf8_decode(s->s.p + i, s->s.n - i, &cp, &k)) {
            COLI_TRY(coli__tsb_put(rt, &b, s->s.p + i, k));
            i += k;
            prev_cased = word_start = 0;
            continue;
        }
        int up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && !prev_cased) || (mode == 4 && word_start);
        char enc[4];
        if (up && cp == 0x00DF) {
            /* sharp s has no single upper case letter */
            COLI_TRY(coli__tsb_put(rt, &b, mode == 1 || mode == 4 ? "SS" : "Ss", 2));
        } else {
            size_t e = coli__utf8_encode(up ? coli__tcase_upper(cp) : coli__tcase_lower(cp), enc);
            COLI_TRY(coli__tsb_put(rt, &b, enc, e));
        }
        prev_cased = coli__tcase_cased(cp);
        word_start = coli__tspace_at(s->s.p, s->s.n, i, &w) || cp == '-' || cp == '(' || cp == '{' || cp == '[' ||
                     cp == '<';
        i += k;
    }
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

/* Whether the character s[i..i+k) is one of the characters of set. */
static int in_set(const char *s, size_t k, const coli__tv *set)
{
    size_t w;
    if (!set)
        return coli__tspace_at(s, k, 0, &w) && w == k;
    for (size_t j = 0; j < set->s.n;) {
        size_t m = coli__utf8_len((unsigned char)set->s.p[j]);
        if (m == k && j + m <= set->s.n && memcmp(set->s.p + j, s, k) == 0)
            return 1;
        j += m;
    }
    return 0;
}

static size_t char_before(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
        i--;
    return i;
}

coli_status coli__tstr_strip(coli__trt *rt, const coli__tv *s, const coli__tv *chars, int left, int right,
                         coli__tv *out)
{
    if (chars && chars->t == COLI__TV_NONE)
        chars = NULL;
    if (chars)
        COLI_TRY(coli__targ_str(rt, chars, "strip"));
    size_t a = 0, b = s->s.n;
    while (left && a < b) {
        size_t k = coli__utf8_len((unsigned char)s->s.p[a]);
        if (a + k > b || !in_set(s->s.p + a, k, chars))
            break;
        a += k;
    }
    while (right && b > a) {
        size_t i = char_before(s->s.p, b);
        if (i < a || !in_set(s->s.p + i, b - i, chars))
            break;
        b = i;
    }
    *out = coli__tv_strn(s->s.p + a, b - a);
    return COLI_OK;
}

static const char *find_sub(const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn == 0)
        return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(h + i, n, nn) == 0)
            return h + i;
    return NULL;
}

static const char *rfind_sub(const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn > hn)
        return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (memcmp(h + i, n, nn) == 0)
            return h + i;
    return NULL;
}

/* Bytes of the character that ends at s[end]. */
static size_t prev_len(const char *s, size_t end)
{
    return end - char_before(s, end);
}

static coli_status push_str(coli__trt *rt, coli__tv *list, const char *p, size_t n)
{
    return coli__tlist_push(rt, list->l, coli__tv_strn(p, n));
}

static coli_status split(coli__trt *rt, const coli__tv *s, const coli__targs *a, int from_right, coli__tv *out)
{
    const coli__tv *sep = coli__targ(a, 0, "sep");
    const coli__tv *maxv = coli__targ(a, 1, "maxsplit");
    int64_t max = -1;
    if (sep && sep->t == COLI__TV_NONE)
        sep = NULL;
    if (maxv)
        COLI_TRY(coli__targ_int(rt, maxv, "split", &max));
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    const char *p = s->s.p;
    size_t n = s->s.n;
    if (sep) {
        COLI_TRY(coli__targ_str(rt, sep, "split"));
        if (sep->s.n == 0)
            return coli__trt_fail(rt, COLI_EINVAL, "empty separator");
        if (!from_right) {
            size_t i = 0;
            for (int64_t k = 0; max < 0 || k < max; k++) {
                const char *f = find_sub(p + i, n - i, sep->s.p, sep->s.n);
                if (!f)
                    break;
                COLI_TRY(push_str(rt, out, p + i, (size_t)(f - (p + i))));
                i = (size_t)(f - p) + sep->s.n;
            }
            return push_str(rt, out, p + i, n - i);
        }
        /* From the right: collect backwards, then reverse. */
        size_t end = n;
        for (int64_t k = 0; max < 0 || k < max; k++) {
            const char *f = rfind_sub(p, end, sep->s.p, sep->s.n);
            if (!f)
                break;
            size_t at = (size_t)(f - p);
            COLI_TRY(push_str(rt, out, f + sep->s.n, end - at - sep->s.n));
            end = at;
        }
        COLI_TRY(push_str(rt, out, p, end));
    } else if (!from_right) {
        size_t i = 0, w;
        int64_t k = 0;
        for (;;) {
            while (i < n && coli__tspace_at(p, n, i, &w))
                i += w;
            if (i >= n)
                break;
            if (max >= 0 && k >= max) {
                size_t e = n;
                while (e > i && coli__tspace_before(p, i, e, &w))
                    e -= w;
                COLI_TRY(push_str(rt, out, p + i, e - i));
                break;
            }
            size_t j = i;
            while (j < n && !coli__tspace_at(p, n, j, &w))
                j += w;
            COLI_TRY(push_str(rt, out, p + i, j - i));
            k++;
            i = j;
        }
        return COLI_OK;
    } else {
        size_t e = n, w;
        int64_t k = 0;
        for (;;) {
            while (e > 0 && coli__tspace_before(p, 0, e, &w))
                e -= w;
            if (e == 0)
                break;
            if (max >= 0 && k >= max) {
                size_t i = 0;
                while (i < e && coli__tspace_at(p, e, i, &w))
                    i += w;
                COLI_TRY(push_str(rt, out, p + i, e - i));
                break;
            }
            size_t j = e;
            while (j > 0 && !coli__tspace_before(p, 0, j, &w))
                j -= prev_len(p, j);
            COLI_TRY(push_str(rt, out, p + j, e - j));
            k++;
            e = j;
        }
    }
    /* Reverse what was collected from the right. */
    for (size_t i = 0, j = out->l->n; i + 1 < j; i++, j--) {
        coli__tv t = out->l->v[i];
        out->l->v[i] = out->l->v[j - 1];
        out->l->v[j - 1] = t;
    }
    return COLI_OK;
}

coli_status coli__tstr_replace(coli__trt *rt, const coli__tv *s, const coli__tv *old, const coli__tv *new_,
                           const coli__tv *countv, coli__tv *out)
{
    COLI_TRY(coli__targ_str(rt, old, "replace"));
    coli__tv nw;
    COLI_TRY(coli__tv_to_str(rt, new_, &nw));
    int64_t count = -1;
    if (countv && countv->t != COLI__TV_NONE)
        COLI_TRY(coli__targ_int(rt, countv, "replace", &count));
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    size_t i = 0;
    int64_t k = 0;
    if (old->s.n == 0) {
        /* Python puts new between every character and at both ends. */
        while (count < 0 || k < count) {
            COLI_TRY(coli__tsb_put(rt, &b, nw.s.p, nw.s.n));
            k++;
            if (i >= s->s.n)
                break;
            size_t m = coli__utf8_len((unsigned char)s->s.p[i]);
            if (i + m > s->s.n)
                m = s->s.n - i;
            COLI_TRY(coli__tsb_put(rt, &b, s->s.p + i, m));
            i += m;
        }
    } else {
        while (count < 0 || k < count) {
            const char *f = find_sub(s->s.p + i, s->s.n - i, old->s.p, old->s.n);
            if (!f)
                break;
            COLI_TRY(coli__tsb_put(rt, &b, s->s.p + i, (size_t)(f - (s->s.p + i))));
            COLI_TRY(coli__tsb_put(rt, &b, nw.s.p, nw.s.n));
            i = (size_t)(f - s->s.p) + old->s.n;
            k++;
        }
    }
    COLI_TRY(coli__tsb_put(rt, &b, s->s.p + i, s->s.n - i));
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

static coli_status affix(coli__trt *rt, const coli__tv *s, const coli__tv *x, int end, int *res)
{
    if (x->t == COLI__TV_LIST && x->tuple) {
        *res = 0;
        for (size_t i = 0; i < x->l->n && !*res; i++)
            COLI_TRY(affix(rt, s, &x->l->v[i], end, res));
        return COLI_OK;
    }
    if (x->t != COLI__TV_STR)
        return coli__trt_fail(rt, COLI_EINVAL, "%s arg must be str or a tuple of str, not %s",
                              end ? "endswith" : "startswith", coli__tv_type_name(x));
    *res = x->s.n <= s->s.n && memcmp(s->s.p + (end ? s->s.n - x->s.n : 0), x->s.p, x->s.n) == 0;
    return COLI_OK;
}

coli_status coli__tstr_join(coli__trt *rt, const coli__tv *sep, const coli__tv *items, const coli__tv *attr,
                            int convert, coli__tv *out)
{
    coli__tv list;
    COLI_TRY(coli__top_iter(rt, items, &list));
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    for (size_t i = 0; i < list.l->n; i++) {
        coli__tv it = list.l->v[i], s;
        if (attr)
            COLI_TRY(coli__top_getitem(rt, &it, attr, &it));
        if (!convert && it.t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "sequence item %zu: expected str instance, %s found", i,
                                  coli__tv_type_name(&it));
        if (i)
            COLI_TRY(coli__tsb_put(rt, &b, sep->s.p, sep->s.n));
        COLI_TRY(coli__tv_to_str(rt, &it, &s));
        COLI_TRY(coli__tsb_put(rt, &b, s.s.p, s.s.n));
    }
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

static int all_chars(const coli__tv *s, int (*pred)(unsigned char))
{
    if (s->s.n == 0)
        return 0;
    for (size_t i = 0; i < s->s.n; i++)
        if (!pred((unsigned char)s->s.p[i]))
            return 0;
    return 1;
}

static int is_space_pred(unsigned char c)
{
    return coli__tch_space(c);
}

/* str.islower / isupper: some coli__tstr_cased character, and none of the other case. */
int coli__tstr_cased(const coli__tv *s, int upper)
{
    int any = 0;
    for (size_t i = 0; i < s->s.n; i++) {
        unsigned char c = (unsigned char)s->s.p[i];
        if (upper ? coli__tch_lower(c) : coli__tch_upper(c))
            return 0;
        any |= upper ? coli__tch_upper(c) : coli__tch_lower(c);
    }
    return any;
}

coli_status coli__tstr_splitlines(coli__trt *rt, const coli__tv *s, coli__tv *out)
{
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    size_t i = 0, start = 0;
    while (i < s->s.n) {
        char c = s->s.p[i];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
            COLI_TRY(push_str(rt, out, s->s.p + start, i - start));
            i += (c == '\r' && i + 1 < s->s.n && s->s.p[i + 1] == '\n') ? 2 : 1;
            start = i;
        } else {
            i++;
        }
    }
    if (start < s->s.n)
        COLI_TRY(push_str(rt, out, s->s.p + start, s->s.n - start));
    return COLI_OK;
}

coli_status coli__tstr_method(coli__trt *rt, const coli__tv *s, const char *m, const coli__targs *a,
                              coli__tv *out)
{
    size_t n = strlen(m);
    int res;
    COLI_TRY(coli__trt_work(rt, s->s.n));
    if (coli__targ_is(m, n, "startswith") || coli__targ_is(m, n, "endswith")) {
        const coli__tv *x = coli__targ(a, 0, NULL);
        if (!x)
            return coli__trt_fail(rt, COLI_EINVAL, "%s takes at least 1 argument", m);
        COLI_TRY(affix(rt, s, x, m[0] == 'e', &res));
        *out = coli__tv_bool(res);
        return COLI_OK;
    }
    if (coli__targ_is(m, n, "split") || coli__targ_is(m, n, "rsplit"))
        return split(rt, s, a, m[0] == 'r', out);
    if (coli__targ_is(m, n, "strip") || coli__targ_is(m, n, "lstrip") || coli__targ_is(m, n, "rstrip"))
        return coli__tstr_strip(rt, s, coli__targ(a, 0, "chars"), m[0] != 'r', m[0] != 'l', out);
    if (coli__targ_is(m, n, "upper") || coli__targ_is(m, n, "lower") || coli__targ_is(m, n, "capitalize") ||
        coli__targ_is(m, n, "title"))
        return coli__tstr_case(rt, s, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 'c' ? 2 : 3, out);
    if (coli__targ_is(m, n, "replace")) {
        const coli__tv *o = coli__targ(a, 0, NULL), *w = coli__targ(a, 1, NULL);
        if (!o || !w)
            return coli__trt_fail(rt, COLI_EINVAL, "replace expected at least 2 arguments");
        return coli__tstr_replace(rt, s, o, w, coli__targ(a, 2, "count"), out);
    }
    if (coli__targ_is(m, n, "find") || coli__targ_is(m, n, "rfind") || coli__targ_is(m, n, "count")) {
        const coli__tv *x = coli__targ(a, 0, NULL);
        if (!x)
            return coli__trt_fail(rt, COLI_EINVAL, "%s takes at least 1 argument", m);
        COLI_TRY(coli__targ_str(rt, x, m));
        if (m[0] == 'c') {
            int64_t k = 0;
            if (x->s.n == 0) {
                k = (int64_t)coli__utf8_count(s->s.p, s->s.n) + 1;
            } else {
                for (const char *p = s->s.p, *f; (f = find_sub(p, s->s.n - (size_t)(p - s->s.p), x->s.p, x->s.n));
                     p = f + x->s.n)
                    k++;
            }
            *out = coli__tv_int(k);
            return COLI_OK;
        }
        const char *f = m[0] == 'r' ? rfind_sub(s->s.p, s->s.n, x->s.p, x->s.n)
                                    : find_sub(s->s.p, s->s.n, x->s.p, x->s.n);
        *out = coli__tv_int(f ? (int64_t)coli__utf8_count(s->s.p, (size_t)(f - s->s.p)) : -1);
        return COLI_OK;
    }
    if (coli__targ_is(m, n, "join")) {
        const coli__tv *x = coli__targ(a, 0, NULL);
        if (!x)
            return coli__trt_fail(rt, COLI_EINVAL, "join takes exactly one argument");
        return coli__tstr_join(rt, s, x, NULL, 0, out);
    }
    if (coli__targ_is(m, n, "isdigit"))
        *out = coli__tv_bool(all_chars(s, coli__tch_digit));
    else if (coli__targ_is(m, n, "isalpha"))
        *out = coli__tv_bool(all_chars(s, coli__tch_alpha));
    else if (coli__targ_is(m, n, "isalnum"))
        *out = coli__tv_bool(all_chars(s, coli__tch_alnum));
    else if (coli__targ_is(m, n, "isspace"))
        *out = coli__tv_bool(all_chars(s, is_space_pred));
    else if (coli__targ_is(m, n, "isupper") || coli__targ_is(m, n, "islower"))
        *out = coli__tv_bool(coli__tstr_cased(s, m[2] == 'u'));
    else if (coli__targ_is(m, n, "splitlines"))
        return coli__tstr_splitlines(rt, s, out);
    else
        return coli__trt_fail(rt, COLI_EINVAL, "str.%s is not supported", m);
    return COLI_OK;
}
