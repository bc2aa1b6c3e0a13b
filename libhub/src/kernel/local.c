/* Kernels from local directories: hk_get_local_kernel (a repo checkout with build/, a directory
 * of variants, or one variant directory) and LOCAL_KERNELS=org/name=/path[:…], which
 * hk_get_kernel consults before the Hub. */
#include "kernel/kernel_internal.h"

#include <stdlib.h>
#include <string.h>

/* Choose among the variant directories of `variants_dir` and load the choice. */
static int load_from_variants_dir(hk_kernel **out, const char *variants_dir, const hk_env *env,
                                  const hk_get_kernel_options *o, const char *where) {
    char **names = NULL;
    size_t n = 0;
    int rc = hk__list_subdirs(&names, &n, variants_dir);
    if (rc) return rc;
    char *best = NULL;
    rc = hk__loader_choose(&best, env, o, (const char *const *)names, n, where);
    hk__kstrv_free(names, n);
    if (rc) return rc;
    char *dir = hk__path_join(variants_dir, best);
    hk_load_request req;
    hk__loader_fill_request(&req, o, env);
    req.variant_dir = dir;
    req.variant_name = best;
    rc = dir ? hk__kernel_load_variant(out, &req) : hk__fail(HK_ERR_NOMEM, "out of memory");
    free(dir);
    hk_free(best);
    return rc;
}

int hk__local_kernel_load(hk_kernel **out, const char *path, const hk_get_kernel_options *o) {
    if (!hk__is_dir(path)) return hk__fail(HK_ERR_NOT_FOUND, "%s is not a directory", path);
    const hk_env *env;
    hk_env *owned;
    int rc = hk__loader_env(&env, &owned, o);
    if (rc) return rc;
    char *md = hk__path_join(path, "metadata.json");
    char *build = hk__path_join(path, "build");
    if (!md || !build) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    } else if (hk__path_exists(md)) { /* a variant directory itself */
        hk_load_request req;
        hk__loader_fill_request(&req, o, env);
        req.variant_dir = path;
        rc = hk__kernel_load_variant(out, &req);
    } else if (hk__is_dir(build)) { /* a repo checkout with build/ */
        rc = load_from_variants_dir(out, build, env, o, path);
    } else { /* a directory of variants */
        rc = load_from_variants_dir(out, path, env, o, path);
    }
    free(md);
    free(build);
    hk_env_free(owned);
    return rc;
}

HK_API int hk_get_local_kernel(hk_kernel **out, const char *path, const hk_get_kernel_options *opts) {
    if (!out || !path) return hk__fail(HK_ERR_INVALID_ARG, "hk_get_local_kernel: NULL argument");
    *out = NULL;
    hk_get_kernel_options o;
    int rc = hk__get_kernel_options_take(&o, opts, "hk_get_local_kernel");
    if (rc) return rc;
    return hk__local_kernel_load(out, path, &o);
}

int hk__local_kernels_lookup(char **out_path, const char *repo_id) {
    *out_path = NULL;
    const char *spec = hk__getenv("LOCAL_KERNELS");
    if (!spec) return HK_OK;
    char *copy = hk__strdup(spec), *save = NULL;
    if (!copy) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    for (char *item = strtok_r(copy, ":", &save); item; item = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) {
            rc = hk__fail(HK_ERR_INVALID_ARG,
                         "LOCAL_KERNELS entry '%s' has no '=': use org/name=/path[:org/other=/path]", item);
            break;
        }
        *eq = '\0';
        if (strcmp(item, repo_id) == 0 && !*out_path) {
            *out_path = hk__strdup(eq + 1);
            if (!*out_path) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        }
    }
    free(copy);
    if (rc) {
        free(*out_path);
        *out_path = NULL;
    }
    return rc;
}
