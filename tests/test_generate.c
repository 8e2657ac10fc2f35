/*
 * test_generate.c - generation and sampling through the public API: why a
 * generation stops (length, end of sequence, full context, stop strings, the
 * callback), the statistics it leaves, padded vocabularies, min-p and the
 * repetition penalty.
 *
 * Expectations come from the header's contract and from greedy decoding
 * done by hand with coli_eval and an argmax written here, never from the
 * library's internals.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define PROMPT_TEXT "In the beginning God created the heaven and the earth."

static char *fixture_dir(const char *name)
{
    return tu_path(tu_data_dir(), name);
}

typedef struct fixture {
    char *dir;
    coli_model *m;
    coli_context *c;
    coli_model_info info;
    int32_t prompt[128];
    size_t n_prompt;
} fixture;

/* Opens dir (a fixture name or a path) with an optional context size. */
static void fx_open_dir(fixture *f, const char *dir, int64_t n_ctx)
{
    coli_options *o = NULL;
    coli_status st;

    memset(f, 0, sizeof *f);
    f->dir = strdup(dir);
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    if (n_ctx > 0)
        ck_assert_int_eq(coli_options_set(o, COLI_OPT_CONTEXT, n_ctx), COLI_OK);
    st = coli_model_open(dir, o, &f->m);
    ck_assert_msg(st == COLI_OK, "opening %s: %s", dir, f->m ? coli_model_errmsg(f->m) : "");
    coli_options_free(o);
    f->info.struct_size = sizeof f->info;
    ck_assert_int_eq(coli_model_get_info(f->m, &f->info), COLI_OK);
    ck_assert_int_eq(coli_context_create(f->m, NULL, &f->c), COLI_OK);
    ck_assert_int_eq(coli_tokenize(f->m, PROMPT_TEXT, strlen(PROMPT_TEXT), 1, f->prompt, 128, &f->n_prompt),
                     COLI_OK);
    ck_assert_uint_ge(f->n_prompt, 4);
}

static void fx_open(fixture *f, const char *name, int64_t n_ctx)
{
    char *dir = fixture_dir(name);
    fx_open_dir(f, dir, n_ctx);
    free(dir);
}

static void fx_close(fixture *f)
{
    coli_context_free(f->c);
    coli_model_free(f->m);
    free(f->dir);
    memset(f, 0, sizeof *f);
}

/* Greedy continuation by hand: n tokens (no stop at eos), from a reset
 * context; the last one is not evaluated. */
static void greedy_by_hand(fixture *f, const int32_t *prompt, size_t n_prompt, int32_t *out, size_t n)
{
    coli_context_reset(f->c);
    ck_assert_int_eq(coli_eval(f->c, prompt, n_prompt), COLI_OK);
    for (size_t i = 0; i < n; i++) {
        out[i] = tu_argmax(coli_context_logits(f->c), f->info.vocab_size);
        if (i + 1 < n)
            ck_assert_int_eq(coli_eval(f->c, &out[i], 1), COLI_OK);
    }
    coli_context_reset(f->c);
    coli_context_stats_reset(f->c);
}

static coli_sampler *greedy(void)
{
    coli_sampler *s = NULL;
    ck_assert_int_eq(coli_sampler_create(NULL, &s), COLI_OK);
    return s;
}

typedef struct text_buf {
    char text[16384];
    size_t len;
    int calls;
} text_buf;

static int collect(void *user, int32_t token, const char *text, size_t len)
{
    text_buf *b = user;
    (void)token;
    ck_assert(text != NULL);
    ck_assert_uint_lt(b->len + len, sizeof b->text);
    memcpy(b->text + b->len, text, len);
    b->len += len;
    b->text[b->len] = '\0';
    b->calls++;
    return 0;
}

static coli_generate_params params(size_t max_tokens)
{
    coli_generate_params p;
    coli_generate_params_init(&p, sizeof p);
    p.max_tokens = max_tokens;
    return p;
}

/* ---- stop reasons and statistics ------------------------------------------ */

START_TEST(test_defaults)
{
    coli_generate_params p;
    coli_sampler_params sp;

    memset(&p, 0xa5, sizeof p);
    coli_generate_params_init(&p, sizeof p);
    ck_assert_uint_eq(p.struct_size, sizeof p);
    ck_assert_uint_eq(p.max_tokens, 64);
    ck_assert_int_eq(p.ignore_eos, 0);
    ck_assert_ptr_null(p.stop);
    ck_assert_uint_eq(p.n_stop, 0);
    ck_assert_ptr_null(p.on_token);
    memset(&sp, 0xa5, sizeof sp);
    coli_sampler_params_init(&sp, sizeof sp);
    ck_assert_uint_eq(sp.struct_size, sizeof sp);
    ck_assert(sp.temperature == 0.0f && sp.top_k == 0 && sp.top_p == 1.0f && sp.min_p == 0.0f);
    ck_assert(sp.repeat_penalty == 1.0f && sp.repeat_last_n == 64 && sp.seed == 0);
    /* A caller built against a shorter struct gets only its bytes written. */
    unsigned char raw[sizeof sp + 8];
    memset(raw, 0xa5, sizeof raw);
    coli_sampler_params_init((coli_sampler_params *)(void *)raw, sizeof(size_t) + sizeof(float));
    for (size_t i = sizeof(size_t) + sizeof(float); i < sizeof raw; i++)
        ck_assert_uint_eq(raw[i], 0xa5);
    ck_assert_str_eq(coli_stop_reason_name(COLI_STOP_EOS), "eos");
    ck_assert_str_eq(coli_stop_reason_name(COLI_STOP_LENGTH), "length");
    ck_assert_str_eq(coli_stop_reason_name(COLI_STOP_CONTEXT), "context");
    ck_assert_str_eq(coli_stop_reason_name(COLI_STOP_STRING), "stop");
    ck_assert_str_eq(coli_stop_reason_name(COLI_STOP_CALLBACK), "callback");
    ck_assert_str_eq(coli_stop_reason_name((coli_stop_reason)99), "none");
}
END_TEST

