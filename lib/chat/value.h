/* value.h - the values a chat template computes with, and the run's state.
 *
 * Every value of one render lives in one arena that the render frees at
 * the end, so no value is counted or freed alone and an error anywhere
 * leaves nothing behind. Values are small structs passed by copy; lists,
 * dicts and namespaces are pointers into the arena. Lists and dicts are
 * never changed once built (the sandbox is immutable); namespaces are.
 * Strings are UTF-8 byte ranges, NUL-terminated when made here. */
#ifndef COLI_CHAT_VALUE_H
#define COLI_CHAT_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Bounds of one render (docs/templates.md). */
#define COLI__TPL_OUT_MAX ((size_t)16 << 20)   /* bytes of output, and of any one string */
#define COLI__TPL_MEM_MAX ((size_t)256 << 20)  /* bytes of values */
#define COLI__TPL_STEPS_MAX 10000000ull        /* loop iterations and calls */
#define COLI__TPL_DEPTH_MAX 200                /* macro calls in progress; value nesting /2 */

typedef enum coli__tv_type {
    COLI__TV_UNDEF,
    COLI__TV_NONE,
    COLI__TV_BOOL,
    COLI__TV_INT,
    COLI__TV_FLOAT,
    COLI__TV_STR,
    COLI__TV_LIST,  /* also tuples: flag tuple */
    COLI__TV_DICT,
    COLI__TV_NS,    /* namespace(): a dict whose members may be set */
    COLI__TV_MACRO, /* p: the evaluator's macro */
    COLI__TV_FUNC,  /* i: a global function (builtins.h) */
    COLI__TV_METHOD,/* a method bound to obj: name s */
    COLI__TV_LOOP   /* p: the evaluator's loop */
} coli__tv_type;

typedef struct coli__tlist coli__tlist;
typedef struct coli__tdict coli__tdict;
typedef struct coli__tv coli__tv;

struct coli__tv {
    uint8_t t;     /* coli__tv_type */
    uint8_t tuple; /* LIST written as a tuple */
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *p; /* STR: the bytes; UNDEF: what was missing (or NULL); METHOD: name */
            size_t n;
            const coli__tv *obj; /* METHOD: the object */
        } s;
        coli__tlist *l;
        coli__tdict *d; /* DICT and NS */
        const void *p;
    };
};

struct coli__tlist {
    size_t n, cap;
    coli__tv *v;
};

struct coli__tdict {
    size_t n, cap;
    coli__tv *k, *v; /* in insertion order */
};

/* The state of one render: arena, bounds used, and the first error. */
typedef struct coli__tchunk coli__tchunk;
typedef struct coli__trt {
    coli__tchunk *chunks;
    char *cur;
    size_t left;
    size_t mem;
    uint64_t steps;
    int depth;
    int line; /* of the node being run, for messages */
    coli_status st;
    char msg[COLI_ERRMSG_MAX];
} coli__trt;

/* Records the first error (with the current line) and returns st. */
coli_status coli__trt_fail(coli__trt *rt, coli_status st, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Arena memory, zeroed; NULL after recording COLI_ERANGE or COLI_ENOMEM. */
void *coli__trt_alloc(coli__trt *rt, size_t n);
void coli__trt_free(coli__trt *rt);
/* Counts one step (loop iteration or call) against the bound. */
coli_status coli__trt_step(coli__trt *rt);
/* Counts a scan of n bytes or items that allocates nothing (the memory
 * bound covers the rest), a step per 256, so that time stays bounded. */
coli_status coli__trt_work(coli__trt *rt, size_t n);

/* A growing string in the arena. */
typedef struct coli__tsb {
    char *p;
    size_t n, cap;
} coli__tsb;
coli_status coli__tsb_put(coli__trt *rt, coli__tsb *b, const char *s, size_t n);
coli_status coli__tsb_putc(coli__trt *rt, coli__tsb *b, char c);
coli__tv coli__tsb_value(coli__tsb *b);

/* Constructors. */
coli__tv coli__tv_undef(const char *what); /* what NUL-terminated, or NULL */
coli__tv coli__tv_undefn(const char *what, size_t n);
coli__tv coli__tv_none(void);
coli__tv coli__tv_bool(int b);
coli__tv coli__tv_int(int64_t i);
coli__tv coli__tv_float(double f);
coli__tv coli__tv_strn(const char *p, size_t n); /* borrows p */
coli_status coli__tv_strdup(coli__trt *rt, const char *p, size_t n, coli__tv *out);
coli_status coli__tv_list_new(coli__trt *rt, size_t cap, coli__tv *out);
coli_status coli__tv_dict_new(coli__trt *rt, size_t cap, coli__tv *out);
coli_status coli__tlist_push(coli__trt *rt, coli__tlist *l, coli__tv v);
/* Sets key to v (replacing an equal key in place). */
coli_status coli__tdict_set(coli__trt *rt, coli__tdict *d, coli__tv key, coli__tv v);
/* The value of key, or NULL. */
coli__tv *coli__tdict_get(const coli__tdict *d, coli__tv key);
coli__tv *coli__tdict_gets(const coli__tdict *d, const char *key, size_t n);

int coli__tv_is_str(const coli__tv *v);
int coli__tv_is_num(const coli__tv *v); /* bool, int or float */
double coli__tv_num(const coli__tv *v);
/* Python truthiness. */
int coli__tv_truthy(const coli__tv *v);
/* Python's name of the type, for messages. */
const char *coli__tv_type_name(const coli__tv *v);

/* Python ==. Fails only on values nested too deep. */
coli_status coli__tv_eq(coli__trt *rt, const coli__tv *a, const coli__tv *b, int *eq);
/* Python's ordering: *cmp < 0, 0, > 0; TypeError-like failure when the
 * types do not order. */
coli_status coli__tv_cmp(coli__trt *rt, const coli__tv *a, const coli__tv *b, int *cmp);

/* Python str() and repr() appended to b. */
coli_status coli__tv_str(coli__trt *rt, coli__tsb *b, const coli__tv *v);
coli_status coli__tv_repr(coli__trt *rt, coli__tsb *b, const coli__tv *v, int depth);
/* str() as a value (strings are returned as they are). */
coli_status coli__tv_to_str(coli__trt *rt, const coli__tv *v, coli__tv *out);
/* Python repr of a float into buf (at least 32 bytes); its length. */
size_t coli__tv_fmt_float(double f, char *buf);

/* UTF-8: the length in bytes of the character starting with byte c (1 for
 * a stray byte), and the number of characters of s. */
size_t coli__utf8_len(unsigned char c);
size_t coli__utf8_count(const char *s, size_t n);
/* Whether s[i..n) starts with a character Python's str.isspace accepts;
 * *len gets its length in bytes. */
int coli__tspace_at(const char *s, size_t n, size_t i, size_t *len);
/* The same for the character that ends at s[end] (exclusive), from start. */
int coli__tspace_before(const char *s, size_t start, size_t end, size_t *len);

#endif
