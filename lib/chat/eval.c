/* eval.c - the interpreter: scopes, statements, expressions, macros.
 *
 * Scopes follow Jinja: the template's variables and top-level "set" live in
 * the outermost frame; each loop iteration and each macro call gets a fresh
 * frame, so "set" inside them is not seen after (hence namespace()). */
#include "chat/eval.h"

#include <string.h>

typedef struct frame frame;
struct frame {
    frame *parent;
    coli__tdict vars;
};

typedef struct macro {
    const coli__tnode *def;
    frame *closure;
} macro;

typedef struct ev {
    coli__trt *rt;
    coli__tsb *out;
    int loops; /* loops enclosing the statement being run, within its macro */
    int flow;  /* FLOW_ after break or continue */
    int nest;
} ev;

enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

static coli_status eval(ev *E, frame *f, const coli__tnode *n, coli__tv *out);
static coli_status exec_body(ev *E, frame *f, coli__tnode *const *kids, size_t n);

static coli_status new_frame(ev *E, frame *parent, frame **out)
{
    frame *f = coli__trt_alloc(E->rt, sizeof *f);
    if (!f)
        return E->rt->st;
    f->parent = parent;
    *out = f;
    return COLI_OK;
}

static coli_status bind(ev *E, frame *f, const char *name, size_t n, coli__tv v)
{
    return coli__tdict_set(E->rt, &f->vars, coli__tv_strn(name, n), v);
}

static coli__tv lookup(frame *f, const char *name, size_t n)
{
    for (; f; f = f->parent) {
        const coli__tv *v = coli__tdict_gets(&f->vars, name, n);
        if (v)
            return *v;
    }
    coli__tv g;
    if (coli__tglobal(name, n, &g))
        return g;
    return coli__tv_undefn(name, n);
}

/* Evaluates the arguments of a call or filter node. */
static coli_status eval_args(ev *E, frame *f, const coli__tnode *n, coli__targs *a)
{
    coli__tv *pos = coli__trt_alloc(E->rt, (n->n + n->n2 + 1) * sizeof *pos);
    if (!pos)
        return E->rt->st;
    for (size_t i = 0; i < n->n; i++)
        COLI_TRY(eval(E, f, n->kids[i], &pos[i]));
    for (size_t i = 0; i < n->n2; i++)
        COLI_TRY(eval(E, f, n->kids2[i], &pos[n->n + i]));
    a->pos = pos;
    a->npos = n->n;
    a->kw = pos + n->n;
    a->nkw = n->n2;
    a->names = n->names;
    return COLI_OK;
}

static coli_status call_macro(ev *E, const coli__tv *mv, const coli__targs *a, coli__tv *out)
{
    const macro *m = mv->p;
    const coli__tnode *d = m->def;
    coli__trt *rt = E->rt;
    if (a->npos > d->nn)
        return coli__trt_fail(rt, COLI_EINVAL, "macro '%.*s' takes not more than %zu argument(s)",
                              (int)d->name_n, d->name, d->nn);
    if (rt->depth >= COLI__TPL_DEPTH_MAX)
        return coli__trt_fail(rt, COLI_ERANGE, "macro calls nested more than %d deep", COLI__TPL_DEPTH_MAX);
    COLI_TRY(coli__trt_step(rt));
    frame *f = NULL;
    COLI_TRY(new_frame(E, m->closure, &f));
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i;
        for (i = 0; i < d->nn; i++)
            if (strcmp(d->names[i], a->names[k]) == 0)
                break;
        if (i == d->nn)
            return coli__trt_fail(rt, COLI_EINVAL, "macro '%.*s' takes no keyword argument '%s'", (int)d->name_n,
                                  d->name, a->names[k]);
        if (i < a->npos)
            return coli__trt_fail(rt, COLI_EINVAL, "macro '%.*s' got multiple values for argument '%s'",
                                  (int)d->name_n, d->name, a->names[k]);
    }
    for (size_t i = 0; i < d->nn; i++) {
        coli__tv v;
        const coli__tv *given = i < a->npos ? &a->pos[i] : NULL;
        for (size_t k = 0; !given && k < a->nkw; k++)
            if (strcmp(d->names[i], a->names[k]) == 0)
                given = &a->kw[k];
        if (given) {
            v = *given;
        } else if (d->kids2[i]) {
            COLI_TRY(eval(E, f, d->kids2[i], &v));
        } else {
            v = coli__tv_undef(d->names[i]);
        }
        COLI_TRY(bind(E, f, d->names[i], strlen(d->names[i]), v));
    }
    coli__tsb buf = {0}, *saved = E->out;
    int loops = E->loops, line = rt->line;
    COLI_TRY(coli__tsb_put(rt, &buf, "", 0));
    E->out = &buf;
    E->loops = 0;
    rt->depth++;
    coli_status st = exec_body(E, f, d->kids, d->n);
    rt->depth--;
    E->out = saved;
    E->loops = loops;
    rt->line = line;
    COLI_TRY(st);
    *out = coli__tsb_value(&buf);
    return COLI_OK;
}

