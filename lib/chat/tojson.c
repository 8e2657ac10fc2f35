/* tojson.c - JSON text of template values, byte for byte as json.dumps. */
#include "chat/tojson.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void coli__tjson_defaults(coli__tjson *o)
{
    memset(o, 0, sizeof *o);
    coli__tjson_indent_seps(o);
}

void coli__tjson_indent_seps(coli__tjson *o)
{
    /* json.dumps drops the space after "," when it indents. */
    o->item_sep = o->indent_on ? "," : ", ";
    o->item_n = strlen(o->item_sep);
    o->key_sep = ": ";
    o->key_n = 2;
}

/* The code point at s[*i] (advancing *i); a stray byte stands for itself. */
static uint32_t next_cp(const char *s, size_t n, size_t *i)
{
    unsigned char c = (unsigned char)s[*i];
    size_t k = coli__utf8_len(c);
    if (k == 1 || *i + k > n) {
        (*i)++;
        return c;
    }
    uint32_t cp = c & (0x7f >> k);
    for (size_t j = 1; j < k; j++)
        cp = (cp << 6) | ((unsigned char)s[*i + j] & 0x3f);
    *i += k;
    return cp;
}

static coli_status put_u(coli__trt *rt, coli__tsb *b, uint32_t u)
{
    char e[16];
    snprintf(e, sizeof e, "\\u%04x", (unsigned)(u & 0xffff));
    return coli__tsb_put(rt, b, e, 6);
}

static coli_status put_string(coli__trt *rt, coli__tsb *b, const char *s, size_t n, int ascii)
{
    COLI_TRY(coli__tsb_putc(rt, b, '"'));
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) {
            COLI_TRY(coli__tsb_put(rt, b, esc, 2));
            i++;
        } else if (c < 0x20 || (ascii && c == 0x7f)) {
            COLI_TRY(put_u(rt, b, c));
            i++;
        } else if (c < 0x80 || !ascii) {
            COLI_TRY(coli__tsb_putc(rt, b, (char)c));
            i++;
        } else {
            uint32_t cp = next_cp(s, n, &i);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                COLI_TRY(put_u(rt, b, 0xd800 + (cp >> 10)));
                COLI_TRY(put_u(rt, b, 0xdc00 + (cp & 0x3ff)));
            } else {
                COLI_TRY(put_u(rt, b, cp));
            }
        }
    }
    return coli__tsb_putc(rt, b, '"');
}

static coli_status put_float(coli__trt *rt, coli__tsb *b, double f)
{
    char num[40];
    size_t n;
    if (isnan(f))
        n = (size_t)sprintf(num, "NaN");
    else if (isinf(f))
        n = (size_t)sprintf(num, f < 0 ? "-Infinity" : "Infinity");
    else
        n = coli__tv_fmt_float(f, num);
    return coli__tsb_put(rt, b, num, n);
}

static coli_status newline(coli__trt *rt, coli__tsb *b, const coli__tjson *o, int level)
{
    if (!o->indent_on)
        return COLI_OK;
    COLI_TRY(coli__tsb_putc(rt, b, '\n'));
    for (int l = 0; l < level; l++) {
        if (o->indent.t == COLI__TV_STR) {
            COLI_TRY(coli__tsb_put(rt, b, o->indent.s.p, o->indent.s.n));
        } else {
            for (int64_t k = 0; k < o->indent.i; k++)
                COLI_TRY(coli__tsb_putc(rt, b, ' '));
        }
    }
    return COLI_OK;
}

static coli_status key_text(coli__trt *rt, coli__tsb *b, const coli__tv *k, const coli__tjson *o)
{
    char num[40];
    switch (k->t) {
    case COLI__TV_STR:
        return put_string(rt, b, k->s.p, k->s.n, o->ensure_ascii);
    case COLI__TV_BOOL:
        return coli__tsb_put(rt, b, k->b ? "\"true\"" : "\"false\"", k->b ? 6 : 7);
    case COLI__TV_NONE:
        return coli__tsb_put(rt, b, "\"null\"", 6);
    case COLI__TV_INT:
        snprintf(num, sizeof num, "\"%lld\"", (long long)k->i);
        return coli__tsb_put(rt, b, num, strlen(num));
    case COLI__TV_FLOAT:
        COLI_TRY(coli__tsb_putc(rt, b, '"'));
        COLI_TRY(put_float(rt, b, k->f));
        return coli__tsb_putc(rt, b, '"');
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "keys must be str, int, float, bool or None, not %s",
                              coli__tv_type_name(k));
    }
}

