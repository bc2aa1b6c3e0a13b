/* Kernel handles: loading a variant directory, the process-wide registry, accessors. */
#include "kernel/kernel_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hk_kernel {
    int refs;                 /* guarded by g_reg_lock */
    struct hk_kernel *next;   /* registry list */
    hk_kernel_kind kind;
    char *repo_id, *commit, *variant, *path, *library;
    hk_metadata_owned md;
    size_t num_fns;
    char **fn_names;
    hk_function **fns;
    void *dl;                 /* never closed: native code stays for the process lifetime */
    uint64_t bytes_verified, bytes_trusted; /* the digest check before the load */
    hk_kernel **deps;         /* kernel-depends, loaded first; one reference each */
    size_t num_deps;
};

static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static hk_kernel *g_registry;

void hk__kernel_unref_all(hk_kernel **deps, size_t n) {
    for (size_t i = 0; i < n; i++) hk_kernel_unref(deps[i]);
    free(deps);
}

static void kernel_free(hk_kernel *k) {
    if (!k) return;
    hk__kernel_unref_all(k->deps, k->num_deps);
    free(k->repo_id);
    free(k->commit);
    free(k->variant);
    free(k->path);
    free(k->library);
    hk__metadata_free(&k->md);
    if (k->fns)
        for (size_t i = 0; i < k->num_fns; i++) free(k->fns[i]);
    free(k->fns);
    hk__kstrv_free(k->fn_names, k->num_fns);
    free(k);
}

HK_API hk_kernel *hk_kernel_ref(hk_kernel *k) {
    if (!k) return NULL;
    pthread_mutex_lock(&g_reg_lock);
    k->refs++;
    pthread_mutex_unlock(&g_reg_lock);
    return k;
}

HK_API void hk_kernel_unref(hk_kernel *k) {
    if (!k) return;
    pthread_mutex_lock(&g_reg_lock);
    bool last = --k->refs == 0;
    if (last) {
        for (hk_kernel **pp = &g_registry; *pp; pp = &(*pp)->next)
            if (*pp == k) {
                *pp = k->next;
                break;
            }
    }
    pthread_mutex_unlock(&g_reg_lock);
    if (last) kernel_free(k);
}

HK_API const char *hk_kernel_repo_id(const hk_kernel *k) { return k && k->repo_id ? k->repo_id : ""; }
HK_API const char *hk_kernel_commit(const hk_kernel *k) { return k && k->commit ? k->commit : ""; }
HK_API const char *hk_kernel_variant(const hk_kernel *k) { return k ? k->variant : NULL; }
HK_API const char *hk_kernel_path(const hk_kernel *k) { return k ? k->path : NULL; }
HK_API const char *hk_kernel_library_path(const hk_kernel *k) { return k ? k->library : NULL; }
HK_API hk_kernel_kind hk_kernel_get_kind(const hk_kernel *k) { return k ? k->kind : HK_KERNEL_NOARCH; }
HK_API const hk_kernel_metadata *hk_kernel_get_metadata(const hk_kernel *k) { return k ? &k->md.pub : NULL; }
HK_API const hk_kernel_metadata *hk_kernel_metadata_get(const hk_kernel *k) { return hk_kernel_get_metadata(k); }
HK_API uint64_t hk_kernel_bytes_verified(const hk_kernel *k) { return k ? k->bytes_verified : 0; }
HK_API uint64_t hk_kernel_bytes_trusted(const hk_kernel *k) { return k ? k->bytes_trusted : 0; }
HK_API const char *hk_kernel_torch_namespace(const hk_kernel *k) {
    return k && k->kind == HK_KERNEL_TORCH ? k->md.pub.id : NULL;
}
void hk__kernel_set_deps(hk_kernel *k, hk_kernel **deps, size_t n) {
    pthread_mutex_lock(&g_reg_lock);
    bool take = k->num_deps == 0 && !k->deps;
    if (take) {
        k->deps = deps;
        k->num_deps = n;
    }
    pthread_mutex_unlock(&g_reg_lock);
    if (!take) hk__kernel_unref_all(deps, n);
}

HK_API size_t hk_kernel_dependency_count(const hk_kernel *k) { return k ? k->num_deps : 0; }
HK_API hk_kernel *hk_kernel_dependency_at(const hk_kernel *k, size_t i) {
    return k && i < k->num_deps ? k->deps[i] : NULL;
}
HK_API hk_kernel *hk_kernel_dependency(const hk_kernel *k, const char *repo_id) {
    if (!k || !repo_id) return NULL;
    for (size_t i = 0; i < k->num_deps; i++)
        if (k->deps[i]->repo_id && strcmp(k->deps[i]->repo_id, repo_id) == 0) return k->deps[i];
    return NULL;
}

