/* One local kernel as kernels 0.17.2 finds it (resolver.py resolve_local_kernel, load.py
 * _parse_local_kernel_overrides): the LOCAL_KERNELS entry of a repo, the variant directory of a
 * local path, and the tree node it makes. The trees built from them are in local.c and deps.c. */
#include "kernel/kernel_internal.h"

#include <stdlib.h>
#include <string.h>

/* The best variant among the subdirectories of dir for this machine, or HK_ERR_NO_VARIANT. */
static int choose_in(char **out_dir, const char *dir, const hk_env *env, const hk_get_kernel_options *o,
                     const char *where) {
    char **names = NULL;
    size_t n = 0;
    if (!hk__is_dir(dir)) return hk__fail(HK_ERR_NO_VARIANT, "%s: %s is not a directory", where, dir);
    int rc = hk__list_subdirs(&names, &n, dir);
    if (rc) return rc;
    char *best = NULL;
    rc = hk__loader_choose(&best, env, o, (const char *const *)names, n, where);
    hk__kstrv_free(names, n);
    if (rc) return rc;
    *out_dir = hk__path_join(dir, best);
    hk_free(best);
    return *out_dir ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

int hk__local_variant_dir(char **out, const char *path, const hk_env *env, const hk_get_kernel_options *o) {
    *out = NULL;
    if (!hk__is_dir(path)) return hk__fail(HK_ERR_NOT_FOUND, "%s is not a directory", path);
    /* kernels' order: variants in the directory itself, then under build/, then the directory as
     * one variant when it holds a metadata.json */
    int rc = choose_in(out, path, env, o, path);
    if (rc != HK_ERR_NO_VARIANT) return rc;
    char *build = hk__path_join(path, "build"), *md = hk__path_join(path, "metadata.json");
    if (!build || !md) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    else if (hk__is_dir(build)) rc = choose_in(out, build, env, o, path);
    if (rc == HK_ERR_NO_VARIANT && hk__path_exists(md)) {
        hk_clear_error();
        size_t len = strlen(path);
        while (len > 1 && path[len - 1] == '/') len--; /* its last component names the variant */
        rc = (*out = hk__strndup(path, len)) ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    free(build);
    free(md);
    return rc;
}

/* Node i of t (pushed, not yet resolved) as the local kernel at path: its variant directory,
 * metadata and repo id as declared; no commit, no publisher check (kernels' RepoPathsResolver
 * comes before the Hub's). */
int hk__local_tree_node(hk_kernel_tree *t, size_t i, const char *path, const hk_env *env,
                        const hk_get_kernel_options *o) {
    hk__tnode *n = &t->v[i];
    hk_get_kernel_options lo = *o;
    if (i > 0) lo.variant = NULL; /* an explicit variant names the root's build only */
    int rc = hk__local_variant_dir(&n->dir, path, env, &lo);
    if (rc == HK_OK) {
        const char *slash = strrchr(n->dir, '/');
        n->variant = hk__strdup(slash ? slash + 1 : n->dir);
        n->repo_id = hk__strdup(n->decl_repo);
        if (!n->variant || !n->repo_id) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (rc == HK_OK) rc = hk__metadata_read(&n->md, n->dir);
    if (rc == HK_OK) n->has_md = true;
    return rc;
}

int hk__local_kernels_lookup(char **out_path, const char *repo_id) {
    *out_path = NULL;
    /* set but empty is one entry without '=' to kernels, hence getenv, not hk__getenv */
    const char *spec = getenv("LOCAL_KERNELS");
    if (!spec) return HK_OK;
    size_t want = strlen(repo_id);
    for (const char *p = spec;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq) {
            free(*out_path);
            *out_path = NULL;
            return hk__fail(HK_ERR_INVALID_ARG, "LOCAL_KERNELS entry '%.*s' has no '=': use "
                            "org/name=/path[:org/other=/path]", (int)len, p);
        }
        /* a repo listed twice: the last entry wins (kernels builds a dict) */
        if ((size_t)(eq - p) == want && memcmp(p, repo_id, want) == 0) {
            size_t plen = len - want - 1;
            free(*out_path);
            /* an empty path is Python's Path(""), the current directory */
            *out_path = plen ? hk__strndup(eq + 1, plen) : hk__strdup(".");
            if (!*out_path) return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        if (!end) break;
        p = end + 1;
    }
    return HK_OK;
}
