/* The cache reports' findings as JSON objects (cli/cache_json.c). */
#ifndef HK_CLI_CACHE_JSON_H
#define HK_CLI_CACHE_JSON_H

#include <hubkern.h>

#include <cjson/cJSON.h>

/* One finding of hk_cache_verify / prune / rm (or of verify --repair) as {"kind": "problem" |
 * "note" | "removed" | "would_remove" | "failed", "id": "kernel/org/name" | null, "repo_id":
 * "org/name" | null, "path": "blobs/…" | null, "message": the text after the repo, "line": the
 * whole line}. */
cJSON *cli_cache_finding_json(const hk_cache_finding *f);

#endif