HK_API size_t hk_kernel_num_functions(const hk_kernel *k) { return k ? k->num_fns : 0; }
HK_API const char *hk_kernel_function_name(const hk_kernel *k, size_t i) {
    return k && i < k->num_fns ? k->fn_names[i] : NULL;
}

HK_API int hk_kernel_function(const hk_function **out, const hk_kernel *k, const char *name) {
    if (!out || !k || !name) return hk__fail(HK_ERR_INVALID_ARG, "hk_kernel_function: NULL argument");
    *out = NULL;
    if (k->kind == HK_KERNEL_NOARCH)
        return hk__fail(HK_ERR_UNSUPPORTED,
                       "%s (%s) holds no native code: it is a Python-only (noarch) variant",
                       k->variant, k->path);
    if (k->kind == HK_KERNEL_TORCH)
        return hk__fail(HK_ERR_UNSUPPORTED,
                       "%s is a torch variant: call its ops through the c10 dispatcher as "
                       "%s::%s from C++",
                       k->variant, k->md.pub.id, name);
    size_t lo = 0, hi = k->num_fns;
    while (lo < hi) { /* names are sorted */
        size_t mid = (lo + hi) / 2;
        int c = strcmp(k->fn_names[mid], name);
        if (c == 0) {
            *out = k->fns[mid];
            return HK_OK;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < k->num_fns; i++) hk__sb_printf(&sb, "%s%s", i ? ", " : "", k->fn_names[i]);
    int rc = hk__fail(HK_ERR_SYMBOL, "%s exports no function '%s' (it exports: %s)", k->variant, name,
                     sb.data && sb.len ? sb.data : "nothing");
    hk__sb_free(&sb);
    return rc;
}

/* By name: the handle's lookup, then the call (tvmffi.c), so that the calls never look back into
 * the handle. */
HK_API int hk_kernel_call(hk_value *out_result, const hk_kernel *k, const char *name,
                          const hk_value *args, size_t num_args) {
    const hk_function *f;
    if (out_result) *out_result = hk_value_none();
    int rc = hk_kernel_function(&f, k, name);
    if (rc) return rc;
    return hk_function_call(out_result, f, args, num_args);
}

/* ---- loading ----------------------------------------------------------------------------- */

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static hk_kernel_kind kind_of_variant(const char *variant, const char *dir, const char *id) {
    if (hk__str_starts_with(variant, "tvm-ffi")) return HK_KERNEL_TVM_FFI;
    if (hk__str_starts_with(variant, "torch-stable-abi")) return HK_KERNEL_TORCH;
    if (hk__str_starts_with(variant, "torch-")) return HK_KERNEL_NOARCH;
    if (hk__str_starts_with(variant, "torch")) return HK_KERNEL_TORCH;
    /* a directory not named like a variant (local development): look at the files */
    char *p = hk__asprintf("%s/%s.abi3.so", dir, id);
    bool torch = p && hk__path_exists(p);
    free(p);
    if (torch) return HK_KERNEL_TORCH;
    p = hk__asprintf("%s/%s.so", dir, id);
    bool tvm = p && hk__path_exists(p);
    free(p);
    return tvm ? HK_KERNEL_TVM_FFI : HK_KERNEL_NOARCH;
}

/* tvm-ffiXY → X.Y (lazy first group: "01" → 0.1, "012" → 0.12) */
static bool tvm_ffi_variant_version(const char *variant, int *major, int *minor) {
    const char *p = variant + strlen("tvm-ffi");
    size_t n = 0;
    while (p[n] >= '0' && p[n] <= '9') n++;
    if (n < 2 || (p[n] != '-' && p[n] != '\0')) return false;
    *major = p[0] - '0';
    *minor = atoi(p + 1);
    return true;
}

bool hk__libtorch_in_process(void) {
    static const char *const syms[] = {
        "_ZN3c1010Dispatcher13realSingletonEv", /* c10::Dispatcher::realSingleton() */
        "_ZN3c1010Dispatcher9singletonEv",      /* c10::Dispatcher::singleton() (older) */
        "aoti_torch_empty_strided",             /* the stable C shim in libtorch_cpu */
    };
    for (size_t i = 0; i < HK_ARRAY_LEN(syms); i++)
        if (dlsym(RTLD_DEFAULT, syms[i])) return true;
    return false;
}

/* Device 0's compute capability for req: the caller's env, else the driver. false: no CUDA device. */
static bool cuda_capability(const hk_load_request *req, int *major, int *minor) {
    *major = req->cuda_major;
    *minor = req->cuda_minor;
    if (*major == -1) {
        if (hk__cuda_device_capability(major, minor)) *major = -2;
        hk_clear_error();
    }
    return *major >= 0;
}

static int check_gpu_fitness(hk_kernel *k, const hk_load_request *req) {
    if (req->skip_arch_check) return HK_OK;
    if (strcmp(k->md.pub.backend, "rocm") == 0) {
        if (k->md.pub.num_archs > 0 && !req->gpu_arch)
            hk__log(HK_LOG_WARN, "%s: no ROCm device visible (GPU arch unknown), GPU fitness not "
                   "checked", k->variant);
        return hk_kernel_check_rocm_arch(&k->md.pub, req->gpu_arch);
    }
    if (strcmp(k->md.pub.backend, "cuda") != 0) return HK_OK;
    int major, minor;
    if (!cuda_capability(req, &major, &minor)) {
        hk__log(HK_LOG_WARN, "%s: no CUDA device visible, GPU fitness not checked", k->variant);
        return HK_OK;
    }
    return hk_kernel_check_arch(&k->md.pub, k->library, major, minor);
}

int hk__kernel_check_metadata_fitness(const hk_kernel_metadata *md, const hk_load_request *req) {
    if (req->skip_arch_check || !md->backend || md->num_archs == 0) return HK_OK;
    if (strcmp(md->backend, "rocm") == 0) return hk_kernel_check_rocm_arch(md, req->gpu_arch);
    if (strcmp(md->backend, "cuda") != 0) return HK_OK;
    int major, minor;
    if (!cuda_capability(req, &major, &minor)) return HK_OK; /* the load warns */
    return hk_kernel_check_arch(md, NULL, major, minor);
}

static int find_library(hk_kernel *k, const char *suffix) {
    k->library = hk__asprintf("%s/%s%s", k->path, k->md.pub.id, suffix);
    if (!k->library) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (hk__path_exists(k->library)) return HK_OK;
    return hk__fail(HK_ERR_LOAD, "%s has no %s%s (metadata id %s): the variant is incomplete; "
                   "re-download it",
                   k->path, k->md.pub.id, suffix, k->md.pub.id);
}

static int load_tvm_ffi(hk_kernel *k, const hk_load_request *req) {
    int rc = find_library(k, ".so");
    if (rc) return rc;
    rc = check_gpu_fitness(k, req);
    if (rc) return rc;
    rc = hk__tvm_ffi_ensure(req->tvm_ffi_library, req->tvm_ffi_hint);
    if (rc) return hk__fail_context("loading %s", k->variant);
    int want_major, want_minor, have_major, have_minor;
    if (hk__str_starts_with(k->variant, "tvm-ffi") &&
        tvm_ffi_variant_version(k->variant, &want_major, &want_minor) &&
        hk_tvm_ffi_version(&have_major, &have_minor, NULL) == HK_OK &&
        (want_major != have_major || want_minor != have_minor))
        return hk__fail(HK_ERR_RUNTIME_MISSING,
                       "%s needs tvm-ffi %d.%d but the loaded libtvm_ffi is %d.%d; install "
                       "apache-tvm-ffi==%d.%d.* or point HUBKERN_TVM_FFI_LIB at a matching library",
                       k->variant, want_major, want_minor, have_major, have_minor, want_major,
                       want_minor);
    char **names = NULL;
    size_t n = 0;
    rc = hk__elf_exported_with_prefix(&names, &n, k->library, "__tvm_ffi_");
    if (rc) return rc;
    /* "__tvm_ffi__<x>" are runtime-internal symbols (library context, metadata, docs) */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (names[i][0] == '_') free(names[i]);
        else names[w++] = names[i];
    }
    k->fn_names = names;
    k->num_fns = w;
    dlerror();
    k->dl = dlopen(k->library, RTLD_NOW | RTLD_LOCAL);
    if (!k->dl) {
        const char *e = dlerror();
        return hk__fail(HK_ERR_LOAD, "cannot load %s: %s", k->library, e ? e : "dlopen failed");
    }
    k->fns = calloc(w ? w : 1, sizeof *k->fns);
    if (!k->fns) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < w; i++) {
        char sym[512];
        snprintf(sym, sizeof sym, "__tvm_ffi_%s", k->fn_names[i]);
        void *p = dlsym(k->dl, sym);
        if (!p) return hk__fail(HK_ERR_SYMBOL, "%s lists %s but dlsym cannot find it", k->library, sym);
        rc = hk__function_make(&k->fns[i], k, k->fn_names[i], p);
        if (rc) return rc;
    }
    return HK_OK;
}

