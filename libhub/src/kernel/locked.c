/* hk_load_locked: load a kernel pinned by a kernels.lock, from the cache only. */
#include "kernel/kernel_internal.h"

#include "cache/cache_internal.h"
#include "hubkern/hub.h"

#include <stdlib.h>
#include <string.h>

/* Old-format locks carry a git_lfs_concat hash per variant: the cached files must match it. */
static int check_variant_hash(const hk_lock_entry *e, const char *build, const char *best,
                              const char *repo_id, const char *lockfile) {
    const char *want = NULL;
    for (size_t i = 0; i < hk_lock_entry_variant_count(e); i++)
        if (strcmp(hk_lock_entry_variant_name(e, i), best) == 0) want = hk_lock_entry_variant_hash(e, i);
    if (!want) return hk__fail(HK_ERR_LOCKFILE, "%s: the lock has no hash for variant %s", repo_id, best);
    char *vdir = hk__path_join(build, best);
    char *got = NULL;
    int rc = vdir ? hk_variant_hash_from_cache(&got, vdir) : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_OK && strcmp(got, want) != 0)
        rc = hk__fail(HK_ERR_LOCKFILE, "%s variant %s in the cache hashes to %s but %s locks %s: "
                     "the cache is corrupted or the lock is stale; re-download",
                     repo_id, best, got, lockfile, want);
    hk_free(got);
    free(vdir);
    return rc;
}

/* What a locked load and a locked tree share: the lock, the env, an offline client, and the
 * root's variant at its locked commit chosen among the cached ones, with the tree below it. */
typedef struct locked {
    hk_lockfile *lock;
    const hk_lock_entry *e;
    const hk_env *env;
    hk_env *owned;
    hk_hub *hub;
    hk_get_kernel_options lo;
    char *build, *best;
    hk_kernel_tree *tree;
} locked;

static void locked_free(locked *L) {
    hk_kernel_tree_free(L->tree);
    free(L->build);
    hk_free(L->best);
    hk_hub_free(L->hub);
    hk_env_free(L->owned);
    hk_lockfile_free(L->lock);
}

