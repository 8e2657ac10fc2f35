/*
 * coli.c - the coli command-line tool.
 *
 * A plain client of libcolibri: it uses the public header only, so every
 * thing it does can be done by any other program linked to the library.
 *
 * The option table, the parser and the help formatter are in options.c;
 * this file holds main, the table of subcommands, the help, and the
 * commands `coli serve` and `coli chat`, whose work is in tools/serve/.
 * Every other subcommand has a file of its own, declared in commands.h
 * (convert.h and gpu_report.h for convert and gpu): cmd_generate.c,
 * cmd_tokens.c (logits, tokenize, detokenize), cmd_info.c, cmd_bench.c
 * and cmd_compare.c (compare, perplexity). Those open the model with
 * model_args.c, read the prompt with prompt.c and share the help texts of
 * help_texts.h.
 * Calls go one way: from here to the command files, from those to the
 * files they use (model_args, prompt, bench, compare, perplexity,
 * gpu_report, store_report, ...), from all of them to the helpers that
 * every file shares (options, errors, jsonout, demo_dir), never back up.
 *
 * Exit status: 0 on success, 1 on a failure (the library's, printed as
 * "coli: <coli_strerror>: <detail>"; an unreadable file; a write error on
 * standard output), 2 for a usage error (an unknown subcommand or option, a
 * missing or malformed value).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <colibri/colibri.h>

#include "commands.h"
#include "convert.h"
#include "demo_dir.h"
#include "errors.h"
#include "gpu_report.h"
#include "help_texts.h"
#include "model_args.h"
#include "options.h"
#include "serve/chatcmd.h"
#include "serve/serve.h"

#include <stdio.h>
#include <string.h>

/* ---- serve ---------------------------------------------------------------- */

static const char serve_synopsis[] =
    "Usage: coli serve [--model DIR] [--host ADDR] [--port N] [OPTION]...\n"
    "Serve the model over HTTP with OpenAI's API: POST /v1/completions and\n"
    "/v1/chat/completions (whole or streamed as server-sent events), GET\n"
    "/v1/models, /health and /metrics, POST /tokenize, /detokenize and\n"
    "/apply-template.";

static const opthelp serve_options[] = {
    H_MODEL,
    {O_HOST, "address to listen on (default 127.0.0.1)"},
    {O_PORT, "port to listen on; 0 = any free one, printed on\nstandard error (default 8080)"},
    {O_PARALLEL, "slots: requests generated at once, in one batch\n(default 4)"},
    {O_CTX_SIZE, "KV cache positions of each slot (each slot has its\nown cache; default: the model's "
                 "maximum)"},
    {O_QUEUE, "requests that may wait for a slot; more get 503\n(default 16)"},
    {O_API_KEY, "require this key (Authorization: Bearer KEY or\nX-Api-Key: KEY); may be repeated; "
                "/health stays\nopen; COLI_API_KEY gives one out of sight of ps"},
    {O_API_KEY_FILE, "read the keys from FILE, one a line ('#' starts a\ncomment)"},
    {O_MAX_BODY, "largest request body, in bytes (default 16 MiB)"},
    {O_REQUEST_TIMEOUT, "seconds for a request's headers and body to\narrive after its first line, "
                        "else 408 (default 10)"},
    {O_IDLE_TIMEOUT, "seconds a connection may wait without a request\n(default 10)"},
    {O_MAX_CONNECTIONS, "connections at once (default 512); requests being\nanswered always have "
                        "room"},
    {O_MAX_CLIENT_CONNECTIONS, "connections of one address idle or sending a\nrequest (default 128; "
                               "0: no cap)"},
    {O_STOP_TIMEOUT, "seconds in-flight requests get to finish after\nSIGTERM or SIGINT (default 30)"},
    {O_ALIAS, "the model's id in responses and /v1/models\n(default: the directory's name)"},
    {O_CHAT_TEMPLATE_FILE, "the chat template (Jinja) in place of the model's"},
    {O_WEB_DIR, "the chat page served at / (index.html, chat.js,\nchat.css; default: the installed one)"},
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CPU,
    H_KV_TYPE,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text or json: the log line of each request on\nstandard error (default text)"},
    H_VERBOSE,
    H_END,
};

static const char serve_epilogue[] =
    "Sampling defaults come from the model's generation_config.json (else\n"
    "temperature 0.8, top-k 40, top-p 0.95); request fields override them.\n"
    "Requests are logged on standard error. SIGINT or SIGTERM stops the server:\n"
    "it takes no new connection and lets the requests in flight finish, for up\n"
    "to --stop-timeout seconds; a second signal stops it at once.\n";