START_TEST(test_length_and_stats)
{
    fixture f;
    coli_sampler *s = greedy();
    coli_generate_params p = params(5);
    coli_stop_reason why = COLI_STOP_NONE;
    coli_stats st = {.struct_size = sizeof(coli_stats)};
    int32_t out[8], want[8];
    size_t n = 0;

    fx_open(&f, "olmoe", 0); /* eos 0: the greedy fixture text has none */
    memset(out, 0xff, sizeof out); /* poison: -1 is no token */
    greedy_by_hand(&f, f.prompt, f.n_prompt, want, 5);
    p.ignore_eos = 1;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 8, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_LENGTH);
    ck_assert_uint_eq(n, 5);
    ck_assert_mem_eq(out, want, 5 * sizeof *out);
    ck_assert_int_eq(coli_context_stats(f.c, &st), COLI_OK);
    ck_assert_uint_eq(st.prefill_tokens, f.n_prompt);
    /* every generated token is evaluated, so that a later call continues */
    ck_assert_uint_eq(st.decode_tokens, 5);
    ck_assert_uint_eq(coli_context_position(f.c), f.n_prompt + 5);

    /* A one-token prompt is prefill too (it used to count as decode). */
    coli_context_reset(f.c);
    coli_context_stats_reset(f.c);
    p.max_tokens = 0;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, 1, s, &p, out, 8, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_LENGTH);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(coli_context_stats(f.c, &st), COLI_OK);
    ck_assert_uint_eq(st.prefill_tokens, 1);
    ck_assert_uint_eq(st.decode_tokens, 0);

    coli_context_reset(f.c);
    coli_context_stats_reset(f.c);
    p.max_tokens = 5;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, 1, s, &p, out, 8, &n, &why), COLI_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(coli_context_stats(f.c, &st), COLI_OK);
    ck_assert_uint_eq(st.prefill_tokens, 1);
    ck_assert_uint_eq(st.decode_tokens, 5);

    /* Continuing with an empty prompt picks up where the last call ended:
     * 5 + 3 tokens equal 8 in one go. */
    int32_t eight[8], more[3];
    greedy_by_hand(&f, f.prompt, f.n_prompt, eight, 8);
    p.max_tokens = 5;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 8, &n, &why), COLI_OK);
    p.max_tokens = 3;
    ck_assert_int_eq(coli_generate(f.c, NULL, 0, s, &p, more, 3, &n, &why), COLI_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_mem_eq(out, eight, 5 * sizeof *out);
    ck_assert_mem_eq(more, eight + 5, 3 * sizeof *out);
    coli_sampler_free(s);
    fx_close(&f);
}
END_TEST

/* A full context ends the generation cleanly: the token sampled from the
 * last position is kept (not evaluated), and both entry points succeed. */
START_TEST(test_context_full)
{
    const int64_t n_ctx = 12;
    fixture f;
    coli_sampler *s = greedy();
    coli_generate_params p = params(1000);
    coli_stop_reason why = COLI_STOP_NONE;
    int32_t out[64], want[64];
    size_t n = 0, n_prompt = 5, expect = (size_t)n_ctx - n_prompt + 1;
    text_buf tb;

    fx_open(&f, "olmoe", n_ctx);
    memset(out, 0xff, sizeof out);
    ck_assert_uint_eq(coli_context_capacity(f.c), (size_t)n_ctx);
    greedy_by_hand(&f, f.prompt, n_prompt, want, expect);
    p.ignore_eos = 1;
    memset(&tb, 0, sizeof tb);
    p.on_token = collect;
    p.user = &tb;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, n_prompt, s, &p, out, 64, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_CONTEXT);
    ck_assert_uint_eq(n, expect);
    ck_assert_mem_eq(out, want, expect * sizeof *out);
    ck_assert_int_eq(tb.calls, (int)expect);
    ck_assert_uint_eq(coli_context_position(f.c), (size_t)n_ctx);

    /* The text is all there: it equals the decoding of the tokens. */
    {
        int32_t all[64];
        char a[4096], b[4096];
        size_t la = 0, lb = 0;
        memcpy(all, f.prompt, n_prompt * sizeof *all);
        memcpy(all + n_prompt, out, n * sizeof *all);
        ck_assert_int_eq(coli_detokenize(f.m, f.prompt, n_prompt, 1, a, sizeof a, &la), COLI_OK);
        ck_assert_int_eq(coli_detokenize(f.m, all, n_prompt + n, 1, b, sizeof b, &lb), COLI_OK);
        ck_assert_uint_eq(tb.len, lb - la);
        ck_assert_int_eq(memcmp(tb.text, b + la, tb.len), 0);
    }

    /* The old entry point (which stops at eos) no longer fails either. */
    coli_context_reset(f.c);
    ck_assert_int_eq(tu_generate(f.c, f.prompt, n_prompt, 1000, s, NULL, NULL, out, 64, &n), COLI_OK);
    ck_assert_uint_le(n, expect);

    /* A prompt that does not fit is still an error, and says so. */
    coli_context_reset(f.c);
    ck_assert_uint_gt(f.n_prompt, (size_t)n_ctx);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 64, &n, &why), COLI_ENOSPC);
    ck_assert_int_eq(why, COLI_STOP_NONE);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(f.c), "context"));
    coli_sampler_free(s);
    fx_close(&f);
}
END_TEST

