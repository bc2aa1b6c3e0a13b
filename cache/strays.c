/* Snapshot entries of a variant that its metadata.json digest does not account for. A pull from a
 * hostile or broken mirror (before pulls staged and verified first) could leave a listed file that
 * is not in the digest (a stray), or a directory where the digest lists a file ("x.py/inner"); both
 * make every later honest pull of that commit fail. verify reports them and prune removes them, and
 * only them: the honest entries beside them, and the blobs those point to, stay. */
#include "cache/maint_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct listed {
    const char **names; /* digest.files keys, sorted (point into the parsed JSON) */
    size_t n;
} listed;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static bool is_listed(const listed *l, const char *rel) {
    return l->n && bsearch(&rel, l->names, l->n, sizeof *l->names, cmp_str) != NULL;
}

typedef struct sctx {
    const char *vdir;
    listed files;
    hk_stray_fn fn;
    void *ud;
    size_t found;
} sctx;

static void scan(sctx *c, const char *rel, int depth) {
    if (depth > 32) return; /* the digest walk stops there too */
    char *dir = rel[0] ? hk_path_join(c->vdir, rel) : hk_strdup(c->vdir);
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        if (hk_digest_skips(name, rel[0] == '\0') || hk_str_ends_with(name, ".tmp")) continue;
        char *crel = rel[0] ? hk_asprintf("%s/%s", rel, name) : hk_strdup(name);
        char *path = crel ? hk_path_join(c->vdir, crel) : NULL;
        struct stat st;
        if (path && lstat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                if (is_listed(&c->files, crel)) {
                    c->found++;
                    if (c->fn) c->fn(c->ud, path, crel, true);
                } else {
                    scan(c, crel, depth + 1);
                }
            } else if (!is_listed(&c->files, crel)) {
                c->found++;
                if (c->fn) c->fn(c->ud, path, crel, false);
            }
        }
        free(path);
        free(crel);
    }
    if (d) closedir(d);
    free(dir);
}

size_t hk_cache_variant_strays(const char *vdir, hk_stray_fn fn, void *ud) {
    char *meta = hk_path_join(vdir, "metadata.json");
    char *text = NULL;
    cJSON *j = NULL;
    if (meta && hk_read_file(&text, NULL, meta, 16u << 20) == HK_OK) j = cJSON_Parse(text);
    free(text);
    free(meta);
    hk_clear_error();
    cJSON *files = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "digest"), "files");
    sctx c = {vdir, {NULL, 0}, fn, ud, 0};
    if (cJSON_IsObject(files)) {
        size_t n = (size_t)cJSON_GetArraySize(files);
        c.files.names = n ? malloc(n * sizeof *c.files.names) : NULL;
        if (n == 0 || c.files.names) {
            cJSON *f;
            cJSON_ArrayForEach(f, files) if (f->string) c.files.names[c.files.n++] = f->string;
            if (c.files.n) qsort(c.files.names, c.files.n, sizeof *c.files.names, cmp_str);
            scan(&c, "", 0);
        }
    }
    free(c.files.names);
    cJSON_Delete(j);
    return c.found;
}
