/*
 * demo_dir.c - where the coli tool finds the demo model (see demo_dir.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "demo_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int file_exists(const char *dir, const char *name)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);

    return n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0;
}

/* The directory of the running executable, into buf; 0 if unknown. */
static int exe_dir(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    char *slash;

    if (n <= 0 || (size_t)n >= cap - 1)
        return 0;
    buf[n] = '\0';
    if ((slash = strrchr(buf, '/')) == NULL)
        return 0;
    *slash = '\0';
    return 1;
}

/*
 * The demo model: $COLI_DEMO_MODEL, else the installed copy, else the
 * data/demo of the build tree that the running executable lies in (so that
 * ./coli works straight after make). Uninstalled, ./coli is a libtool
 * wrapper that runs .libs/coli, hence both <exe dir> and its parent. No
 * path of the build is compiled in: the installed tool must not look there.
 * NULL when there is none.
 */
const char *demo_model_dir(void)
{
    static char buf[4096];
    const char *env = getenv("COLI_DEMO_MODEL");
    char *slash;
    size_t len;

    if (env != NULL && env[0] != '\0')
        return env;
    if (file_exists(COLI_PKGDATADIR "/demo", "config.json"))
        return COLI_PKGDATADIR "/demo";
    if (!exe_dir(buf, sizeof buf - sizeof "/data/demo"))
        return NULL;
    len = strlen(buf);
    memcpy(buf + len, "/data/demo", sizeof "/data/demo");
    if (file_exists(buf, "config.json"))
        return buf;
    buf[len] = '\0';
    if ((slash = strrchr(buf, '/')) == NULL)
        return NULL;
    memcpy(slash, "/data/demo", sizeof "/data/demo");
    if (file_exists(buf, "config.json"))
        return buf;
    return NULL;
}
