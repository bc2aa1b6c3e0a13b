/* The hubkern command line: one file per subcommand, each `int hk_cmd_<name>(int argc, char **argv)`
 * returning the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef HK_CLI_H
#define HK_CLI_H

#include <hubkern.h>

#include <stdbool.h>
#include <stdio.h>

typedef struct hk_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} hk_command;

/* Print "hubkern: <hk_last_error()>" (with the code name) to stderr and return 1. */
int hk_cli_report_error(const char *what);
/* Route the library's log callback to stderr at the given verbosity. */
void hk_cli_install_logger(int verbosity);

/* Options common to the Hub commands (--endpoint URL, --cache DIR, --offline); cli/common_opts.c. */
typedef struct hk_cli_hub_args {
    const char *endpoint;
    const char *cache;
    int offline; /* 1: --offline given; 0: HF_HUB_OFFLINE decides */
} hk_cli_hub_args;

/* Consumes argv[*i] (and its value) when it is a common option; returns 1 if consumed, 0 if not,
 * -1 on a missing value (after printing "hubkern: OPT needs a value"). */
int hk_cli_hub_opt(hk_cli_hub_args *a, int argc, char **argv, int *i);
/* hk_hub_new with the common options, and a progress callback (or NULL). */
int hk_cli_hub_open(hk_hub **out, const hk_cli_hub_args *a, hk_progress_fn progress, void *ud);

/* When `repo` (where kernel-status.toml redirects led, e.g. hk_hub_resolve_spec's *out_repo) is not
 * `asked`, print "hubkern: note: ASKED redirects to REPO (kernel-status.toml)[; WHAT]" on stderr and
 * return true; otherwise print nothing and return false. */
bool hk_cli_note_redirect(const char *asked, const char *repo, const char *what);

#endif
