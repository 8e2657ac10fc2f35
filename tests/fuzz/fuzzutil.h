/* fuzzutil.h - helpers shared by the libFuzzer targets (test code only).
 *
 * The loaders under test read files by path, so each target writes its input
 * into a private scratch directory and opens it from there. A failed check
 * prints what was expected and aborts: libFuzzer reports that as a crash and
 * saves the input. */
#ifndef COLI_FUZZUTIL_H
#define COLI_FUZZUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "colibri/colibri.h"

/* The libFuzzer entry point, declared for -Wmissing-prototypes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with file, line, the condition and a printf-style detail. */
#define FZ_CHECK(cond, ...)                                                           \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* The private scratch directory, made under $TMPDIR (or /tmp) on first use
 * and removed at exit. Static storage. */
const char *fz_dir(void);
/* fz_dir() "/" name in a static buffer (valid until the next call). */
const char *fz_path(const char *name);
/* Writes n bytes to fz_path(name), then (if pad > 0) extends the file with
 * pad zero bytes. Aborts if the file system refuses. */
void fz_write(const char *name, const void *data, size_t n, uint64_t pad);
/* Removes every file in the scratch directory. */
void fz_clear(void);

/* A failure must carry a known status and a message. */
void fz_check_failure(coli_status st, const char *msg);
/* 1 if s[0..n) is well-formed UTF-8 (RFC 3629), written here independently
 * of the library's own check. */
int fz_utf8_valid(const char *s, size_t n);

#endif
