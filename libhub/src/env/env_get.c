/* hk_env: the backend derivation (kernels 0.17 `_backend()` without importing torch) and the
 * getters. */
#include "env/env_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- derivation ----------------------------------------------------------------------------- */

int hk__env_derive(hk_env *env) {
    const char *kind = NULL, *ver = NULL, *source = NULL;
    const char *const *f = (const char *const *)env->f;
    if (f[HK_K_BACKEND]) {
        kind = f[HK_K_BACKEND];
        source = "override";
        if (strcmp(kind, "cuda") == 0)
            ver = f[HK_K_TORCH_CUDA_VERSION] ? f[HK_K_TORCH_CUDA_VERSION] : f[HK_K_CUDA_RUNTIME_VERSION];
        else if (strcmp(kind, "rocm") == 0)
            ver = f[HK_K_TORCH_HIP_VERSION];
        else if (strcmp(kind, "xpu") == 0)
            ver = f[HK_K_TORCH_XPU_VERSION];
    } else if (f[HK_K_TORCH_VERSION]) {
        source = "torch";
        bool darwin_arm = f[HK_K_OS] && f[HK_K_CPU] && strcmp(f[HK_K_OS], "darwin") == 0 &&
                          strcmp(f[HK_K_CPU], "aarch64") == 0;
        if (env->has_torch_tpu) kind = "tpu";
        else if (env->has_torch_neuronx) kind = "neuron";
        else if (f[HK_K_TORCH_CUDA_VERSION]) kind = "cuda", ver = f[HK_K_TORCH_CUDA_VERSION];
        else if (f[HK_K_TORCH_HIP_VERSION]) kind = "rocm", ver = f[HK_K_TORCH_HIP_VERSION];
        else if (darwin_arm) kind = "metal";
        else if (f[HK_K_TORCH_XPU_VERSION]) kind = "xpu", ver = f[HK_K_TORCH_XPU_VERSION];
        else if (env->has_torch_npu) kind = "cann";
        else if (env->torch_installed) kind = "cpu";
    }
    if (!kind) {
        /* No torch installation: kernels' _get_cuda() (libcudart), else CPU. */
        if (f[HK_K_CUDA_RUNTIME_VERSION]) {
            kind = "cuda";
            ver = f[HK_K_CUDA_RUNTIME_VERSION];
            source = "cudart";
        } else {
            kind = "cpu";
            source = "default";
        }
    }
    if (f[HK_K_BACKEND_VERSION]) ver = f[HK_K_BACKEND_VERSION];
    bool versioned = strcmp(kind, "cuda") == 0 || strcmp(kind, "rocm") == 0 ||
                     strcmp(kind, "xpu") == 0 || strcmp(kind, "cann") == 0;
    if (!versioned) ver = NULL;

    free(env->backend);
    free(env->backend_version);
    free(env->backend_variant);
    free(env->gpus_str);
    env->backend = hk__strdup(kind);
    env->backend_version = ver ? hk__strdup(ver) : NULL;
    env->backend_variant = NULL;
    env->backend_source = source;
    bool oom = !env->backend || (ver && !env->backend_version);
    uint32_t ma = 0, mi = 0;
    if (!versioned) {
        env->backend_variant = hk__strdup(kind);
        oom |= !env->backend_variant;
    } else if (ver && hk__env_ver2(ver, &ma, &mi)) {
        env->backend_variant = hk__asprintf("%s%u%u", strcmp(kind, "cuda") == 0 ? "cu" : kind, ma, mi);
        oom |= !env->backend_variant;
    }
    env->gpus_str = NULL;
    if (env->ngpus) {
        hk_strbuf sb;
        hk__sb_init(&sb);
        for (int i = 0; i < env->ngpus; i++)
            hk__sb_printf(&sb, "%s%d.%d", i ? "," : "", env->gpus[i].major, env->gpus[i].minor);
        env->gpus_str = hk__sb_steal(&sb);
        oom |= !env->gpus_str;
    }
    return oom ? HK_ERR_NOMEM : HK_OK;
}

/* ---- getters -------------------------------------------------------------------------------- */

const char *hk_env_get(const hk_env *env, const char *key) {
    if (!env || !key) return NULL;
    if (strcmp(key, "backend") == 0) return env->backend;
    if (strcmp(key, "backend_version") == 0) return env->backend_version;
    if (strcmp(key, "backend_variant") == 0) return env->backend_variant;
    if (strcmp(key, "backend_source") == 0) return env->backend_source;
    if (strcmp(key, "gpus") == 0) return env->gpus_str;
    if (strcmp(key, "torch_cxx11_abi") == 0 || strcmp(key, "python_free_threaded") == 0) {
        int v = key[0] == 't' ? hk_env_torch_cxx11_abi(env) : hk_env_python_free_threaded(env);
        return v < 0 ? NULL : v ? "1" : "0";
    }
    int k = hk__env_key_lookup(key);
    return k < 0 ? NULL : env->f[k];
}

