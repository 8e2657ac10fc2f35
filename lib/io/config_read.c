/* config_read.c - typed fields of a JSON configuration file. */
#include <math.h>

#include "io/config_read.h"

coli_status coli__cfg_int(coli__cfg_reader *r, const char *key, int required, int def, int lo, int hi, int *out)
{
    const coli__json *v = coli__json_get(r->root, key);
    if (!v || v->type == COLI_JSON_NULL) {
        if (required)
            return coli__fail(r->err, COLI_EFORMAT, "%s: required field '%s' is missing", r->file, key);
        *out = def;
        return COLI_OK;
    }
    if (v->type != COLI_JSON_NUMBER || !v->is_int)
        return coli__fail(r->err, COLI_EFORMAT, "%s: field '%s' must be an integer", r->file, key);
    if (v->integer < lo || v->integer > hi)
        return coli__fail(r->err, COLI_ERANGE, "%s: field '%s' = %lld is outside [%d, %d]", r->file,
                          key, (long long)v->integer, lo, hi);
    *out = (int)v->integer;
    return COLI_OK;
}

coli_status coli__cfg_num(coli__cfg_reader *r, const coli__json *obj, const char *key, double def, double *out)
{
    const coli__json *v = coli__json_get(obj, key);
    if (!v || v->type == COLI_JSON_NULL) {
        *out = def;
        return COLI_OK;
    }
    if (v->type != COLI_JSON_NUMBER || !isfinite(coli__json_num(v)))
        return coli__fail(r->err, COLI_EFORMAT, "%s: field '%s' must be a number", r->file, key);
    *out = coli__json_num(v);
    return COLI_OK;
}

coli_status coli__cfg_bool(coli__cfg_reader *r, const char *key, int def, int *out)
{
    const coli__json *v = coli__json_get(r->root, key);
    if (!v || v->type == COLI_JSON_NULL) {
        *out = def;
        return COLI_OK;
    }
    if (v->type != COLI_JSON_BOOL)
        return coli__fail(r->err, COLI_EFORMAT, "%s: field '%s' must be true or false", r->file, key);
    *out = v->boolean;
    return COLI_OK;
}

coli_status coli__cfg_refuse_true(coli__cfg_reader *r, const char *key)
{
    int on = 0;
    COLI_TRY(coli__cfg_bool(r, key, 0, &on));
    if (on)
        return coli__fail(r->err, COLI_EUNSUPPORTED, "%s: option '%s': true is not supported", r->file,
                          key);
    return COLI_OK;
}
