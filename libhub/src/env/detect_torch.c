/* torch detection from files on disk (never imported): the Python package in site-packages, else
 * a LibTorch distribution; its version, CUDA/HIP/XPU builds, C++11 ABI, sibling backends. */
#include "env/env_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- torch / LibTorch ------------------------------------------------------------------------ */

/* Does this (small) region of a shared library mention C++11-ABI std::string symbols? Scans the
 * file for "_ZNSt7__cxx11" (1), else the pre-C++11 "_ZNSs" (0), else -1. */
static int scan_lib_cxx11(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static const char new_abi[] = "_ZNSt7__cxx11", old_abi[] = "_ZNSs";
    char buf[65536 + 16];
    size_t keep = 0;
    int seen_old = 0, result = -1;
    for (;;) {
        size_t n = fread(buf + keep, 1, sizeof buf - 16 - keep, f);
        if (n == 0) break;
        size_t len = keep + n;
        for (size_t i = 0; i + sizeof new_abi - 1 <= len; i++) {
            if (buf[i] != '_') continue;
            if (memcmp(buf + i, new_abi, sizeof new_abi - 1) == 0) {
                result = 1;
                break;
            }
            if (memcmp(buf + i, old_abi, sizeof old_abi - 1) == 0) seen_old = 1;
        }
        if (result == 1) break;
        keep = sizeof new_abi - 2;
        memmove(buf, buf + len - keep, keep);
    }
    fclose(f);
    return result == 1 ? 1 : seen_old ? 0 : -1;
}

/* The cxx11 ABI flag of a torch tree (Linux only; upstream reports None elsewhere). */
static void detect_cxx11(hk_env *env, const char *torch_root, bool python_pkg) {
    const char *os = env->f[HK_K_OS];
    if (!os || strcmp(os, "linux") != 0) return;
    int abi = -1;
    if (python_pkg) { /* torch >= 2.9: compiled_with_cxx11_abi() returns a literal True */
        char *p = hk__path_join(torch_root, "__init__.py");
        char *t = p ? hk__env_read_text(p) : NULL;
        abi = hk__torch_init_cxx11(t);
        free(t);
        free(p);
    }
    if (abi < 0) { /* older torch and LibTorch: TORCH_CXX_FLAGS in the CMake config */
        char *p = hk__path_join(torch_root, "share/cmake/Torch/TorchConfig.cmake");
        char *t = p ? hk__env_read_text(p) : NULL;
        abi = hk__torch_cmake_cxx11(t);
        free(t);
        free(p);
    }
    if (abi < 0) { /* last resort: the mangled std::string symbols of libc10 */
        char *p = hk__path_join(torch_root, "lib/libc10.so");
        if (p) abi = scan_lib_cxx11(p);
        free(p);
    }
    if (abi >= 0) hk__env_put(env, HK_K_TORCH_CXX11_ABI, abi ? "1" : "0");
}


static bool detect_torch_package(hk_env *env, const char *site) {
    char *root = hk__path_join(site, "torch");
    char *vpath = root ? hk__path_join(root, "version.py") : NULL;
    char *text = vpath && hk__env_is_file(vpath) ? hk__env_read_text(vpath) : NULL;
    free(vpath);
    char *full = hk__py_assignment(text, "__version__");
    if (!full || !*full) {
        free(full);
        free(text);
        free(root);
        return false;
    }
    env->torch_installed = true;
    hk__env_put(env, HK_K_TORCH_DIR, root);
    hk__env_put(env, HK_K_TORCH_FULL_VERSION, full);
    hk__env_put_version2(env, HK_K_TORCH_VERSION, full);
    char *cuda = hk__py_assignment(text, "cuda");
    char *hip = hk__py_assignment(text, "hip");
    char *xpu = hk__py_assignment(text, "xpu");
    hk__env_put_version2(env, HK_K_TORCH_CUDA_VERSION, cuda);
    if (hip && *hip) { /* "6.3.42131-fa1d09cbd" → text before '-' → 6.3 */
        char *dash = strchr(hip, '-');
        if (dash) *dash = '\0';
        hk__env_put_version2(env, HK_K_TORCH_HIP_VERSION, hip);
    }
    if (xpu && strlen(xpu) >= 6 && isdigit((unsigned char)xpu[0]) && isdigit((unsigned char)xpu[5])) {
        /* kernels: f"{xpu[0:4]}.{xpu[5:6]}" ("20250301" → 2025.3) */
        char buf[16];
        snprintf(buf, sizeof buf, "%.4s.%c", xpu, xpu[5]);
        hk__env_put_version2(env, HK_K_TORCH_XPU_VERSION, buf);
    }
    free(cuda);
    free(hip);
    free(xpu);
    free(full);
    free(text);
    detect_cxx11(env, root, true);
    free(root);
    return true;
}

