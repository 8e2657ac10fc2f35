/* tokenizer.c - Hugging Face tokenizer.json with a BPE model.
 *
 * The pipeline follows the Rust `tokenizers` crate:
 *   encode: added tokens (raw) -> normalizer -> added tokens (normalized)
 *           -> pre-tokenizer -> BPE -> post-processor;
 *   decode: ids -> token strings -> decoder chain -> text.
 * The pre-tokenizer regexes are not interpreted: the few patterns real
 * checkpoints use are recognised by their exact text and run by hand-written
 * matchers with the same leftmost-first semantics (see rx_match). */
#include "io/tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/unicode.h"

#define MAX_ID (1 << 26) /* ids at or above are refused as corrupt */
/* Tables are indexed by id, so ids are also checked against the entries
 * present before anything is sized by them: Hugging Face vocab ids are
 * dense from 0 and added tokens sit among or just above them (a config's
 * vocab_size may pad further, but with no tokens there). An id must be
 * below twice the vocab and added entries plus ID_SLACK, which keeps the
 * tables proportional to the file whatever ids it claims. */
#define ID_SLACK 1024
#define NO_STR UINT32_MAX

/* ---- growable buffers ------------------------------------------------ */

void coli__ids_free(coli__ids *ids)
{
    if (!ids)
        return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

void coli__buf_free(coli__buf *b)
{
    if (!b)
        return;
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* Room for extra more bytes plus the terminating NUL. */
static int buf_reserve(coli__buf *b, size_t extra)
{
    size_t need, nc;
    char *np;
    if (extra > SIZE_MAX / 2 - b->n)
        return -1;
    need = b->n + extra + 1;
    if (need <= b->cap)
        return 0;
    nc = b->cap ? b->cap : 64;
    while (nc < need)
        nc *= 2;
    np = realloc(b->p, nc);
    if (!np)
        return -1;
    b->p = np;
    b->cap = nc;
    return 0;
}

static int buf_add(coli__buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static int buf_add_cp(coli__buf *b, uint32_t cp)
{
    char u[4];
    size_t k = coli__utf8_encode(cp, u);
    return buf_add(b, u, k);
}

static void buf_reset(coli__buf *b)
{
    b->n = 0;
    if (b->p)
        b->p[0] = '\0';
}

static int ids_push(coli__ids *ids, int32_t v)
{
    if (ids->n == ids->cap) {
        size_t nc = ids->cap ? ids->cap * 2 : 64;
        int32_t *nv;
        if (nc > SIZE_MAX / sizeof *nv)
            return -1;
        nv = realloc(ids->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        ids->v = nv;
        ids->cap = nc;
    }
    ids->v[ids->n++] = v;
    return 0;
}

static int ids_add(coli__ids *ids, const int32_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids_push(ids, v[i]))
            return -1;
    return 0;
}

/* Grows the array whose pointer is at pp (elements of size sz) to hold at
 * least need elements. The pointer is moved with memcpy so that any pointer
 * type can be passed without type punning. */
static int vec_grow(void *pp, size_t *cap, size_t need, size_t sz)
{
    size_t nc;
    void *v, *nv;
    if (need <= *cap)
        return 0;
    nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    if (nc > SIZE_MAX / sz)
        return -1;
    memcpy(&v, pp, sizeof v);
    nv = realloc(v, nc * sz);
    if (!nv)
        return -1;
    memcpy(pp, &nv, sizeof nv);
    *cap = nc;
    return 0;
}

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

static void plist_reset(plist *l)
{
    buf_reset(&l->text);
    l->n = 0;
}

static void plist_free(plist *l)
{
    coli__buf_free(&l->text);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* Starts a new piece at the end of the text; bytes are then added to
 * l->text and the piece is closed by plist_close (empty ones are dropped,
 * as the Rust crate drops empty splits). */
static int plist_open(plist *l, int first)
{
    /* The text is allocated even for an empty piece, so that a piece's
     * pointer (text.p + off) is never an offset from NULL. */
    if (vec_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v) || buf_reserve(&l->text, 0))
        return -1;
    l->v[l->n].off = l->text.n;
    l->v[l->n].len = 0;
    l->v[l->n].first = first;
    return 0;
}

static void plist_close(plist *l)
{
    span *s = &l->v[l->n];
    s->len = l->text.n - s->off;
    if (s->len)
        l->n++;
}

static int plist_add(plist *l, const char *p, size_t n, int first)
{
    if (plist_open(l, first) || buf_add(&l->text, p, n))
        return -1;
    plist_close(l);
    return 0;
}

/* Decoders keep empty tokens (a later step may count positions). */
static void plist_close_keep(plist *l)
{
    l->v[l->n].len = l->text.n - l->v[l->n].off;
    l->n++;
}

static int plist_add_keep(plist *l, const char *p, size_t n)
{
    if (plist_open(l, 0) || buf_add(&l->text, p, n))
        return -1;
    plist_close_keep(l);
    return 0;
}

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
    uint64_t *jtab; /* merge junctions (see junction_key); JT_EMPTY when free */
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

static void bytemap_init(bytemap *m);

static coli_status tfail(const coli__tokenizer *t, coli__err *err, coli_status st,
                         const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static coli_status tfail(const coli__tokenizer *t, coli__err *err, coli_status st,
                         const char *fmt, ...)
{
    char msg[COLI_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return coli__fail(err, st, "%s: %s", t && t->path ? t->path : "tokenizer", msg);
}

static coli_status oom(const coli__tokenizer *t, coli__err *err)
{
    return tfail(t, err, COLI_ENOMEM, "out of memory in the tokenizer");
}

/* ---- hashing --------------------------------------------------------- */

static uint32_t hash_str(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

static size_t hash_pair(uint64_t key)
{
    key *= 0x9E3779B97F4A7C15ull;
    key ^= key >> 31;
    return (size_t)key;
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

/* Model vocab: string -> id, or -1. */
static int32_t vocab_get(const coli__tokenizer *t, const char *s, size_t n)
{
    uint32_t h;
    size_t i;
    if (!t->vtab)
        return -1;
    h = hash_str(s, n);
    for (i = h & t->vtab_mask;; i = (i + 1) & t->vtab_mask) {
        const hslot *sl = &t->vtab[i];
        const vent *e;
        if (!sl->ent)
            return -1;
        if (sl->hash != h)
            continue;
        e = &t->vents[sl->ent - 1];
        if (e->len == n && memcmp(t->strs.p + e->off, s, n) == 0)
            return e->id;
    }
}

/* Inserts vents[k]; a repeated string takes the later id. */
static void vocab_insert(coli__tokenizer *t, size_t k)
{
    const vent *e = &t->vents[k];
    const char *s = t->strs.p + e->off;
    uint32_t h = hash_str(s, e->len);
    size_t i;
    for (i = h & t->vtab_mask;; i = (i + 1) & t->vtab_mask) {
        hslot *sl = &t->vtab[i];
        if (!sl->ent) {
            sl->hash = h;
            sl->ent = (uint32_t)(k + 1);
            return;
        }
        if (sl->hash == h) {
            const vent *o = &t->vents[sl->ent - 1];
            if (o->len == e->len && memcmp(t->strs.p + o->off, s, e->len) == 0) {
                sl->ent = (uint32_t)(k + 1);
                return;
            }
        }
    }
}

static const mslot *merge_get(const coli__tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i;
    if (!t->mtab)
        return NULL;
    for (i = hash_pair(key) & t->mtab_mask;; i = (i + 1) & t->mtab_mask) {
        const mslot *sl = &t->mtab[i];
        if (sl->key == key)
            return sl;
        if (sl->key == MSLOT_EMPTY)
            return NULL;
    }
}

/* A repeated pair takes the later rank, as the Rust crate's map does. */
static void merge_put(coli__tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i;
    for (i = hash_pair(key) & t->mtab_mask;; i = (i + 1) & t->mtab_mask) {
        mslot *sl = &t->mtab[i];
        if (sl->key == key || sl->key == MSLOT_EMPTY) {
            sl->key = key;
            sl->rank = rank;
            sl->id = id;
            return;
        }
    }
}

/* First and last character of the valid UTF-8 s[0..n), n > 0. */
static uint32_t first_cp(const char *s, size_t n)
{
    uint32_t cp;
    size_t len;
    coli__utf8_decode(s, n, &cp, &len);
    return cp;
}

static uint32_t last_cp(const char *s, size_t n)
{
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    return first_cp(s + k, n - k);
}

/* Junctions. A merged token begins with the first character of its left
 * part and ends with the last character of its right part, so the symbols
 * on either side of a boundary in a word always end with the character
 * before it and begin with the one after it (with a continuing-subword
 * prefix, the prefix's first character). A merge (a, b) can therefore join
 * them only if a ends and b begins with those two characters: the pair is
 * a junction of the merges. A boundary that is no junction is never
 * crossed, and BPE on the pieces between such boundaries gives exactly the
 * result on the whole word. That keeps words without pre-tokenizer splits
 * (SentencePiece text is one word: no merge has a right part starting with
 * U+2581 after a letter) linear, each piece in a small heap. It relies on
 * every token id having one string: bpe_whole is set when it does not. */
static uint64_t junction_key(uint32_t last, uint32_t first)
{
    return ((uint64_t)last << 32) | first;
}

static int junction_known(const coli__tokenizer *t, uint32_t last, uint32_t first)
{
    uint64_t key = junction_key(last, first);
    if (!t->jtab)
        return 0; /* no merges */
    for (size_t i = hash_pair(key) & t->jtab_mask;; i = (i + 1) & t->jtab_mask) {
        if (t->jtab[i] == key)
            return 1;
        if (t->jtab[i] == JT_EMPTY)
            return 0;
    }
}

static void junction_put(coli__tokenizer *t, uint32_t last, uint32_t first)
{
    uint64_t key = junction_key(last, first);
    for (size_t i = hash_pair(key) & t->jtab_mask;; i = (i + 1) & t->jtab_mask) {
        if (t->jtab[i] == key)
            return;
        if (t->jtab[i] == JT_EMPTY) {
            t->jtab[i] = key;
            return;
        }
    }
}

/* Copies s into the string store; *off receives its offset. */
static int strs_add(coli__tokenizer *t, const char *s, size_t n, uint32_t *off)
{
    if (t->strs.n + n + 1 >= NO_STR)
        return -1;
    *off = (uint32_t)t->strs.n;
    if (buf_add(&t->strs, s, n) || buf_add(&t->strs, "", 1))
        return -1;
    return 0;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* ---- loading: model -------------------------------------------------- */

static int json_is_str(const coli__json *j)
{
    return j && j->type == COLI_JSON_STRING;
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

    if (json_is_str(m)) {
        sp = memchr(m->str, ' ', m->len);
        if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str)))
            return tfail(t, err, COLI_EFORMAT,
                         "model.merges[%zu] \"%.60s\" is not two tokens separated by one space",
                         rank, m->str);
        a = m->str;
        alen = (size_t)(sp - m->str);
        b = sp + 1;
        blen = m->len - alen - 1;
    } else if (m && m->type == COLI_JSON_ARRAY && m->len == 2 && json_is_str(&m->items[0]) &&
               json_is_str(&m->items[1])) {
        a = m->items[0].str;
        alen = m->items[0].len;
        b = m->items[1].str;
        blen = m->items[1].len;
    } else {
        return tfail(t, err, COLI_EFORMAT,
                     "model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", rank);
    }
    ia = vocab_get(t, a, alen);
    ib = vocab_get(t, b, blen);
    if (ia < 0 || ib < 0)
        return tfail(t, err, COLI_EFORMAT, "model.merges[%zu]: token \"%.*s\" is not in the vocab",
                     rank, (int)(ia < 0 ? (alen > 60 ? 60 : alen) : (blen > 60 ? 60 : blen)),
                     ia < 0 ? a : b);
    if (alen == 0 || blen == 0)
        t->bpe_whole = 1; /* an empty token has no characters to join on */
    else
        junction_put(t, last_cp(a, alen), first_cp(b, blen));
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
            return oom(t, err);
        *tmp = nt;
        *tmp_cap = nc;
    }
    memcpy(*tmp, a, alen);
    memcpy(*tmp + alen, b, blen_np);
    inew = vocab_get(t, *tmp, alen + blen_np);
    if (inew < 0)
        return tfail(t, err, COLI_EFORMAT,
                     "model.merges[%zu]: merged token \"%.*s\" is not in the vocab", rank,
                     (int)((alen + blen_np) > 60 ? 60 : alen + blen_np), *tmp);
    merge_put(t, ia, ib, (uint32_t)rank, inew);
    return COLI_OK;
}

/* Sets the id bound of ID_SLACK. */
static void set_id_limit(coli__tokenizer *t, const coli__json *root)
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

static coli_status load_model(coli__tokenizer *t, const coli__json *root, coli__err *err)
{
    const coli__json *model = coli__json_get(root, "model");
    const coli__json *vocab, *merges, *j;
    const char *type;
    int bad = 0;
    coli_status st = COLI_OK;
    char *tmp = NULL;
    size_t tmp_cap = 0;

    if (!model || model->type != COLI_JSON_OBJECT)
        return tfail(t, err, COLI_EFORMAT, "no \"model\" object");
    type = coli__json_get_str(model, "type", NULL);
    if (!type) {
        if (!coli__json_get(model, "merges"))
            return tfail(t, err, COLI_EUNSUPPORTED, "model has no \"type\" and is not BPE");
        type = "BPE";
    }
    if (strcmp(type, "BPE") != 0)
        return tfail(t, err, COLI_EUNSUPPORTED,
                     "model type \"%.40s\" is not supported (only BPE)", type);
    j = coli__json_get(model, "dropout");
    if (j && j->type == COLI_JSON_NUMBER && coli__json_num(j) > 0.0)
        return tfail(t, err, COLI_EUNSUPPORTED,
                     "model.dropout %g is not supported (BPE dropout is random)", coli__json_num(j));

    t->byte_fallback = coli__json_get_bool(model, "byte_fallback", 0);
    t->fuse_unk = coli__json_get_bool(model, "fuse_unk", 0);
    t->ignore_merges = coli__json_get_bool(model, "ignore_merges", 0);
    if ((j = opt_str(model, "continuing_subword_prefix", &bad)) && j->len) {
        if (!(t->prefix = dupn(j->str, j->len)))
            return oom(t, err);
        t->prefix_len = j->len;
    }
    if ((j = opt_str(model, "end_of_word_suffix", &bad)) && j->len) {
        if (!(t->suffix = dupn(j->str, j->len)))
            return oom(t, err);
        t->suffix_len = j->len;
    }
    if (bad)
        return tfail(t, err, COLI_EFORMAT,
                     "model.continuing_subword_prefix/end_of_word_suffix is not a string");

    vocab = coli__json_get(model, "vocab");
    if (!vocab || vocab->type != COLI_JSON_OBJECT)
        return tfail(t, err, COLI_EFORMAT, "model.vocab is not an object");
    t->n_vents = vocab->len;
    t->vents = malloc((t->n_vents ? t->n_vents : 1) * sizeof *t->vents);
    t->vtab_mask = pow2_at_least(t->n_vents * 2) - 1;
    t->vtab = calloc(t->vtab_mask + 1, sizeof *t->vtab);
    if (!t->vents || !t->vtab || buf_reserve(&t->strs, t->n_vents * 8))
        return oom(t, err);
    for (size_t i = 0; i < vocab->len; i++) {
        const coli__json *v = &vocab->items[i], *key = coli__json_key(vocab, i);
        if (v->type != COLI_JSON_NUMBER || !v->is_int || v->integer < 0 || v->integer >= MAX_ID)
            return tfail(t, err, COLI_EFORMAT, "model.vocab[\"%.60s\"] is not a valid id",
                         key->str);
        if ((uint64_t)v->integer >= t->id_limit)
            return tfail(t, err, COLI_EFORMAT,
                         "model.vocab[\"%.60s\"] = %lld: with %zu vocab and added entries, ids "
                         "must be below %zu",
                         key->str, (long long)v->integer, t->id_entries,
                         t->id_limit);
        if (strs_add(t, key->str, key->len, &t->vents[i].off))
            return oom(t, err);
        t->vents[i].len = key->len;
        t->vents[i].id = (int32_t)v->integer;
        vocab_insert(t, i);
    }

    j = coli__json_get(model, "unk_token");
    if (j && j->type == COLI_JSON_STRING) {
        t->has_unk = 1;
        t->unk_id = vocab_get(t, j->str, j->len);
        if (j->len) {
            t->unk_fc = first_cp(j->str, j->len);
            t->unk_lc = last_cp(j->str, j->len);
        } else {
            t->bpe_whole = 1;
        }
    } else if (j && j->type != COLI_JSON_NULL) {
        return tfail(t, err, COLI_EFORMAT, "model.unk_token is not a string");
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = vocab_get(t, name, 6);
    }

    merges = coli__json_get(model, "merges");
    if (merges && merges->type != COLI_JSON_NULL) {
        if (merges->type != COLI_JSON_ARRAY)
            return tfail(t, err, COLI_EFORMAT, "model.merges is not an array");
        t->mtab_mask = pow2_at_least(merges->len * 2) - 1;
        t->mtab = malloc((t->mtab_mask + 1) * sizeof *t->mtab);
        t->jtab_mask = t->mtab_mask;
        t->jtab = malloc((t->jtab_mask + 1) * sizeof *t->jtab);
        if (!t->mtab || !t->jtab)
            return oom(t, err);
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

static coli_status load_added(coli__tokenizer *t, const coli__json *root, coli__err *err)
{
    const coli__json *at = coli__json_get(root, "added_tokens");
    if (!at || at->type == COLI_JSON_NULL)
        return COLI_OK;
    if (at->type != COLI_JSON_ARRAY)
        return tfail(t, err, COLI_EFORMAT, "added_tokens is not an array");
    t->added = calloc(at->len ? at->len : 1, sizeof *t->added);
    if (!t->added)
        return oom(t, err);
    for (size_t i = 0; i < at->len; i++) {
        const coli__json *o = &at->items[i];
        const coli__json *c = coli__json_get(o, "content");
        const coli__json *id = coli__json_get(o, "id");
        added_tok *a = &t->added[t->n_added];
        int32_t vid;
        if (o->type != COLI_JSON_OBJECT || !json_is_str(c))
            return tfail(t, err, COLI_EFORMAT, "added_tokens[%zu] has no \"content\" string", i);
        if (!id || id->type != COLI_JSON_NUMBER || !id->is_int || id->integer < 0 ||
            id->integer >= MAX_ID)
            return tfail(t, err, COLI_EFORMAT, "added_tokens[%zu] (\"%.60s\") has no valid \"id\"",
                         i, c->str);
        if ((uint64_t)id->integer >= t->id_limit)
            return tfail(t, err, COLI_EFORMAT,
                         "added_tokens[%zu] (\"%.60s\") id %lld: with %zu vocab and added "
                         "entries, ids must be below %zu",
                         i, c->str, (long long)id->integer, t->id_entries,
                         t->id_limit);
        if (c->len == 0)
            continue; /* can never match */
        if (strs_add(t, c->str, c->len, &a->off))
            return oom(t, err);
        a->len = (uint32_t)c->len;
        /* Like the Rust crate, a content already in the model vocab keeps
         * the vocab's id. */
        vid = vocab_get(t, c->str, c->len);
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

static coli_status build_ids(coli__tokenizer *t, coli__err *err)
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
        return oom(t, err);
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

/* ---- loading: normalizer -------------------------------------------- */

static int json_type_is(const coli__json *j, coli__json_type ty)
{
    return j && j->type == ty;
}

/* The pattern of a Replace/Split: {"String": s} is returned, {"Regex": r}
 * sets *regex. NULL if malformed. */
static const coli__json *pattern_of(const coli__json *step, const coli__json **regex)
{
    const coli__json *p = coli__json_get(step, "pattern");
    const coli__json *s;
    *regex = NULL;
    if (!json_type_is(p, COLI_JSON_OBJECT))
        return NULL;
    if ((s = coli__json_get(p, "Regex")) && json_is_str(s)) {
        *regex = s;
        return NULL;
    }
    s = coli__json_get(p, "String");
    return json_is_str(s) ? s : NULL;
}

static coli_status load_normalizer(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    norm_step st;
    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return tfail(t, err, COLI_EFORMAT, "normalizer is not an object with a \"type\"");
    memset(&st, 0, sizeof st);
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "normalizers");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return tfail(t, err, COLI_EFORMAT, "normalizer Sequence has no \"normalizers\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(load_normalizer(t, &l->items[i], err));
        return COLI_OK;
    } else if (strcmp(type, "NFC") == 0) {
        st.type = NORM_NFC;
    } else if (strcmp(type, "Prepend") == 0) {
        const coli__json *p = coli__json_get(j, "prepend");
        if (!json_is_str(p))
            return tfail(t, err, COLI_EFORMAT, "normalizer Prepend has no \"prepend\" string");
        st.type = NORM_PREPEND;
        if (!(st.a = dupn(p->str, p->len)))
            return oom(t, err);
        st.alen = p->len;
    } else if (strcmp(type, "Replace") == 0) {
        const coli__json *rx, *pat = pattern_of(j, &rx);
        const coli__json *c = coli__json_get(j, "content");
        if (rx)
            return tfail(t, err, COLI_EUNSUPPORTED,
                         "normalizer Replace with a Regex pattern (\"%.60s\") is not supported",
                         rx->str);
        if (!pat || !json_is_str(c))
            return tfail(t, err, COLI_EFORMAT, "normalizer Replace needs a pattern and a content");
        if (pat->len == 0)
            return tfail(t, err, COLI_EUNSUPPORTED,
                         "normalizer Replace with an empty pattern is not supported");
        st.type = NORM_REPLACE;
        st.a = dupn(pat->str, pat->len);
        st.b = dupn(c->str, c->len);
        st.alen = pat->len;
        st.blen = c->len;
        if (!st.a || !st.b) {
            free(st.a);
            free(st.b);
            return oom(t, err);
        }
    } else if (strcmp(type, "Strip") == 0) {
        st.type = NORM_STRIP;
        st.left = coli__json_get_bool(j, "strip_left", 0);
        st.right = coli__json_get_bool(j, "strip_right", 0);
    } else {
        return tfail(t, err, COLI_EUNSUPPORTED, "normalizer \"%.40s\" is not supported", type);
    }
    if (vec_grow(&t->norm, &t->cap_norm, t->n_norm + 1, sizeof *t->norm)) {
        free(st.a);
        free(st.b);
        return oom(t, err);
    }
    t->norm[t->n_norm++] = st;
    return COLI_OK;
}

/* ---- loading: pre-tokenizer ----------------------------------------- */

static const char RX_GPT2_TEXT[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RX_QWEN2_TEXT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RX_LLAMA3_TEXT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* "always" / "first" / "never" from a Metaspace object (new or legacy). */
static int metaspace_scheme(const coli__json *j)
{
    const char *s = coli__json_get_str(j, "prepend_scheme", NULL);
    const coli__json *aps = coli__json_get(j, "add_prefix_space");
    if (aps && aps->type == COLI_JSON_BOOL && !aps->boolean)
        return SCHEME_NEVER;
    if (s && strcmp(s, "first") == 0)
        return SCHEME_FIRST;
    if (s && strcmp(s, "never") == 0)
        return SCHEME_NEVER;
    return SCHEME_ALWAYS;
}

/* The single character of a JSON string, or 0 if it is not one character. */
static uint32_t single_char(const coli__json *s)
{
    uint32_t cp;
    size_t len;
    if (!json_is_str(s) || s->len == 0 || !coli__utf8_decode(s->str, s->len, &cp, &len) ||
        len != s->len || cp == 0)
        return 0;
    return cp;
}

static coli_status load_pre(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    pre_step st;
    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return tfail(t, err, COLI_EFORMAT, "pre_tokenizer is not an object with a \"type\"");
    memset(&st, 0, sizeof st);
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "pretokenizers");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return tfail(t, err, COLI_EFORMAT,
                         "pre_tokenizer Sequence has no \"pretokenizers\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(load_pre(t, &l->items[i], err));
        return COLI_OK;
    } else if (strcmp(type, "ByteLevel") == 0) {
        st.type = PRE_BYTELEVEL;
        st.prefix_space = coli__json_get_bool(j, "add_prefix_space", 1);
        st.use_regex = coli__json_get_bool(j, "use_regex", 1);
    } else if (strcmp(type, "Split") == 0) {
        const coli__json *rx, *pat = pattern_of(j, &rx);
        const char *beh = coli__json_get_str(j, "behavior", "");
        st.type = PRE_SPLIT;
        if (!rx) {
            if (pat)
                return tfail(t, err, COLI_EUNSUPPORTED,
                             "pre_tokenizer Split with a String pattern (\"%.60s\") is not supported",
                             pat->str);
            return tfail(t, err, COLI_EFORMAT, "pre_tokenizer Split has no pattern");
        }
        if (strcmp(rx->str, RX_GPT2_TEXT) == 0)
            st.rx = RX_GPT2;
        else if (strcmp(rx->str, RX_QWEN2_TEXT) == 0)
            st.rx = RX_QWEN2;
        else if (strcmp(rx->str, RX_LLAMA3_TEXT) == 0)
            st.rx = RX_LLAMA3;
        else
            return tfail(t, err, COLI_EUNSUPPORTED,
                         "pre_tokenizer Split: unsupported regex \"%.80s%s\" (known: GPT-2, "
                         "Qwen2, Llama-3 patterns)",
                         rx->str, rx->len > 80 ? "..." : "");
        if (strcmp(beh, "Isolated") != 0)
            return tfail(t, err, COLI_EUNSUPPORTED,
                         "pre_tokenizer Split behavior \"%.30s\" is not supported (only Isolated)",
                         beh);
        if (coli__json_get_bool(j, "invert", 0))
            return tfail(t, err, COLI_EUNSUPPORTED,
                         "pre_tokenizer Split with invert: true is not supported");
    } else if (strcmp(type, "Metaspace") == 0) {
        st.type = PRE_METASPACE;
        st.repl = single_char(coli__json_get(j, "replacement"));
        if (!st.repl)
            return tfail(t, err, COLI_EFORMAT,
                         "pre_tokenizer Metaspace \"replacement\" is not one character");
        st.scheme = metaspace_scheme(j);
        st.split = coli__json_get_bool(j, "split", 1);
    } else {
        return tfail(t, err, COLI_EUNSUPPORTED, "pre_tokenizer \"%.40s\" is not supported", type);
    }
    if (vec_grow(&t->pre, &t->cap_pre, t->n_pre + 1, sizeof *t->pre))
        return oom(t, err);
    t->pre[t->n_pre++] = st;
    return COLI_OK;
}

/* ---- loading: post-processor ---------------------------------------- */

/* ["<s>", 1] of RobertaProcessing / BertProcessing. */
static int pair_id(const coli__json *j, int32_t *id)
{
    if (!json_type_is(j, COLI_JSON_ARRAY) || j->len != 2 || j->items[1].type != COLI_JSON_NUMBER ||
        !j->items[1].is_int || j->items[1].integer < 0 || j->items[1].integer >= MAX_ID)
        return -1;
    *id = (int32_t)j->items[1].integer;
    return 0;
}

static coli_status load_post(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    coli__ids pre = {0}, suf = {0};
    coli_status st = COLI_OK;

    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return tfail(t, err, COLI_EFORMAT, "post_processor is not an object with a \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "processors");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return tfail(t, err, COLI_EFORMAT, "post_processor Sequence has no \"processors\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(load_post(t, &l->items[i], err));
        return COLI_OK;
    }
    if (strcmp(type, "ByteLevel") == 0)
        return COLI_OK; /* offsets only */
    if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        int32_t cls, sep;
        if (pair_id(coli__json_get(j, "cls"), &cls) || pair_id(coli__json_get(j, "sep"), &sep))
            return tfail(t, err, COLI_EFORMAT, "post_processor %s needs \"cls\" and \"sep\" pairs",
                         type);
        if (ids_push(&pre, cls) || ids_push(&suf, sep))
            st = oom(t, err);
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        const coli__json *single = coli__json_get(j, "single");
        const coli__json *specials = coli__json_get(j, "special_tokens");
        int seen_a = 0;
        if (!json_type_is(single, COLI_JSON_ARRAY))
            return tfail(t, err, COLI_EFORMAT,
                         "post_processor TemplateProcessing has no \"single\" array");
        for (size_t i = 0; i < single->len && st == COLI_OK; i++) {
            const coli__json *it = &single->items[i];
            const coli__json *sp = coli__json_get(it, "SpecialToken");
            const coli__json *sq = coli__json_get(it, "Sequence");
            if (sq) {
                const char *which = coli__json_get_str(sq, "id", "");
                if (strcmp(which, "A") != 0 || seen_a)
                    st = tfail(t, err, COLI_EUNSUPPORTED,
                               "post_processor TemplateProcessing: single template must hold "
                               "$A once");
                seen_a = 1;
            } else if (sp) {
                const char *name = coli__json_get_str(sp, "id", NULL);
                const coli__json *def = name ? coli__json_get(specials, name) : NULL;
                const coli__json *idl = coli__json_get(def, "ids");
                if (!json_type_is(idl, COLI_JSON_ARRAY)) {
                    st = tfail(t, err, COLI_EFORMAT,
                               "post_processor TemplateProcessing: special token \"%.40s\" is "
                               "not in special_tokens",
                               name ? name : "?");
                    break;
                }
                for (size_t k = 0; k < idl->len && st == COLI_OK; k++) {
                    const coli__json *v = &idl->items[k];
                    if (v->type != COLI_JSON_NUMBER || !v->is_int || v->integer < 0 ||
                        v->integer >= MAX_ID)
                        st = tfail(t, err, COLI_EFORMAT,
                                   "post_processor TemplateProcessing: bad id for \"%.40s\"", name);
                    else if (ids_push(seen_a ? &suf : &pre, (int32_t)v->integer))
                        st = oom(t, err);
                }
            } else {
                st = tfail(t, err, COLI_EFORMAT,
                           "post_processor TemplateProcessing: unknown template item");
            }
        }
        if (st == COLI_OK && !seen_a)
            st = tfail(t, err, COLI_EUNSUPPORTED,
                       "post_processor TemplateProcessing: single template has no $A");
    } else {
        return tfail(t, err, COLI_EUNSUPPORTED, "post_processor \"%.40s\" is not supported", type);
    }
    /* A later processor wraps what the earlier ones produced. */
    if (st == COLI_OK) {
        coli__ids np = {0};
        if (ids_add(&np, pre.v, pre.n) || ids_add(&np, t->post_prefix.v, t->post_prefix.n) ||
            ids_add(&t->post_suffix, suf.v, suf.n)) {
            coli__ids_free(&np);
            st = oom(t, err);
        } else {
            coli__ids_free(&t->post_prefix);
            t->post_prefix = np;
        }
    }
    coli__ids_free(&pre);
    coli__ids_free(&suf);
    return st;
}

/* Encoding emits the post-processor's ids as they are: each must be a
 * token, or callers would get ids that decoding and the model refuse. */
static coli_status check_post_ids(coli__tokenizer *t, coli__err *err)
{
    const coli__ids *l[2] = {&t->post_prefix, &t->post_suffix};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < l[k]->n; i++)
            if ((size_t)l[k]->v[i] >= t->n_ids)
                return tfail(t, err, COLI_EFORMAT,
                             "post_processor: special token id %ld is not in the vocab (%zu ids)",
                             (long)l[k]->v[i], t->n_ids);
    return COLI_OK;
}

/* ---- loading: decoder ----------------------------------------------- */

static coli_status load_decoder(coli__tokenizer *t, const coli__json *j, coli__err *err)
{
    const char *type;
    dec_step st;
    if (!j || j->type == COLI_JSON_NULL)
        return COLI_OK;
    if (j->type != COLI_JSON_OBJECT || !(type = coli__json_get_str(j, "type", NULL)))
        return tfail(t, err, COLI_EFORMAT, "decoder is not an object with a \"type\"");
    t->has_decoder = 1;
    memset(&st, 0, sizeof st);
    if (strcmp(type, "Sequence") == 0) {
        const coli__json *l = coli__json_get(j, "decoders");
        if (!json_type_is(l, COLI_JSON_ARRAY))
            return tfail(t, err, COLI_EFORMAT, "decoder Sequence has no \"decoders\" array");
        for (size_t i = 0; i < l->len; i++)
            COLI_TRY(load_decoder(t, &l->items[i], err));
        return COLI_OK;
    } else if (strcmp(type, "ByteLevel") == 0) {
        st.type = DEC_BYTELEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        st.type = DEC_BYTEFALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        st.type = DEC_FUSE;
    } else if (strcmp(type, "Metaspace") == 0) {
        st.type = DEC_METASPACE;
        st.ch = single_char(coli__json_get(j, "replacement"));
        if (!st.ch)
            return tfail(t, err, COLI_EFORMAT,
                         "decoder Metaspace \"replacement\" is not one character");
        st.scheme = metaspace_scheme(j);
    } else if (strcmp(type, "Strip") == 0) {
        int64_t a = coli__json_get_int(j, "start", 0), b = coli__json_get_int(j, "stop", 0);
        st.type = DEC_STRIP;
        st.ch = single_char(coli__json_get(j, "content"));
        if (!st.ch || a < 0 || b < 0 || a > 1000000 || b > 1000000)
            return tfail(t, err, COLI_EFORMAT, "decoder Strip needs one content character");
        st.start = (size_t)a;
        st.stop = (size_t)b;
    } else if (strcmp(type, "Replace") == 0) {
        const coli__json *rx, *pat = pattern_of(j, &rx);
        const coli__json *c = coli__json_get(j, "content");
        if (rx)
            return tfail(t, err, COLI_EUNSUPPORTED,
                         "decoder Replace with a Regex pattern (\"%.60s\") is not supported",
                         rx->str);
        if (!pat || !json_is_str(c) || pat->len == 0)
            return tfail(t, err, COLI_EFORMAT, "decoder Replace needs a pattern and a content");
        st.type = DEC_REPLACE;
        st.a = dupn(pat->str, pat->len);
        st.b = dupn(c->str, c->len);
        st.alen = pat->len;
        st.blen = c->len;
        if (!st.a || !st.b) {
            free(st.a);
            free(st.b);
            return oom(t, err);
        }
    } else {
        return tfail(t, err, COLI_EUNSUPPORTED, "decoder \"%.40s\" is not supported", type);
    }
    if (vec_grow(&t->dec, &t->cap_dec, t->n_dec + 1, sizeof *t->dec)) {
        free(st.a);
        free(st.b);
        return oom(t, err);
    }
    t->dec[t->n_dec++] = st;
    return COLI_OK;
}

/* ---- normalization --------------------------------------------------- */

/* Appends s with every occurrence of pat replaced by rep. */
static int replace_into(coli__buf *out, const char *s, size_t n, const char *pat, size_t plen,
                        const char *rep, size_t rlen)
{
    size_t i = 0, last = 0;
    while (plen <= n && i + plen <= n) {
        const char *f = memchr(s + i, pat[0], n - i - plen + 1);
        if (!f)
            break;
        i = (size_t)(f - s);
        if (memcmp(s + i, pat, plen) == 0) {
            if (buf_add(out, s + last, i - last) || buf_add(out, rep, rlen))
                return -1;
            i += plen;
            last = i;
        } else {
            i++;
        }
    }
    return buf_add(out, s + last, n - last);
}

static size_t ws_prefix_len(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len;
        coli__utf8_decode(s + i, n - i, &cp, &len);
        if (!(coli__uni_class(cp) & COLI_UNI_S))
            break;
        i += len;
    }
    return i;
}

/* Start of the trailing whitespace of the valid UTF-8 s[0..n). */
static size_t ws_suffix_start(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0) {
        size_t k = i - 1;
        uint32_t cp;
        size_t len;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
            k--;
        coli__utf8_decode(s + k, n - k, &cp, &len);
        if (!(coli__uni_class(cp) & COLI_UNI_S))
            break;
        i = k;
    }
    return i;
}

/* Runs the normalizer over s[0..n); the result is left in *res (tmp is
 * scratch; the two may be swapped). */
static coli_status normalize(const coli__tokenizer *t, const char *s, size_t n, coli__buf *res,
                             coli__buf *tmp, coli__err *err)
{
    buf_reset(res);
    if (buf_add(res, s, n))
        return oom(t, err);
    for (size_t k = 0; k < t->n_norm; k++) {
        const norm_step *ns = &t->norm[k];
        coli__buf sw;
        buf_reset(tmp);
        switch (ns->type) {
        case NORM_NFC: {
            char *o;
            size_t on;
            if (coli__uni_nfc(res->p, res->n, &o, &on))
                return oom(t, err);
            if (buf_add(tmp, o, on)) {
                free(o);
                return oom(t, err);
            }
            free(o);
            break;
        }
        case NORM_PREPEND:
            if (res->n && (buf_add(tmp, ns->a, ns->alen) || buf_add(tmp, res->p, res->n)))
                return oom(t, err);
            if (!res->n)
                continue;
            break;
        case NORM_REPLACE:
            if (replace_into(tmp, res->p, res->n, ns->a, ns->alen, ns->b, ns->blen))
                return oom(t, err);
            break;
        default: { /* NORM_STRIP */
            size_t a = ns->left ? ws_prefix_len(res->p, res->n) : 0;
            size_t b = ns->right ? ws_suffix_start(res->p, res->n) : res->n;
            if (b < a)
                b = a;
            if (buf_add(tmp, res->p + a, b - a))
                return oom(t, err);
            break;
        }
        }
        sw = *res;
        *res = *tmp;
        *tmp = sw;
    }
    return COLI_OK;
}

/* ---- added-token matching -------------------------------------------- */

/* Sort key of an added token in a matcher: first byte, then longest first,
 * then file order. */
typedef struct mkey {
    uint32_t first, len, idx;
} mkey;

static int mkey_cmp(const void *pa, const void *pb)
{
    const mkey *a = pa, *b = pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static coli_status build_matcher(coli__tokenizer *t, matcher *m, int norm, coli__err *err)
{
    size_t cnt = 0, k = 0;
    mkey *keys;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].normalized == (unsigned char)norm && (!norm || t->added[i].nlen))
            cnt++;
    if (!cnt)
        return COLI_OK;
    keys = malloc(cnt * sizeof *keys);
    m->idx = malloc(cnt * sizeof *m->idx);
    if (!keys || !m->idx) {
        free(keys);
        return oom(t, err);
    }
    for (size_t i = 0; i < t->n_added; i++) {
        const added_tok *a = &t->added[i];
        if (a->normalized != (unsigned char)norm || (norm && !a->nlen))
            continue;
        keys[k].first = (unsigned char)t->strs.p[norm ? a->noff : a->off];
        keys[k].len = norm ? a->nlen : a->len;
        keys[k].idx = (uint32_t)i;
        k++;
    }
    qsort(keys, cnt, sizeof *keys, mkey_cmp);
    k = 0;
    for (unsigned b = 0; b < 256; b++) {
        m->start[b] = (uint32_t)k;
        while (k < cnt && keys[k].first == b) {
            m->idx[k] = keys[k].idx;
            k++;
        }
    }
    m->start[256] = (uint32_t)k;
    free(keys);
    return COLI_OK;
}

/* single_word: is the character before pos / at pos a word character
 * (regex \w, as the Rust crate checks)? */
static int word_char_before(const char *s, size_t pos)
{
    size_t k;
    uint32_t cp;
    size_t len;
    if (pos == 0)
        return 0;
    k = pos - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    coli__utf8_decode(s + k, pos - k, &cp, &len);
    return (coli__uni_class(cp) & COLI_UNI_W) != 0;
}

static int word_char_at(const char *s, size_t n, size_t pos)
{
    uint32_t cp;
    size_t len;
    if (pos >= n)
        return 0;
    coli__utf8_decode(s + pos, n - pos, &cp, &len);
    return (coli__uni_class(cp) & COLI_UNI_W) != 0;
}

typedef struct seg {
    size_t off, len;
    int32_t id; /* added token id, or -1 for text */
} seg;

typedef struct segv {
    seg *v;
    size_t n, cap;
} segv;

static int segv_add(segv *s, size_t off, size_t len, int32_t id)
{
    if (vec_grow(&s->v, &s->cap, s->n + 1, sizeof *s->v))
        return -1;
    s->v[s->n].off = off;
    s->v[s->n].len = len;
    s->v[s->n].id = id;
    s->n++;
    return 0;
}

/* Splits s[0..n) on the added tokens of m: leftmost match, longest first;
 * single_word / lstrip / rstrip as the Rust crate applies them. */
static int split_added(const coli__tokenizer *t, const matcher *m, int norm, const char *s,
                       size_t n, segv *out)
{
    size_t pos = 0, i = 0;
    out->n = 0;
    while (i < n) {
        unsigned b = (unsigned char)s[i];
        const added_tok *hit = NULL;
        size_t mstart, mend;
        for (uint32_t k = m->start[b]; k < m->start[b + 1]; k++) {
            const added_tok *a = &t->added[m->idx[k]];
            const char *c = t->strs.p + (norm ? a->noff : a->off);
            size_t cl = norm ? a->nlen : a->len;
            if (cl <= n - i && memcmp(s + i, c, cl) == 0) {
                hit = a;
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        mstart = i;
        mend = i + (norm ? hit->nlen : hit->len);
        if (hit->single_word && (word_char_before(s, mstart) || word_char_at(s, n, mend))) {
            i = mend;
            continue;
        }
        /* lstrip takes whitespace back to the previous match at most: the
         * scan stops there too (from the start, runs of a whitespace token
         * would cost quadratic time). */
        if (hit->lstrip)
            mstart = pos + ws_suffix_start(s + pos, mstart - pos);
        if (hit->rstrip)
            mend += ws_prefix_len(s + mend, n - mend);
        if (pos < mstart && segv_add(out, pos, mstart - pos, -1))
            return -1;
        if (segv_add(out, mstart, mend - mstart, hit->id))
            return -1;
        pos = i = mend;
    }
    if (pos < n && segv_add(out, pos, n - pos, -1))
        return -1;
    return 0;
}

static coli_status build_added_matchers(coli__tokenizer *t, coli__err *err)
{
    coli__buf r = {0}, tmp = {0};
    coli_status st = COLI_OK;
    for (size_t i = 0; i < t->n_added && st == COLI_OK; i++) {
        added_tok *a = &t->added[i];
        if (!a->normalized)
            continue;
        st = normalize(t, t->strs.p + a->off, a->len, &r, &tmp, err);
        if (st == COLI_OK && r.n && strs_add(t, r.p, r.n, &a->noff))
            st = oom(t, err);
        a->nlen = (uint32_t)r.n;
    }
    coli__buf_free(&r);
    coli__buf_free(&tmp);
    if (st == COLI_OK)
        st = build_matcher(t, &t->m_raw, 0, err);
    if (st == COLI_OK)
        st = build_matcher(t, &t->m_norm, 1, err);
    t->has_raw = t->m_raw.idx != NULL;
    t->has_norm = t->m_norm.idx != NULL;
    return st;
}

/* ---- load / free ----------------------------------------------------- */

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
    bytemap_init(&t->bm);
    if (!(t->path = dupn(path, strlen(path)))) {
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
        st = tfail(t, err, COLI_EFORMAT, "the top level is not a JSON object");
        goto done;
    }
    set_id_limit(t, root);
    if ((st = load_model(t, root, err)) != COLI_OK)
        goto done;
    if ((st = load_added(t, root, err)) != COLI_OK)
        goto done;
    if ((st = build_ids(t, err)) != COLI_OK)
        goto done;
    if ((st = load_normalizer(t, coli__json_get(root, "normalizer"), err)) != COLI_OK)
        goto done;
    if ((st = build_added_matchers(t, err)) != COLI_OK)
        goto done;
    if ((st = load_pre(t, coli__json_get(root, "pre_tokenizer"), err)) != COLI_OK)
        goto done;
    if ((st = load_post(t, coli__json_get(root, "post_processor"), err)) != COLI_OK)
        goto done;
    if ((st = check_post_ids(t, err)) != COLI_OK)
        goto done;
    if ((st = load_decoder(t, coli__json_get(root, "decoder"), err)) != COLI_OK)
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
    return vocab_get(t, token, n);
}

int coli__tok_is_special(const coli__tokenizer *t, int32_t id)
{
    if (!t || id < 0 || (size_t)id >= t->n_ids)
        return 0;
    return (t->id_flags[id] & IDF_SPECIAL) != 0;
}

/* ---- byte-level alphabet -------------------------------------------- */

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
 * others map to U+0100 upwards in byte order. */
static uint32_t byte_to_char(unsigned b)
{
    unsigned n = 0;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return b;
    for (unsigned k = 0; k < b; k++)
        if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF)))
            n++;
    return 0x100 + n;
}

