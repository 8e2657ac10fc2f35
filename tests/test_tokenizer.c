/* test_tokenizer.c - Unicode helpers, the pre-tokenizer regexes, BPE,
 * hand-made tokenizer.json files and the Hugging Face reference fixtures. */
#include <config.h> /* autoconf; <> because lib/config.h shadows "config.h" */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "testutil.h"
#include "io/tokenizer.h"
#include "io/unicode.h"

/* ---- small helpers ---------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1)
            nc *= 2;
        b->p = realloc(b->p, nc);
        ck_assert_ptr_nonnull(b->p);
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* Appends s as a JSON string literal. */
static void sb_json(sbuf *b, const char *s, size_t n)
{
    sb_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            sb_add(b, e, 2);
        } else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            sb_add(b, e, 6);
        } else {
            sb_add(b, (const char *)&s[i], 1);
        }
    }
    sb_add(b, "\"", 1);
}

static void sb_jsonz(sbuf *b, const char *s)
{
    sb_json(b, s, strlen(s));
}

/* GPT-2's byte-to-character map, derived from its definition: printable
 * bytes stand for themselves, the rest get U+0100.. in byte order. */
static unsigned bl_char(unsigned b)
{
    unsigned n = 0;
#define PRINTABLE(x) (((x) >= 0x21 && (x) <= 0x7E) || ((x) >= 0xA1 && (x) <= 0xAC) || ((x) >= 0xAE))
    if (PRINTABLE(b))
        return b;
    for (unsigned k = 0; k < b; k++)
        if (!PRINTABLE(k))
            n++;
    return 0x100 + n;
#undef PRINTABLE
}

/* UTF-8 of the byte-level form of s. */
static char *bl_str(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 2 + 1), *q = o;
    ck_assert_ptr_nonnull(o);
    for (size_t i = 0; i < n; i++)
        q += coli__utf8_encode(bl_char((unsigned char)s[i]), q);
    *q = '\0';
    return o;
}

static char *g_dir; /* per-test temporary directory */

static void setup(void)
{
    g_dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(g_dir);
}

static void teardown(void)
{
    tu_rmtree(g_dir);
    free(g_dir);
    g_dir = NULL;
}

/* Writes json to <tmp>/name and loads it. */
static coli_status load_json(const char *name, const char *json, coli__tokenizer **tok,
                             coli__err *err)
{
    char *p = tu_path(g_dir, name);
    coli_status st;
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(tu_write_file(p, json, strlen(json)), 0);
    st = coli__tok_load(p, tok, err);
    free(p);
    return st;
}

static coli__tokenizer *load_ok(const char *json)
{
    coli__tokenizer *tok = NULL;
    coli__err err = {{0}};
    coli_status st = load_json("tokenizer.json", json, &tok, &err);
    ck_assert_msg(st == COLI_OK, "load failed (%d): %s", (int)st, err.msg);
    ck_assert_ptr_nonnull(tok);
    return tok;
}

static void expect_ids(const coli__tokenizer *tok, const char *text, int add_special,
                       const int32_t *want, size_t n_want)
{
    coli__ids ids = {0};
    coli__err err = {{0}};
    coli_status st = coli__tok_encode(tok, text, strlen(text), add_special, &ids, &err);
    ck_assert_msg(st == COLI_OK, "encode \"%s\" failed: %s", text, err.msg);
    {
        char got[512] = "", *g = got;
        for (size_t i = 0; i < ids.n && g < got + sizeof got - 16; i++)
            g += snprintf(g, 16, " %d", (int)ids.v[i]);
        ck_assert_msg(ids.n == n_want, "encode \"%s\": %zu ids, want %zu; got%s", text, ids.n,
                      n_want, got);
        for (size_t i = 0; i < n_want; i++)
            ck_assert_msg(ids.v[i] == want[i], "encode \"%s\": id[%zu] = %d, want %d; got%s",
                          text, i, (int)ids.v[i], (int)want[i], got);
    }
    coli__ids_free(&ids);
}

#define EXPECT_IDS(tok, text, special, ...)                                              \
    do {                                                                                 \
        static const int32_t want_[] = {__VA_ARGS__};                                    \
        expect_ids((tok), (text), (special), want_, sizeof want_ / sizeof want_[0]);     \
    } while (0)

static void expect_decode(const coli__tokenizer *tok, const int32_t *ids, size_t n, int skip,
                          const char *want)
{
    coli__buf out = {0};
    coli__err err = {{0}};
    coli_status st = coli__tok_decode(tok, ids, n, skip, &out, &err);
    ck_assert_msg(st == COLI_OK, "decode failed: %s", err.msg);
    ck_assert_uint_eq(out.n, strlen(want));
    ck_assert_msg(memcmp(out.p, want, out.n) == 0, "decoded \"%s\", want \"%s\"", out.p, want);
    ck_assert_int_eq(out.p[out.n], '\0');
    coli__buf_free(&out);
}

#define EXPECT_DECODE(tok, skip, want, ...)                                              \
    do {                                                                                 \
        static const int32_t ids_[] = {__VA_ARGS__};                                     \
        expect_decode((tok), ids_, sizeof ids_ / sizeof ids_[0], (skip), (want));        \
    } while (0)

/* ---- UTF-8 ------------------------------------------------------------ */

START_TEST(test_utf8_roundtrip)
{
    static const uint32_t cps[] = {0,      0x41,    0x7F,    0x80,    0x7FF,   0x800,
                                   0xD7FF, 0xE000,  0xFFFD,  0xFFFF,  0x10000, 0x1F600,
                                   0x10FFFF};
    char b[4];
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        uint32_t cp;
        size_t len, n = coli__utf8_encode(cps[i], b);
        ck_assert_uint_eq(n, cps[i] < 0x80 ? 1 : cps[i] < 0x800 ? 2 : cps[i] < 0x10000 ? 3 : 4);
        ck_assert_int_eq(coli__utf8_decode(b, n, &cp, &len), 1);
        ck_assert_uint_eq(len, n);
        ck_assert_uint_eq(cp, cps[i]);
    }
    /* every scalar value round-trips */
    for (uint32_t c = 0; c <= 0x10FFFF; c += (c < 0x3000 ? 1 : 97)) {
        uint32_t cp;
        size_t len, n;
        if (c >= 0xD800 && c <= 0xDFFF)
            continue;
        n = coli__utf8_encode(c, b);
        ck_assert(coli__utf8_decode(b, n, &cp, &len) == 1 && len == n && cp == c);
    }
    ck_assert_uint_eq(coli__utf8_encode(0xD800, b), 0);
    ck_assert_uint_eq(coli__utf8_encode(0x110000, b), 0);
    ck_assert_uint_eq(coli__utf8_encode(0xE9, b), 2);
    ck_assert(memcmp(b, "\xC3\xA9", 2) == 0);
}
END_TEST

