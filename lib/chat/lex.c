/* lex.c - the template's tokens. */
#include "chat/lex.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/unicode.h"

typedef struct lexer {
    coli__trt *rt;
    const char *s;
    size_t n, pos;
    int line;
    size_t line_start;
    coli__ttok *t;
    size_t nt, cap;
} lexer;

static coli_status lfail(lexer *L, size_t at, const char *what)
{
    int line = 1;
    size_t ls = 0;
    for (size_t i = 0; i < at && i < L->n; i++)
        if (L->s[i] == '\n') {
            line++;
            ls = i + 1;
        }
    L->rt->line = 0;
    return coli__trt_fail(L->rt, COLI_EFORMAT, "%d:%zu: %s", line, at - ls + 1, what);
}

static coli_status emit(lexer *L, int kind, const char *p, size_t n, size_t at)
{
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        coli__ttok *t = coli__trt_alloc(L->rt, cap * sizeof *t);
        if (!t)
            return L->rt->st;
        if (L->nt)
            memcpy(t, L->t, L->nt * sizeof *t);
        L->t = t;
        L->cap = cap;
    }
    /* Line and column by counting from the last known line start. */
    for (size_t i = L->line_start; i < at; i++)
        if (L->s[i] == '\n') {
            L->line++;
            L->line_start = i + 1;
        }
    coli__ttok *k = &L->t[L->nt++];
    memset(k, 0, sizeof *k);
    k->kind = (uint8_t)kind;
    k->p = p;
    k->n = n;
    k->line = L->line;
    k->col = (int)(at - L->line_start + 1);
    return COLI_OK;
}

/* Python's str.isspace for ASCII. */
static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
           (c >= 0x1c && c <= 0x1f);
}

static int is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A code point as UTF-8; a lone surrogate, which UTF-8 cannot hold,
 * becomes U+FFFD. */
static size_t put_utf8(char *o, uint32_t cp)
{
    size_t k = coli__utf8_encode(cp, o);
    return k ? k : coli__utf8_encode(0xFFFD, o);
}

static char simple_escape(char e)
{
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '\\': return '\\';
    case '\'': return '\'';
    case '"': return '"';
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'v': return '\v';
    default: return 0;
    }
}

/* A quoted string at L->pos, with Python's escapes; unknown ones stay. */
static coli_status lex_string(lexer *L)
{
    size_t start = L->pos;
    char q = L->s[L->pos++];
    size_t end = L->pos;
    while (end < L->n && L->s[end] != q)
        end += L->s[end] == '\\' ? 2 : 1;
    if (end >= L->n)
        return lfail(L, start, "unterminated string");
    char *o = coli__trt_alloc(L->rt, end - L->pos + 1);
    if (!o)
        return L->rt->st;
    size_t k = 0;
    for (size_t i = L->pos; i < end; i++) {
        char c = L->s[i];
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        char e = L->s[++i];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (e == '\n') {
            continue; /* a backslash-newline joins lines */
        } else if (digits) {
            uint32_t cp = 0;
            int d;
            for (d = 0; d < digits && i + 1 + (size_t)d < end; d++) {
                int h = hexval(L->s[i + 1 + (size_t)d]);
                if (h < 0)
                    break;
                cp = cp * 16 + (uint32_t)h;
            }
            if (d < digits || cp > 0x10ffff)
                return lfail(L, i - 1, "malformed escape in string");
            i += (size_t)digits;
            k += put_utf8(o + k, cp);
        } else if (e >= '0' && e <= '7') {
            uint32_t cp = 0;
            int d;
            for (d = 0; d < 3 && L->s[i] >= '0' && L->s[i] <= '7'; d++, i++)
                cp = cp * 8 + (uint32_t)(L->s[i] - '0');
            i--;
            k += put_utf8(o + k, cp);
        } else if (simple_escape(e)) {
            o[k++] = simple_escape(e);
        } else {
            o[k++] = '\\';
            o[k++] = e;
        }
    }
    o[k] = '\0';
    COLI_TRY(emit(L, COLI__TK_STRING, o, k, start));
    L->pos = end + 1;
    return COLI_OK;
}

