/* Internal to env/ and variant/: the hk_env structure and detection helpers. */
#ifndef HK_ENV_INTERNAL_H
#define HK_ENV_INTERNAL_H

#include "internal.h"
#include "hubkern/env.h"

#include <stdbool.h>
#include <stdint.h>

/* Field keys; the order is the JSON order. */
typedef enum hk_env_key {
    HK_K_OS,
    HK_K_CPU,
    HK_K_MACOS_VERSION,
    HK_K_PYTHON,
    HK_K_PYTHON_VERSION,
    HK_K_PYTHON_FREE_THREADED,
    HK_K_SITE_PACKAGES,
    HK_K_LIBTORCH_DIR,
    HK_K_TORCH_VERSION,
    HK_K_TORCH_FULL_VERSION,
    HK_K_TORCH_DIR,
    HK_K_TORCH_CXX11_ABI,
    HK_K_TORCH_CUDA_VERSION,
    HK_K_TORCH_HIP_VERSION,
    HK_K_TORCH_XPU_VERSION,
    HK_K_BACKEND,
    HK_K_BACKEND_VERSION,
    HK_K_TVM_FFI_VERSION,
    HK_K_TVM_FFI_FULL_VERSION,
    HK_K_TVM_FFI_LIB,
    HK_K_CUDA_RUNTIME_VERSION,
    HK_K_CUDA_DRIVER_VERSION,
    HK_K_GPUS,
    HK_K_HIP_RUNTIME_VERSION,
    HK_K_GPU_ARCH,
    HK_K_COUNT
} hk_env_key;

typedef struct hk_gpu {
    int major, minor;
    char *name;
} hk_gpu;

struct hk_env {
    char *f[HK_K_COUNT];  /* raw values as detected / set (NULL = unknown) */
    char **site;          /* site_packages split on ':' */
    size_t nsite;
    hk_gpu *gpus;
    int ngpus;
    bool torch_installed; /* torch found on disk (package or LibTorch), not just stated */
    bool has_torch_tpu, has_torch_neuronx, has_torch_npu; /* sibling packages next to torch */
    /* derived (env_derive) */
    char *backend;         /* never NULL after derive */
    char *backend_version; /* NULL when unknown / unversioned */
    char *backend_variant; /* "cu130" */
    const char *backend_source;
    char *gpus_str;        /* canonical "9.0,8.6" */
    /* sticky: storing a value ran out of memory (the detectors carry on; hk_env_detect then fails
     * with HK_ERR_NOMEM instead of returning a machine with fields silently missing) */
    bool oom;
};

const char *hk__env_key_name(hk_env_key k);
int hk__env_key_lookup(const char *name); /* -1 if not a key */

/* Leading "M.m" of a version string ("2.11.0+cu130" → 2, 11; "13" → 13, 0). false if s is NULL
 * or does not start with a digit. */
bool hk__env_ver2(const char *s, uint32_t *major, uint32_t *minor);

/* Recompute the derived fields (backend ...). Returns HK_ERR_NOMEM or HK_OK. */
int hk__env_derive(hk_env *env);

/* Store a detected value without validation (detect.c). value NULL clears. */
int hk__env_put(hk_env *env, hk_env_key k, const char *value);

/* Helpers of the detection pieces (detect_parse.c). */
/* A text file of at most 8 MiB, malloc'd; NULL (no error left) when it cannot be read. */
char *hk__env_read_text(const char *path);
bool hk__env_is_file(const char *path);
/* Store the "M.m" of a raw version ("2.11.0+cu130" → "2.11"); nothing when raw is not one. */
void hk__env_put_version2(hk_env *env, hk_env_key k, const char *raw);
/* dlsym as a function pointer of `type` (through uintptr_t: ISO C has no object → function
 * pointer conversion). Needs <dlfcn.h>. */
#define HK_SYM(type, h, name) ((type)(uintptr_t)dlsym((h), (name)))

/* Detection pieces (detect_os.c, detect_python.c, detect_torch.c, detect_tvm_ffi.c,
 * detect_cuda.c, detect_rocm.c). */
void hk__env_detect_os(hk_env *env);
int hk__env_detect_python(hk_env *env, const char *python, int timeout_ms, bool want_sys_path);
void hk__env_detect_torch(hk_env *env, const char *libtorch_dir);
void hk__env_detect_tvm_ffi(hk_env *env, const char *explicit_lib);
void hk__env_detect_cuda(hk_env *env);
/* libamdhip64 through dlopen: hip_runtime_version and gpu_arch (device 0's gcnArchName). `libs`
 * are the names tried in order (NULL: the usual sonames). Leaves the fields unset, without an
 * error, when no library loads, a symbol is missing, no device answers, or the arch read back is
 * not a gcnArchName. */
void hk__env_detect_rocm(hk_env *env, const char *const *libs, size_t nlibs);
/* Is s a gcnArchName: "gfx" + [0-9a-z]+, then ":feature+" / ":feature-" parts? (at most 255 chars) */
bool hk__env_gcn_arch_valid(const char *s);
/* The runtime version hipRuntimeGetVersion returns (HIP_VERSION = major * 10000000 +
 * minor * 100000 + patch) as "M.m" into buf; false when v is not of that form. */
bool hk__hip_version_text(char *buf, size_t cap, int v);

/* Parsers exposed for unit tests. */
/* Find `name = 'value'` (optionally `name: T = …` or `name = other = …`) in Python source text.
 * Returns a malloc'd value, "" for None, NULL if the name is not assigned at line start. */
char *hk__py_assignment(const char *text, const char *name);
/* -D_GLIBCXX_USE_CXX11_ABI=<0|1> in a TorchConfig.cmake text: 0/1, -1 if absent. */
int hk__torch_cmake_cxx11(const char *text);
/* `def compiled_with_cxx11_abi` returning a literal True/False in torch/__init__.py: 1/0, else -1. */
int hk__torch_init_cxx11(const char *text);
/* "Version: x" from a dist-info METADATA text; malloc'd or NULL. */
char *hk__metadata_version(const char *text);
/* The CUDA/ROCm version from a torch local version tag: "2.11.0+cu130" → cuda "13.0";
 * "+rocm6.3" → hip "6.3". Writes malloc'd strings (or NULL) into *cuda / *hip. */
void hk__torch_local_tag(const char *version, char **cuda, char **hip);

#endif
