/* testutil.c - helpers shared by the Check tests (see testutil.h). */
/* autoconf's config.h is force-included by the build (-include) */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#ifndef COLI_SRCDIR
#define COLI_SRCDIR "."
#endif

/* ---- files and directories ------------------------------------------- */

char *tu_path(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int slash = la > 0 && a[la - 1] != '/';
    char *p = malloc(la + (size_t)slash + lb + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, a, la);
    if (slash)
        p[la] = '/';
    memcpy(p + la + slash, b, lb + 1);
    return p;
}

char *tu_mkdtemp(void)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    char *tmpl = tu_path(base, "colitest-XXXXXX");
    if (tmpl == NULL)
        return NULL;
    if (mkdtemp(tmpl) == NULL) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

void tu_rmtree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d != NULL) {
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                    continue;
                char *sub = tu_path(path, de->d_name);
                if (sub != NULL) {
                    tu_rmtree(sub);
                    free(sub);
                }
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tu_write_file(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, data, n);
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

char *tu_read_file(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            free(buf);
            buf = NULL;
            break;
        }
        if (r == 0) {
            buf[len] = '\0';
            if (n != NULL)
                *n = len;
            break;
        }
        len += (size_t)r;
    }
    close(fd);
    return buf;
}

int tu_copy_dir(const char *src, const char *dst)
{
    if (mkdir(dst, 0755) != 0 && errno != EEXIST)
        return -1;
    DIR *d = opendir(src);
    if (d == NULL)
        return -1;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        char *from = tu_path(src, de->d_name);
        char *to = tu_path(dst, de->d_name);
        struct stat sb;
        if (from == NULL || to == NULL) {
            rc = -1;
        } else if (stat(from, &sb) == 0 && S_ISREG(sb.st_mode)) {
            size_t n = 0;
            char *data = tu_read_file(from, &n);
            if (data == NULL || tu_write_file(to, data, n) != 0)
                rc = -1;
            free(data);
        }
        free(from);
        free(to);
    }
    closedir(d);
    return rc;
}

const char *tu_data_dir(void)
{
    const char *env = getenv("COLI_TEST_DATA");
    if (env != NULL && env[0] != '\0')
        return env;
    return COLI_SRCDIR "/tests/data";
}

/* ---- safetensors writer ----------------------------------------------- */

typedef struct tu_st_tensor {
    char *name, *dtype;
    int ndim;
    int64_t *shape;
    unsigned char *data;
    size_t nbytes;
} tu_st_tensor;

struct tu_st {
    tu_st_tensor *t;
    size_t n, cap;
    int failed; /* an allocation failed in tu_st_add */
};

/* A growable string for the header. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (np == NULL) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        b->failed = 1;
    else
        sb_putn(b, tmp, (size_t)n);
}

static void sb_json_str(sbuf *b, const char *s)
{
    sb_puts(b, "\"");
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_putn(b, e, 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_putn(b, (const char *)&c, 1);
        }
    }
    sb_puts(b, "\"");
}

tu_st *tu_st_new(void)
{
    return calloc(1, sizeof(tu_st));
}

static char *dup_s(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

void tu_st_add(tu_st *w, const char *name, const char *dtype, int ndim, const int64_t *shape,
               const void *data, size_t nbytes)
{
    if (w == NULL)
        return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 8;
        tu_st_tensor *nt = realloc(w->t, cap * sizeof *nt);
        if (nt == NULL) {
            w->failed = 1;
            return;
        }
        w->t = nt;
        w->cap = cap;
    }
    tu_st_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->name = dup_s(name);
    t->dtype = dup_s(dtype);
    t->ndim = ndim > 0 ? ndim : 0;
    t->shape = malloc((size_t)(t->ndim ? t->ndim : 1) * sizeof *t->shape);
    t->data = malloc(nbytes ? nbytes : 1);
    t->nbytes = nbytes;
    w->n++; /* counted even on failure so that tu_st_free releases it */
    if (t->name == NULL || t->dtype == NULL || t->shape == NULL || t->data == NULL) {
        w->failed = 1;
        return;
    }
    if (t->ndim > 0)
        memcpy(t->shape, shape, (size_t)t->ndim * sizeof *t->shape);
    if (nbytes > 0)
        memcpy(t->data, data, nbytes);
}

void tu_st_free(tu_st *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].dtype);
        free(w->t[i].shape);
        free(w->t[i].data);
    }
    free(w->t);
    free(w);
}

