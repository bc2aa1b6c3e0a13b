/* The cache reports' lines as JSON objects (cli/cache_json.c). */
#ifndef HK_CLI_CACHE_JSON_H
#define HK_CLI_CACHE_JSON_H

#include <cjson/cJSON.h>

/* One line of hk_cache_verify / prune / rm's report as {"kind": "problem" | "note" | "removed" |
 * "would_remove" | "failed", "id": "kernel/org/name" | null, "repo_id": "org/name" | null,
 * "path": "blobs/…" | null, "message": the text after the repo, "line": the whole line}. */
cJSON *cli_cache_line_json(const char *line);

#endif
