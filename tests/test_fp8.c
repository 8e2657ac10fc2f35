/* test_fp8.c - FP8 checkpoints as DeepSeek-V3 ships them: F8_E4M3
 * matrices with weight_scale_inv block scales (docs/formats.md, "FP8
 * checkpoints").
 *
 * The glm4_moe and glm_moe_dsa fixtures are rewritten here with their
 * large matrices in FP8 (GLM-5's indexer weights_proj kept in bf16, as
 * its FP8 checkpoint ships it),
 * encoded by this file's own e4m3 code (from the format's definition:
 * bias 7, 3 mantissa bits, no infinities), blocks of 16 x 24 so that the
 * last blocks of a matrix are partial. The expectation is this file's own
 * decoding times the block's scale: the loaded f32 weights must equal it
 * value for value, and the model must compute as the same values stored
 * in F32 do, bit for bit, loaded or converted. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri/colibri.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "testutil.h"

#define BR 16
#define BC 24

/* The value of e4m3 code b, from the definition. */
static double e4m3(unsigned b)
{
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7)
        return NAN;
    double v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1 + m / 8.0, e - 7);
    return s ? -v : v;
}

/* The code nearest x (ties: the even code), by search: slow and plain. */
static unsigned char encode(double x)
{
    unsigned best = 0;
    double bd = INFINITY;
    for (unsigned b = 0; b < 256; b++) {
        double v = e4m3(b);
        if (isnan(v))
            continue;
        double d = fabs(v - x);
        if (d < bd || (d == bd && (b & 1) == 0)) {
            bd = d;
            best = b;
        }
    }
    return (unsigned char)best;
}

static float value_of(const coli__tensor *t, size_t i)
{
    const uint16_t *p = t->data;
    uint32_t u = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Whether the fixture's tensor goes to FP8: the matrices but the
 * embedding, the output and the router (as DeepSeek-V3 keeps them), and
 * the indexer's head weights (as GLM-5 does). */
static int to_fp8(const coli__tensor *t)
{
    return t->ndim == 2 && !strstr(t->name, "embed_tokens") && !strstr(t->name, "lm_head") &&
           !strstr(t->name, "mlp.gate.weight") && !strstr(t->name, "indexer.weights_proj");
}

static const char *const FIXTURES[] = {"glm4_moe", "glm_moe_dsa"};

/* Writes dir's model.safetensors from the fixture's: FP8 with scales
 * (fp8 1) or the FP8 values decoded, in F32 (fp8 0). The scales are
 * amax / 448 of each block. */
static void write_variant(const char *src, const char *dir, int fp8)
{
    char *in = tu_path(src, "model.safetensors"), *out = tu_path(dir, "model.safetensors");
    coli__tensor_set *ts = NULL;
    coli__err err;
    coli__err_clear(&err);
    ck_assert_msg(coli__st_open_file(in, &ts, &err) == COLI_OK, "%s", err.msg);
    tu_st *w = tu_st_new();
    for (size_t k = 0; k < coli__st_count(ts); k++) {
        const coli__tensor *t = coli__st_at(ts, k);
        ck_assert_int_eq(t->dtype, COLI_DT_BF16);
        if (!to_fp8(t)) {
            tu_st_add(w, t->name, "BF16", t->ndim, t->shape, t->data, t->nbytes);
            continue;
        }
        const int64_t R = t->shape[0], C = t->shape[1], sr = (R + BR - 1) / BR, sc = (C + BC - 1) / BC;
        float *scale = calloc((size_t)(sr * sc), sizeof *scale);
        unsigned char *q = malloc((size_t)(R * C));
        float *dec = malloc((size_t)(R * C) * sizeof *dec);
        for (int64_t i = 0; i < R * C; i++) {
            float a = fabsf(value_of(t, (size_t)i));
            float *s = &scale[(i / C / BR) * sc + (i % C) / BC];
            *s = a > *s ? a : *s;
        }
        for (int64_t b = 0; b < sr * sc; b++)
            scale[b] = scale[b] > 0 ? scale[b] / 448.0f : 1.0f;
        for (int64_t i = 0; i < R * C; i++) {
            float s = scale[(i / C / BR) * sc + (i % C) / BC];
            q[i] = encode((double)value_of(t, (size_t)i) / s);
            dec[i] = (float)e4m3(q[i]) * s;
        }
        if (fp8) {
            char name[300];
            const int64_t shape[2] = {sr, sc};
            snprintf(name, sizeof name, "%s_scale_inv", t->name);
            tu_st_add(w, t->name, "F8_E4M3", 2, t->shape, q, (size_t)(R * C));
            tu_st_add(w, name, "F32", 2, shape, scale, (size_t)(sr * sc) * sizeof(float));
        } else {
            tu_st_add(w, t->name, "F32", 2, t->shape, dec, (size_t)(R * C) * sizeof(float));
        }
        free(scale);
        free(q);
        free(dec);
    }
    ck_assert_int_eq(tu_st_write(w, out), 0);
    tu_st_free(w);
    coli__st_close(ts);
    free(in);
    free(out);
}

static const char QCFG[] = "\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "
                           "\"quant_method\": \"fp8\", \"weight_block_size\": [16, 24]}, \"rope_parameters\"";

/* The fixture as FP8 (config.json saying so), and as the same values in
 * F32; *src is the fixture. */
static void make_pair(const char *fixture, char **src, char **f8, char **f32)
{
    *src = tu_path(tu_data_dir(), fixture);
    *f8 = tu_mkdtemp();
    *f32 = tu_mkdtemp();
    ck_assert_int_eq(tu_copy_dir(*src, *f8), 0);
    ck_assert_int_eq(tu_copy_dir(*src, *f32), 0);
    write_variant(*src, *f8, 1);
    write_variant(*src, *f32, 0);
    ck_assert_int_eq(tu_replace_in_file(*f8, "config.json", "\"rope_parameters\"", QCFG), 0);
}

static coli_model *open_as(const char *dir, coli_weight_format fmt)
{
    coli_options *o = NULL;
    coli_model *m = NULL;
    ck_assert_int_eq(coli_options_create(&o), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_WEIGHTS, fmt), COLI_OK);
    ck_assert_int_eq(coli_options_set(o, COLI_OPT_THREADS, 2), COLI_OK);
    coli_status st = coli_model_open(dir, o, &m);
    ck_assert_msg(st == COLI_OK, "%s: %s", dir, coli_model_errmsg(m));
    coli_options_free(o);
    return m;
}

