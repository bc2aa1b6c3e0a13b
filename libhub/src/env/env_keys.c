/* hk_env's keys (names and lookup) and the value grammars both its setters (env.c) and the
 * derivation (env_get.c) read: versions "M.m", ROCm gcnArchName, HIP_VERSION. Apart from env.c so
 * that the setters and the derivation do not call each other. */
#include "env/env_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const k_key_names[HK_K_COUNT] = {
    [HK_K_OS] = "os",
    [HK_K_CPU] = "cpu",
    [HK_K_MACOS_VERSION] = "macos_version",
    [HK_K_PYTHON] = "python",
    [HK_K_PYTHON_VERSION] = "python_version",
    [HK_K_PYTHON_FREE_THREADED] = "python_free_threaded",
    [HK_K_SITE_PACKAGES] = "site_packages",
    [HK_K_LIBTORCH_DIR] = "libtorch_dir",
    [HK_K_TORCH_VERSION] = "torch_version",
    [HK_K_TORCH_FULL_VERSION] = "torch_full_version",
    [HK_K_TORCH_DIR] = "torch_dir",
    [HK_K_TORCH_CXX11_ABI] = "torch_cxx11_abi",
    [HK_K_TORCH_CUDA_VERSION] = "torch_cuda_version",
    [HK_K_TORCH_HIP_VERSION] = "torch_hip_version",
    [HK_K_TORCH_XPU_VERSION] = "torch_xpu_version",
    [HK_K_BACKEND] = "backend",
    [HK_K_BACKEND_VERSION] = "backend_version",
    [HK_K_TVM_FFI_VERSION] = "tvm_ffi_version",
    [HK_K_TVM_FFI_FULL_VERSION] = "tvm_ffi_full_version",
    [HK_K_TVM_FFI_LIB] = "tvm_ffi_lib",
    [HK_K_CUDA_RUNTIME_VERSION] = "cuda_runtime_version",
    [HK_K_CUDA_DRIVER_VERSION] = "cuda_driver_version",
    [HK_K_GPUS] = "gpus",
    [HK_K_HIP_RUNTIME_VERSION] = "hip_runtime_version",
    [HK_K_GPU_ARCH] = "gpu_arch",
};

const char *hk__env_key_name(hk_env_key k) { return (unsigned)k < HK_K_COUNT ? k_key_names[k] : NULL; }

int hk__env_key_lookup(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < HK_K_COUNT; i++)
        if (strcmp(name, k_key_names[i]) == 0) return i;
    return -1;
}

bool hk__env_gcn_arch_valid(const char *s) {
    if (!s || strncmp(s, "gfx", 3) != 0 || strlen(s) > 255) return false;
    const char *p = s + 3;
    size_t n = 0;
    while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z')) p++, n++;
    if (n == 0) return false;
    while (*p == ':') { /* target features: ":sramecc+", ":xnack-" (or a bare name) */
        p++;
        size_t f = 0;
        while (isalnum((unsigned char)*p) || *p == '_' || *p == '.') p++, f++;
        if (f == 0) return false;
        if (*p == '+' || *p == '-') p++;
    }
    return *p == '\0';
}

bool hk__hip_version_text(char *buf, size_t cap, int v) {
    if (v < 10000000) return false; /* HIP_VERSION has the major in the 10^7 digits and up */
    return snprintf(buf, cap, "%d.%d", v / 10000000, (v / 100000) % 100) < (int)cap;
}

bool hk__env_ver2(const char *s, uint32_t *major, uint32_t *minor) {
    if (!s || !isdigit((unsigned char)*s)) return false;
    uint64_t ma = 0, mi = 0;
    for (; isdigit((unsigned char)*s); s++)
        if ((ma = ma * 10 + (uint64_t)(*s - '0')) > UINT32_MAX) return false;
    if (*s == '.' && isdigit((unsigned char)s[1])) /* "13" alone means 13.0 */
        for (s++; isdigit((unsigned char)*s); s++)
            if ((mi = mi * 10 + (uint64_t)(*s - '0')) > UINT32_MAX) return false;
    *major = (uint32_t)ma;
    *minor = (uint32_t)mi;
    return true;
}
