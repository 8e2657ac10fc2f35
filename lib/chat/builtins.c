/* builtins.c - filters, tests, methods of str/list/dict/loop, and the
 * global functions, with the behaviour of Jinja 3.1 and Python's str. */
#include "chat/builtins.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/tojson.h"
#include "chat/ucase.h"
#include "io/unicode.h"

enum { FN_RAISE = 1, FN_STRFTIME, FN_NAMESPACE, FN_RANGE, FN_DICT };

static int is(const char *name, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(name, s, n) == 0;
}

/* Positional argument i, else the keyword argument called kw (may be NULL). */
static const coli__tv *arg(const coli__targs *a, size_t i, const char *kw)
{
    if (i < a->npos)
        return &a->pos[i];
    for (size_t k = 0; kw && k < a->nkw; k++)
        if (strcmp(a->names[k], kw) == 0)
            return &a->kw[k];
    return NULL;
}

static int arg_truthy(const coli__targs *a, size_t i, const char *kw, int def)
{
    const coli__tv *v = arg(a, i, kw);
    return v ? coli__tv_truthy(v) : def;
}

static coli_status need_str(coli__trt *rt, const coli__tv *v, const char *what)
{
    if (v->t == COLI__TV_UNDEF)
        return coli__top_undefined_error(rt, v);
    if (v->t != COLI__TV_STR)
        return coli__trt_fail(rt, COLI_EINVAL, "%s: expected a string, got %s", what, coli__tv_type_name(v));
    return COLI_OK;
}

static coli_status need_int(coli__trt *rt, const coli__tv *v, const char *what, int64_t *out)
{
    if (v->t == COLI__TV_INT || v->t == COLI__TV_BOOL) {
        *out = v->t == COLI__TV_INT ? v->i : v->b;
        return COLI_OK;
    }
    return coli__trt_fail(rt, COLI_EINVAL, "%s: expected an integer, got %s", what, coli__tv_type_name(v));
}

/* ---- strings ---- */

static int is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static int is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

static int is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}

static int is_alpha(unsigned char c)
{
    return is_upper(c) || is_lower(c) || c >= 0x80;
}

static coli_status map_case(coli__trt *rt, const coli__tv *s, int mode, coli__tv *out)
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

