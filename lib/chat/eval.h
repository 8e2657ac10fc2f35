/* eval.h - runs a template's tree over its variables. */
#ifndef COLI_CHAT_EVAL_H
#define COLI_CHAT_EVAL_H

#include "chat/builtins.h"

/* Checks what the parser cannot: the filters and tests named exist.
 * COLI_EFORMAT with "line:col"-less "line N: ..." otherwise. */
coli_status coli__tcheck(coli__trt *rt, const coli__tnode *root);
/* Renders root with vars (a DICT) as the template's variables; the output
 * is a string in rt's arena. */
coli_status coli__teval(coli__trt *rt, const coli__tnode *root, const coli__tv *vars, coli__tv *out);

#endif