static int load_torch(hk_kernel *k, const hk_load_request *req) {
    int rc = find_library(k, ".abi3.so");
    if (rc) return rc;
    if (!hk__libtorch_in_process())
        return hk__fail(HK_ERR_RUNTIME_MISSING,
                       "%s is a torch variant: it can only be loaded into a process that already "
                       "has libtorch (link your program with libtorch, or choose a tvm-ffi "
                       "variant); libtorch is not loaded in this process",
                       k->variant);
    rc = check_gpu_fitness(k, req);
    if (rc) return rc;
    dlerror();
    /* RTLD_LAZY: abi3 modules leave Py* symbols undefined (they do not link libpython) */
    k->dl = dlopen(k->library, RTLD_LAZY | RTLD_LOCAL);
    if (!k->dl) {
        const char *e = dlerror();
        return hk__fail(HK_ERR_LOAD, "cannot load %s: %s", k->library, e ? e : "dlopen failed");
    }
    hk__log(HK_LOG_INFO, "%s: torch ops registered under namespace %s", k->variant, k->md.pub.id);
    return HK_OK;
}

hk_kernel *hk__kernel_registry_find(const char *variant_dir) {
    char real[PATH_MAX];
    if (!realpath(variant_dir, real)) return NULL;
    hk_kernel *found = NULL;
    pthread_mutex_lock(&g_reg_lock);
    for (hk_kernel *k = g_registry; k; k = k->next)
        if (strcmp(k->path, real) == 0) {
            k->refs++;
            found = k;
            break;
        }
    pthread_mutex_unlock(&g_reg_lock);
    return found;
}