static int char_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp < 0x100 + 68) {
        unsigned n = cp - 0x100;
        for (unsigned k = 0; k < 256; k++) {
            if ((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))
                continue;
            if (n-- == 0)
                return (int)k;
        }
    }
    return -1;
}

static void bytemap_init(bytemap *m)
{
    for (unsigned b = 0; b < 256; b++)
        m->enc_len[b] = (unsigned char)coli__utf8_encode(byte_to_char(b), m->enc[b]);
    for (uint32_t c = 0; c < 0x144; c++)
        m->dec[c] = (short)char_to_byte(c);
}

/* ---- pre-tokenizer regexes ------------------------------------------ */

/* Scratch of one encode/decode call. */
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

static void scratch_free(scratch *sc)
{
    plist_free(&sc->pa);
    plist_free(&sc->pb);
    coli__buf_free(&sc->nbuf);
    coli__buf_free(&sc->ntmp);
    coli__buf_free(&sc->tmp);
    free(sc->raw.v);
    free(sc->norm.v);
    free(sc->cps);
    free(sc->cls);
    free(sc->offs);
    free(sc->rs);
    free(sc->syms);
    free(sc->heap);
}

/* Decodes s[0..n) into sc->cps / cls / offs (offs has n_cp + 1 entries). */
static int decode_cps(scratch *sc, const char *s, size_t n, size_t *n_cp)
{
    size_t i = 0, k = 0;
    if (n + 1 > sc->ccap) {
        size_t nc = (n + 1) * 2;
        uint32_t *c = realloc(sc->cps, nc * sizeof *c);
        if (c)
            sc->cps = c;
        unsigned char *l = realloc(sc->cls, nc);
        if (l)
            sc->cls = l;
        size_t *o = realloc(sc->offs, nc * sizeof *o);
        if (o)
            sc->offs = o;
        if (!c || !l || !o)
            return -1;
        sc->ccap = nc;
    }
    while (i < n) {
        size_t len;
        coli__utf8_decode(s + i, n - i, &sc->cps[k], &len);
        sc->cls[k] =
            (unsigned char)(coli__uni_class(sc->cps[k]) & (COLI_UNI_L | COLI_UNI_N | COLI_UNI_S));
        sc->offs[k] = i;
        i += len;
        k++;
    }
    sc->offs[k] = n;
    *n_cp = k;
    return 0;
}

