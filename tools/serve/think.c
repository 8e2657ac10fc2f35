/* think.c - reasoning apart from content (think.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "think.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

/* Length of the longest tail of s[0..n) that is a proper prefix of tag. */
static size_t tag_tail(const char *s, size_t n, const char *tag)
{
    size_t m = strlen(tag);
    for (size_t l = n < m - 1 ? n : m - 1; l > 0; l--)
        if (memcmp(s + n - l, tag, l) == 0)
            return l;
    return 0;
}

static void to_content(think *t, const char *s, size_t n, sbuf *content)
{
    if (t->trim) {
        while (n && (*s == '\n' || *s == ' ' || *s == '\r' || *s == '\t'))
            s++, n--;
        if (n)
            t->trim = 0;
    }
    sbuf_add(content, s, n);
}

int think_opened(const char *prompt, size_t len)
{
    size_t m = strlen(OPEN);
    while (len && (prompt[len - 1] == ' ' || prompt[len - 1] == '\n' || prompt[len - 1] == '\r' ||
                   prompt[len - 1] == '\t'))
        len--;
    return len >= m && memcmp(prompt + len - m, OPEN, m) == 0;
}

void think_start(think *t, int opened)
{
    memset(t, 0, sizeof *t);
    t->state = opened ? 1 : 0;
}

void think_feed(think *t, const char *s, size_t n, int final, sbuf *reasoning, sbuf *content)
{
    if (t->state == 2) {
        to_content(t, s, n, content);
        return;
    }
    sbuf_add(&t->hold, s, n);
    const char *h = t->hold.p ? t->hold.p : "";
    size_t hn = t->hold.n, lead = 0;
    if (t->state == 0) {
        while (lead < hn && (h[lead] == ' ' || h[lead] == '\n' || h[lead] == '\r' || h[lead] == '\t'))
            lead++;
        size_t rest = hn - lead, m = strlen(OPEN);
        if (rest >= m && memcmp(h + lead, OPEN, m) == 0) {
            t->state = 1;
            lead += m;
        } else if (!final && rest < m && memcmp(h + lead, OPEN, rest) == 0) {
            return; /* may still become <think> */
        } else {
            t->state = 2;
            to_content(t, h, hn, content);
            sbuf_free(&t->hold);
            return;
        }
    }
    /* reasoning: up to </think>, holding back what may begin it */
    const char *r = h + lead;
    size_t rn = hn - lead;
    const char *end = NULL;
    for (size_t i = 0; i + strlen(CLOSE) <= rn; i++)
        if (memcmp(r + i, CLOSE, strlen(CLOSE)) == 0) {
            end = r + i;
            break;
        }
    if (end) {
        sbuf_add(reasoning, r, (size_t)(end - r));
        t->state = 2;
        t->trim = 1;
        const char *after = end + strlen(CLOSE);
        to_content(t, after, (size_t)(r + rn - after), content);
        sbuf_free(&t->hold);
        return;
    }
    size_t keep = final ? 0 : tag_tail(r, rn, CLOSE);
    sbuf_add(reasoning, r, rn - keep);
    memmove(t->hold.p, r + rn - keep, keep);
    t->hold.n = keep;
    if (t->hold.p)
        t->hold.p[keep] = '\0';
}

void think_free(think *t)
{
    sbuf_free(&t->hold);
}
