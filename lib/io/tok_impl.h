/* tok_impl.h - the tokenizer's insides (internal; lib/io/tokenizer.c and
 * lib/io/tok_*.c only): struct coli__tokenizer, the steps that loading
 * builds, the scratch of one call, and the functions its files share.
 *
 * The pipeline follows the Rust `tokenizers` crate:
 *   encode: added tokens (raw) -> normalizer -> added tokens (normalized)
 *           -> pre-tokenizer -> BPE -> post-processor;
 *   decode: ids -> token strings -> decoder chain -> text.
 *
 * The files call downward only; from the bottom: tok_buf.c, tok_err.c,
 * tok_vocab.c; tok_model.c, tok_steps.c, tok_normalize.c, tok_pretok.c,
 * tok_bpe.c; tok_encode.c, tok_decode.c, tokenizer.c. A file calls only
 * files before it in that list. */
#ifndef COLI_TOK_IMPL_H
#define COLI_TOK_IMPL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/tokenizer.h"

#define MAX_ID (1 << 26) /* ids at or above are refused as corrupt */
/* Tables are indexed by id, so ids are also checked against the entries
 * present before anything is sized by them: Hugging Face vocab ids are
 * dense from 0 and added tokens sit among or just above them (a config's
 * vocab_size may pad further, but with no tokens there). An id must be
 * below twice the vocab and added entries plus ID_SLACK, which keeps the
 * tables proportional to the file whatever ids it claims. */
#define ID_SLACK 1024
#define NO_STR UINT32_MAX

/* ---- piece lists ----------------------------------------------------- */

/* A list of string pieces held in one text buffer. */
typedef struct span {
    size_t off, len;
    int first; /* the piece starts at offset 0 of the original input */
} span;

typedef struct plist {
    coli__buf text;
    span *v;
    size_t n, cap;
} plist;

/* ---- the tokenizer --------------------------------------------------- */

enum { NORM_NFC, NORM_PREPEND, NORM_REPLACE, NORM_STRIP };
typedef struct norm_step {
    int type;
    char *a, *b; /* Prepend: a; Replace: a -> b */
    size_t alen, blen;
    int left, right; /* Strip */
} norm_step;

enum { RX_GPT2, RX_QWEN2, RX_LLAMA3 };
enum { SCHEME_ALWAYS, SCHEME_FIRST, SCHEME_NEVER };
enum { PRE_BYTELEVEL, PRE_SPLIT, PRE_METASPACE };
typedef struct pre_step {
    int type;
    int prefix_space, use_regex; /* ByteLevel */
    int rx;                      /* Split */
    uint32_t repl;               /* Metaspace */
    int scheme, split;
} pre_step;

enum { DEC_BYTELEVEL, DEC_METASPACE, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP };
typedef struct dec_step {
    int type;
    char *a, *b; /* Replace: a -> b */
    size_t alen, blen;
    uint32_t ch; /* Metaspace replacement, Strip content */
    int scheme;
    size_t start, stop; /* Strip */
} dec_step;

typedef struct added_tok {
    uint32_t off, len;   /* content, in strs */
    uint32_t noff, nlen; /* normalized content (normalized tokens only) */
    int32_t id;
    unsigned char single_word, lstrip, rstrip, normalized, special;
} added_tok;

/* Added tokens of one kind indexed by first byte, longest first. */
typedef struct matcher {
    uint32_t start[257];
    uint32_t *idx;
} matcher;

typedef struct vent {
    uint32_t off, len;
    int32_t id;
} vent;

typedef struct hslot {
    uint32_t hash;
    uint32_t ent; /* index into vents + 1; 0 = empty */
} hslot;

typedef struct mslot {
    uint64_t key; /* left << 32 | right; MSLOT_EMPTY when free */
    uint32_t rank;
    int32_t id;
} mslot;
#define MSLOT_EMPTY UINT64_MAX
#define JT_EMPTY UINT64_MAX

enum { IDF_ADDED = 1, IDF_SPECIAL = 2 };

/* The byte-level alphabet (GPT-2's bytes_to_unicode) both ways. */
typedef struct bytemap {
    char enc[256][2]; /* UTF-8 of each byte's character */
    unsigned char enc_len[256];
    short dec[0x144]; /* character -> byte, or -1 */
} bytemap;

struct coli__tokenizer {
    char *path;
    size_t id_entries, id_limit; /* vocab + added entries; ids must be below the limit */
    coli__buf strs; /* every token string, NUL-separated */

    vent *vents;
    size_t n_vents;
    hslot *vtab;
    size_t vtab_mask;
    mslot *mtab;
    size_t mtab_mask;
    uint64_t *jtab; /* merge junctions (see junction_key in tok_vocab.c); JT_EMPTY when free */
    size_t jtab_mask;
    int bpe_whole;            /* junctions do not hold: merge every word whole */
    uint32_t unk_fc, unk_lc;  /* first and last character of the unk token */

