/* hubkern — machine detection (`hk_env`).
 *
 * An hk_env describes the machine a kernel must run on: OS and CPU, the Python interpreter, the
 * installed PyTorch, tvm-ffi, CUDA, ROCm, and the compute backend the way the Python `kernels` package
 * (0.17) would pick it. Variant resolution (variant.h) reads it.
 *
 * Every field can be
 *   1. detected:    hk_env_detect() looks at the real machine (never imports torch, runs at most
 *                   one short Python interpreter call, loads CUDA and HIP libraries with dlopen
 *                   only);
 *   2. overridden:  HUBKERN_<KEY> environment variables (KEY = upper-cased key below), applied by
 *                   hk_env_detect() unless opts->no_env_overrides is set;
 *   3. set:         hk_env_set(env, key, value) after detection (or on an hk_env_new() blank env
 *                   to describe a foreign machine for cross-resolution).
 * A machine with no Python, no torch and no GPU is a normal result, never an error.
 *
 * Keys (for hk_env_set / hk_env_get / HUBKERN_<KEY>):
 *   os                    "linux" | "darwin" | "windows" (anything else is kept lower-cased)
 *   cpu                   "x86_64" | "aarch64" (amd64/AMD64 → x86_64, arm64/ARM64 → aarch64)
 *   macos_version         "26.0" (darwin only)
 *   python                interpreter to ask. As HUBKERN_PYTHON it is a detection input (the
 *                         interpreter hk_env_detect runs); "none" (or opts->no_python) = no Python
 *   python_version        "3.11.7" ("" = no Python)
 *   python_free_threaded  "0" | "1" (built with Py_GIL_DISABLED)
 *   site_packages         ':'-separated list of directories searched for torch / tvm_ffi.
 *                         As HUBKERN_SITE_PACKAGES it is a detection input and replaces the
 *                         interpreter's list (no interpreter call is needed for it then)
 *   libtorch_dir          a LibTorch distribution directory (build-version, share/cmake/Torch);
 *                         a detection input, used when no torch is found in site-packages
 *   torch_version         "2.11" (major.minor; patch and local tags like +cu130 are dropped)
 *   torch_full_version    "2.11.0+cu130" (informational)
 *   torch_dir             where torch was found (informational)
 *   torch_cxx11_abi       "0" | "1" | "" (unknown; see hk_env_torch_cxx11_abi for the default)
 *   torch_cuda_version    "13.0" (torch.version.cuda)
 *   torch_hip_version     "6.3" (torch.version.hip, major.minor)
 *   torch_xpu_version     "2025.3"
 *   backend               the detected compute backend type: "cuda" | "rocm" | "xpu" | "cann" |
 *                         "metal" | "neuron" | "tpu" | "cpu". Setting it pins it; setting it to
 *                         "" goes back to deriving it
 *   backend_version       "13.0" for cuda/rocm/xpu/cann; "" otherwise. Setting it pins it
 *   tvm_ffi_version       "0.1" (major.minor of apache-tvm-ffi)
 *   tvm_ffi_full_version  "0.1.15.post2" (informational)
 *   tvm_ffi_lib           path of libtvm_ffi (also read from TVM_FFI_LIB as a detection input)
 *   cuda_runtime_version  "13.0" from libcudart's cudaRuntimeGetVersion
 *   cuda_driver_version   "13.0" from libcuda's cuDriverGetVersion
 *   gpus                  ','-separated compute capabilities, "9.0,8.6"; read back with the GPU
 *                         getters below. Setting it replaces the detected GPU list (names become
 *                         "GPU <i>")
 *   hip_runtime_version   "6.3" from libamdhip64's hipRuntimeGetVersion (informational: the backend
 *                         comes from torch, as in kernels)
 *   gpu_arch              the ROCm gcnArchName of HIP device 0 as the runtime reports it, feature
 *                         flags included: "gfx942:sramecc+:xnack-" (or "gfx942"). Loading a rocm
 *                         variant whose metadata lists backend.archs checks the text before the
 *                         first ':' against them. Values must look like "gfx<id>[:<feature>[+|-]]…"
 * A value "" (or NULL) means "unknown / absent".
 *
 * How the backend is derived (kernels 0.17 `_backend()` without importing torch), unless pinned:
 *   torch found/set with torch_cuda_version → cuda(that version)   [torch's CUDA, not the driver's]
 *   else torch_hip_version → rocm; darwin+aarch64 with torch → metal; torch_xpu_version → xpu;
 *   torch_tpu / torch_neuronx / torch_npu packages next to torch → tpu / neuron / cann (checked
 *   first, as upstream does for tpu and neuron);
 *   a torch installation (found on disk) without any of those → cpu;
 *   no torch installation (torch_version only set by the caller, or nothing) →
 *   cuda(cuda_runtime_version) when libcudart answered, else cpu.
 *
 * Thread safety: hk_env_detect may run concurrently on several threads. An hk_env is not
 * synchronised: do not hk_env_set while another thread reads the same env.
 */