static coli_status lex_number(lexer *L)
{
    size_t start = L->pos, i = L->pos;
    char buf[128];
    size_t k = 0;
    int is_float = 0;
    while (i < L->n && (is_digit(L->s[i]) || (L->s[i] == '_' && i + 1 < L->n && is_digit(L->s[i + 1])))) {
        if (L->s[i] != '_' && k < sizeof buf - 8)
            buf[k++] = L->s[i];
        i++;
    }
    if (i + 1 < L->n && L->s[i] == '.' && is_digit(L->s[i + 1])) {
        is_float = 1;
        buf[k++] = L->s[i++];
        while (i < L->n && (is_digit(L->s[i]) || (L->s[i] == '_' && i + 1 < L->n && is_digit(L->s[i + 1])))) {
            if (L->s[i] != '_' && k < sizeof buf - 8)
                buf[k++] = L->s[i];
            i++;
        }
    }
    if (i < L->n && (L->s[i] == 'e' || L->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->n && (L->s[j] == '+' || L->s[j] == '-'))
            j++;
        if (j < L->n && is_digit(L->s[j])) {
            is_float = 1;
            buf[k++] = 'e';
            for (size_t m = i + 1; m < j; m++)
                buf[k++] = L->s[m];
            i = j;
            while (i < L->n && (is_digit(L->s[i]) || L->s[i] == '_')) {
                if (L->s[i] != '_' && k < sizeof buf - 2)
                    buf[k++] = L->s[i];
                i++;
            }
        }
    }
    buf[k] = '\0';
    COLI_TRY(emit(L, is_float ? COLI__TK_FLOAT : COLI__TK_INT, L->s + start, i - start, start));
    coli__ttok *t = &L->t[L->nt - 1];
    if (is_float) {
        t->f = strtod(buf, NULL);
    } else {
        errno = 0;
        long long v = strtoll(buf, NULL, 10);
        if (errno == ERANGE)
            return lfail(L, start, "integer literal too large");
        t->i = v;
    }
    L->pos = i;
    return COLI_OK;
}

static const char *const ops2[] = {"**", "//", "==", "!=", "<=", ">="};

/* The tokens of one tag up to its end marker; *strip_after gets 1 when the
 * marker had "-" (strip what follows), 2 for "+" (keep even the newline). */
static coli_status lex_tag(lexer *L, int var, int *strip_after)
{
    int depth = 0;
    for (;;) {
        while (L->pos < L->n && is_space(L->s[L->pos]))
            L->pos++;
        if (L->pos >= L->n)
            return lfail(L, L->pos, var ? "unexpected end of template, expected '}}'" :
                                         "unexpected end of template, expected '%}'");
        const char *s = L->s + L->pos;
        size_t left = L->n - L->pos;
        char endc = var ? '}' : '%';
        if (depth == 0) {
            if (left >= 3 && (s[0] == '-' || (s[0] == '+' && !var)) && s[1] == endc && s[2] == '}') {
                COLI_TRY(emit(L, var ? COLI__TK_VAR_END : COLI__TK_BLOCK_END, s, 3, L->pos));
                L->pos += 3;
                *strip_after = s[0] == '-' ? 1 : 2;
                return COLI_OK;
            }
            if (left >= 2 && s[0] == endc && s[1] == '}') {
                COLI_TRY(emit(L, var ? COLI__TK_VAR_END : COLI__TK_BLOCK_END, s, 2, L->pos));
                L->pos += 2;
                *strip_after = 0;
                return COLI_OK;
            }
        }
        char c = s[0];
        if (c == '\'' || c == '"') {
            COLI_TRY(lex_string(L));
        } else if (is_digit(c)) {
            COLI_TRY(lex_number(L));
        } else if (is_name_start(c)) {
            size_t k = 1;
            while (k < left && (is_name_start(s[k]) || is_digit(s[k])))
                k++;
            COLI_TRY(emit(L, COLI__TK_NAME, s, k, L->pos));
            L->pos += k;
        } else {
            size_t k = 0;
            for (size_t i = 0; i < sizeof ops2 / sizeof ops2[0]; i++)
                if (left >= 2 && s[0] == ops2[i][0] && s[1] == ops2[i][1])
                    k = 2;
            if (!k && strchr("+-*/%~<>=.,:|()[]{}", c) && c != '\0')
                k = 1;
            if (!k)
                return lfail(L, L->pos, "unexpected character");
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if ((c == ')' || c == ']' || c == '}') && depth > 0)
                depth--;
            COLI_TRY(emit(L, COLI__TK_OP, s, k, L->pos));
            L->pos += k;
        }
    }
}

