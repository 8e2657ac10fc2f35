/* json.h - a small strict JSON reader (RFC 8259) producing a read-only tree.
 *
 * Whole documents are parsed into one block owned by coli__json_doc, so one
 * free releases everything. Strings are unescaped to UTF-8 and NUL-terminated
 * (they may also contain NUL; use len). Nesting depth is limited to 256.
 *
 * Memory is bounded by the input: a node is 16 bytes, stored once, and a
 * parse that would need more than coli__json_mem_limit(len) bytes is refused
 * before the tree is allocated (only documents made mostly of one-digit
 * numbers get near it: real ones need 1-5 bytes per input byte). Files are
 * read only up to a size limit that the caller chooses per kind of file. */
#ifndef COLI_JSON_H
#define COLI_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "base/error.h"

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
    uint8_t type;     /* a coli__json_type */
    uint8_t boolean;  /* BOOL */
    uint8_t is_int;   /* NUMBER written without fraction/exponent that fits int64 */
    uint8_t neg_zero; /* NUMBER "-0": is_int with integer 0, but the number is -0.0 */
    uint32_t len;     /* STRING: bytes; ARRAY/OBJECT: number of members */
    union {
        int64_t integer;   /* NUMBER when is_int */
        double dbl;        /* NUMBER when !is_int (coli__json_num reads both) */
        const char *str;   /* STRING, NUL-terminated */
        coli__json *items; /* ARRAY: len elements; OBJECT: len values, then len keys */
    };
};

typedef struct coli__json_doc coli__json_doc;

/* Limits on the files coli__json_parse_file_max reads, by what they hold. */
#define COLI__JSON_CONFIG_MAX ((size_t)8 << 20)  /* config.json and the like */
#define COLI__JSON_INDEX_MAX ((size_t)64 << 20)  /* model.safetensors.index.json */
#define COLI__JSON_TOKENIZER_MAX ((size_t)256 << 20) /* tokenizer.json */

/* The parse memory bound: bytes per input byte, plus a constant. */
#define COLI__JSON_MEM_PER_BYTE 6
#define COLI__JSON_MEM_SLACK ((size_t)1 << 20)

/* Parses text[0..len). what names the source (a file path) in error messages,
 * which give line and column. */
coli_status coli__json_parse(const char *text, size_t len, const char *what,
                             coli__json_doc **out, coli__err *err);
/* Reads and parses a whole file of at most max_bytes bytes (a larger one is
 * refused with COLI_EFORMAT naming the file and the limit). COLI_ENOENT if
 * missing. */
coli_status coli__json_parse_file_max(const char *path, size_t max_bytes, coli__json_doc **out,
                                      coli__err *err);
/* The same with the limit for configuration files, COLI__JSON_CONFIG_MAX. */
coli_status coli__json_parse_file(const char *path, coli__json_doc **out, coli__err *err);
void coli__json_free(coli__json_doc *doc);
const coli__json *coli__json_root(const coli__json_doc *doc);

/* The most memory a parse of len bytes may use. */
size_t coli__json_mem_limit(size_t len);
/* The peak memory the parse of doc allocated (tree and scratch), in bytes. */
size_t coli__json_mem_used(const coli__json_doc *doc);

/* The number of a NUMBER node (an integer converted to double). */
double coli__json_num(const coli__json *v);
/* Key i of an object (a STRING node); its value is &obj->items[i]. */
const coli__json *coli__json_key(const coli__json *obj, size_t i);

/* Member of an object by key, or NULL (also NULL if obj is not an object). */
const coli__json *coli__json_get(const coli__json *obj, const char *key);
/* Convenience accessors: return def when missing or of another type. */
int64_t coli__json_get_int(const coli__json *obj, const char *key, int64_t def);
double coli__json_get_num(const coli__json *obj, const char *key, double def);
int coli__json_get_bool(const coli__json *obj, const char *key, int def);
const char *coli__json_get_str(const coli__json *obj, const char *key, const char *def);

#endif
