/*
 * convert.h - `coli convert`: a Hugging Face checkpoint into a streaming
 * container (docs/container.md), through coli_convert.
 */
#ifndef COLI_TOOLS_CONVERT_H
#define COLI_TOOLS_CONVERT_H

#include "options.h"

/* ---- provided by coli.c ---------------------------------------------------- */

/* The demo model's directory (COLI_DEMO_MODEL, the installed one, or the
 * build tree's), or NULL when there is none. */
const char *demo_model_dir(void);

/* ---- provided by convert.c --------------------------------------------------- */

extern const char convert_synopsis[];
extern const opthelp convert_options[];
extern const char convert_epilogue[];
int cmd_convert(const args *a);

#endif /* COLI_TOOLS_CONVERT_H */
