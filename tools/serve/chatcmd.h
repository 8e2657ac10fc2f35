/*
 * chatcmd.h - `coli chat`: a conversation on the terminal through the
 * same chat template, reasoning split and sampling defaults as coli serve.
 * Lines of standard input are the user's turns; /clear forgets the
 * history, /exit (or the end of input) ends. The whole history is rendered
 * each turn and the context keeps the prefix it shares with the last one.
 */
#ifndef COLI_SERVE_CHATCMD_H
#define COLI_SERVE_CHATCMD_H

#include <colibri/colibri.h>

#include "../options.h"

/* Runs the conversation on model (from directory dir); the exit status. */
int chat_run(const args *a, coli_model *model, const char *dir);

#endif