/* The model is told that the first greedy token ends the sequence: the
 * generation stops there (EOS), unless ignore_eos is set. */
START_TEST(test_eos_and_ignore_eos)
{
    fixture f;
    char *src = fixture_dir("qwen3_moe"), *tmp = tu_mkdtemp();
    char from[64], to[64], *dir = NULL;
    int32_t first[6], out[8];
    coli_sampler *s = greedy();
    coli_generate_params p = params(6);
    coli_stop_reason why = COLI_STOP_NONE;
    size_t n = 0;

    fx_open_dir(&f, src, 0);
    greedy_by_hand(&f, f.prompt, f.n_prompt, first, 6);
    fx_close(&f);
    ck_assert_int_ne(first[0], 1000);
    dir = tu_path(tmp, "m");
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    snprintf(to, sizeof to, "%d", first[0]);
    ck_assert_int_eq(tu_replace_in_file(dir, "config.json", "\"eos_token_id\": 1000", "\"eos_token_id\": 0"), 0);
    snprintf(from, sizeof from, "1002,\n    1000");
    snprintf(to, sizeof to, "1002,\n    %d", first[0]);
    ck_assert_int_eq(tu_replace_in_file(dir, "generation_config.json", from, to), 0);
    fx_open_dir(&f, dir, 0);
    memset(out, 0xff, sizeof out);
    ck_assert(coli_model_is_eos(f.m, first[0]));
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 8, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_EOS);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(out[0], first[0]);

    coli_context_reset(f.c);
    p.ignore_eos = 1;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 8, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_LENGTH);
    ck_assert_uint_eq(n, 6);
    ck_assert_mem_eq(out, first, 6 * sizeof *out);
    coli_sampler_free(s);
    fx_close(&f);
    tu_rmtree(tmp);
    free(tmp);
    free(dir);
    free(src);
}
END_TEST

static int stop_at_two(void *user, int32_t token, const char *text, size_t len)
{
    text_buf *b = user;
    collect(user, token, text, len);
    return b->calls == 2;
}

START_TEST(test_callback_stop)
{
    fixture f;
    coli_sampler *s = greedy();
    coli_generate_params p = params(10);
    coli_stop_reason why = COLI_STOP_NONE;
    text_buf tb;
    int32_t out[16];
    size_t n = 0;

    fx_open(&f, "olmoe", 0);
    memset(&tb, 0, sizeof tb);
    p.on_token = stop_at_two;
    p.user = &tb;
    p.ignore_eos = 1;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 16, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_CALLBACK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(tb.calls, 2);
    coli_sampler_free(s);
    fx_close(&f);
}
END_TEST

START_TEST(test_invalid_params)
{
    fixture f;
    coli_sampler *s = greedy();
    coli_generate_params p = params(4);
    coli_stop_reason why = COLI_STOP_LENGTH;
    const char *stops[2] = {"x", ""};
    size_t n = 7;

    fx_open(&f, "qwen3_moe", 0);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, NULL, NULL, 0, &n, &why), COLI_EINVAL);
    ck_assert_int_eq(why, COLI_STOP_NONE);
    ck_assert_uint_eq(n, 0);
    p.struct_size = sizeof(size_t);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, NULL, 0, &n, &why), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(f.c), "coli_generate_params: struct_size"));
    /* a newer caller's longer struct: its unknown bytes must be zero */
    struct {
        coli_generate_params p;
        uint64_t newer;
    } big;
    memset(&big, 0, sizeof big);
    big.p = params(4);
    big.p.struct_size = sizeof big;
    big.newer = 1;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &big.p, NULL, 0, &n, &why), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(f.c), "coli_generate_params: struct_size"));
    /* ... and with them zero it is read as ours */
    big.newer = 0;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &big.p, NULL, 0, &n, &why), COLI_OK);
    ck_assert(n >= 1 && n <= 4);
    ck_assert(why == COLI_STOP_LENGTH ? n == 4 : why == COLI_STOP_EOS);
    coli_context_reset(f.c);
    p = params(4);
    p.stop = stops;
    p.n_stop = 2;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, NULL, 0, &n, &why), COLI_EINVAL);
    ck_assert_ptr_nonnull(strstr(coli_context_errmsg(f.c), "stop string 1 is empty"));
    p.stop = NULL;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, NULL, 0, &n, &why), COLI_EINVAL);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, NULL, &p, NULL, 0, &n, &why), COLI_EINVAL);
    /* nothing was evaluated by the refused calls */
    ck_assert_uint_eq(coli_context_position(f.c), 0);
    coli_sampler_free(s);
    fx_close(&f);
}
END_TEST

/* ---- stop strings --------------------------------------------------------- */

/* The greedy text of the fixture without stop strings, then with a stop
 * string cut out of it: the streamed text ends just before its first
 * occurrence. _i picks the fixture and where the stop string starts. */