static int write_st(const char *path, uint64_t header_len, const char *header, size_t hlen,
                    const void *data, size_t nbytes)
{
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(header_len >> (8 * i));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, le, 8);
    if (rc == 0)
        rc = write_all(fd, header, hlen);
    if (rc == 0 && nbytes > 0)
        rc = write_all(fd, data, nbytes);
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

int tu_st_write(tu_st *w, const char *path)
{
    if (w == NULL || w->failed)
        return -1;
    sbuf h = {0};
    size_t total = 0;
    sb_puts(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < w->n; i++) {
        const tu_st_tensor *t = &w->t[i];
        sb_puts(&h, ",");
        sb_json_str(&h, t->name);
        sb_puts(&h, ":{\"dtype\":");
        sb_json_str(&h, t->dtype);
        sb_puts(&h, ",\"shape\":[");
        for (int d = 0; d < t->ndim; d++)
            sb_printf(&h, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%zu,%zu]}", total, total + t->nbytes);
        total += t->nbytes;
    }
    sb_puts(&h, "}");
    while (!h.failed && (8 + h.len) % 8 != 0)
        sb_puts(&h, " ");
    unsigned char *data = malloc(total ? total : 1);
    int rc = -1;
    if (!h.failed && data != NULL) {
        size_t off = 0;
        for (size_t i = 0; i < w->n; i++) {
            if (w->t[i].nbytes > 0)
                memcpy(data + off, w->t[i].data, w->t[i].nbytes);
            off += w->t[i].nbytes;
        }
        rc = write_st(path, h.len, h.p, h.len, data, total);
    }
    free(data);
    free(h.p);
    return rc;
}

int tu_st_write_raw(const char *path, const char *header_json, const void *data, size_t nbytes)
{
    size_t n = strlen(header_json);
    return write_st(path, n, header_json, n, data, nbytes);
}

int tu_st_write_raw_len(const char *path, uint64_t header_len, const char *header_json,
                        const void *data, size_t nbytes)
{
    return write_st(path, header_len, header_json, strlen(header_json), data, nbytes);
}

/* One entry of a fixture's header: "name":{"dtype":"BF16","shape":[a,b],
 * "data_offsets":[x,y]}, the only form tu_st_write and the fixtures use. */
/* Rewrites path (all BF16) with every tensor as dtype, fn seeing each
 * one's values in f32 first (fn NULL: none); fn returns how many it
 * changed. The count of changes, or -1. */
static long st_walk(const char *path, const char *dtype, tu_st_edit_fn fn, void *user)
{
    size_t n = 0;
    unsigned char *raw = (unsigned char *)tu_read_file(path, &n);
    char *hdr = NULL;
    tu_st *w = tu_st_new();
    long changed = 0, rc = -1;
    int n_tensors = 0;
    uint64_t hl = 0;
    if (raw == NULL || w == NULL || n < 8)
        goto out;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | raw[i];
    if (hl > n - 8 || (hdr = malloc((size_t)hl + 1)) == NULL)
        goto out;
    memcpy(hdr, raw + 8, (size_t)hl);
    hdr[hl] = '\0';
    const unsigned char *data = raw + 8 + hl;
    for (const char *s = hdr; (s = strstr(s, "\"dtype\":\"BF16\"")) != NULL; s++) {
        const char *q = s;
        while (q > hdr && *q != '{')
            q--;
        const char *name_end = q - 2; /* "name":{ */
        const char *name_start = name_end;
        while (name_start > hdr && name_start[-1] != '"')
            name_start--;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(name_end - name_start), name_start);
        int64_t shape[8];
        int nd = 0;
        const char *sh = strstr(s, "\"shape\":[");
        const char *off = strstr(s, "\"data_offsets\":[");
        if (sh == NULL || off == NULL)
            goto out;
        for (sh += 9; *sh != ']' && nd < 8;) {
            shape[nd++] = strtoll(sh, (char **)&sh, 10);
            if (*sh == ',')
                sh++;
        }
        off += 16;
        unsigned long long b = strtoull(off, (char **)&off, 10);
        unsigned long long e = strtoull(off + 1, NULL, 10);
        if (b > e || e > n - 8 - hl)
            goto out;
        size_t cnt = (size_t)(e - b) / 2;
        float *f = malloc(cnt * sizeof(float) + 1);
        uint16_t *h = malloc(cnt * sizeof(uint16_t) + 1);
        if (f == NULL || h == NULL) {
            free(f);
            free(h);
            goto out;
        }
        for (size_t i = 0; i < cnt; i++)
            f[i] = tu_bf16_to_f32((uint16_t)(data[b + 2 * i] | (data[b + 2 * i + 1] << 8)));
        if (fn)
            changed += fn(user, name, shape, nd, f, cnt);
        if (strcmp(dtype, "F32") == 0) {
            tu_st_add(w, name, "F32", nd, shape, f, cnt * sizeof(float));
        } else {
            for (size_t i = 0; i < cnt; i++)
                h[i] = strcmp(dtype, "F16") == 0 ? tu_f32_to_f16(f[i]) : tu_f32_to_bf16(f[i]);
            tu_st_add(w, name, dtype, nd, shape, h, cnt * sizeof(uint16_t));
        }
        free(f);
        free(h);
        n_tensors++;
    }
    if (n_tensors > 0 && tu_st_write(w, path) == 0)
        rc = changed;