#define CLS_LNS (COLI_UNI_L | COLI_UNI_N | COLI_UNI_S)
#define IS_L(i) (cls[i] & COLI_UNI_L)
#define IS_N(i) (cls[i] & COLI_UNI_N)
#define IS_S(i) (cls[i] & COLI_UNI_S)
#define IS_O(i) ((cls[i] & CLS_LNS) == 0)

static size_t run_of(const unsigned char *cls, size_t i, size_t n, unsigned bit)
{
    size_t j = i;
    if (bit == 0) {
        while (j < n && cls[j] == 0)
            j++;
    } else {
        while (j < n && (cls[j] & bit))
            j++;
    }
    return j - i;
}

/* ASCII lower case, with U+017F LONG S folding to 's' as (?i) does. */
static uint32_t fold(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c == 0x17F)
        return 's';
    return c;
}

/* Length (in code points, >= 1) of the match of the pattern at i; the
 * patterns match every character, so a match always starts at i. */
static size_t rx_match(int rx, const uint32_t *cp, const unsigned char *cls, size_t n, size_t i)
{
    uint32_t c = cp[i];
    size_t k, j;

    /* contractions: 's 't 're 've 'm 'll 'd (case-insensitive except GPT-2) */
    if (c == '\'' && i + 1 < n) {
        uint32_t d = rx == RX_GPT2 ? cp[i + 1] : fold(cp[i + 1]);
        if (d == 's' || d == 't' || d == 'm' || d == 'd')
            return 2;
        if (i + 2 < n) {
            uint32_t e = rx == RX_GPT2 ? cp[i + 2] : fold(cp[i + 2]);
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l'))
                return 3;
        }
    }

    if (rx == RX_GPT2) {
        /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ */
        static const unsigned bits[3] = {COLI_UNI_L, COLI_UNI_N, 0};
        for (int b = 0; b < 3; b++) {
            unsigned bit = bits[b];
            if (c == ' ' && i + 1 < n && (bit ? (cls[i + 1] & bit) != 0 : IS_O(i + 1)))
                return 1 + run_of(cls, i + 1, n, bit);
            if (bit ? (cls[i] & bit) != 0 : IS_O(i))
                return run_of(cls, i, n, bit);
        }
    } else {
        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (IS_L(i))
            return run_of(cls, i, n, COLI_UNI_L);
        if (c != '\r' && c != '\n' && !IS_N(i) && i + 1 < n && IS_L(i + 1))
            return 1 + run_of(cls, i + 1, n, COLI_UNI_L);
        /* \p{N} | \p{N}{1,3} */
        if (IS_N(i)) {
            if (rx == RX_QWEN2)
                return 1;
            k = run_of(cls, i, n, COLI_UNI_N);
            return k > 3 ? 3 : k;
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
        j = i;
        if (c == ' ' && i + 1 < n && IS_O(i + 1))
            j = i + 1;
        if (IS_O(j)) {
            j += run_of(cls, j, n, 0);
            while (j < n && (cp[j] == '\r' || cp[j] == '\n'))
                j++;
            return j - i;
        }
    }

    /* whitespace: c is \s here */
    k = run_of(cls, i, n, COLI_UNI_S);
    if (k == 0)
        return 1; /* not reached: every character has a class above */
    if (rx != RX_GPT2) {
        /* \s*[\r\n]+ : through the last line break of the run */
        for (j = i + k; j > i; j--)
            if (cp[j - 1] == '\r' || cp[j - 1] == '\n')
                return j - i;
    }
    /* \s+(?!\S) gives back the last space before a non-space; else \s+ */
    if (i + k == n)
        return k;
    return k >= 2 ? k - 1 : 1;
}

/* Splits s[0..n) with regex rx into sc->rs (byte spans covering all of s). */
static int rx_split(scratch *sc, int rx, const char *s, size_t n)
{
    size_t n_cp, i = 0;
    sc->rs_n = 0;
    if (decode_cps(sc, s, n, &n_cp))
        return -1;
    while (i < n_cp) {
        size_t k = rx_match(rx, sc->cps, sc->cls, n_cp, i);
        if (vec_grow(&sc->rs, &sc->rs_cap, sc->rs_n + 1, sizeof *sc->rs))
            return -1;
        sc->rs[sc->rs_n].off = sc->offs[i];
        sc->rs[sc->rs_n].len = sc->offs[i + k] - sc->offs[i];
        sc->rs[sc->rs_n].first = 0;
        sc->rs_n++;
        i += k;
    }
    return 0;
}

/* ---- pre-tokenization ------------------------------------------------ */

static int byte_level_append(const bytemap *bm, plist *out, const char *s, size_t n, int first)
{
    if (plist_open(out, first) || buf_reserve(&out->text, n * 2))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        memcpy(out->text.p + out->text.n, bm->enc[b], bm->enc_len[b]);
        out->text.n += bm->enc_len[b];
    }
    out->text.p[out->text.n] = '\0';
    plist_close(out);
    return 0;
}

