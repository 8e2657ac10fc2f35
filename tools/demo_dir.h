/*
 * demo_dir.h - where the coli tool finds the demo model, the model that
 * commands open when --model is not given.
 */
#ifndef COLI_TOOLS_DEMO_DIR_H
#define COLI_TOOLS_DEMO_DIR_H

/* Where the demo model is installed. The Makefile defines it; the fallback
 * keeps a stand-alone compile working. */
#ifndef COLI_PKGDATADIR
#define COLI_PKGDATADIR "/usr/local/share/libcolibri"
#endif

/* The demo model's directory (COLI_DEMO_MODEL, the installed one, or the
 * build tree's), or NULL when there is none. */
const char *demo_model_dir(void);

#endif /* COLI_TOOLS_DEMO_DIR_H */
