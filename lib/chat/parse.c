/* parse.c - recursive descent over the tokens, with Jinja's precedence:
 * "x if c else y" < or < and < not < comparisons < + - < ~ < * / // % < **
 * < unary - + < postfix (. [] ()) and filters/tests (| is). */
#include "chat/parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct parser {
    coli__trt *rt;
    coli__ttok *t;
    size_t n, i;
    int depth;
} parser;

typedef struct nvec {
    coli__tnode **v;
    size_t n, cap;
} nvec;

#ifdef __GNUC__
__attribute__((format(printf, 3, 4)))
#endif
static coli_status pfail(parser *P, const coli__ttok *t, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    P->rt->line = 0;
    return coli__trt_fail(P->rt, COLI_EFORMAT, "%d:%d: %s", t->line, t->col, msg);
}

static coli__ttok *cur(parser *P)
{
    return &P->t[P->i];
}

static coli__ttok *take(parser *P)
{
    coli__ttok *t = &P->t[P->i];
    if (t->kind != COLI__TK_EOF)
        P->i++;
    return t;
}

static int tok_is(const coli__ttok *t, int kind, const char *s)
{
    return t->kind == kind && t->n == strlen(s) && memcmp(t->p, s, t->n) == 0;
}

static int is_op(parser *P, const char *s)
{
    return tok_is(cur(P), COLI__TK_OP, s);
}

static int is_name(parser *P, const char *s)
{
    return tok_is(cur(P), COLI__TK_NAME, s);
}

static const char *tok_desc(const coli__ttok *t)
{
    switch (t->kind) {
    case COLI__TK_EOF: return "end of template";
    case COLI__TK_VAR_END: return "end of print statement";
    case COLI__TK_BLOCK_END: return "end of statement block";
    case COLI__TK_TEXT: return "template data";
    default: return "token";
    }
}

static coli_status expect_op(parser *P, const char *s)
{
    if (!is_op(P, s)) {
        coli__ttok *t = cur(P);
        if (t->kind == COLI__TK_OP || t->kind == COLI__TK_NAME)
            return pfail(P, t, "expected '%s', got '%.*s'", s, (int)(t->n > 40 ? 40 : t->n), t->p);
        return pfail(P, t, "expected '%s', got %s", s, tok_desc(t));
    }
    take(P);
    return COLI_OK;
}

static coli_status expect_kind(parser *P, int kind, const char *what)
{
    coli__ttok *t = cur(P);
    if (t->kind != kind) {
        if (t->kind == COLI__TK_OP || t->kind == COLI__TK_NAME)
            return pfail(P, t, "expected %s, got '%.*s'", what, (int)(t->n > 40 ? 40 : t->n), t->p);
        return pfail(P, t, "expected %s, got %s", what, tok_desc(t));
    }
    take(P);
    return COLI_OK;
}

static coli__tnode *node(parser *P, int kind, const coli__ttok *t)
{
    coli__tnode *n = coli__trt_alloc(P->rt, sizeof *n);
    if (n) {
        n->kind = (uint8_t)kind;
        n->line = t->line;
    }
    return n;
}

static coli_status push(parser *P, nvec *v, coli__tnode *n)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        coli__tnode **p = coli__trt_alloc(P->rt, cap * sizeof *p);
        if (!p)
            return P->rt->st;
        if (v->n)
            memcpy(p, v->v, v->n * sizeof *p);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = n;
    return COLI_OK;
}

static coli_status push_name(parser *P, const char ***names, size_t *n, size_t *cap, const coli__ttok *t)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        const char **p = coli__trt_alloc(P->rt, c * sizeof *p);
        if (!p)
            return P->rt->st;
        if (*n)
            memcpy(p, *names, *n * sizeof *p);
        *names = p;
        *cap = c;
    }
    char *s = coli__trt_alloc(P->rt, t->n + 1);
    if (!s)
        return P->rt->st;
    memcpy(s, t->p, t->n);
    (*names)[(*n)++] = s;
    return COLI_OK;
}

static coli_status enter(parser *P)
{
    if (++P->depth > COLI__TPL_PARSE_DEPTH) {
        P->rt->line = 0;
        return coli__trt_fail(P->rt, COLI_ERANGE, "%d:%d: nested more than %d deep", cur(P)->line,
                              cur(P)->col, COLI__TPL_PARSE_DEPTH);
    }
    return COLI_OK;
}

