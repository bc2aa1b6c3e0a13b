/* Snapshot entries of a variant that its metadata.json digest does not account for. A pull from a
 * hostile or broken mirror (before pulls staged and verified first) could leave a listed file that
 * is not in the digest (a stray), or a directory where the digest lists a file ("x.py/inner"); both
 * make every later honest pull of that commit fail. verify reports them and prune removes them, and
 * only them: the honest entries beside them, and the blobs those point to, stay. */
#include "cache/maint_internal.h"
#include "util/walk.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct listed_names {
    const char **names; /* digest.files keys, sorted (point into the parsed JSON) */
    size_t n;
} listed_names;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static bool is_listed(const listed_names *l, const char *rel) {
    return l->n && bsearch(&rel, l->names, l->n, sizeof *l->names, cmp_str) != NULL;
}

typedef struct sctx {
    const char *vdir;
    listed_names files;
    hk_stray_fn fn;
    void *ud;
    size_t found;
} sctx;

static int visit(void *p, const hk_walk_entry *e, int post) {
    sctx *c = p;
    if (hk__digest_skips(e->name, e->depth == 0) || hk__str_ends_with(e->name, ".tmp")) return HK_WALK_SKIP;
    bool listed = is_listed(&c->files, e->rel);
    if (S_ISDIR(e->st.st_mode) && !listed) return HK_WALK_CONTINUE;
    if (!listed || S_ISDIR(e->st.st_mode)) { /* a directory the digest lists as a file: its whole tree */
        c->found++;
        if (c->fn) c->fn(c->ud, e->path, e->rel, S_ISDIR(e->st.st_mode));
    }
    return HK_WALK_SKIP;
}

size_t hk__cache_variant_strays_of(const char *vdir, const cJSON *files, hk_stray_fn fn, void *ud) {
    sctx c = {vdir, {NULL, 0}, fn, ud, 0};
    if (!cJSON_IsObject(files)) return 0;
    size_t n = (size_t)cJSON_GetArraySize(files);
    c.files.names = n ? malloc(n * sizeof *c.files.names) : NULL;
    if (n == 0 || c.files.names) {
        const cJSON *f;
        cJSON_ArrayForEach(f, files) if (f->string) c.files.names[c.files.n++] = f->string;
        if (c.files.n) qsort(c.files.names, c.files.n, sizeof *c.files.names, cmp_str);
        /* the digest walk's depth limit; only file types are looked at */
        if (hk__walk(vdir, 32, HK_WALK_TYPE_ONLY, visit, &c) != HK_OK) hk_clear_error();
    }
    free(c.files.names);
    return c.found;
}

size_t hk__cache_variant_strays(const char *vdir, hk_stray_fn fn, void *ud) {
    char *meta = hk__path_join(vdir, "metadata.json");
    char *text = NULL;
    cJSON *j = NULL;
    if (meta && hk__read_file(&text, NULL, meta, HK_METADATA_JSON_MAX) == HK_OK) j = cJSON_Parse(text);
    free(text);
    free(meta);
    hk_clear_error();
    size_t found = hk__cache_variant_strays_of(vdir, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "digest"), "files"), fn, ud);
    cJSON_Delete(j);
    return found;
}