static coli_status strip(coli__trt *rt, const coli__tv *s, const coli__tv *chars, int left, int right,
                         coli__tv *out)
{
    if (chars && chars->t == COLI__TV_NONE)
        chars = NULL;
    if (chars)
        COLI_TRY(need_str(rt, chars, "strip"));
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
    const coli__tv *sep = arg(a, 0, "sep");
    const coli__tv *maxv = arg(a, 1, "maxsplit");
    int64_t max = -1;
    if (sep && sep->t == COLI__TV_NONE)
        sep = NULL;
    if (maxv)
        COLI_TRY(need_int(rt, maxv, "split", &max));
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    const char *p = s->s.p;
    size_t n = s->s.n;
    if (sep) {
        COLI_TRY(need_str(rt, sep, "split"));
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

static coli_status replace(coli__trt *rt, const coli__tv *s, const coli__tv *old, const coli__tv *new_,
                           const coli__tv *countv, coli__tv *out)
{
    COLI_TRY(need_str(rt, old, "replace"));
    coli__tv nw;
    COLI_TRY(coli__tv_to_str(rt, new_, &nw));
    int64_t count = -1;
    if (countv && countv->t != COLI__TV_NONE)
        COLI_TRY(need_int(rt, countv, "replace", &count));
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

static coli_status str_join(coli__trt *rt, const coli__tv *sep, const coli__tv *items, const coli__tv *attr,
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

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int is_alnum(unsigned char c)
{
    return is_alpha(c) || is_digit(c);
}

static int is_space_pred(unsigned char c)
{
    return is_space(c);
}

/* str.islower / isupper: some cased character, and none of the other case. */
static int cased(const coli__tv *s, int upper)
{
    int any = 0;
    for (size_t i = 0; i < s->s.n; i++) {
        unsigned char c = (unsigned char)s->s.p[i];
        if (upper ? is_lower(c) : is_upper(c))
            return 0;
        any |= upper ? is_upper(c) : is_lower(c);
    }
    return any;
}

static coli_status splitlines(coli__trt *rt, const coli__tv *s, coli__tv *out)
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

static coli_status str_method(coli__trt *rt, const coli__tv *s, const char *m, const coli__targs *a,
                              coli__tv *out)
{
    size_t n = strlen(m);
    int res;
    COLI_TRY(coli__trt_work(rt, s->s.n));
    if (is(m, n, "startswith") || is(m, n, "endswith")) {
        const coli__tv *x = arg(a, 0, NULL);
        if (!x)
            return coli__trt_fail(rt, COLI_EINVAL, "%s takes at least 1 argument", m);
        COLI_TRY(affix(rt, s, x, m[0] == 'e', &res));
        *out = coli__tv_bool(res);
        return COLI_OK;
    }
    if (is(m, n, "split") || is(m, n, "rsplit"))
        return split(rt, s, a, m[0] == 'r', out);
    if (is(m, n, "strip") || is(m, n, "lstrip") || is(m, n, "rstrip"))
        return strip(rt, s, arg(a, 0, "chars"), m[0] != 'r', m[0] != 'l', out);
    if (is(m, n, "upper") || is(m, n, "lower") || is(m, n, "capitalize") || is(m, n, "title"))
        return map_case(rt, s, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 'c' ? 2 : 3, out);
    if (is(m, n, "replace")) {
        const coli__tv *o = arg(a, 0, NULL), *w = arg(a, 1, NULL);
        if (!o || !w)
            return coli__trt_fail(rt, COLI_EINVAL, "replace expected at least 2 arguments");
        return replace(rt, s, o, w, arg(a, 2, "count"), out);
    }
    if (is(m, n, "find") || is(m, n, "rfind") || is(m, n, "count")) {
        const coli__tv *x = arg(a, 0, NULL);
        if (!x)
            return coli__trt_fail(rt, COLI_EINVAL, "%s takes at least 1 argument", m);
        COLI_TRY(need_str(rt, x, m));
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
        const char *f = m[0] == 'r' ? rfind_sub(s->s.p, s->s.n, x->s.p, x->s.n) : find_sub(s->s.p, s->s.n, x->s.p, x->s.n);
        *out = coli__tv_int(f ? (int64_t)coli__utf8_count(s->s.p, (size_t)(f - s->s.p)) : -1);
        return COLI_OK;
    }
    if (is(m, n, "join")) {
        const coli__tv *x = arg(a, 0, NULL);
        if (!x)
            return coli__trt_fail(rt, COLI_EINVAL, "join takes exactly one argument");
        return str_join(rt, s, x, NULL, 0, out);
    }
    if (is(m, n, "isdigit"))
        *out = coli__tv_bool(all_chars(s, is_digit));
    else if (is(m, n, "isalpha"))
        *out = coli__tv_bool(all_chars(s, is_alpha));
    else if (is(m, n, "isalnum"))
        *out = coli__tv_bool(all_chars(s, is_alnum));
    else if (is(m, n, "isspace"))
        *out = coli__tv_bool(all_chars(s, is_space_pred));
    else if (is(m, n, "isupper") || is(m, n, "islower"))
        *out = coli__tv_bool(cased(s, m[2] == 'u'));
    else if (is(m, n, "splitlines"))
        return splitlines(rt, s, out);
    else
        return coli__trt_fail(rt, COLI_EINVAL, "str.%s is not supported", m);
    return COLI_OK;
}

/* ---- dicts, lists, loops ---- */

static coli_status dict_items(coli__trt *rt, const coli__tdict *d, coli__tv *out)
{
    COLI_TRY(coli__tv_list_new(rt, d->n, out));
    for (size_t i = 0; i < d->n; i++) {
        coli__tv pair;
        COLI_TRY(coli__tv_list_new(rt, 2, &pair));
        pair.tuple = 1;
        pair.l->v[0] = d->k[i];
        pair.l->v[1] = d->v[i];
        pair.l->n = 2;
        COLI_TRY(coli__tlist_push(rt, out->l, pair));
    }
    return COLI_OK;
}

static coli_status unsafe(coli__trt *rt, const char *m, const coli__tv *obj)
{
    return coli__trt_fail(rt, COLI_EINVAL, "access to attribute '%s' of '%s' object is unsafe.", m,
                          coli__tv_type_name(obj));
}

coli_status coli__tcall_method(coli__trt *rt, const coli__tv *mv, const coli__targs *a, coli__tv *out)
{
    const coli__tv *obj = mv->s.obj;
    const char *m = mv->s.p;
    size_t n = mv->s.n;
    switch (obj->t) {
    case COLI__TV_STR:
        return str_method(rt, obj, m, a, out);
    case COLI__TV_DICT:
        if (is(m, n, "items"))
            return dict_items(rt, obj->d, out);
        if (is(m, n, "keys") || is(m, n, "values")) {
            COLI_TRY(coli__tv_list_new(rt, obj->d->n, out));
            for (size_t i = 0; i < obj->d->n; i++)
                COLI_TRY(coli__tlist_push(rt, out->l, m[0] == 'k' ? obj->d->k[i] : obj->d->v[i]));
            return COLI_OK;
        }
        if (is(m, n, "get")) {
            const coli__tv *k = arg(a, 0, NULL), *def = arg(a, 1, NULL);
            if (!k)
                return coli__trt_fail(rt, COLI_EINVAL, "get expected at least 1 argument, got 0");
            const coli__tv *v = coli__tdict_get(obj->d, *k);
            *out = v ? *v : def ? *def : coli__tv_none();
            return COLI_OK;
        }
        if (is(m, n, "copy")) {
            *out = *obj;
            return COLI_OK;
        }
        return unsafe(rt, m, obj);
    case COLI__TV_LIST:
        if (is(m, n, "index") || is(m, n, "count")) {
            const coli__tv *x = arg(a, 0, NULL);
            if (!x)
                return coli__trt_fail(rt, COLI_EINVAL, "%s takes exactly one argument", m);
            int64_t k = 0;
            for (size_t i = 0; i < obj->l->n; i++) {
                int eq;
                COLI_TRY(coli__tv_eq(rt, &obj->l->v[i], x, &eq));
                if (eq && m[0] == 'i') {
                    *out = coli__tv_int((int64_t)i);
                    return COLI_OK;
                }
                k += eq;
            }
            if (m[0] == 'i')
                return coli__trt_fail(rt, COLI_EINVAL, "list.index(x): x not in list");
            *out = coli__tv_int(k);
            return COLI_OK;
        }
        if (is(m, n, "copy")) {
            *out = *obj;
            return COLI_OK;
        }
        return unsafe(rt, m, obj);
    case COLI__TV_LOOP:
        if (a->npos == 0)
            return coli__trt_fail(rt, COLI_EINVAL, "no items for cycling given");
        *out = a->pos[((const coli__tloop *)obj->p)->index0 % (int64_t)a->npos];
        return COLI_OK;
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "'%s' object has no method '%s'", coli__tv_type_name(obj), m);
    }
}

/* ---- global functions ---- */

int coli__tglobal(const char *name, size_t n, coli__tv *out)
{
    static const char *const names[] = {"raise_exception", "strftime_now", "namespace", "range", "dict"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (is(name, n, names[i])) {
            coli__tv v = {0};
            v.t = COLI__TV_FUNC;
            v.i = (int64_t)i + 1;
            *out = v;
            return 1;
        }
    return 0;
}

static coli_status fn_range(coli__trt *rt, const coli__targs *a, coli__tv *out)
{
    int64_t start = 0, stop = 0, step = 1;
    if (a->npos == 0 || a->npos > 3)
        return coli__trt_fail(rt, COLI_EINVAL, "range expected 1 to 3 arguments, got %zu", a->npos);
    if (a->npos == 1) {
        COLI_TRY(need_int(rt, &a->pos[0], "range", &stop));
    } else {
        COLI_TRY(need_int(rt, &a->pos[0], "range", &start));
        COLI_TRY(need_int(rt, &a->pos[1], "range", &stop));
        if (a->npos == 3)
            COLI_TRY(need_int(rt, &a->pos[2], "range", &step));
    }
    if (step == 0)
        return coli__trt_fail(rt, COLI_EINVAL, "range() arg 3 must not be zero");
    double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                            : ceil(((double)start - (double)stop) / (double)-step);
    if (count > 1e6) /* the sandbox's MAX_RANGE is 100000; this is looser but bounded */
        return coli__trt_fail(rt, COLI_ERANGE, "range too big");
    COLI_TRY(coli__tv_list_new(rt, count > 0 ? (size_t)count : 0, out));
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        COLI_TRY(coli__tlist_push(rt, out->l, coli__tv_int(i)));
    return COLI_OK;
}

coli_status coli__tcall_func(coli__trt *rt, const coli__tv *fn, const coli__targs *a, coli__tv *out)
{
    switch (fn->i) {
    case FN_RAISE: {
        const coli__tv *m = arg(a, 0, "message");
        coli__tv s = coli__tv_strn("", 0);
        if (m)
            COLI_TRY(coli__tv_to_str(rt, m, &s));
        return coli__trt_fail(rt, COLI_EINVAL, "%.*s", (int)(s.s.n > 400 ? 400 : s.s.n), s.s.p);
    }
    case FN_STRFTIME: {
        const coli__tv *f = arg(a, 0, NULL);
        if (!f)
            return coli__trt_fail(rt, COLI_EINVAL, "strftime_now needs a format");
        COLI_TRY(need_str(rt, f, "strftime_now"));
        char fmt[256], buf[512];
        if (f->s.n >= sizeof fmt)
            return coli__trt_fail(rt, COLI_EINVAL, "strftime_now: format too long");
        memcpy(fmt, f->s.p, f->s.n);
        fmt[f->s.n] = '\0';
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm))
            return coli__trt_fail(rt, COLI_EINVAL, "strftime_now: no local time");
        size_t k = f->s.n ? strftime(buf, sizeof buf, fmt, &tm) : 0;
        return coli__tv_strdup(rt, buf, k, out);
    }
    case FN_NAMESPACE:
    case FN_DICT:
        COLI_TRY(coli__tv_dict_new(rt, 0, out));
        if (a->npos > 1 || (a->npos == 1 && a->pos[0].t != COLI__TV_DICT))
            return coli__trt_fail(rt, COLI_EINVAL, "%s() takes a dict and keyword arguments",
                                  fn->i == FN_DICT ? "dict" : "namespace");
        if (a->npos == 1)
            for (size_t i = 0; i < a->pos[0].d->n; i++)
                COLI_TRY(coli__tdict_set(rt, out->d, a->pos[0].d->k[i], a->pos[0].d->v[i]));
        for (size_t i = 0; i < a->nkw; i++)
            COLI_TRY(coli__tdict_set(rt, out->d, coli__tv_strn(a->names[i], strlen(a->names[i])), a->kw[i]));
        if (fn->i == FN_NAMESPACE)
            out->t = COLI__TV_NS;
        return COLI_OK;
    case FN_RANGE:
        return fn_range(rt, a, out);
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "not callable");
    }
}

/* ---- tests ---- */

static const char *const test_names[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "mapping",
    "iterable", "sequence", "callable", "true", "false", "even", "odd", "divisibleby", "eq", "equalto",
    "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in",
    "lower", "upper", "sameas", "escaped", "filter", "test", NULL};

int coli__ttest_exists(const char *name, size_t n)
{
    for (size_t i = 0; test_names[i]; i++)
        if (is(name, n, test_names[i]))
            return 1;
    return 0;
}

static int cmp_op(const char *name, size_t n)
{
    if (is(name, n, "eq") || is(name, n, "equalto") || is(name, n, "=="))
        return COLI__OP_EQ;
    if (is(name, n, "ne") || is(name, n, "!="))
        return COLI__OP_NE;
    if (is(name, n, "lt") || is(name, n, "lessthan") || is(name, n, "<"))
        return COLI__OP_LT;
    if (is(name, n, "le") || is(name, n, "<="))
        return COLI__OP_LE;
    if (is(name, n, "gt") || is(name, n, "greaterthan") || is(name, n, ">"))
        return COLI__OP_GT;
    if (is(name, n, "ge") || is(name, n, ">="))
        return COLI__OP_GE;
    if (is(name, n, "in"))
        return COLI__OP_IN;
    return -1;
}

int coli__tfilter_exists(const char *name, size_t n);

coli_status coli__ttest(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                        int *res)
{
    int t = x->t;
    const coli__tv *y = arg(a, 0, NULL);
    int op = cmp_op(name, n);
    if (op >= 0) {
        if (!y)
            return coli__trt_fail(rt, COLI_EINVAL, "test '%.*s' needs an argument", (int)n, name);
        return coli__top_compare(rt, op, x, y, res);
    }
    if (is(name, n, "defined"))
        *res = t != COLI__TV_UNDEF;
    else if (is(name, n, "undefined"))
        *res = t == COLI__TV_UNDEF;
    else if (is(name, n, "none"))
        *res = t == COLI__TV_NONE;
    else if (is(name, n, "string"))
        *res = t == COLI__TV_STR;
    else if (is(name, n, "number"))
        *res = coli__tv_is_num(x);
    else if (is(name, n, "integer"))
        *res = t == COLI__TV_INT;
    else if (is(name, n, "float"))
        *res = t == COLI__TV_FLOAT;
    else if (is(name, n, "boolean"))
        *res = t == COLI__TV_BOOL;
    else if (is(name, n, "mapping"))
        *res = t == COLI__TV_DICT;
    else if (is(name, n, "iterable") || is(name, n, "sequence"))
        *res = t == COLI__TV_STR || t == COLI__TV_LIST || t == COLI__TV_DICT || t == COLI__TV_UNDEF;
    else if (is(name, n, "callable"))
        *res = t == COLI__TV_MACRO || t == COLI__TV_FUNC || t == COLI__TV_METHOD;
    else if (is(name, n, "true"))
        *res = t == COLI__TV_BOOL && x->b;
    else if (is(name, n, "false"))
        *res = t == COLI__TV_BOOL && !x->b;
    else if (is(name, n, "even") || is(name, n, "odd") || is(name, n, "divisibleby")) {
        int64_t v = 0, d = 2;
        if (t == COLI__TV_UNDEF)
            return coli__top_undefined_error(rt, x);
        COLI_TRY(need_int(rt, x, "even/odd", &v));
        if (name[0] == 'd') {
            if (!y)
                return coli__trt_fail(rt, COLI_EINVAL, "divisibleby needs an argument");
            COLI_TRY(need_int(rt, y, "divisibleby", &d));
            if (d == 0)
                return coli__trt_fail(rt, COLI_EINVAL, "integer division or modulo by zero");
        }
        int64_t m = d == -1 ? 0 : v % d;
        *res = name[0] == 'o' ? m != 0 : m == 0;
    } else if (is(name, n, "lower") || is(name, n, "upper"))
        *res = t == COLI__TV_STR && cased(x, name[0] == 'u');
    else if (is(name, n, "sameas")) {
        if (!y)
            return coli__trt_fail(rt, COLI_EINVAL, "sameas needs an argument");
        if (x->t != y->t)
            *res = 0;
        else if (t == COLI__TV_NONE || t == COLI__TV_UNDEF)
            *res = 1;
        else if (t == COLI__TV_BOOL)
            *res = x->b == y->b;
        else if (t == COLI__TV_INT)
            *res = x->i == y->i && x->i >= -5 && x->i <= 256;
        else if (t == COLI__TV_FLOAT)
            *res = 0;
        else if (t == COLI__TV_STR)
            *res = x->s.p == y->s.p && x->s.n == y->s.n;
        else
            *res = x->p == y->p;
    } else if (is(name, n, "escaped"))
        *res = 0;
    else if (is(name, n, "filter") || is(name, n, "test"))
        *res = t == COLI__TV_STR && (name[0] == 'f' ? coli__tfilter_exists(x->s.p, x->s.n)
                                                    : coli__ttest_exists(x->s.p, x->s.n));
    else
        return coli__trt_fail(rt, COLI_EINVAL, "no test named '%.*s'", (int)n, name);
    return COLI_OK;
}

/* ---- filters ---- */

static const char *const filter_names[] = {
    "length", "count", "first", "last", "join", "default", "d", "trim", "upper", "lower", "capitalize",
    "title", "replace", "list", "reverse", "sort", "unique", "map", "select", "reject", "selectattr",
    "rejectattr", "tojson", "string", "int", "float", "abs", "round", "items", "dictsort", "indent",
    "safe", "escape", "e", "wordcount", "min", "max", "sum", "attr", NULL};

int coli__tfilter_exists(const char *name, size_t n)
{
    for (size_t i = 0; filter_names[i]; i++)
        if (is(name, n, filter_names[i]))
            return 1;
    return 0;
}

/* The value sort and friends compare: lowercased strings unless case
 * sensitive, after picking attribute. */
static coli_status sort_key(coli__trt *rt, const coli__tv *v, const coli__tv *attr, int case_sensitive,
                            coli__tv *out)
{
    *out = *v;
    if (attr && attr->t != COLI__TV_NONE) {
        if (attr->t == COLI__TV_STR) {
            /* Dotted paths reach into nested members. */
            const char *p = attr->s.p, *end = attr->s.p + attr->s.n;
            while (p <= end) {
                const char *dot = memchr(p, '.', (size_t)(end - p));
                const char *e = dot ? dot : end;
                coli__tv key = coli__tv_strn(p, (size_t)(e - p));
                if (e > p && p[0] >= '0' && p[0] <= '9')
                    key = coli__tv_int(strtoll(p, NULL, 10));
                COLI_TRY(coli__top_getitem(rt, out, &key, out));
                p = e + 1;
            }
        } else {
            COLI_TRY(coli__top_getitem(rt, out, attr, out));
        }
    }
    if (!case_sensitive && out->t == COLI__TV_STR)
        COLI_TRY(map_case(rt, out, 0, out));
    return COLI_OK;
}

/* Stable merge sort of items by keys. */
static coli_status merge_sort(coli__trt *rt, coli__tv *items, coli__tv *keys, size_t n, int reverse)
{
    if (n < 2)
        return COLI_OK;
    COLI_TRY(coli__trt_work(rt, n * 32));
    coli__tv *ti = coli__trt_alloc(rt, n * sizeof *ti), *tk = coli__trt_alloc(rt, n * sizeof *tk);
    if (!ti || !tk)
        return rt->st;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c;
                COLI_TRY(coli__tv_cmp(rt, &keys[j], &keys[i], &c));
                int take_right = reverse ? c > 0 : c < 0;
                size_t s = take_right ? j++ : i++;
                ti[k] = items[s];
                tk[k++] = keys[s];
            }
            while (i < mid) {
                ti[k] = items[i];
                tk[k++] = keys[i++];
            }
            while (j < hi) {
                ti[k] = items[j];
                tk[k++] = keys[j++];
            }
        }
        memcpy(items, ti, n * sizeof *ti);
        memcpy(keys, tk, n * sizeof *tk);
    }
    return COLI_OK;
}

