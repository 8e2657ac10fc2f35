/* tokcheck.c - checks shared by the two tokenizer fuzz targets. */
#include "tokcheck.h"

#include "fuzzutil.h"

int tc_encode(const coli__tokenizer *tok, const char *text, size_t n, int add_special, int may_fail,
              coli__ids *ids)
{
    coli__err err = {{0}};
    size_t before = ids->n;
    coli_status st = coli__tok_encode(tok, text, n, add_special, ids, &err);
    if (st != COLI_OK) {
        fz_check_failure(st, err.msg);
        FZ_CHECK(may_fail, "encoding %zu bytes of UTF-8 failed: %s", n, err.msg);
        FZ_CHECK(ids->n == before, "a failed encode appended ids");
        return 0;
    }
    size_t vocab = coli__tok_vocab_size(tok);
    for (size_t i = before; i < ids->n; i++)
        FZ_CHECK(ids->v[i] >= 0 && (size_t)ids->v[i] < vocab, "id %ld at %zu is outside [0, %zu)",
                 (long)ids->v[i], i, vocab);
    return 1;
}

void tc_decode(const coli__tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
               coli__buf *out)
{
    coli__err err = {{0}};
    coli_status st = coli__tok_decode(tok, ids, n, skip_special, out, &err);
    FZ_CHECK(st == COLI_OK, "decoding %zu valid ids failed: %s", n, err.msg);
    FZ_CHECK(out->n == 0 || (out->p != NULL && out->p[out->n] == '\0'), "decoded text not NUL-terminated");
    FZ_CHECK(fz_utf8_valid(out->p, out->n), "decoded %zu bytes that are not UTF-8", out->n);
}