#ifndef HUBKERN_ENV_H
#define HUBKERN_ENV_H

#include "hubkern/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hk_env hk_env;

/* Options for hk_env_detect. Initialise with HK_ENV_OPTIONS_INIT or hk_env_options_init (or
 * pass NULL for the defaults). String fields override the matching HUBKERN_* variable; NULL means
 * "use the variable / detect". */
typedef struct hk_env_options {
    unsigned int version;      /* HK_ENV_OPTIONS_VERSION */
    const char *python;        /* interpreter to run; NULL: HUBKERN_PYTHON, else python3 on PATH */
    const char *site_packages; /* ':'-separated dirs; when set, no interpreter call for them */
    const char *libtorch_dir;  /* LibTorch distribution dir; NULL: HUBKERN_LIBTORCH_DIR */
    const char *tvm_ffi_lib;   /* libtvm_ffi path; NULL: HUBKERN_TVM_FFI_LIB, TVM_FFI_LIB, package */
    int no_python;             /* do not run any interpreter (python fields stay unknown) */
    int no_cuda;               /* do not dlopen libcuda / libcudart (also HUBKERN_NO_CUDA=1) */
    int no_env_overrides;      /* ignore every HUBKERN_* variable */
    int python_timeout_ms;     /* kill the interpreter call after this long; 0 = 10000 */
    int no_rocm;               /* do not dlopen libamdhip64 (also HUBKERN_NO_ROCM=1) */
} hk_env_options;

#define HK_ENV_OPTIONS_VERSION 1
#define HK_ENV_OPTIONS_INIT {HK_ENV_OPTIONS_VERSION, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0}

/* Defaults into *opts (everything detected, HUBKERN_* honoured); HK_ERR_INVALID_ARG for a version
 * this library does not know. */
HK_API int hk_env_options_init(hk_env_options *opts, unsigned int version);

/* Detect the machine. *out must be freed with hk_env_free. Never fails for missing software
 * (absent parts are simply unknown); fails only on HK_ERR_NOMEM or HK_ERR_INVALID_ARG (out NULL,
 * an opts->version this library does not know, a malformed HUBKERN_* override value, whose message
 * names the variable). */
HK_API int hk_env_detect(hk_env **out, const hk_env_options *opts);

/* A blank environment: everything unknown (os, cpu included), backend derived as cpu. Describe a
 * machine with hk_env_set for cross-resolution. Free with hk_env_free. */
HK_API int hk_env_new(hk_env **out);

/* A deep copy. Free with hk_env_free. */
HK_API int hk_env_clone(hk_env **out, const hk_env *env);

/* Free an environment (NULL is fine). */
HK_API void hk_env_free(hk_env *env);

/* Set one field by key (see the list above); value NULL or "" makes it unknown. Values are
 * validated (versions "M.m[.p…]", booleans 0/1/true/false/yes/no, gpus "M.m[,M.m…]", backend
 * names); on a bad key or value returns HK_ERR_INVALID_ARG and leaves env unchanged. */
HK_API int hk_env_set(hk_env *env, const char *key, const char *value);

/* Read one field by key as a string; NULL when unknown or when key is not a key. The pointer is
 * valid until the env changes or is freed. Tri-state fields read "0"/"1" (their effective value,
 * as the typed getters return it); "backend"/"backend_version" read the derived backend; the
 * read-only keys "backend_variant" and "backend_source" are also available. */
HK_API const char *hk_env_get(const hk_env *env, const char *key);

/* ---- typed getters (NULL = unknown; pointers live as long as the env is unchanged) ---------- */
HK_API const char *hk_env_os(const hk_env *env);            /* "linux" */
HK_API const char *hk_env_cpu(const hk_env *env);           /* "x86_64" */
HK_API const char *hk_env_macos_version(const hk_env *env); /* "26.0"; NULL off macOS */

