/* tok_vocab.c - the tokenizer's tables: the model vocab (string -> id), the
 * merges ((left, right) -> rank and merged id), the junctions of the merges
 * and the store that holds every token string. Open addressing; loading
 * fills them, encoding reads them. */
#include "io/tok_impl.h"

#include <string.h>

#include "io/unicode.h"

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

/* Model vocab: string -> id, or -1. */
int32_t coli__tok_vocab_get(const coli__tokenizer *t, const char *s, size_t n)
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
void coli__tok_vocab_insert(coli__tokenizer *t, size_t k)
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

const mslot *coli__tok_merge_get(const coli__tokenizer *t, int32_t a, int32_t b)
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
void coli__tok_merge_put(coli__tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t id)
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
uint32_t coli__tok_first_cp(const char *s, size_t n)
{
    uint32_t cp;
    size_t len;
    coli__utf8_decode(s, n, &cp, &len);
    return cp;
}

uint32_t coli__tok_last_cp(const char *s, size_t n)
{
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    return coli__tok_first_cp(s + k, n - k);
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

int coli__tok_junction_known(const coli__tokenizer *t, uint32_t last, uint32_t first)
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

void coli__tok_junction_put(coli__tokenizer *t, uint32_t last, uint32_t first)
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
int coli__tok_strs_add(coli__tokenizer *t, const char *s, size_t n, uint32_t *off)
{
    if (t->strs.n + n + 1 >= NO_STR)
        return -1;
    *off = (uint32_t)t->strs.n;
    if (coli__buf_add(&t->strs, s, n) || coli__buf_add(&t->strs, "", 1))
        return -1;
    return 0;
}