START_TEST(test_utf8_invalid)
{
    /* {bytes, length replaced by one U+FFFD} */
    static const struct {
        const char *s;
        size_t n, bad;
    } cases[] = {
        {"\x80", 1, 1},             /* stray continuation */
        {"\xC0\x80", 2, 1},         /* overlong lead */
        {"\xC1\xBF", 2, 1},         /* overlong lead */
        {"\xE2\x82", 2, 2},         /* truncated: the valid prefix */
        {"\xE2\x82\x41", 3, 2},     /* broken by 'A' */
        {"\xE0\x80\x80", 3, 1},     /* overlong 3-byte */
        {"\xED\xA0\x80", 3, 1},     /* surrogate */
        {"\xF0\x9F\x98", 3, 3},     /* truncated emoji */
        {"\xF4\x90\x80\x80", 4, 1}, /* above U+10FFFF */
        {"\xF5\x80", 2, 1},         /* invalid lead */
        {"\xFF", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t cp;
        size_t len;
        ck_assert_int_eq(coli__utf8_decode(cases[i].s, cases[i].n, &cp, &len), 0);
        ck_assert_msg(len == cases[i].bad, "case %zu: len %zu want %zu", i, len, cases[i].bad);
        ck_assert_uint_eq(cp, 0xFFFD);
    }
    ck_assert_uint_eq(coli__utf8_check("ab\xC3\xA9z", 5), 5);
    ck_assert_uint_eq(coli__utf8_check("ab\xC3z", 4), 2);
    ck_assert_uint_eq(coli__utf8_check("", 0), 0);
}
END_TEST

/* ---- character classes ------------------------------------------------ */

START_TEST(test_classes)
{
    static const struct {
        uint32_t cp;
        unsigned cls;
    } cases[] = {
        {'a', COLI_UNI_L},    {'Z', COLI_UNI_L},    {0xE9, COLI_UNI_L},   /* é */
        {0xDF, COLI_UNI_L},   {0x4E2D, COLI_UNI_L}, {0x05D0, COLI_UNI_L}, /* ß 中 א */
        {0x02B0, COLI_UNI_L},                                              /* Lm */
        {'7', COLI_UNI_N},    {0xB2, COLI_UNI_N},   {0xBD, COLI_UNI_N},   /* ² ½ */
        {0x0661, COLI_UNI_N}, {0x216B, COLI_UNI_N},                       /* ١ Ⅻ (Nl) */
        {' ', COLI_UNI_S},    {'\t', COLI_UNI_S},   {'\n', COLI_UNI_S},   {'\r', COLI_UNI_S},
        {0x0B, COLI_UNI_S},   {0x0C, COLI_UNI_S},   {0x85, COLI_UNI_S},   {0xA0, COLI_UNI_S},
        {0x1680, COLI_UNI_S}, {0x2003, COLI_UNI_S}, {0x2028, COLI_UNI_S}, {0x2029, COLI_UNI_S},
        {0x202F, COLI_UNI_S}, {0x3000, COLI_UNI_S},
        {0x200B, 0},          {0x1C, 0},            {0x180E, 0}, /* not White_Space */
        {'_', 0},             {'\'', 0},            {'!', 0},    {0x0301, 0}, /* Mn */
        {0x1F600, 0},         {0x3002, 0},          {0xFFFD, 0}, {0x10FFFF, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg((coli__uni_class(cases[i].cp) & ~COLI_UNI_W) == cases[i].cls,
                      "U+%04X: class %u want %u", (unsigned)cases[i].cp,
                      coli__uni_class(cases[i].cp), cases[i].cls);
    ck_assert_uint_eq(coli__uni_ccc(0x0301), 230);
    ck_assert_uint_eq(coli__uni_ccc(0x0323), 220);
    ck_assert_uint_eq(coli__uni_ccc('a'), 0);
    ck_assert(coli__uni_class(0xB2) == COLI_UNI_N); /* ² is No: no \w */
    ck_assert_uint_ge(strlen(coli__uni_version()), 4);
    /* \w for single_word: letters, marks, Nd, Nl, Pc, ZWJ, circled letters */
    ck_assert(coli__uni_class('_') == COLI_UNI_W);
    ck_assert(coli__uni_class(0x0301) == COLI_UNI_W);
    ck_assert(coli__uni_class(0x200D) == COLI_UNI_W);
    ck_assert(coli__uni_class(0x24B6) == COLI_UNI_W);
    ck_assert(coli__uni_class(0x2167) == (COLI_UNI_N | COLI_UNI_W));
    ck_assert(coli__uni_class(0x0661) == (COLI_UNI_N | COLI_UNI_W));
}
END_TEST

/* ---- NFC -------------------------------------------------------------- */

static void expect_nfc(const char *in, const char *want)
{
    char *o = NULL;
    size_t n = 0;
    ck_assert_int_eq(coli__uni_nfc(in, strlen(in), &o, &n), 0);
    ck_assert_msg(n == strlen(want) && memcmp(o, want, n) == 0, "NFC of \"%s\" is \"%s\"", in, o);
    ck_assert_int_eq(o[n], '\0');
    free(o);
}

START_TEST(test_nfc)
{
    expect_nfc("plain ascii", "plain ascii");
    expect_nfc("", "");
    expect_nfc("e\xCC\x81", "\xC3\xA9");                      /* e + U+0301 -> é */
    expect_nfc("\xC3\xA9", "\xC3\xA9");                        /* already composed */
    expect_nfc("A\xCC\x8A", "\xC3\x85");                       /* A + ring -> Å */
    expect_nfc("\xE2\x84\xAB", "\xC3\x85");                    /* U+212B ANGSTROM (singleton) */
    expect_nfc("\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80");    /* L + V -> U+AC00 가 */
    expect_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"); /* L V T -> 각 */
    expect_nfc("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81");    /* LV + T -> 각 */
    /* q + dot above (230) + dot below (220): reordered, nothing composes */
    expect_nfc("q\xCC\x87\xCC\xA3", "q\xCC\xA3\xCC\x87");
    /* s + dot above + dot below -> U+1E69 (both compose after reordering) */
    expect_nfc("s\xCC\x87\xCC\xA3", "\xE1\xB9\xA9");
    /* U+0344 (excluded, non-starter decomposition) -> U+0308 U+0301 */
    expect_nfc("\xCD\x84", "\xCC\x88\xCC\x81");
    /* U+0958 (composition exclusion) stays decomposed: U+0915 U+093C */
    expect_nfc("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC");
    /* a blocked mark: a + grave(230) + grave(230): only the first composes */
    expect_nfc("a\xCC\x80\xCC\x80", "\xC3\xA0\xCC\x80");
}
END_TEST

/* ---- the split regexes ------------------------------------------------- */

static const char *RX_GPT2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char *RX_QWEN2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *RX_LLAMA3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Checks that the Split pre-tokenizer with regex cuts text into exactly the
 * pieces given (NULL-terminated). The vocab holds exactly those pieces and
 * ignore_merges emits a whole piece as one id; any other cut would produce
 * <unk> instead. */
static void expect_split(const char *regex, const char *text, const char *const *pieces)
{
    sbuf j = {0};
    size_t n = 0, n_uniq = 0;
    const char *uniq[64];
    int32_t want[64];
    coli__tokenizer *tok;

    for (n = 0; pieces[n]; n++) {
        size_t k;
        ck_assert_uint_lt(n, 64);
        for (k = 0; k < n_uniq && strcmp(uniq[k], pieces[n]) != 0; k++)
            ;
        if (k == n_uniq)
            uniq[n_uniq++] = pieces[n];
        want[n] = (int32_t)k + 1;
    }
    sb_str(&j, "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,"
               "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":");
    sb_jsonz(&j, regex);
    sb_str(&j, "},\"behavior\":\"Isolated\",\"invert\":false},\"post_processor\":null,"
               "\"decoder\":null,\"model\":{\"type\":\"BPE\",\"dropout\":null,"
               "\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"ignore_merges\":true,"
               "\"vocab\":{\"<unk>\":0");
    for (size_t k = 0; k < n_uniq; k++) {
        char num[32];
        sb_str(&j, ",");
        sb_jsonz(&j, uniq[k]);
        snprintf(num, sizeof num, ":%zu", k + 1);
        sb_str(&j, num);
    }
    sb_str(&j, "},\"merges\":[]}}");
    tok = load_ok(j.p);
    expect_ids(tok, text, 0, want, n);
    coli__tok_free(tok);
    free(j.p);
}

#define SPLIT(rx, text, ...)                                          \
    do {                                                              \
        static const char *const p_[] = {__VA_ARGS__, NULL};          \
        expect_split((rx), (text), p_);                               \
    } while (0)

START_TEST(test_split_gpt2)
{
    SPLIT(RX_GPT2, "Hello  world\n\n  x", "Hello", " ", " world", "\n\n ", " x");
    SPLIT(RX_GPT2, "don't I'LL 123", "don", "'t", " I", "'", "LL", " 123");
    SPLIT(RX_GPT2, "a\t\tb", "a", "\t", "\t", "b");
    SPLIT(RX_GPT2, "x  ", "x", "  ");                      /* trailing run kept whole */
    SPLIT(RX_GPT2, "'sa 've'd", "'s", "a", " '", "ve", "'d"); /* no word boundary */
    SPLIT(RX_GPT2, "hi!!' ok", "hi", "!!'", " ok");
    SPLIT(RX_GPT2, "x \xF0\x9F\x98\x80\xF0\x9F\x98\x80!", "x", " \xF0\x9F\x98\x80\xF0\x9F\x98\x80!");
    SPLIT(RX_GPT2, "e\xCC\x81t\xC3\xA9", "e", "\xCC\x81", "t\xC3\xA9"); /* U+0301 is no letter */
    SPLIT(RX_GPT2, "1\xC2\xBD", "1\xC2\xBD");                /* ½ is \p{N} */
    SPLIT(RX_GPT2, "\n", "\n");
}
END_TEST

START_TEST(test_split_qwen2)
{
    SPLIT(RX_QWEN2, "Hello  world\n\n  x", "Hello", " ", " world", "\n\n", " ", " x");
    SPLIT(RX_QWEN2, "don't I'LL 123", "don", "'t", " I", "'LL", " ", "1", "2", "3");
    SPLIT(RX_QWEN2, "a\t\tb", "a", "\t", "\tb");
    SPLIT(RX_QWEN2, "x  ", "x", "  ");
    SPLIT(RX_QWEN2, "'Sa 'hello", "'S", "a", " '", "hello");
    SPLIT(RX_QWEN2, "'\xC5\xBF", "'\xC5\xBF"); /* ' + long s: (?i) folds it to s */
    SPLIT(RX_QWEN2, "!!\n\nfoo", "!!\n\n", "foo");
    SPLIT(RX_QWEN2, " !?\r\nA", " !?\r\n", "A");
    SPLIT(RX_QWEN2, "a \n b", "a", " \n", " b");
    SPLIT(RX_QWEN2, "\xE3\x80\x82\xE4\xBD\xA0\xE5\xA5\xBD", "\xE3\x80\x82\xE4\xBD\xA0\xE5\xA5\xBD");
    SPLIT(RX_QWEN2, "\xF0\x9F\x98\x80 x", "\xF0\x9F\x98\x80", " x");
    SPLIT(RX_QWEN2, "x\n", "x", "\n");
    SPLIT(RX_QWEN2, "\t\n\t", "\t\n", "\t");
    SPLIT(RX_QWEN2, "1a", "1", "a");
    SPLIT(RX_LLAMA3, "don't I'LL 12345", "don", "'t", " I", "'LL", " ", "123", "45");
    SPLIT(RX_LLAMA3, "x1234567y", "x", "123", "456", "7", "y");
}
END_TEST

/* ---- a hand-made byte-level BPE ----------------------------------------- */

/* Vocab: the 256 byte characters with id = byte value, then merges
 * Ġ+t=256 h+e=257 Ġt+he=258 l+l=259 e+ll=260 h+ell=261 hell+o=262;
 * added tokens <|end|>=300 (special), <think>=301 (not special). */
static char *byte_level_json(const char *pre_tokenizer, const char *post)
{
    sbuf j = {0};
    static const char *const merges[][2] = {{" ", "t"},  {"h", "e"},  {" t", "he"},
                                            {"l", "l"},  {"e", "ll"}, {"h", "ell"},
                                            {"hell", "o"}};
    sb_str(&j, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
               "{\"id\":300,\"content\":\"<|end|>\",\"single_word\":false,\"lstrip\":false,"
               "\"rstrip\":false,\"normalized\":false,\"special\":true},"
               "{\"id\":301,\"content\":\"<think>\",\"single_word\":false,\"lstrip\":false,"
               "\"rstrip\":false,\"normalized\":false,\"special\":false}],"
               "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":");
    sb_str(&j, pre_tokenizer);
    sb_str(&j, ",\"post_processor\":");
    sb_str(&j, post);
    sb_str(&j, ",\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
               "\"trim_offsets\":true,\"use_regex\":true},"
               "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
               "\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\","
               "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{");
    for (unsigned b = 0; b < 256; b++) {
        char u[8], num[16];
        size_t k = coli__utf8_encode(bl_char(b), u);
        if (b)
            sb_str(&j, ",");
        sb_json(&j, u, k);
        snprintf(num, sizeof num, ":%u", b);
        sb_str(&j, num);
    }
    for (size_t m = 0; m < sizeof merges / sizeof merges[0]; m++) {
        char num[16];
        char *a = bl_str(merges[m][0]), *b = bl_str(merges[m][1]);
        char *ab = malloc(strlen(a) + strlen(b) + 1);
        ck_assert_ptr_nonnull(ab);
        strcpy(ab, a);
        strcat(ab, b);
        sb_str(&j, ",");
        sb_jsonz(&j, ab);
        snprintf(num, sizeof num, ":%zu", 256 + m);
        sb_str(&j, num);
        free(a);
        free(b);
        free(ab);
    }
    /* the first merges in the old "a b" form, the others as pairs */
    sb_str(&j, "},\"merges\":[");
    for (size_t m = 0; m < sizeof merges / sizeof merges[0]; m++) {
        char *a = bl_str(merges[m][0]), *b = bl_str(merges[m][1]);
        if (m)
            sb_str(&j, ",");
        if (m < 3) {
            char *ab = malloc(strlen(a) + strlen(b) + 2);
            ck_assert_ptr_nonnull(ab);
            sprintf(ab, "%s %s", a, b);
            sb_jsonz(&j, ab);
            free(ab);
        } else {
            sb_str(&j, "[");
            sb_jsonz(&j, a);
            sb_str(&j, ",");
            sb_jsonz(&j, b);
            sb_str(&j, "]");
        }
        free(a);
        free(b);
    }
    sb_str(&j, "]}}");
    return j.p;
}

static const char *PRE_GPT2 =
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}";
static const char *PRE_GPT2_PREFIX =
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true}";
static const char *PRE_QWEN =
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
    "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":"
    "false,\"trim_offsets\":false,\"use_regex\":false}]}";
static const char *POST_TEMPLATE =
    "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|end|>\","
    "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":"
    "\"<|end|>\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<|end|>\":{\"id\":"
    "\"<|end|>\",\"ids\":[300],\"tokens\":[\"<|end|>\"]}}}";

START_TEST(test_bpe_byte_level)
{
    char *json = byte_level_json(PRE_GPT2, "null");
    coli__tokenizer *tok = load_ok(json);

    ck_assert_uint_eq(coli__tok_vocab_size(tok), 302);
    /* "hello": h+e (rank 1) first, then l+l; e+ll never gets its chance */
    EXPECT_IDS(tok, "hello the", 0, 257, 259, 'o', 258);
    EXPECT_IDS(tok, "yellow", 0, 'y', 260, 'o', 'w');
    EXPECT_IDS(tok, "", 0);
    /* bytes outside ASCII: é = C3 A9 */
    EXPECT_IDS(tok, "\xC3\xA9", 0, 0xC3, 0xA9);
    /* NFC first: e + U+0301 becomes é */
    EXPECT_IDS(tok, "e\xCC\x81", 0, 0xC3, 0xA9);
    /* whitespace: "a\n\n b" -> a | \n\n (gives back nothing: followed by space) ... */
    EXPECT_IDS(tok, "a\n\n b", 0, 'a', '\n', '\n', ' ', 'b');
    /* added tokens are cut out first; without a post-processor add_special adds nothing */
    EXPECT_IDS(tok, "hi<|end|><think>x", 0, 'h', 'i', 300, 301, 'x');
    EXPECT_IDS(tok, "hi<|end|><think>x", 1, 'h', 'i', 300, 301, 'x');
    EXPECT_IDS(tok, "<|end|>", 0, 300);
    EXPECT_IDS(tok, "<|end|<|end|>>", 0, '<', '|', 'e', 'n', 'd', '|', 300, '>');

    EXPECT_DECODE(tok, 0, "hello the", 257, 259, 'o', 258);
    EXPECT_DECODE(tok, 0, "hi<|end|><think>x", 'h', 'i', 300, 301, 'x');
    EXPECT_DECODE(tok, 1, "hi<think>x", 'h', 'i', 300, 301, 'x');
    EXPECT_DECODE(tok, 0, "\xC3\xA9", 0xC3, 0xA9);
    EXPECT_DECODE(tok, 0, "\xEF\xBF\xBD", 0xC3);               /* lone lead byte */
    EXPECT_DECODE(tok, 0, "\xEF\xBF\xBD" "A", 0xE2, 0x82, 'A'); /* one U+FFFD for E2 82 */
    EXPECT_DECODE(tok, 0, "\xEF\xBF\xBD\xEF\xBF\xBD", 0xF0, 0x80);
    /* ids 262..299 are unused: skipped like the Rust crate does */
    EXPECT_DECODE(tok, 0, "ab", 'a', 290, 'b');

    ck_assert_int_eq(coli__tok_find(tok, "<|end|>"), 300);
    ck_assert_int_eq(coli__tok_find(tok, "<think>"), 301);
    ck_assert_int_eq(coli__tok_find(tok, "he"), 257);
    ck_assert_int_eq(coli__tok_find(tok, "nope"), -1);
    ck_assert_int_eq(coli__tok_is_special(tok, 300), 1);
    ck_assert_int_eq(coli__tok_is_special(tok, 301), 0);
    ck_assert_int_eq(coli__tok_is_special(tok, 257), 0);
    ck_assert_int_eq(coli__tok_is_special(tok, -1), 0);
    ck_assert_int_eq(coli__tok_is_special(tok, 100000), 0);
    coli__tok_free(tok);
    free(json);

    /* add_prefix_space: " hello" -> Ġ he ll o */
    json = byte_level_json(PRE_GPT2_PREFIX, POST_TEMPLATE);
    tok = load_ok(json);
    EXPECT_IDS(tok, "hello", 0, ' ', 257, 259, 'o');
    EXPECT_IDS(tok, " the", 0, 258);
    EXPECT_IDS(tok, "hi", 1, 300, ' ', 'h', 'i', 300);
    EXPECT_IDS(tok, "", 1, 300, 300);
    coli__tok_free(tok);
    free(json);
}
END_TEST

START_TEST(test_bpe_qwen_style)
{
    char *json = byte_level_json(PRE_QWEN, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                                           "\"trim_offsets\":false,\"use_regex\":false}");
    coli__tokenizer *tok = load_ok(json);
    /* Qwen2 regex: "Hello  world\n\n  x" -> Hello | " " | " world" | \n\n | " " | " x" */
    EXPECT_IDS(tok, "the  the\n\n  x", 0, 't', 257, ' ', 258, '\n', '\n', ' ', ' ', 'x');
    EXPECT_IDS(tok, "a12", 0, 'a', '1', '2');
    EXPECT_IDS(tok, "<think>hello<|end|>", 1, 301, 257, 259, 'o', 300);
    EXPECT_DECODE(tok, 0, "the  the\n\n  x", 't', 257, ' ', 258, '\n', '\n', ' ', ' ', 'x');
    coli__tok_free(tok);
    free(json);
}
END_TEST

/* ---- a hand-made SentencePiece-style BPE ------------------------------- */

static char *sp_json(int byte_fallback, int fuse_unk)
{
    sbuf j = {0};
    char buf[256];
    sb_str(&j, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
    static const char *const sp[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf,
                 "%s{\"id\":%d,\"content\":\"%s\",\"single_word\":false,\"lstrip\":false,"
                 "\"rstrip\":false,\"normalized\":false,\"special\":true}",
                 i ? "," : "", i, sp[i]);
        sb_str(&j, buf);
    }
    sb_str(&j, "],\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\","
               "\"prepend\":\"\xE2\x96\x81\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
               "\"content\":\"\xE2\x96\x81\"}]},\"pre_tokenizer\":null,"
               "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
               "{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
               "\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],"
               "\"tokens\":[\"<s>\"]}}},"
               "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
               "{\"String\":\"\xE2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},"
               "{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
               "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\","
               "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,");
    snprintf(buf, sizeof buf, "\"fuse_unk\":%s,\"byte_fallback\":%s,\"ignore_merges\":false,",
             fuse_unk ? "true" : "false", byte_fallback ? "true" : "false");
    sb_str(&j, buf);
    sb_str(&j, "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2");
    for (int b = 0; b < 256; b++) {
        snprintf(buf, sizeof buf, ",\"<0x%02X>\":%d", b, 3 + b);
        sb_str(&j, buf);
    }
    sb_str(&j, ",\"\xE2\x96\x81\":259,\"a\":260,\"b\":261,\"\xE2\x96\x81" "a\":262,\"ab\":263,"
               "\"\xE2\x96\x81" "ab\":264,\"c\":265},\"merges\":[[\"\xE2\x96\x81\",\"a\"],"
               "[\"a\",\"b\"],[\"\xE2\x96\x81" "a\",\"b\"]]}}");
    return j.p;
}

START_TEST(test_bpe_sentencepiece)
{
    char *json = sp_json(1, 1);
    coli__tokenizer *tok = load_ok(json);

    /* "ab c" -> "▁ab▁c": ▁+a (rank 0), then ▁a+b (rank 2); the stale a+b entry is skipped */
    EXPECT_IDS(tok, "ab c", 0, 264, 259, 265);
    EXPECT_IDS(tok, "ab c", 1, 1, 264, 259, 265);
    EXPECT_IDS(tok, "", 1, 1);
    EXPECT_IDS(tok, "", 0);
    /* é is not in the vocab: <0xC3> <0xA9> */
    EXPECT_IDS(tok, "\xC3\xA9", 0, 259, 3 + 0xC3, 3 + 0xA9);
    /* added tokens are matched on the raw text; the rest gets its own ▁ */
    EXPECT_IDS(tok, "<s>ab", 0, 1, 264);
    EXPECT_IDS(tok, "b</s>", 0, 259, 261, 2);

    EXPECT_DECODE(tok, 0, "ab c", 264, 259, 265);
    EXPECT_DECODE(tok, 0, "\xC3\xA9", 259, 3 + 0xC3, 3 + 0xA9);
    EXPECT_DECODE(tok, 0, "<s> ab", 1, 264);
    EXPECT_DECODE(tok, 1, "ab", 1, 264);
    EXPECT_DECODE(tok, 0, "\xEF\xBF\xBD", 3 + 0xC3);
    EXPECT_DECODE(tok, 0, "\xEF\xBF\xBD\xEF\xBF\xBD" "a", 3 + 0xC3, 3 + 0xC3, 260);
    EXPECT_DECODE(tok, 0, "  a", 259, 259, 262);
    coli__tok_free(tok);
    free(json);

    /* no byte fallback: unknown characters become <unk>, fused or not */
    json = sp_json(0, 1);
    tok = load_ok(json);
    EXPECT_IDS(tok, "xyz", 0, 259, 0);
    EXPECT_IDS(tok, "xaz", 0, 259, 0, 260, 0); /* ▁ and a are not adjacent */
    coli__tok_free(tok);
    free(json);
    json = sp_json(0, 0);
    tok = load_ok(json);
    EXPECT_IDS(tok, "xyz", 0, 259, 0, 0, 0);
    coli__tok_free(tok);
    free(json);
}
END_TEST

/* Metaspace pre-tokenizer and decoder, with ignore_merges whole-piece ids. */
static char *metaspace_json(const char *scheme, int split)
{
    sbuf j = {0};
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"added_tokens\":[{\"id\":1,\"content\":\"<s>\",\"single_word\":false,"
             "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
             "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":"
             "\"\xE2\x96\x81\",\"prepend_scheme\":\"%s\",\"split\":%s},"
             "\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\","
             "\"prepend_scheme\":\"%s\",\"split\":%s},",
             scheme, split ? "true" : "false", scheme, split ? "true" : "false");
    sb_str(&j, buf);
    sb_str(&j, "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,"
               "\"ignore_merges\":true,\"vocab\":{\"<unk>\":0,\"<s>\":1,"
               "\"\xE2\x96\x81\":2,\"\xE2\x96\x81" "a\":3,\"\xE2\x96\x81" "b\":4,\"a\":5,"
               "\"\xE2\x96\x81" "a\xE2\x96\x81\xE2\x96\x81" "b\":6,\"a\xE2\x96\x81" "b\":7},"
               "\"merges\":[]}}");
    return j.p;
}

START_TEST(test_metaspace)
{
    char *json = metaspace_json("always", 1);
    coli__tokenizer *tok = load_ok(json);
    /* "a  b" -> "▁a▁▁b" -> ▁a | ▁ | ▁b */
    EXPECT_IDS(tok, "a  b", 0, 3, 2, 4);
    EXPECT_IDS(tok, " a", 0, 3); /* already starts with a space: nothing prepended */
    EXPECT_IDS(tok, "<s>a b", 0, 1, 3, 4);
    /* the decoder drops every ▁ of the first token, like the Rust crate */
    EXPECT_DECODE(tok, 0, "a  b", 3, 2, 4);
    EXPECT_DECODE(tok, 0, "aa", 3, 5);
    coli__tok_free(tok);
    free(json);

    /* first: only the piece at the very start gets the ▁ */
    json = metaspace_json("first", 1);
    tok = load_ok(json);
    EXPECT_IDS(tok, "a b", 0, 3, 4);
    EXPECT_IDS(tok, "<s>a b", 0, 1, 5, 4);
    coli__tok_free(tok);
    free(json);

    /* no split: one piece per segment */
    json = metaspace_json("always", 0);
    tok = load_ok(json);
    EXPECT_IDS(tok, "a  b", 0, 6);
    EXPECT_DECODE(tok, 0, "ab", 6);
    coli__tok_free(tok);
    free(json);

    json = metaspace_json("never", 1);
    tok = load_ok(json);
    EXPECT_IDS(tok, "a b", 0, 5, 4);
    EXPECT_DECODE(tok, 0, "a b", 5, 4);
    EXPECT_DECODE(tok, 0, " a b", 3, 4);
    coli__tok_free(tok);
    free(json);
}
END_TEST

/* lstrip / rstrip / single_word on added tokens, and a normalized added
 * token matched after the normalizer. */
START_TEST(test_added_flags)
{
    const char *json =
        "{\"added_tokens\":["
        "{\"id\":10,\"content\":\"<m>\",\"single_word\":false,\"lstrip\":true,\"rstrip\":true,"
        "\"normalized\":false,\"special\":true},"
        "{\"id\":11,\"content\":\"cat\",\"single_word\":true,\"lstrip\":false,\"rstrip\":false,"
        "\"normalized\":false,\"special\":false},"
        "{\"id\":12,\"content\":\"\xC3\xA9t\xC3\xA9\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":true,\"special\":false}],"
        "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":null,\"decoder\":null,"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\" \":1,\"c\":2,\"t\":3,\"s\":4,"
        "\"\xC3\xA9\":5},\"merges\":[]}}";
    coli__tokenizer *tok = load_ok(json);
    EXPECT_IDS(tok, "a  <m>  a", 0, 0, 10, 0);
    EXPECT_IDS(tok, "a cat a", 0, 0, 1, 11, 1, 0);
    EXPECT_IDS(tok, "cats", 0, 2, 0, 3, 4); /* not a single word: ordinary text */
    EXPECT_IDS(tok, "cat", 0, 11);
    /* "word" is regex \w: a mark or '_' before cat is one, '²' (No) is not.
     * Characters outside the vocab (no unk token) are dropped. */
    EXPECT_IDS(tok, "\xC3\xA9" "cat", 0, 5, 2, 0, 3);
    EXPECT_IDS(tok, "_cat", 0, 2, 0, 3);
    EXPECT_IDS(tok, "a\xCC\x81" "cat", 0, 2, 0, 3); /* U+0301 is \w; NFC makes á: dropped */
    EXPECT_IDS(tok, "\xC2\xB2" "cat", 0, 11);
    /* e + U+0301 t e + U+0301: NFC makes it match the normalized added token */
    EXPECT_IDS(tok, "e\xCC\x81te\xCC\x81", 0, 12);
    /* no decoder: tokens joined with spaces */
    EXPECT_DECODE(tok, 0, "a <m> cat", 0, 10, 11);
    EXPECT_DECODE(tok, 1, "a cat", 0, 10, 11);
    coli__tok_free(tok);
}
END_TEST

/* An lstrip token that is itself whitespace, repeated: each match may only
 * strip back to the previous one. 300000 of them took minutes when every
 * match scanned back over all the run before it (Check's timeout fails the
 * test); this is linear. */
START_TEST(test_lstrip_run)
{
    enum { N = 300000 };
    const char *json =
        "{\"added_tokens\":[{\"id\":5,\"content\":\"\\n\",\"single_word\":false,\"lstrip\":true,"
        "\"rstrip\":false,\"normalized\":false,\"special\":false}],"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\" \":1},\"merges\":[]}}";
    coli__tokenizer *tok = load_ok(json);
    coli__ids ids = {0};
    coli__err err = {{0}};
    char *text = malloc(N + 5);
    EXPECT_IDS(tok, "a \n \n", 0, 0, 5, 5);
    EXPECT_IDS(tok, "a\n \na", 0, 0, 5, 5, 0);
    ck_assert_ptr_nonnull(text);
    memcpy(text, "a   ", 4);
    memset(text + 4, '\n', N);
    ck_assert_int_eq(coli__tok_encode(tok, text, N + 4, 0, &ids, &err), COLI_OK);
    ck_assert_uint_eq(ids.n, N + 1);
    ck_assert_int_eq(ids.v[0], 0);
    for (size_t i = 1; i <= N; i++)
        ck_assert_int_eq(ids.v[i], 5);
    coli__ids_free(&ids);
    free(text);
    coli__tok_free(tok);
}
END_TEST

/* ---- refusals ---------------------------------------------------------- */

static void expect_refusal(const char *json, coli_status want, const char *needle1,
                           const char *needle2)
{
    coli__tokenizer *tok = (coli__tokenizer *)&tok;
    coli__err err = {{0}};
    coli_status st = load_json("bad.json", json, &tok, &err);
    ck_assert_msg(st == want, "status %d, want %d (%s)", (int)st, (int)want, err.msg);
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err.msg, "bad.json") != NULL, "message does not name the file: %s",
                  err.msg);
    ck_assert_msg(strstr(err.msg, needle1) != NULL, "message lacks \"%s\": %s", needle1, err.msg);
    if (needle2)
        ck_assert_msg(strstr(err.msg, needle2) != NULL, "message lacks \"%s\": %s", needle2,
                      err.msg);
}