static int pre_step_apply(const pre_step *ps, const bytemap *bm, scratch *sc, const char *s,
                          size_t n, int first, plist *out)
{
    switch (ps->type) {
    case PRE_BYTELEVEL: {
        const char *src = s;
        size_t sn = n;
        if (ps->prefix_space && (n == 0 || s[0] != ' ')) {
            buf_reset(&sc->tmp);
            if (buf_add(&sc->tmp, " ", 1) || buf_add(&sc->tmp, s, n))
                return -1;
            src = sc->tmp.p;
            sn = sc->tmp.n;
        }
        if (!ps->use_regex)
            return byte_level_append(bm, out, src, sn, first);
        if (rx_split(sc, RX_GPT2, src, sn))
            return -1;
        for (size_t k = 0; k < sc->rs_n; k++)
            if (byte_level_append(bm, out, src + sc->rs[k].off, sc->rs[k].len,
                                  first && sc->rs[k].off == 0))
                return -1;
        return 0;
    }
    case PRE_SPLIT:
        if (rx_split(sc, ps->rx, s, n))
            return -1;
        for (size_t k = 0; k < sc->rs_n; k++)
            if (plist_add(out, s + sc->rs[k].off, sc->rs[k].len, first && sc->rs[k].off == 0))
                return -1;
        return 0;
    default: { /* PRE_METASPACE */
        char rep[4];
        size_t rl = coli__utf8_encode(ps->repl, rep);
        coli__buf *b = &sc->tmp;
        /* spaces become the replacement, then it is prepended unless the
         * piece already starts with it */
        int starts = n > 0 && (s[0] == ' ' || (n >= rl && memcmp(s, rep, rl) == 0));
        size_t i, last;
        buf_reset(b);
        if ((ps->scheme == SCHEME_ALWAYS || (ps->scheme == SCHEME_FIRST && first)) && !starts &&
            buf_add(b, rep, rl))
            return -1;
        if (replace_into(b, s, n, " ", 1, rep, rl))
            return -1;
        if (!ps->split)
            return plist_add(out, b->p, b->n, first);
        /* a piece starts at every replacement character (MergedWithNext) */
        last = 0;
        for (i = 1; i + rl <= b->n; i++) {
            if (memcmp(b->p + i, rep, rl) == 0) {
                if (plist_add(out, b->p + last, i - last, first && last == 0))
                    return -1;
                last = i;
            }
        }
        return plist_add(out, b->p + last, b->n - last, first && last == 0);
    }
    }
}