static coli_status call(ev *E, const coli__tv *fn, const coli__targs *a, coli__tv *out)
{
    switch (fn->t) {
    case COLI__TV_MACRO:
        return call_macro(E, fn, a, out);
    case COLI__TV_FUNC:
        return coli__tcall_func(E->rt, fn, a, out);
    case COLI__TV_METHOD:
        return coli__tcall_method(E->rt, fn, a, out);
    case COLI__TV_UNDEF:
        return coli__top_undefined_error(E->rt, fn);
    default:
        return coli__trt_fail(E->rt, COLI_EINVAL, "'%s' object is not callable", coli__tv_type_name(fn));
    }
}

static coli_status eval_compare(ev *E, frame *f, const coli__tnode *n, coli__tv *out)
{
    coli__tv left, right;
    COLI_TRY(eval(E, f, n->kids[0], &left));
    for (size_t i = 1; i < n->n; i++) {
        int r;
        COLI_TRY(eval(E, f, n->kids[i], &right));
        E->rt->line = n->line;
        COLI_TRY(coli__top_compare(E->rt, n->ops[i - 1], &left, &right, &r));
        if (!r) {
            *out = coli__tv_bool(0);
            return COLI_OK;
        }
        left = right;
    }
    *out = coli__tv_bool(1);
    return COLI_OK;
}

/* Bounds the C stack: expressions and blocks in progress, all macros together. */
#define NEST_MAX 3000

static coli_status eval_node(ev *E, frame *f, const coli__tnode *n, coli__tv *out);

static coli_status eval(ev *E, frame *f, const coli__tnode *n, coli__tv *out)
{
    if (++E->nest > NEST_MAX) {
        E->rt->line = n->line;
        return coli__trt_fail(E->rt, COLI_ERANGE, "expressions and blocks nested more than %d deep", NEST_MAX);
    }
    coli_status st = eval_node(E, f, n, out);
    E->nest--;
    return st;
}

