/* What hk_get_kernel, hk_has_kernel, hk_load_locked and local loads share: the env they resolve
 * with, the families this process can load, the load request for the device, the client and the
 * pull of one variant. */
#include "kernel/kernel_internal.h"

#include "cache/cache_internal.h"
#include "client/client.h"
#include "env/detected.h"
#include "hubkern/hub.h"
#include "hubkern/variant.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layout of versions 1 and 2 of hk_get_kernel_options (version 1 ends before freshness_s):
 * programs built against those headers pass these, and they are read as they were laid out. */
typedef struct get_kernel_options_v2 {
    unsigned int version;
    const char *repo_id;
    int kernel_version;
    const char *revision;
    const char *backend;
    int trust_remote_code;
    int offline; /* 0: HF_HUB_OFFLINE decides; 1: offline */
    const char *endpoint, *cache_dir, *token;
    hk_progress_fn progress;
    void *progress_userdata;
    const struct hk_env *env;
    const char *tvm_ffi_library;
    int skip_arch_check, no_local_kernels;
    const char *variant;
    int signature;
    const char *sigstore_trust_root, *signature_policy_file;
    const struct hk_signature_policies *signature_policies;
    double freshness_s; /* version 2 */
} get_kernel_options_v2;

HK_API int hk_get_kernel_options_init(hk_get_kernel_options *opts, unsigned int version) {
    if (!opts) return hk__fail(HK_ERR_INVALID_ARG, "hk_get_kernel_options_init: the options pointer is NULL");
    int rc = hk__check_options_version("hk_get_kernel_options", version, HK_GET_KERNEL_OPTIONS_VERSION);
    if (rc) return rc;
    if (version < 3) { /* only as much as that version's struct holds is written */
        get_kernel_options_v2 d;
        memset(&d, 0, sizeof d);
        d.version = version;
        d.kernel_version = HK_VERSION_UNSET;
        memcpy(opts, &d, version >= 2 ? sizeof d : offsetof(get_kernel_options_v2, freshness_s));
        return HK_OK;
    }
    hk_get_kernel_options d = HK_GET_KERNEL_OPTIONS_INIT;
    *opts = d;
    return HK_OK;
}

static void from_v2(hk_get_kernel_options *d, const get_kernel_options_v2 *o) {
    d->repo_id = o->repo_id;
    d->kernel_version = o->kernel_version;
    d->revision = o->revision;
    d->variant = o->variant;
    d->backend = o->backend;
    d->trust_remote_code = o->trust_remote_code;
    d->skip_arch_check = o->skip_arch_check;
    d->no_local_kernels = o->no_local_kernels;
    d->signature = o->signature;
    d->env = o->env;
    d->tvm_ffi_library = o->tvm_ffi_library;
    hk_hub_options *h = &d->hub_options;
    h->endpoint = o->endpoint;
    h->cache_dir = o->cache_dir;
    h->token = o->token;
    h->offline = o->offline ? 1 : -1;
    h->progress = o->progress;
    h->progress_userdata = o->progress_userdata;
    h->sigstore_trust_root = o->sigstore_trust_root;
    h->signature_policy_file = o->signature_policy_file;
    h->signature_policies = o->signature_policies;
    h->freshness_s = o->version >= 2 ? o->freshness_s : 0;
}

int hk__get_kernel_options_take(hk_get_kernel_options *dst, const hk_get_kernel_options *src, const char *fn) {
    hk_get_kernel_options d = HK_GET_KERNEL_OPTIONS_INIT;
    *dst = d;
    if (!src) return HK_OK;
    int rc = hk__check_options_version("hk_get_kernel_options", src->version, HK_GET_KERNEL_OPTIONS_VERSION);
    if (rc) return hk__fail_context("%s", fn);
    if (src->version < 3) from_v2(dst, (const get_kernel_options_v2 *)(const void *)src);
    else *dst = *src;
    if (dst->hub_options.version == 0) dst->hub_options.version = HK_HUB_OPTIONS_VERSION; /* zero-filled */
    return HK_OK;
}

int hk__loader_env(const hk_env **out, hk_env **owned, const hk_get_kernel_options *o) {
    *owned = NULL;
    const hk_env *env = o ? o->env : NULL;
    if (!env) {
        int rc = hk__env_cached(&env);
        if (rc) return rc;
    }
    if (!hk_env_tvm_ffi_version(env) &&
        hk__tvm_ffi_ensure(o ? o->tvm_ffi_library : NULL, hk_env_tvm_ffi_lib(env)) == HK_OK) {
        int ma, mi;
        char v[32];
        if (hk_tvm_ffi_version(&ma, &mi, NULL) == HK_OK && hk_env_clone(owned, env) == HK_OK) {
            snprintf(v, sizeof v, "%d.%d", ma, mi);
            hk_env_set(*owned, "tvm_ffi_version", v);
            env = *owned;
        }
    }
    hk_clear_error(); /* a runtime that cannot be loaded is reported by the load that needs it */
    *out = env;
    return HK_OK;
}

