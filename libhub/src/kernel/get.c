/* hk_get_kernel and friends: the joins between resolution, the client, the cache and the loader. */
#include "kernel/kernel_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HK_API void hk_get_kernel_options_init(hk_get_kernel_options *opts) {
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->version = HK_VERSION_UNSET;
}

static void fill_request(hk_load_request *req, const hk_get_kernel_options *o) {
    memset(req, 0, sizeof *req);
    req->cuda_major = req->cuda_minor = -1;
    if (o) {
        req->tvm_ffi_library = o->tvm_ffi_library;
        req->skip_arch_check = o->skip_arch_check;
        req->repo_id = o->repo_id;
    }
}

HK_API int hk_get_local_kernel(hk_kernel **out, const char *path, const hk_get_kernel_options *opts) {
    if (!out || !path) return hk_fail(HK_ERR_INVALID_ARG, "hk_get_local_kernel: NULL argument");
    *out = NULL;
    if (!hk_is_dir(path)) return hk_fail(HK_ERR_NOT_FOUND, "%s is not a directory", path);
    hk_load_request req;
    fill_request(&req, opts);
    char *md = hk_path_join(path, "metadata.json");
    if (!md) return hk_fail(HK_ERR_NOMEM, "out of memory");
    bool is_variant = hk_path_exists(md);
    free(md);
    if (is_variant) {
        req.variant_dir = path;
        return hk_kernel_load_variant(out, &req);
    }
    return hk_fail(HK_ERR_UNSUPPORTED, "variant resolution in %s is not available yet", path);
}

HK_API int hk_get_kernel(hk_kernel **out, const hk_get_kernel_options *opts) {
    if (out) *out = NULL;
    return hk_fail(HK_ERR_UNSUPPORTED, "hk_get_kernel is not available yet");
}

HK_API int hk_has_kernel(bool *out, const hk_get_kernel_options *opts) {
    if (out) *out = false;
    return hk_fail(HK_ERR_UNSUPPORTED, "hk_has_kernel is not available yet");
}

HK_API int hk_load_locked(hk_kernel **out, const char *lockfile, const char *repo_id,
                          const hk_get_kernel_options *opts) {
    if (out) *out = NULL;
    return hk_fail(HK_ERR_UNSUPPORTED, "hk_load_locked is not available yet");
}