int hk__kernel_load_variant(hk_kernel **out, const hk_load_request *req) {
    *out = NULL;
    char real[PATH_MAX];
    if (!realpath(req->variant_dir, real))
        return hk__fail(HK_ERR_NOT_FOUND, "variant directory %s does not exist", req->variant_dir);
    pthread_mutex_lock(&g_reg_lock);
    for (hk_kernel *k = g_registry; k; k = k->next)
        if (strcmp(k->path, real) == 0) {
            k->refs++;
            pthread_mutex_unlock(&g_reg_lock);
            *out = k;
            return HK_OK;
        }
    hk_kernel *k = calloc(1, sizeof *k);
    int rc = HK_OK;
    if (!k) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    k->refs = 1;
    k->path = hk__strdup(real);
    k->variant = hk__strdup(req->variant_name ? req->variant_name : base_name(real));
    k->repo_id = req->repo_id ? hk__strdup(req->repo_id) : NULL;
    k->commit = req->commit ? hk__strdup(req->commit) : NULL;
    k->bytes_verified = req->bytes_verified;
    k->bytes_trusted = req->bytes_trusted;
    if (!k->path || !k->variant || (req->repo_id && !k->repo_id) || (req->commit && !k->commit)) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    rc = hk__metadata_read(&k->md, real);
    if (rc == HK_OK) rc = hk__metadata_check_minver(&k->md, k->variant);
    if (rc) goto out;
    k->kind = kind_of_variant(k->variant, real, k->md.pub.id);
    if (k->kind == HK_KERNEL_TVM_FFI) rc = load_tvm_ffi(k, req);
    else if (k->kind == HK_KERNEL_TORCH) rc = load_torch(k, req);
    else {
        /* Noarch builds may still declare archs ([torch-noarch] cuda-capabilities / rocm-archs):
         * kernels 0.17.2 checks them from metadata alone, like any other variant's. */
        if (k->md.pub.num_archs > 0) rc = check_gpu_fitness(k, req);
        if (rc == HK_OK)
            hk__log(HK_LOG_INFO, "%s holds no native code (Python-only variant): %s", k->variant, real);
    }
    if (rc) goto out;
    k->next = g_registry;
    g_registry = k;
    *out = k;
out:
    pthread_mutex_unlock(&g_reg_lock);
    if (rc) kernel_free(k);
    return rc;
}