#define TINY_MODEL "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"

START_TEST(test_refusals)
{
    coli__tokenizer *tok = NULL;
    coli__err err = {{0}};
    coli_status st;
    char *missing;

    expect_refusal("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", COLI_EUNSUPPORTED,
                   "model", "WordPiece");
    expect_refusal("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", COLI_EUNSUPPORTED, "model",
                   "Unigram");
    expect_refusal("{\"normalizer\":{\"type\":\"Lowercase\"}," TINY_MODEL "}", COLI_EUNSUPPORTED,
                   "normalizer", "Lowercase");
    expect_refusal("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},"
                   "{\"type\":\"NFKD\"}]}," TINY_MODEL "}",
                   COLI_EUNSUPPORTED, "normalizer", "NFKD");
    expect_refusal("{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},"
                   "\"content\":\" \"}," TINY_MODEL "}",
                   COLI_EUNSUPPORTED, "Replace", "Regex");
    expect_refusal("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+|[^\\\\w\\\\s]+\"},"
                   "\"behavior\":\"Isolated\",\"invert\":false}," TINY_MODEL "}",
                   COLI_EUNSUPPORTED, "Split", "\\w+|[^\\w\\s]+");
    expect_refusal("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":"
                   "\"'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|"
                   "\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Removed\",\"invert\":false}," TINY_MODEL "}",
                   COLI_EUNSUPPORTED, "Split", "Removed");
    expect_refusal("{\"pre_tokenizer\":{\"type\":\"Whitespace\"}," TINY_MODEL "}",
                   COLI_EUNSUPPORTED, "pre_tokenizer", "Whitespace");
    expect_refusal("{\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\"}," TINY_MODEL "}",
                   COLI_EUNSUPPORTED, "decoder", "WordPiece");
    expect_refusal("{\"post_processor\":{\"type\":\"Custom\"}," TINY_MODEL "}", COLI_EUNSUPPORTED,
                   "post_processor", "Custom");
    /* Ids the post-processor adds must be tokens: here 3 of a vocab of 3. */
    expect_refusal("{\"post_processor\":{\"type\":\"RobertaProcessing\",\"cls\":[\"a\",0],"
                   "\"sep\":[\"x\",3]}," TINY_MODEL "}",
                   COLI_EFORMAT, "post_processor", "id 3");
    expect_refusal("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
                   "{\"id\":\"<x>\"}},{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<x>\":"
                   "{\"ids\":[7]}}}," TINY_MODEL "}",
                   COLI_EFORMAT, "post_processor", "id 7");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{},\"merges\":[]}}",
                   COLI_EUNSUPPORTED, "dropout", NULL);
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b\"]}}",
                   COLI_EFORMAT, "merges", "\"b\"");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
                   COLI_EFORMAT, "merges", "\"ab\"");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}",
                   COLI_EFORMAT, "vocab", NULL);
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b c\"]}}",
                   COLI_EFORMAT, "merges", NULL);
    expect_refusal("{\"added_tokens\":[{\"content\":\"x\"}]," TINY_MODEL "}", COLI_EFORMAT,
                   "added_tokens", NULL);
    expect_refusal("{\"version\":\"1.0\"}", COLI_EFORMAT, "model", NULL);
    expect_refusal("[1,2]", COLI_EFORMAT, "object", NULL);
    /* malformed JSON: the JSON reader names the file */
    expect_refusal("{\"model\": {\"type\": \"BPE\",}", COLI_EFORMAT, "bad.json", NULL);

    missing = tu_path(g_dir, "no-such-tokenizer.json");
    tok = (coli__tokenizer *)&tok;
    st = coli__tok_load(missing, &tok, &err);
    ck_assert_int_eq(st, COLI_ENOENT);
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err.msg, "no-such-tokenizer.json") != NULL, "%s", err.msg);
    free(missing);

    ck_assert_int_eq(coli__tok_load(NULL, &tok, &err), COLI_EINVAL);
    coli__tok_free(NULL);
}
END_TEST