START_TEST(test_stop_strings)
{
    static const char *const names[] = {"qwen3_moe", "mixtral", "olmoe"};
    fixture f;
    coli_sampler *s = greedy();
    coli_generate_params p = params(40);
    coli_stop_reason why = COLI_STOP_NONE;
    text_buf full, cut;
    int32_t out[64];
    size_t n = 0, n_full = 0;
    char stop[8];
    const char *stops[2];

    fx_open(&f, names[_i % 3], 0);
    p.ignore_eos = 1;
    memset(&full, 0, sizeof full);
    p.on_token = collect;
    p.user = &full;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 64, &n_full, &why), COLI_OK);
    ck_assert_uint_ge(full.len, 12);

    /* start 0 (nothing reported), a third and two thirds in */
    size_t at = (size_t)(_i / 3) * full.len / 3, len = 4;
    memcpy(stop, full.text + at, len);
    stop[len] = '\0';
    const char *first = strstr(full.text, stop); /* may occur before 'at' */
    ck_assert_ptr_nonnull(first);
    stops[0] = "\x01never there";
    stops[1] = stop;
    p.stop = stops;
    p.n_stop = 2;
    memset(&cut, 0, sizeof cut);
    p.user = &cut;
    coli_context_reset(f.c);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 64, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_STRING);
    ck_assert_uint_eq(cut.len, (size_t)(first - full.text));
    ck_assert_int_eq(memcmp(cut.text, full.text, cut.len), 0);
    ck_assert_uint_le(n, n_full);
    ck_assert_int_eq(cut.calls, (int)n);

    /* A stop string that never appears changes nothing. */
    p.n_stop = 1;
    memset(&cut, 0, sizeof cut);
    coli_context_reset(f.c);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 64, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_LENGTH);
    ck_assert_uint_eq(n, n_full);
    ck_assert_uint_eq(cut.len, full.len);
    ck_assert_str_eq(cut.text, full.text);

    /* Without a callback the stop strings still stop the generation. */
    p.n_stop = 2;
    p.on_token = NULL;
    coli_context_reset(f.c);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 64, &n, &why), COLI_OK);
    ck_assert_int_eq(why, COLI_STOP_STRING);
    coli_sampler_free(s);
    fx_close(&f);
}
END_TEST

/* ---- padded vocabulary ---------------------------------------------------- */

/* Offset and length of tensor name's data in a safetensors file (the header
 * read by hand: "name":{"dtype":...,"shape":[...],"data_offsets":[a,b]}). */
static int tensor_span(const char *file, size_t size, const char *name, size_t *off, size_t *len)
{
    uint64_t hlen = 0;
    char key[128];
    const char *h, *p;
    unsigned long long a, b;

    if (size < 8)
        return -1;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | (unsigned char)file[i];
    if (hlen > size - 8)
        return -1;
    snprintf(key, sizeof key, "\"%s\"", name);
    h = file + 8;
    p = strstr(h, key);
    if (!p || p > h + hlen)
        return -1;
    p = strstr(p, "\"data_offsets\"");
    if (!p || sscanf(p, "\"data_offsets\":[%llu,%llu]", &a, &b) != 2)
        return -1;
    *off = 8 + (size_t)hlen + (size_t)a;
    *len = (size_t)(b - a);
    return 0;
}

/* A checkpoint whose config vocab_size exceeds its tokenizer's: the fixture
 * with its last added token (id 1004) removed from tokenizer.json, and the
 * output rows of 1004 and of the first greedy token swapped so that greedy
 * decoding picks the padding id. It must decode to nothing, with or without
 * a callback, never fail. */
START_TEST(test_padding_ids)
{
    fixture f;
    char *src = fixture_dir("qwen3_moe"), *tmp = tu_mkdtemp(), *dir = tu_path(tmp, "m");
    char *path, *bytes, text[64];
    int32_t first[1], out[4], pad = 1004;
    size_t size = 0, off = 0, len = 0, row, n = 0, tl = 99;
    coli_sampler *s = greedy();
    coli_generate_params p = params(3);
    coli_stop_reason why = COLI_STOP_NONE;
    text_buf tb;

    fx_open_dir(&f, src, 0);
    greedy_by_hand(&f, f.prompt, f.n_prompt, first, 1);
    ck_assert_int_eq(f.info.vocab_size, 1005);
    fx_close(&f);
    ck_assert_int_eq(tu_copy_dir(src, dir), 0);
    ck_assert_int_eq(tu_replace_in_file(dir, "tokenizer.json",
                                        "    },\n    {\n      \"id\": 1004,\n      \"content\": \"</think>\",\n"
                                        "      \"single_word\": false,\n      \"lstrip\": false,\n"
                                        "      \"rstrip\": false,\n      \"normalized\": false,\n"
                                        "      \"special\": false\n    }\n  ],",
                                        "    }\n  ],"),
                     0);
    path = tu_path(dir, "model.safetensors");
    bytes = tu_read_file(path, &size);
    ck_assert_ptr_nonnull(bytes);
    ck_assert_int_eq(tensor_span(bytes, size, "lm_head.weight", &off, &len), 0);
    row = len / 1005;
    ck_assert_uint_eq(row * 1005, len);
    {
        char tmp_row[4096];
        ck_assert_uint_le(row, sizeof tmp_row);
        memcpy(tmp_row, bytes + off + row * (size_t)first[0], row);
        memcpy(bytes + off + row * (size_t)first[0], bytes + off + row * 1004, row);
        memcpy(bytes + off + row * 1004, tmp_row, row);
    }
    ck_assert_int_eq(tu_write_file(path, bytes, size), 0);

    fx_open_dir(&f, dir, 0);
    ck_assert_int_eq(coli_eval(f.c, f.prompt, f.n_prompt), COLI_OK);
    ck_assert_int_eq(tu_argmax(coli_context_logits(f.c), f.info.vocab_size), 1004);
    coli_context_reset(f.c);
    /* detokenize: nothing for the padding id, an error past the vocabulary */
    ck_assert_int_eq(coli_detokenize(f.m, &pad, 1, 0, text, sizeof text, &tl), COLI_OK);
    ck_assert_uint_eq(tl, 0);
    pad = 1005;
    ck_assert_int_eq(coli_detokenize(f.m, &pad, 1, 0, text, sizeof text, &tl), COLI_EINVAL);
    memset(&tb, 0, sizeof tb);
    p.on_token = collect;
    p.user = &tb;
    p.ignore_eos = 1;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 4, &n, &why), COLI_OK);
    ck_assert_int_eq(out[0], 1004);
    ck_assert_int_eq(why, COLI_STOP_LENGTH);
    ck_assert_int_eq(tb.calls, 3);
    /* the same run without a callback gives the same tokens */
    {
        int32_t out2[4];
        coli_context_reset(f.c);
        p.on_token = NULL;
        ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out2, 4, &n, &why), COLI_OK);
        ck_assert_mem_eq(out, out2, 3 * sizeof *out);
    }
    coli_sampler_free(s);
    fx_close(&f);
    tu_rmtree(tmp);
    free(bytes);
    free(path);
    free(dir);
    free(tmp);
    free(src);
}
END_TEST