out:
    tu_st_free(w);
    free(hdr);
    free(raw);
    return rc;
}

typedef struct patch_job {
    const char *name;
    size_t first, count;
    float value;
} patch_job;

static long patch_one(void *user, const char *name, const int64_t *shape, int nd, float *v, size_t n)
{
    (void)shape;
    (void)nd;
    const patch_job *j = user;
    if (j->name == NULL || strcmp(name, j->name) != 0 || j->first > n || j->count > n - j->first)
        return 0;
    for (size_t i = j->first; i < j->first + j->count; i++)
        v[i] = j->value;
    return 1;
}

int tu_st_rewrite(const char *path, const char *dtype, const char *patch, size_t first, size_t count,
                  float value)
{
    patch_job j = {patch, first, count, value};
    long rc = st_walk(path, dtype, patch_one, &j);
    return rc < 0 || (patch != NULL && rc == 0) ? -1 : 0;
}

long tu_st_edit(const char *path, tu_st_edit_fn fn, void *user)
{
    return st_walk(path, "BF16", fn, user);
}

/* ---- a glm4_moe model whose MTP drafts are often right ---------------------------
 *
 * The fixture's MTP layer is random, so its drafts are never accepted. In
 * a copy, the MTP layer is made to repeat the decoder's prediction: o_proj
 * and every down projection zero (the decoder layer passes its input
 * through), eh_proj the identity on the hidden half, hnorm and the head's
 * norm ones, and the head the model's lm_head. Its draft after token t is
 * then the decoder's most likely token before t, i.e. t again: accepted
 * wherever greedy text repeats itself. */

typedef struct echo_job {
    float *lm_head;
    size_t n_head;
} echo_job;

static long take_head(void *user, const char *name, const int64_t *shape, int nd, float *v, size_t n)
{
    (void)shape;
    (void)nd;
    echo_job *j = user;
    if (strcmp(name, "lm_head.weight") != 0)
        return 0;
    j->lm_head = malloc(n * sizeof(float));
    memcpy(j->lm_head, v, n * sizeof(float));
    j->n_head = n;
    return 1;
}

static int echo_ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static long make_echo(void *user, const char *name, const int64_t *shape, int nd, float *v, size_t n)
{
    echo_job *j = user;
    const char *pre = "model.layers.3.";
    if (strncmp(name, pre, strlen(pre)) != 0)
        return 0;
    const char *t = name + strlen(pre);
    if (strcmp(t, "self_attn.o_proj.weight") == 0 || echo_ends_with(t, "down_proj.weight")) {
        memset(v, 0, n * sizeof(float));
    } else if (strcmp(t, "eh_proj.weight") == 0) {
        if (nd != 2 || shape[1] != 2 * shape[0])
            return -1000; /* not the shape the fixture has: the count tells */
        memset(v, 0, n * sizeof(float));
        for (int64_t r = 0; r < shape[0]; r++)
            v[r * shape[1] + shape[0] + r] = 1.0f;
    } else if (strcmp(t, "hnorm.weight") == 0 || strcmp(t, "shared_head.norm.weight") == 0) {
        for (size_t i = 0; i < n; i++)
            v[i] = 1.0f;
    } else if (strcmp(t, "shared_head.head.weight") == 0) {
        if (n != j->n_head)
            return -1000;
        memcpy(v, j->lm_head, n * sizeof(float));
    } else {
        return 0;
    }
    return 1;
}

