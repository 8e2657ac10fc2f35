/*
 * serve.h - `coli serve`: an OpenAI-compatible HTTP server on
 * libmicrohttpd (docs in the man page and README "Serving"). coli.c
 * parses the model's options and hands over a function that opens it:
 * the server listens first, so /health answers while the model loads.
 */
#ifndef COLI_SERVE_SERVE_H
#define COLI_SERVE_SERVE_H

#include <colibri/colibri.h>

#include "../options.h"

/* Opens the model (printing why not); 0 or 1. */
typedef int (*serve_open_fn)(void *user, coli_model **out);

/* Runs until SIGINT or SIGTERM; the exit status. dir names the model. */
int serve_run(const args *a, const char *dir, serve_open_fn open, void *user);

#endif