/* Ids size the id tables, so an id far past the entries present is refused
 * before anything is allocated by it (2^26 - 1 used to take some 576 MB).
 * Here 3 vocab entries and 1 added token allow ids below 2 * 4 + 1024. */
#define ADDED_AT(id)                                                                     \
    "{\"added_tokens\":[{\"id\":" #id ",\"content\":\"<x>\",\"special\":true}]," TINY_MODEL "}"

START_TEST(test_id_limits)
{
    coli__tokenizer *tok = load_ok(ADDED_AT(1031));
    ck_assert_uint_eq(coli__tok_vocab_size(tok), 1032);
    ck_assert_int_eq(coli__tok_find(tok, "<x>"), 1031);
    EXPECT_DECODE(tok, 0, "<x> ab", 1031, 2); /* no decoder: pieces joined by spaces */
    coli__tok_free(tok);
    expect_refusal(ADDED_AT(1032), COLI_EFORMAT, "added_tokens[0]", "below 1032");
    expect_refusal(ADDED_AT(67108863), COLI_EFORMAT, "added_tokens[0]", "67108863");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":67108863},\"merges\":[]}}",
                   COLI_EFORMAT, "model.vocab[\"b\"]", "67108863");
    expect_refusal("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1028},\"merges\":[]}}",
                   COLI_EFORMAT, "model.vocab[\"b\"]", "below 1028");
}
END_TEST