#define NEW(var, kind, tok)             \
    coli__tnode *var = node(P, kind, tok); \
    if (!var)                           \
    return P->rt->st

/* In a comma-separated list closed by close, of which count items are
 * read: *more is 0 once close is consumed (a trailing comma is allowed). */
static coli_status next_item(parser *P, const char *close, size_t count, int *more)
{
    if (count && !is_op(P, close))
        COLI_TRY(expect_op(P, ","));
    *more = !is_op(P, close);
    if (!*more)
        take(P);
    return COLI_OK;
}

static coli_status parse_expr(parser *P, int with_cond, coli__tnode **out);
static coli_status parse_unary(parser *P, int with_filter, coli__tnode **out);
static coli_status parse_or(parser *P, coli__tnode **out);

/* An expression, or several separated by commas as a tuple. */
static coli_status parse_tuple(parser *P, int with_cond, coli__tnode **out)
{
    coli__ttok *t = cur(P);
    coli__tnode *first;
    COLI_TRY(parse_expr(P, with_cond, &first));
    if (!is_op(P, ",")) {
        *out = first;
        return COLI_OK;
    }
    NEW(tn, COLI__N_LIST, t);
    tn->op = 1;
    nvec v = {0};
    COLI_TRY(push(P, &v, first));
    while (is_op(P, ",")) {
        take(P);
        int k = cur(P)->kind;
        if (k == COLI__TK_VAR_END || k == COLI__TK_BLOCK_END || is_op(P, ")") || is_op(P, "="))
            break;
        coli__tnode *e;
        COLI_TRY(parse_expr(P, with_cond, &e));
        COLI_TRY(push(P, &v, e));
    }
    tn->kids = v.v;
    tn->n = v.n;
    *out = tn;
    return COLI_OK;
}

/* (args, name=value, ...) after the "(" was seen. */
static coli_status parse_call_args(parser *P, coli__tnode *call)
{
    COLI_TRY(expect_op(P, "("));
    nvec pos = {0}, kw = {0};
    size_t cap = 0;
    for (;;) {
        int more;
        COLI_TRY(next_item(P, ")", pos.n + kw.n, &more));
        if (!more)
            break;
        coli__ttok *t = cur(P);
        if (t->kind == COLI__TK_NAME && tok_is(&P->t[P->i + 1], COLI__TK_OP, "=")) {
            take(P);
            take(P);
            coli__tnode *e;
            COLI_TRY(parse_expr(P, 1, &e));
            COLI_TRY(push_name(P, &call->names, &call->nn, &cap, t));
            COLI_TRY(push(P, &kw, e));
        } else {
            if (kw.n)
                return pfail(P, t, "positional argument after keyword argument");
            coli__tnode *e;
            COLI_TRY(parse_expr(P, 1, &e));
            COLI_TRY(push(P, &pos, e));
        }
    }
    call->kids = pos.v;
    call->n = pos.n;
    call->kids2 = kw.v;
    call->n2 = kw.n;
    return COLI_OK;
}

