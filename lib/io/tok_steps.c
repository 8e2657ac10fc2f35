/* tok_steps.c - loading the steps of tokenizer.json's pipeline: the
 * normalizer, the pre-tokenizer (a Split's regex is recognised by its exact
 * text), the post-processor's ids and the decoder chain. What is not
 * supported is refused with a message naming it. */
#include "io/tok_impl.h"

#include <stdlib.h>
#include <string.h>

#include "io/unicode.h"

/* ---- loading: normalizer -------------------------------------------- */

static int json_type_is(const coli__json *j, coli__json_type ty)
{
    return j && j->type == ty;
}

/* The pattern of a Replace/Split: {"String": s} is returned, {"Regex": r}
 * sets *regex. NULL if malformed. */
static const coli__json *pattern_of(const coli__json *step, const coli__json **regex)
{
    const coli__json *p = coli__json_get(step, "pattern");
    const coli__json *s;
    *regex = NULL;
    if (!json_type_is(p, COLI_JSON_OBJECT))
        return NULL;
    if ((s = coli__json_get(p, "Regex")) && coli__tok_json_is_str(s)) {
        *regex = s;
        return NULL;
    }
    s = coli__json_get(p, "String");
    return coli__tok_json_is_str(s) ? s : NULL;
}

coli_status coli__tok_load_normalizer(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    norm_step st;
    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return coli__tok_fail(t, err, COLI_EFORMAT, "normalizer is not an object with a \"type\"");
    memset(&st, 0, sizeof st);
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "normalizers");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "normalizer Sequence has no \"normalizers\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(coli__tok_load_normalizer(t, &l->items[i], err));
        return COLI_OK;
    } else if (strcmp(type, "NFC") == 0) {
        st.type = NORM_NFC;
    } else if (strcmp(type, "Prepend") == 0) {
        const coli__json *p = coli__json_get(j, "prepend");
        if (!coli__tok_json_is_str(p))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "normalizer Prepend has no \"prepend\" string");
        st.type = NORM_PREPEND;
        if (!(st.a = coli__tok_dupn(p->str, p->len)))
            return coli__tok_oom(t, err);
        st.alen = p->len;
    } else if (strcmp(type, "Replace") == 0) {
        const coli__json *rx, *pat = pattern_of(j, &rx);
        const coli__json *c = coli__json_get(j, "content");
        if (rx)
            return coli__tok_fail(
                t, err, COLI_EUNSUPPORTED,
                "normalizer Replace with a Regex pattern (\"%.60s\") is not supported", rx->str);
        if (!pat || !coli__tok_json_is_str(c))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "normalizer Replace needs a pattern and a content");
        if (pat->len == 0)
            return coli__tok_fail(t, err, COLI_EUNSUPPORTED,
                                  "normalizer Replace with an empty pattern is not supported");
        st.type = NORM_REPLACE;
        st.a = coli__tok_dupn(pat->str, pat->len);
        st.b = coli__tok_dupn(c->str, c->len);
        st.alen = pat->len;
        st.blen = c->len;
        if (!st.a || !st.b) {
            free(st.a);
            free(st.b);
            return coli__tok_oom(t, err);
        }
    } else if (strcmp(type, "Strip") == 0) {
        st.type = NORM_STRIP;
        st.left = coli__json_get_bool(j, "strip_left", 0);
        st.right = coli__json_get_bool(j, "strip_right", 0);
    } else {
        return coli__tok_fail(t, err, COLI_EUNSUPPORTED, "normalizer \"%.40s\" is not supported",
                              type);
    }
    if (coli__tok_vec_grow(&t->norm, &t->cap_norm, t->n_norm + 1, sizeof *t->norm)) {
        free(st.a);
        free(st.b);
        return coli__tok_oom(t, err);
    }
    t->norm[t->n_norm++] = st;
    return COLI_OK;
}

/* ---- loading: pre-tokenizer ----------------------------------------- */