#define GETTER(fn, key) \
    const char *fn(const hk_env *env) { return env ? env->f[key] : NULL; }
GETTER(hk_env_os, HK_K_OS)
GETTER(hk_env_cpu, HK_K_CPU)
GETTER(hk_env_macos_version, HK_K_MACOS_VERSION)
GETTER(hk_env_python_executable, HK_K_PYTHON)
GETTER(hk_env_python_version, HK_K_PYTHON_VERSION)
GETTER(hk_env_torch_version, HK_K_TORCH_VERSION)
GETTER(hk_env_torch_full_version, HK_K_TORCH_FULL_VERSION)
GETTER(hk_env_torch_dir, HK_K_TORCH_DIR)
GETTER(hk_env_torch_cuda_version, HK_K_TORCH_CUDA_VERSION)
GETTER(hk_env_torch_hip_version, HK_K_TORCH_HIP_VERSION)
GETTER(hk_env_torch_xpu_version, HK_K_TORCH_XPU_VERSION)
GETTER(hk_env_tvm_ffi_version, HK_K_TVM_FFI_VERSION)
GETTER(hk_env_tvm_ffi_full_version, HK_K_TVM_FFI_FULL_VERSION)
GETTER(hk_env_tvm_ffi_lib, HK_K_TVM_FFI_LIB)
GETTER(hk_env_cuda_runtime_version, HK_K_CUDA_RUNTIME_VERSION)
GETTER(hk_env_cuda_driver_version, HK_K_CUDA_DRIVER_VERSION)
GETTER(hk_env_hip_runtime_version, HK_K_HIP_RUNTIME_VERSION)
GETTER(hk_env_gpu_arch, HK_K_GPU_ARCH)
#undef GETTER

static int tri(const char *v) { return v ? (strcmp(v, "1") == 0) : -1; }

int hk_env_python_free_threaded(const hk_env *env) {
    if (!env) return -1;
    if (!env->f[HK_K_PYTHON_FREE_THREADED]) return env->f[HK_K_PYTHON_VERSION] ? 0 : -1;
    return tri(env->f[HK_K_PYTHON_FREE_THREADED]);
}

int hk_env_torch_cxx11_abi(const hk_env *env) {
    if (!env) return -1;
    if (env->f[HK_K_TORCH_CXX11_ABI]) return tri(env->f[HK_K_TORCH_CXX11_ABI]);
    /* torch >= 2.8 is only built with the C++11 ABI: its compiled_with_cxx11_abi() is a literal
     * `return True` (checked in the 2.8, 2.9, 2.10 and 2.11 wheels). kernels asks only on Linux. */
    uint32_t ma = 0, mi = 0;
    if (env->f[HK_K_OS] && strcmp(env->f[HK_K_OS], "linux") == 0 &&
        hk__env_ver2(env->f[HK_K_TORCH_VERSION], &ma, &mi) && (ma > 2 || (ma == 2 && mi >= 8)))
        return 1;
    return -1;
}

size_t hk_env_site_packages_count(const hk_env *env) { return env ? env->nsite : 0; }

const char *hk_env_site_packages(const hk_env *env, size_t i) {
    return env && i < env->nsite ? env->site[i] : NULL;
}

const char *hk_env_backend(const hk_env *env) { return env && env->backend ? env->backend : "cpu"; }
const char *hk_env_backend_version(const hk_env *env) { return env ? env->backend_version : NULL; }
const char *hk_env_backend_variant(const hk_env *env) { return env ? env->backend_variant : NULL; }

int hk_env_gpu_count(const hk_env *env) { return env ? env->ngpus : 0; }

int hk_env_gpu_capability(const hk_env *env, int i, int *major, int *minor) {
    if (!env || i < 0 || i >= env->ngpus)
        return hk__fail(HK_ERR_INVALID_ARG, "GPU index %d out of range (%d GPUs)", i, env ? env->ngpus : 0);
    if (major) *major = env->gpus[i].major;
    if (minor) *minor = env->gpus[i].minor;
    return HK_OK;
}

const char *hk_env_gpu_name(const hk_env *env, int i) {
    return env && i >= 0 && i < env->ngpus ? env->gpus[i].name : NULL;
}