/* ---- BPE ------------------------------------------------------------- */

struct sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len; /* bytes covered; 0 once merged into the left neighbour */
};

struct hent {
    uint32_t rank;
    uint32_t pos;
    int32_t id;
};

static int hent_less(const struct hent *a, const struct hent *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(scratch *sc, size_t *hn, struct hent e)
{
    size_t i;
    if (vec_grow(&sc->heap, &sc->hcap, *hn + 1, sizeof *sc->heap))
        return -1;
    i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hent_less(&e, &sc->heap[p]))
            break;
        sc->heap[i] = sc->heap[p];
        i = p;
    }
    sc->heap[i] = e;
    return 0;
}

static struct hent heap_pop(scratch *sc, size_t *hn)
{
    struct hent top = sc->heap[0], last = sc->heap[--(*hn)];
    size_t i = 0, n = *hn;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct hent *best = &last;
        if (l < n && hent_less(&sc->heap[l], best)) {
            m = l;
            best = &sc->heap[l];
        }
        if (r < n && hent_less(&sc->heap[r], best))
            m = r;
        if (m == i)
            break;
        sc->heap[i] = sc->heap[m];
        i = m;
    }
    if (n)
        sc->heap[i] = last;
    return top;
}

static int sym_add(scratch *sc, size_t *ns, int32_t id, uint32_t len)
{
    struct sym *s;
    if (vec_grow(&sc->syms, &sc->scap, *ns + 1, sizeof *sc->syms))
        return -1;
    s = &sc->syms[*ns];
    s->id = id;
    s->len = len;
    s->prev = (int32_t)*ns - 1;
    s->next = (int32_t)*ns + 1;
    (*ns)++;
    return 0;
}