HK_API const char *hk_env_python_executable(const hk_env *env); /* absolute path, or NULL */
HK_API const char *hk_env_python_version(const hk_env *env);    /* "3.11.7", or NULL */
/* 1 free-threaded, 0 not, -1 unknown (no Python). */
HK_API int hk_env_python_free_threaded(const hk_env *env);
/* The site-packages directories searched (sys.path order); i < count. */
HK_API size_t hk_env_site_packages_count(const hk_env *env);
HK_API const char *hk_env_site_packages(const hk_env *env, size_t i);

HK_API const char *hk_env_torch_version(const hk_env *env);      /* "2.11", or NULL: no torch */
HK_API const char *hk_env_torch_full_version(const hk_env *env); /* "2.11.0+cu130" */
HK_API const char *hk_env_torch_dir(const hk_env *env);          /* the torch/ or LibTorch dir */
/* 1 built with the C++11 ABI, 0 pre-C++11 ABI, -1 unknown (no torch, or not Linux). When the
 * field is not set/detected, a Linux torch >= 2.8 reads 1: those releases are only built with the
 * C++11 ABI (torch.compiled_with_cxx11_abi() is a literal `return True` there). */
HK_API int hk_env_torch_cxx11_abi(const hk_env *env);
HK_API const char *hk_env_torch_cuda_version(const hk_env *env); /* "13.0", or NULL */
HK_API const char *hk_env_torch_hip_version(const hk_env *env);  /* "6.3", or NULL */
HK_API const char *hk_env_torch_xpu_version(const hk_env *env);  /* "2025.3", or NULL */

/* The compute backend as kernels would detect it (see the derivation above). Never NULL:
 * "cuda", "rocm", "xpu", "cann", "metal", "neuron", "tpu" or "cpu". */
HK_API const char *hk_env_backend(const hk_env *env);
/* "13.0" for cuda/rocm/xpu/cann when known; NULL otherwise. */
HK_API const char *hk_env_backend_version(const hk_env *env);
/* The backend as it appears in variant names: "cu130", "rocm63", "xpu20253", "cann81", "cpu",
 * "metal", "neuron", "tpu"; NULL when a versioned backend has no known version. */
HK_API const char *hk_env_backend_variant(const hk_env *env);

HK_API const char *hk_env_tvm_ffi_version(const hk_env *env);      /* "0.1", or NULL */
HK_API const char *hk_env_tvm_ffi_full_version(const hk_env *env); /* "0.1.15.post2" */
HK_API const char *hk_env_tvm_ffi_lib(const hk_env *env);          /* path of libtvm_ffi */

HK_API const char *hk_env_cuda_runtime_version(const hk_env *env); /* "13.0" (libcudart) */
HK_API const char *hk_env_cuda_driver_version(const hk_env *env);  /* "13.0" (libcuda) */
/* Number of CUDA devices the driver reports (0 without a driver or GPU). */
HK_API int hk_env_gpu_count(const hk_env *env);
/* Compute capability of device i: *major, *minor (either may be NULL). HK_ERR_INVALID_ARG if
 * i >= hk_env_gpu_count. */
HK_API int hk_env_gpu_capability(const hk_env *env, int i, int *major, int *minor);
/* Device name ("NVIDIA H200"); NULL if i is out of range. */
HK_API const char *hk_env_gpu_name(const hk_env *env, int i);

HK_API const char *hk_env_hip_runtime_version(const hk_env *env); /* "6.3" (libamdhip64) */
/* gcnArchName of ROCm device 0, "gfx90a:sramecc+:xnack-"; NULL without a HIP runtime or device.
 * hk_rocm_arch_base (kernel.h) gives the part the arch check compares ("gfx90a"). */
HK_API const char *hk_env_gpu_arch(const hk_env *env);

/* Everything above as one JSON object: the keys listed above (unknown values as null, the
 * tri-states as true/false/null, "site_packages" as an array, "gpus" as
 * [{"index":0,"name":…,"capability":"9.0"}]), plus "backend_variant" ("cu130"),
 * "backend_source" ("override" | "torch" | "cudart" | "default": where the backend came from),
 * "gpu_count" and "torch_installed" (torch was found on disk rather than stated). "gpu_arch" and
 * "hip_runtime_version" come last.
 * Free with hk_free. NULL only when out of memory. */
HK_API char *hk_env_to_json(const hk_env *env);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_ENV_H */
