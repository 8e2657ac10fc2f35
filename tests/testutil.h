/* testutil.h - helpers shared by the Check tests.
 *
 * Conventions: functions returning int give 0 on success and -1 on failure
 * (errno may tell why); functions returning char * give a malloc'd string the
 * caller frees, or NULL on failure. Nothing here prints or exits, so a test
 * asserts on the result (ck_assert_int_eq(tu_write_file(...), 0)). */
#ifndef COLI_TESTUTIL_H
#define COLI_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "colibri/colibri.h"

/* Runs every test of the suite (Check's default fork mode) and returns the
 * exit status for main: 0 if all passed. */
int tu_run_suite(Suite *s);

/* ---- files and directories ------------------------------------------- */

/* Creates a fresh private directory under $TMPDIR (or /tmp); its path. */
char *tu_mkdtemp(void);
/* Removes path and, for a directory, everything below it (symlinks are
 * removed, never followed). Missing paths are fine. */
void tu_rmtree(const char *path);
/* Writes n bytes to path, creating or truncating it. */
int tu_write_file(const char *path, const void *data, size_t n);
/* Copies the regular files directly inside src into dst (created if
 * missing); subdirectories are skipped. */
int tu_copy_dir(const char *src, const char *dst);
/* Reads a whole file. The buffer has an extra NUL after the data, so text
 * files can be used as strings. *n (if n is not NULL) gets the size. */
char *tu_read_file(const char *path, size_t *n);
/* The test fixture directory: $COLI_TEST_DATA, else <srcdir>/tests/data.
 * Static storage; do not free. */
const char *tu_data_dir(void);
/* Replaces the first occurrence of from by to in dir/file; -1 if the file
 * cannot be read or written or does not contain from. */
int tu_replace_in_file(const char *dir, const char *file, const char *from, const char *to);
/* a "/" b, without doubling a trailing slash of a. */
char *tu_path(const char *a, const char *b);

/* ---- safetensors writer ----------------------------------------------- */

/* Builds a safetensors file in memory: tensors are laid out one after the
 * other in the order added, the header starts with
 * "__metadata__":{"format":"pt"} and is padded with spaces so that the data
 * starts at a multiple of 8. Names are JSON-escaped. */
typedef struct tu_st tu_st;

tu_st *tu_st_new(void);
/* Copies name, dtype (any string, even an invalid one), shape[0..ndim) and
 * data[0..nbytes). nbytes need not match the shape, which lets tests write
 * lying files. A failed allocation is remembered and reported by write. */
void tu_st_add(tu_st *w, const char *name, const char *dtype, int ndim, const int64_t *shape,
               const void *data, size_t nbytes);
/* Writes the file. */
int tu_st_write(tu_st *w, const char *path);
void tu_st_free(tu_st *w);

/* Writes 8-byte little-endian strlen(header_json), the header verbatim (no
 * padding) and the data: for corrupt-file tests. */
int tu_st_write_raw(const char *path, const char *header_json, const void *data, size_t nbytes);
/* Same with an explicit, possibly lying, header length. */
int tu_st_write_raw_len(const char *path, uint64_t header_len, const char *header_json,
                        const void *data, size_t nbytes);

/* Rewrites the checkpoint file path, whose tensors are all BF16 (as the
 * fixtures are), with every tensor stored as dtype: "F32" (exact), "F16"
 * (rounded to nearest even) or "BF16". If patch is not NULL, elements
 * [first, first + count) of that tensor, in row-major order, are set to
 * value before the conversion (-1 if there is no such tensor or range, or
 * no BF16 tensor at all).
 * The header is parsed here, without the library. */
int tu_st_rewrite(const char *path, const char *dtype, const char *patch, size_t first, size_t count,
                  float value);

/* Rewrites the checkpoint file path (all BF16 tensors) as BF16 after
 * fn(user, name, shape, ndim, values, n) has seen, and may have changed,
 * each tensor's values in f32; fn returns how many tensors it changed.
 * The sum of those, or -1 when the file cannot be read or written. */
typedef long (*tu_st_edit_fn)(void *user, const char *name, const int64_t *shape, int ndim, float *v, size_t n);
long tu_st_edit(const char *path, tu_st_edit_fn fn, void *user);

/* ---- running a model ----------------------------------------------------- */

/* max - min of v[0..n) (n >= 1, no NaN). */
float tu_range(const float *v, int n);
/* The index of the largest of v[0..n), the first of equals (NaN never wins). */
int tu_argmax(const float *v, int n);
/* Evaluates ids[0..n) on c in one call, then feeds steps greedy tokens one
 * at a time; logits (may be NULL) receives the logits after the prompt and
 * after each step, (1 + steps) * vocab floats, tokens (may be NULL) the
 * steps greedy tokens. 0, or -1 when an eval failed (the context's
 * message says why). */
int tu_greedy(coli_context *c, const int32_t *ids, size_t n, int steps, int vocab, float *logits, int32_t *tokens);
/* coli_generate with max_tokens, on_token and user set and every other
 * setting at its default. */
coli_status tu_generate(coli_context *c, const int32_t *prompt, size_t n_prompt, size_t max_tokens,
                        coli_sampler *s, coli_token_fn on_token, void *user, int32_t *out, size_t cap,
                        size_t *n_out);
/* The routed experts of the model in dir, MoE layers times experts (it
 * is opened with default options for that); -1 when it does not open. */
int tu_n_experts(const char *dir);

/* A copy of the glm4_moe fixture (its directory fixture) in a fresh
 * directory under *tmp (the caller removes it and frees both strings),
 * whose MTP layer repeats the model's prediction, so that its drafts are
 * accepted wherever greedy text repeats itself (testutil.c says how);
 * NULL when it cannot be made. */
char *tu_mtp_echo_model(const char *fixture, char **tmp);

/* ---- floats ------------------------------------------------------------ */

/* float -> bfloat16, rounding to nearest even (NaN stays a quiet NaN). */
uint16_t tu_f32_to_bf16(float f);
/* bfloat16 -> float (exact). */
float tu_bf16_to_f32(uint16_t h);
/* float -> IEEE half, rounding to nearest even, with subnormals, overflow
 * to infinity and NaN kept. */
uint16_t tu_f32_to_f16(float f);

/* ---- random numbers ------------------------------------------------------ */

/* splitmix64 over the caller's state (advanced by each call): the same
 * sequences on every machine, so that a test's inputs, and what it
 * expects of them, never change. */
uint64_t tu_rng_u64(uint64_t *state);
/* Uniform in [0, 1): the top 53 bits of one draw. */
double tu_rng_unit(uint64_t *state);
/* Roughly normal, mean 0, variance 1: four uniform draws summed in order,
 * centred and scaled. */
double tu_rng_normal(uint64_t *state);

#endif