/* Merges syms[0..ns) (lowest rank first, leftmost among equals, as the
 * Rust crate does: a heap of candidate pairs over the linked symbols, each
 * popped entry checked against the pair now at its place) and appends the
 * resulting ids. */
static coli_status bpe_merge(const coli__tokenizer *t, scratch *sc, size_t ns, coli__ids *out,
                             coli__err *err)
{
    size_t hn = 0, i;
    if (ns == 0)
        return COLI_OK;
    sc->syms[0].prev = -1;
    sc->syms[ns - 1].next = -1;
    for (i = 0; i + 1 < ns; i++) {
        const mslot *m = merge_get(t, sc->syms[i].id, sc->syms[i + 1].id);
        if (m) {
            struct hent e = {m->rank, (uint32_t)i, m->id};
            if (heap_push(sc, &hn, e))
                return oom(t, err);
        }
    }
    while (hn) {
        struct hent top = heap_pop(sc, &hn);
        struct sym *cur = &sc->syms[top.pos], *right;
        const mslot *m;
        if (cur->len == 0 || cur->next < 0)
            continue;
        right = &sc->syms[cur->next];
        m = merge_get(t, cur->id, right->id);
        if (!m || m->id != top.id)
            continue;
        cur->id = top.id;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0)
            sc->syms[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && (m = merge_get(t, sc->syms[cur->prev].id, cur->id))) {
            struct hent e = {m->rank, (uint32_t)cur->prev, m->id};
            if (heap_push(sc, &hn, e))
                return oom(t, err);
            cur = &sc->syms[top.pos];
        }
        if (cur->next >= 0 && (m = merge_get(t, cur->id, sc->syms[cur->next].id))) {
            struct hent e = {m->rank, top.pos, m->id};
            if (heap_push(sc, &hn, e))
                return oom(t, err);
        }
    }
    for (i = 0; i < ns; i++)
        if (sc->syms[i].len && ids_push(out, sc->syms[i].id))
            return oom(t, err);
    return COLI_OK;
}

