/* render_template.c - renders a chat template file with a JSON file of
 * variables through the public API, for tests/test_template_live.sh.
 *
 * Usage: render_template TEMPLATE VARS.json. The output goes to stdout as
 * it is; a failure prints "ERROR <status>: <message>" and exits 2. */
#include <stdio.h>
#include <stdlib.h>

#include "colibri/colibri.h"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *p = malloc(cap);
    size_t k;
    while (p && (k = fread(p + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            char *q = realloc(p, cap *= 2);
            if (!q) {
                free(p);
                p = NULL;
            }
            p = q;
        }
    }
    fclose(f);
    *n = len;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s TEMPLATE VARS.json\n", argv[0]);
        return 64;
    }
    size_t tn, vn;
    char *t = slurp(argv[1], &tn), *v = slurp(argv[2], &vn);
    if (!t || !v) {
        fprintf(stderr, "%s: cannot read the input files\n", argv[0]);
        return 66;
    }
    char err[1024];
    coli_chat_template *tmpl;
    coli_status st = coli_chat_template_compile(t, tn, &tmpl, err, sizeof err);
    char *out = NULL;
    size_t on = 0;
    if (st == COLI_OK) {
        st = coli_chat_template_render(tmpl, v, vn, &out, &on, err, sizeof err);
        coli_chat_template_free(tmpl);
    }
    free(t);
    free(v);
    if (st != COLI_OK) {
        printf("ERROR %s: %s", coli_status_name(st), err);
        return 2;
    }
    fwrite(out, 1, on, stdout);
    coli_free(out);
    return 0;
}
