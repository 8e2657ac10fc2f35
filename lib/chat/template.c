/* template.c - chat templates (placeholder until the engine lands). */
#include <stdlib.h>

#include "colibri/colibri.h"

COLI_API coli_status coli_chat_template_compile(const char *source, size_t len, coli_chat_template **out,
                                                char *errbuf, size_t errcap)
{
    (void)source;
    (void)len;
    if (out)
        *out = NULL;
    if (errbuf && errcap)
        errbuf[0] = '\0';
    return COLI_EUNSUPPORTED;
}

COLI_API void coli_chat_template_free(coli_chat_template *tmpl)
{
    (void)tmpl;
}

COLI_API coli_status coli_chat_template_render(const coli_chat_template *tmpl, const char *vars_json, size_t len,
                                               char **out, size_t *out_len, char *errbuf, size_t errcap)
{
    (void)tmpl;
    (void)vars_json;
    (void)len;
    (void)out_len;
    if (out)
        *out = NULL;
    if (errbuf && errcap)
        errbuf[0] = '\0';
    return COLI_EUNSUPPORTED;
}

COLI_API void coli_free(void *p)
{
    free(p);
}