static coli_status parse_primary(parser *P, coli__tnode **out)
{
    coli__ttok *t = cur(P);
    if (t->kind == COLI__TK_NAME) {
        take(P);
        NEW(n, COLI__N_CONST, t);
        if (tok_is(t, COLI__TK_NAME, "true") || tok_is(t, COLI__TK_NAME, "True"))
            n->val = coli__tv_bool(1);
        else if (tok_is(t, COLI__TK_NAME, "false") || tok_is(t, COLI__TK_NAME, "False"))
            n->val = coli__tv_bool(0);
        else if (tok_is(t, COLI__TK_NAME, "none") || tok_is(t, COLI__TK_NAME, "None"))
            n->val = coli__tv_none();
        else {
            n->kind = COLI__N_NAME;
            n->name = t->p;
            n->name_n = t->n;
        }
        *out = n;
        return COLI_OK;
    }
    if (t->kind == COLI__TK_STRING) {
        take(P);
        NEW(n, COLI__N_CONST, t);
        n->val = coli__tv_strn(t->p, t->n);
        if (cur(P)->kind == COLI__TK_STRING) {
            /* Adjacent literals are one string. */
            coli__tsb b = {0};
            COLI_TRY(coli__tsb_put(P->rt, &b, t->p, t->n));
            while (cur(P)->kind == COLI__TK_STRING) {
                coli__ttok *u = take(P);
                COLI_TRY(coli__tsb_put(P->rt, &b, u->p, u->n));
            }
            n->val = coli__tsb_value(&b);
        }
        *out = n;
        return COLI_OK;
    }
    if (t->kind == COLI__TK_INT || t->kind == COLI__TK_FLOAT) {
        take(P);
        NEW(n, COLI__N_CONST, t);
        n->val = t->kind == COLI__TK_INT ? coli__tv_int(t->i) : coli__tv_float(t->f);
        *out = n;
        return COLI_OK;
    }
    if (tok_is(t, COLI__TK_OP, "(")) {
        take(P);
        if (is_op(P, ")")) {
            take(P);
            NEW(n, COLI__N_LIST, t);
            n->op = 1;
            *out = n;
            return COLI_OK;
        }
        coli__tnode *e;
        COLI_TRY(parse_expr(P, 1, &e));
        if (is_op(P, ",")) {
            NEW(n, COLI__N_LIST, t);
            n->op = 1;
            nvec v = {0};
            COLI_TRY(push(P, &v, e));
            while (is_op(P, ",")) {
                take(P);
                if (is_op(P, ")"))
                    break;
                COLI_TRY(parse_expr(P, 1, &e));
                COLI_TRY(push(P, &v, e));
            }
            n->kids = v.v;
            n->n = v.n;
            e = n;
        }
        COLI_TRY(expect_op(P, ")"));
        *out = e;
        return COLI_OK;
    }
    if (tok_is(t, COLI__TK_OP, "[")) {
        take(P);
        NEW(n, COLI__N_LIST, t);
        nvec v = {0};
        for (;;) {
            int more;
            COLI_TRY(next_item(P, "]", v.n, &more));
            if (!more)
                break;
            coli__tnode *e;
            COLI_TRY(parse_expr(P, 1, &e));
            COLI_TRY(push(P, &v, e));
        }
        n->kids = v.v;
        n->n = v.n;
        *out = n;
        return COLI_OK;
    }
    if (tok_is(t, COLI__TK_OP, "{")) {
        take(P);
        NEW(n, COLI__N_DICT, t);
        nvec k = {0}, v = {0};
        for (;;) {
            int more;
            COLI_TRY(next_item(P, "}", k.n, &more));
            if (!more)
                break;
            coli__tnode *e;
            COLI_TRY(parse_expr(P, 1, &e));
            COLI_TRY(push(P, &k, e));
            COLI_TRY(expect_op(P, ":"));
            COLI_TRY(parse_expr(P, 1, &e));
            COLI_TRY(push(P, &v, e));
        }
        n->kids = k.v;
        n->kids2 = v.v;
        n->n = k.n;
        n->n2 = v.n;
        *out = n;
        return COLI_OK;
    }
    if (t->kind == COLI__TK_OP || t->kind == COLI__TK_NAME)
        return pfail(P, t, "unexpected '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p);
    return pfail(P, t, "unexpected %s", tok_desc(t));
}

static coli_status parse_subscript(parser *P, coli__tnode *obj, const coli__ttok *t, coli__tnode **out)
{
    coli__tnode *parts[3] = {NULL, NULL, NULL};
    int slice = 0, k = 0;
    for (;;) {
        if (is_op(P, "]"))
            break;
        if (is_op(P, ":")) {
            take(P);
            slice = 1;
            if (++k > 2)
                return pfail(P, cur(P), "too many ':' in a slice");
            continue;
        }
        if (parts[k])
            return pfail(P, cur(P), "expected ']'");
        COLI_TRY(parse_expr(P, 1, &parts[k]));
    }
    take(P);
    if (!slice) {
        if (!parts[0])
            return pfail(P, t, "empty subscript");
        NEW(n, COLI__N_ITEM, t);
        n->a = obj;
        n->b = parts[0];
        *out = n;
        return COLI_OK;
    }
    NEW(n, COLI__N_SLICE, t);
    n->a = obj;
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    *out = n;
    return COLI_OK;
}

/* A node of kind on operand a, named by the token name (may be NULL). */
static coli__tnode *node_on(parser *P, int kind, const coli__ttok *at, coli__tnode *a, const coli__ttok *name)
{
    coli__tnode *n = node(P, kind, at);
    if (n) {
        n->a = a;
        if (name) {
            n->name = name->p;
            n->name_n = name->n;
        }
    }
    return n;
}

/* callee(args) at the "(" token t. */
static coli_status parse_call(parser *P, const coli__ttok *t, coli__tnode **e)
{
    coli__tnode *n = node_on(P, COLI__N_CALL, t, *e, NULL);
    if (!n)
        return P->rt->st;
    COLI_TRY(parse_call_args(P, n));
    *e = n;
    return COLI_OK;
}

static coli_status parse_postfix(parser *P, coli__tnode *e, coli__tnode **out)
{
    for (;;) {
        coli__ttok *t = cur(P);
        if (tok_is(t, COLI__TK_OP, ".")) {
            take(P);
            coli__ttok *a = take(P);
            if (a->kind == COLI__TK_NAME) {
                e = node_on(P, COLI__N_ATTR, t, e, a);
                if (!e)
                    return P->rt->st;
            } else if (a->kind == COLI__TK_INT) {
                NEW(k, COLI__N_CONST, a);
                k->val = coli__tv_int(a->i);
                NEW(n, COLI__N_ITEM, t);
                n->a = e;
                n->b = k;
                e = n;
            } else {
                return pfail(P, a, "expected a name after '.'");
            }
        } else if (tok_is(t, COLI__TK_OP, "[")) {
            take(P);
            COLI_TRY(parse_subscript(P, e, t, &e));
        } else if (tok_is(t, COLI__TK_OP, "(")) {
            COLI_TRY(parse_call(P, t, &e));
        } else {
            *out = e;
            return COLI_OK;
        }
    }
}

static coli_status parse_filters(parser *P, coli__tnode *e, coli__tnode **out)
{
    for (;;) {
        coli__ttok *t = cur(P);
        if (tok_is(t, COLI__TK_OP, "|")) {
            take(P);
            coli__ttok *nm = cur(P);
            COLI_TRY(expect_kind(P, COLI__TK_NAME, "a filter name"));
            coli__tnode *n = node_on(P, COLI__N_FILTER, nm, e, nm);
            if (!n)
                return P->rt->st;
            if (is_op(P, "("))
                COLI_TRY(parse_call_args(P, n));
            e = n;
        } else if (tok_is(t, COLI__TK_NAME, "is")) {
            take(P);
            int neg = 0;
            if (is_name(P, "not")) {
                take(P);
                neg = 1;
            }
            coli__ttok *nm = cur(P);
            COLI_TRY(expect_kind(P, COLI__TK_NAME, "a test name"));
            coli__tnode *n = node_on(P, COLI__N_TEST, nm, e, nm);
            if (!n)
                return P->rt->st;
            n->op = (uint8_t)neg;
            coli__ttok *u = cur(P);
            if (is_op(P, "(")) {
                COLI_TRY(parse_call_args(P, n));
            } else if ((u->kind == COLI__TK_NAME && !tok_is(u, COLI__TK_NAME, "else") &&
                        !tok_is(u, COLI__TK_NAME, "or") && !tok_is(u, COLI__TK_NAME, "and") &&
                        !tok_is(u, COLI__TK_NAME, "if") && !tok_is(u, COLI__TK_NAME, "is") &&
                        !tok_is(u, COLI__TK_NAME, "in") && !tok_is(u, COLI__TK_NAME, "not")) ||
                       u->kind == COLI__TK_STRING || u->kind == COLI__TK_INT || u->kind == COLI__TK_FLOAT ||
                       tok_is(u, COLI__TK_OP, "[") || tok_is(u, COLI__TK_OP, "{")) {
                /* One argument without parentheses: "is divisibleby 3". */
                coli__tnode *arg;
                COLI_TRY(parse_primary(P, &arg));
                COLI_TRY(parse_postfix(P, arg, &arg));
                n->kids = coli__trt_alloc(P->rt, sizeof *n->kids);
                if (!n->kids)
                    return P->rt->st;
                n->kids[0] = arg;
                n->n = 1;
            }
            e = n;
        } else if (tok_is(t, COLI__TK_OP, "(")) {
            COLI_TRY(parse_call(P, t, &e));
        } else {
            *out = e;
            return COLI_OK;
        }
    }
}

static coli_status parse_unary(parser *P, int with_filter, coli__tnode **out)
{
    COLI_TRY(enter(P));
    coli__ttok *t = cur(P);
    coli__tnode *e;
    if (tok_is(t, COLI__TK_OP, "-") || tok_is(t, COLI__TK_OP, "+")) {
        take(P);
        NEW(n, COLI__N_UNARY, t);
        n->op = t->p[0] == '-' ? COLI__OP_NEG : COLI__OP_POS;
        COLI_TRY(parse_unary(P, 0, &n->a));
        e = n;
    } else {
        COLI_TRY(parse_primary(P, &e));
    }
    COLI_TRY(parse_postfix(P, e, &e));
    if (with_filter)
        COLI_TRY(parse_filters(P, e, &e));
    P->depth--;
    *out = e;
    return COLI_OK;
}

/* A left-associative level of binary operators (ops, by name when names),
 * whose operands are next's. */
typedef coli_status (*level_fn)(parser *P, coli__tnode **out);

static coli_status binary_level(parser *P, int kind, const char *const *ops, const uint8_t *codes, int names,
                                level_fn next, coli__tnode **out)
{
    COLI_TRY(next(P, out));
    for (;;) {
        int k = -1;
        for (int i = 0; ops[i] && k < 0; i++)
            if (names ? is_name(P, ops[i]) : is_op(P, ops[i]))
                k = i;
        if (k < 0)
            return COLI_OK;
        coli__ttok *t = take(P);
        NEW(n, kind, t);
        n->op = codes ? codes[k] : 0;
        n->a = *out;
        COLI_TRY(next(P, &n->b));
        *out = n;
    }
}

static coli_status parse_operand(parser *P, coli__tnode **out)
{
    return parse_unary(P, 1, out);
}

static coli_status parse_pow(parser *P, coli__tnode **out)
{
    static const char *const ops[] = {"**", NULL};
    static const uint8_t codes[] = {COLI__OP_POW};
    return binary_level(P, COLI__N_BINOP, ops, codes, 0, parse_operand, out);
}

static coli_status parse_math2(parser *P, coli__tnode **out)
{
    static const char *const ops[] = {"*", "/", "//", "%", NULL};
    static const uint8_t codes[] = {COLI__OP_MUL, COLI__OP_DIV, COLI__OP_FLOORDIV, COLI__OP_MOD};
    return binary_level(P, COLI__N_BINOP, ops, codes, 0, parse_pow, out);
}

static coli_status parse_concat(parser *P, coli__tnode **out)
{
    coli__ttok *t = cur(P);
    coli__tnode *first;
    COLI_TRY(parse_math2(P, &first));
    if (!is_op(P, "~")) {
        *out = first;
        return COLI_OK;
    }
    NEW(n, COLI__N_CONCAT, t);
    nvec v = {0};
    COLI_TRY(push(P, &v, first));
    while (is_op(P, "~")) {
        take(P);
        coli__tnode *e;
        COLI_TRY(parse_math2(P, &e));
        COLI_TRY(push(P, &v, e));
    }
    n->kids = v.v;
    n->n = v.n;
    *out = n;
    return COLI_OK;
}

static coli_status parse_math1(parser *P, coli__tnode **out)
{
    static const char *const ops[] = {"+", "-", NULL};
    static const uint8_t codes[] = {COLI__OP_ADD, COLI__OP_SUB};
    return binary_level(P, COLI__N_BINOP, ops, codes, 0, parse_concat, out);
}

static int compare_op(parser *P)
{
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    for (int i = 0; i < 6; i++)
        if (is_op(P, ops[i]))
            return COLI__OP_EQ + i;
    if (is_name(P, "in"))
        return COLI__OP_IN;
    if (is_name(P, "not") && tok_is(&P->t[P->i + 1], COLI__TK_NAME, "in"))
        return COLI__OP_NOTIN;
    return -1;
}

static coli_status parse_compare(parser *P, coli__tnode **out)
{
    coli__ttok *t = cur(P);
    coli__tnode *first;
    COLI_TRY(parse_math1(P, &first));
    if (compare_op(P) < 0) {
        *out = first;
        return COLI_OK;
    }
    NEW(n, COLI__N_COMPARE, t);
    nvec v = {0};
    COLI_TRY(push(P, &v, first));
    uint8_t *ops = NULL;
    size_t nops = 0, cap = 0;
    int op;
    while ((op = compare_op(P)) >= 0) {
        take(P);
        if (op == COLI__OP_NOTIN)
            take(P);
        if (nops == cap) {
            size_t c = cap ? cap * 2 : 4;
            uint8_t *p = coli__trt_alloc(P->rt, c);
            if (!p)
                return P->rt->st;
            if (nops)
                memcpy(p, ops, nops);
            ops = p;
            cap = c;
        }
        ops[nops++] = (uint8_t)op;
        coli__tnode *e;
        COLI_TRY(parse_math1(P, &e));
        COLI_TRY(push(P, &v, e));
    }
    n->kids = v.v;
    n->n = v.n;
    n->ops = ops;
    *out = n;
    return COLI_OK;
}

static coli_status parse_not(parser *P, coli__tnode **out)
{
    if (is_name(P, "not")) {
        coli__ttok *t = take(P);
        COLI_TRY(enter(P));
        NEW(n, COLI__N_NOT, t);
        COLI_TRY(parse_not(P, &n->a));
        P->depth--;
        *out = n;
        return COLI_OK;
    }
    return parse_compare(P, out);
}

static coli_status parse_and(parser *P, coli__tnode **out)
{
    static const char *const ops[] = {"and", NULL};
    return binary_level(P, COLI__N_AND, ops, NULL, 1, parse_not, out);
}

static coli_status parse_or(parser *P, coli__tnode **out)
{
    static const char *const ops[] = {"or", NULL};
    return binary_level(P, COLI__N_OR, ops, NULL, 1, parse_and, out);
}

static coli_status parse_expr(parser *P, int with_cond, coli__tnode **out)
{
    COLI_TRY(enter(P));
    COLI_TRY(parse_or(P, out));
    while (with_cond && is_name(P, "if")) {
        coli__ttok *t = take(P);
        NEW(n, COLI__N_COND, t);
        n->b = *out;
        COLI_TRY(parse_or(P, &n->a));
        if (is_name(P, "else")) {
            take(P);
            COLI_TRY(parse_expr(P, 1, &n->c));
        }
        *out = n;
    }
    P->depth--;
    return COLI_OK;
}

/* ---- statements ---- */

static coli_status parse_body(parser *P, const char *const *ends, int *which, coli__tnode **out);

static coli_status block_end(parser *P)
{
    return expect_kind(P, COLI__TK_BLOCK_END, "end of statement block");
}

/* The statements of a block into *kids, *n, up to one of ends (*which);
 * with close, the end tag's "%}" too. */
static coli_status sub_body(parser *P, const char *const *ends, int *which, coli__tnode ***kids, size_t *n,
                            int close)
{
    coli__tnode *body;
    COLI_TRY(parse_body(P, ends, which, &body));
    *kids = body->kids;
    *n = body->n;
    return close ? block_end(P) : COLI_OK;
}

/* Assignment targets: a name, or names separated by commas. */
static coli_status parse_targets(parser *P, coli__tnode *n)
{
    size_t cap = 0;
    int paren = is_op(P, "(");
    if (paren)
        take(P);
    for (;;) {
        coli__ttok *t = cur(P);
        COLI_TRY(expect_kind(P, COLI__TK_NAME, "a name to assign to"));
        COLI_TRY(push_name(P, &n->names, &n->nn, &cap, t));
        if (!is_op(P, ","))
            break;
        take(P);
        n->flag = 1;
        if (!(cur(P)->kind == COLI__TK_NAME))
            break;
    }
    if (paren) {
        n->flag = 1;
        COLI_TRY(expect_op(P, ")"));
    }
    return COLI_OK;
}

static coli_status parse_if(parser *P, const coli__ttok *t, coli__tnode **out)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    NEW(n, COLI__N_IF, t);
    COLI_TRY(parse_tuple(P, 1, &n->a));
    COLI_TRY(block_end(P));
    int which;
    COLI_TRY(sub_body(P, ends, &which, &n->kids, &n->n, 0));
    if (which == 0) {
        coli__tnode *elif;
        COLI_TRY(parse_if(P, &P->t[P->i - 1], &elif));
        n->kids2 = coli__trt_alloc(P->rt, sizeof *n->kids2);
        if (!n->kids2)
            return P->rt->st;
        n->kids2[0] = elif;
        n->n2 = 1;
    } else {
        COLI_TRY(block_end(P));
        if (which == 1)
            COLI_TRY(sub_body(P, endif, &which, &n->kids2, &n->n2, 1));
    }
    *out = n;
    return COLI_OK;
}

