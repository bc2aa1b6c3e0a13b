/* tvm-ffi detection: the apache-tvm-ffi package in site-packages (version, libtvm_ffi path), else
 * the version libtvm_ffi itself reports (TVMFFIGetVersion) when only the library was named. */
#include "env/env_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tvm-ffi -------------------------------------------------------------------------------- */

static char *dist_info_version(const char *site, const char *prefix) {
    DIR *d = opendir(site);
    if (!d) return NULL;
    char *version = NULL;
    size_t plen = strlen(prefix);
    for (struct dirent *e; !version && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, plen) != 0 || !hk__str_ends_with(e->d_name, ".dist-info"))
            continue;
        char *dir = hk__path_join(site, e->d_name);
        char *meta = dir ? hk__path_join(dir, "METADATA") : NULL;
        char *text = meta ? hk__env_read_text(meta) : NULL;
        version = hk__metadata_version(text);
        free(text);
        free(meta);
        free(dir);
    }
    closedir(d);
    return version;
}

/* TVMFFIVersion (include/tvm/ffi/c_api.h): major, minor, patch as uint32 */
typedef struct tvm_ffi_version {
    uint32_t major, minor, patch;
} tvm_ffi_version;
typedef void (*tvm_ffi_get_version_fn)(tvm_ffi_version *);

/* The version of the library at path, as it reports it. On a host without Python
 * (HUBKERN_NO_PYTHON=1, HUBKERN_TVM_FFI_LIB=...) this is the only source, and without it every
 * tvm-ffi variant was refused until HUBKERN_TVM_FFI_VERSION was set by hand (issue 24). The
 * library stays loaded: the loader opens the same one for the kernel, and tvm-ffi registers
 * global functions that must not be unloaded. */
static void version_from_library(hk_env *env, const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        hk__log(HK_LOG_DEBUG, "tvm-ffi library %s: %s", path, dlerror());
        return;
    }
    tvm_ffi_get_version_fn get = HK_SYM(tvm_ffi_get_version_fn, h, "TVMFFIGetVersion");
    if (!get) {
        hk__log(HK_LOG_DEBUG, "tvm-ffi library %s has no TVMFFIGetVersion", path);
        return;
    }
    tvm_ffi_version v = {0, 0, 0};
    get(&v);
    char full[48];
    snprintf(full, sizeof full, "%u.%u.%u", v.major, v.minor, v.patch);
    hk__env_put(env, HK_K_TVM_FFI_FULL_VERSION, full);
    hk__env_put_version2(env, HK_K_TVM_FFI_VERSION, full);
}

void hk__env_detect_tvm_ffi(hk_env *env, const char *explicit_lib) {
    const char *os = env->f[HK_K_OS];
    const char *libname = os && strcmp(os, "darwin") == 0 ? "tvm_ffi/lib/libtvm_ffi.dylib"
                                                           : "tvm_ffi/lib/libtvm_ffi.so";
    if (explicit_lib) hk__env_put(env, HK_K_TVM_FFI_LIB, explicit_lib);
    for (size_t i = 0; i < env->nsite; i++) {
        char *pkg = hk__path_join(env->site[i], "tvm_ffi");
        if (!pkg) env->oom = true; /* hk_env_detect fails rather than report no tvm-ffi */
        bool found = pkg && hk__is_dir(pkg);
        if (!found) {
            free(pkg);
            continue;
        }
        /* tvm_ffi.__version__ comes from tvm_ffi/_version.py; the wheel's METADATA agrees. */
        char *vp = hk__path_join(pkg, "_version.py");
        char *text = vp ? hk__env_read_text(vp) : NULL;
        if (!vp) env->oom = true;
        char *full = hk__py_assignment(text, "__version__");
        free(text);
        free(vp);
        if (!full || !*full) {
            free(full);
            full = dist_info_version(env->site[i], "apache_tvm_ffi-");
        }
        if (full) {
            hk__env_put(env, HK_K_TVM_FFI_FULL_VERSION, full);
            hk__env_put_version2(env, HK_K_TVM_FFI_VERSION, full);
        }
        free(full);
        if (!explicit_lib) {
            char *lib = hk__path_join(env->site[i], libname);
            if (!lib) env->oom = true;
            if (lib && hk__env_is_file(lib)) hk__env_put(env, HK_K_TVM_FFI_LIB, lib);
            free(lib);
        }
        free(pkg);
        break;
    }
    if (explicit_lib && !env->f[HK_K_TVM_FFI_VERSION]) version_from_library(env, explicit_lib);
}