START_TEST(test_bad_calls)
{
    coli__tokenizer *tok = load_ok("{" TINY_MODEL "}");
    coli__ids ids = {0};
    coli__buf out = {0};
    coli__err err = {{0}};
    int32_t bad[] = {0, 3};
    int32_t neg[] = {-1};

    EXPECT_IDS(tok, "ab", 0, 2);
    EXPECT_IDS(tok, "aab", 0, 0, 2);
    ck_assert_int_eq(coli__tok_encode(tok, "a\xC3", 2, 0, &ids, &err), COLI_EINVAL);
    ck_assert_msg(strstr(err.msg, "UTF-8") != NULL, "%s", err.msg);
    ck_assert_uint_eq(ids.n, 0);
    ck_assert_int_eq(coli__tok_decode(tok, bad, 2, 0, &out, &err), COLI_EINVAL);
    ck_assert_msg(strstr(err.msg, "3") != NULL, "%s", err.msg);
    ck_assert_int_eq(coli__tok_decode(tok, neg, 1, 0, &out, &err), COLI_EINVAL);
    ck_assert_uint_eq(out.n, 0);
    ck_assert_int_eq(coli__tok_encode(NULL, "a", 1, 0, &ids, &err), COLI_EINVAL);
    ck_assert_int_eq(coli__tok_encode(tok, NULL, 0, 0, &ids, &err), COLI_OK);
    ck_assert_uint_eq(coli__tok_vocab_size(NULL), 0);
    ck_assert_int_eq(coli__tok_find(NULL, "a"), -1);
    /* append semantics */
    ck_assert_int_eq(coli__tok_encode(tok, "ab", 2, 0, &ids, &err), COLI_OK);
    ck_assert_int_eq(coli__tok_encode(tok, "b", 1, 0, &ids, &err), COLI_OK);
    ck_assert_uint_eq(ids.n, 2);
    ck_assert_int_eq(ids.v[0], 2);
    ck_assert_int_eq(ids.v[1], 1);
    ck_assert_int_eq(coli__tok_decode(tok, ids.v, ids.n, 0, &out, &err), COLI_OK);
    ck_assert_int_eq(coli__tok_decode(tok, ids.v, 1, 0, &out, &err), COLI_OK);
    ck_assert_str_eq(out.p, "ab bab");
    coli__ids_free(&ids);
    coli__buf_free(&out);
    coli__ids_free(NULL);
    coli__buf_free(NULL);
    coli__tok_free(tok);
}
END_TEST

