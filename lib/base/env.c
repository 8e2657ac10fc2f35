/* env.c - the environment variables of env.h, checked one way. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"

enum { FLAG, DEVICE, DEVICES, GIB, COUNT, KV };

static const struct {
    const char *var;
    int kind;
    const char *want;
} g_env[] = {
#define COLI__ENV_ROW_(id, var, kind, want) {var, kind, want},
    COLI__ENV_MAP(COLI__ENV_ROW_)
#undef COLI__ENV_ROW_
};

int coli__parse_devices(const char *s, int *devs, int *n)
{
    int k = 0;
    const char *p = s;
    if (!*p)
        return -1;
    for (;;) {
        if (*p < '0' || *p > '9')
            return -1;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v > 1023 || k == COLI__MAX_DEVICES)
            return -1;
        for (int i = 0; i < k; i++)
            if (devs[i] == v)
                return -1;
        devs[k++] = (int)v;
        if (*end == '\0')
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    *n = k;
    return 0;
}

/* Parses s as kind into v; 0 on success. */
static int parse(int kind, const char *s, coli__env_val *v)
{
    char *end;
    errno = 0;
    switch (kind) {
    case FLAG:
        if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
            return -1;
        v->i = s[0] == '1';
        return 0;
    case DEVICE:
    case DEVICES: {
        int devs[COLI__MAX_DEVICES], n = 0;
        if (coli__parse_devices(s, devs, &n) != 0 || (kind == DEVICE && n != 1))
            return -1;
        memcpy(v->devs, devs, sizeof devs);
        v->n = n;
        return 0;
    }
    case GIB: {
        double g = strtod(s, &end);
        if (!*s || *end || errno || !isfinite(g) || g < 0 || g > 1048576.0)
            return -1;
        v->i = (int64_t)(g * 1073741824.0);
        return 0;
    }
    case KV:
        if (strcmp(s, "f32") != 0 && strcmp(s, "bf16") != 0)
            return -1;
        v->i = s[0] == 'b';
        return 0;
    default: { /* COUNT */
        long long n = strtoll(s, &end, 10);
        if (!*s || *s == '-' || *s == '+' || *end || errno)
            return -1;
        v->i = n;
        return 0;
    }
    }
}

coli_status coli__env_get(coli__env_id id, coli__env_val *v, int *set, coli__err *err)
{
    *set = 0;
    const char *s = getenv(g_env[id].var);
    if (!s)
        return COLI_OK;
    coli__env_val got;
    memset(&got, 0, sizeof got);
    if (parse(g_env[id].kind, s, &got) != 0)
        return coli__fail(err, COLI_EINVAL, "environment variable %s: '%s' is not %s", g_env[id].var, s,
                          g_env[id].want);
    *v = got;
    *set = 1;
    return COLI_OK;
}