    size_t n_ids;
    uint32_t *id_off, *id_len; /* id_len NO_STR: no token */
    unsigned char *id_flags;

    int byte_fallback, fuse_unk, ignore_merges;
    int has_unk;
    int32_t unk_id; /* -1 if the unk token is not in the vocab */
    char *prefix, *suffix;
    size_t prefix_len, suffix_len;
    int32_t byte_id[256]; /* <0xNN> tokens, or -1 */

    added_tok *added;
    size_t n_added;
    matcher m_raw, m_norm;
    int has_raw, has_norm;

    norm_step *norm;
    size_t n_norm, cap_norm;
    pre_step *pre;
    size_t n_pre, cap_pre;
    dec_step *dec;
    size_t n_dec, cap_dec;
    int has_decoder;

    coli__ids post_prefix, post_suffix;
    bytemap bm;
};

/* ---- one call's scratch ---------------------------------------------- */

/* Text split on added tokens: the pieces in order. */
typedef struct seg {
    size_t off, len;
    int32_t id; /* added token id, or -1 for text */
} seg;

typedef struct segv {
    seg *v;
    size_t n, cap;
} segv;

/* Scratch of one encode/decode call (struct sym and struct hent are
 * tok_bpe.c's). */
typedef struct scratch {
    plist pa, pb;
    coli__buf nbuf, ntmp, tmp;
    segv raw, norm;
    uint32_t *cps;
    unsigned char *cls;
    size_t *offs;
    size_t ccap;
    span *rs;
    size_t rs_n, rs_cap;
    struct sym *syms;
    size_t scap;
    struct hent *heap;
    size_t hcap;
} scratch;

/* ---- what the files share, bottom first ------------------------------ */

/* For the loaders (tok_model.c, tok_steps.c). */
static inline int coli__tok_json_is_str(const coli__json *j)
{
    return j && j->type == COLI_JSON_STRING;
}

/* ---- tok_buf.c ------------------------------------------------------- */

/* The int functions return 0, or -1 when out of memory. */

/* Room for extra more bytes plus the terminating NUL. Here, not in
 * tok_buf.c: the inline append below calls it, and a header must not call
 * into a file that includes it. */
static inline int coli__buf_reserve(coli__buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->n)
        return -1;
    size_t need = b->n + extra + 1, nc = b->cap ? b->cap : 64;
    if (need <= b->cap)
        return 0;
    while (nc < need)
        nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np)
        return -1;
    b->p = np;
    b->cap = nc;
    return 0;
}
/* Appends p[0..n), keeping the buffer NUL-terminated. Inline: decoding
 * appends a few bytes a token, and a call each cost a sixth of it. */