/* Whether "[-+] raw [-]%}" follows at i (after "{%" and its sign): *end
 * gets the position after it, *strip whether it had "-". */
static int raw_begin(lexer *L, size_t i, size_t *end, int *strip)
{
    size_t k;
    while (i < L->n && coli__tspace_at(L->s, L->n, i, &k))
        i += k;
    if (L->n - i < 5 || memcmp(L->s + i, "raw", 3) != 0)
        return 0;
    i += 3;
    while (i < L->n && coli__tspace_at(L->s, L->n, i, &k))
        i += k;
    *strip = i < L->n && L->s[i] == '-';
    i += (size_t)*strip;
    if (L->n - i < 2 || L->s[i] != '%' || L->s[i + 1] != '}')
        return 0;
    *end = i + 2;
    return 1;
}

/* The text of {% raw %}...{% endraw %} (L->pos after the raw tag): as it
 * is, but for the markers' whitespace rules; trim_blocks applies after
 * endraw only, as in Jinja. */
static coli_status lex_raw(lexer *L, size_t at, int strip_begin)
{
    size_t k;
    if (strip_begin)
        while (L->pos < L->n && coli__tspace_at(L->s, L->n, L->pos, &k))
            L->pos += k;
    for (size_t e = L->pos; e + 1 < L->n; e++) {
        if (L->s[e] != '{' || L->s[e + 1] != '%')
            continue;
        size_t i = e + 2;
        char sign = i < L->n && (L->s[i] == '-' || L->s[i] == '+') ? L->s[i++] : 0;
        while (i < L->n && coli__tspace_at(L->s, L->n, i, &k))
            i += k;
        if (L->n - i < 6 || memcmp(L->s + i, "endraw", 6) != 0)
            continue;
        i += 6;
        while (i < L->n && coli__tspace_at(L->s, L->n, i, &k))
            i += k;
        char end_sign = i < L->n && (L->s[i] == '-' || L->s[i] == '+') ? L->s[i++] : 0;
        if (L->n - i < 2 || L->s[i] != '%' || L->s[i + 1] != '}')
            continue;
        size_t text_end = e;
        if (sign == '-') {
            while (text_end > L->pos && coli__tspace_before(L->s, L->pos, text_end, &k))
                text_end -= k;
        } else if (sign != '+') {
            size_t l = text_end, j;
            while (l > L->pos && L->s[l - 1] != '\n')
                l--;
            for (j = l; j < text_end && coli__tspace_at(L->s, text_end, j, &k);)
                j += k;
            if (l > L->pos && j == text_end)
                text_end = l;
        }
        if (text_end > L->pos)
            COLI_TRY(emit(L, COLI__TK_TEXT, L->s + L->pos, text_end - L->pos, L->pos));
        L->pos = i + 2;
        if (end_sign == '-')
            while (L->pos < L->n && coli__tspace_at(L->s, L->n, L->pos, &k))
                L->pos += k;
        else if (end_sign != '+' && L->pos < L->n && L->s[L->pos] == '\n')
            L->pos++;
        return COLI_OK;
    }
    return lfail(L, at, "missing end of raw block");
}

