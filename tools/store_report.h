/*
 * store_report.h - the expert store of converted models in the coli tool:
 * its options (--ram-gb, --expert-slots, --no-prefetch, --io-threads,
 * --no-hotset) and the figures that generate, info and bench report.
 *
 * Options left out leave the library's defaults: no budget (model.coli
 * mapped), slots from the budget, prefetch and hot set on, 4 I/O threads.
 * On a Hugging Face checkpoint the library loads every expert and warns
 * that a budget applies to converted models only.
 */
#ifndef COLI_TOOLS_STORE_REPORT_H
#define COLI_TOOLS_STORE_REPORT_H

#include <colibri/colibri.h>

#include "options.h"

#include <stdint.h>
#include <stdio.h>

/* The store options of one command line. */
typedef struct store_args {
    int64_t budget_mb;  /* --ram-gb in MiB (rounded down), -1 if not given */
    const char *ram_gb; /* --ram-gb as given, for messages */
    int64_t slots;      /* --expert-slots, -1 if not given */
    int64_t io_threads; /* --io-threads, -1 if not given */
    int no_prefetch;    /* 1: --no-prefetch */
    int no_hotset;      /* 1: --no-hotset */
} store_args;

/* The settings of a command line without store options. */
void store_args_default(store_args *s);
/* Reads and checks the store options of a; 0 or EXIT_USAGE after a
 * message naming the option. */
int store_args_parse(const args *a, store_args *s);
/* Sets the options s asks for on opts; 0, or 1 after a message. */
int store_args_apply(const store_args *s, coli_options *opts);
/* After coli_model_open failed with status and the library's msg: when
 * the budget or the slots that s set were too small, says so on stderr in
 * our options and units (--ram-gb in GiB, not the library's MiB) and
 * returns 1, the library's message then being redundant; else 0. */
int store_explain_open_failure(const store_args *s, int status, const char *msg);

/* The I/O threads that s asks for, else the library's default (4). */
int store_io_threads(const store_args *s);

/* Reads the store's statistics; 0, or 1 after a message. */
int store_report_read(const coli_model *model, coli_store_stats *st);
/* Takes base's counts off r's, so that r covers what ran after base was
 * read (the layout fields stay r's). */
void store_report_since(coli_store_stats *r, const coli_store_stats *base);
/* bytes as "4.0 KiB", "1.25 MiB" or "2.50 GiB", in buf. */
const char *store_size_text(char *buf, size_t cap, uint64_t bytes);
/* "resident", "mapped" or "streamed". */
const char *store_mode_name(coli_store_mode mode);

/* "store: <mode>, <slots>; gets, hits, misses (hit rate); disk MiB read;
 * prefetch accuracy; stall seconds", the label padded to width columns. */
void store_report_text(FILE *f, int width, const coli_store_stats *s);
/* The member ,"store":{"mode":...} of an object being written. */
void store_report_json(FILE *f, const coli_store_stats *s);

#endif /* COLI_TOOLS_STORE_REPORT_H */