/* The symbols of one word, merged piece by piece between the boundaries
 * that are no junction. */
typedef struct bpe_word {
    size_t ns;        /* symbols of the current piece */
    uint32_t last_ch; /* last character of the previous symbol */
} bpe_word;

static coli_status bpe_sym(const coli__tokenizer *t, scratch *sc, bpe_word *w, int32_t id,
                           uint32_t len, uint32_t first_ch, uint32_t last_ch, coli__ids *out,
                           coli__err *err)
{
    if (w->ns > 0 && !t->bpe_whole && !junction_known(t, w->last_ch, first_ch)) {
        COLI_TRY(bpe_merge(t, sc, w->ns, out, err));
        w->ns = 0;
    }
    if (sym_add(sc, &w->ns, id, len))
        return oom(t, err);
    w->last_ch = last_ch;
    return COLI_OK;
}

static coli_status bpe(const coli__tokenizer *t, scratch *sc, const char *s, size_t n,
                       coli__ids *out, coli__err *err)
{
    size_t i = 0;
    int32_t unk_len = -1; /* pending unknown bytes, -1 if none */
    bpe_word w = {0, 0};

    if (n == 0)
        return COLI_OK;
    if (n > INT32_MAX / 2)
        return tfail(t, err, COLI_ERANGE, "pre-token of %zu bytes is too long", n);
    if (t->ignore_merges) {
        int32_t id = vocab_get(t, s, n);
        if (id >= 0)
            return ids_push(out, id) ? oom(t, err) : COLI_OK;
    }
    while (i < n) {
        uint32_t cp;
        size_t clen;
        const char *q = s + i;
        size_t ql;
        int32_t id;
        coli__utf8_decode(s + i, n - i, &cp, &clen);
        ql = clen;
        if ((t->prefix_len && i > 0) || (t->suffix_len && i + clen == n)) {
            buf_reset(&sc->tmp);
            if ((i > 0 && buf_add(&sc->tmp, t->prefix, t->prefix_len)) ||
                buf_add(&sc->tmp, s + i, clen) ||
                (i + clen == n && buf_add(&sc->tmp, t->suffix, t->suffix_len)))
                return oom(t, err);
            q = sc->tmp.p;
            ql = sc->tmp.n;
        }
        id = vocab_get(t, q, ql);
        if (id >= 0) {
            if (unk_len >= 0) {
                COLI_TRY(bpe_sym(t, sc, &w, t->unk_id, (uint32_t)unk_len, t->unk_fc, t->unk_lc,
                                 out, err));
                unk_len = -1;
            }
            if (q == s + i)
                COLI_TRY(bpe_sym(t, sc, &w, id, (uint32_t)clen, cp, cp, out, err));
            else
                COLI_TRY(bpe_sym(t, sc, &w, id, (uint32_t)clen, first_cp(q, ql), last_cp(q, ql),
                                 out, err));
        } else {
            int done = 0;
            if (t->byte_fallback) {
                size_t k;
                for (k = 0; k < ql && t->byte_id[(unsigned char)q[k]] >= 0; k++)
                    ;
                if (k == ql) {
                    /* "<0xNN>" tokens; a pending unk stays pending, as in the Rust crate */
                    for (k = 0; k < ql; k++)
                        COLI_TRY(bpe_sym(t, sc, &w, t->byte_id[(unsigned char)q[k]], 1, '<', '>',
                                         out, err));
                    done = 1;
                }
            }
            if (!done && t->has_unk) {
                if (t->unk_id < 0)
                    return tfail(t, err, COLI_EFORMAT,
                                 "model.unk_token is not in the vocab but is needed");
                if (unk_len >= 0 && t->fuse_unk) {
                    unk_len += (int32_t)clen;
                } else {
                    if (unk_len >= 0)
                        COLI_TRY(bpe_sym(t, sc, &w, t->unk_id, (uint32_t)unk_len, t->unk_fc,
                                         t->unk_lc, out, err));
                    unk_len = (int32_t)clen;
                }
            }
        }
        i += clen;
    }
    if (unk_len >= 0)
        COLI_TRY(bpe_sym(t, sc, &w, t->unk_id, (uint32_t)unk_len, t->unk_fc, t->unk_lc, out, err));
    return bpe_merge(t, sc, w.ns, out, err);
}

/* ---- encode ---------------------------------------------------------- */

/* Pre-tokenizes and runs the model on a piece with no added tokens. */
static coli_status encode_text(const coli__tokenizer *t, scratch *sc, const char *s, size_t n,
                               int first, coli__ids *out, coli__err *err)
{
    plist *cur = &sc->pa, *next = &sc->pb;
    if (n == 0)
        return COLI_OK;
    if (t->n_pre == 0)
        return bpe(t, sc, s, n, out, err);
    plist_reset(cur);
    if (plist_add(cur, s, n, first))
        return oom(t, err);
    for (size_t k = 0; k < t->n_pre; k++) {
        plist *sw;
        plist_reset(next);
        for (size_t p = 0; p < cur->n; p++)
            if (pre_step_apply(&t->pre[k], &t->bm, sc, cur->text.p + cur->v[p].off, cur->v[p].len,
                               cur->v[p].first, next))
                return oom(t, err);
        sw = cur;
        cur = next;
        next = sw;
    }
    for (size_t p = 0; p < cur->n; p++)
        COLI_TRY(bpe(t, sc, cur->text.p + cur->v[p].off, cur->v[p].len, out, err));
    return COLI_OK;
}

/* A raw piece between non-normalized added tokens. */
static coli_status encode_segment(const coli__tokenizer *t, scratch *sc, const char *s, size_t n,
                                  int first, coli__ids *out, coli__err *err)
{
    const char *ns = s;
    size_t nn = n;
    if (t->n_norm) {
        COLI_TRY(normalize(t, s, n, &sc->nbuf, &sc->ntmp, err));
        ns = sc->nbuf.p;
        nn = sc->nbuf.n;
    }
    if (!t->has_norm)
        return encode_text(t, sc, ns, nn, first, out, err);
    if (split_added(t, &t->m_norm, 1, ns, nn, &sc->norm))
        return oom(t, err);
    for (size_t k = 0; k < sc->norm.n; k++) {
        const seg *g = &sc->norm.v[k];
        if (g->id >= 0) {
            if (ids_push(out, g->id))
                return oom(t, err);
        } else {
            COLI_TRY(encode_text(t, sc, ns + g->off, g->len, first && g->off == 0, out, err));
        }
    }
    return COLI_OK;
}

