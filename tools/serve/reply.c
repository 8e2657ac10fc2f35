/* reply.c - JSON responses and the error envelope as libmicrohttpd
 * responses (server.h), for the endpoints and the router alike. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "server.h"

#include <microhttpd.h>

#include <stdio.h>
#include <stdlib.h>

struct MHD_Response *reply_json(char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    return r;
}

int reply_error(const apierr *e, struct MHD_Response **resp)
{
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (f) {
        api_error_json(f, e);
        fclose(f);
    }
    *resp = f ? reply_json(body, len) : NULL;
    if (*resp && e->status == 503)
        MHD_add_response_header(*resp, "Retry-After", "1");
    if (*resp && (e->status == 400 || e->status == 404 || e->status == 405 || e->status == 413))
        MHD_add_response_header(*resp, "x-should-retry", "false"); /* a retry cannot help */
    return e->status;
}
