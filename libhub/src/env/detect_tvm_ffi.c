/* tvm-ffi detection: the apache-tvm-ffi package in site-packages (version, libtvm_ffi path). */
#include "env/env_internal.h"

#include <dirent.h>
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
}

