/* The public entry of cache maintenance (hubkern/cache.h): options, the report and its accessors.
 * Each call checks its options, resolves the cache root and hands over to its run: ls.c, verify.c,
 * prune.c, rm.c. Works on any huggingface_hub-layout cache (kernels--, models--, datasets--,
 * spaces-- folders). */
#include "cache/maint_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* How much of the struct a caller built with that version's header holds. */
static size_t options_size(unsigned int version) {
    return version >= 2 ? sizeof(hk_cache_options) : offsetof(hk_cache_options, finding_fn);
}

int hk_cache_options_init(hk_cache_options *opts, unsigned int version) {
    HK__OPTIONS_INIT_SIZED(hk_cache_options, opts, version, HK_CACHE_OPTIONS_VERSION, options_size(version),
                           HK_CACHE_OPTIONS_INIT);
}

typedef int (*run_fn)(hk_cache_report *rep, const char *root, const hk_cache_options *o);

static int run(hk_cache_report **out, const hk_cache_options *opts, run_fn fn, const char *what) {
    if (out) *out = NULL;
    hk_cache_options full = HK_CACHE_OPTIONS_INIT; /* an older version's fields, the newer ones default */
    const hk_cache_options *o = &full;
    int rc = opts ? hk__check_options_version("hk_cache_options", opts->version, HK_CACHE_OPTIONS_VERSION) : HK_OK;
    if (rc) return rc;
    if (opts) memcpy(&full, opts, options_size(opts->version));
    if (fn == hk__cache_run_rm && !o->repo_id)
        return hk__fail(HK_ERR_INVALID_ARG, "%s: give the repo to remove (opts->repo_id)", what);
    if (o->repo_id && !hk_repo_id_valid(o->repo_id))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a repo id (org/name of letters, digits, '-', '_', '.')",
                        o->repo_id);
    char *root = NULL;
    if ((rc = hk_cache_root(&root, o->cache_dir, HK_REPO_KERNEL))) return rc;
    hk_cache_report *rep = calloc(1, sizeof *rep);
    if (!rep) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    else rc = fn(rep, root, o);
    free(root);
    if (rc == HK_OK) hk_clear_error(); /* helpers record errors they recover from */
    if (rc == HK_OK && out) *out = rep;
    else free(rep);
    return rc;
}

int hk_cache_ls(hk_cache_report **out, const hk_cache_options *opts) { return run(out, opts, hk__cache_run_ls, "hk_cache_ls"); }
int hk_cache_verify(hk_cache_report **out, const hk_cache_options *opts) {
    return run(out, opts, hk__cache_run_verify, "hk_cache_verify");
}
int hk_cache_prune(hk_cache_report **out, const hk_cache_options *opts) {
    return run(out, opts, hk__cache_run_prune, "hk_cache_prune");
}
int hk_cache_rm(hk_cache_report **out, const hk_cache_options *opts) { return run(out, opts, hk__cache_run_rm, "hk_cache_rm"); }

size_t hk_cache_report_repos(const hk_cache_report *r) { return r ? r->repos : 0; }
size_t hk_cache_report_snapshots(const hk_cache_report *r) { return r ? r->snapshots : 0; }
size_t hk_cache_report_blobs(const hk_cache_report *r) { return r ? r->blobs : 0; }
size_t hk_cache_report_refs(const hk_cache_report *r) { return r ? r->refs : 0; }
uint64_t hk_cache_report_bytes(const hk_cache_report *r) { return r ? r->bytes : 0; }
size_t hk_cache_report_problems(const hk_cache_report *r) { return r ? r->problems : 0; }
size_t hk_cache_report_removed(const hk_cache_report *r) { return r ? r->removed : 0; }
uint64_t hk_cache_report_removed_bytes(const hk_cache_report *r) { return r ? r->removed_bytes : 0; }
void hk_cache_report_free(hk_cache_report *r) { free(r); }