static const char RX_GPT2_TEXT[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RX_QWEN2_TEXT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RX_LLAMA3_TEXT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* "always" / "first" / "never" from a Metaspace object (new or legacy). */
static int metaspace_scheme(const coli__json *j)
{
    const char *s = coli__json_get_str(j, "prepend_scheme", NULL);
    const coli__json *aps = coli__json_get(j, "add_prefix_space");
    if (aps && aps->type == COLI_JSON_BOOL && !aps->boolean)
        return SCHEME_NEVER;
    if (s && strcmp(s, "first") == 0)
        return SCHEME_FIRST;
    if (s && strcmp(s, "never") == 0)
        return SCHEME_NEVER;
    return SCHEME_ALWAYS;
}

/* The single character of a JSON string, or 0 if it is not one character. */
static uint32_t single_char(const coli__json *s)
{
    uint32_t cp;
    size_t len;
    if (!coli__tok_json_is_str(s) || s->len == 0 || !coli__utf8_decode(s->str, s->len, &cp, &len) ||
        len != s->len || cp == 0)
        return 0;
    return cp;
}

coli_status coli__tok_load_pre(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    pre_step st;
    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return coli__tok_fail(t, err, COLI_EFORMAT,
                              "pre_tokenizer is not an object with a \"type\"");
    memset(&st, 0, sizeof st);
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "pretokenizers");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "pre_tokenizer Sequence has no \"pretokenizers\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(coli__tok_load_pre(t, &l->items[i], err));
        return COLI_OK;
    } else if (strcmp(type, "ByteLevel") == 0) {
        st.type = PRE_BYTELEVEL;
        st.prefix_space = coli__json_get_bool(j, "add_prefix_space", 1);
        st.use_regex = coli__json_get_bool(j, "use_regex", 1);
    } else if (strcmp(type, "Split") == 0) {
        const coli__json *rx, *pat = pattern_of(j, &rx);
        const char *beh = coli__json_get_str(j, "behavior", "");
        st.type = PRE_SPLIT;
        if (!rx) {
            if (pat)
                return coli__tok_fail(
                    t, err, COLI_EUNSUPPORTED,
                    "pre_tokenizer Split with a String pattern (\"%.60s\") is not supported",
                    pat->str);
            return coli__tok_fail(t, err, COLI_EFORMAT, "pre_tokenizer Split has no pattern");
        }
        if (strcmp(rx->str, RX_GPT2_TEXT) == 0)
            st.rx = RX_GPT2;
        else if (strcmp(rx->str, RX_QWEN2_TEXT) == 0)
            st.rx = RX_QWEN2;
        else if (strcmp(rx->str, RX_LLAMA3_TEXT) == 0)
            st.rx = RX_LLAMA3;
        else
            return coli__tok_fail(
                t, err, COLI_EUNSUPPORTED,
                "pre_tokenizer Split: unsupported regex \"%.80s%s\" (known: GPT-2, "
                "Qwen2, Llama-3 patterns)",
                rx->str, rx->len > 80 ? "..." : "");
        if (strcmp(beh, "Isolated") != 0)
            return coli__tok_fail(
                t, err, COLI_EUNSUPPORTED,
                "pre_tokenizer Split behavior \"%.30s\" is not supported (only Isolated)", beh);
        if (coli__json_get_bool(j, "invert", 0))
            return coli__tok_fail(t, err, COLI_EUNSUPPORTED,
                                  "pre_tokenizer Split with invert: true is not supported");
    } else if (strcmp(type, "Metaspace") == 0) {
        st.type = PRE_METASPACE;
        st.repl = single_char(coli__json_get(j, "replacement"));
        if (!st.repl)
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "pre_tokenizer Metaspace \"replacement\" is not one character");
        st.scheme = metaspace_scheme(j);
        st.split = coli__json_get_bool(j, "split", 1);
    } else {
        return coli__tok_fail(t, err, COLI_EUNSUPPORTED, "pre_tokenizer \"%.40s\" is not supported",
                              type);
    }
    if (coli__tok_vec_grow(&t->pre, &t->cap_pre, t->n_pre + 1, sizeof *t->pre))
        return coli__tok_oom(t, err);
    t->pre[t->n_pre++] = st;
    return COLI_OK;
}

