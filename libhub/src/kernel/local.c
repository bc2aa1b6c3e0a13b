/* Local kernels with their trees, as kernels 0.17.2 loads them: hk_get_local_kernel (a repo
 * checkout with build/, a directory of variants, or one variant directory), a root listed in
 * LOCAL_KERNELS (hk_get_kernel, hk_has_kernel). A local kernel's own kernel-depends are resolved
 * like any node's: LOCAL_KERNELS first (local_node.c, which deps.c asks for every node), then
 * the Hub. */
#include "kernel/kernel_internal.h"

#include "client/memo.h"
#include "hubkern/hub.h"

#include <stdlib.h>
#include <string.h>

/* The tree of the local kernel at path (the root, named repo_id, or path when NULL) with every
 * dependency below it resolved; *hub: the client it needed (NULL when the root declares no
 * kernel-depends; free with hk_hub_free when *hub_owned). */
static int local_tree(hk_kernel_tree **out, hk_hub **hub, bool *hub_owned, const char *path, const char *repo_id,
                      const hk_env *env, const hk_get_kernel_options *o, bool store) {
    *out = NULL;
    *hub = NULL;
    *hub_owned = false;
    hk_kernel_tree *t = NULL;
    size_t root = 0;
    int rc = HK_OK;
    if (!o->no_local_kernels) { /* kernels parses LOCAL_KERNELS for every load, dependencies or not */
        char *any = NULL;
        rc = hk__local_kernels_lookup(&any, "");
        free(any);
        if (rc) return rc;
    }
    rc = hk__tree_new(&t);
    /* kernels names a get_local_kernel root by its path, at version 0 */
    if (rc == HK_OK) rc = hk__tree_push(&root, t, repo_id ? repo_id : path, repo_id ? o->kernel_version : 0,
                                        repo_id ? o->revision : NULL, -1);
    if (rc == HK_OK) rc = hk__local_tree_node(t, root, path, env, o);
    if (rc == HK_OK && t->v[root].md.num_deps > 0) {
        rc = hk__loader_hub(hub, hub_owned, o);
        if (rc == HK_OK) {
            hk__tree_ctx c = {*hub, env, o, NULL, NULL, o->trust_remote_code, store, !o->no_local_kernels};
            rc = hk__tree_expand(t, root, &c);
        }
    }
    if (rc) {
        hk_kernel_tree_free(t);
        if (*hub_owned) hk_hub_free(*hub);
        *hub = NULL;
        *hub_owned = false;
        return rc;
    }
    *out = t;
    return HK_OK;
}

int hk__local_kernel_load(hk_kernel **out, const char *path, const char *repo_id, const hk_get_kernel_options *o) {
    const hk_env *env;
    hk_env *owned;
    int rc = hk__loader_env(&env, &owned, o);
    if (rc) return rc;
    hk_kernel_tree *t = NULL;
    hk_hub *hub = NULL;
    bool hub_owned = false;
    hk_kernel **deps = NULL;
    size_t ndeps = 0;
    hk__memo_op_begin(); /* each question once in this call, whatever the freshness window */
    rc = local_tree(&t, &hub, &hub_owned, path, repo_id, env, o, true);
    /* the whole tree is checked before anything of it is installed, as kernels validates it */
    if (rc == HK_OK) rc = hk__tree_check_minver(t);
    if (rc == HK_OK && t->n > 1) {
        hk__tree_ctx c = {hub, env, o, NULL, NULL, o->trust_remote_code, true, !o->no_local_kernels};
        rc = hk__tree_load_root_deps(&deps, &ndeps, t, &c); /* dependencies load first */
    }
    if (rc == HK_OK) {
        hk_load_request req;
        hk__loader_fill_request(&req, o, env);
        req.variant_dir = t->v[0].dir;
        req.variant_name = t->v[0].variant;
        if (repo_id) req.repo_id = repo_id; /* else opts' repo_id, when given (hk_get_local_kernel) */
        rc = hk__kernel_load_variant(out, &req);
    }
    if (rc == HK_OK) {
        hk__kernel_set_deps(*out, deps, ndeps);
        deps = NULL;
        ndeps = 0;
    }
    hk__kernel_unref_all(deps, ndeps);
    hk_kernel_tree_free(t);
    if (hub_owned) hk_hub_free(hub);
    hk__memo_op_end();
    hk_env_free(owned);
    return rc;
}

int hk__local_kernel_check(const char *path, const char *repo_id, const hk_get_kernel_options *o) {
    const hk_env *env;
    hk_env *owned;
    int rc = hk__loader_env(&env, &owned, o);
    if (rc) return rc;
    hk_kernel_tree *t = NULL;
    hk_hub *hub = NULL;
    bool hub_owned = false;
    rc = local_tree(&t, &hub, &hub_owned, path, repo_id, env, o, false);
    /* kernels has_kernel(check_arch=True) runs its ArchValidator on every node, the root too */
    if (rc == HK_OK && !o->skip_arch_check) {
        hk_load_request req;
        hk__loader_fill_request(&req, o, env);
        rc = hk__kernel_check_metadata_fitness(&t->v[0].md.pub, &req);
        if (rc) hk__fail_context("%s variant %s", path, t->v[0].variant);
    }
    hk_kernel_tree_free(t);
    if (hub_owned) hk_hub_free(hub);
    hk_env_free(owned);
    return rc;
}

HK_API int hk_get_local_kernel(hk_kernel **out, const char *path, const hk_get_kernel_options *opts) {
    if (!out || !path) return hk__fail(HK_ERR_INVALID_ARG, "hk_get_local_kernel: NULL argument");
    *out = NULL;
    hk_get_kernel_options o;
    int rc = hk__get_kernel_options_take(&o, opts, "hk_get_local_kernel");
    if (rc) return rc;
    return hk__local_kernel_load(out, path, NULL, &o);
}