static coli_status eval_node(ev *E, frame *f, const coli__tnode *n, coli__tv *out)
{
    coli__trt *rt = E->rt;
    coli__tv a, b, c;
    coli__targs args;
    int r;
    switch (n->kind) {
    case COLI__N_CONST:
        *out = n->val;
        return COLI_OK;
    case COLI__N_NAME:
        *out = lookup(f, n->name, n->name_n);
        return COLI_OK;
    case COLI__N_LIST:
        COLI_TRY(coli__tv_list_new(rt, n->n, out));
        for (size_t i = 0; i < n->n; i++)
            COLI_TRY(eval(E, f, n->kids[i], &out->l->v[i]));
        out->l->n = n->n;
        out->tuple = n->op;
        return COLI_OK;
    case COLI__N_DICT:
        COLI_TRY(coli__tv_dict_new(rt, n->n, out));
        for (size_t i = 0; i < n->n; i++) {
            COLI_TRY(eval(E, f, n->kids[i], &a));
            COLI_TRY(eval(E, f, n->kids2[i], &b));
            if (a.t == COLI__TV_LIST && !a.tuple) {
                rt->line = n->line;
                return coli__trt_fail(rt, COLI_EINVAL, "unhashable type: 'list'");
            }
            COLI_TRY(coli__tdict_set(rt, out->d, a, b));
        }
        return COLI_OK;
    case COLI__N_ATTR:
        COLI_TRY(eval(E, f, n->a, &a));
        rt->line = n->line;
        return coli__top_getattr(rt, &a, n->name, n->name_n, out);
    case COLI__N_ITEM:
        COLI_TRY(eval(E, f, n->a, &a));
        COLI_TRY(eval(E, f, n->b, &b));
        rt->line = n->line;
        return coli__top_getitem(rt, &a, &b, out);
    case COLI__N_SLICE: {
        coli__tv parts[3];
        const coli__tnode *pn[3] = {n->b, n->c, n->d};
        COLI_TRY(eval(E, f, n->a, &a));
        for (int i = 0; i < 3; i++)
            if (pn[i])
                COLI_TRY(eval(E, f, pn[i], &parts[i]));
        rt->line = n->line;
        return coli__top_slice(rt, &a, n->b ? &parts[0] : NULL, n->c ? &parts[1] : NULL, n->d ? &parts[2] : NULL,
                               out);
    }
    case COLI__N_CALL:
        COLI_TRY(eval(E, f, n->a, &a));
        COLI_TRY(eval_args(E, f, n, &args));
        rt->line = n->line;
        return call(E, &a, &args, out);
    case COLI__N_FILTER:
        COLI_TRY(eval(E, f, n->a, &a));
        COLI_TRY(eval_args(E, f, n, &args));
        rt->line = n->line;
        return coli__tfilter(rt, n->name, n->name_n, &a, &args, out);
    case COLI__N_TEST:
        COLI_TRY(eval(E, f, n->a, &a));
        COLI_TRY(eval_args(E, f, n, &args));
        rt->line = n->line;
        COLI_TRY(coli__ttest(rt, n->name, n->name_n, &a, &args, &r));
        *out = coli__tv_bool(n->op ? !r : r);
        return COLI_OK;
    case COLI__N_BINOP:
        COLI_TRY(eval(E, f, n->a, &a));
        COLI_TRY(eval(E, f, n->b, &b));
        rt->line = n->line;
        return coli__top_binary(rt, n->op, &a, &b, out);
    case COLI__N_UNARY:
        COLI_TRY(eval(E, f, n->a, &a));
        rt->line = n->line;
        return coli__top_unary(rt, n->op, &a, out);
    case COLI__N_AND:
    case COLI__N_OR:
        COLI_TRY(eval(E, f, n->a, &a));
        if (coli__tv_truthy(&a) == (n->kind == COLI__N_OR)) {
            *out = a;
            return COLI_OK;
        }
        return eval(E, f, n->b, out);
    case COLI__N_NOT:
        COLI_TRY(eval(E, f, n->a, &a));
        *out = coli__tv_bool(!coli__tv_truthy(&a));
        return COLI_OK;
    case COLI__N_COND:
        COLI_TRY(eval(E, f, n->a, &c));
        if (coli__tv_truthy(&c))
            return eval(E, f, n->b, out);
        if (n->c)
            return eval(E, f, n->c, out);
        *out = coli__tv_undef("the else of an inline if");
        return COLI_OK;
    case COLI__N_COMPARE:
        return eval_compare(E, f, n, out);
    case COLI__N_CONCAT: {
        coli__tsb sb = {0};
        COLI_TRY(coli__tsb_put(rt, &sb, "", 0));
        for (size_t i = 0; i < n->n; i++) {
            COLI_TRY(eval(E, f, n->kids[i], &a));
            rt->line = n->line;
            COLI_TRY(coli__tv_str(rt, &sb, &a));
        }
        *out = coli__tsb_value(&sb);
        return COLI_OK;
    }
    default:
        rt->line = n->line;
        return coli__trt_fail(rt, COLI_EINVAL, "not an expression");
    }
}

