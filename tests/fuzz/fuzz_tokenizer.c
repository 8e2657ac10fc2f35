/* fuzz_tokenizer.c - libFuzzer target for encoding and decoding text with
 * the fixture tokenizers.
 *
 * Input: byte 0 picks a tokenizer (tests/data/{qwen3_moe,olmoe,mixtral} and
 * data/demo, loaded once), byte 1 holds flags (bit 0: add special tokens,
 * bit 1: skip special tokens when decoding raw ids), the rest is the text.
 *
 * Checks: text that is not UTF-8 is refused with a message, UTF-8 text is
 * encoded to ids in range, ids decode to UTF-8, and decoding what was
 * encoded (without special tokens added) gives the text back, as far as the
 * tokenizer promises that:
 *  - olmoe (byte-level BPE, no normalizer): exactly the text;
 *  - qwen3_moe and demo (NFC first): the text itself when it is ASCII, and
 *    for any text a fixed point: encoding and decoding the result again
 *    changes nothing;
 *  - mixtral (SentencePiece-style, "\xE2\x96\x81" for spaces, a leading one
 *    added and stripped): the text itself when it holds neither that
 *    character nor '<' (which could start an added or a byte token).
 * Finally the text's bytes, read as 16-bit ids modulo the vocab size, are
 * decoded too: any valid ids must decode to UTF-8. */
#include <string.h>

#include "fuzzutil.h"
#include "tokcheck.h"

enum roundtrip { RT_EXACT, RT_NFC, RT_SPIECE };

static const struct fixture {
    const char *dir; /* under the source tree */
    enum roundtrip rt;
} FIXTURES[] = {
    {"tests/data/qwen3_moe", RT_NFC},
    {"tests/data/olmoe", RT_EXACT},
    {"tests/data/mixtral", RT_SPIECE},
    {"data/demo", RT_NFC},
};
#define N_FIXTURES (sizeof FIXTURES / sizeof FIXTURES[0])

static coli__tokenizer *toks[N_FIXTURES];

static void load_fixtures(void)
{
    char path[4096];
    for (size_t i = 0; i < N_FIXTURES; i++) {
        snprintf(path, sizeof path, "%s/%s/tokenizer.json", COLI_SRCDIR, FIXTURES[i].dir);
        coli__err err = {{0}};
        coli_status st = coli__tok_load(path, &toks[i], &err);
        FZ_CHECK(st == COLI_OK, "fixture %s: %s", path, err.msg);
    }
}

static int is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return 1;
}

/* decode(encode(s)) into *out; returns 0 and leaves *out empty when the
 * encode failed. */
static void roundtrip(const coli__tokenizer *tok, const char *s, size_t n, coli__buf *out)
{
    coli__ids ids = {0};
    tc_encode(tok, s, n, 0, 0, &ids);
    tc_decode(tok, ids.v, ids.n, 0, out);
    coli__ids_free(&ids);
}

static int same(const coli__buf *b, const char *s, size_t n)
{
    return b->n == n && (n == 0 || memcmp(b->p, s, n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (toks[0] == NULL)
        load_fixtures();
    if (size < 2)
        return 0;
    size_t which = data[0] % N_FIXTURES;
    const coli__tokenizer *tok = toks[which];
    int add_special = data[1] & 1, skip_special = (data[1] >> 1) & 1;
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    size_t vocab = coli__tok_vocab_size(tok);

    coli__ids ids = {0};
    if (!fz_utf8_valid(text, n)) {
        coli__err err = {{0}};
        coli_status st = coli__tok_encode(tok, text, n, add_special, &ids, &err);
        FZ_CHECK(st == COLI_EINVAL, "text that is not UTF-8: %s", coli_status_name(st));
        fz_check_failure(st, err.msg);
        FZ_CHECK(ids.n == 0, "a refused text gave ids");
    } else {
        coli__buf back = {0};
        tc_encode(tok, text, n, add_special, 0, &ids);
        tc_decode(tok, ids.v, ids.n, 0, &back);
        coli__buf_free(&back);
        roundtrip(tok, text, n, &back);
        switch (FIXTURES[which].rt) {
        case RT_EXACT:
            FZ_CHECK(same(&back, text, n), "%s: decode(encode(text)) differs", FIXTURES[which].dir);
            break;
        case RT_NFC: {
            if (is_ascii(text, n))
                FZ_CHECK(same(&back, text, n), "%s: decode(encode(ASCII)) differs", FIXTURES[which].dir);
            coli__buf again = {0};
            roundtrip(tok, back.p ? back.p : "", back.n, &again);
            FZ_CHECK(same(&again, back.p, back.n), "%s: a second round trip changes the text",
                     FIXTURES[which].dir);
            coli__buf_free(&again);
            break;
        }
        case RT_SPIECE:
            if (memchr(text, '<', n) == NULL && memmem(text, n, "\xE2\x96\x81", 3) == NULL)
                FZ_CHECK(same(&back, text, n), "%s: decode(encode(text)) differs", FIXTURES[which].dir);
            break;
        }
        coli__buf_free(&back);
    }
    coli__ids_free(&ids);

    /* Any ids in range decode to UTF-8. */
    size_t nid = n / 2;
    int32_t *raw = malloc((nid ? nid : 1) * sizeof *raw);
    FZ_CHECK(raw != NULL, "out of memory");
    for (size_t i = 0; i < nid; i++)
        raw[i] = (int32_t)(((size_t)(unsigned char)text[2 * i] | (size_t)(unsigned char)text[2 * i + 1] << 8) %
                           vocab);
    coli__buf dec = {0};
    tc_decode(tok, raw, nid, skip_special, &dec);
    coli__buf_free(&dec);
    free(raw);
    return 0;
}
