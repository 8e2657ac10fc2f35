/* tok_model.c - loading tokenizer.json's BPE "model" (vocab, merges, unk
 * and byte-fallback tokens, options) and its "added_tokens", and building
 * the table from every id to its string and flags. */
#include "io/tok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading: model -------------------------------------------------- */

/* The hash tables are indexed by mask: a power of two, 16 at least. */
static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

/* A string member or NULL (missing or JSON null); *bad set if another type. */
static const coli__json *opt_str(const coli__json *obj, const char *key, int *bad)
{
    const coli__json *j = coli__json_get(obj, key);
    if (!j || j->type == COLI_JSON_NULL)
        return NULL;
    if (j->type != COLI_JSON_STRING) {
        *bad = 1;
        return NULL;
    }
    return j;
}

static coli_status load_merge(coli__tokenizer *t, size_t rank, const coli__json *m,
                              char **tmp, size_t *tmp_cap, coli__err *err)
{
    const char *a, *b;
    size_t alen, blen, blen_np;
    int32_t ia, ib, inew;
    char *sp = NULL;

    if (coli__tok_json_is_str(m)) {
        sp = memchr(m->str, ' ', m->len);
        if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str)))
            return coli__tok_fail(
                t, err, COLI_EFORMAT,
                "model.merges[%zu] \"%.60s\" is not two tokens separated by one space", rank,
                m->str);
        a = m->str;
        alen = (size_t)(sp - m->str);
        b = sp + 1;
        blen = m->len - alen - 1;
    } else if (m && m->type == COLI_JSON_ARRAY && m->len == 2 &&
               coli__tok_json_is_str(&m->items[0]) && coli__tok_json_is_str(&m->items[1])) {
        a = m->items[0].str;
        alen = m->items[0].len;
        b = m->items[1].str;
        blen = m->items[1].len;
    } else {
        return coli__tok_fail(t, err, COLI_EFORMAT,
                              "model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", rank);
    }
    ia = coli__tok_vocab_get(t, a, alen);
    ib = coli__tok_vocab_get(t, b, blen);
    if (ia < 0 || ib < 0)
        return coli__tok_fail(
            t, err, COLI_EFORMAT, "model.merges[%zu]: token \"%.*s\" is not in the vocab", rank,
            (int)(ia < 0 ? (alen > 60 ? 60 : alen) : (blen > 60 ? 60 : blen)), ia < 0 ? a : b);
    if (alen == 0 || blen == 0)
        t->bpe_whole = 1; /* an empty token has no characters to join on */
    else
        coli__tok_junction_put(t, coli__tok_last_cp(a, alen), coli__tok_first_cp(b, blen));
    /* The merged token drops the continuing-subword prefix of b. */
    blen_np = blen;
    if (t->prefix_len && blen >= t->prefix_len && memcmp(b, t->prefix, t->prefix_len) == 0) {
        b += t->prefix_len;
        blen_np -= t->prefix_len;
    }
    if (alen + blen_np > *tmp_cap) {
        size_t nc = (alen + blen_np) * 2 + 64;
        char *nt = realloc(*tmp, nc);
        if (!nt)
            return coli__tok_oom(t, err);
        *tmp = nt;
        *tmp_cap = nc;
    }
    memcpy(*tmp, a, alen);
    memcpy(*tmp + alen, b, blen_np);
    inew = coli__tok_vocab_get(t, *tmp, alen + blen_np);
    if (inew < 0)
        return coli__tok_fail(t, err, COLI_EFORMAT,
                              "model.merges[%zu]: merged token \"%.*s\" is not in the vocab", rank,
                              (int)((alen + blen_np) > 60 ? 60 : alen + blen_np), *tmp);
    coli__tok_merge_put(t, ia, ib, (uint32_t)rank, inew);
    return COLI_OK;
}

/* Sets the id bound of ID_SLACK. */
void coli__tok_set_id_limit(coli__tokenizer *t, const coli__json *root)
{
    const coli__json *vocab = coli__json_get(coli__json_get(root, "model"), "vocab");
    const coli__json *at = coli__json_get(root, "added_tokens");
    size_t n = 0, lim;
    if (vocab && vocab->type == COLI_JSON_OBJECT)
        n += vocab->len;
    if (at && at->type == COLI_JSON_ARRAY)
        n += at->len;
    lim = 2 * n + ID_SLACK;
    t->id_entries = n;
    t->id_limit = lim < MAX_ID ? lim : MAX_ID;
}

