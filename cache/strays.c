/* Snapshot entries of a variant that its metadata.json digest does not account for. A pull from a
 * hostile or broken mirror (before pulls staged and verified first) could leave a listed file that
 * is not in the digest (a stray), or a directory where the digest lists a file ("x.py/inner"); both
 * make every later honest pull of that commit fail. verify reports them and prune removes them, and
 * only them: the honest entries beside them, and the blobs those point to, stay. */
#include "cache/maint_internal.h"
#include "util/walk.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct sctx {
    const char *vdir;
    const hk_digest_list *files;
    hk_stray_fn fn;
    void *ud;
    size_t found;
} sctx;

static int visit(void *p, const hk_walk_entry *e, int post) {
    sctx *c = p;
    if (hk__digest_skips(e->name, e->depth == 0) || hk__str_ends_with(e->name, ".tmp")) return HK_WALK_SKIP;
    bool listed = hk__digest_list_find(c->files, e->rel) != NULL;
    if (S_ISDIR(e->st.st_mode) && !listed) return HK_WALK_CONTINUE;
    if (!listed || S_ISDIR(e->st.st_mode)) { /* a directory the digest lists as a file: its whole tree */
        c->found++;
        if (c->fn) c->fn(c->ud, e->path, e->rel, S_ISDIR(e->st.st_mode));
    }
    return HK_WALK_SKIP;
}

static size_t strays_of(const char *vdir, const hk_digest_list *files, hk_stray_fn fn, void *ud) {
    sctx c = {vdir, files, fn, ud, 0};
    if (!files->has_files) return 0;
    /* the digest walk's depth limit; only file types are looked at */
    if (hk__walk(vdir, 32, HK_WALK_TYPE_ONLY, visit, &c) != HK_OK) hk_clear_error();
    return c.found;
}

size_t hk__cache_variant_strays(const char *vdir, hk_stray_fn fn, void *ud) {
    char *meta = hk__path_join(vdir, "metadata.json");
    char *text = NULL;
    size_t len = 0;
    hk_digest_list dl = {0};
    /* a list cut short by a name listed twice still names what belongs */
    if (meta && hk__read_file(&text, &len, meta, HK_METADATA_JSON_MAX) == HK_OK)
        (void)hk__digest_list_parse(&dl, text, len, vdir);
    free(text);
    free(meta);
    hk_clear_error();
    size_t found = strays_of(vdir, &dl, fn, ud);
    hk__digest_list_free(&dl);
    return found;
}
