/* fuzz_tokenizer_load.c - libFuzzer target for loading tokenizer.json.
 *
 * Input: the bytes of a tokenizer.json, written to the scratch directory
 * and loaded with coli__tok_load. A refused file must come with a message.
 * An accepted tokenizer is put to work: a few fixed texts are encoded (with
 * and without special tokens) and decoded, and so are all its ids at once;
 * every id must be in range and every decoded text well-formed UTF-8. */
#include <string.h>

#include "fuzzutil.h"
#include "tokcheck.h"

/* Ids decoded in one call at most: big vocabularies would be slow. */
#define DECODE_ALL_MAX 4096

static const char *const TEXTS[] = {
    "",
    "Hello, world! It's 2024; we'll see.",
    "  leading  and trailing spaces  \n\n\ttabs\r\n",
    "caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80 e\xCC\x81",
    "<|endoftext|><s></s><unk><|im_start|>user\n<think>x</think>",
    "\xE2\x96\x81 <0x41> \x01\x7F",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("tokenizer.json", data, size, 0);
    coli__err err = {{0}};
    coli__tokenizer *tok = NULL;
    coli_status st = coli__tok_load(fz_path("tokenizer.json"), &tok, &err);
    if (st != COLI_OK) {
        FZ_CHECK(tok == NULL, "a failed load returned a tokenizer");
        fz_check_failure(st, err.msg);
        return 0;
    }
    size_t vocab = coli__tok_vocab_size(tok);
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++) {
        for (int special = 0; special < 2; special++) {
            coli__ids ids = {0};
            coli__buf text = {0};
            /* A loadable tokenizer may still lack what a text needs (an
             * unk token missing from the vocab): an error, not a crash. */
            if (tc_encode(tok, TEXTS[i], strlen(TEXTS[i]), special, 1, &ids))
                tc_decode(tok, ids.v, ids.n, special, &text);
            coli__ids_free(&ids);
            coli__buf_free(&text);
        }
    }
    size_t n = vocab < DECODE_ALL_MAX ? vocab : DECODE_ALL_MAX;
    int32_t *all = malloc((n ? n : 1) * sizeof *all);
    FZ_CHECK(all != NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        all[i] = (int32_t)i;
    for (int skip = 0; skip < 2; skip++) {
        coli__buf text = {0};
        tc_decode(tok, all, n, skip, &text);
        coli__buf_free(&text);
    }
    free(all);
    /* Past the end is refused with a message. */
    int32_t bad = (int32_t)vocab;
    coli__buf text = {0};
    st = coli__tok_decode(tok, &bad, 1, 0, &text, &err);
    FZ_CHECK(st == COLI_EINVAL, "decoding id %ld of a vocab of %zu: %s", (long)bad, vocab,
             coli_status_name(st));
    fz_check_failure(st, err.msg);
    coli__buf_free(&text);
    coli__tok_free(tok);
    return 0;
}