coli_status coli__tok_load_model(coli__tokenizer *t, const coli__json *root, coli__err *err)
{
    const coli__json *model = coli__json_get(root, "model");
    const coli__json *vocab, *merges, *j;
    const char *type;
    int bad = 0;
    coli_status st = COLI_OK;
    char *tmp = NULL;
    size_t tmp_cap = 0;

    if (!model || model->type != COLI_JSON_OBJECT)
        return coli__tok_fail(t, err, COLI_EFORMAT, "no \"model\" object");
    type = coli__json_get_str(model, "type", NULL);
    if (!type) {
        if (!coli__json_get(model, "merges"))
            return coli__tok_fail(t, err, COLI_EUNSUPPORTED,
                                  "model has no \"type\" and is not BPE");
        type = "BPE";
    }
    if (strcmp(type, "BPE") != 0)
        return coli__tok_fail(t, err, COLI_EUNSUPPORTED,
                              "model type \"%.40s\" is not supported (only BPE)", type);
    j = coli__json_get(model, "dropout");
    if (j && j->type == COLI_JSON_NUMBER && coli__json_num(j) > 0.0)
        return coli__tok_fail(t, err, COLI_EUNSUPPORTED,
                              "model.dropout %g is not supported (BPE dropout is random)",
                              coli__json_num(j));

    t->byte_fallback = coli__json_get_bool(model, "byte_fallback", 0);
    t->fuse_unk = coli__json_get_bool(model, "fuse_unk", 0);
    t->ignore_merges = coli__json_get_bool(model, "ignore_merges", 0);
    if ((j = opt_str(model, "continuing_subword_prefix", &bad)) && j->len) {
        if (!(t->prefix = coli__tok_dupn(j->str, j->len)))
            return coli__tok_oom(t, err);
        t->prefix_len = j->len;
    }
    if ((j = opt_str(model, "end_of_word_suffix", &bad)) && j->len) {
        if (!(t->suffix = coli__tok_dupn(j->str, j->len)))
            return coli__tok_oom(t, err);
        t->suffix_len = j->len;
    }
    if (bad)
        return coli__tok_fail(t, err, COLI_EFORMAT,
                              "model.continuing_subword_prefix/end_of_word_suffix is not a string");

    vocab = coli__json_get(model, "vocab");
    if (!vocab || vocab->type != COLI_JSON_OBJECT)
        return coli__tok_fail(t, err, COLI_EFORMAT, "model.vocab is not an object");
    t->n_vents = vocab->len;
    t->vents = malloc((t->n_vents ? t->n_vents : 1) * sizeof *t->vents);
    t->vtab_mask = pow2_at_least(t->n_vents * 2) - 1;
    t->vtab = calloc(t->vtab_mask + 1, sizeof *t->vtab);
    if (!t->vents || !t->vtab || coli__buf_reserve(&t->strs, t->n_vents * 8))
        return coli__tok_oom(t, err);
    for (size_t i = 0; i < vocab->len; i++) {
        const coli__json *v = &vocab->items[i], *key = coli__json_key(vocab, i);
        if (v->type != COLI_JSON_NUMBER || !v->is_int || v->integer < 0 || v->integer >= MAX_ID)
            return coli__tok_fail(t, err, COLI_EFORMAT, "model.vocab[\"%.60s\"] is not a valid id",
                                  key->str);
        if ((uint64_t)v->integer >= t->id_limit)
            return coli__tok_fail(
                t, err, COLI_EFORMAT,
                "model.vocab[\"%.60s\"] = %lld: with %zu vocab and added entries, ids "
                "must be below %zu",
                key->str, (long long)v->integer, t->id_entries, t->id_limit);
        if (coli__tok_strs_add(t, key->str, key->len, &t->vents[i].off))
            return coli__tok_oom(t, err);
        t->vents[i].len = key->len;
        t->vents[i].id = (int32_t)v->integer;
        coli__tok_vocab_insert(t, i);
    }

    j = coli__json_get(model, "unk_token");
    if (j && j->type == COLI_JSON_STRING) {
        t->has_unk = 1;
        t->unk_id = coli__tok_vocab_get(t, j->str, j->len);
        if (j->len) {
            t->unk_fc = coli__tok_first_cp(j->str, j->len);
            t->unk_lc = coli__tok_last_cp(j->str, j->len);
        } else {
            t->bpe_whole = 1;
        }
    } else if (j && j->type != COLI_JSON_NULL) {
        return coli__tok_fail(t, err, COLI_EFORMAT, "model.unk_token is not a string");
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = coli__tok_vocab_get(t, name, 6);
    }

    merges = coli__json_get(model, "merges");
    if (merges && merges->type != COLI_JSON_NULL) {
        if (merges->type != COLI_JSON_ARRAY)
            return coli__tok_fail(t, err, COLI_EFORMAT, "model.merges is not an array");
        t->mtab_mask = pow2_at_least(merges->len * 2) - 1;
        t->mtab = malloc((t->mtab_mask + 1) * sizeof *t->mtab);
        t->jtab_mask = t->mtab_mask;
        t->jtab = malloc((t->jtab_mask + 1) * sizeof *t->jtab);
        if (!t->mtab || !t->jtab)
            return coli__tok_oom(t, err);
        for (size_t i = 0; i <= t->mtab_mask; i++) {
            t->mtab[i].key = MSLOT_EMPTY;
            t->jtab[i] = JT_EMPTY;
        }
        for (size_t i = 0; i < merges->len && st == COLI_OK; i++)
            st = load_merge(t, i, &merges->items[i], &tmp, &tmp_cap, err);
    }
    free(tmp);
    return st;
}