void hk__loader_fill_request(hk_load_request *req, const hk_get_kernel_options *o, const hk_env *env) {
    memset(req, 0, sizeof *req);
    req->cuda_major = req->cuda_minor = -1;
    if (o) {
        req->tvm_ffi_library = o->tvm_ffi_library;
        req->skip_arch_check = o->skip_arch_check != 0;
        req->repo_id = o->repo_id;
    }
    if (env) {
        req->tvm_ffi_hint = hk_env_tvm_ffi_lib(env);
        req->gpu_arch = hk_env_gpu_arch(env);
        int ma, mi;
        if (hk_env_gpu_count(env) > 0 && hk_env_gpu_capability(env, 0, &ma, &mi) == HK_OK) {
            req->cuda_major = ma;
            req->cuda_minor = mi;
        } else {
            req->cuda_major = -2; /* no GPU visible */
        }
    }
}

/* Families this process can load: tvm-ffi always; torch builds only next to libtorch. Noarch
 * variants are given back (path only) when nothing native fits. */
int hk__loader_choose(char **out, const hk_env *env, const hk_get_kernel_options *o,
                     const char *const *names, size_t n, const char *where) {
    hk_choose_options co = HK_CHOOSE_OPTIONS_INIT;
    co.backend = o ? o->backend : NULL;
    co.variant = o ? o->variant : NULL;
    co.where = where;
    co.families = HK_FAMILY_BIT(HK_FAMILY_TVM_FFI);
    if (hk__libtorch_in_process())
        co.families |= HK_FAMILY_BIT(HK_FAMILY_TORCH) | HK_FAMILY_BIT(HK_FAMILY_TORCH_STABLE_ABI);
    else
        co.family_note = "torch variants load only into a process that has libtorch; a tvm-ffi "
                         "variant is needed";
    co.fallback_families = HK_FAMILY_BIT(HK_FAMILY_NOARCH);
    return hk_choose_variant(out, env, names, n, &co);
}

HK_API int hk_kernel_choose_variant(char **out, const hk_get_kernel_options *opts,
                                    const char *const *names, size_t count) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_kernel_choose_variant: out is NULL");
    *out = NULL;
    hk_get_kernel_options o;
    int rc = hk__get_kernel_options_take(&o, opts, "hk_kernel_choose_variant");
    if (rc) return rc;
    const hk_env *env;
    hk_env *owned;
    rc = hk__loader_env(&env, &owned, &o);
    if (rc == HK_OK) rc = hk__loader_choose(out, env, &o, names, count, o.repo_id);
    hk_env_free(owned);
    return rc;
}

int hk__loader_hub(hk_hub **out, bool *owned, const hk_get_kernel_options *o) {
    *owned = false;
    if (o->hub) {
        *out = o->hub;
        return HK_OK;
    }
    int rc = hk_hub_new(out, &o->hub_options);
    *owned = rc == HK_OK;
    return rc;
}

hk_pull_spec hk__loader_pull_spec(const hk_get_kernel_options *o, const hk__target *t, const char *variant) {
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = t->repo;
    s.revision = t->revision;
    s.variant = variant;
    s.backend = o->backend;
    s.env = o->env;
    s.trust_remote_code = o->trust_remote_code;
    s.signature = t->signature; /* the request's, never lowered (client/redirect.c, kernel/deps.c) */
    return s;
}

int hk__loader_fetch_variant(char **out_dir, char **out_commit, char **out_variant, uint64_t out_bytes[2],
                            hk_hub *hub, const hk_pull_spec *s, const hk__target *t) {
    *out_dir = *out_commit = *out_variant = NULL;
    out_bytes[0] = out_bytes[1] = 0;
    hk_pull_result *r = NULL;
    int rc = t ? hk__client_pull_target(&r, hub, s, t) : hk_hub_pull(&r, hub, s);
    if (rc) return rc;
    if (hk_pull_result_variant_count(r) == 0) {
        hk_pull_result_free(r);
        return hk__fail(HK_ERR_INTERNAL, "a pull of %s returned no variant", s->repo_id);
    }
    *out_dir = hk__strdup(hk_pull_result_variant_path(r, 0));
    *out_commit = hk__strdup(hk_pull_result_commit(r));
    *out_variant = hk__strdup(hk_pull_result_variant(r, 0));
    out_bytes[0] = hk_pull_result_bytes_verified(r);
    out_bytes[1] = hk_pull_result_bytes_trusted(r);
    hk_pull_result_free(r);
    if (!*out_dir || !*out_commit || !*out_variant) return hk__fail(HK_ERR_NOMEM, "out of memory");
    return HK_OK;
}

int hk__loader_already_loaded(hk_kernel **out, hk_hub *hub, const char *repo_id, const char *commit,
                             const char *variant) {
    char *repo_dir = hk_cache_repo_dir(hk_hub_cache_root(hub), HK_REPO_KERNEL, repo_id);
    char *dir = repo_dir ? hk__cache_variant_path(repo_dir, commit, variant) : NULL;
    *out = dir ? hk__kernel_registry_find(dir) : NULL;
    free(repo_dir);
    free(dir);
    return *out != NULL;
}
