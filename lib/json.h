/* json.h - a small strict JSON reader (RFC 8259) producing a read-only tree.
 *
 * Whole documents are parsed into one arena owned by coli__json_doc, so one
 * free releases everything. Strings are unescaped to UTF-8 and NUL-terminated
 * (they may also contain NUL; use len). Nesting depth is limited to 256. */
#ifndef COLI_JSON_H
#define COLI_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "error.h"

typedef enum coli__json_type {
    COLI_JSON_NULL,
    COLI_JSON_BOOL,
    COLI_JSON_NUMBER,
    COLI_JSON_STRING,
    COLI_JSON_ARRAY,
    COLI_JSON_OBJECT
} coli__json_type;

typedef struct coli__json coli__json;
struct coli__json {
    coli__json_type type;
    int boolean;          /* BOOL */
    double number;        /* NUMBER */
    int is_int;           /* NUMBER written without fraction/exponent and fits int64 */
    int64_t integer;      /* NUMBER when is_int */
    const char *str;      /* STRING (NUL-terminated), or NULL */
    size_t len;           /* STRING length in bytes; ARRAY/OBJECT: number of children */
    coli__json *items;    /* ARRAY elements / OBJECT values, len of them */
    const char **keys;    /* OBJECT keys, len of them (NUL-terminated) */
    size_t *key_lens;     /* OBJECT key lengths */
};

typedef struct coli__json_doc coli__json_doc;

/* Parses text[0..len). what names the source (a file path) in error messages,
 * which give line and column. */
coli_status coli__json_parse(const char *text, size_t len, const char *what,
                             coli__json_doc **out, coli__err *err);
/* Reads and parses a whole file. COLI_ENOENT if missing. */
coli_status coli__json_parse_file(const char *path, coli__json_doc **out, coli__err *err);
void coli__json_free(coli__json_doc *doc);
const coli__json *coli__json_root(const coli__json_doc *doc);

/* Member of an object by key, or NULL (also NULL if obj is not an object). */
const coli__json *coli__json_get(const coli__json *obj, const char *key);
/* Convenience accessors: return def when missing or of another type. */
int64_t coli__json_get_int(const coli__json *obj, const char *key, int64_t def);
double coli__json_get_num(const coli__json *obj, const char *key, double def);
int coli__json_get_bool(const coli__json *obj, const char *key, int def);
const char *coli__json_get_str(const coli__json *obj, const char *key, const char *def);

#endif