/* ---- loading: added tokens and the id table -------------------------- */

coli_status coli__tok_load_added(coli__tokenizer *t, const coli__json *root, coli__err *err)
{
    const coli__json *at = coli__json_get(root, "added_tokens");
    if (!at || at->type == COLI_JSON_NULL)
        return COLI_OK;
    if (at->type != COLI_JSON_ARRAY)
        return coli__tok_fail(t, err, COLI_EFORMAT, "added_tokens is not an array");
    t->added = calloc(at->len ? at->len : 1, sizeof *t->added);
    if (!t->added)
        return coli__tok_oom(t, err);
    for (size_t i = 0; i < at->len; i++) {
        const coli__json *o = &at->items[i];
        const coli__json *c = coli__json_get(o, "content");
        const coli__json *id = coli__json_get(o, "id");
        added_tok *a = &t->added[t->n_added];
        int32_t vid;
        if (o->type != COLI_JSON_OBJECT || !coli__tok_json_is_str(c))
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "added_tokens[%zu] has no \"content\" string", i);
        if (!id || id->type != COLI_JSON_NUMBER || !id->is_int || id->integer < 0 ||
            id->integer >= MAX_ID)
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "added_tokens[%zu] (\"%.60s\") has no valid \"id\"", i, c->str);
        if ((uint64_t)id->integer >= t->id_limit)
            return coli__tok_fail(t, err, COLI_EFORMAT,
                                  "added_tokens[%zu] (\"%.60s\") id %lld: with %zu vocab and added "
                                  "entries, ids must be below %zu",
                                  i, c->str, (long long)id->integer, t->id_entries, t->id_limit);
        if (c->len == 0)
            continue; /* can never match */
        if (coli__tok_strs_add(t, c->str, c->len, &a->off))
            return coli__tok_oom(t, err);
        a->len = (uint32_t)c->len;
        /* Like the Rust crate, a content already in the model vocab keeps
         * the vocab's id. */
        vid = coli__tok_vocab_get(t, c->str, c->len);
        a->id = vid >= 0 ? vid : (int32_t)id->integer;
        a->special = (unsigned char)coli__json_get_bool(o, "special", 0);
        a->single_word = (unsigned char)coli__json_get_bool(o, "single_word", 0);
        a->lstrip = (unsigned char)coli__json_get_bool(o, "lstrip", 0);
        a->rstrip = (unsigned char)coli__json_get_bool(o, "rstrip", 0);
        a->normalized = (unsigned char)coli__json_get_bool(o, "normalized", !a->special);
        t->n_added++;
    }
    return COLI_OK;
}

coli_status coli__tok_build_ids(coli__tokenizer *t, coli__err *err)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n_vents; i++)
        if ((size_t)t->vents[i].id + 1 > n)
            n = (size_t)t->vents[i].id + 1;
    for (size_t i = 0; i < t->n_added; i++)
        if ((size_t)t->added[i].id + 1 > n)
            n = (size_t)t->added[i].id + 1;
    t->n_ids = n;
    t->id_off = malloc((n ? n : 1) * sizeof *t->id_off);
    t->id_len = malloc((n ? n : 1) * sizeof *t->id_len);
    t->id_flags = calloc(n ? n : 1, 1);
    if (!t->id_off || !t->id_len || !t->id_flags)
        return coli__tok_oom(t, err);
    for (size_t i = 0; i < n; i++)
        t->id_len[i] = NO_STR;
    for (size_t i = 0; i < t->n_vents; i++) {
        if (t->id_len[t->vents[i].id] != NO_STR)
            t->bpe_whole = 1; /* an id with two strings: junctions do not hold */
        t->id_off[t->vents[i].id] = t->vents[i].off;
        t->id_len[t->vents[i].id] = t->vents[i].len;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        const added_tok *a = &t->added[i];
        t->id_off[a->id] = a->off;
        t->id_len[a->id] = a->len;
        t->id_flags[a->id] = (unsigned char)(IDF_ADDED | (a->special ? IDF_SPECIAL : 0));
    }
    return COLI_OK;
}
