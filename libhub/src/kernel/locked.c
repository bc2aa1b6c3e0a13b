/* hk_load_locked: load a kernel pinned by a kernels.lock, from the cache only. */
#include "kernel/kernel_internal.h"

#include "cache/cache.h"
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

HK_API int hk_load_locked(hk_kernel **out, const char *lockfile, const char *repo_id,
                          const hk_get_kernel_options *o) {
    if (!out || !lockfile || !repo_id) return hk__fail(HK_ERR_INVALID_ARG, "hk_load_locked: NULL argument");
    *out = NULL;
    int rc = o ? hk__get_kernel_options_check(o, "hk_load_locked") : HK_OK;
    if (rc) return rc;
    hk_lockfile *lock = NULL;
    rc = hk_lockfile_read(&lock, lockfile);
    if (rc) return rc;
    const hk_lock_entry *e = hk_lockfile_find(lock, repo_id);
    if (!e) {
        rc = hk__fail(HK_ERR_LOCKFILE, "%s is not locked in %s: add it and run `hubkern lock`", repo_id,
                     lockfile);
        hk_lockfile_free(lock);
        return rc;
    }
    const char *commit = hk_lock_entry_commit(e);
    const hk_env *env;
    hk_env *owned = NULL;
    hk_hub *hub = NULL;
    char *build = NULL, *best = NULL, *dir = NULL, *c2 = NULL, *v2 = NULL;
    char **names = NULL;
    size_t n = 0;
    uint64_t checked[2] = {0, 0};
    hk_get_kernel_options lo = HK_GET_KERNEL_OPTIONS_INIT;
    if (o) lo = *o;
    lo.offline = 1; /* a locked load never touches the network */
    lo.repo_id = repo_id;
    rc = hk__loader_env(&env, &owned, &lo);
    if (rc == HK_OK) rc = hk__loader_new_hub(&hub, &lo);
    if (rc == HK_OK) {
        char *repo_dir = hk_cache_repo_dir(hk_hub_cache_root(hub), HK_REPO_KERNEL, repo_id);
        build = repo_dir ? hk__asprintf("%s/snapshots/%s/build", repo_dir, commit) : NULL;
        free(repo_dir);
        if (!build) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else if (!hk__is_dir(build))
            rc = hk__fail(HK_ERR_OFFLINE, "%s at the locked commit %s is not in the cache (%s); "
                         "prefetch it with `hubkern download --lock %s`", repo_id, commit,
                         hk_hub_cache_root(hub), lockfile);
    }
    if (rc == HK_OK) rc = hk__list_subdirs(&names, &n, build);
    if (rc == HK_OK) rc = hk__loader_choose(&best, env, &lo, (const char *const *)names, n, repo_id);
    if (rc == HK_OK && hk__loader_already_loaded(out, hub, repo_id, commit, best)) goto done;
    if (rc == HK_OK && hk_lock_entry_variant_count(e) > 0)
        rc = check_variant_hash(e, build, best, repo_id, lockfile);
    if (rc == HK_OK) { /* verify sizes/digest of the cached variant, offline */
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = repo_id;
        s.revision = commit;
        s.variant = best;
        s.trust_remote_code = 1;
        s.signature = lo.signature; /* checked again from the cache unless its receipt vouches */
        rc = hk__loader_fetch_variant(&dir, &c2, &v2, checked, hub, &s);
    }
    if (rc == HK_OK) {
        hk_load_request req;
        hk__loader_fill_request(&req, &lo, env);
        req.variant_dir = dir;
        req.variant_name = best;
        req.commit = commit;
        req.bytes_verified = checked[0];
        req.bytes_trusted = checked[1];
        rc = hk__kernel_load_variant(out, &req);
    }
done:
    if (rc) hk__fail_context("loading %s locked by %s", repo_id, lockfile);
    hk__kstrv_free(names, n);
    free(build);
    hk_free(best);
    hk_free(dir);
    hk_free(c2);
    hk_free(v2);
    hk_hub_free(hub);
    hk_env_free(owned);
    hk_lockfile_free(lock);
    return rc;
}