/* ---- loading: post-processor ---------------------------------------- */

/* ["<s>", 1] of RobertaProcessing / BertProcessing. */
static int pair_id(const coli__json *j, int32_t *id)
{
    if (!json_type_is(j, COLI_JSON_ARRAY) || j->len != 2 || j->items[1].type != COLI_JSON_NUMBER ||
        !j->items[1].is_int || j->items[1].integer < 0 || j->items[1].integer >= MAX_ID)
        return -1;
    *id = (int32_t)j->items[1].integer;
    return 0;
}

coli_status coli__tok_load_post(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    coli__ids pre = {0}, suf = {0};
    coli_status st = COLI_OK;

    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return coli__tok_fail(t, err, COLI_EFORMAT,
                              "post_processor is not an object with a \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "processors");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "post_processor Sequence has no \"processors\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(coli__tok_load_post(t, &l->items[i], err));
        return COLI_OK;
    }
    if (strcmp(type, "ByteLevel") == 0)
        return COLI_OK; /* offsets only */
    if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        int32_t cls, sep;
        if (pair_id(coli__json_get(j, "cls"), &cls) || pair_id(coli__json_get(j, "sep"), &sep))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "post_processor %s needs \"cls\" and \"sep\" pairs", type);
        if (coli__ids_push(&pre, cls) || coli__ids_push(&suf, sep))
            st = coli__tok_oom(t, err);
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        const coli__json *single = coli__json_get(j, "single");
        const coli__json *specials = coli__json_get(j, "special_tokens");
        int seen_a = 0;
        if (!json_type_is(single, COLI_JSON_ARRAY))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "post_processor TemplateProcessing has no \"single\" array");
        for (size_t i = 0; i < single->len && st == COLI_OK; i++) {
            const coli__json *it = &single->items[i];
            const coli__json *sp = coli__json_get(it, "SpecialToken");
            const coli__json *sq = coli__json_get(it, "Sequence");
            if (sq) {
                const char *which = coli__json_get_str(sq, "id", "");
                if (strcmp(which, "A") != 0 || seen_a)
                    st = coli__tok_fail(
                        t, err, COLI_EUNSUPPORTED,
                        "post_processor TemplateProcessing: single template must hold "
                        "$A once");
                seen_a = 1;
            } else if (sp) {
                const char *name = coli__json_get_str(sp, "id", NULL);
                const coli__json *def = name ? coli__json_get(specials, name) : NULL;
                const coli__json *idl = coli__json_get(def, "ids");
                if (!json_type_is(idl, COLI_JSON_ARRAY)) {
                    st = coli__tok_fail(
                        t, err, COLI_EFORMAT,
                        "post_processor TemplateProcessing: special token \"%.40s\" is "
                        "not in special_tokens",
                        name ? name : "?");
                    break;
                }
                for (size_t k = 0; k < idl->len && st == COLI_OK; k++) {
                    const coli__json *v = &idl->items[k];
                    if (v->type != COLI_JSON_NUMBER || !v->is_int || v->integer < 0 ||
                        v->integer >= MAX_ID)
                        st = coli__tok_fail(
                            t, err, COLI_EFORMAT,
                            "post_processor TemplateProcessing: bad id for \"%.40s\"", name);
                    else if (coli__ids_push(seen_a ? &suf : &pre, (int32_t)v->integer))
                        st = coli__tok_oom(t, err);
                }
            } else {
                st = coli__tok_fail(t, err, COLI_EFORMAT,
                                    "post_processor TemplateProcessing: unknown template item");
            }
        }
        if (st == COLI_OK && !seen_a)
            st = coli__tok_fail(t, err, COLI_EUNSUPPORTED,
                                "post_processor TemplateProcessing: single template has no $A");
    } else {
        return coli__tok_fail(t, err, COLI_EUNSUPPORTED,
                              "post_processor \"%.40s\" is not supported", type);
    }
    /* A later processor wraps what the earlier ones produced. */
    if (st == COLI_OK) {
        coli__ids np = {0};
        if (coli__ids_add(&np, pre.v, pre.n) ||
            coli__ids_add(&np, t->post_prefix.v, t->post_prefix.n) ||
            coli__ids_add(&t->post_suffix, suf.v, suf.n)) {
            coli__ids_free(&np);
            st = coli__tok_oom(t, err);
        } else {
            coli__ids_free(&t->post_prefix);
            t->post_prefix = np;
        }
    }
    coli__ids_free(&pre);
    coli__ids_free(&suf);
    return st;
}

