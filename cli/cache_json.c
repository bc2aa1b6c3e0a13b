/* The cache reports' lines (cache verify's findings, prune's and rm's removals) as JSON objects
 * for --json (docs/json.md). The library reports each as one line of a fixed grammar,
 * "PROBLEM: kernel/org/name: TEXT", "note: kernel/org/name: TEXT", "removed kernel/org/name: WHAT",
 * "would remove kernel/org/name: WHAT", "cannot remove PATH: ERROR"; this reads that grammar back
 * into fields so that scripts never parse prose. */
#include "cli/cache_json.h"

#include <stdio.h>
#include <string.h>

/* "kernel/org/name" → id and repo_id ("org/name"); null for both when the label is not one */
static void add_repo(cJSON *o, const char *label, size_t len) {
    char id[512];
    snprintf(id, sizeof id, "%.*s", (int)(len < sizeof id - 1 ? len : sizeof id - 1), label);
    const char *slash = strchr(id, '/');
    if (!slash || !strchr(slash + 1, '/')) {
        cJSON_AddNullToObject(o, "id");
        cJSON_AddNullToObject(o, "repo_id");
        return;
    }
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "repo_id", slash + 1);
}

/* the first cache path (blobs/…, snapshots/…, refs/…) the text names, else null */
static void add_path(cJSON *o, const char *text) {
    static const char *const roots[] = {"blobs/", "snapshots/", "refs/"};
    const char *best = NULL;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        const char *p = text;
        while ((p = strstr(p, roots[i])) != NULL && p != text && p[-1] != ' ') p++;
        if (p && (!best || p < best)) best = p;
    }
    if (!best) {
        cJSON_AddNullToObject(o, "path");
        return;
    }
    size_t n = strcspn(best, " :,;()");
    char path[1024];
    snprintf(path, sizeof path, "%.*s", (int)(n < sizeof path - 1 ? n : sizeof path - 1), best);
    cJSON_AddStringToObject(o, "path", path);
}

cJSON *cli_cache_line_json(const char *line) {
    static const struct {
        const char *prefix, *kind;
    } k[] = {
        {"PROBLEM: ", "problem"}, {"note: ", "note"}, {"would remove ", "would_remove"}, {"removed ", "removed"},
        {"cannot remove ", "failed"},
    };
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const char *kind = "note", *rest = line;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strncmp(line, k[i].prefix, strlen(k[i].prefix)) == 0) {
            kind = k[i].kind;
            rest = line + strlen(k[i].prefix);
            break;
        }
    cJSON_AddStringToObject(o, "kind", kind);
    const char *colon = strstr(rest, ": ");
    if (strcmp(kind, "failed") == 0 || !colon) { /* "cannot remove PATH: ERROR" names a file, not a repo */
        cJSON_AddNullToObject(o, "id");
        cJSON_AddNullToObject(o, "repo_id");
        add_path(o, rest);
        cJSON_AddStringToObject(o, "message", rest);
    } else {
        add_repo(o, rest, (size_t)(colon - rest));
        add_path(o, colon + 2);
        cJSON_AddStringToObject(o, "message", colon + 2);
    }
    cJSON_AddStringToObject(o, "line", line);
    return o;
}
