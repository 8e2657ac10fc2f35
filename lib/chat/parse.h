/* parse.h - the syntax tree of a template. */
#ifndef COLI_CHAT_PARSE_H
#define COLI_CHAT_PARSE_H

#include "chat/lex.h"

/* Nesting of blocks and expressions the parser accepts. */
#define COLI__TPL_PARSE_DEPTH 256

typedef enum coli__tnode_kind {
    /* expressions */
    COLI__N_CONST,   /* val */
    COLI__N_NAME,    /* name */
    COLI__N_LIST,    /* kids; tuple flag in op */
    COLI__N_DICT,    /* kids: keys, kids2: values */
    COLI__N_ATTR,    /* a.name */
    COLI__N_ITEM,    /* a[b] */
    COLI__N_SLICE,   /* a[b:c:d], any of b c d NULL */
    COLI__N_CALL,    /* a(kids, names=kids2) */
    COLI__N_FILTER,  /* a | name(kids, names=kids2) */
    COLI__N_TEST,    /* a is [not: op] name(kids) */
    COLI__N_BINOP,   /* a op b */
    COLI__N_UNARY,   /* op a */
    COLI__N_AND,
    COLI__N_OR,
    COLI__N_NOT,
    COLI__N_COND,    /* b if a else c (c may be NULL) */
    COLI__N_COMPARE, /* kids[0] ops[0] kids[1] ops[1] kids[2] ... */
    COLI__N_CONCAT,  /* kids joined by ~ */
    /* statements */
    COLI__N_BODY,    /* kids */
    COLI__N_TEXT,    /* val */
    COLI__N_OUTPUT,  /* {{ a }} */
    COLI__N_IF,      /* if a: kids else kids2 */
    COLI__N_FOR,     /* for names in a if b: kids else kids2 */
    COLI__N_SET,     /* set names = a, or set names: kids (block) */
    COLI__N_SET_ATTR,/* set name.attr = a: attr in val */
    COLI__N_MACRO,   /* macro name(names = kids2 defaults): kids */
    COLI__N_BREAK,
    COLI__N_CONTINUE
} coli__tnode_kind;

/* Operators of BINOP, UNARY and COMPARE. */
enum {
    COLI__OP_ADD, COLI__OP_SUB, COLI__OP_MUL, COLI__OP_DIV, COLI__OP_FLOORDIV, COLI__OP_MOD, COLI__OP_POW,
    COLI__OP_NEG, COLI__OP_POS,
    COLI__OP_EQ, COLI__OP_NE, COLI__OP_LT, COLI__OP_LE, COLI__OP_GT, COLI__OP_GE, COLI__OP_IN, COLI__OP_NOTIN
};

typedef struct coli__tnode coli__tnode;
struct coli__tnode {
    uint8_t kind;
    uint8_t op;
    uint8_t flag; /* FOR/SET: targets form a tuple; SET: block form */
    int line;
    const char *name;
    size_t name_n;
    coli__tv val;
    coli__tnode *a, *b, *c, *d;
    coli__tnode **kids, **kids2;
    size_t n, n2;
    const char **names; /* CALL/FILTER keyword names (n2), FOR/SET targets, MACRO params (nn) */
    size_t nn;
    uint8_t *ops;       /* COMPARE */
};

/* The tree of a template, in rt's arena. Errors: COLI_EFORMAT
 * ("line:col: reason"), COLI_ERANGE when nested too deep. */
coli_status coli__tparse(coli__trt *rt, const char *src, size_t len, coli__tnode **root);

#endif