static coli_status copy_list(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, it.l->n, out));
    if (it.l->n)
        memcpy(out->l->v, it.l->v, it.l->n * sizeof *it.l->v);
    out->l->n = it.l->n;
    return COLI_OK;
}

static coli_status f_sort(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    COLI_TRY(copy_list(rt, x, out));
    size_t n = out->l->n;
    coli__tv *keys = coli__trt_alloc(rt, (n ? n : 1) * sizeof *keys);
    if (!keys)
        return rt->st;
    int cs = arg_truthy(a, 1, "case_sensitive", 0);
    for (size_t i = 0; i < n; i++)
        COLI_TRY(sort_key(rt, &out->l->v[i], arg(a, 2, "attribute"), cs, &keys[i]));
    return merge_sort(rt, out->l->v, keys, n, arg_truthy(a, 0, "reverse", 0));
}

static coli_status f_unique(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv it, seen;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    COLI_TRY(coli__tv_list_new(rt, 0, &seen));
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv k;
        int dup;
        COLI_TRY(sort_key(rt, &it.l->v[i], arg(a, 1, "attribute"), arg_truthy(a, 0, "case_sensitive", 0), &k));
        COLI_TRY(coli__top_contains(rt, &seen, &k, &dup));
        if (dup)
            continue;
        COLI_TRY(coli__tlist_push(rt, seen.l, k));
        COLI_TRY(coli__tlist_push(rt, out->l, it.l->v[i]));
    }
    return COLI_OK;
}

