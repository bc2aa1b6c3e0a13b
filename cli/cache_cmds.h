/* What `hubkern cache` (cmd_cache.c) hands to its helpers: the rm and prune confirmation (cache_confirm.c)
 * and verify --repair (cache_repair.c). */
#ifndef HK_CLI_CACHE_CMDS_H
#define HK_CLI_CACHE_CMDS_H

#include <hubkern.h>

#include <stddef.h>

/* hk_cache_rm or hk_cache_prune: the removals cli_cache_confirm asks about. */
typedef int (*cli_cache_run_fn)(hk_cache_report **out, const hk_cache_options *opts);
/* Ask before run (o: its options) removes anything: its dry run lists what would go (on stderr),
 * then "[y/N]". 0: yes, or nothing would go; 3: the answer was no (nothing removed); 2 (usage
 * error printed) when it cannot ask: --json, or stdin is not a terminal; 1 when the dry run failed
 * (error printed). what names the removal in the refusal ("remove org/name", "prune the cache"). */
int cli_cache_confirm(cli_cache_run_fn run, const hk_cache_options *o, const char *what);
/* A line_fn keeping the one JSON document of hk_cache_ls (ud: char **, freed with free). */
void cli_cache_keep_doc(void *ud, const char *doc);
/* Pull every cached kernel variant of root (or of repo_id) again at its commit from endpoint (NULL:
 * HF_ENDPOINT), reporting each repair (HK_CACHE_NOTE, "repaired ...") and each failure
 * (HK_CACHE_PROBLEM) through fn, as cache verify reports its findings; *failed counts the
 * failures. Returns 0, or the exit status after an error that stopped it (offline, no client). */
int cli_cache_repair(const char *root, const char *repo_id, const char *endpoint, hk_cache_finding_fn fn, void *ud,
                     size_t *failed);

#endif