/* Returns HK_OK with L->tree NULL when the root is already loaded (*out one more reference). */
static int locked_resolve(locked *L, hk_kernel **out, const char *lockfile, const char *repo_id,
                          const hk_get_kernel_options *o) {
    memset(L, 0, sizeof *L);
    int rc = hk__get_kernel_options_take(&L->lo, o, "hk_load_locked");
    if (rc) return rc;
    rc = hk_lockfile_read(&L->lock, lockfile);
    if (rc) return rc;
    L->e = hk_lockfile_find(L->lock, repo_id);
    if (!L->e)
        return hk__fail(HK_ERR_LOCKFILE, "%s is not locked in %s: add it and run `hubkern lock`", repo_id,
                       lockfile);
    const char *commit = hk_lock_entry_commit(L->e);
    /* a locked load never touches the network: its own offline client, on the caller's cache */
    if (L->lo.hub) L->lo.hub_options.cache_dir = hk_hub_cache_root(L->lo.hub);
    L->lo.hub = NULL;
    L->lo.hub_options.offline = 1;
    L->lo.repo_id = repo_id;
    rc = hk__loader_env(&L->env, &L->owned, &L->lo);
    bool owned = false;
    if (rc == HK_OK) rc = hk__loader_hub(&L->hub, &owned, &L->lo); /* always its own (hub NULL above) */
    if (rc == HK_OK) {
        char *repo_dir = hk_cache_repo_dir(hk_hub_cache_root(L->hub), HK_REPO_KERNEL, repo_id);
        L->build = repo_dir ? hk__cache_snapshot_path(repo_dir, commit, "build") : NULL;
        free(repo_dir);
        if (!L->build) rc = hk_last_error_code();
        else if (!hk__is_dir(L->build))
            rc = hk__fail(HK_ERR_OFFLINE, "%s at the locked commit %s is not in the cache (%s); "
                         "prefetch it with `hubkern download --lock %s`", repo_id, commit,
                         hk_hub_cache_root(L->hub), lockfile);
    }
    char **names = NULL;
    size_t n = 0;
    if (rc == HK_OK) rc = hk__list_subdirs(&names, &n, L->build);
    if (rc == HK_OK) rc = hk__loader_choose(&L->best, L->env, &L->lo, (const char *const *)names, n, repo_id);
    hk__kstrv_free(names, n);
    if (rc) return rc;
    if (out && hk__loader_already_loaded(out, L->hub, repo_id, commit, L->best)) return HK_OK;
    /* the tree below the root, every node pinned by the lock and read from the cache */
    size_t root = 0;
    rc = hk__tree_new(&L->tree);
    int ver = hk_lock_entry_version(L->e);
    if (rc == HK_OK) rc = hk__tree_push(&root, L->tree, repo_id, ver, hk_lock_entry_revision(L->e), -1);
    if (rc == HK_OK) {
        hk__tnode *r = &L->tree->v[root];
        if (!hk_lock_entry_revision(L->e) && ver == HK_VERSION_UNSET && !(r->revision = hk__strdup(commit)))
            rc = hk__fail(HK_ERR_NOMEM, "out of memory"); /* old format: pinned by commit only */
        r->repo_id = hk__strdup(repo_id);
        r->commit = hk__strdup(commit);
        r->variant = hk__strdup(L->best);
        if (rc == HK_OK && (!r->repo_id || !r->commit || !r->variant)) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (rc == HK_OK) {
        char *vdir = hk__path_join(L->build, L->best);
        rc = vdir ? hk__metadata_read(&L->tree->v[root].md, vdir) : hk__fail(HK_ERR_NOMEM, "out of memory");
        free(vdir);
        if (rc == HK_OK) L->tree->v[root].has_md = true;
        else if (rc != HK_ERR_NOMEM) { /* the load below reports a damaged variant */
            hk_clear_error();
            rc = HK_OK;
        }
    }
    if (rc == HK_OK) {
        hk__tree_ctx c = {L->hub, L->env, &L->lo, L->lock, lockfile, true, true, false};
        rc = hk__tree_expand(L->tree, root, &c);
    }
    return rc;
}

int hk__locked_tree(hk_kernel_tree **out, const char *repo_id, const hk_get_kernel_options *o,
                    const char *lockfile) {
    if (!repo_id) repo_id = o ? o->repo_id : NULL;
    if (!repo_id) return hk__fail(HK_ERR_INVALID_ARG, "options with a repo_id are required");
    locked L;
    int rc = locked_resolve(&L, NULL, lockfile, repo_id, o);
    if (rc == HK_OK) {
        *out = L.tree;
        L.tree = NULL;
        hk_clear_error();
    } else {
        hk__fail_context("resolving %s locked by %s", repo_id, lockfile);
    }
    locked_free(&L);
    return rc;
}

HK_API int hk_load_locked(hk_kernel **out, const char *lockfile, const char *repo_id,
                          const hk_get_kernel_options *o) {
    if (!out || !lockfile || !repo_id) return hk__fail(HK_ERR_INVALID_ARG, "hk_load_locked: NULL argument");
    *out = NULL;
    locked L;
    char *dir = NULL, *c2 = NULL, *v2 = NULL;
    uint64_t checked[2] = {0, 0};
    hk_kernel **deps = NULL;
    size_t ndeps = 0;
    int rc = locked_resolve(&L, out, lockfile, repo_id, o);
    if (rc || *out) goto done;
    const char *commit = hk_lock_entry_commit(L.e);
    if (hk_lock_entry_variant_count(L.e) > 0) rc = check_variant_hash(L.e, L.build, L.best, repo_id, lockfile);
    if (rc == HK_OK) rc = hk__tree_check_minver(L.tree); /* kernels load_kernel: the default validators */
    if (rc == HK_OK) {
        hk__tree_ctx c = {L.hub, L.env, &L.lo, L.lock, lockfile, true, true, false};
        rc = hk__tree_load_root_deps(&deps, &ndeps, L.tree, &c); /* dependencies load first */
    }
    if (rc == HK_OK) { /* verify sizes/digest of the cached variant, offline */
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = repo_id;
        s.revision = commit;
        s.variant = L.best;
        s.trust_remote_code = 1;
        s.signature = L.lo.signature; /* checked again from the cache unless its receipt vouches */
        rc = hk__loader_fetch_variant(&dir, &c2, &v2, checked, L.hub, &s, NULL);
    }
    if (rc == HK_OK) {
        hk_load_request req;
        hk__loader_fill_request(&req, &L.lo, L.env);
        req.variant_dir = dir;
        req.variant_name = L.best;
        req.commit = commit;
        req.bytes_verified = checked[0];
        req.bytes_trusted = checked[1];
        rc = hk__kernel_load_variant(out, &req);
    }
    if (rc == HK_OK) {
        hk__kernel_set_deps(*out, deps, ndeps);
        deps = NULL;
        ndeps = 0;
    }
done:
    hk__kernel_unref_all(deps, ndeps);
    if (rc) hk__fail_context("loading %s locked by %s", repo_id, lockfile);
    hk_free(dir);
    hk_free(c2);
    hk_free(v2);
    locked_free(&L);
    return rc;
}