static int serve_open(void *user, coli_model **out)
{
    return open_model(user, out);
}

static int cmd_serve(const args *a)
{
    model_args m;
    int rc;

    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (a->value[O_CTX_SIZE] != NULL) {
        rc = option_in_bounds("--ctx-size", COLI_OPT_CONTEXT, a->value[O_CTX_SIZE], &m.context);
        if (rc != 0)
            return rc;
        m.have_context = 1;
    }
    if (m.dir == NULL)
        return runtime_error(COLI_ENOENT, "no demo model in " COLI_PKGDATADIR
                                          "/demo (not installed?): give --model DIR or set "
                                          "COLI_DEMO_MODEL");
    return serve_run(a, m.dir, serve_open, &m);
}

/* ---- chat ----------------------------------------------------------------- */

static const char chat_synopsis[] =
    "Usage: coli chat [--model DIR] [--system TEXT] [OPTION]...\n"
    "Talk with the model: each line of standard input is a turn, rendered with\n"
    "the history through the model's chat template (as coli serve does) and\n"
    "answered on standard output. /clear forgets the history; /exit or the end\n"
    "of input ends. Ctrl-C stops a reply; at the prompt it ends.";

static const opthelp chat_options[] = {
    H_MODEL,
    {O_SYSTEM, "the system message that opens the conversation"},
    {O_CHAT_TEMPLATE_FILE, "the chat template (Jinja) in place of the model's"},
    {O_MAX_TOKENS, "at most N tokens a reply (default 1024)"},
    {O_TEMPERATURE, "sampling temperature; 0 = greedy (default: the\nmodel's generation_config.json, else 0.8)"},
    {O_TOP_K, "keep the K most likely tokens; 0 = off (default: the\nmodel's, else 40)"},
    {O_TOP_P, "nucleus sampling mass; 1 = off (default: the\nmodel's, else 0.95)"},
    {O_MIN_P, "drop tokens less likely than P times the most\nlikely one (default: the model's, else 0)"},
    {O_REPEAT_PENALTY, "penalise tokens seen among the last 64 (default:\nthe model's, else 1)"},
    {O_SEED, "random seed (default 0)"},
    H_WEIGHTS,
    H_Q4_GROUP,
    H_THREADS,
    H_CONTEXT,
    H_CPU,
    H_KV_TYPE,
    H_MTP,
    H_GPU,
    H_STORE,
    {O_FORMAT, "text (each reply as it comes) or json (each reply\nwhole, an object a line) (default text)"},
    H_VERBOSE,
    H_END,
};

static int cmd_chat(const args *a)
{
    model_args m;
    coli_model *model = NULL;
    int rc;

    if ((rc = parse_model_args(a, &m)) != 0)
        return rc;
    if (open_model(&m, &model) != 0)
        return 1;
    rc = chat_run(a, model, m.dir);
    coli_model_free(model);
    return rc;
}

/* ---- main ----------------------------------------------------------------- */

static const command g_commands[] = {
    {"generate", "generate text from a prompt", generate_synopsis, generate_options,
     generate_epilogue, cmd_generate},
    {"logits", "print the next-token logits of a prompt", logits_synopsis, logits_options, NULL,
     cmd_logits},
    {"tokenize", "print the token ids of a text", tokenize_synopsis, tokenize_options, NULL,
     cmd_tokenize},
    {"detokenize", "print the text of token ids", detokenize_synopsis, detokenize_options, NULL,
     cmd_detokenize},
    {"info", "describe a model", info_synopsis, info_options, NULL, cmd_info},
    {"bench", "measure prefill and decode speed against memory bandwidth", bench_synopsis,
     bench_options, bench_epilogue, cmd_bench},
    {"compare", "compare a weight format with another (top-1, KL)", compare_synopsis,
     compare_options, NULL, cmd_compare},
    {"perplexity", "measure perplexity on a text, and KL against another format", perplexity_synopsis,
     perplexity_options, perplexity_epilogue, cmd_perplexity},
    {"convert", "convert a checkpoint for streaming from disk (model.coli)", convert_synopsis,
     convert_options, convert_epilogue, cmd_convert},
    {"gpu", "list the GPU tier and the devices it sees", gpu_synopsis, gpu_options, gpu_epilogue,
     cmd_gpu},
    {"serve", "serve the model over HTTP with OpenAI's API", serve_synopsis, serve_options, serve_epilogue,
     cmd_serve},
    {"chat", "talk with the model through its chat template", chat_synopsis, chat_options, NULL, cmd_chat},
};