static float *logits(coli_model *m, int *vocab)
{
    /* past glm_moe_dsa's index_topk (8): its indexer chooses */
    static const int32_t ids[] = {17, 40, 77, 258, 818, 264, 77, 291, 389, 40, 77, 258};
    coli_context *c = NULL;
    ck_assert_int_eq(coli_context_create(m, NULL, &c), COLI_OK);
    ck_assert_int_eq(coli_eval(c, ids, sizeof ids / sizeof ids[0]), COLI_OK);
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(m, &info), COLI_OK);
    *vocab = info.vocab_size;
    float *out = malloc((size_t)*vocab * sizeof *out);
    memcpy(out, coli_context_logits(c), (size_t)*vocab * sizeof *out);
    coli_context_free(c);
    return out;
}

static void drop(char *src, char *f8, char *f32)
{
    tu_rmtree(f8);
    tu_rmtree(f32);
    free(src);
    free(f8);
    free(f32);
}

/* Loaded in f32, every FP8 matrix holds its decoded values times its
 * block's scale, as this file decodes them; the model then computes as the
 * same values stored in F32 do. */
START_TEST(test_fp8_values)
{
    char *src, *f8, *f32;
    make_pair(FIXTURES[_i], &src, &f8, &f32);
    coli_model *a = open_as(f8, COLI_WEIGHTS_F32), *b = open_as(f32, COLI_WEIGHTS_F32);
    size_t checked = 0;
    for (int l = 0; l < a->cfg.n_layers; l++) {
        const coli__layer *x = &a->w.layers[l], *y = &b->w.layers[l];
        const coli__mat *ma[] = {&x->wq, &x->wo, &x->s_down, &x->idx_wq, &x->idx_wk},
                        *mb[] = {&y->wq, &y->wo, &y->s_down, &y->idx_wq, &y->idx_wk};
        for (int k = 0; k < 5; k++) {
            if (!ma[k]->data)
                continue;
            ck_assert_int_eq(ma[k]->dt, COLI_DT_F32);
            ck_assert_int_eq(memcmp(ma[k]->data, mb[k]->data, (size_t)ma[k]->rows * ma[k]->cols * sizeof(float)), 0);
            checked += (size_t)ma[k]->rows * ma[k]->cols;
        }
        if (a->w.layers[l].is_moe) {
            const coli__mat *ea = &a->w.layers[l].e_down[3], *eb = &b->w.layers[l].e_down[3];
            ck_assert_int_eq(memcmp(ea->data, eb->data, (size_t)ea->rows * ea->cols * sizeof(float)), 0);
            checked += (size_t)ea->rows * ea->cols;
        }
    }
    ck_assert_uint_gt(checked, 10000);
    int va, vb;
    float *la = logits(a, &va), *lb = logits(b, &vb);
    ck_assert_int_eq(va, vb);
    ck_assert_int_eq(memcmp(la, lb, (size_t)va * sizeof(float)), 0);
    free(la);
    free(lb);
    coli_model_free(a);
    coli_model_free(b);
    drop(src, f8, f32);
}
END_TEST

