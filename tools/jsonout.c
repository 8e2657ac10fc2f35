/*
 * jsonout.c - JSON strings, id arrays and numbers for the coli tool's
 * output (see jsonout.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "jsonout.h"

#include <inttypes.h>
#include <math.h>

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not valid
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_valid_len(const unsigned char *s, size_t avail)
{
    unsigned c = s[0];
    size_t len, i;
    uint32_t cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (avail < len)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* Writes s as a JSON string: quotes, backslashes and control characters are
 * escaped, valid UTF-8 passes through, invalid bytes become U+FFFD. */
void json_string(FILE *f, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    fputc('"', f);
    while (i < len) {
        unsigned c = p[i];
        size_t n;

        switch (c) {
        case '"': fputs("\\\"", f); i++; continue;
        case '\\': fputs("\\\\", f); i++; continue;
        case '\n': fputs("\\n", f); i++; continue;
        case '\r': fputs("\\r", f); i++; continue;
        case '\t': fputs("\\t", f); i++; continue;
        case '\b': fputs("\\b", f); i++; continue;
        case '\f': fputs("\\f", f); i++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            i++;
            continue;
        }
        n = utf8_valid_len(p + i, len - i);
        if (n == 0) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        fwrite(p + i, 1, n, f);
        i += n;
    }
    fputc('"', f);
}

void json_ids(FILE *f, const int32_t *ids, size_t n)
{
    size_t i;

    fputc('[', f);
    for (i = 0; i < n; i++)
        fprintf(f, "%s%" PRId32, i ? "," : "", ids[i]);
    fputc(']', f);
}

/* A JSON number; JSON has no NaN or infinity, so those become null. */
void json_real(FILE *f, double v, const char *fmt)
{
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}