static coli_status parse_for(parser *P, const coli__ttok *t, coli__tnode **out)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    static const char *const endfor[] = {"endfor", NULL};
    NEW(n, COLI__N_FOR, t);
    COLI_TRY(parse_targets(P, n));
    if (!is_name(P, "in"))
        return pfail(P, cur(P), "expected 'in'");
    take(P);
    COLI_TRY(parse_tuple(P, 0, &n->a));
    if (is_name(P, "if")) {
        take(P);
        COLI_TRY(parse_expr(P, 1, &n->b));
    }
    if (is_name(P, "recursive"))
        return pfail(P, cur(P), "recursive loops are not supported");
    COLI_TRY(block_end(P));
    int which;
    COLI_TRY(sub_body(P, ends, &which, &n->kids, &n->n, 1));
    if (which == 0)
        COLI_TRY(sub_body(P, endfor, &which, &n->kids2, &n->n2, 1));
    *out = n;
    return COLI_OK;
}

static coli_status parse_set(parser *P, const coli__ttok *t, coli__tnode **out)
{
    static const char *const endset[] = {"endset", NULL};
    NEW(n, COLI__N_SET, t);
    if (cur(P)->kind == COLI__TK_NAME && tok_is(&P->t[P->i + 1], COLI__TK_OP, ".")) {
        coli__ttok *ns = take(P);
        take(P);
        coli__ttok *attr = cur(P);
        COLI_TRY(expect_kind(P, COLI__TK_NAME, "an attribute name"));
        n->kind = COLI__N_SET_ATTR;
        n->name = ns->p;
        n->name_n = ns->n;
        n->val = coli__tv_strn(attr->p, attr->n);
        COLI_TRY(expect_op(P, "="));
        COLI_TRY(parse_tuple(P, 1, &n->a));
        COLI_TRY(block_end(P));
        *out = n;
        return COLI_OK;
    }
    COLI_TRY(parse_targets(P, n));
    if (is_op(P, "=")) {
        take(P);
        COLI_TRY(parse_tuple(P, 1, &n->a));
        COLI_TRY(block_end(P));
    } else {
        if (n->flag)
            return pfail(P, cur(P), "expected '='");
        COLI_TRY(block_end(P));
        int which;
        COLI_TRY(sub_body(P, endset, &which, &n->kids, &n->n, 1));
        n->flag = 2;
    }
    *out = n;
    return COLI_OK;
}

