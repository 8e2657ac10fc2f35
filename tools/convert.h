/*
 * convert.h - `coli convert`: a Hugging Face checkpoint into a streaming
 * container (docs/container.md), through coli_convert.
 */
#ifndef COLI_TOOLS_CONVERT_H
#define COLI_TOOLS_CONVERT_H

#include "options.h"

extern const char convert_synopsis[];
extern const opthelp convert_options[];
extern const char convert_epilogue[];
int cmd_convert(const args *a);

#endif /* COLI_TOOLS_CONVERT_H */