/* Encoding emits the post-processor's ids as they are: each must be a
 * token, or callers would get ids that decoding and the model refuse. */
coli_status coli__tok_check_post_ids(coli__tokenizer *t, coli__err *err)
{
    const coli__ids *l[2] = {&t->post_prefix, &t->post_suffix};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < l[k]->n; i++)
            if ((size_t)l[k]->v[i] >= t->n_ids)
                return coli__tok_fail(
                    t, err, COLI_EFORMAT,
                    "post_processor: special token id %ld is not in the vocab (%zu ids)",
                    (long)l[k]->v[i], t->n_ids);
    return COLI_OK;
}

/* ---- loading: decoder ----------------------------------------------- */

coli_status coli__tok_load_decoder(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    dec_step st;
    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return coli__tok_fail(t, err, COLI_EFORMAT, "decoder is not an object with a \"type\"");
    t->has_decoder = 1;
    memset(&st, 0, sizeof st);
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "decoders");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "decoder Sequence has no \"decoders\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(coli__tok_load_decoder(t, &l->items[i], err));
        return COLI_OK;
    } else if (strcmp(type, "ByteLevel") == 0) {
        st.type = DEC_BYTELEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        st.type = DEC_BYTEFALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        st.type = DEC_FUSE;
    } else if (strcmp(type, "Metaspace") == 0) {
        st.type = DEC_METASPACE;
        st.ch = single_char(coli__json_get(j, "replacement"));
        if (!st.ch)
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "decoder Metaspace \"replacement\" is not one character");
        st.scheme = metaspace_scheme(j);
    } else if (strcmp(type, "Strip") == 0) {
        int64_t a = coli__json_get_int(j, "start", 0), b = coli__json_get_int(j, "stop", 0);
        st.type = DEC_STRIP;
        st.ch = single_char(coli__json_get(j, "content"));
        if (!st.ch || a < 0 || b < 0 || a > 1000000 || b > 1000000)
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "decoder Strip needs one content character");
        st.start = (size_t)a;
        st.stop = (size_t)b;
    } else if (strcmp(type, "Replace") == 0) {
        const coli__json *rx, *pat = pattern_of(j, &rx);
        const coli__json *c = coli__json_get(j, "content");
        if (rx)
            return coli__tok_fail(
                t, err, COLI_EUNSUPPORTED,
                "decoder Replace with a Regex pattern (\"%.60s\") is not supported", rx->str);
        if (!pat || !coli__tok_json_is_str(c) || pat->len == 0)
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "decoder Replace needs a pattern and a content");
        st.type = DEC_REPLACE;
        st.a = coli__tok_dupn(pat->str, pat->len);
        st.b = coli__tok_dupn(c->str, c->len);
        st.alen = pat->len;
        st.blen = c->len;
        if (!st.a || !st.b) {
            free(st.a);
            free(st.b);
            return coli__tok_oom(t, err);
        }
    } else {
        return coli__tok_fail(t, err, COLI_EUNSUPPORTED, "decoder \"%.40s\" is not supported",
                              type);
    }
    if (coli__tok_vec_grow(&t->dec, &t->cap_dec, t->n_dec + 1, sizeof *t->dec)) {
        free(st.a);
        free(st.b);
        return coli__tok_oom(t, err);
    }
    t->dec[t->n_dec++] = st;
    return COLI_OK;
}
