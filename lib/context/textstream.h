/* textstream.h - the text of generated tokens as it becomes final
 * (internal): coli_generate's on_token and the public coli_text_stream
 * share it, so the two report the same text. */
#ifndef COLI_TEXTSTREAM_H
#define COLI_TEXTSTREAM_H

#include "io/tokenizer.h"

/* Prompt tokens the decoders see before the generated ones. */
#define COLI__STREAM_CTX 4

typedef struct coli__textstream {
    const coli__tokenizer *tk;
    coli__ids ids;   /* up to COLI__STREAM_CTX prompt tokens, then the generated ones */
    size_t base;     /* ids[base..] hold text not yet wholly reported */
    size_t done;     /* bytes of that text already reported */
    coli__buf prev, full;
    const char *const *stop; /* borrowed */
    size_t n_stop;
    coli__buf held;  /* decoded text not yet reported: it may begin a stop string */
} coli__textstream;

/* Starts a stream; context: the last of its n ids give the decoders their
 * left context. stop (n_stop strings, none empty) is borrowed. */
coli_status coli__ts_init(coli__textstream *t, const coli__tokenizer *tk, const int32_t *context, size_t n,
                          const char *const *stop, size_t n_stop, coli__err *err);
/* Adds tok (tok < 0: none, only settles what is held) and gives the text
 * that may be reported now in *text, *len (valid until coli__ts_consume);
 * final: nothing follows, everything left is given. *hit: a stop string
 * was reached (the text before it is given). */
coli_status coli__ts_push(coli__textstream *t, int32_t tok, int final, const char **text, size_t *len, int *hit,
                          coli__err *err);
/* Drops the n bytes just given (after the caller has used them). */
void coli__ts_consume(coli__textstream *t, size_t n);
void coli__ts_free(coli__textstream *t);

#endif
