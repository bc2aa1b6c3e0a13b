/* hk_get_kernel and hk_has_kernel: the joins between the env (env.h), the chooser (variant.h), the
 * client and cache (hub.h) and the loader (kernel.c). LOCAL_KERNELS and hk_get_local_kernel are in
 * local.c, hk_load_locked in locked.c, what they share in loader.c. */
#include "kernel/kernel_internal.h"

#include "cache/cache_internal.h"
#include "client/client.h"
#include "client/memo.h"
#include "hubkern/hub.h"

#include <stdlib.h>
#include <string.h>

/* ---- from the Hub --------------------------------------------------------------------------- */

/* The caller's options taken once (any known struct version) into *o, and checked. */
static int check_opts(hk_get_kernel_options *o, const hk_get_kernel_options *opts, const char *fn) {
    if (!opts) return hk__fail(HK_ERR_INVALID_ARG, "%s: options with a repo_id are required", fn);
    int rc = hk__get_kernel_options_take(o, opts, fn);
    if (rc) return rc;
    if (!o->repo_id) return hk__fail(HK_ERR_INVALID_ARG, "options with a repo_id are required");
    if (!hk__kernel_repo_id_valid(o->repo_id))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a kernel repo id (org/name)", o->repo_id);
    bool has_version = o->kernel_version != HK_VERSION_UNSET;
    if (has_version && o->kernel_version < 0)
        return hk__fail(HK_ERR_INVALID_ARG, "version must be a non-negative integer (got %d)",
                       o->kernel_version);
    if (has_version == (o->revision != NULL))
        return hk__fail(HK_ERR_INVALID_ARG, "give exactly one of version and revision for %s", o->repo_id);
    if (o->revision && !hk__revision_valid(o->revision))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a revision name (a branch, tag or commit)", o->revision);
    if (o->variant && !hk__variant_name_valid(o->variant))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a variant name", o->variant);
    return HK_OK;
}




/* Where o leads on the Hub and which variant to load there: resolve the version/revision, follow
 * kernel-status.toml redirects (the one resolution of the call: the pull and the dependency tree
 * are handed *t), list build/ at the repo and commit the chain ends at and choose among those
 * names for this machine and process. *t is freed with hk__target_free, *out_best with free. */
static int resolve_target(hk__target *t, char **out_best, hk_hub *hub, const hk_env *env,
                          const hk_get_kernel_options *o, int trust_remote_code) {
    *out_best = NULL;
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = o->repo_id;
    s.kernel_version = o->kernel_version == HK_VERSION_UNSET ? -1 : o->kernel_version;
    s.revision = o->revision;
    s.trust_remote_code = trust_remote_code;
    s.signature = o->signature;
    int rc = hk__client_resolve_target(t, hub, &s, 0);
    if (rc) return rc;
    char **names = NULL;
    size_t n = 0;
    rc = hk_hub_list_variants(&names, &n, hub, t->repo, t->commit);
    if (rc == HK_OK) {
        bool moved = strcmp(t->repo, o->repo_id) != 0;
        char *where = hk__asprintf("%s@%s%s%s%s", t->repo, t->commit, moved ? " (redirected from " : "",
                                  moved ? o->repo_id : "", moved ? ")" : "");
        rc = where ? hk__loader_choose(out_best, env, o, (const char *const *)names, n, where)
                   : hk__fail(HK_ERR_NOMEM, "out of memory");
        free(where);
    }
    if (names) hk_hub_strv_free(names);
    if (rc) hk__target_free(t);
    return rc;
}

/* The metadata-only part of the GPU fitness check, before anything of the variant but its
 * metadata.json is fetched: kernels 0.17.2 downloads build/<variant>/metadata.json of the resolved
 * variant and runs its ArchValidator on it before installing the rest (get_kernel) or answering
 * (has_kernel). The metadata comes from the snapshot when cached, else online as that one file.
 * HK_OK when skipped (skip_arch_check), when nothing can be checked (no GPU known to the env:
 * nothing is fetched then; offline and not cached; an unreadable metadata.json: the pull and load
 * that follow report those), or when the archs admit the device; HK_ERR_ARCH naming the variant
 * otherwise. */
