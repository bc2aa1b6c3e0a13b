/* The confirmation of hubkern cache rm and cache prune, in the spirit of `hf cache rm`: what would
 * go is listed (a dry run of the same call) and a person says yes; -y/--yes skips the question; with no terminal to ask on (a script, a pipe) or
 * under --json, it refuses instead of deleting unasked. */
#include "cli/cache_cmds.h"
#include "cli/cli.h"

#include <hubkern.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void cli_cache_keep_doc(void *ud, const char *doc) {
    char **out = ud;
    free(*out);
    *out = strdup(doc);
}

static void to_stderr(void *ud, const char *line) {
    (void)ud;
    fprintf(stderr, "  %s\n", line);
}

int cli_cache_confirm(cli_cache_run_fn run, const hk_cache_options *o, const char *what) {
    /* the dry run first, so that a repo that is not there fails as such, before any question */
    const bool ask = !cli_json() && isatty(STDIN_FILENO);
    hk_cache_options dry = *o;
    dry.dry_run = 1;
    dry.json = 0;
    dry.line_fn = ask ? to_stderr : NULL; /* the list goes to the person, not into the result */
    dry.line_userdata = NULL;
    dry.finding_fn = NULL;
    dry.finding_userdata = NULL;
    hk_cache_report *rep = NULL;
    if (run(&rep, &dry) != HK_OK) return cli_report_error(NULL);
    size_t n = hk_cache_report_removed(rep);
    uint64_t bytes = hk_cache_report_removed_bytes(rep);
    hk_cache_report_free(rep);
    if (n == 0) return 0; /* nothing would go: nothing to agree to */
    if (!ask)
        return cli_usage_error("refusing to %s without confirmation (%zu entr%s, %.1f MB): %s; pass -y (--yes) to "
                               "go ahead, or --dry-run to list what would go", what, n, n == 1 ? "y" : "ies",
                               bytes / 1e6, cli_json() ? "--json cannot ask" : "stdin is not a terminal");
    fprintf(stderr, "Remove these %zu entr%s (%.1f MB)? [y/N] ", n, n == 1 ? "y" : "ies", bytes / 1e6);
    fflush(stderr);
    char answer[16] = "";
    if (!fgets(answer, sizeof answer, stdin)) answer[0] = '\0';
    answer[strcspn(answer, "\r\n")] = '\0';
    if (strcasecmp(answer, "y") == 0 || strcasecmp(answer, "yes") == 0) return 0;
    fprintf(stderr, "hubkern %s: nothing removed\n", cli_command());
    return 3;
}
