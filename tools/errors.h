/*
 * errors.h - how the coli tool reports a failure of the library. A file of
 * its own so that every command file can report one without calling up
 * into coli.c (usage errors are the parser's: usage_error in options.h).
 */
#ifndef COLI_TOOLS_ERRORS_H
#define COLI_TOOLS_ERRORS_H

#include <stdint.h>
#include <stdio.h>

#include "colibri/colibri.h"

/* Prints "coli: <coli_strerror(status)>: <detail>" on stderr (no ": <detail>"
 * when detail is NULL or empty), the library's option names (COLI_OPT_...)
 * in detail replaced by the tool's (--threads); returns 1. */
int runtime_error(int status, const char *detail);

/* Evaluates one token in c; 0, or 1 after runtime_error with c's message. */
int eval_one(coli_context *c, int32_t tok);

/* Writes msg to f with COLI_OPT_ names replaced by the tool's options. */
void print_translated(FILE *f, const char *msg);

/* After a model that would not open: a hint when dir is a Hub name that
 * does not exist here ("Qwen/Qwen3-30B-A3B") or a GGUF file, or holds one;
 * nothing otherwise. prog prefixes the line. */
void explain_model_path(const char *prog, const char *dir);

#endif /* COLI_TOOLS_ERRORS_H */
