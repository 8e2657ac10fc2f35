/* template.c - the public chat template API: compile once, render with a
 * JSON object of variables. */
#include <stdlib.h>
#include <string.h>

#include "chat/eval.h"
#include "io/json.h"

struct coli_chat_template {
    coli__trt rt; /* owns the tree */
    coli__tnode *root;
};

static void set_err(char *errbuf, size_t errcap, const char *msg)
{
    if (!errbuf || !errcap)
        return;
    size_t n = strlen(msg);
    if (n >= errcap)
        n = errcap - 1;
    memcpy(errbuf, msg, n);
    errbuf[n] = '\0';
}

COLI_API coli_status coli_chat_template_compile(const char *source, size_t len, coli_chat_template **out,
                                                char *errbuf, size_t errcap)
{
    set_err(errbuf, errcap, "");
    if (!out)
        return COLI_EINVAL;
    *out = NULL;
    if (!source && len) {
        set_err(errbuf, errcap, "coli_chat_template_compile: source is NULL");
        return COLI_EINVAL;
    }
    coli_chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        set_err(errbuf, errcap, "out of memory");
        return COLI_ENOMEM;
    }
    coli_status st = coli__tparse(&t->rt, source ? source : "", len, &t->root);
    if (st == COLI_OK)
        st = coli__tcheck(&t->rt, t->root);
    if (st != COLI_OK) {
        set_err(errbuf, errcap, t->rt.msg);
        coli_chat_template_free(t);
        return st;
    }
    *out = t;
    return COLI_OK;
}

COLI_API void coli_chat_template_free(coli_chat_template *tmpl)
{
    if (!tmpl)
        return;
    coli__trt_free(&tmpl->rt);
    free(tmpl);
}

/* The template value of a JSON node; strings are borrowed from the document. */
static coli_status from_json(coli__trt *rt, const coli__json *j, coli__tv *out)
{
    switch (j->type) {
    case COLI_JSON_NULL:
        *out = coli__tv_none();
        return COLI_OK;
    case COLI_JSON_BOOL:
        *out = coli__tv_bool(j->boolean);
        return COLI_OK;
    case COLI_JSON_NUMBER:
        *out = j->is_int ? coli__tv_int(j->integer) : coli__tv_float(j->dbl);
        return COLI_OK;
    case COLI_JSON_STRING:
        *out = coli__tv_strn(j->str, j->len);
        return COLI_OK;
    case COLI_JSON_ARRAY:
        COLI_TRY(coli__tv_list_new(rt, j->len, out));
        for (uint32_t i = 0; i < j->len; i++)
            COLI_TRY(from_json(rt, &j->items[i], &out->l->v[i]));
        out->l->n = j->len;
        return COLI_OK;
    default:
        COLI_TRY(coli__tv_dict_new(rt, j->len, out));
        for (uint32_t i = 0; i < j->len; i++) {
            const coli__json *k = coli__json_key(j, i);
            coli__tv v;
            COLI_TRY(from_json(rt, &j->items[i], &v));
            COLI_TRY(coli__tdict_set(rt, out->d, coli__tv_strn(k->str, k->len), v));
        }
        return COLI_OK;
    }
}

COLI_API coli_status coli_chat_template_render(const coli_chat_template *tmpl, const char *vars_json, size_t len,
                                               char **out, size_t *out_len, char *errbuf, size_t errcap)
{
    set_err(errbuf, errcap, "");
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!tmpl || !out || (!vars_json && len)) {
        set_err(errbuf, errcap, "coli_chat_template_render: a required argument is NULL");
        return COLI_EINVAL;
    }
    coli__err err = {{0}};
    coli__json_doc *doc = NULL;
    coli_status st = coli__json_parse(vars_json ? vars_json : "", len, "vars_json", &doc, &err);
    if (st != COLI_OK) {
        set_err(errbuf, errcap, err.msg);
        return st == COLI_ENOMEM ? st : COLI_EFORMAT;
    }
    const coli__json *root = coli__json_root(doc);
    if (root->type != COLI_JSON_OBJECT) {
        coli__json_free(doc);
        set_err(errbuf, errcap, "vars_json: expected a JSON object");
        return COLI_EFORMAT;
    }
    coli__trt rt = {0};
    coli__tv vars, text;
    st = from_json(&rt, root, &vars);
    if (st == COLI_OK)
        st = coli__teval(&rt, tmpl->root, &vars, &text);
    if (st == COLI_OK) {
        char *o = malloc(text.s.n + 1);
        if (!o) {
            st = COLI_ENOMEM;
            set_err(errbuf, errcap, "out of memory");
        } else {
            memcpy(o, text.s.p, text.s.n);
            o[text.s.n] = '\0';
            *out = o;
            if (out_len)
                *out_len = text.s.n;
        }
    } else {
        set_err(errbuf, errcap, rt.msg[0] ? rt.msg : "template error");
    }
    coli__trt_free(&rt);
    coli__json_free(doc);
    return st;
}

COLI_API void coli_free(void *p)
{
    free(p);
}
