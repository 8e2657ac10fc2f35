/* lex.h - splits a template into text and the tokens of its tags, applying
 * Jinja's whitespace rules as transformers configures them: trim_blocks,
 * lstrip_blocks, "-" and "+" markers, newlines normalized and one trailing
 * newline dropped. */
#ifndef COLI_CHAT_LEX_H
#define COLI_CHAT_LEX_H

#include "chat/value.h"

typedef enum coli__ttok_kind {
    COLI__TK_TEXT,
    COLI__TK_VAR_BEGIN,
    COLI__TK_VAR_END,
    COLI__TK_BLOCK_BEGIN,
    COLI__TK_BLOCK_END,
    COLI__TK_NAME,
    COLI__TK_STRING, /* p: the unescaped bytes, NUL-terminated */
    COLI__TK_INT,
    COLI__TK_FLOAT,
    COLI__TK_OP,     /* p, n: the operator */
    COLI__TK_EOF
} coli__ttok_kind;

typedef struct coli__ttok {
    uint8_t kind;
    const char *p;
    size_t n;
    int64_t i;
    double f;
    int line, col;
} coli__ttok;

/* Tokens of src into the arena of rt (*toks, *n, ending with EOF). Errors
 * (COLI_EFORMAT) are "line:col: reason" in rt->msg. */
coli_status coli__tlex(coli__trt *rt, const char *src, size_t len, coli__ttok **toks, size_t *n);

#endif