/* A long input through the byte-level pipeline: linear behaviour and the
 * same result as its pieces encoded one by one. */
START_TEST(test_long_input)
{
    char *json = byte_level_json(PRE_GPT2, "null");
    coli__tokenizer *tok = load_ok(json);
    size_t reps = 20000, n;
    const char *unit = "hello the yellow\n";
    char *text = malloc(strlen(unit) * reps + 1);
    coli__ids ids = {0};
    coli__err err = {{0}};
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < reps; i++)
        memcpy(text + i * strlen(unit), unit, strlen(unit));
    n = strlen(unit) * reps;
    text[n] = '\0';
    ck_assert_int_eq(coli__tok_encode(tok, text, n, 0, &ids, &err), COLI_OK);
    /* hello | " the" | " yellow" | "\n": 3 + 1 + 5 + 1 ids; the last \n stays alone */
    ck_assert_uint_eq(ids.n, reps * 10);
    {
        coli__buf out = {0};
        ck_assert_int_eq(coli__tok_decode(tok, ids.v, ids.n, 0, &out, &err), COLI_OK);
        ck_assert_uint_eq(out.n, n);
        ck_assert(memcmp(out.p, text, n) == 0);
        coli__buf_free(&out);
    }
    coli__ids_free(&ids);
    free(text);
    /* one long word: the heap keeps BPE fast */
    n = 199998;
    text = malloc(n + 1);
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < n; i++)
        text[i] = "hel"[i % 3];
    text[n] = '\0';
    ck_assert_int_eq(coli__tok_encode(tok, text, n, 0, &ids, &err), COLI_OK);
    ck_assert_uint_eq(ids.n, 2 * n / 3); /* he l he l ... */
    coli__ids_free(&ids);
    free(text);
    coli__tok_free(tok);
    free(json);
}
END_TEST

/* ---- Hugging Face reference fixtures ----------------------------------- */

typedef struct ref_case {
    char *text;
    size_t text_len;
    int32_t *ids, *ids_sp;
    size_t n_ids, n_ids_sp;
    int has_ids, has_ids_sp, has_dec;
    char *dec;
    size_t dec_len;
} ref_case;

static char *unhex(const char *h, size_t *n)
{
    size_t len = strlen(h), k;
    char *o;
    if (strcmp(h, "-") == 0)
        len = 0;
    if (len % 2)
        return NULL;
    o = malloc(len / 2 + 1);
    if (!o)
        return NULL;
    for (k = 0; k < len / 2; k++) {
        unsigned v;
        if (sscanf(h + 2 * k, "%2x", &v) != 1) {
            free(o);
            return NULL;
        }
        o[k] = (char)v;
    }
    o[k] = '\0';
    *n = k;
    return o;
}

static int32_t *parse_ids(char *rest, size_t *n_out)
{
    char *save = NULL, *tokp = strtok_r(rest, " ", &save);
    long n;
    int32_t *v;
    if (!tokp)
        return NULL;
    n = strtol(tokp, NULL, 10);
    if (n < 0 || n > 10000000)
        return NULL;
    v = malloc(((size_t)n + 1) * sizeof *v);
    if (!v)
        return NULL;
    for (long i = 0; i < n; i++) {
        tokp = strtok_r(NULL, " ", &save);
        if (!tokp) {
            free(v);
            return NULL;
        }
        v[i] = (int32_t)strtol(tokp, NULL, 10);
    }
    *n_out = (size_t)n;
    return v;
}

static void hexdump(char *dst, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < n && k + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\')
            dst[k++] = (char)c;
        else
            k += (size_t)snprintf(dst + k, cap - k, "\\x%02x", c);
    }
    if (k < cap)
        dst[k] = '\0';
}

