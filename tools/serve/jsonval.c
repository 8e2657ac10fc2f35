/* jsonval.c - a parsed JSON value written back out (jsonval.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "jsonval.h"

#include "../jsonout.h"

#include <inttypes.h>

void jsonval_write(FILE *f, const coli__json *v)
{
    switch (v->type) {
    case COLI_JSON_NULL:
        fputs("null", f);
        break;
    case COLI_JSON_BOOL:
        fputs(v->boolean ? "true" : "false", f);
        break;
    case COLI_JSON_NUMBER:
        if (v->is_int && !v->neg_zero)
            fprintf(f, "%" PRId64, v->integer);
        else
            json_real(f, coli__json_num(v), "%.17g");
        break;
    case COLI_JSON_STRING:
        json_string(f, v->str, v->len);
        break;
    case COLI_JSON_ARRAY:
        fputc('[', f);
        for (uint32_t i = 0; i < v->len; i++) {
            if (i)
                fputc(',', f);
            jsonval_write(f, &v->items[i]);
        }
        fputc(']', f);
        break;
    case COLI_JSON_OBJECT:
        fputc('{', f);
        for (uint32_t i = 0; i < v->len; i++) {
            const coli__json *k = coli__json_key(v, i);
            if (i)
                fputc(',', f);
            json_string(f, k->str, k->len);
            fputc(':', f);
            jsonval_write(f, &v->items[i]);
        }
        fputc('}', f);
        break;
    }
}