static coli_status dump(coli__trt *rt, coli__tsb *b, const coli__tv *v, const coli__tjson *o, int level);

static coli_status dump_dict(coli__trt *rt, coli__tsb *b, const coli__tdict *d, const coli__tjson *o,
                             int level)
{
    if (d->n == 0)
        return coli__tsb_put(rt, b, "{}", 2);
    size_t *order = coli__trt_alloc(rt, d->n * sizeof *order);
    if (!order)
        return rt->st;
    for (size_t i = 0; i < d->n; i++)
        order[i] = i;
    if (o->sort_keys) {
        /* Insertion sort: stable, and dicts in templates are small. */
        for (size_t i = 1; i < d->n; i++) {
            size_t x = order[i], j = i;
            while (j > 0) {
                int c;
                COLI_TRY(coli__tv_cmp(rt, &d->k[order[j - 1]], &d->k[x], &c));
                if (c <= 0)
                    break;
                order[j] = order[j - 1];
                j--;
            }
            order[j] = x;
        }
    }
    COLI_TRY(coli__tsb_putc(rt, b, '{'));
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            COLI_TRY(coli__tsb_put(rt, b, o->item_sep, o->item_n));
        COLI_TRY(newline(rt, b, o, level + 1));
        COLI_TRY(key_text(rt, b, &d->k[order[i]], o));
        COLI_TRY(coli__tsb_put(rt, b, o->key_sep, o->key_n));
        COLI_TRY(dump(rt, b, &d->v[order[i]], o, level + 1));
    }
    COLI_TRY(newline(rt, b, o, level));
    return coli__tsb_putc(rt, b, '}');
}

static coli_status dump(coli__trt *rt, coli__tsb *b, const coli__tv *v, const coli__tjson *o, int level)
{
    char num[40];
    if (level > 2 * COLI__TPL_DEPTH_MAX)
        return coli__trt_fail(rt, COLI_ERANGE, "values nested more than %d deep", 2 * COLI__TPL_DEPTH_MAX);
    switch (v->t) {
    case COLI__TV_NONE:
        return coli__tsb_put(rt, b, "null", 4);
    case COLI__TV_BOOL:
        return coli__tsb_put(rt, b, v->b ? "true" : "false", v->b ? 4 : 5);
    case COLI__TV_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->i);
        return coli__tsb_put(rt, b, num, strlen(num));
    case COLI__TV_FLOAT:
        return put_float(rt, b, v->f);
    case COLI__TV_STR:
        return put_string(rt, b, v->s.p, v->s.n, o->ensure_ascii);
    case COLI__TV_LIST:
        if (v->l->n == 0)
            return coli__tsb_put(rt, b, "[]", 2);
        COLI_TRY(coli__tsb_putc(rt, b, '['));
        for (size_t i = 0; i < v->l->n; i++) {
            if (i)
                COLI_TRY(coli__tsb_put(rt, b, o->item_sep, o->item_n));
            COLI_TRY(newline(rt, b, o, level + 1));
            COLI_TRY(dump(rt, b, &v->l->v[i], o, level + 1));
        }
        COLI_TRY(newline(rt, b, o, level));
        return coli__tsb_putc(rt, b, ']');
    case COLI__TV_DICT:
        return dump_dict(rt, b, v->d, o, level);
    default:
        return coli__trt_fail(rt, COLI_EINVAL, "Object of type %s is not JSON serializable",
                              coli__tv_type_name(v));
    }
}

coli_status coli__tojson(coli__trt *rt, coli__tsb *b, const coli__tv *v, const coli__tjson *o)
{
    return dump(rt, b, v, o, 0);
}