static coli_status f_minmax(coli__trt *rt, const coli__tv *x, const coli__targs *a, int max, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    if (it.l->n == 0) {
        *out = coli__tv_undef("min/max of an empty sequence");
        return COLI_OK;
    }
    int cs = arg_truthy(a, 0, "case_sensitive", 0);
    coli__tv best = it.l->v[0], bk;
    COLI_TRY(sort_key(rt, &best, arg(a, 1, "attribute"), cs, &bk));
    for (size_t i = 1; i < it.l->n; i++) {
        coli__tv k;
        int c;
        COLI_TRY(sort_key(rt, &it.l->v[i], arg(a, 1, "attribute"), cs, &k));
        COLI_TRY(coli__tv_cmp(rt, &k, &bk, &c));
        if (max ? c > 0 : c < 0) {
            best = it.l->v[i];
            bk = k;
        }
    }
    *out = best;
    return COLI_OK;
}

static coli_status f_sum(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    const coli__tv *start = arg(a, 1, "start");
    *out = start ? *start : coli__tv_int(0);
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv v;
        COLI_TRY(sort_key(rt, &it.l->v[i], arg(a, 0, "attribute"), 1, &v));
        COLI_TRY(coli__top_binary(rt, COLI__OP_ADD, out, &v, out));
    }
    return COLI_OK;
}

