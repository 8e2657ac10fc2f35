/*
 * chat.h - chat messages into a prompt through the model's chat template
 * (or --chat-template-file): OpenAI's messages normalised (developer is
 * system, text parts joined, tool-call arguments given as a JSON string
 * parsed into an object), with tools, add_generation_prompt, bos_token,
 * eos_token and chat_template_kwargs' members as the template's variables.
 */
#ifndef COLI_SERVE_CHAT_H
#define COLI_SERVE_CHAT_H

#include <colibri/colibri.h>

#include "apierr.h"
#include "io/json.h"

typedef struct chat_tmpl {
    coli_chat_template *t;   /* NULL: none usable */
    char why[512];           /* why not, for the client */
    const char *bos, *eos;
} chat_tmpl;

/* Compiles the template: file's (NULL: the model's). A file that cannot be
 * read is an error (-1, message in err); a template that does not compile
 * leaves t NULL with the reason in why. */
int chat_tmpl_init(chat_tmpl *c, coli_model *m, const char *file, char *err, size_t errcap);
void chat_tmpl_free(chat_tmpl *c);

/* Renders the request's messages (req: the body's object); *prompt is
 * malloc'd. 0, or -1 with e filled. */
int chat_render(const chat_tmpl *c, const coli__json *req, char **prompt, size_t *len, apierr *e);

#endif