/* ---- sampler: min-p and repetition penalty -------------------------------- */

static coli_sampler *make_sampler(float temperature, float min_p, float penalty, int last_n, uint64_t seed)
{
    coli_sampler_params sp;
    coli_sampler *s = NULL;

    coli_sampler_params_init(&sp, sizeof sp);
    sp.temperature = temperature;
    sp.min_p = min_p;
    sp.repeat_penalty = penalty;
    sp.repeat_last_n = last_n;
    sp.seed = seed;
    ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
    return s;
}

START_TEST(test_min_p)
{
    fixture f;
    const float *l;
    int best, kept = 0, differ = 0;
    const float T = 1.5f;

    fx_open(&f, "qwen3_moe", 0);
    ck_assert_int_eq(coli_eval(f.c, f.prompt, f.n_prompt), COLI_OK);
    l = coli_context_logits(f.c);
    best = tu_argmax(l, f.info.vocab_size);
    for (int i = 0; i < f.info.vocab_size; i++)
        kept += expf((l[i] - l[best]) / T) >= 0.5f;
    for (uint64_t seed = 1; seed <= 64; seed++) {
        int32_t tok = -1;
        coli_sampler *s = make_sampler(T, 1.0f, 1.0f, 64, seed);
        ck_assert_int_eq(coli_sample(s, f.c, &tok), COLI_OK);
        ck_assert_int_eq(tok, best); /* min_p 1 keeps only the most likely */
        coli_sampler_free(s);
        s = make_sampler(T, 0.5f, 1.0f, 64, seed);
        ck_assert_int_eq(coli_sample(s, f.c, &tok), COLI_OK);
        ck_assert_msg(expf((l[tok] - l[best]) / T) >= 0.5f * (1 - 1e-6f), "seed %d: token %d below min_p",
                      (int)seed, tok);
        differ += tok != best;
        coli_sampler_free(s);
    }
    if (kept > 1)
        ck_assert_int_gt(differ, 0);
    fx_close(&f);
}
END_TEST

/* Greedy with a penalty equals the argmax of logits penalised by hand. */
START_TEST(test_repeat_penalty)
{
    fixture f;
    const float *l;
    float *pen;
    int32_t hist[3], tok = -1;
    int v;

    fx_open(&f, "qwen3_moe", 0);
    v = f.info.vocab_size;
    ck_assert_int_eq(coli_eval(f.c, f.prompt, f.n_prompt), COLI_OK);
    l = coli_context_logits(f.c);
    pen = malloc((size_t)v * sizeof *pen);
    /* the three most likely tokens, best first */
    memcpy(pen, l, (size_t)v * sizeof *pen);
    for (int k = 0; k < 3; k++) {
        hist[k] = tu_argmax(pen, v);
        pen[hist[k]] = -INFINITY;
    }
    for (int last_n = 1; last_n <= 3; last_n++) {
        const float r = 4.0f;
        coli_sampler *s = make_sampler(0.0f, 0.0f, r, last_n, 0);
        /* history: 3rd, 2nd, best, best again (counted once) */
        int32_t seen[4] = {hist[2], hist[1], hist[0], hist[0]};
        ck_assert_int_eq(coli_sampler_accept(s, seen, 4), COLI_OK);
        memcpy(pen, l, (size_t)v * sizeof *pen);
        for (int k = 4 - last_n; k < 4; k++) {
            int t = seen[k];
            int dup = 0;
            for (int j = 4 - last_n; j < k; j++)
                dup |= seen[j] == t;
            if (!dup)
                pen[t] = pen[t] > 0 ? pen[t] / r : pen[t] * r;
        }
        ck_assert_int_eq(coli_sample(s, f.c, &tok), COLI_OK);
        ck_assert_int_eq(tok, tu_argmax(pen, v));
        /* after a reset nothing is remembered: plain greedy */
        coli_sampler_reset(s);
        ck_assert_int_eq(coli_sample(s, f.c, &tok), COLI_OK);
        ck_assert_int_eq(tok, hist[0]);
        coli_sampler_free(s);
    }
    /* The picked token is remembered: two greedy picks with a huge penalty
     * and a window of 1 differ. */
    {
        int32_t a = -1, b = -1;
        coli_sampler *s = make_sampler(0.0f, 0.0f, 1e30f, 1, 0);
        ck_assert_int_eq(coli_sample(s, f.c, &a), COLI_OK);
        ck_assert_int_eq(coli_sample(s, f.c, &b), COLI_OK);
        ck_assert_int_eq(a, hist[0]);
        ck_assert_int_ne(b, a);
        coli_sampler_free(s);
    }
    free(pen);
    fx_close(&f);
}
END_TEST

/* ---- sampler: top-k, top-p and min-p against a reference ------------------ */