static int precheck_arch(hk_hub *hub, const hk__target *t, const char *variant, const hk_get_kernel_options *o,
                         const hk_env *env, bool store) {
    const char *repo = t->repo, *commit = t->commit;
    if (o->skip_arch_check) return HK_OK;
    hk_load_request req;
    hk__loader_fill_request(&req, o, env);
    /* no CUDA capability and no ROCm arch known: no archs list can refuse it, nothing to fetch */
    if (req.cuda_major < 0 && !req.gpu_arch) return HK_OK;
    hk_metadata_owned md;
    int rc;
    if (!store) { /* read, not kept: a fetch or parse failure leaves the check to the pull and load */
        rc = hk__tree_fetch_metadata(&md, hub, repo, commit, variant, t->signature, false);
    } else {
        char *rel = hk__asprintf("build/%s/metadata.json", variant);
        if (!rel) return hk__fail(HK_ERR_NOMEM, "out of memory");
        char *path = NULL;
        rc = hk__hub_fetch_file(&path, hub, repo, commit, rel, t->signature);
        free(rel);
        if (rc == HK_ERR_OFFLINE) {
            hk_clear_error();
            return HK_OK;
        }
        if (rc) return hk__fail_context("fetching the metadata.json of %s variant %s", repo, variant);
        char *data = NULL;
        size_t len = 0;
        rc = hk__read_file(&data, &len, path, 1u << 20);
        if (rc == HK_OK) rc = hk__metadata_parse(&md, data, len, path);
        free(data);
        hk_free(path);
    }
    if (rc == HK_ERR_NOMEM) return rc;
    if (rc) {
        hk__log(HK_LOG_DEBUG, "%s variant %s: metadata.json not read before the pull (%s); the load "
               "checks it", repo, variant, hk_last_error());
        hk_clear_error();
        return HK_OK;
    }
    rc = hk__kernel_check_metadata_fitness(&md.pub, &req);
    hk__metadata_free(&md);
    if (rc) hk__fail_context("%s variant %s at %s", repo, variant, commit);
    return rc;
}

/* The ktree below the root o leads to (repo@commit, variant best): the root's metadata.json (from
 * the cache, else fetched alone; when it cannot be read the root has no known dependencies and
 * has_md false: callers refuse such a tree with root_metadata_error), then every dependency,
 * resolved. */
static int build_tree(hk_kernel_tree **out, hk_hub *hub, const hk_env *env, const hk_get_kernel_options *o,
                      const hk__target *tg, const char *best, bool trust_deps, bool store, bool local) {
    const char *repo = tg->repo, *commit = tg->commit;
    hk_kernel_tree *t = NULL;
    size_t root = 0;
    int rc = hk__tree_new(&t);
    if (rc == HK_OK) rc = hk__tree_push(&root, t, o->repo_id, o->kernel_version, o->revision, -1);
    if (rc == HK_OK) {
        hk__tnode *n = &t->v[root];
        n->repo_id = hk__strdup(repo);
        n->commit = hk__strdup(commit);
        n->variant = hk__strdup(best);
        n->signature = tg->signature; /* the dependencies inherit it (deps.c) */
        if (!n->repo_id || !n->commit || !n->variant) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (rc == HK_OK) {
        rc = hk__tree_fetch_metadata(&t->v[root].md, hub, repo, commit, best, tg->signature, store);
        if (rc == HK_OK) t->v[root].has_md = true;
        else if (rc != HK_ERR_NOMEM) {
            hk__log(HK_LOG_DEBUG, "%s variant %s: metadata.json unreadable before the pull (%s); no "
                   "dependencies known", repo, best, hk_last_error());
            hk_clear_error();
            rc = HK_OK;
        }
    }
    if (rc == HK_OK) {
        hk__tree_ctx c = {hub, env, o, NULL, NULL, trust_deps, store, local};
        rc = hk__tree_expand(t, root, &c);
    }
    if (rc) hk_kernel_tree_free(t);
    else *out = t;
    return rc;
}

/* The error of a tree whose root metadata.json could not be read before the pull: kernels'
 * resolve_kernel_tree reads it first and refuses the tree, before anything is installed. */
static int root_metadata_error(hk_hub *hub, const hk_kernel_tree *t, bool store) {
    const hk__tnode *r = &t->v[0];
    hk_metadata_owned md;
    int rc = hk__tree_fetch_metadata(&md, hub, r->repo_id, r->commit, r->variant, r->signature, store);
    if (rc == HK_OK) {
        hk__metadata_free(&md);
        rc = hk__fail(HK_ERR_INTERNAL, "the metadata.json of %s variant %s was unreadable, then read",
                      r->repo_id, r->variant);
    }
    hk__fail_context("%s@%s variant %s (refused before the pull: nothing of it was published to the snapshot)",
                     r->repo_id, r->commit, r->variant);
    return rc;
}

int hk__tree_resolve_hub(hk_kernel_tree **out, hk_hub *hub, const hk_env *env, const hk_get_kernel_options *o,
                         bool trust_root, bool trust_deps, bool store) {
    *out = NULL;
    hk__target t;
    char *best = NULL;
    int rc = resolve_target(&t, &best, hub, env, o, trust_root);
    if (rc) return rc;
    rc = precheck_arch(hub, &t, best, o, env, store);
    if (rc == HK_OK) rc = build_tree(out, hub, env, o, &t, best, trust_deps, store, false);
    hk__target_free(&t);
    hk_free(best);
    return rc;
}

HK_API int hk_kernel_tree_resolve(hk_kernel_tree **out, const hk_get_kernel_options *opts, const char *lockfile) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_kernel_tree_resolve: out is NULL");
    *out = NULL;
    if (lockfile) return hk__locked_tree(out, NULL, opts, lockfile);
    hk_get_kernel_options oc;
    const hk_get_kernel_options *o = &oc;
    int rc = check_opts(&oc, opts, "hk_kernel_tree_resolve");
    if (rc) return rc;
    const hk_env *env;
    hk_env *owned;
    rc = hk__loader_env(&env, &owned, o);
    if (rc) return rc;
    hk_hub *hub = NULL;
    bool hub_owned = false;
    hk__memo_op_begin(); /* each question once in this call, whatever the freshness window */
    rc = hk__loader_hub(&hub, &hub_owned, o);
    /* a read-only client (`hubkern info`) leaves the cache as it was: metadata.json read, not kept */
    bool store = rc == HK_OK && !hub->read_only;
    if (rc == HK_OK) rc = hk__tree_resolve_hub(out, hub, env, o, o->trust_remote_code, o->trust_remote_code, store);
    if (rc == HK_OK && !(*out)->v[0].has_md) {
        rc = root_metadata_error(hub, *out, store);
        hk_kernel_tree_free(*out);
        *out = NULL;
    }
    if (rc == HK_OK) hk_clear_error();
    if (hub_owned) hk_hub_free(hub);
    hk__memo_op_end();
    hk_env_free(owned);
    return rc;
}

