/* hk_env_detect: machine detection, one piece per file: OS/CPU (detect_os.c), Python (one
 * interpreter call, its answer remembered across processes: detect_python.c), torch / LibTorch
 * and tvm-ffi (files on disk, never imported: detect_torch.c, detect_tvm_ffi.c), CUDA
 * (detect_cuda.c) and ROCm (detect_rocm.c) through dlopen, then the HUBKERN_* overrides.
 * Everything is optional: a machine with none of it is a normal, fast result. */
#include "env/env_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- hk_env_detect -------------------------------------------------------------------------- */

static const char *pick(const char *opt, const char *var, bool use_env) {
    if (opt && *opt) return opt;
    return use_env ? hk__getenv(var) : NULL;
}

HK_API int hk_env_options_init(hk_env_options *opts, unsigned int version) {
    HK__OPTIONS_INIT_BODY(hk_env_options, opts, version, HK_ENV_OPTIONS_VERSION, HK_ENV_OPTIONS_INIT);
}

HK_API int hk_env_detect(hk_env **out, const hk_env_options *opts) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_env_detect: out is NULL");
    *out = NULL;
    hk_env_options defaults = HK_ENV_OPTIONS_INIT;
    if (!opts) opts = &defaults;
    int vrc = hk__check_options_version("hk_env_options", opts->version, HK_ENV_OPTIONS_VERSION);
    if (vrc) return vrc;
    bool use_env = !opts->no_env_overrides;

    hk_env *env = NULL;
    int rc = hk_env_new(&env);
    if (rc) return rc;

    const char *python = pick(opts->python, "HUBKERN_PYTHON", use_env);
    const char *site = pick(opts->site_packages, "HUBKERN_SITE_PACKAGES", use_env);
    const char *libtorch = pick(opts->libtorch_dir, "HUBKERN_LIBTORCH_DIR", use_env);
    const char *tvm_lib = pick(opts->tvm_ffi_lib, "HUBKERN_TVM_FFI_LIB", use_env);
    if (!tvm_lib && use_env) tvm_lib = hk__getenv("TVM_FFI_LIB");
    bool no_python = opts->no_python || (python && strcmp(python, "none") == 0) ||
                     (use_env && hk__env_true("HUBKERN_NO_PYTHON"));
    bool no_cuda = opts->no_cuda || (use_env && hk__env_true("HUBKERN_NO_CUDA"));
    bool no_rocm = opts->no_rocm || (use_env && hk__env_true("HUBKERN_NO_ROCM"));
    int timeout = opts->python_timeout_ms > 0 ? opts->python_timeout_ms : 10000;

    hk__env_detect_os(env);
    if (!no_python) {
        const char *exe = python ? python : "python3";
        rc = hk__env_detect_python(env, exe, timeout, site == NULL);
        if (rc == HK_ERR_NOMEM) goto oom;
        if (rc != HK_OK && python)
            hk__log(HK_LOG_WARN, "the Python interpreter '%s' could not be queried; continuing without Python", python);
    }
    if (site && hk__env_put(env, HK_K_SITE_PACKAGES, site)) goto oom;
    hk__env_detect_torch(env, libtorch);
    hk__env_detect_tvm_ffi(env, tvm_lib);
    if (!no_cuda) hk__env_detect_cuda(env);
    if (!no_rocm) hk__env_detect_rocm(env, NULL, 0);

    if (use_env) {
        for (int k = 0; k < HK_K_COUNT; k++) {
            /* detection inputs, consumed above */
            if (k == HK_K_PYTHON || k == HK_K_SITE_PACKAGES || k == HK_K_LIBTORCH_DIR ||
                k == HK_K_TVM_FFI_LIB)
                continue;
            char var[64] = "HUBKERN_";
            const char *name = hk__env_key_name((hk_env_key)k);
            size_t len = strlen(var);
            for (size_t i = 0; name[i] && len + 1 < sizeof var; i++)
                var[len++] = (char)toupper((unsigned char)name[i]);
            var[len] = '\0';
            const char *value = getenv(var);
            if (!value) continue;
            /* An empty variable clears the field ("no torch here"). */
            if (hk_env_set(env, name, value) != HK_OK) {
                rc = hk_last_error_code();
                hk__fail_context("environment variable %s", var);
                hk_env_free(env);
                return rc;
            }
        }
    }
    if (env->oom || hk__env_derive(env)) goto oom;
    *out = env;
    return HK_OK;
oom:
    hk_env_free(env);
    return hk__fail(HK_ERR_NOMEM, "out of memory");
}