/* The sampler as written down (docs/architecture.md, sampler.c's header):
 * xoshiro256** seeded through splitmix64, probabilities expf((l - max) /
 * T), every candidate sorted by probability then id, top-k, top-p over the
 * kept mass, min-p, and a draw of 53 random bits over the kept mass. The
 * library orders only what it keeps; this reference sorts everything. */
typedef struct ref_cand {
    float p;
    int32_t id;
} ref_cand;

static int ref_by_prob(const void *a, const void *b)
{
    const ref_cand *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static uint64_t ref_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static void ref_seed(uint64_t st[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        st[i] = z ^ (z >> 31);
    }
}

static double ref_unit(uint64_t st[4])
{
    uint64_t out = ref_rotl(st[1] * 5, 7) * 9, t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = ref_rotl(st[3], 45);
    return (double)(out >> 11) * (1.0 / 9007199254740992.0);
}

static int32_t ref_sample(const float *l, size_t n, const coli_sampler_params *sp, uint64_t st[4], ref_cand *c)
{
    size_t best = (size_t)tu_argmax(l, (int)n), m = n;
    if (sp->temperature <= 0.0f || sp->top_k == 1)
        return (int32_t)best;
    for (size_t i = 0; i < n; i++) {
        c[i].p = expf((l[i] - l[best]) / sp->temperature);
        c[i].id = (int32_t)i;
    }
    if (sp->top_k > 0 || sp->top_p < 1.0f || sp->min_p > 0.0f) {
        qsort(c, n, sizeof *c, ref_by_prob);
        if (sp->top_k > 0 && (size_t)sp->top_k < m)
            m = (size_t)sp->top_k;
        if (sp->top_p < 1.0f) {
            double kept = 0, run = 0;
            size_t i = 0;
            for (size_t j = 0; j < m; j++)
                kept += c[j].p;
            while (i < m) {
                run += c[i++].p;
                if (run >= sp->top_p * kept)
                    break;
            }
            m = i;
        }
        if (sp->min_p > 0.0f) {
            size_t i = 1;
            while (i < m && c[i].p >= sp->min_p * c[0].p)
                i++;
            m = i;
        }
    }
    double sum = 0, run = 0;
    for (size_t i = 0; i < m; i++)
        sum += c[i].p;
    double u = ref_unit(st) * sum;
    for (size_t i = 0; i < m; i++) {
        run += c[i].p;
        if (u < run)
            return c[i].id;
    }
    return c[m - 1].id;
}

START_TEST(test_sampler_reference)
{
    static const float temps[] = {0.05f, 0.7f, 1.5f};
    static const int top_ks[] = {0, 2, 5, 40, 1 << 20};
    static const float top_ps[] = {1.0f, 0.9f, 0.3f};
    static const float min_ps[] = {0.0f, 0.05f};
    enum { NT = 3, NK = 5, NP = 3, NM = 2, SEEDS = 3, DRAWS = 6 };
    fixture f;
    int off_greedy = 0;

    fx_open(&f, "qwen3_moe", 0);
    ck_assert_int_eq(coli_eval(f.c, f.prompt, f.n_prompt), COLI_OK);
    const float *l = coli_context_logits(f.c);
    const size_t n = (size_t)f.info.vocab_size;
    const int32_t best = tu_argmax(l, (int)n);
    ref_cand *c = malloc(n * sizeof *c);
    ck_assert_ptr_nonnull(c);
    /* every combination of the four parameters, each with three seeds */
    for (int i = 0; i < NT * NK * NP * NM * SEEDS; i++) {
        coli_sampler_params sp;
        coli_sampler *s = NULL;
        uint64_t st[4];
        const uint64_t seed = 1 + (uint64_t)(i % SEEDS);
        coli_sampler_params_init(&sp, sizeof sp);
        sp.temperature = temps[i / SEEDS % NT];
        sp.top_k = top_ks[i / (SEEDS * NT) % NK];
        sp.top_p = top_ps[i / (SEEDS * NT * NK) % NP];
        sp.min_p = min_ps[i / (SEEDS * NT * NK * NP)];
        sp.seed = seed;
        ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
        ref_seed(st, seed);
        for (int k = 0; k < DRAWS; k++) {
            int32_t tok = -1, want = ref_sample(l, n, &sp, st, c);
            ck_assert_int_eq(coli_sample(s, f.c, &tok), COLI_OK);
            ck_assert_msg(tok == want, "T %g top-k %d top-p %g min-p %g seed %d draw %d: %d, the reference %d",
                          (double)sp.temperature, sp.top_k, (double)sp.top_p, (double)sp.min_p, (int)seed, k, tok,
                          want);
            off_greedy += tok != best;
        }
        coli_sampler_free(s);
    }
    /* the draws were not all the most likely token */
    ck_assert_int_gt(off_greedy, 0);
    free(c);
    fx_close(&f);
}
END_TEST

START_TEST(test_sampler_params_invalid)
{
    coli_sampler_params sp;
    coli_sampler *s = (coli_sampler *)&sp;
    int32_t one = 1, neg = -1;

    coli_sampler_params_init(&sp, sizeof sp);
    sp.struct_size = sizeof(size_t);
    ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_EINVAL);
    ck_assert_ptr_null(s);
    /* a newer caller's longer struct: accepted when its unknown bytes are
     * zero (at their defaults), refused otherwise */
    struct {
        coli_sampler_params p;
        uint64_t newer;
    } big;
    memset(&big, 0, sizeof big);
    coli_sampler_params_init(&big.p, sizeof big.p);
    big.p.struct_size = sizeof big;
    ck_assert_int_eq(coli_sampler_create(&big.p, &s), COLI_OK);
    coli_sampler_free(s);
    s = NULL;
    big.newer = 3;
    ck_assert_int_eq(coli_sampler_create(&big.p, &s), COLI_EINVAL);
    ck_assert_ptr_null(s);
#define BAD(field, value)                                                  \
    do {                                                                   \
        coli_sampler_params_init(&sp, sizeof sp);                          \
        sp.field = value;                                                  \
        ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_EINVAL);    \
        ck_assert_ptr_null(s);                                             \
    } while (0)
    BAD(min_p, -0.1f);
    BAD(min_p, 1.5f);
    BAD(min_p, NAN);
    BAD(repeat_penalty, 0.0f);
    BAD(repeat_penalty, -1.0f);
    BAD(repeat_penalty, INFINITY);
    BAD(repeat_last_n, -1);
    BAD(frequency_penalty, 2.5f);
    BAD(frequency_penalty, -2.01f);
    BAD(frequency_penalty, NAN);
    BAD(presence_penalty, 3.0f);
    BAD(presence_penalty, -2.5f);
    BAD(presence_penalty, INFINITY);
    BAD(repeat_last_n, (1 << 20) + 1);
    BAD(top_p, 0.0f);
    BAD(temperature, NAN);