coli_status coli__tok_encode(const coli__tokenizer *t, const char *text, size_t len,
                             int add_special, coli__ids *out, coli__err *err)
{
    scratch sc;
    coli_status st = COLI_OK;
    size_t bad, start;

    if (!t || !out || (!text && len))
        return coli__fail(err, COLI_EINVAL, "tokenizer: encode needs a tokenizer, text and output");
    if (!text)
        text = "";
    bad = coli__utf8_check(text, len);
    if (bad != len)
        return tfail(t, err, COLI_EINVAL, "input text is not valid UTF-8 (byte %zu)", bad);
    memset(&sc, 0, sizeof sc);
    start = out->n;
    if (add_special && ids_add(out, t->post_prefix.v, t->post_prefix.n)) {
        st = oom(t, err);
        goto done;
    }
    if (!t->has_raw) {
        st = encode_segment(t, &sc, text, len, 1, out, err);
    } else if (split_added(t, &t->m_raw, 0, text, len, &sc.raw)) {
        st = oom(t, err);
    } else {
        for (size_t k = 0; k < sc.raw.n && st == COLI_OK; k++) {
            const seg *g = &sc.raw.v[k];
            if (g->id >= 0)
                st = ids_push(out, g->id) ? oom(t, err) : COLI_OK;
            else
                st = encode_segment(t, &sc, text + g->off, g->len, g->off == 0, out, err);
        }
    }
    if (st == COLI_OK && add_special && ids_add(out, t->post_suffix.v, t->post_suffix.n))
        st = oom(t, err);
done:
    scratch_free(&sc);
    if (st != COLI_OK)
        out->n = start; /* nothing appended on failure */
    return st;
}

/* ---- decode ---------------------------------------------------------- */

/* Appends bytes with each ill-formed sequence replaced by U+FFFD, like
 * Rust's String::from_utf8_lossy. */
static int add_lossy(coli__buf *b, const char *s, size_t n)
{
    size_t i = 0, last = 0;
    while (i < n) {
        uint32_t cp;
        size_t len;
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        if (coli__utf8_decode(s + i, n - i, &cp, &len)) {
            i += len;
            continue;
        }
        if (buf_add(b, s + last, i - last) || buf_add_cp(b, COLI_UNI_REPLACEMENT))
            return -1;
        i += len;
        last = i;
    }
    return buf_add(b, s + last, n - last);
}

/* "<0xNN>" -> NN, or -1. */
static int byte_token(const char *s, size_t n)
{
    int v = 0;
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static int dec_step_apply(const dec_step *d, const bytemap *bm, scratch *sc, const plist *in,
                          plist *out)
{
    size_t k;
    switch (d->type) {
    case DEC_BYTELEVEL: {
        buf_reset(&sc->tmp);
        for (k = 0; k < in->n; k++) {
            const char *s = in->text.p + in->v[k].off;
            size_t n = in->v[k].len, i = 0, start = sc->tmp.n;
            int ok = 1;
            while (i < n) {
                uint32_t cp;
                size_t len;
                coli__utf8_decode(s + i, n - i, &cp, &len);
                if (cp >= 0x144 || bm->dec[cp] < 0) {
                    ok = 0;
                    break;
                }
                if (buf_add(&sc->tmp, &(char){(char)bm->dec[cp]}, 1))
                    return -1;
                i += len;
            }
            if (!ok) { /* a character outside the alphabet: the token's own bytes */
                sc->tmp.n = start;
                if (buf_add(&sc->tmp, s, n))
                    return -1;
            }
        }
        if (plist_open(out, 0) || add_lossy(&out->text, sc->tmp.p ? sc->tmp.p : "", sc->tmp.n))
            return -1;
        plist_close_keep(out);
        return 0;
    }
    case DEC_FUSE:
        if (plist_open(out, 0))
            return -1;
        for (k = 0; k < in->n; k++)
            if (buf_add(&out->text, in->text.p + in->v[k].off, in->v[k].len))
                return -1;
        plist_close_keep(out);
        return 0;
    case DEC_BYTEFALLBACK: {
        size_t run = 0; /* pending byte tokens, collected in sc->tmp */
        buf_reset(&sc->tmp);
        for (k = 0; k <= in->n; k++) {
            int b = k < in->n ? byte_token(in->text.p + in->v[k].off, in->v[k].len) : -1;
            if (b >= 0) {
                char c = (char)b;
                if (buf_add(&sc->tmp, &c, 1))
                    return -1;
                run++;
                continue;
            }
            if (run) {
                if (coli__utf8_check(sc->tmp.p, sc->tmp.n) == sc->tmp.n) {
                    if (plist_add_keep(out, sc->tmp.p, sc->tmp.n))
                        return -1;
                } else {
                    for (size_t r = 0; r < run; r++)
                        if (plist_add_keep(out, "\xEF\xBF\xBD", 3))
                            return -1;
                }
                run = 0;
                buf_reset(&sc->tmp);
            }
            if (k < in->n && plist_add_keep(out, in->text.p + in->v[k].off, in->v[k].len))
                return -1;
        }
        return 0;
    }
    case DEC_REPLACE:
        for (k = 0; k < in->n; k++) {
            if (plist_open(out, 0) || replace_into(&out->text, in->text.p + in->v[k].off,
                                                   in->v[k].len, d->a, d->alen, d->b, d->blen))
                return -1;
            plist_close_keep(out);
        }
        return 0;
    case DEC_STRIP:
        for (k = 0; k < in->n; k++) {
            const char *s = in->text.p + in->v[k].off;
            size_t n = in->v[k].len, a = 0, b = n, i;
            size_t n_cp;
            if (decode_cps(sc, s, n, &n_cp))
                return -1;
            for (i = 0; i < d->start && i < n_cp && sc->cps[i] == d->ch; i++)
                a = sc->offs[i + 1];
            for (i = 0; i < d->stop && i < n_cp && sc->cps[n_cp - 1 - i] == d->ch; i++)
                b = sc->offs[n_cp - 1 - i];
            if (b < a)
                b = a;
            if (plist_add_keep(out, s + a, b - a))
                return -1;
        }
        return 0;
    default: { /* DEC_METASPACE: replacement -> ' ', dropped in the first token */
        char rep[4];
        size_t rl = coli__utf8_encode(d->ch, rep);
        for (k = 0; k < in->n; k++) {
            int drop = (k == 0 && d->scheme != SCHEME_NEVER);
            if (plist_open(out, 0) || replace_into(&out->text, in->text.p + in->v[k].off,
                                                   in->v[k].len, rep, rl, drop ? "" : " ",
                                                   drop ? 0 : 1))
                return -1;
            plist_close_keep(out);
        }
        return 0;
    }
    }
}

coli_status coli__tok_decode(const coli__tokenizer *t, const int32_t *ids, size_t n,
                             int skip_special, coli__buf *out, coli__err *err)
{
    scratch sc;
    plist *cur, *next;
    coli_status st = COLI_OK;
    size_t start;

    if (!t || !out || (!ids && n))
        return coli__fail(err, COLI_EINVAL, "tokenizer: decode needs a tokenizer, ids and output");
    for (size_t k = 0; k < n; k++)
        if (ids[k] < 0 || (size_t)ids[k] >= t->n_ids)
            return tfail(t, err, COLI_EINVAL, "token id %ld (at %zu) is out of range [0, %zu)",
                         (long)ids[k], k, t->n_ids);
    memset(&sc, 0, sizeof sc);
    start = out->n;
    cur = &sc.pa;
    next = &sc.pb;
    for (size_t k = 0; k < n; k++) {
        int32_t id = ids[k];
        if (t->id_len[id] == NO_STR)
            continue;
        if (skip_special && (t->id_flags[id] & IDF_SPECIAL))
            continue;
        if (plist_add_keep(cur, t->strs.p + t->id_off[id], t->id_len[id])) {
            st = oom(t, err);
            goto done;
        }
    }
    for (size_t k = 0; k < t->n_dec; k++) {
        plist *sw;
        plist_reset(next);
        if (dec_step_apply(&t->dec[k], &t->bm, &sc, cur, next)) {
            st = oom(t, err);
            goto done;
        }
        sw = cur;
        cur = next;
        next = sw;
    }
    if (buf_add(out, "", 0)) {
        st = oom(t, err);
        goto done;
    }
    for (size_t k = 0; k < cur->n; k++) {
        if ((k && !t->has_decoder && buf_add(out, " ", 1)) ||
            buf_add(out, cur->text.p + cur->v[k].off, cur->v[k].len)) {
            st = oom(t, err);
            goto done;
        }
    }
done:
    scratch_free(&sc);
    if (st != COLI_OK && out->p) {
        out->n = start; /* nothing appended on failure */
        out->p[start] = '\0';
    }
    return st;
}

int coli__tok_is_byte(const coli__tokenizer *t, int32_t id)
{
    if (!t || !t->byte_fallback || id < 0 || (size_t)id >= t->n_ids || t->id_len[id] == NO_STR)
        return 0;
    return byte_token(t->strs.p + t->id_off[id], t->id_len[id]) >= 0;
}
