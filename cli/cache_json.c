/* The cache reports' findings (cache verify's, prune's and rm's entries) as JSON objects for
 * --json (docs/json.md): the fields come from the library (hk_cache_finding), this only formats
 * them. */
#include "cli/cache_json.h"

static void add_string_or_null(cJSON *o, const char *key, const char *value) {
    if (value) cJSON_AddStringToObject(o, key, value);
    else cJSON_AddNullToObject(o, key);
}

cJSON *cli_cache_finding_json(const hk_cache_finding *f) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const char *kind = hk_cache_finding_kind_name(f->kind);
    cJSON_AddStringToObject(o, "kind", kind ? kind : "note");
    add_string_or_null(o, "id", f->repo);
    add_string_or_null(o, "repo_id", f->repo_id);
    add_string_or_null(o, "path", f->path);
    cJSON_AddStringToObject(o, "message", f->message ? f->message : "");
    cJSON_AddStringToObject(o, "line", f->line ? f->line : "");
    return o;
}