static coli_status parse_macro(parser *P, const coli__ttok *t, coli__tnode **out)
{
    static const char *const endmacro[] = {"endmacro", NULL};
    NEW(n, COLI__N_MACRO, t);
    coli__ttok *nm = cur(P);
    COLI_TRY(expect_kind(P, COLI__TK_NAME, "a macro name"));
    n->name = nm->p;
    n->name_n = nm->n;
    COLI_TRY(expect_op(P, "("));
    nvec defs = {0};
    size_t cap = 0;
    for (;;) {
        int more;
        COLI_TRY(next_item(P, ")", n->nn, &more));
        if (!more)
            break;
        coli__ttok *p = cur(P);
        COLI_TRY(expect_kind(P, COLI__TK_NAME, "a parameter name"));
        COLI_TRY(push_name(P, &n->names, &n->nn, &cap, p));
        coli__tnode *def = NULL;
        if (is_op(P, "=")) {
            take(P);
            COLI_TRY(parse_expr(P, 1, &def));
        } else if (defs.n && defs.v[defs.n - 1]) {
            return pfail(P, p, "non-default argument follows default argument");
        }
        COLI_TRY(push(P, &defs, def));
    }
    n->kids2 = defs.v;
    n->n2 = defs.n;
    COLI_TRY(block_end(P));
    int which;
    COLI_TRY(sub_body(P, endmacro, &which, &n->kids, &n->n, 0));
    if (cur(P)->kind == COLI__TK_NAME && !tok_is(cur(P), COLI__TK_NAME, "endmacro"))
        take(P); /* {% endmacro name %} */
    COLI_TRY(block_end(P));
    *out = n;
    return COLI_OK;
}