/* Binds targets (one name, or a tuple of names) to v. */
static coli_status assign(ev *E, frame *f, const coli__tnode *n, coli__tv v)
{
    if (!n->flag || n->flag == 2)
        return bind(E, f, n->names[0], strlen(n->names[0]), v);
    coli__tv items;
    if (v.t == COLI__TV_STR || v.t == COLI__TV_DICT)
        COLI_TRY(coli__top_iter(E->rt, &v, &items));
    else if (v.t == COLI__TV_LIST)
        items = v;
    else
        return coli__trt_fail(E->rt, COLI_EINVAL, "cannot unpack non-iterable %s object", coli__tv_type_name(&v));
    if (items.l->n != n->nn)
        return coli__trt_fail(E->rt, COLI_EINVAL, "%s values to unpack (expected %zu, got %zu)",
                              items.l->n > n->nn ? "too many" : "not enough", n->nn, items.l->n);
    for (size_t i = 0; i < n->nn; i++)
        COLI_TRY(bind(E, f, n->names[i], strlen(n->names[i]), items.l->v[i]));
    return COLI_OK;
}

static coli_status exec_for(ev *E, frame *f, const coli__tnode *n)
{
    coli__trt *rt = E->rt;
    coli__tv seq, items;
    COLI_TRY(eval(E, f, n->a, &seq));
    rt->line = n->line;
    COLI_TRY(coli__top_iter(rt, &seq, &items));
    if (n->b) {
        /* The loop's "if" filters before counting: loop.length is of what is kept. */
        coli__tv kept;
        COLI_TRY(coli__tv_list_new(rt, 0, &kept));
        for (size_t i = 0; i < items.l->n; i++) {
            frame *g = NULL;
            coli__tv c;
            COLI_TRY(coli__trt_step(rt));
            COLI_TRY(new_frame(E, f, &g));
            COLI_TRY(assign(E, g, n, items.l->v[i]));
            COLI_TRY(eval(E, g, n->b, &c));
            if (coli__tv_truthy(&c))
                COLI_TRY(coli__tlist_push(rt, kept.l, items.l->v[i]));
        }
        items = kept;
    }
    if (items.l->n == 0)
        return exec_body(E, f, n->kids2, n->n2);
    coli__tloop *L = coli__trt_alloc(rt, sizeof *L);
    if (!L)
        return rt->st;
    L->items = items.l;
    coli__tv lv = {0};
    lv.t = COLI__TV_LOOP;
    lv.p = L;
    E->loops++;
    for (size_t i = 0; i < items.l->n; i++) {
        frame *g = NULL;
        L->index0 = (int64_t)i;
        COLI_TRY(coli__trt_step(rt));
        COLI_TRY(new_frame(E, f, &g));
        COLI_TRY(bind(E, g, "loop", 4, lv));
        rt->line = n->line;
        COLI_TRY(assign(E, g, n, items.l->v[i]));
        COLI_TRY(exec_body(E, g, n->kids, n->n));
        int flow = E->flow;
        E->flow = FLOW_NONE;
        if (flow == FLOW_BREAK)
            break;
    }
    E->loops--;
    return COLI_OK;
}