/* select/reject (attr NULL) and selectattr/rejectattr. */
static coli_status f_select(coli__trt *rt, const coli__tv *x, const coli__targs *a, int keep, int by_attr,
                            coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, 0, out));
    size_t first = by_attr ? 1 : 0;
    const coli__tv *attr = by_attr ? arg(a, 0, NULL) : NULL;
    if (by_attr && !attr)
        return coli__trt_fail(rt, COLI_EINVAL, "selectattr/rejectattr need an attribute");
    const coli__tv *test = arg(a, first, NULL);
    if (test && test->t != COLI__TV_STR)
        return coli__trt_fail(rt, COLI_EINVAL, "the test of select must be named by a string");
    coli__targs ta = {a->pos + (a->npos > first + 1 ? first + 1 : a->npos),
                      a->npos > first + 1 ? a->npos - first - 1 : 0, a->names, a->kw, a->nkw};
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv v = it.l->v[i];
        int r;
        if (attr)
            COLI_TRY(sort_key(rt, &v, attr, 1, &v));
        if (test)
            COLI_TRY(coli__ttest(rt, test->s.p, test->s.n, &v, &ta, &r));
        else
            r = coli__tv_truthy(&v);
        if (r == keep)
            COLI_TRY(coli__tlist_push(rt, out->l, it.l->v[i]));
    }
    return COLI_OK;
}

static coli_status f_map(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv it;
    COLI_TRY(coli__top_iter(rt, x, &it));
    COLI_TRY(coli__tv_list_new(rt, it.l->n, out));
    const coli__tv *attr = arg(a, SIZE_MAX, "attribute");
    const coli__tv *def = arg(a, SIZE_MAX, "default");
    const coli__tv *name = attr ? NULL : arg(a, 0, NULL);
    if (!attr && (!name || name->t != COLI__TV_STR))
        return coli__trt_fail(rt, COLI_EINVAL, "map needs a filter name or attribute=");
    coli__targs fa = {a->npos > 1 ? a->pos + 1 : a->pos, a->npos > 1 ? a->npos - 1 : 0, a->names, a->kw, a->nkw};
    for (size_t i = 0; i < it.l->n; i++) {
        coli__tv v;
        if (attr) {
            COLI_TRY(sort_key(rt, &it.l->v[i], attr, 1, &v));
            if (v.t == COLI__TV_UNDEF && def)
                v = *def;
        } else {
            COLI_TRY(coli__tfilter(rt, name->s.p, name->s.n, &it.l->v[i], &fa, &v));
        }
        COLI_TRY(coli__tlist_push(rt, out->l, v));
    }
    return COLI_OK;
}