/* Normalizes newlines to "\n" and drops one trailing newline. */
static char *normalize(coli__trt *rt, const char *src, size_t len, size_t *n)
{
    char *o = coli__trt_alloc(rt, len + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            o[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            o[k++] = src[i];
        }
    }
    if (k && o[k - 1] == '\n')
        k--;
    o[k] = '\0';
    *n = k;
    return o;
}

coli_status coli__tlex(coli__trt *rt, const char *src, size_t len, coli__ttok **toks, size_t *n)
{
    lexer L = {0};
    L.rt = rt;
    L.line = 1;
    L.s = normalize(rt, src, len, &L.n);
    if (!L.s)
        return rt->st;
    int line_starting = 1;
    while (L.pos < L.n) {
        /* The next tag. */
        size_t at = L.pos;
        int kind = 0;
        while (at + 1 < L.n) {
            if (L.s[at] == '{' && (L.s[at + 1] == '{' || L.s[at + 1] == '%' || L.s[at + 1] == '#')) {
                kind = L.s[at + 1];
                break;
            }
            at++;
        }
        if (!kind)
            at = L.n;
        size_t text_end = at;
        char sign = kind && at + 2 < L.n ? L.s[at + 2] : 0;
        size_t k;
        if (kind && sign == '-') {
            while (text_end > L.pos && coli__tspace_before(L.s, L.pos, text_end, &k))
                text_end -= k;
        } else if (kind && sign != '+' && kind != '{') {
            /* lstrip_blocks: blanks between a line's start and the tag. */
            size_t l = text_end;
            while (l > L.pos && L.s[l - 1] != '\n')
                l--;
            int from_line = l > L.pos || line_starting;
            size_t j = l;
            while (j < text_end && coli__tspace_at(L.s, text_end, j, &k))
                j += k;
            if (from_line && j == text_end && j > l)
                text_end = l;
        }
        if (text_end > L.pos)
            COLI_TRY(emit(&L, COLI__TK_TEXT, L.s + L.pos, text_end - L.pos, L.pos));
        if (!kind)
            break;
        size_t after = at + 2 + (sign == '-' || sign == '+');
        int strip_after = 0;
        if (kind == '#') {
            size_t e = after;
            while (e + 1 < L.n && !(L.s[e] == '#' && L.s[e + 1] == '}'))
                e++;
            if (e + 1 >= L.n)
                return lfail(&L, at, "missing end of comment tag");
            strip_after = e > after && L.s[e - 1] == '-' ? 1 : e > after && L.s[e - 1] == '+' ? 2 : 0;
            L.pos = e + 2;
        } else if (kind == '%' && raw_begin(&L, after, &L.pos, &strip_after)) {
            COLI_TRY(lex_raw(&L, at, strip_after));
            line_starting = L.pos > 0 && L.s[L.pos - 1] == '\n';
            continue;
        } else {
            int var = kind == '{';
            COLI_TRY(emit(&L, var ? COLI__TK_VAR_BEGIN : COLI__TK_BLOCK_BEGIN, L.s + at, after - at, at));
            L.pos = after;
            COLI_TRY(lex_tag(&L, var, &strip_after));
            if (var) {
                if (strip_after)
                    while (L.pos < L.n && coli__tspace_at(L.s, L.n, L.pos, &k))
                        L.pos += k;
                line_starting = L.pos > 0 && L.s[L.pos - 1] == '\n' && strip_after;
                continue;
            }
        }
        /* After a block or comment: "-" strips, trim_blocks eats one newline. */
        size_t p0 = L.pos;
        if (strip_after == 1)
            while (L.pos < L.n && coli__tspace_at(L.s, L.n, L.pos, &k))
                L.pos += k;
        else if (strip_after == 0 && L.pos < L.n && L.s[L.pos] == '\n')
            L.pos++;
        line_starting = L.pos > p0 && L.s[L.pos - 1] == '\n';
    }
    COLI_TRY(emit(&L, COLI__TK_EOF, "", 0, L.n));
    *toks = L.t;
    *n = L.nt;
    return COLI_OK;
}