static void fmt_ids(char *dst, size_t cap, const int32_t *v, size_t n)
{
    size_t k = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < n && k + 16 < cap; i++)
        k += (size_t)snprintf(dst + k, cap - k, " %d", (int)v[i]);
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void run_fixture(const char *arch)
{
    char *dir = tu_path(tu_data_dir(), arch);
    char *tj = tu_path(dir, "tokenizer.json"), *rp = tu_path(dir, "reference.txt");
    char *ref, *line, *save = NULL;
    size_t n_cases = 0, cap = 0, matched = 0, failed = 0;
    ref_case *cases = NULL;
    coli__tokenizer *tok = NULL;
    coli__err err = {{0}};
    char report[4096] = "";
    size_t rlen = 0;
    coli_status st;

    ref = tu_read_file(rp, NULL);
    ck_assert_msg(ref != NULL, "fixture %s is missing", rp);
    st = coli__tok_load(tj, &tok, &err);
    ck_assert_msg(st == COLI_OK, "%s: load failed: %s", arch, err.msg);

    for (line = strtok_r(ref, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char kw[32];
        long k;
        int off = 0;
        ref_case *c;
        if (sscanf(line, "%31s %ld %n", kw, &k, &off) < 2 || strncmp(kw, "tok_", 4) != 0)
            continue;
        ck_assert_msg(k >= 0 && k < 100000, "bad case number in %s", line);
        if ((size_t)k >= cap) {
            size_t nc = ((size_t)k + 1) * 2;
            cases = realloc(cases, nc * sizeof *cases);
            ck_assert_ptr_nonnull(cases);
            memset(cases + cap, 0, (nc - cap) * sizeof *cases);
            cap = nc;
        }
        if ((size_t)k + 1 > n_cases)
            n_cases = (size_t)k + 1;
        c = &cases[k];
        if (strcmp(kw, "tok_case") == 0) {
            c->text = unhex(line + off, &c->text_len);
            ck_assert_msg(c->text != NULL, "bad hex in %s", line);
        } else if (strcmp(kw, "tok_ids") == 0) {
            c->ids = parse_ids(line + off, &c->n_ids);
            ck_assert_msg(c->ids != NULL, "bad ids line %ld", k);
            c->has_ids = 1;
        } else if (strcmp(kw, "tok_ids_special") == 0) {
            c->ids_sp = parse_ids(line + off, &c->n_ids_sp);
            ck_assert_msg(c->ids_sp != NULL, "bad ids line %ld", k);
            c->has_ids_sp = 1;
        } else if (strcmp(kw, "tok_decoded") == 0) {
            c->dec = unhex(line + off, &c->dec_len);
            ck_assert_msg(c->dec != NULL, "bad hex in %s", line);
            c->has_dec = 1;
        }
    }

    for (size_t k = 0; k < n_cases; k++) {
        ref_case *c = &cases[k];
        coli__ids ids = {0};
        coli__buf dec = {0};
        char why[200] = "";
        if (!c->text)
            continue;
        st = coli__tok_encode(tok, c->text, c->text_len, 0, &ids, &err);
        if (st != COLI_OK) {
            snprintf(why, sizeof why, "encode failed: %.150s", err.msg);
        } else if (c->has_ids && !same_ids(ids.v, ids.n, c->ids, c->n_ids)) {
            char g[80], w[80];
            fmt_ids(g, sizeof g, ids.v, ids.n);
            fmt_ids(w, sizeof w, c->ids, c->n_ids);
            snprintf(why, sizeof why, "ids [%s] want [%s]", g, w);
        }
        if (!why[0] && c->has_ids) {
            st = coli__tok_decode(tok, c->ids, c->n_ids, 0, &dec, &err);
            if (st != COLI_OK)
                snprintf(why, sizeof why, "decode failed: %.150s", err.msg);
            else if (c->has_dec &&
                     (dec.n != c->dec_len || (dec.n && memcmp(dec.p, c->dec, dec.n) != 0))) {
                char g[80], w[80];
                hexdump(g, sizeof g, dec.p, dec.n);
                hexdump(w, sizeof w, c->dec, c->dec_len);
                snprintf(why, sizeof why, "decoded \"%s\" want \"%s\"", g, w);
            }
        }
        if (!why[0] && c->has_ids_sp) {
            ids.n = 0;
            st = coli__tok_encode(tok, c->text, c->text_len, 1, &ids, &err);
            if (st != COLI_OK) {
                snprintf(why, sizeof why, "encode(special) failed: %.150s", err.msg);
            } else if (!same_ids(ids.v, ids.n, c->ids_sp, c->n_ids_sp)) {
                char g[80], w[80];
                fmt_ids(g, sizeof g, ids.v, ids.n);
                fmt_ids(w, sizeof w, c->ids_sp, c->n_ids_sp);
                snprintf(why, sizeof why, "special ids [%s] want [%s]", g, w);
            }
        }
        if (why[0]) {
            char t[120];
            failed++;
            hexdump(t, sizeof t, c->text, c->text_len);
            if (rlen + 400 < sizeof report)
                rlen += (size_t)snprintf(report + rlen, sizeof report - rlen,
                                         "\n  case %zu \"%s\": %s", k, t, why);
        } else {
            matched++;
        }
        coli__ids_free(&ids);
        coli__buf_free(&dec);
    }
    fprintf(stderr, "tokenizer fixture %s: %zu/%zu cases match\n", arch, matched,
            matched + failed);
    ck_assert_msg(failed == 0, "%s: %zu of %zu cases differ:%s", arch, failed, matched + failed,
                  report);
    ck_assert_msg(matched > 0, "%s: reference.txt has no tok_case lines", arch);

    for (size_t k = 0; k < n_cases; k++) {
        free(cases[k].text);
        free(cases[k].ids);
        free(cases[k].ids_sp);
        free(cases[k].dec);
    }
    free(cases);
    coli__tok_free(tok);
    free(ref);
    free(rp);
    free(tj);
    free(dir);
}

/* ---- BPE against a reference ------------------------------------------ */

/* The plainest BPE there is, as its definition reads: while some adjacent
 * pair has a merge, apply the one of lowest rank, the leftmost if it occurs
 * more than once; a pair listed twice has its later rank. Quadratic, and
 * independent of the library's heap and of its cutting words at boundaries
 * no merge crosses. Built from the tokenizer.json text itself (BPE model,
 * no continuing-subword prefix, optional byte fallback). */
typedef struct ref_tok {
    const char *s;
    size_t n;
    int32_t id;
} ref_tok;

typedef struct ref_merge {
    int32_t a, b, id;
    uint32_t rank;
} ref_merge;

typedef struct ref_bpe {
    ref_tok *vocab; /* open addressing, vcap slots */
    size_t vcap;
    ref_merge *merges; /* open addressing by (a, b), mcap slots */
    size_t mcap;
    int32_t byte_id[256];
    int byte_fallback;
    coli__json_doc *doc; /* owns the strings */
} ref_bpe;

static size_t ref_hash(const char *s, size_t n)
{
    size_t h = 5381;
    for (size_t i = 0; i < n; i++)
        h = h * 33 + (unsigned char)s[i];
    return h;
}

static int32_t ref_vocab(const ref_bpe *r, const char *s, size_t n)
{
    for (size_t i = ref_hash(s, n) % r->vcap;; i = (i + 1) % r->vcap) {
        if (!r->vocab[i].s)
            return -1;
        if (r->vocab[i].n == n && memcmp(r->vocab[i].s, s, n) == 0)
            return r->vocab[i].id;
    }
}

static ref_merge *ref_merge_slot(const ref_bpe *r, int32_t a, int32_t b)
{
    for (size_t i = ((size_t)a * 1000003u + (size_t)b) % r->mcap;; i = (i + 1) % r->mcap)
        if (r->merges[i].a < 0 || (r->merges[i].a == a && r->merges[i].b == b))
            return &r->merges[i];
}

static void ref_load(ref_bpe *r, const char *json)
{
    coli__err err = {{0}};
    memset(r, 0, sizeof *r);
    ck_assert_int_eq(coli__json_parse(json, strlen(json), "ref", &r->doc, &err), COLI_OK);
    const coli__json *model = coli__json_get(coli__json_root(r->doc), "model");
    const coli__json *vocab = coli__json_get(model, "vocab");
    const coli__json *merges = coli__json_get(model, "merges");
    r->byte_fallback = coli__json_get_bool(model, "byte_fallback", 0);
    r->vcap = vocab->len * 2 + 1;
    r->vocab = calloc(r->vcap, sizeof *r->vocab);
    r->mcap = merges->len * 2 + 1;
    r->merges = malloc(r->mcap * sizeof *r->merges);
    ck_assert(r->vocab && r->merges);
    for (size_t i = 0; i < vocab->len; i++) {
        const coli__json *k = coli__json_key(vocab, i);
        size_t j = ref_hash(k->str, k->len) % r->vcap;
        while (r->vocab[j].s && !(r->vocab[j].n == k->len && memcmp(r->vocab[j].s, k->str, k->len) == 0))
            j = (j + 1) % r->vcap;
        r->vocab[j].s = k->str;
        r->vocab[j].n = k->len;
        r->vocab[j].id = (int32_t)vocab->items[i].integer;
    }
    for (size_t i = 0; i < r->mcap; i++)
        r->merges[i].a = -1;
    for (size_t i = 0; i < merges->len; i++) {
        const coli__json *m = &merges->items[i];
        char cat[256];
        const char *a = m->items[0].str, *b = m->items[1].str;
        size_t al = m->items[0].len, bl = m->items[1].len;
        ck_assert_uint_lt(al + bl, sizeof cat);
        memcpy(cat, a, al);
        memcpy(cat + al, b, bl);
        ref_merge *slot = ref_merge_slot(r, ref_vocab(r, a, al), ref_vocab(r, b, bl));
        slot->a = ref_vocab(r, a, al);
        slot->b = ref_vocab(r, b, bl);
        slot->id = ref_vocab(r, cat, al + bl);
        slot->rank = (uint32_t)i;
        ck_assert(slot->a >= 0 && slot->b >= 0 && slot->id >= 0);
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        r->byte_id[b] = ref_vocab(r, name, 6);
    }
}

static void ref_free(ref_bpe *r)
{
    free(r->vocab);
    free(r->merges);
    coli__json_free(r->doc);
}

/* The ids of the word w[0..n) into out (room for n); their number. Every
 * character must be in the vocab or, with byte fallback, its bytes. */
static size_t ref_encode(const ref_bpe *r, const char *w, size_t n, int32_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        while (i + len < n && ((unsigned char)w[i + len] & 0xC0) == 0x80)
            len++;
        int32_t id = ref_vocab(r, w + i, len);
        if (id >= 0) {
            out[k++] = id;
        } else {
            ck_assert_msg(r->byte_fallback, "reference: character not in the vocab");
            for (size_t j = 0; j < len; j++)
                out[k++] = r->byte_id[(unsigned char)w[i + j]];
        }
        i += len;
    }
    for (;;) {
        const ref_merge *best = NULL;
        size_t at = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            const ref_merge *m = ref_merge_slot(r, out[i], out[i + 1]);
            if (m->a >= 0 && (!best || m->rank < best->rank)) {
                best = m;
                at = i;
            }
        }
        if (!best)
            return k;
        out[at] = best->id;
        memmove(out + at + 1, out + at + 2, (k - at - 2) * sizeof *out);
        k--;
    }
}

