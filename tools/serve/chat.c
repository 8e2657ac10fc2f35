/* chat.c - chat messages through the template (chat.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "chat.h"

#include "../jsonout.h"
#include "jsonval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most a template file may hold. */
#define TEMPLATE_FILE_MAX ((size_t)1 << 20)

int chat_tmpl_init(chat_tmpl *c, coli_model *m, const char *file, char *err, size_t errcap)
{
    char *text = NULL;
    const char *src;
    size_t len;

    memset(c, 0, sizeof *c);
    c->bos = coli_model_special_text(m, "bos_token");
    c->eos = coli_model_special_text(m, "eos_token");
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            snprintf(err, errcap, "%s: cannot open the chat template", file);
            return -1;
        }
        text = malloc(TEMPLATE_FILE_MAX + 1);
        len = text ? fread(text, 1, TEMPLATE_FILE_MAX + 1, f) : 0;
        fclose(f);
        if (!text || len > TEMPLATE_FILE_MAX) {
            free(text);
            snprintf(err, errcap, "%s: larger than the 1 MiB a chat template may have", file);
            return -1;
        }
        src = text;
    } else {
        src = coli_model_chat_template(m);
        len = src ? strlen(src) : 0;
    }
    if (!src) {
        snprintf(c->why, sizeof c->why, "the model has no chat template; pass --chat-template-file");
        return 0;
    }
    char msg[400] = "";
    coli_status st = coli_chat_template_compile(src, len, &c->t, msg, sizeof msg);
    free(text);
    if (st != COLI_OK) {
        c->t = NULL;
        snprintf(c->why, sizeof c->why, "the chat template cannot be used: %s%s%s", coli_strerror(st),
                 msg[0] ? ": " : "", msg);
    }
    return 0;
}

void chat_tmpl_free(chat_tmpl *c)
{
    coli_chat_template_free(c->t);
    c->t = NULL;
}

/* Writes a tool call with its arguments parsed when they are a JSON string
 * (templates iterate them as a mapping). */
static void write_tool_call(FILE *f, const coli__json *call)
{
    if (call->type != COLI_JSON_OBJECT) {
        jsonval_write(f, call);
        return;
    }
    fputc('{', f);
    for (uint32_t i = 0; i < call->len; i++) {
        const coli__json *k = coli__json_key(call, i), *v = &call->items[i];
        fputs(i ? "," : "", f);
        json_string(f, k->str, k->len);
        fputc(':', f);
        if (strcmp(k->str, "function") != 0 || v->type != COLI_JSON_OBJECT) {
            jsonval_write(f, v);
            continue;
        }
        fputc('{', f);
        for (uint32_t a = 0; a < v->len; a++) {
            const coli__json *fk = coli__json_key(v, a), *fv = &v->items[a];
            coli__json_doc *doc = NULL;
            coli__err err;
            fputs(a ? "," : "", f);
            json_string(f, fk->str, fk->len);
            fputc(':', f);
            if (strcmp(fk->str, "arguments") == 0 && fv->type == COLI_JSON_STRING &&
                coli__json_parse(fv->str, fv->len, "arguments", &doc, &err) == COLI_OK &&
                coli__json_root(doc)->type == COLI_JSON_OBJECT)
                jsonval_write(f, coli__json_root(doc));
            else
                jsonval_write(f, fv);
            coli__json_free(doc);
        }
        fputc('}', f);
    }
    fputc('}', f);
}

/* Writes message i normalised; -1 with e filled when it is malformed. */
static int write_message(FILE *f, const coli__json *msg, size_t i, int *is_assistant, apierr *e)
{
    char field[64];
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    const coli__json *role = coli__json_get(msg, "role"), *content = coli__json_get(msg, "content");
    size_t r = 0;

    snprintf(field, sizeof field, "messages[%zu]", i);
    if (msg->type != COLI_JSON_OBJECT)
        return api_fail(e, 400, field, "%s must be an object", field);
    if (!role || role->type != COLI_JSON_STRING)
        return api_fail(e, 400, field, "%s.role must be a string", field);
    while (r < 5 && strcmp(role->str, roles[r]) != 0)
        r++;
    if (r == 5)
        return api_fail(e, 400, field, "%s.role '%.40s' is not one of system, developer, user, assistant, tool",
                        field, role->str);
    *is_assistant = r == 3;
    const coli__json *calls = coli__json_get(msg, "tool_calls");
    if (!content && !(r == 3 && calls))
        return api_fail(e, 400, field, "%s has no content", field);
    if (content && content->type != COLI_JSON_STRING && content->type != COLI_JSON_NULL &&
        content->type != COLI_JSON_ARRAY)
        return api_fail(e, 400, field, "%s.content must be a string, null or an array of parts", field);
    fputs("{\"role\":", f);
    fputs(r == 1 ? "\"system\"" : "", f);
    if (r != 1)
        json_string(f, role->str, role->len);
    fputs(",\"content\":", f);
    if (!content || content->type == COLI_JSON_NULL) {
        fputs("null", f);
    } else if (content->type == COLI_JSON_STRING) {
        json_string(f, content->str, content->len);
    } else {
        /* text parts joined; no other kind of part is understood yet */
        char *joined = NULL;
        size_t jl = 0;
        FILE *g = open_memstream(&joined, &jl);
        if (!g)
            return api_fail(e, 500, NULL, "out of memory");
        for (uint32_t p = 0; p < content->len; p++) {
            const coli__json *part = &content->items[p];
            const char *type = coli__json_get_str(part, "type", NULL);
            const coli__json *text = coli__json_get(part, "text");
            if (!type || strcmp(type, "text") != 0 || !text || text->type != COLI_JSON_STRING) {
                fclose(g);
                free(joined);
                return api_fail(e, 400, field, "%s: unsupported content[].type '%.40s' (only text parts)", field,
                                type ? type : "(none)");
            }
            fwrite(text->str, 1, text->len, g);
        }
        fclose(g);
        json_string(f, joined, jl);
        free(joined);
    }
    for (uint32_t k = 0; k < msg->len; k++) {
        const coli__json *key = coli__json_key(msg, k), *v = &msg->items[k];
        if (strcmp(key->str, "role") == 0 || strcmp(key->str, "content") == 0)
            continue;
        fputc(',', f);
        json_string(f, key->str, key->len);
        fputc(':', f);
        if (strcmp(key->str, "tool_calls") == 0 && v->type == COLI_JSON_ARRAY) {
            fputc('[', f);
            for (uint32_t c = 0; c < v->len; c++) {
                fputs(c ? "," : "", f);
                write_tool_call(f, &v->items[c]);
            }
            fputc(']', f);
        } else {
            jsonval_write(f, v);
        }
    }
    fputc('}', f);
    return 0;
}

