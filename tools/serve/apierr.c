/* apierr.c - errors for the client in OpenAI's envelope (apierr.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "apierr.h"

#include "../jsonout.h"

#include <stdarg.h>
#include <string.h>

/* OpenAI's type names by status, as clients map them to exceptions. */
static const char *type_of(int status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "invalid_request_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

int api_fail(apierr *e, int status, const char *param, const char *fmt, ...)
{
    va_list ap;
    e->status = status;
    e->type = type_of(status);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_start(ap, fmt);
    if (vsnprintf(e->message, sizeof e->message, fmt, ap) < 0)
        e->message[0] = '\0';
    va_end(ap);
    return -1;
}

void api_error_json(FILE *f, const apierr *e)
{
    fputs("{\"error\":{\"message\":", f);
    json_string(f, e->message, strlen(e->message));
    fputs(",\"type\":", f);
    json_string(f, e->type, strlen(e->type));
    fprintf(f, ",\"code\":%d,\"param\":", e->status);
    if (e->param[0])
        json_string(f, e->param, strlen(e->param));
    else
        fputs("null", f);
    fputs("}}", f);
}
