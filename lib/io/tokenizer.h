/* tokenizer.h - Hugging Face tokenizer.json, BPE models (internal).
 *
 * Supported: model.type "BPE" with
 *  - byte-level BPE (pre_tokenizer ByteLevel, alone or after a Split whose
 *    regex is one of the known GPT-2 / Qwen2 / Llama-3 patterns), decoder
 *    ByteLevel;
 *  - SentencePiece-style BPE (normalizer Prepend/Replace or pre_tokenizer
 *    Metaspace; byte_fallback <0xNN> tokens), decoders Replace, ByteFallback,
 *    Fuse, Strip, Metaspace;
 *  - added_tokens (special or not) matched before the model runs;
 *  - normalizers NFC, Prepend, Replace, Sequence;
 *  - post_processor TemplateProcessing / ByteLevel / RobertaProcessing
 *    (special tokens added when add_special is set).
 * Anything else is refused with a message naming the component. */
#ifndef COLI_TOKENIZER_H
#define COLI_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"

typedef struct coli__tokenizer coli__tokenizer;

/* A growable array of ids. */
typedef struct coli__ids {
    int32_t *v;
    size_t n, cap;
} coli__ids;

/* A growable byte buffer (always NUL-terminated when cap > 0). */
typedef struct coli__buf {
    char *p;
    size_t n, cap;
} coli__buf;

void coli__ids_free(coli__ids *ids);
void coli__buf_free(coli__buf *b);

coli_status coli__tok_load(const char *path, coli__tokenizer **out, coli__err *err);
void coli__tok_free(coli__tokenizer *tok);

/* Appends the ids of text to out. */
coli_status coli__tok_encode(const coli__tokenizer *tok, const char *text, size_t len,
                             int add_special, coli__ids *out, coli__err *err);
/* Appends the decoded text of ids to out. Ids out of range are an error. */
coli_status coli__tok_decode(const coli__tokenizer *tok, const int32_t *ids, size_t n,
                             int skip_special, coli__buf *out, coli__err *err);

/* Number of ids (model vocab plus added tokens; max id + 1). */
size_t coli__tok_vocab_size(const coli__tokenizer *tok);
/* Id of a token by its exact string (vocab or added token), or -1. */
int32_t coli__tok_find(const coli__tokenizer *tok, const char *token);
/* 1 if id is an added token marked special. */
int coli__tok_is_special(const coli__tokenizer *tok, int32_t id);
/* 1 if id is a byte-fallback token (<0xNN>): its text depends on the
 * tokens that follow it. */
int coli__tok_is_byte(const coli__tokenizer *tok, int32_t id);

#endif