/* --weights auto on an FP8 checkpoint is q8 (the router and embedding,
 * kept as stored, are bf16 here); q4 loads too; a conversion of it gives
 * the bits of the checkpoint loaded in the same format. */
START_TEST(test_fp8_formats_and_convert)
{
    char *src, *f8, *f32;
    make_pair(FIXTURES[_i], &src, &f8, &f32);
    coli_model *a = open_as(f8, COLI_WEIGHTS_AUTO);
    coli_model_info info;
    info.struct_size = sizeof info;
    ck_assert_int_eq(coli_model_get_info(a, &info), COLI_OK);
    ck_assert_str_eq(info.weights_name, "q8");
    coli_model *q8 = open_as(f32, COLI_WEIGHTS_Q8);
    int v;
    float *la = logits(a, &v), *lq = logits(q8, &v);
    ck_assert_int_eq(memcmp(la, lq, (size_t)v * sizeof(float)), 0); /* the same values, quantized alike */
    coli_model_free(q8);

    char *out = tu_mkdtemp();
    coli_convert_params p;
    coli_convert_params_init(&p, sizeof p);
    p.weights = COLI_WEIGHTS_Q4;
    char msg[512];
    ck_assert_msg(coli_convert(f8, out, &p, msg, sizeof msg) == COLI_OK, "%s", msg);
    coli_model *c = open_as(out, COLI_WEIGHTS_AUTO), *d = open_as(f8, COLI_WEIGHTS_Q4);
    float *lc = logits(c, &v), *ld = logits(d, &v);
    ck_assert_int_eq(memcmp(lc, ld, (size_t)v * sizeof(float)), 0);
    free(la);
    free(lq);
    free(lc);
    free(ld);
    coli_model_free(a);
    coli_model_free(c);
    coli_model_free(d);
    tu_rmtree(out);
    free(out);
    drop(src, f8, f32);
}
END_TEST

/* Refused with the field or tensor named: a malformed quantization_config,
 * scales of the wrong shape or missing, FP8 without a quantization_config. */
static void refused(const char *dir, const char *named)
{
    coli_model *m = NULL;
    ck_assert_int_ne(coli_model_open(dir, NULL, &m), COLI_OK);
    const char *msg = coli_model_errmsg(m);
    ck_assert_msg(strstr(msg, named) != NULL, "'%s' does not name %s", msg, named);
    coli_model_free(m);
}

START_TEST(test_fp8_refusals)
{
    char *src, *f8, *f32;
    make_pair("glm4_moe", &src, &f8, &f32);
    ck_assert_int_eq(tu_replace_in_file(f8, "config.json", "[16, 24]", "[16, 0]"), 0);
    refused(f8, "weight_block_size");
    ck_assert_int_eq(tu_replace_in_file(f8, "config.json", "[16, 0]", "[16, 32]"), 0);
    refused(f8, "_scale_inv"); /* 64 x 64 in blocks of 32 columns: 2, not 3 */
    ck_assert_int_eq(tu_replace_in_file(f8, "config.json", "[16, 32]", "[16, 24]"), 0);
    ck_assert_int_eq(tu_replace_in_file(f8, "config.json", "\"fmt\": \"e4m3\"", "\"fmt\": \"e5m2\""), 0);
    refused(f8, "e5m2");
    ck_assert_int_eq(tu_replace_in_file(f8, "config.json", "\"quant_method\": \"fp8\"", "\"quant_method\": \"gptq\""),
                     0);
    refused(f8, "gptq");
    char *cfg = tu_path(f8, "config.json"), *orig = tu_path(src, "config.json");
    size_t n = 0;
    char *text = tu_read_file(orig, &n);
    ck_assert_int_eq(tu_write_file(cfg, text, n), 0); /* FP8 tensors, no quantization_config */
    refused(f8, "quantization_config");
    free(text);
    free(cfg);
    free(orig);
    drop(src, f8, f32);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fp8");
    TCase *tc = tcase_create("fp8");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_fp8_values, 0, 2);
    tcase_add_loop_test(tc, test_fp8_formats_and_convert, 0, 2);
    tcase_add_test(tc, test_fp8_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