static coli_status f_tojson(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tjson o;
    coli__tjson_defaults(&o);
    o.ensure_ascii = arg_truthy(a, 0, "ensure_ascii", 0);
    const coli__tv *ind = arg(a, 1, "indent");
    if (ind && ind->t != COLI__TV_NONE) {
        if (ind->t != COLI__TV_INT && ind->t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "tojson: indent must be an integer or a string");
        o.indent_on = 1;
        o.indent = *ind;
        if (ind->t == COLI__TV_INT && ind->i > 64)
            return coli__trt_fail(rt, COLI_ERANGE, "tojson: indent beyond 64");
    }
    coli__tjson_indent_seps(&o);
    const coli__tv *seps = arg(a, 2, "separators");
    if (seps && seps->t != COLI__TV_NONE) {
        if (seps->t != COLI__TV_LIST || seps->l->n != 2 || seps->l->v[0].t != COLI__TV_STR ||
            seps->l->v[1].t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "tojson: separators must be two strings");
        o.item_sep = seps->l->v[0].s.p;
        o.item_n = seps->l->v[0].s.n;
        o.key_sep = seps->l->v[1].s.p;
        o.key_n = seps->l->v[1].s.n;
    }
    o.sort_keys = arg_truthy(a, 3, "sort_keys", 0);
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    COLI_TRY(coli__tojson(rt, &b, x, &o));
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

/* Python's int() of a string: blanks around, a sign, digits with single
 * underscores between. */
static int parse_int(const char *p, size_t n, int64_t *out)
{
    size_t i = 0;
    while (i < n && is_space((unsigned char)p[i]))
        i++;
    while (n > i && is_space((unsigned char)p[n - 1]))
        n--;
    int neg = 0;
    if (i < n && (p[i] == '+' || p[i] == '-'))
        neg = p[i++] == '-';
    if (i >= n)
        return 0;
    uint64_t v = 0;
    for (size_t k = i; k < n; k++) {
        if (p[k] == '_' && k > i && k + 1 < n && is_digit((unsigned char)p[k + 1]) && p[k - 1] != '_')
            continue;
        if (!is_digit((unsigned char)p[k]) || v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(p[k] - '0');
    }
    if (v > (uint64_t)INT64_MAX)
        return 0;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

static int parse_float(const char *p, size_t n, double *out)
{
    char buf[128];
    size_t i = 0;
    while (i < n && is_space((unsigned char)p[i]))
        i++;
    while (n > i && is_space((unsigned char)p[n - 1]))
        n--;
    if (n - i == 0 || n - i >= sizeof buf)
        return 0;
    for (size_t k = i; k < n; k++)
        if (!(is_digit((unsigned char)p[k]) || strchr("+-.eEinfatyINFATY", p[k])))
            return 0;
    memcpy(buf, p + i, n - i);
    buf[n - i] = '\0';
    char *end;
    *out = strtod(buf, &end);
    return *end == '\0';
}

static coli_status f_int(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    const coli__tv *def = arg(a, 0, "default");
    int64_t v;
    double f;
    if (x->t == COLI__TV_INT || x->t == COLI__TV_BOOL) {
        *out = coli__tv_int(x->t == COLI__TV_INT ? x->i : x->b);
        return COLI_OK;
    }
    if (x->t == COLI__TV_FLOAT && isfinite(x->f) && fabs(x->f) < 9.2e18) {
        *out = coli__tv_int((int64_t)x->f);
        return COLI_OK;
    }
    if (x->t == COLI__TV_STR) {
        if (parse_int(x->s.p, x->s.n, &v)) {
            *out = coli__tv_int(v);
            return COLI_OK;
        }
        if (parse_float(x->s.p, x->s.n, &f) && isfinite(f) && fabs(f) < 9.2e18) {
            *out = coli__tv_int((int64_t)f);
            return COLI_OK;
        }
    }
    *out = def ? *def : coli__tv_int(0);
    return COLI_OK;
}

static coli_status f_float(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    (void)rt;
    const coli__tv *def = arg(a, 0, "default");
    double f;
    if (coli__tv_is_num(x)) {
        *out = coli__tv_float(coli__tv_num(x));
        return COLI_OK;
    }
    if (x->t == COLI__TV_STR && parse_float(x->s.p, x->s.n, &f)) {
        *out = coli__tv_float(f);
        return COLI_OK;
    }
    *out = def ? *def : coli__tv_float(0.0);
    return COLI_OK;
}

static coli_status f_round(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    int64_t prec = 0;
    const coli__tv *p = arg(a, 0, "precision"), *m = arg(a, 1, "method");
    if (p)
        COLI_TRY(need_int(rt, p, "round", &prec));
    if (!coli__tv_is_num(x))
        return coli__trt_fail(rt, COLI_EINVAL, "round: expected a number, got %s", coli__tv_type_name(x));
    if (prec < -300 || prec > 300)
        return coli__trt_fail(rt, COLI_ERANGE, "round: precision out of range");
    double v = coli__tv_num(x);
    if (m && m->t == COLI__TV_STR && !(m->s.n == 6 && memcmp(m->s.p, "common", 6) == 0)) {
        double s = pow(10.0, (double)prec);
        if (m->s.n == 4 && memcmp(m->s.p, "ceil", 4) == 0)
            v = ceil(v * s) / s;
        else if (m->s.n == 5 && memcmp(m->s.p, "floor", 5) == 0)
            v = floor(v * s) / s;
        else
            return coli__trt_fail(rt, COLI_EINVAL, "method must be common, ceil or floor");
        *out = coli__tv_float(v);
        return COLI_OK;
    }
    if (x->t != COLI__TV_FLOAT && prec >= 0) {
        *out = coli__tv_int(x->t == COLI__TV_INT ? x->i : x->b);
        return COLI_OK;
    }
    if (isfinite(v) && prec >= 0 && fabs(v) < 4503599627370496.0) {
        /* printf rounds the exact binary value half to even, as Python's
         * round; from 2^52 up every double is whole and stays as it is. */
        char buf[512];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, v);
        v = strtod(buf, NULL);
    } else if (isfinite(v) && prec < 0) {
        double s = pow(10.0, (double)-prec);
        v = nearbyint(v / s) * s;
    }
    *out = coli__tv_float(v);
    return COLI_OK;
}

static coli_status f_indent(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    coli__tv s, ind = coli__tv_strn("    ", 4), lines;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    const coli__tv *w = arg(a, 0, "width");
    if (w && w->t == COLI__TV_STR) {
        ind = *w;
    } else if (w) {
        int64_t k = 0;
        COLI_TRY(need_int(rt, w, "indent", &k));
        if (k > 4096)
            return coli__trt_fail(rt, COLI_ERANGE, "indent: width beyond 4096");
        coli__tsb b = {0};
        COLI_TRY(coli__tsb_put(rt, &b, "", 0));
        for (int64_t i = 0; i < k; i++)
            COLI_TRY(coli__tsb_putc(rt, &b, ' '));
        ind = coli__tsb_value(&b);
    }
    int first = arg_truthy(a, 1, "first", 0), blank = arg_truthy(a, 2, "blank", 0);
    COLI_TRY(splitlines(rt, &s, &lines));
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    if (first)
        COLI_TRY(coli__tsb_put(rt, &b, ind.s.p, ind.s.n));
    for (size_t i = 0; i < lines.l->n; i++) {
        const coli__tv *l = &lines.l->v[i];
        if (i) {
            COLI_TRY(coli__tsb_putc(rt, &b, '\n'));
            if (blank || l->s.n)
                COLI_TRY(coli__tsb_put(rt, &b, ind.s.p, ind.s.n));
        }
        COLI_TRY(coli__tsb_put(rt, &b, l->s.p, l->s.n));
    }
    /* Jinja appends a newline before splitting: a trailing one survives. */
    if (s.s.n && (s.s.p[s.s.n - 1] == '\n' || s.s.p[s.s.n - 1] == '\r')) {
        COLI_TRY(coli__tsb_putc(rt, &b, '\n'));
        if (blank)
            COLI_TRY(coli__tsb_put(rt, &b, ind.s.p, ind.s.n));
    }
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

static coli_status f_escape(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv s;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    coli__tsb b = {0};
    COLI_TRY(coli__tsb_put(rt, &b, "", 0));
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;"
                      : c == '\'' ? "&#39;" : NULL;
        if (e)
            COLI_TRY(coli__tsb_put(rt, &b, e, strlen(e)));
        else
            COLI_TRY(coli__tsb_putc(rt, &b, c));
    }
    *out = coli__tsb_value(&b);
    return COLI_OK;
}

static coli_status f_length(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    COLI_TRY(coli__trt_work(rt, x->t == COLI__TV_STR ? x->s.n : 0));
    switch (x->t) {
    case COLI__TV_STR:
        *out = coli__tv_int((int64_t)coli__utf8_count(x->s.p, x->s.n));
        return COLI_OK;
    case COLI__TV_LIST:
        *out = coli__tv_int((int64_t)x->l->n);
        return COLI_OK;
    case COLI__TV_DICT:
        *out = coli__tv_int((int64_t)x->d->n);
        return COLI_OK;
    case COLI__TV_UNDEF:
        *out = coli__tv_int(0);
        return COLI_OK;
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "object of type '%s' has no len()", coli__tv_type_name(x));
    }
}

static coli_status f_dictsort(coli__trt *rt, const coli__tv *x, const coli__targs *a, coli__tv *out)
{
    if (x->t != COLI__TV_DICT)
        return coli__trt_fail(rt, COLI_EINVAL, "dictsort: expected a dict, got %s", coli__tv_type_name(x));
    COLI_TRY(dict_items(rt, x->d, out));
    const coli__tv *by = arg(a, 1, "by");
    int by_value = by && by->t == COLI__TV_STR && by->s.n == 5 && memcmp(by->s.p, "value", 5) == 0;
    size_t n = out->l->n;
    coli__tv *keys = coli__trt_alloc(rt, (n ? n : 1) * sizeof *keys);
    if (!keys)
        return rt->st;
    for (size_t i = 0; i < n; i++)
        COLI_TRY(sort_key(rt, &out->l->v[i].l->v[by_value], NULL, arg_truthy(a, 0, "case_sensitive", 0), &keys[i]));
    return merge_sort(rt, out->l->v, keys, n, arg_truthy(a, 2, "reverse", 0));
}

static coli_status f_wordcount(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv s;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    int64_t k = 0;
    int in = 0;
    for (size_t i = 0; i < s.s.n; i++) {
        unsigned char c = (unsigned char)s.s.p[i];
        int w = is_alnum(c) || c == '_';
        k += w && !in;
        in = w;
    }
    *out = coli__tv_int(k);
    return COLI_OK;
}

static coli_status f_reverse(coli__trt *rt, const coli__tv *x, coli__tv *out)
{
    coli__tv l;
    COLI_TRY(copy_list(rt, x, &l));
    for (size_t i = 0, j = l.l->n; i + 1 < j; i++, j--) {
        coli__tv t = l.l->v[i];
        l.l->v[i] = l.l->v[j - 1];
        l.l->v[j - 1] = t;
    }
    if (x->t != COLI__TV_STR) {
        *out = l;
        return COLI_OK;
    }
    coli__tv empty = coli__tv_strn("", 0);
    return str_join(rt, &empty, &l, NULL, 0, out);
}

static coli_status str_filter(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                              coli__tv *out)
{
    coli__tv s;
    COLI_TRY(coli__tv_to_str(rt, x, &s));
    if (is(name, n, "trim"))
        return strip(rt, &s, arg(a, 0, "chars"), 1, 1, out);
    if (is(name, n, "upper"))
        return map_case(rt, &s, 1, out);
    if (is(name, n, "lower"))
        return map_case(rt, &s, 0, out);
    if (is(name, n, "capitalize"))
        return map_case(rt, &s, 2, out);
    if (is(name, n, "title"))
        return map_case(rt, &s, 4, out);
    /* replace */
    const coli__tv *o = arg(a, 0, "old"), *w = arg(a, 1, "new");
    if (!o || !w)
        return coli__trt_fail(rt, COLI_EINVAL, "replace needs old and new");
    coli__tv os;
    COLI_TRY(coli__tv_to_str(rt, o, &os));
    return replace(rt, &s, &os, w, arg(a, 2, "count"), out);
}

coli_status coli__tfilter(coli__trt *rt, const char *name, size_t n, const coli__tv *x, const coli__targs *a,
                          coli__tv *out)
{
    if (is(name, n, "default") || is(name, n, "d")) {
        const coli__tv *def = arg(a, 0, "default_value");
        int use = x->t == COLI__TV_UNDEF || (arg_truthy(a, 1, "boolean", 0) && !coli__tv_truthy(x));
        *out = use ? (def ? *def : coli__tv_strn("", 0)) : *x;
        return COLI_OK;
    }
    if (is(name, n, "length") || is(name, n, "count"))
        return f_length(rt, x, out);
    if (is(name, n, "string"))
        return coli__tv_to_str(rt, x, out);
    if (is(name, n, "safe")) {
        *out = *x;
        return COLI_OK;
    }
    if (is(name, n, "tojson"))
        return f_tojson(rt, x, a, out);
    if (is(name, n, "int"))
        return f_int(rt, x, a, out);
    if (is(name, n, "float"))
        return f_float(rt, x, a, out);
    if (is(name, n, "attr")) {
        const coli__tv *k = arg(a, 0, "name");
        if (!k || k->t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "attr needs a name");
        return coli__top_getattr(rt, x, k->s.p, k->s.n, out);
    }
    if (x->t == COLI__TV_UNDEF && !is(name, n, "list") && !is(name, n, "join") && !is(name, n, "items") &&
        !is(name, n, "first") && !is(name, n, "select") && !is(name, n, "reject") && !is(name, n, "map") &&
        !is(name, n, "selectattr") && !is(name, n, "rejectattr") && !is(name, n, "unique") &&
        !is(name, n, "sort") && !is(name, n, "sum") && !is(name, n, "min") && !is(name, n, "max") &&
        !is(name, n, "trim") && !is(name, n, "upper") && !is(name, n, "lower") && !is(name, n, "capitalize") &&
        !is(name, n, "title") && !is(name, n, "escape") && !is(name, n, "e") && !is(name, n, "wordcount") &&
        !is(name, n, "reverse") && !is(name, n, "indent") && !is(name, n, "replace"))
        return coli__top_undefined_error(rt, x);
    if (is(name, n, "trim") || is(name, n, "upper") || is(name, n, "lower") || is(name, n, "capitalize") ||
        is(name, n, "title") || is(name, n, "replace"))
        return str_filter(rt, name, n, x, a, out);
    if (is(name, n, "first") || is(name, n, "last")) {
        coli__tv it;
        if (name[0] == 'l' && x->t != COLI__TV_LIST && x->t != COLI__TV_STR)
            return coli__trt_fail(rt, COLI_EINVAL, "last: expected a sequence, got %s", coli__tv_type_name(x));
        COLI_TRY(coli__top_iter(rt, x, &it));
        *out = it.l->n ? it.l->v[name[0] == 'f' ? 0 : it.l->n - 1] : coli__tv_undef(name[0] == 'f' ? "first" : "last");
        return COLI_OK;
    }
    if (is(name, n, "join")) {
        const coli__tv *sep = arg(a, 0, "d");
        coli__tv s = coli__tv_strn("", 0);
        if (sep)
            COLI_TRY(coli__tv_to_str(rt, sep, &s));
        return str_join(rt, &s, x, arg(a, 1, "attribute"), 1, out);
    }
    if (is(name, n, "list"))
        return copy_list(rt, x, out);
    if (is(name, n, "reverse"))
        return f_reverse(rt, x, out);
    if (is(name, n, "sort"))
        return f_sort(rt, x, a, out);
    if (is(name, n, "unique"))
        return f_unique(rt, x, a, out);
    if (is(name, n, "map"))
        return f_map(rt, x, a, out);
    if (is(name, n, "select") || is(name, n, "reject"))
        return f_select(rt, x, a, name[0] == 's', 0, out);
    if (is(name, n, "selectattr") || is(name, n, "rejectattr"))
        return f_select(rt, x, a, name[0] == 's', 1, out);
    if (is(name, n, "abs")) {
        if (x->t == COLI__TV_FLOAT)
            *out = coli__tv_float(fabs(x->f));
        else if (x->t == COLI__TV_INT || x->t == COLI__TV_BOOL)
            return coli__top_unary(rt, (x->t == COLI__TV_INT ? x->i : x->b) < 0 ? COLI__OP_NEG : COLI__OP_POS, x, out);
        else
            return coli__trt_fail(rt, COLI_EINVAL, "bad operand type for abs(): '%s'", coli__tv_type_name(x));
        return COLI_OK;
    }
    if (is(name, n, "round"))
        return f_round(rt, x, a, out);
    if (is(name, n, "items")) {
        if (x->t == COLI__TV_UNDEF)
            return coli__tv_list_new(rt, 0, out);
        if (x->t != COLI__TV_DICT)
            return coli__trt_fail(rt, COLI_EINVAL, "items: expected a dict, got %s", coli__tv_type_name(x));
        return dict_items(rt, x->d, out);
    }
    if (is(name, n, "dictsort"))
        return f_dictsort(rt, x, a, out);
    if (is(name, n, "indent"))
        return f_indent(rt, x, a, out);
    if (is(name, n, "escape") || is(name, n, "e"))
        return f_escape(rt, x, out);
    if (is(name, n, "wordcount"))
        return f_wordcount(rt, x, out);
    if (is(name, n, "min") || is(name, n, "max"))
        return f_minmax(rt, x, a, name[1] == 'a', out);
    if (is(name, n, "sum"))
        return f_sum(rt, x, a, out);
    return coli__trt_fail(rt, COLI_EINVAL, "no filter named '%.*s'", (int)n, name);
}
