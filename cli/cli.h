/* The hubkern command line: one file per subcommand, each `int cli_cmd_<name>(int argc, char **argv)`
 * returning the process exit status (0 ok, 1 failure, 2 usage, 130 interrupted), and a static
 * `cli_spec_<name>` describing it (cli/args.h): the parser, the help, the man page and the shell
 * completions all read that spec. */
#ifndef HK_CLI_H
#define HK_CLI_H

#include "cli/args.h"

#include <hubkern.h>

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct cli_command_def {
    const char *name;
    int (*run)(int argc, char **argv);
    const cli_spec *spec;
} cli_command_def;

/* Subcommands register here; keep the list sorted by name. Each cmd_<name>.c defines
 * cli_cmd_<name> and its spec cli_spec_<name>. */
#define HK_COMMANDS(X) \
    X(benchmarks) X(bundle) X(cache) X(download) X(env) X(info) X(load) X(lock) X(publish) X(pull) X(serve) X(trust_root) \
    X(variants) X(verify_signature) X(version) X(versions)

#define HK_DECLARE(name) int cli_cmd_##name(int argc, char **argv); extern const cli_spec cli_spec_##name;
HK_COMMANDS(HK_DECLARE)
#undef HK_DECLARE

/* The command table (cli/main.c), sorted by name. */
extern const cli_command_def cli_commands[];
extern const size_t cli_ncommands;

/* ---- process-wide CLI state and output (cli/output.c) ------------------------------------- */

/* "pull", "cache verify": the name after "hubkern " in every message. */
void cli_set_command(const char *name);
const char *cli_command(void);
/* The schema version every --json document carries (docs/json.md, docs/json-schema/hubkern-1.json). */
#define CLI_JSON_SCHEMA "hubkern/1"
/* Does spec (its own tables, not the common options) have the option --name? */
int cli_spec_has(const cli_spec *spec, const char *name);
/* The spec of the running command (cli_parse sets it): hints name only options it has. */
void cli_set_spec(const cli_spec *spec);
/* --token was given: an HK_ERR_AUTH's hint names that flag rather than HF_TOKEN. */
void cli_set_token_option(int given);
/* --json was given: results (and errors) are JSON on stdout. */
void cli_set_json(int on);
int cli_json(void);
/* -v count and -q (also HUBKERN_VERBOSE); installs the log callback at that level. */
void cli_set_verbosity(int verbose, int quiet);
int cli_quiet(void);
int cli_verbose(void);

/* Print "hubkern CMD: [what: ]<hk_last_error()> [CODE]" (and a "hint:" line where the code has
 * one) on stderr and, under --json, the JSON error object on stdout. Returns the exit status: 130
 * for HK_ERR_CANCELLED, else 1. */
int cli_report_error(const char *what);
/* The same for an error found by the CLI itself: code_name is an hk_error_name() string; under --json
 * the error document ({"schema", "command", "error": {"code", "message", "hint", "exit_status"}},
 * docs/json.md) unless a JSON document was already printed (stdout stays one document). */
int cli_fail(int status, const char *code_name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Print the object j (formatted) on stdout as the command's JSON document, after the envelope's
 * "schema" and "command" (docs/json.md), and free it. */
void cli_print_json(cJSON *j);
/* cli_print_json of j with an array of n strings (get(ud, i); NULL ones left out) where j holds the
 * raw item CLI_JSON_STREAMED (cJSON_AddRawToObject), printed as each is asked for instead of through
 * a cJSON node and a copy of each and the whole text (a pull's files: ~20 MB at 100k files, its
 * peak); the same bytes as a tree of cJSON strings prints. Nothing is printed for want of memory. */
#define CLI_JSON_STREAMED "\x01"
void cli_print_json_strings(cJSON *j, size_t n, const char *(*get)(void *ud, size_t i), void *ud);
/* How to clear the line the progress display has drawn without its newline (progress.c registers
 * it): every message on stderr calls it first. NULL: nothing to clear. */
void cli_output_set_line_clear(void (*clear)(void));
/* Route the library's log callback to stderr at the given verbosity (-1: errors only, 0: warnings). */
void cli_install_logger(int verbosity);

/* ---- the Hub commands' common options (cli/common_opts.c) --------------------------------- */

/* --endpoint URL, --cache-dir DIR (alias --cache), --offline, --token TOKEN */
extern const cli_opt cli_hub_opts[];
/* The same without --offline and --token (lock: always online; download: HF_HUB_OFFLINE decides). */
extern const cli_opt cli_hub_opts_online[];

typedef struct cli_hub_args {
    const char *endpoint;
    const char *cache;
    const char *token;
    int offline; /* 1: --offline given; 0: HF_HUB_OFFLINE decides */
    int max_workers; /* concurrent file transfers (hf's --max-workers); 0: the library's default */
} cli_hub_args;

/* Read the common options out of parsed arguments (options the spec lacks stay unset). */
void cli_hub_args_get(cli_hub_args *h, const cli_args *a);
/* hk_hub_new with the common options, and a progress callback (or NULL). */
int cli_hub_open(hk_hub **out, const cli_hub_args *a, hk_progress_fn progress, void *ud);
/* A --backend value is one hubkern knows (cpu, cuda, rocm, xpu, metal, ...)? Otherwise a usage
 * error naming the known ones (returns 2); checked before any network call. */
int cli_check_backend(const char *backend);
/* --include / --exclude PATTERN (repeatable; pull and download): the values as NULL-terminated
 * lists borrowed from argv (NULL when none was given), each pattern checked non-empty. 0, or the
 * exit status after a usage error (lists freed and NULL). Free both with free(). */
int cli_pattern_lists(const char ***include, const char ***exclude, const cli_args *a);
/* "kernel/org/name", "kernels/org/name" or "kernels--org--name" (the forms `cache ls` and
 * `hf cache ls` print) → "org/name" in buf; other text is copied as is. */
const char *cli_repo_arg(char *buf, size_t cap, const char *arg);

/* When `repo` (where kernel-status.toml redirects led, e.g. hk_hub_resolve_spec's *out_repo) is not
 * `asked`, print "hubkern: note: ASKED redirects to REPO (kernel-status.toml)[; WHAT]" on stderr and
 * return true; otherwise print nothing and return false. */
bool cli_note_redirect(const char *asked, const char *repo, const char *what);

#endif