char *tu_mtp_echo_model(const char *fixture, char **tmp)
{
    *tmp = tu_mkdtemp();
    char *dir = *tmp ? tu_path(*tmp, "echo") : NULL;
    char *st = dir ? tu_path(dir, "model.safetensors") : NULL;
    echo_job j = {0};
    /* o_proj, 8 experts' and the shared expert's down, eh_proj, 2 norms, the head */
    int ok = st && tu_copy_dir(fixture, dir) == 0 && tu_st_edit(st, take_head, &j) == 1 &&
             tu_st_edit(st, make_echo, &j) == 14;
    free(j.lm_head);
    free(st);
    if (!ok) {
        free(dir);
        return NULL;
    }
    return dir;
}

float tu_range(const float *v, int n)
{
    float lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    return hi - lo;
}

/* ---- floats ------------------------------------------------------------ */

uint16_t tu_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it quiet, keep the sign */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float tu_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int tu_replace_in_file(const char *dir, const char *file, const char *from, const char *to)
{
    char *p = tu_path(dir, file);
    size_t n = 0;
    char *s = p ? tu_read_file(p, &n) : NULL;
    char *at = s ? strstr(s, from) : NULL;
    int rc = -1;
    if (at) {
        size_t a = (size_t)(at - s), fl = strlen(from), tl = strlen(to);
        char *o = malloc(n - fl + tl + 1);
        if (o) {
            memcpy(o, s, a);
            memcpy(o + a, to, tl);
            memcpy(o + a + tl, at + fl, n - a - fl);
            rc = tu_write_file(p, o, n - fl + tl);
            free(o);
        }
    }
    free(s);
    free(p);
    return rc;
}

uint16_t tu_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00); /* NaN */
    if (a >= 0x477ff000u)                 /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00);
    if (a < 0x38800000u) {                /* below 2^-14: subnormal or zero */
        /* value = a_float; in units of 2^-24, rounded to nearest even */
        float av;
        memcpy(&av, &a, sizeof av);
        float units = av * 16777216.0f; /* exact: power-of-two scaling */
        uint32_t q = (uint32_t)units;
        float rem = units - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias exponent, round mantissa from 23 to 10 bits */
    uint32_t r = a - 0x38000000u;  /* exponent 127 -> 15 */
    uint32_t m = r + 0xfffu + ((r >> 13) & 1);
    return (uint16_t)(sign | (m >> 13));
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

/* ---- running a model ----------------------------------------------------- */

int tu_argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

int tu_greedy(coli_context *c, const int32_t *ids, size_t n, int steps, int vocab, float *logits, int32_t *tokens)
{
    if (coli_eval(c, ids, n) != COLI_OK)
        return -1;
    for (int s = 0;; s++) {
        const float *lg = coli_context_logits(c);
        if (logits)
            memcpy(logits + (size_t)s * (size_t)vocab, lg, (size_t)vocab * sizeof(float));
        if (s == steps)
            return 0;
        int32_t next = (int32_t)tu_argmax(lg, vocab);
        if (tokens)
            tokens[s] = next;
        if (coli_eval(c, &next, 1) != COLI_OK)
            return -1;
    }
}

int tu_n_experts(const char *dir)
{
    coli_model *m = NULL;
    coli_model_info info;
    info.struct_size = sizeof info;
    int n = -1;
    if (coli_model_open(dir, NULL, &m) == COLI_OK && coli_model_get_info(m, &info) == COLI_OK)
        n = info.n_moe_layers * info.n_experts;
    coli_model_free(m);
    return n;
}

coli_status tu_generate(coli_context *c, const int32_t *prompt, size_t n_prompt, size_t max_tokens,
                        coli_sampler *s, coli_token_fn on_token, void *user, int32_t *out, size_t cap,
                        size_t *n_out)
{
    coli_generate_params p;
    coli_generate_params_init(&p, sizeof p);
    p.max_tokens = max_tokens;
    p.on_token = on_token;
    p.user = user;
    return coli_generate(c, prompt, n_prompt, s, &p, out, cap, n_out, NULL);
}

/* ---- random numbers ------------------------------------------------------ */

uint64_t tu_rng_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_rng_unit(uint64_t *state)
{
    return (double)(tu_rng_u64(state) >> 11) * 0x1p-53;
}

double tu_rng_normal(uint64_t *state)
{
    double s = tu_rng_unit(state);

    s += tu_rng_unit(state);
    s += tu_rng_unit(state);
    s += tu_rng_unit(state);
    return (s - 2.0) * 1.7320508;
}
