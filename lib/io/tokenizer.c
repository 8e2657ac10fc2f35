/* tokenizer.c - Hugging Face tokenizer.json with a BPE model: loading it
 * part by part in the order each part needs (the files tok_*.c, whose
 * shared insides are tok_impl.h), freeing it, and finding tokens and ids.
 * Encoding is in tok_encode.c, decoding in tok_decode.c. */
#include "io/tok_impl.h"

#include <stdlib.h>
#include <string.h>

void coli__tok_free(coli__tokenizer *t)
{
    if (!t)
        return;
    free(t->path);
    coli__buf_free(&t->strs);
    free(t->vents);
    free(t->vtab);
    free(t->mtab);
    free(t->jtab);
    free(t->id_off);
    free(t->id_len);
    free(t->id_flags);
    free(t->prefix);
    free(t->suffix);
    free(t->added);
    free(t->m_raw.idx);
    free(t->m_norm.idx);
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    free(t->norm);
    free(t->pre);
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].a);
        free(t->dec[i].b);
    }
    free(t->dec);
    coli__ids_free(&t->post_prefix);
    coli__ids_free(&t->post_suffix);
    free(t);
}

coli_status coli__tok_load(const char *path, coli__tokenizer **out, coli__err *err)
{
    coli__json_doc *doc = NULL;
    const coli__json *root;
    coli__tokenizer *t;
    coli_status st;

    if (!out)
        return coli__fail(err, COLI_EINVAL, "tokenizer: no output pointer");
    *out = NULL;
    if (!path)
        return coli__fail(err, COLI_EINVAL, "tokenizer: no path");
    t = calloc(1, sizeof *t);
    if (!t)
        return coli__fail(err, COLI_ENOMEM, "%s: out of memory", path);
    t->unk_id = -1;
    coli__tok_bytemap_init(&t->bm);
    if (!(t->path = coli__tok_dupn(path, strlen(path)))) {
        free(t);
        return coli__fail(err, COLI_ENOMEM, "%s: out of memory", path);
    }
    /* Real tokenizer.json files take 2-35 MB (a 262k vocab, the largest in
     * use, about 33 MB): the limit leaves room for vocabularies 8x that. */
    st = coli__json_parse_file_max(path, COLI__JSON_TOKENIZER_MAX, &doc, err);
    if (st != COLI_OK) {
        coli__tok_free(t);
        return st;
    }
    root = coli__json_root(doc);
    if (!root || root->type != COLI_JSON_OBJECT) {
        st = coli__tok_fail(t, err, COLI_EFORMAT, "the top level is not a JSON object");
        goto done;
    }
    coli__tok_set_id_limit(t, root);
    if ((st = coli__tok_load_model(t, root, err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_load_added(t, root, err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_build_ids(t, err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_load_normalizer(t, coli__json_get(root, "normalizer"), err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_build_added_matchers(t, err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_load_pre(t, coli__json_get(root, "pre_tokenizer"), err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_load_post(t, coli__json_get(root, "post_processor"), err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_check_post_ids(t, err)) != COLI_OK)
        goto done;
    if ((st = coli__tok_load_decoder(t, coli__json_get(root, "decoder"), err)) != COLI_OK)
        goto done;
done:
    coli__json_free(doc);
    if (st != COLI_OK) {
        coli__tok_free(t);
        return st;
    }
    *out = t;
    return COLI_OK;
}

size_t coli__tok_vocab_size(const coli__tokenizer *t)
{
    return t ? t->n_ids : 0;
}

int32_t coli__tok_find(const coli__tokenizer *t, const char *token)
{
    size_t n;
    if (!t || !token)
        return -1;
    n = strlen(token);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == n && memcmp(t->strs.p + t->added[i].off, token, n) == 0)
            return t->added[i].id;
    return coli__tok_vocab_get(t, token, n);
}

int coli__tok_is_special(const coli__tokenizer *t, int32_t id)
{
    if (!t || id < 0 || (size_t)id >= t->n_ids)
        return 0;
    return (t->id_flags[id] & IDF_SPECIAL) != 0;
}
