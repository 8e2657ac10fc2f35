/* tojson.h - the tojson filter: Python's json.dumps, as transformers calls
 * it (ensure_ascii=False, separators ", " and ": ", insertion order). */
#ifndef COLI_CHAT_TOJSON_H
#define COLI_CHAT_TOJSON_H

#include "chat/value.h"

typedef struct coli__tjson {
    int ensure_ascii;
    int sort_keys;
    int indent_on;      /* indent given and not None */
    coli__tv indent;    /* an int (spaces) or a string */
    const char *item_sep, *key_sep;
    size_t item_n, key_n;
} coli__tjson;

/* The defaults of json.dumps; indent and separators per the options set. */
void coli__tjson_defaults(coli__tjson *o);
/* After indent is set: the separators json.dumps picks for it. */
void coli__tjson_indent_seps(coli__tjson *o);
coli_status coli__tojson(coli__trt *rt, coli__tsb *b, const coli__tv *v, const coli__tjson *o);

#endif