/* Statements until one of ends (consumed up to its name; *which its
 * index), or the end of the template when ends is NULL. */
static coli_status parse_body(parser *P, const char *const *ends, int *which, coli__tnode **out)
{
    COLI_TRY(enter(P));
    NEW(body, COLI__N_BODY, cur(P));
    nvec v = {0};
    for (;;) {
        coli__ttok *t = cur(P);
        coli__tnode *s = NULL;
        if (t->kind == COLI__TK_EOF) {
            if (ends)
            {
                size_t last = 0;
                while (ends[last + 1])
                    last++;
                return pfail(P, t, "unexpected end of template, expected '%s'", ends[last]);
            }
            break;
        }
        if (t->kind == COLI__TK_TEXT) {
            take(P);
            NEW(n, COLI__N_TEXT, t);
            n->val = coli__tv_strn(t->p, t->n);
            s = n;
        } else if (t->kind == COLI__TK_VAR_BEGIN) {
            take(P);
            NEW(n, COLI__N_OUTPUT, t);
            COLI_TRY(parse_tuple(P, 1, &n->a));
            COLI_TRY(expect_kind(P, COLI__TK_VAR_END, "end of print statement"));
            s = n;
        } else if (t->kind == COLI__TK_BLOCK_BEGIN) {
            take(P);
            coli__ttok *nm = cur(P);
            if (nm->kind != COLI__TK_NAME)
                return pfail(P, nm, "expected a statement name");
            for (int i = 0; ends && ends[i]; i++)
                if (tok_is(nm, COLI__TK_NAME, ends[i])) {
                    take(P);
                    *which = i;
                    body->kids = v.v;
                    body->n = v.n;
                    P->depth--;
                    *out = body;
                    return COLI_OK;
                }
            take(P);
            if (tok_is(nm, COLI__TK_NAME, "if")) {
                COLI_TRY(parse_if(P, nm, &s));
            } else if (tok_is(nm, COLI__TK_NAME, "for")) {
                COLI_TRY(parse_for(P, nm, &s));
            } else if (tok_is(nm, COLI__TK_NAME, "set")) {
                COLI_TRY(parse_set(P, nm, &s));
            } else if (tok_is(nm, COLI__TK_NAME, "macro")) {
                COLI_TRY(parse_macro(P, nm, &s));
            } else if (tok_is(nm, COLI__TK_NAME, "generation")) {
                /* transformers' {% generation %} marks the assistant's
                 * tokens; rendered, it is its body. */
                static const char *const endgen[] = {"endgeneration", NULL};
                static const coli__tv yes = {.t = COLI__TV_BOOL, .b = 1};
                NEW(n, COLI__N_IF, nm);
                NEW(c, COLI__N_CONST, nm);
                c->val = yes;
                n->a = c;
                int w;
                COLI_TRY(block_end(P));
                COLI_TRY(sub_body(P, endgen, &w, &n->kids, &n->n, 1));
                s = n;
            } else if (tok_is(nm, COLI__TK_NAME, "break") || tok_is(nm, COLI__TK_NAME, "continue")) {
                NEW(n, nm->p[0] == 'b' ? COLI__N_BREAK : COLI__N_CONTINUE, nm);
                COLI_TRY(block_end(P));
                s = n;
            } else {
                return pfail(P, nm, "unknown or unexpected tag '%.*s'", (int)(nm->n > 40 ? 40 : nm->n), nm->p);
            }
        } else {
            return pfail(P, t, "unexpected %s", tok_desc(t));
        }
        COLI_TRY(push(P, &v, s));
    }
    body->kids = v.v;
    body->n = v.n;
    P->depth--;
    *out = body;
    return COLI_OK;
}

coli_status coli__tparse(coli__trt *rt, const char *src, size_t len, coli__tnode **root)
{
    parser P = {0};
    P.rt = rt;
    COLI_TRY(coli__tlex(rt, src, len, &P.t, &P.n));
    return parse_body(&P, NULL, NULL, root);
}