static uint32_t rng_next(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* A random string of n characters from alpha (n_alpha of them), with runs
 * of one character ("aaaaaa") as often as not. */
static size_t rand_text(uint32_t *x, const char *const *alpha, size_t n_alpha, size_t n, char *out)
{
    size_t o = 0;
    while (n > 0) {
        const char *c = alpha[rng_next(x) % n_alpha];
        size_t run = rng_next(x) % 2 ? 1 + rng_next(x) % 12 : 1;
        for (; run > 0 && n > 0; run--, n--) {
            memcpy(out + o, c, strlen(c));
            o += strlen(c);
        }
    }
    out[o] = '\0';
    return o;
}

/* Encodes text with the library and compares with the reference on word. */
static void same_as_ref(const coli__tokenizer *tok, const ref_bpe *r, const char *text,
                        const char *word, size_t wn)
{
    int32_t *want = malloc((wn + 1) * sizeof *want);
    coli__ids ids = {0};
    coli__err err = {{0}};
    ck_assert_ptr_nonnull(want);
    size_t nw = ref_encode(r, word, wn, want);
    ck_assert_int_eq(coli__tok_encode(tok, text, strlen(text), 0, &ids, &err), COLI_OK);
    ck_assert_msg(same_ids(ids.v, ids.n, want, nw), "\"%s\": %zu ids, the reference %zu", text,
                  ids.n, nw);
    coli__ids_free(&ids);
    free(want);
}

/* Random merge tables over a, b, c, ▁ and é: merged tokens are pairs of
 * tokens already there, some pairs listed twice, some merges giving a token
 * another pair also gives. In half the tables ▁ starts right parts only
 * after ▁ (as in SentencePiece vocabularies, where words then split), in
 * the others anywhere. No pre-tokenizer: the whole text is one word. */
START_TEST(test_bpe_vs_reference_random)
{
    static const char *const alpha[] = {"a", "b", "c", "\xE2\x96\x81", "\xC3\xA9"};
    uint32_t x = 12345u + (uint32_t)_i;
    char text[2048];
    for (int table = 0; table < 8; table++) {
        int sp_like = table % 2 == 0;
        size_t ntok = 5, nmerge = 30 + rng_next(&x) % 150;
        char (*toks)[64] = calloc(ntok + nmerge, sizeof *toks);
        sbuf j = {0};
        ck_assert_ptr_nonnull(toks);
        for (size_t i = 0; i < 5; i++)
            strcpy(toks[i], alpha[i]);
        sb_str(&j, "{\"model\":{\"type\":\"BPE\",\"merges\":[");
        for (size_t m = 0, listed = 0; m < nmerge; m++) {
            const char *a = toks[rng_next(&x) % ntok], *b = toks[rng_next(&x) % ntok];
            size_t al = strlen(a), bl = strlen(b);
            int after_space = al >= 3 && strcmp(a + al - 3, "\xE2\x96\x81") == 0;
            if (al + bl >= 64 || (sp_like && strncmp(b, "\xE2\x96\x81", 3) == 0 && !after_space))
                continue;
            char cat[64];
            memcpy(cat, a, al);
            memcpy(cat + al, b, bl + 1);
            size_t k = 0;
            while (k < ntok && strcmp(toks[k], cat) != 0)
                k++;
            if (k == ntok)
                strcpy(toks[ntok++], cat);
            for (int twice = 0; twice < (rng_next(&x) % 8 == 0 ? 2 : 1); twice++) {
                sb_str(&j, listed++ ? ",[" : "[");
                sb_jsonz(&j, a);
                sb_str(&j, ",");
                sb_jsonz(&j, b);
                sb_str(&j, "]");
            }
        }
        sb_str(&j, "],\"vocab\":{");
        for (size_t k = 0; k < ntok; k++) {
            char id[24];
            if (k)
                sb_str(&j, ",");
            sb_jsonz(&j, toks[k]);
            snprintf(id, sizeof id, ":%zu", k);
            sb_str(&j, id);
        }
        sb_str(&j, "}}}");
        coli__tokenizer *tok = load_ok(j.p);
        ref_bpe r;
        ref_load(&r, j.p);
        for (int t = 0; t < 60; t++) {
            size_t n = rand_text(&x, alpha, 5, rng_next(&x) % 300, text);
            same_as_ref(tok, &r, text, text, n);
        }
        ref_free(&r);
        coli__tok_free(tok);
        free(j.p);
        free(toks);
    }
}
END_TEST

/* The fixtures' own merges on random text from their alphabets: Mixtral's
 * SentencePiece tokenizer, where the whole text is one word after its
 * normalizer ("▁" prepended, spaces made "▁"), and Qwen3's byte-level one
 * on letter words (one pre-token each, " " becoming "Ġ"). */
START_TEST(test_bpe_vs_reference_fixtures)
{
    char *dir = tu_path(tu_data_dir(), "mixtral");
    char *tj = tu_path(dir, "tokenizer.json");
    char *json = tu_read_file(tj, NULL);
    coli__tokenizer *tok = NULL;
    coli__err err = {{0}};
    ref_bpe r;
    const char *alpha[300];
    size_t n_alpha = 0, len;
    uint32_t cp;
    char text[4096], word[8192];
    uint32_t x = 777u;

    ck_assert_ptr_nonnull(json);
    ck_assert_int_eq(coli__tok_load(tj, &tok, &err), COLI_OK);
    ref_load(&r, json);
    /* one-character tokens, ▁ as a space; not '<', which could spell <s> */
    for (size_t i = 0; i < r.vcap; i++) {
        const ref_tok *v = &r.vocab[i];
        if (!v->s || v->s[0] == '<' || n_alpha == 300)
            continue;
        if (v->n == 3 && memcmp(v->s, "\xE2\x96\x81", 3) == 0)
            alpha[n_alpha++] = " ";
        else if (coli__utf8_decode(v->s, v->n, &cp, &len) && len == v->n)
            alpha[n_alpha++] = v->s;
    }
    ck_assert_uint_gt(n_alpha, 20);
    for (int t = 0; t < 400; t++) {
        size_t n = rand_text(&x, alpha, n_alpha, 1 + rng_next(&x) % 400, text), wn = 3;
        memcpy(word, "\xE2\x96\x81", 3);
        for (size_t i = 0; i < n; i++) {
            if (text[i] == ' ') {
                memcpy(word + wn, "\xE2\x96\x81", 3);
                wn += 3;
            } else {
                word[wn++] = text[i];
            }
        }
        same_as_ref(tok, &r, text, word, wn);
    }
    ref_free(&r);
    coli__tok_free(tok);
    free(json);
    free(tj);
    free(dir);

    dir = tu_path(tu_data_dir(), "qwen3_moe");
    tj = tu_path(dir, "tokenizer.json");
    json = tu_read_file(tj, NULL);
    ck_assert_ptr_nonnull(json);
    ck_assert_int_eq(coli__tok_load(tj, &tok, &err), COLI_OK);
    ref_load(&r, json);
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const char *la[52];
    char one[52][2];
    for (size_t i = 0; i < 52; i++) {
        one[i][0] = letters[i];
        one[i][1] = '\0';
        la[i] = one[i];
        ck_assert_int_ge(ref_vocab(&r, one[i], 1), 0);
    }
    for (int t = 0; t < 400; t++) {
        int lead = (int)(rng_next(&x) % 2);
        size_t n = rand_text(&x, la, t % 3 ? 52 : 3, 1 + rng_next(&x) % 300, text + lead);
        if (lead)
            text[0] = ' ';
        memcpy(word, "\xC4\xA0", 2); /* Ġ */
        memcpy(word + 2 * lead, text + lead, n + 1);
        same_as_ref(tok, &r, text, word, n + 2 * (size_t)lead);
    }
    ref_free(&r);
    coli__tok_free(tok);
    free(json);
    free(tj);
    free(dir);
}
END_TEST

/* Decoding to nothing (only skipped specials, or no ids): Fuse then makes
 * one empty piece with no text buffer behind it, which Strip must not
 * offset (clang's UBSan stopped here on NULL + 0). */
START_TEST(test_decode_to_nothing)
{
    char *dir = tu_path(tu_data_dir(), "mixtral");
    char *tj = tu_path(dir, "tokenizer.json");
    coli__tokenizer *tok = NULL;
    coli__err err = {{0}};
    ck_assert_int_eq(coli__tok_load(tj, &tok, &err), COLI_OK);
    ck_assert_int_eq(coli__tok_find(tok, "<s>"), 1);
    EXPECT_DECODE(tok, 1, "", 1);
    EXPECT_DECODE(tok, 1, "", 1, 2);
    EXPECT_DECODE(tok, 0, "<s>", 1);
    expect_decode(tok, NULL, 0, 1, "");
    expect_decode(tok, NULL, 0, 0, "");
    coli__tok_free(tok);
    free(tj);
    free(dir);
}
END_TEST

START_TEST(test_fixture_qwen3_moe)
{
    run_fixture("qwen3_moe");
}
END_TEST

START_TEST(test_fixture_olmoe)
{
    run_fixture("olmoe");
}
END_TEST

START_TEST(test_fixture_mixtral)
{
    run_fixture("mixtral");
}
END_TEST

static Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("unicode");
    tcase_add_test(tc, test_utf8_roundtrip);
    tcase_add_test(tc, test_utf8_invalid);
    tcase_add_test(tc, test_classes);
    tcase_add_test(tc, test_nfc);
    suite_add_tcase(s, tc);

    tc = tcase_create("bpe");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_split_gpt2);
    tcase_add_test(tc, test_split_qwen2);
    tcase_add_test(tc, test_bpe_byte_level);
    tcase_add_test(tc, test_bpe_qwen_style);
    tcase_add_test(tc, test_bpe_sentencepiece);
    tcase_add_test(tc, test_metaspace);
    tcase_add_test(tc, test_added_flags);
    tcase_add_test(tc, test_lstrip_run);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_bad_calls);
    tcase_add_test(tc, test_id_limits);
    tcase_add_test(tc, test_long_input);
    tcase_add_loop_test(tc, test_bpe_vs_reference_random, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("reference");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fixture_qwen3_moe);
    tcase_add_test(tc, test_fixture_olmoe);
    tcase_add_test(tc, test_fixture_mixtral);
    tcase_add_test(tc, test_decode_to_nothing);
    tcase_add_test(tc, test_bpe_vs_reference_fixtures);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(tokenizer_suite());
}