static inline int coli__buf_add(coli__buf *b, const void *p, size_t n)
{
    if (n >= b->cap - b->n && coli__buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}
/* Empties b, keeping its memory. */
void coli__buf_reset(coli__buf *b);
int coli__ids_push(coli__ids *ids, int32_t v);
int coli__ids_add(coli__ids *ids, const int32_t *v, size_t n);
/* Grows the array whose pointer is at pp (elements of size sz) to hold at
 * least need elements. */
int coli__tok_vec_grow(void *pp, size_t *cap, size_t need, size_t sz);
/* Empties l, keeping its memory. */
void coli__tok_plist_reset(plist *l);
/* Opens a piece at the end of l->text, closed by coli__tok_plist_close
 * (which drops it if empty) or coli__tok_plist_close_keep. */
int coli__tok_plist_open(plist *l, int first);
void coli__tok_plist_close(plist *l);
/* Adds p[0..n) as a piece; an empty one is dropped. */
int coli__tok_plist_add(plist *l, const char *p, size_t n, int first);
/* Closes the open piece, even if empty (decoders). */
void coli__tok_plist_close_keep(plist *l);
/* Adds p[0..n) as a piece, even if empty (decoders). */
int coli__tok_plist_add_keep(plist *l, const char *p, size_t n);
/* Appends s[0..n) with every occurrence of pat replaced by rep. */
int coli__tok_replace_into(coli__buf *out, const char *s, size_t n, const char *pat, size_t plen,
                           const char *rep, size_t rlen);
/* A NUL-terminated copy of s[0..n), or NULL. */
char *coli__tok_dupn(const char *s, size_t n);
/* Frees all that one encode/decode call grew in sc. */
void coli__tok_scratch_free(scratch *sc);

/* ---- tok_err.c ------------------------------------------------------- */

/* Fails with st and a message prefixed with the tokenizer's path. */
coli_status coli__tok_fail(const coli__tokenizer *t, coli__err *err, coli_status st,
                           const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Fails with COLI_ENOMEM. */
coli_status coli__tok_oom(const coli__tokenizer *t, coli__err *err);

/* ---- tok_vocab.c ----------------------------------------------------- */

/* Model vocab: string -> id, or -1. */
int32_t coli__tok_vocab_get(const coli__tokenizer *t, const char *s, size_t n);
/* Inserts vents[k] into the vocab table; a repeated string takes the later id. */
void coli__tok_vocab_insert(coli__tokenizer *t, size_t k);
/* The merge of the pair (a, b), or NULL. */
const mslot *coli__tok_merge_get(const coli__tokenizer *t, int32_t a, int32_t b);
/* Records the merge of (a, b) into id; a repeated pair takes the later rank. */
void coli__tok_merge_put(coli__tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t id);
/* First and last character of the valid UTF-8 s[0..n), n > 0. */
uint32_t coli__tok_first_cp(const char *s, size_t n);
uint32_t coli__tok_last_cp(const char *s, size_t n);
/* Whether some merge joins a symbol ending with last to one beginning with
 * first (the junctions: see tok_vocab.c). */
int coli__tok_junction_known(const coli__tokenizer *t, uint32_t last, uint32_t first);
void coli__tok_junction_put(coli__tokenizer *t, uint32_t last, uint32_t first);
/* Copies s into the string store; *off receives its offset. 0 or -1. */
int coli__tok_strs_add(coli__tokenizer *t, const char *s, size_t n, uint32_t *off);

/* ---- tok_model.c ----------------------------------------------------- */

/* Sets the id bound of ID_SLACK from the entries root holds. */
void coli__tok_set_id_limit(coli__tokenizer *t, const coli__json *root);
/* "model": the vocab, the merges, unk and the byte tokens, the options. */
coli_status coli__tok_load_model(coli__tokenizer *t, const coli__json *root, coli__err *err);
/* "added_tokens". */
coli_status coli__tok_load_added(coli__tokenizer *t, const coli__json *root, coli__err *err);
/* The id table (id -> string and flags), once vocab and added tokens are in. */
coli_status coli__tok_build_ids(coli__tokenizer *t, coli__err *err);

/* ---- tok_steps.c ----------------------------------------------------- */

/* Each adds the steps of one JSON object; none when it is missing or null. */

coli_status coli__tok_load_normalizer(coli__tokenizer *t, const coli__json *j, coli__err *err);
coli_status coli__tok_load_pre(coli__tokenizer *t, const coli__json *j, coli__err *err);
coli_status coli__tok_load_post(coli__tokenizer *t, const coli__json *j, coli__err *err);
/* Fails if an id of the post-processor is not a token (after the id table). */
coli_status coli__tok_check_post_ids(coli__tokenizer *t, coli__err *err);
coli_status coli__tok_load_decoder(coli__tokenizer *t, const coli__json *j, coli__err *err);

/* ---- tok_normalize.c ------------------------------------------------- */

/* Runs the normalizer over s[0..n); the result is left in *res (tmp is
 * scratch; the two may be swapped). */
coli_status coli__tok_normalize(const coli__tokenizer *t, const char *s, size_t n, coli__buf *res,
                                coli__buf *tmp, coli__err *err);
/* Splits s[0..n) on the added tokens of m (m_raw, norm 0, or m_norm,
 * norm 1) into out. 0 or -1. */
int coli__tok_split_added(const coli__tokenizer *t, const matcher *m, int norm, const char *s,
                          size_t n, segv *out);
/* Normalizes the normalized added tokens and builds m_raw and m_norm (after
 * the normalizer is loaded). */
coli_status coli__tok_build_added_matchers(coli__tokenizer *t, coli__err *err);

/* ---- tok_pretok.c ---------------------------------------------------- */

/* Fills the byte-level alphabet both ways. */
void coli__tok_bytemap_init(bytemap *m);
/* Decodes s[0..n) into sc->cps / cls / offs (offs has n_cp + 1 entries). 0 or -1. */
int coli__tok_decode_cps(scratch *sc, const char *s, size_t n, size_t *n_cp);
/* Runs one pre-tokenizer step on the piece s[0..n), appending to out. 0 or -1. */
int coli__tok_pre_step_apply(const pre_step *ps, const bytemap *bm, scratch *sc, const char *s,
                             size_t n, int first, plist *out);

/* ---- tok_bpe.c ------------------------------------------------------- */

/* Appends the ids of the pre-token s[0..n). */
coli_status coli__tok_bpe(const coli__tokenizer *t, scratch *sc, const char *s, size_t n,
                          coli__ids *out, coli__err *err);

#endif