/* The template's variables as a JSON object into *vars. */
static int make_vars(const chat_tmpl *c, const coli__json *req, char **vars, size_t *len, apierr *e)
{
    const coli__json *msgs = coli__json_get(req, "messages"), *tools = coli__json_get(req, "tools");
    const coli__json *kw = coli__json_get(req, "chat_template_kwargs");
    int last_assistant = 0, rc = 0;

    if (!msgs || msgs->type != COLI_JSON_ARRAY || msgs->len == 0)
        return api_fail(e, 400, "messages", "messages must be a non-empty array");
    if (tools && tools->type != COLI_JSON_ARRAY && tools->type != COLI_JSON_NULL)
        return api_fail(e, 400, "tools", "tools must be an array");
    if (kw && kw->type != COLI_JSON_OBJECT && kw->type != COLI_JSON_NULL)
        return api_fail(e, 400, "chat_template_kwargs", "chat_template_kwargs must be an object");
    FILE *f = open_memstream(vars, len);
    if (!f)
        return api_fail(e, 500, NULL, "out of memory");
    fputs("{\"messages\":[", f);
    for (uint32_t i = 0; i < msgs->len && rc == 0; i++) {
        fputs(i ? "," : "", f);
        rc = write_message(f, &msgs->items[i], i, &last_assistant, e);
    }
    fputc(']', f);
    if (tools && tools->type == COLI_JSON_ARRAY) {
        fputs(",\"tools\":", f);
        jsonval_write(f, tools);
    }
    /* a last assistant message is continued (prefill) */
    fprintf(f, ",\"add_generation_prompt\":%s", last_assistant ? "false" : "true");
    fputs(",\"bos_token\":", f);
    json_string(f, c->bos ? c->bos : "", c->bos ? strlen(c->bos) : 0);
    fputs(",\"eos_token\":", f);
    json_string(f, c->eos ? c->eos : "", c->eos ? strlen(c->eos) : 0);
    for (uint32_t i = 0; kw && kw->type == COLI_JSON_OBJECT && i < kw->len; i++) {
        const coli__json *k = coli__json_key(kw, i);
        fputc(',', f);
        json_string(f, k->str, k->len);
        fputc(':', f);
        jsonval_write(f, &kw->items[i]);
    }
    fputc('}', f);
    fclose(f);
    if (rc != 0) {
        free(*vars);
        *vars = NULL;
    }
    return rc;
}

int chat_render(const chat_tmpl *c, const coli__json *req, char **prompt, size_t *len, apierr *e)
{
    char *vars = NULL, msg[400] = "";
    size_t vlen = 0;

    *prompt = NULL;
    if (make_vars(c, req, &vars, &vlen, e) != 0)
        return -1;
    if (!c->t) {
        free(vars);
        return api_fail(e, 400, "messages", "%s", c->why);
    }
    char *out = NULL;
    size_t n = 0;
    coli_status st = coli_chat_template_render(c->t, vars, vlen, &out, &n, msg, sizeof msg);
    free(vars);
    if (st != COLI_OK)
        return api_fail(e, 400, "messages", "the chat template failed: %s%s%s", coli_strerror(st),
                        msg[0] ? ": " : "", msg);
    *prompt = malloc(n + 1);
    if (!*prompt) {
        coli_free(out);
        return api_fail(e, 500, NULL, "out of memory");
    }
    memcpy(*prompt, out, n);
    (*prompt)[n] = '\0';
    *len = n;
    coli_free(out);
    return 0;
}
