/* config_read.h - typed fields of a JSON configuration file, each failure
 * naming the file and the field (internal). */
#ifndef COLI_CONFIG_READ_H
#define COLI_CONFIG_READ_H

#include "base/error.h"
#include "io/json.h"

/* Products used as matrix sizes stay far from int overflow below this. */
#define COLI__DIM_MAX (1 << 20)

/* Reading context: the file name goes into every message. */
typedef struct coli__cfg_reader {
    const char *file;
    const coli__json *root;
    coli__err *err;
} coli__cfg_reader;

/* An integer field in [lo, hi]. required: missing is an error; else *out
 * gets def. */
coli_status coli__cfg_int(coli__cfg_reader *r, const char *key, int required, int def, int lo, int hi, int *out);
/* A finite number of object obj (the root or one inside it); missing: def. */
coli_status coli__cfg_num(coli__cfg_reader *r, const coli__json *obj, const char *key, double def, double *out);
/* true or false; missing: def. */
coli_status coli__cfg_bool(coli__cfg_reader *r, const char *key, int def, int *out);
/* Refuses a boolean option set to true, naming it: we do not implement it. */
coli_status coli__cfg_refuse_true(coli__cfg_reader *r, const char *key);

#endif
