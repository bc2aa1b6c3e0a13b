/* What `hubkern cache` (cmd_cache.c) hands to its helpers: the rm confirmation (cache_confirm.c)
 * and verify --repair (cache_repair.c). */
#ifndef HK_CLI_CACHE_CMDS_H
#define HK_CLI_CACHE_CMDS_H

#include <hubkern.h>

#include <stddef.h>

/* Ask before `cache rm` removes repo (o: its options): 0 yes; 3 the answer was no (nothing
 * removed); 2 (usage error printed) when it cannot ask: --json, or stdin is not a terminal. */
int cli_cache_confirm_rm(const hk_cache_options *o, const char *repo);
/* A line_fn keeping the one JSON document of hk_cache_ls (ud: char **, freed with free). */
void cli_cache_keep_doc(void *ud, const char *doc);
/* Pull every cached kernel variant of root (or of repo_id) again at its commit from endpoint (NULL:
 * HF_ENDPOINT), reporting each repair and each failure through fn; *failed counts the failures.
 * Returns 0, or the exit status after an error that stopped it (offline, no client). */
int cli_cache_repair(const char *root, const char *repo_id, const char *endpoint, hk_cache_line_fn fn, void *ud,
                     size_t *failed);

#endif