#undef BAD
    ck_assert_int_eq(coli_sampler_create(NULL, &s), COLI_OK); /* NULL: defaults */
    ck_assert_int_eq(coli_sampler_accept(s, &neg, 1), COLI_EINVAL);
    ck_assert_int_eq(coli_sampler_accept(s, NULL, 1), COLI_EINVAL);
    ck_assert_int_eq(coli_sampler_accept(s, &one, 1), COLI_OK);
    ck_assert_int_eq(coli_sampler_accept(NULL, &one, 1), COLI_EINVAL);
    coli_sampler_free(s);
    coli_sampler_reset(NULL);
}
END_TEST

/* OpenAI's penalties (step 1b): with a known history, greedy picks and
 * seeded draws equal those of the reference on logits penalised by hand. */
START_TEST(test_openai_penalties)
{
    static const float freq[] = {0.0f, 0.5f, 2.0f, -1.0f};
    static const float pres[] = {0.0f, 1.5f, -2.0f};
    fixture f;
    int32_t top[3], tok = -1;

    fx_open(&f, "qwen3_moe", 0);
    ck_assert_int_eq(coli_eval(f.c, f.prompt, f.n_prompt), COLI_OK);
    const float *l = coli_context_logits(f.c);
    const int v = f.info.vocab_size;
    float *pen = malloc((size_t)v * sizeof *pen);
    ref_cand *c = malloc((size_t)v * sizeof *c);
    ck_assert_ptr_nonnull(pen);
    ck_assert_ptr_nonnull(c);
    memcpy(pen, l, (size_t)v * sizeof *pen);
    for (int k = 0; k < 3; k++) {
        top[k] = tu_argmax(pen, v);
        pen[top[k]] = -INFINITY;
    }
    /* best three times, the second once, the third twice; window 8 holds all */
    const int32_t seen[6] = {top[0], top[2], top[0], top[1], top[2], top[0]};
    const int count[3] = {3, 1, 2};
    for (size_t a = 0; a < sizeof freq / sizeof *freq; a++)
        for (size_t b = 0; b < sizeof pres / sizeof *pres; b++) {
            coli_sampler_params sp;
            memcpy(pen, l, (size_t)v * sizeof *pen);
            for (int k = 0; k < 3; k++)
                pen[top[k]] -= (float)count[k] * freq[a] + pres[b];
            for (int greedy = 1; greedy >= 0; greedy--) {
                coli_sampler *s = NULL;
                coli_sampler_params_init(&sp, sizeof sp);
                sp.repeat_last_n = 8;
                sp.frequency_penalty = freq[a];
                sp.presence_penalty = pres[b];
                sp.temperature = greedy ? 0.0f : 1.0f;
                sp.top_k = greedy ? 0 : 5;
                sp.seed = 7 + a * 3 + b;
                ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
                ck_assert_int_eq(coli_sampler_accept(s, seen, 6), COLI_OK);
                ck_assert_int_eq(coli_sample(s, f.c, &tok), COLI_OK);
                uint64_t st[4];
                ref_seed(st, sp.seed);
                ck_assert_msg(tok == ref_sample(pen, (size_t)v, &sp, st, c),
                              "frequency %g presence %g greedy %d: token %d", (double)freq[a],
                              (double)pres[b], greedy, tok);
                coli_sampler_free(s);
            }
        }
    /* A large presence penalty on the best token moves the greedy pick to
     * the second; a negative one keeps the best. */
    {
        coli_sampler *s = NULL;
        coli_sampler_params sp;
        coli_sampler_params_init(&sp, sizeof sp);
        sp.presence_penalty = 2.0f;
        sp.frequency_penalty = 2.0f;
        ck_assert_int_eq(coli_sampler_create(&sp, &s), COLI_OK);
        ck_assert_int_eq(coli_sampler_accept(s, top, 1), COLI_OK);
        ck_assert_int_eq(coli_sample(s, f.c, &tok), COLI_OK);
        ck_assert_int_eq(tok, l[top[0]] - 4.0f < l[top[1]] ? top[1] : top[0]);
        coli_sampler_free(s);
    }
    free(c);
    free(pen);
    fx_close(&f);
}
END_TEST

/* ---- the text stream -------------------------------------------------------- */

/* Pushes ids through a text stream (context: the prompt's tail), then
 * flushes; the text concatenated into b. Returns the count of ids pushed
 * up to and with the one that completed a stop string (n if none). */