HK_API int hk_get_kernel(hk_kernel **out, const hk_get_kernel_options *opts) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_get_kernel: out is NULL");
    *out = NULL;
    hk_get_kernel_options oc;
    const hk_get_kernel_options *o = &oc;
    int rc = check_opts(&oc, opts, "hk_get_kernel");
    if (rc) return rc;
    if (!o->no_local_kernels) {
        char *local = NULL;
        rc = hk__local_kernels_lookup(&local, o->repo_id);
        if (rc) return rc;
        if (local) {
            hk__log(HK_LOG_INFO, "%s: loading from LOCAL_KERNELS path %s", o->repo_id, local);
            rc = hk__local_kernel_load(out, local, o->repo_id, o);
            if (rc) hk__fail_context("LOCAL_KERNELS %s=%s", o->repo_id, local);
            free(local);
            return rc;
        }
    }
    const hk_env *env;
    hk_env *owned;
    rc = hk__loader_env(&env, &owned, o);
    if (rc) return rc;
    hk_hub *hub = NULL;
    bool hub_owned = false;
    hk__target t = {0};
    char *best = NULL, *dir = NULL, *got_commit = NULL, *got_variant = NULL;
    uint64_t checked[2] = {0, 0};
    hk_kernel_tree *ktree = NULL;
    hk_kernel **deps = NULL;
    size_t ndeps = 0;
    hk__memo_op_begin(); /* each question once in this call, whatever the freshness window */
    rc = hk__loader_hub(&hub, &hub_owned, o);
    if (rc == HK_OK) rc = resolve_target(&t, &best, hub, env, o, o->trust_remote_code);
    if (rc == HK_OK && hk__loader_already_loaded(out, hub, t.repo, t.commit, best)) goto done;
    if (rc == HK_OK) rc = precheck_arch(hub, &t, best, o, env, true); /* before the download */
    /* the whole ktree is resolved (and checked) before anything of it is installed, as kernels does */
    if (rc == HK_OK) rc = build_tree(&ktree, hub, env, o, &t, best, o->trust_remote_code, true, !o->no_local_kernels);
    /* an unreadable root metadata.json refuses the tree before the pull, as kernels does */
    if (rc == HK_OK && !ktree->v[0].has_md) rc = root_metadata_error(hub, ktree, true);
    if (rc == HK_OK) rc = hk__tree_check_minver(ktree); /* kernels validates the tree before installing */
    if (rc == HK_OK) {
        hk__tree_ctx c = {hub, env, o, NULL, NULL, o->trust_remote_code, true, false};
        rc = hk__tree_load_root_deps(&deps, &ndeps, ktree, &c); /* dependencies load first */
    }
    if (rc == HK_OK) {
        /* the pull is handed the resolution above: nothing is resolved or followed twice */
        hk_pull_spec s = hk__loader_pull_spec(o, &t, best); /* best: chosen at the chain's end */
        rc = hk__loader_fetch_variant(&dir, &got_commit, &got_variant, checked, hub, &s, &t);
    }
    if (rc == HK_OK) {
        hk_load_request req;
        hk__loader_fill_request(&req, o, env);
        req.variant_dir = dir;
        req.variant_name = got_variant;
        req.commit = got_commit;
        req.repo_id = t.repo; /* the handle reports the repo it was loaded from, after redirects */
        req.bytes_verified = checked[0];
        req.bytes_trusted = checked[1];
        rc = hk__kernel_load_variant(out, &req);
    }
    if (rc == HK_OK && ktree) {
        hk__kernel_set_deps(*out, deps, ndeps);
        deps = NULL;
        ndeps = 0;
    }
