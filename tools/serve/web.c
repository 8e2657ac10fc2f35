/* web.c - the chat page of coli serve: three files read once at start
 * from the web directory (--web-dir, else COLI_WEB_DIR, else the installed
 * one), served from memory for three fixed paths. No request names a
 * file. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "server.h"

#include "../diag.h"
#include "../options.h"

#include <microhttpd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *file, *type;
} g_files[WEB_FILES] = {
    {"index.html", "text/html; charset=utf-8"},
    {"chat.js", "text/javascript; charset=utf-8"},
    {"chat.css", "text/css; charset=utf-8"},
};

/* The page's files are small: anything larger is not one of them. */
#define WEB_FILE_MAX (1 << 20)

static int read_all(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char *p = malloc(WEB_FILE_MAX);
    size_t n = p ? fread(p, 1, WEB_FILE_MAX, f) : 0;
    int bad = !p || ferror(f) || n == WEB_FILE_MAX;
    fclose(f);
    if (bad) {
        free(p);
        return -1;
    }
    *out = p;
    *len = n;
    return 0;
}

void web_load(server *s, const char *dir)
{
    if (!dir)
        dir = getenv("COLI_WEB_DIR");
    if (!dir)
        dir = COLI_PKGDATADIR "/web";
    for (int i = 0; i < WEB_FILES; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, g_files[i].file);
        if (read_all(path, &s->web[i], &s->web_len[i]) != 0) {
            diag_printf(DIAG_WARNING, "%s: warning: no chat page at /: cannot read %s", cli_prog, path);
            web_free(s);
            return;
        }
    }
}

void web_free(server *s)
{
    for (int i = 0; i < WEB_FILES; i++) {
        free(s->web[i]);
        s->web[i] = NULL;
    }
}

static int serve_file(const request *rq, int i, struct MHD_Response **resp)
{
    const server *s = rq->srv;
    if (!s->web[i]) {
        apierr e;
        api_fail(&e, 404, NULL, "this server has no chat page (--web-dir)");
        return reply_error(&e, resp);
    }
    *resp = MHD_create_response_from_buffer(s->web_len[i], s->web[i], MHD_RESPMEM_PERSISTENT);
    if (!*resp)
        return 500;
    MHD_add_response_header(*resp, "Content-Type", g_files[i].type);
    MHD_add_response_header(*resp, "Cache-Control", "no-cache");
    MHD_add_response_header(*resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(*resp, "Content-Security-Policy",
                            "default-src 'self'; connect-src 'self'; img-src 'self' data:");
    return 200;
}

int ep_web_index(const request *rq, struct MHD_Response **resp)
{
    return serve_file(rq, 0, resp);
}

int ep_web_js(const request *rq, struct MHD_Response **resp)
{
    return serve_file(rq, 1, resp);
}

int ep_web_css(const request *rq, struct MHD_Response **resp)
{
    return serve_file(rq, 2, resp);
}
