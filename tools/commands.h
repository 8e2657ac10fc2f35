/*
 * commands.h - the subcommands that coli.c dispatches to, each with the
 * synopsis, option table and epilogue of its help. convert and gpu are
 * declared in convert.h and gpu_report.h; serve and chat are in coli.c.
 */
#ifndef COLI_TOOLS_COMMANDS_H
#define COLI_TOOLS_COMMANDS_H

#include "options.h"

/* `coli generate` (cmd_generate.c): text from a prompt, streamed. */
extern const char generate_synopsis[];
extern const opthelp generate_options[];
extern const char generate_epilogue[];
int cmd_generate(const args *a);

/* `coli logits` (cmd_tokens.c): the next-token logits of a prompt. */
extern const char logits_synopsis[];
extern const opthelp logits_options[];
int cmd_logits(const args *a);

/* `coli tokenize` (cmd_tokens.c): the token ids of a text. */
extern const char tokenize_synopsis[];
extern const opthelp tokenize_options[];
int cmd_tokenize(const args *a);

/* `coli detokenize` (cmd_tokens.c): the text of token ids. */
extern const char detokenize_synopsis[];
extern const opthelp detokenize_options[];
int cmd_detokenize(const args *a);

/* `coli info` (cmd_info.c): describes a model. */
extern const char info_synopsis[];
extern const opthelp info_options[];
int cmd_info(const args *a);

/* `coli bench` (cmd_bench.c): its command line; bench.c measures. */
extern const char bench_synopsis[];
extern const opthelp bench_options[];
extern const char bench_epilogue[];
int cmd_bench(const args *a);

/* `coli compare` (cmd_compare.c): its command line; compare.c measures. */
extern const char compare_synopsis[];
extern const opthelp compare_options[];
int cmd_compare(const args *a);

/* `coli perplexity` (cmd_compare.c): its command line; perplexity.c measures. */
extern const char perplexity_synopsis[];
extern const opthelp perplexity_options[];
extern const char perplexity_epilogue[];
int cmd_perplexity(const args *a);

#endif /* COLI_TOOLS_COMMANDS_H */