done:
    hk__kernel_unref_all(deps, ndeps);
    hk_kernel_tree_free(ktree);
    if (rc) hk__fail_context("getting %s", o->repo_id);
    hk__target_free(&t);
    hk_free(best);
    hk_free(dir);
    hk_free(got_commit);
    hk_free(got_variant);
    if (hub_owned) hk_hub_free(hub);
    hk__memo_op_end();
    hk_env_free(owned);
    return rc;
}

HK_API int hk_has_kernel(int *out, int *out_reason_code, char **out_reason,
                         const hk_get_kernel_options *opts) {
    if (out_reason_code) *out_reason_code = HK_OK;
    if (out_reason) *out_reason = NULL;
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_has_kernel: out is NULL");
    *out = 0;
    hk_get_kernel_options oc;
    const hk_get_kernel_options *o = &oc;
    int rc = check_opts(&oc, opts, "hk_has_kernel");
    if (rc) return rc;
    char *local = NULL;
    if (!o->no_local_kernels && (rc = hk__local_kernels_lookup(&local, o->repo_id)) != HK_OK) return rc;
    const hk_env *env;
    hk_env *owned;
    rc = hk__loader_env(&env, &owned, o);
    if (rc) {
        free(local);
        return rc;
    }
    hk_hub *hub = NULL;
    bool hub_owned = false;
    hk__target t = {0};
    char *best = NULL;
    hk__memo_op_begin(); /* each question once in this call, whatever the freshness window */
    rc = local ? HK_OK : hk__loader_hub(&hub, &hub_owned, o);
    if (rc == HK_OK && local) {
        /* LOCAL_KERNELS lists the root: kernels' has_kernel resolves it (and its tree) there */
        rc = hk__local_kernel_check(local, o->repo_id, o);
        if (rc) hk__fail_context("LOCAL_KERNELS %s=%s", o->repo_id, local);
    } else if (rc == HK_OK) {
        /* an existence check loads no code: no publisher check, as before redirects were followed */
        rc = resolve_target(&t, &best, hub, env, o, 1);
        /* kernels has_kernel(check_arch=True): the chosen variant's metadata archs must admit the
         * device (skip_arch_check skips it, as check_arch=False) */
        if (rc == HK_OK) rc = precheck_arch(hub, &t, best, o, env, true);
        /* and so must every dependency's, each with a variant for this machine (kernels resolves
         * the tree in has_kernel too) */
        hk_kernel_tree *ktree = NULL;
        if (rc == HK_OK) rc = build_tree(&ktree, hub, env, o, &t, best, true, false, !o->no_local_kernels);
        hk_kernel_tree_free(ktree);
    }
    if (rc == HK_ERR_NO_VARIANT || rc == HK_ERR_ARCH) {
        /* "no" is an answer, not an error: the reason goes to the out-parameters */
        hk__log(HK_LOG_INFO, "%s: no kernel for this machine: %s", o->repo_id, hk_last_error());
        if (out_reason_code) *out_reason_code = rc;
        rc = HK_OK;
        if (out_reason && !(*out_reason = hk__strdup(hk_last_error())))
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else
            hk_clear_error();
    } else if (rc == HK_OK) {
        *out = 1;
        hk_clear_error();
    }
    free(local);
    hk__target_free(&t);
    hk_free(best);
    if (hub_owned) hk_hub_free(hub);
    hk__memo_op_end();
    hk_env_free(owned);
    return rc;
}