static bool dir_exists_in(const hk_env *env, const char *pkg) {
    for (size_t i = 0; i < env->nsite; i++) {
        char *p = hk__path_join(env->site[i], pkg);
        bool ok = p && hk__is_dir(p);
        free(p);
        if (ok) return true;
    }
    return false;
}

/* LibTorch: build-version ("2.11.0+cu130"), else the version header; the CMake config marks it. */
static void detect_libtorch(hk_env *env, const char *dir) {
    char *cfg = hk__path_join(dir, "share/cmake/Torch/TorchConfig.cmake");
    bool is_libtorch = cfg && hk__env_is_file(cfg);
    free(cfg);
    if (!is_libtorch) {
        hk__log(HK_LOG_WARN, "'%s' is not a LibTorch directory (no share/cmake/Torch/TorchConfig.cmake)", dir);
        return;
    }
    char *full = NULL;
    char *bv = hk__path_join(dir, "build-version");
    char *text = bv ? hk__env_read_text(bv) : NULL;
    free(bv);
    if (text) {
        text[strcspn(text, "\r\n")] = '\0';
        if (*text) full = hk__strdup(text);
    }
    free(text);
    if (!full) {
        static const char *const headers[] = {"include/torch/headeronly/version.h",
                                              "include/torch/csrc/api/include/torch/version.h"};
        for (size_t i = 0; i < HK_ARRAY_LEN(headers) && !full; i++) {
            char *hp = hk__path_join(dir, headers[i]);
            char *h = hp ? hk__env_read_text(hp) : NULL;
            const char *ma = h ? strstr(h, "#define TORCH_VERSION_MAJOR ") : NULL;
            const char *mi = h ? strstr(h, "#define TORCH_VERSION_MINOR ") : NULL;
            if (ma && mi) full = hk__asprintf("%ld.%ld", strtol(ma + 28, NULL, 10), strtol(mi + 28, NULL, 10));
            free(h);
            free(hp);
        }
    }
    if (!full) return;
    env->torch_installed = true;
    hk__env_put(env, HK_K_TORCH_DIR, dir);
    hk__env_put(env, HK_K_TORCH_FULL_VERSION, full);
    hk__env_put_version2(env, HK_K_TORCH_VERSION, full);
    char *cuda = NULL, *hip = NULL;
    hk__torch_local_tag(full, &cuda, &hip);
    if (cuda) hk__env_put(env, HK_K_TORCH_CUDA_VERSION, cuda);
    if (hip) hk__env_put(env, HK_K_TORCH_HIP_VERSION, hip);
    free(cuda);
    free(hip);
    free(full);
    detect_cxx11(env, dir, false);
}

void hk__env_detect_torch(hk_env *env, const char *libtorch_dir) {
    for (size_t i = 0; i < env->nsite; i++)
        if (detect_torch_package(env, env->site[i])) break;
    if (env->torch_installed) {
        /* Out-of-tree backends that kernels checks before torch's own CUDA/HIP. [inferred:
         * kernels tests torch.backends.tpu / torch.neuron / the privateuse1 name at run time;
         * these packages are what provide them.] */
        env->has_torch_tpu = dir_exists_in(env, "torch_tpu");
        env->has_torch_neuronx = dir_exists_in(env, "torch_neuronx");
        env->has_torch_npu = dir_exists_in(env, "torch_npu");
    } else if (libtorch_dir) {
        hk__env_put(env, HK_K_LIBTORCH_DIR, libtorch_dir);
        detect_libtorch(env, libtorch_dir);
    }
}