#define N_COMMANDS (sizeof g_commands / sizeof g_commands[0])

static const command *find_command(const char *name)
{
    size_t i;

    for (i = 0; i < N_COMMANDS; i++)
        if (strcmp(name, g_commands[i].name) == 0)
            return &g_commands[i];
    return NULL;
}

/* "unknown command 'genrate'; did you mean 'generate'?" */
static int unknown_command(const char *prog, const char *name)
{
    const char *names[N_COMMANDS + 1];
    const char *pick;
    size_t i;

    for (i = 0; i < N_COMMANDS; i++)
        names[i] = g_commands[i].name;
    names[N_COMMANDS] = "help";
    pick = did_you_mean(name, names, N_COMMANDS + 1);
    if (pick != NULL)
        fprintf(stderr, "%s: unknown command '%s'; did you mean '%s'?\n", prog, name, pick);
    else
        fprintf(stderr, "%s: unknown command '%s'\n", prog, name);
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return EXIT_USAGE;
}

static void main_usage(FILE *f)
{
    size_t i;

    fprintf(f, "Usage: coli COMMAND [OPTION]...\n"
               "  or:  coli help [COMMAND]\n"
               "  or:  coli --help | --version\n"
               "Run Mixture-of-Experts language models from Hugging Face checkpoint\n"
               "directories on the CPU.\n"
               "\n"
               "Commands:\n");
    for (i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-12s %s\n", g_commands[i].name, g_commands[i].summary);
    fprintf(f, "\n"
               "  -h, --help     display this help and exit\n"
               "  -V, --version  output version information and exit\n"
               "\n"
               "'coli COMMAND --help' or 'coli help COMMAND' describes the options of a\n"
               "command. Without --model the demo model is used: $COLI_DEMO_MODEL if set,\n"
               "else %s/demo, else the data/demo of the build\n"
               "tree when coli runs uninstalled from there.\n"
               "Exit status: 0 success, 1 failure, 2 usage error.\n",
            COLI_PKGDATADIR);
}

/* As GNU tools print it; the last line says what the library was built with. */
static void print_version(void)
{
    /* "none", or the vendor and targets: "cuda sm_80,sm_90" */
    const char *gpu = coli_gpu_tier();

    printf("coli (libcolibri) %s\n"
           "Copyright (C) 2026 the libcolibri authors.\n"
           "License MIT: <https://opensource.org/licenses/MIT>.\n"
           "This is free software: you are free to change and redistribute it.\n"
           "There is NO WARRANTY, to the extent permitted by law.\n"
           "Features: CPU%s (GPU tier: %s)\n",
           coli_version_string(), coli_has_feature(COLI_FEATURE_THREADS) ? ", threads" : "",
           gpu);
}

/* `coli help [COMMAND]` */
static int cmd_help(int argc, char **argv)
{
    const command *cmd;

    if (argc == 0) {
        main_usage(stdout);
        return 0;
    }
    if (argc > 1)
        return usage_error("unexpected argument '%s'", argv[1]);
    if ((cmd = find_command(argv[0])) == NULL)
        return unknown_command(cli_prog, argv[0]);
    print_help(cmd, stdout);
    return 0;
}

static int run_main(int argc, char **argv)
{
    static char prog[64];
    const command *cmd;
    args a;
    int rc;

    if (argc < 2) {
        main_usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        print_version();
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        main_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0)
        return cmd_help(argc - 2, argv + 2);
    if ((cmd = find_command(argv[1])) == NULL) {
        if (argv[1][0] != '-')
            return unknown_command("coli", argv[1]);
        fprintf(stderr, "coli: unknown option '%s'\n", argv[1]);
        fprintf(stderr, "Try 'coli --help'.\n");
        return EXIT_USAGE;
    }
    snprintf(prog, sizeof prog, "coli %s", cmd->name);
    cli_prog = prog;
    rc = parse_args(cmd, argc - 2, argv + 2, &a);
    if (rc == -1) {
        print_help(cmd, stdout);
        return 0;
    }
    if (rc == -2) {
        print_version();
        return 0;
    }
    if (rc != 0)
        return rc;
    return cmd->run(&a);
}

int main(int argc, char **argv)
{
    return close_stdout(run_main(argc, argv));
}