static size_t stream_text(coli_model *m, const int32_t *context, size_t n_context, const char *const *stop,
                          size_t n_stop, const int32_t *ids, size_t n, text_buf *b)
{
    coli_text_stream *ts = NULL;
    const char *t;
    size_t len, i, used = n;
    int stopped = 0;

    memset(b, 0, sizeof *b);
    ck_assert_int_eq(coli_text_stream_create(m, context, n_context, stop, n_stop, &ts), COLI_OK);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(coli_text_stream_push(ts, ids[i], &t, &len, &stopped), COLI_OK);
        collect(b, ids[i], t, len);
        if (stopped) {
            used = i + 1;
            break;
        }
    }
    ck_assert_int_eq(coli_text_stream_flush(ts, &t, &len), COLI_OK);
    if (!stopped)
        collect(b, -1, t, len);
    else
        ck_assert_uint_eq(len, 0);
    coli_text_stream_free(ts);
    return used;
}

/* The stream gives, for the ids coli_generate made, the text its on_token
 * reported: without stop strings, with one, and for text whose
 * characters are split across tokens. */
START_TEST(test_text_stream)
{
    static const char *const names[] = {"qwen3_moe", "mixtral", "olmoe"};
    static const char multi[] = "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82!";
    fixture f;
    coli_sampler *s = greedy();
    coli_generate_params p = params(40);
    text_buf full, cut, st;
    int32_t out[64], ids[64];
    size_t n_full = 0, n = 0, n_ids = 0;
    char stop[8];
    const char *stops[2];
    char whole[256];

    fx_open(&f, names[_i], 0);
    p.ignore_eos = 1;
    p.on_token = collect;
    memset(&full, 0, sizeof full);
    p.user = &full;
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 64, &n_full, NULL), COLI_OK);
    stream_text(f.m, f.prompt, f.n_prompt, NULL, 0, out, n_full, &st);
    ck_assert_uint_eq(st.len, full.len);
    ck_assert_str_eq(st.text, full.text);

    /* a stop string from the middle of the text */
    ck_assert_uint_ge(full.len, 12);
    memcpy(stop, full.text + full.len / 2, 4);
    stop[4] = '\0';
    stops[0] = "\x01never";
    stops[1] = stop;
    p.stop = stops;
    p.n_stop = 2;
    memset(&cut, 0, sizeof cut);
    p.user = &cut;
    coli_context_reset(f.c);
    coli_sampler_reset(s);
    ck_assert_int_eq(coli_generate(f.c, f.prompt, f.n_prompt, s, &p, out, 64, &n, NULL), COLI_OK);
    ck_assert_uint_eq(stream_text(f.m, f.prompt, f.n_prompt, stops, 2, out, n_full, &st), n);
    ck_assert_uint_eq(st.len, cut.len);
    ck_assert_str_eq(st.text, cut.text);
    ck_assert_ptr_nonnull(strstr(full.text, stop));
    ck_assert_uint_eq(cut.len, (size_t)(strstr(full.text, stop) - full.text));

    /* characters of several bytes, split across tokens by byte-level BPE or
     * byte fallback: the stream gives exactly the decoding of all of them */
    ck_assert_int_eq(coli_tokenize(f.m, multi, strlen(multi), 0, ids, 64, &n_ids), COLI_OK);
    ck_assert_int_eq(coli_detokenize(f.m, ids, n_ids, 1, whole, sizeof whole, &n), COLI_OK);
    stream_text(f.m, NULL, 0, NULL, 0, ids, n_ids, &st);
    ck_assert_str_eq(st.text, whole);
    /* a stop string inside the multibyte text */
    stops[0] = "\xe6\x96\x87";
    stream_text(f.m, NULL, 0, stops, 1, ids, n_ids, &st);
    ck_assert_ptr_nonnull(strstr(whole, stops[0]));
    ck_assert_uint_eq(st.len, (size_t)(strstr(whole, stops[0]) - whole));
    ck_assert_int_eq(memcmp(st.text, whole, st.len), 0);

    /* refusals */
    {
        coli_text_stream *ts = NULL;
        const char *t;
        size_t len;
        const char *empty[1] = {""};
        ck_assert_int_eq(coli_text_stream_create(f.m, NULL, 0, empty, 1, &ts), COLI_EINVAL);
        ck_assert_int_eq(coli_text_stream_create(f.m, NULL, 0, NULL, 0, NULL), COLI_EINVAL);
        ck_assert_int_eq(coli_text_stream_create(f.m, NULL, 0, NULL, 0, &ts), COLI_OK);
        ck_assert_int_eq(coli_text_stream_push(ts, -1, &t, &len, NULL), COLI_EINVAL);
        ck_assert_int_eq(coli_text_stream_push(ts, f.info.vocab_size, &t, &len, NULL), COLI_EINVAL);
        coli_text_stream_free(ts);
        coli_text_stream_free(NULL);
    }
    coli_sampler_free(s);
    fx_close(&f);
}
END_TEST

static Suite *generate_suite(void)
{
    Suite *s = suite_create("generate");
    TCase *t = tcase_create("generate");

    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_defaults);
    tcase_add_test(t, test_length_and_stats);
    tcase_add_test(t, test_context_full);
    tcase_add_test(t, test_eos_and_ignore_eos);
    tcase_add_test(t, test_callback_stop);
    tcase_add_test(t, test_invalid_params);
    tcase_add_loop_test(t, test_stop_strings, 0, 9);
    tcase_add_test(t, test_padding_ids);
    tcase_add_test(t, test_min_p);
    tcase_add_test(t, test_repeat_penalty);
    tcase_add_test(t, test_sampler_params_invalid);
    tcase_add_test(t, test_sampler_reference);
    tcase_add_test(t, test_openai_penalties);
    tcase_add_loop_test(t, test_text_stream, 0, 3);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run_suite(generate_suite());
}