static coli_status exec(ev *E, frame *f, const coli__tnode *n)
{
    coli__trt *rt = E->rt;
    coli__tv v;
    switch (n->kind) {
    case COLI__N_TEXT:
        return coli__tsb_put(rt, E->out, n->val.s.p, n->val.s.n);
    case COLI__N_OUTPUT:
        COLI_TRY(eval(E, f, n->a, &v));
        rt->line = n->line;
        return coli__tv_str(rt, E->out, &v);
    case COLI__N_IF:
        COLI_TRY(eval(E, f, n->a, &v));
        if (coli__tv_truthy(&v))
            return exec_body(E, f, n->kids, n->n);
        return exec_body(E, f, n->kids2, n->n2);
    case COLI__N_FOR:
        return exec_for(E, f, n);
    case COLI__N_SET:
        if (n->flag == 2) {
            coli__tsb buf = {0}, *saved = E->out;
            COLI_TRY(coli__tsb_put(rt, &buf, "", 0));
            E->out = &buf;
            coli_status st = exec_body(E, f, n->kids, n->n);
            E->out = saved;
            COLI_TRY(st);
            v = coli__tsb_value(&buf);
        } else {
            COLI_TRY(eval(E, f, n->a, &v));
        }
        rt->line = n->line;
        return assign(E, f, n, v);
    case COLI__N_SET_ATTR: {
        coli__tv ns = lookup(f, n->name, n->name_n);
        COLI_TRY(eval(E, f, n->a, &v));
        rt->line = n->line;
        if (ns.t != COLI__TV_NS)
            return coli__trt_fail(rt, COLI_EINVAL, "cannot assign attribute on non-namespace object");
        return coli__tdict_set(rt, ns.d, n->val, v);
    }
    case COLI__N_MACRO: {
        macro *m = coli__trt_alloc(rt, sizeof *m);
        if (!m)
            return rt->st;
        m->def = n;
        m->closure = f;
        v = (coli__tv){0};
        v.t = COLI__TV_MACRO;
        v.p = m;
        return bind(E, f, n->name, n->name_n, v);
    }
    case COLI__N_BREAK:
    case COLI__N_CONTINUE:
        rt->line = n->line;
        if (!E->loops)
            return coli__trt_fail(rt, COLI_EINVAL, "%s outside a loop", n->kind == COLI__N_BREAK ? "break" : "continue");
        E->flow = n->kind == COLI__N_BREAK ? FLOW_BREAK : FLOW_CONTINUE;
        return COLI_OK;
    default:
        rt->line = n->line;
        return coli__trt_fail(rt, COLI_EINVAL, "not a statement");
    }
}

static coli_status exec_body(ev *E, frame *f, coli__tnode *const *kids, size_t n)
{
    if (++E->nest > NEST_MAX)
        return coli__trt_fail(E->rt, COLI_ERANGE, "expressions and blocks nested more than %d deep", NEST_MAX);
    for (size_t i = 0; i < n && !E->flow; i++)
        COLI_TRY(exec(E, f, kids[i]));
    E->nest--;
    return COLI_OK;
}

coli_status coli__teval(coli__trt *rt, const coli__tnode *root, const coli__tv *vars, coli__tv *out)
{
    ev E = {0};
    E.rt = rt;
    frame *top = NULL;
    coli__tsb buf = {0};
    E.out = &buf;
    COLI_TRY(new_frame(&E, NULL, &top));
    for (size_t i = 0; i < vars->d->n; i++)
        COLI_TRY(coli__tdict_set(rt, &top->vars, vars->d->k[i], vars->d->v[i]));
    COLI_TRY(coli__tsb_put(rt, &buf, "", 0));
    COLI_TRY(exec_body(&E, top, root->kids, root->n));
    *out = coli__tsb_value(&buf);
    return COLI_OK;
}

static coli_status check(coli__trt *rt, const coli__tnode *n, int depth)
{
    if (!n)
        return COLI_OK;
    if (n->kind == COLI__N_FILTER && !coli__tfilter_exists(n->name, n->name_n)) {
        rt->line = n->line;
        return coli__trt_fail(rt, COLI_EFORMAT, "no filter named '%.*s'", (int)(n->name_n > 60 ? 60 : n->name_n),
                              n->name);
    }
    if (n->kind == COLI__N_TEST && !coli__ttest_exists(n->name, n->name_n)) {
        rt->line = n->line;
        return coli__trt_fail(rt, COLI_EFORMAT, "no test named '%.*s'", (int)(n->name_n > 60 ? 60 : n->name_n),
                              n->name);
    }
    if (depth > 4 * COLI__TPL_PARSE_DEPTH)
        return coli__trt_fail(rt, COLI_ERANGE, "template nested too deep");
    COLI_TRY(check(rt, n->a, depth + 1));
    COLI_TRY(check(rt, n->b, depth + 1));
    COLI_TRY(check(rt, n->c, depth + 1));
    COLI_TRY(check(rt, n->d, depth + 1));
    for (size_t i = 0; i < n->n; i++)
        COLI_TRY(check(rt, n->kids[i], depth + 1));
    for (size_t i = 0; i < n->n2; i++)
        COLI_TRY(check(rt, n->kids2[i], depth + 1));
    return COLI_OK;
}

coli_status coli__tcheck(coli__trt *rt, const coli__tnode *root)
{
    return check(rt, root, 0);
}
