/* jsonval.h - writes a parsed JSON value (the library's reader, compiled
 * into the tool) back out, e.g. a request's messages into a template's
 * variables. */
#ifndef COLI_SERVE_JSONVAL_H
#define COLI_SERVE_JSONVAL_H

#include <stdio.h>

#include "io/json.h"

void jsonval_write(FILE *f, const coli__json *v);

#endif
