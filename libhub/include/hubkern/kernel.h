/* hubkern — getting, loading and calling kernels.
 *
 * One call joins machine detection, version and variant resolution, download with verification,
 * the shared cache and dlopen:
 *
 *     hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
 *     o.repo_id = "kernels-community/rmsnorm";
 *     o.kernel_version = 1;
 *     hk_kernel *k;
 *     if (hk_get_kernel(&k, &o) != HK_OK) { fprintf(stderr, "%s\n", hk_last_error()); ... }
 *     hk_value args[4] = { hk_value_tensor(&out), hk_value_tensor(&x), hk_value_tensor(&w),
 *                          hk_value_float(1e-6) };
 *     hk_value result;
 *     int rc = hk_kernel_call(&result, k, "rms_norm", args, 4);
 *     hk_kernel_unref(k);
 *
 * Kernel kinds (see docs/loading.md):
 *  - tvm-ffi variants (`tvm-ffi01-...`): `<id>.so` is loaded after libtvm_ffi; its exported functions
 *    (`__tvm_ffi_<name>` symbols) are listed and callable through hk_kernel_call / hk_function_call.
 *  - torch variants (`torch*-...`): `<id>.abi3.so` is loaded only into a process that already has
 *    libtorch; its ops register themselves with the c10 dispatcher under the namespace
 *    hk_kernel_torch_namespace() (= metadata id). Calling them is the caller's C++ business.
 *  - noarch variants (`torch-<backend>`): Python only; the handle gives the path and says it holds
 *    no native code (hk_kernel_get_kind() == HK_KERNEL_NOARCH). When their metadata declares
 *    backend.archs (build.toml [torch-noarch] cuda-capabilities / rocm-archs), the device is
 *    checked against them as for native builds (HK_ERR_ARCH; skip_arch_check skips it).
 *
 * Handles are reference counted and shared: asking twice (from any threads) for the same variant
 * directory gives the same handle with one more reference. Two versions of one kernel are two
 * directories and load side by side. Native code, once loaded, stays mapped for the life of the
 * process (as in Python); the last hk_kernel_unref frees the handle's memory only.
 */
#ifndef HUBKERN_KERNEL_H
#define HUBKERN_KERNEL_H

#include "hubkern/common.h"
#include "hubkern/hub.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hk_env; /* hubkern/env.h: a detected (or caller-built) description of the machine */
struct hk_signature_policies; /* hubkern/signature.h */

typedef struct hk_kernel hk_kernel;
typedef struct hk_function hk_function;
typedef struct hk_kernel_metadata hk_kernel_metadata; /* defined below (C11 allows the repeat) */

/* ---- getting a kernel --------------------------------------------------------------------- */

#define HK_VERSION_UNSET (-1)

/* What to get and how. The Hub client's options nest (hub_options: endpoint, token, cache, offline,
 * signature configuration, freshness, progress, ...), or a caller's client is handed over (hub);
 * nothing of the client is repeated here. Every field's "unset" is its _INIT value: NULL, 0, or -1
 * where 0 means something (kernel_version, hub_options.offline / max_retries).
 *
 * ABI: version 1 and 2 structs (which carried copies of ten client fields, and `offline` 0/1) are
 * still accepted and read as they were laid out; their fields land in hub_options. */
typedef struct hk_get_kernel_options {
    unsigned int version;        /* HK_GET_KERNEL_OPTIONS_VERSION */
    const char *repo_id;         /* "org/name" (required for hk_get_kernel / hk_has_kernel) */
    int kernel_version;          /* major version N (branch vN), or HK_VERSION_UNSET (-1) */
    const char *revision;        /* branch, tag or commit; exactly one of kernel_version / revision */
    const char *variant;         /* NULL: choose for this machine; else exactly this build variant
                                    (HK_ERR_NO_VARIANT, listing the variants, if the repo lacks it) */
    const char *backend;         /* NULL: the detected one; "cpu" forces CPU variants */
    int trust_remote_code;       /* 1: skip the trusted-publisher check (org overview) */
    int skip_arch_check;         /* 1: do not refuse a GPU the build does not cover (HK_ERR_ARCH) */
    int no_local_kernels;        /* 1: ignore LOCAL_KERNELS */
    int signature;               /* HK_SIGNATURE_DEFAULT / _REQUIRE / _WARN / _OFF (hubkern/signature.h):
                                    the mode of this request, carried through redirects and into
                                    every dependency (never lowered on the way) */
    const struct hk_env *env;    /* NULL: this process's machine (detected once per process);
                                    else resolve for this machine */
    const char *tvm_ffi_library; /* explicit libtvm_ffi path (else HUBKERN_TVM_FFI_LIB, TVM_FFI_LIB,
                                    one already loaded, the Python package's copy, the system) */
    /* The client: hub when given (used as it is and not freed; like any hk_hub, from one thread at
     * a time: its endpoint, token, cache, offline mode and signature configuration apply, and
     * hub_options is ignored), else one made for the call from hub_options (hubkern/hub.h). */
    hk_hub *hub;
    hk_hub_options hub_options;
} hk_get_kernel_options;

/* 2: freshness_s; 3: hub and hub_options (the client's fields nest instead of being copied) */
#define HK_GET_KERNEL_OPTIONS_VERSION 3
/* Defaults: kernel version unset, nothing overridden, trust check on, arch check on. */
#define HK_GET_KERNEL_OPTIONS_INIT \
    {HK_GET_KERNEL_OPTIONS_VERSION, NULL, HK_VERSION_UNSET, NULL, NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL, \
     HK_HUB_OPTIONS_INIT}

/* The defaults into *opts; HK_ERR_INVALID_ARG for a version this library does not know. Every
 * function taking the options checks opts->version on entry (HK_ERR_INVALID_ARG). */
HK_API int hk_get_kernel_options_init(hk_get_kernel_options *opts, unsigned int version);

/* Resolve, pull (or find in the cache), verify and load the best variant of opts->repo_id for this
 * machine. LOCAL_KERNELS=org/name=/path:... takes precedence (no network, no trust check).
 * Online, kernel-status.toml redirects are followed first (hk_hub_resolve_spec) and the variant is
 * chosen among the builds of the repo and commit the redirect leads to; the handle then reports
 * that repo (hk_kernel_repo_id) and commit, not the requested one. Offline nothing is followed.
 * Errors: HK_ERR_REPO_NOT_FOUND, HK_ERR_VERSION_NOT_FOUND, HK_ERR_REVISION_NOT_FOUND,
 * Online and offline, the chosen variant's metadata.json archs are checked against the device
 * before anything else of it is downloaded (only that file is fetched, unless skip_arch_check):
 * HK_ERR_ARCH then leaves no other file of the variant in the cache.
 * HK_ERR_NO_VARIANT (with every candidate's reason), HK_ERR_UNTRUSTED, HK_ERR_OFFLINE,
 * HK_ERR_INTEGRITY / HK_ERR_DIGEST (a corrupted cache), HK_ERR_ARCH, HK_ERR_RUNTIME_MISSING,
 * HK_ERR_LOAD, network errors. On success *out holds one reference (hk_kernel_unref). */
HK_API int hk_get_kernel(hk_kernel **out, const hk_get_kernel_options *opts);

/* Load from a local directory, as upstream get_local_kernel: a repo checkout holding build/, a
 * directory of variant directories, or one variant directory (has metadata.json). Variants are
 * resolved with the same rules as the Hub. opts may be NULL (only backend, env, tvm_ffi_library and
 * skip_arch_check are read). repo_id, when given in opts, is reported by hk_kernel_repo_id. */
HK_API int hk_get_local_kernel(hk_kernel **out, const char *path, const hk_get_kernel_options *opts);

/* The variant hk_get_kernel would load among `names` (the build/ directories of one commit) in
 * this process: opts->variant when set (it must be among them), else the preferred one for
 * opts->env (NULL: this process's machine) and opts->backend that this process can load (tvm-ffi;
 * torch builds when libtorch is in the process), noarch as a last resort (hk_choose_variant).
 * opts may be NULL; opts->repo_id, when set, names the repo in messages. *out: free with hk_free.
 * HK_ERR_NO_VARIANT with every candidate's reason. */
HK_API int hk_kernel_choose_variant(char **out, const hk_get_kernel_options *opts,
                                    const char *const *names, size_t count);

/* Does opts->repo_id at opts->version/revision have a variant for this machine? Answers from the
 * Hub (or the cache when offline) without downloading the build, after kernel-status redirects as
 * hk_get_kernel (no publisher check: nothing is loaded). The chosen variant's metadata.json (from
 * the cache, else downloaded alone) must list archs that admit the device, unless
 * opts->skip_arch_check (kernels has_kernel(check_arch=True)). Not finding one is not an error:
 * HK_OK with *out = 0 and no error set; the reason goes to the out-parameters (either may be
 * NULL): *out_reason_code HK_ERR_NO_VARIANT or HK_ERR_ARCH (HK_OK when *out = 1), *out_reason the
 * message (every candidate's reason, or the arch check's; NULL when *out = 1; free with hk_free).
 * It is also logged at HK_LOG_INFO. Unknown repo / version are errors. */
HK_API int hk_has_kernel(int *out, int *out_reason_code, char **out_reason,
                         const hk_get_kernel_options *opts);

/* Load repo_id pinned by a kernels.lock file (either format), from the cache only: never touches
 * the network (prefetch with `hubkern download --lock FILE`). Old-format per-variant hashes are
 * verified against the cached files. Errors: HK_ERR_LOCKFILE (repo not in the lock, hash mismatch),
 * HK_ERR_OFFLINE (not cached), HK_ERR_PARSE. opts may be NULL. */
HK_API int hk_load_locked(hk_kernel **out, const char *lockfile, const char *repo_id,
                          const hk_get_kernel_options *opts);

/* ---- kernel dependency trees (metadata.json kernel-depends; see docs/loading.md) -------------- */

/* Bounds on a tree: a deeper chain, a node with more kernel-depends, or more nodes in all fail with
 * HK_ERR_DEPENDENCY naming the path from the root (kernels itself sets none). */
#define HK_DEP_MAX_DEPTH 8
#define HK_DEP_MAX_NODES 256

/* The resolved tree of a kernel and its dependencies (opaque). Nodes are in pre-order, the root at
 * index 0; a dependency shared by two dependents appears under each (it is loaded once). */
typedef struct hk_kernel_tree hk_kernel_tree;

/* Resolve opts->repo_id's tree as hk_get_kernel would, downloading nothing but each node's
 * metadata.json: per node the publisher check (unless opts->trust_remote_code), version / revision
 * to commit, the variant for this machine (opts->variant applies to the root only), the metadata
 * archs against the device (unless opts->skip_arch_check). Dependencies are resolved at the repo
 * and version or revision they are declared with (no kernel-status.toml redirects, as kernels);
 * the root follows redirects as hk_get_kernel does. With a lockfile, every node's commit comes from
 * it (the root by repo id, a dependency by its exact declaration) and the cache alone is read.
 * Errors name the path from the root ("org/a -> org/b: ..."): HK_ERR_DEPENDENCY (a cycle, or past
 * the bounds), HK_ERR_REPO_NOT_FOUND, HK_ERR_NO_VARIANT, HK_ERR_ARCH, HK_ERR_UNTRUSTED,
 * HK_ERR_LOCKFILE (a node missing from the lock: re-lock), HK_ERR_OFFLINE. Free with
 * hk_kernel_tree_free. */
HK_API int hk_kernel_tree_resolve(hk_kernel_tree **out, const hk_get_kernel_options *opts,
                                  const char *lockfile);
HK_API void hk_kernel_tree_free(hk_kernel_tree *tree); /* NULL-safe */
HK_API size_t hk_kernel_tree_count(const hk_kernel_tree *tree);
/* Node i (NULL / -1 / HK_VERSION_UNSET when i is out of range). Strings live as long as the tree. */
HK_API const char *hk_kernel_tree_repo_id(const hk_kernel_tree *tree, size_t i); /* resolved repo */
HK_API int hk_kernel_tree_version(const hk_kernel_tree *tree, size_t i);  /* as declared / asked */
HK_API const char *hk_kernel_tree_revision(const hk_kernel_tree *tree, size_t i); /* NULL: by version */
HK_API const char *hk_kernel_tree_commit(const hk_kernel_tree *tree, size_t i);
HK_API const char *hk_kernel_tree_variant(const hk_kernel_tree *tree, size_t i);
HK_API int hk_kernel_tree_depth(const hk_kernel_tree *tree, size_t i);  /* root 0 */
/* The signature mode (HK_SIGNATURE_REQUIRE / _WARN / _OFF, hubkern/signature.h) in force for node
 * i: the caller's, else the strictest of the node's own default and that of every repo above it
 * (a redirect or a dependency never lowers it). Pull node i with exactly this mode; -1 when i is
 * out of range. */
HK_API int hk_kernel_tree_signature(const hk_kernel_tree *tree, size_t i);
HK_API int hk_kernel_tree_parent(const hk_kernel_tree *tree, size_t i); /* index; -1 for the root */
/* The node's metadata.json (NULL when it could not be read before the download). */
HK_API const hk_kernel_metadata *hk_kernel_tree_metadata(const hk_kernel_tree *tree, size_t i);


/* ---- the handle --------------------------------------------------------------------------- */

typedef enum hk_kernel_kind {
    HK_KERNEL_TVM_FFI = 0, /* callable from C through hk_kernel_call */
    HK_KERNEL_TORCH = 1,   /* ops registered with libtorch's dispatcher under the namespace */
    HK_KERNEL_NOARCH = 2   /* Python only: holds no native code */
} hk_kernel_kind;

typedef struct hk_kernel_metadata {
    const char *name;          /* "rmsnorm" */
    const char *id;            /* "_rmsnorm_cpu_abc1234": module name and torch ops namespace */
    int version;               /* major version N */
    const char *license;       /* "Apache-2.0" */
    const char *backend;       /* "cpu", "cuda", "rocm", "metal", "xpu", ... */
    const char *const *archs;  /* backend.archs ("8.0", "9.0a", "12.0+PTX", "gfx942"); may be 0 */
    size_t num_archs;
    const char *upstream;      /* NULL when absent */
    const char *source;        /* NULL when absent */
} hk_kernel_metadata;

/* What metadata.json carries beyond the struct above, for a metadata the library produced
 * (hk_kernel_metadata_get, hk_kernel_tree_metadata, hk_kernel_metadata_read; not one a caller
 * filled in: the struct stays caller-constructible for hk_kernel_check_arch).
 * kernel-depends: the count, and entry i: *repo_id and exactly one of *version (>= 0;
 * HK_VERSION_UNSET when by revision) and *revision (NULL when by version); any out-parameter may be
 * NULL; strings live as long as md; HK_ERR_INVALID_ARG when i is out of range. */
HK_API size_t hk_kernel_metadata_dependency_count(const hk_kernel_metadata *md);
HK_API int hk_kernel_metadata_dependency(const hk_kernel_metadata *md, size_t i, const char **repo_id,
                                         int *version, const char **revision);
/* "kernels-minver", NULL when absent. */
HK_API const char *hk_kernel_metadata_kernels_minver(const hk_kernel_metadata *md);
/* "provenance": 1 when the build records it, else 0 (outputs NULL / -1). *builder_version: the
 * kernel-builder version; commits NULL when unknown; dirty flags 0/1, -1 when unknown. Any
 * out-parameter may be NULL. */
HK_API int hk_kernel_metadata_provenance(const hk_kernel_metadata *md, const char **builder_version,
                                         const char **builder_commit, int *builder_dirty,
                                         const char **source_commit, int *source_dirty);
/* Parse a metadata.json (a file, or a variant directory holding one). Free with
 * hk_kernel_metadata_free. HK_ERR_PARSE / HK_ERR_NOT_FOUND. */
HK_API int hk_kernel_metadata_read(hk_kernel_metadata **out, const char *path);
HK_API void hk_kernel_metadata_free(hk_kernel_metadata *md); /* NULL-safe; only for _read results */

HK_API hk_kernel *hk_kernel_ref(hk_kernel *k);  /* returns k; NULL-safe */
HK_API void hk_kernel_unref(hk_kernel *k);      /* NULL-safe */

/* Strings live as long as the handle. */
HK_API const char *hk_kernel_repo_id(const hk_kernel *k);    /* "org/name" it was loaded from (after
                                                                redirects), or "" for local */
HK_API const char *hk_kernel_commit(const hk_kernel *k);     /* 40-hex, or "" for local */
HK_API const char *hk_kernel_variant(const hk_kernel *k);    /* "tvm-ffi01-cpu-x86_64-linux" */
HK_API const char *hk_kernel_path(const hk_kernel *k);       /* the variant directory */
HK_API const char *hk_kernel_library_path(const hk_kernel *k); /* the .so, NULL for noarch */
HK_API hk_kernel_kind hk_kernel_get_kind(const hk_kernel *k);
HK_API const hk_kernel_metadata *hk_kernel_metadata_get(const hk_kernel *k);
/* The digest check of the cached variant that preceded this handle's load (hk_get_kernel,
 * hk_load_locked): bytes hashed against its metadata.json digest (including, online, the bytes
 * downloaded for it, hashed as they streamed in) and cached bytes not read again because the
 * variant's verification receipt showed each file unchanged since it was last hashed (see
 * hk_pull_result_bytes_trusted). A warm load of a variant whose receipt vouches for every file:
 * verified 0, trusted = the variant's size. A call that returns a handle already loaded in this
 * process checks nothing and leaves both as they were; local kernels (LOCAL_KERNELS,
 * hk_get_local_kernel) are not checked: 0 and 0. 0 for NULL. */
HK_API uint64_t hk_kernel_bytes_verified(const hk_kernel *k);
HK_API uint64_t hk_kernel_bytes_trusted(const hk_kernel *k);
/* Torch variants: the ops namespace (metadata id), e.g. for c10::Dispatcher "<ns>::rms_norm".
 * NULL for other kinds. */
HK_API const char *hk_kernel_torch_namespace(const hk_kernel *k);

/* The kernels this handle's metadata declares in kernel-depends, loaded before it (each loaded once
 * per process, shared by every dependent): by repo id ("org/name" as declared), or by index in
 * declaration order. The returned handle is borrowed: it lives as long as k (hk_kernel_ref it to
 * keep it longer). NULL when k declares no such dependency. A dependent's native code reaches its
 * dependency's through these handles (hk_kernel_function on them) or, for torch variants, through
 * the dispatcher under the dependency's namespace; see docs/loading.md. */
HK_API size_t hk_kernel_dependency_count(const hk_kernel *k);
HK_API hk_kernel *hk_kernel_dependency_at(const hk_kernel *k, size_t i);
HK_API hk_kernel *hk_kernel_dependency(const hk_kernel *k, const char *repo_id);

/* Exported functions (tvm-ffi: the names behind `__tvm_ffi_<name>`, sorted; 0 for other kinds). */
HK_API size_t hk_kernel_num_functions(const hk_kernel *k);
HK_API const char *hk_kernel_function_name(const hk_kernel *k, size_t i);

/* ---- calling (tvm-ffi variants) ------------------------------------------------------------ */

/* A DLPack DLTensor, laid out identically (DLPack v1: the layout tvm-ffi 0.1 uses). */
typedef enum hk_device_type {
    HK_DEVICE_CPU = 1,
    HK_DEVICE_CUDA = 2,
    HK_DEVICE_CUDA_HOST = 3,
    HK_DEVICE_METAL = 8,
    HK_DEVICE_ROCM = 10
} hk_device_type;

typedef enum hk_dtype_code {
    HK_DTYPE_INT = 0,
    HK_DTYPE_UINT = 1,
    HK_DTYPE_FLOAT = 2,
    HK_DTYPE_BFLOAT = 4
} hk_dtype_code;

typedef struct hk_device {
    int32_t device_type; /* hk_device_type */
    int32_t device_id;
} hk_device;

typedef struct hk_dtype {
    uint8_t code;  /* hk_dtype_code */
    uint8_t bits;  /* 16, 32, ... */
    uint16_t lanes; /* 1 */
} hk_dtype;

typedef struct hk_dltensor {
    void *data;
    hk_device device;
    int32_t ndim;
    hk_dtype dtype;
    int64_t *shape;
    int64_t *strides;     /* NULL: compact row-major */
    uint64_t byte_offset;
} hk_dltensor;

typedef enum hk_value_kind {
    HK_VALUE_NONE = 0,
    HK_VALUE_INT = 1,
    HK_VALUE_FLOAT = 2,
    HK_VALUE_BOOL = 3,
    HK_VALUE_TENSOR = 4,  /* argument: a caller-owned DLTensor; result: one owned by the value */
    HK_VALUE_STRING = 5,  /* argument: caller-owned C string; result: owned by the value */
    HK_VALUE_FUNCTION = 6 /* argument only: a tvm-ffi function (e.g. a dependency's, see
                             hk_kernel_dependency), passed as a tvm-ffi Function object */
} hk_value_kind;

typedef struct hk_value {
    hk_value_kind kind;
    union {
        int64_t i;
        double f;
        int b; /* 0 / 1 */
        hk_dltensor *tensor;
        const char *str;
        const struct hk_function *fn;
    } v;
    void *owner_; /* internal: set on results that own runtime objects; release with hk_value_clear */
} hk_value;

static inline hk_value hk_value_none(void) { hk_value x = {HK_VALUE_NONE, {0}, 0}; return x; }
static inline hk_value hk_value_int(int64_t i) { hk_value x = {HK_VALUE_INT, {0}, 0}; x.v.i = i; return x; }
static inline hk_value hk_value_float(double f) { hk_value x = {HK_VALUE_FLOAT, {0}, 0}; x.v.f = f; return x; }
static inline hk_value hk_value_bool(int b) { hk_value x = {HK_VALUE_BOOL, {0}, 0}; x.v.b = b != 0; return x; }
static inline hk_value hk_value_tensor(hk_dltensor *t) { hk_value x = {HK_VALUE_TENSOR, {0}, 0}; x.v.tensor = t; return x; }
static inline hk_value hk_value_string(const char *s) { hk_value x = {HK_VALUE_STRING, {0}, 0}; x.v.str = s; return x; }
/* A function of a loaded tvm-ffi kernel as an argument: how a caller hands a dependent kernel its
 * dependency's code, as the dependent's Python wrapper does with get_kernel_dep (docs/loading.md). */
static inline hk_value hk_value_function(const struct hk_function *f) { hk_value x = {HK_VALUE_FUNCTION, {0}, 0}; x.v.fn = f; return x; }

/* Release what a call result owns (a returned tensor or string) and reset it to none. Safe on
 * argument values and on none. */
HK_API void hk_value_clear(hk_value *value);

/* Look a function up by name (without the `__tvm_ffi_` prefix). The pointer lives as long as the
 * kernel handle. HK_ERR_SYMBOL lists the exported names; HK_ERR_UNSUPPORTED for non-tvm-ffi kinds. */
HK_API int hk_kernel_function(const hk_function **out, const hk_kernel *k, const char *name);

/* Call with `num_args` arguments. `out_result` may be NULL (a returned value is then released).
 * Errors raised inside the kernel: HK_ERR_TYPE for the runtime's TypeError (wrong argument count
 * or types), HK_ERR_KERNEL otherwise; hk_last_error() carries "<Kind>: <kernel's message>". */
HK_API int hk_function_call(hk_value *out_result, const hk_function *fn, const hk_value *args,
                            size_t num_args);
/* hk_kernel_function + hk_function_call. */
HK_API int hk_kernel_call(hk_value *out_result, const hk_kernel *k, const char *name,
                          const hk_value *args, size_t num_args);

/* Set the current stream that tvm-ffi kernels see for a device on the calling thread
 * (TVMFFIEnvSetStream; kernels read it with TVMFFIEnvGetStream). `previous` may be NULL.
 * Needs the tvm-ffi runtime (loaded by the first tvm-ffi kernel, or hk_tvm_ffi_load). */
HK_API int hk_set_stream(void **previous, int32_t device_type, int32_t device_id, void *stream);

/* Load libtvm_ffi now (explicit path or NULL for the search described above). Idempotent; the
 * first runtime loaded stays. *out_path (may be NULL) gets where it came from (static string). */
HK_API int hk_tvm_ffi_load(const char **out_path, const char *explicit_path);
/* Version of the loaded runtime (TVMFFIGetVersion). HK_ERR_RUNTIME_MISSING before loading. */
HK_API int hk_tvm_ffi_version(int *major, int *minor, int *patch);

/* ---- GPU fitness ---------------------------------------------------------------------------- */

/* Does a CUDA device of compute capability major.minor satisfy one metadata arch entry
 * ("8.0", "9.0a", "10.0f", "12.0+PTX")? 1 / 0; *out_parsed = 0 when the entry is not a CUDA arch. */
HK_API int hk_cuda_arch_entry_matches(const char *entry, int major, int minor, int *out_parsed);

/* The code objects embedded in a library's .nv_fatbin section (opaque list). */
typedef struct hk_code_objects hk_code_objects;

/* List the code objects of an ELF library. *out is NULL when it embeds none (every function
 * below reads NULL as the empty list). Free with hk_code_objects_free. */
HK_API int hk_library_code_objects(hk_code_objects **out, const char *library_path);
HK_API void hk_code_objects_free(hk_code_objects *objs); /* NULL is fine */
HK_API size_t hk_code_objects_count(const hk_code_objects *objs);
/* Object i (i < count; 0 otherwise): */
HK_API int hk_code_object_is_ptx(const hk_code_objects *objs, size_t i); /* PTX (JIT-compilable
                                                                            for >= sm), else a cubin */
HK_API int hk_code_object_sm(const hk_code_objects *objs, size_t i);     /* 80, 90, 100, ... */
HK_API int hk_code_object_arch_specific(const hk_code_objects *objs, size_t i); /* "a" (sm_90a):
                                                                  runs only on exactly that sm */
HK_API int hk_code_object_family(const hk_code_objects *objs, size_t i); /* "f" (sm_100f): runs on
                                                                   that major's later minors */
HK_API int hk_code_object_compressed(const hk_code_objects *objs, size_t i);

/* Could any of these code objects run on compute capability major.minor? 1 / 0. */
HK_API int hk_code_objects_fit(const hk_code_objects *objs, int major, int minor);
/* Could object i run on it? 1 / 0 (0 when i is out of range). */
HK_API int hk_code_object_fits(const hk_code_objects *objs, size_t i, int major, int minor);

/* The full check used before loading: metadata archs (§6.3 rules; all-unparseable = supported)
 * AND the embedded code objects (when the library embeds any). HK_ERR_ARCH with a message naming
 * the device, what the build covers and what to do. */
HK_API int hk_kernel_check_arch(const hk_kernel_metadata *md, const char *library_path, int major,
                                int minor);

/* The part of a ROCm gcnArchName the arch check compares: the text before the first ':'
 * ("gfx90a:sramecc+:xnack-" → "gfx90a", "gfx942" → "gfx942"), written NUL-terminated into out.
 * 1, or 0 (out = "") when gcn_arch_name is NULL, the part is empty, or it does not fit in cap. */
HK_API int hk_rocm_arch_base(char *out, size_t cap, const char *gcn_arch_name);

/* The ROCm check used before loading (kernels 0.17 `_check_arch_incompatibility`): when md's
 * backend is "rocm" and it lists archs, hk_rocm_arch_base(gcn_arch_name) must equal one entry
 * exactly (no "all unparseable = supported" rule, unlike CUDA). HK_ERR_ARCH otherwise, with a
 * message naming the device arch, the list and what to do. HK_OK for other backends, no archs, or
 * gcn_arch_name NULL (device unknown: nothing to check against). */
HK_API int hk_kernel_check_rocm_arch(const hk_kernel_metadata *md, const char *gcn_arch_name);

/* ---- lockfiles ------------------------------------------------------------------------------ */

typedef struct hk_lockfile hk_lockfile;     /* a parsed or built kernels.lock (opaque) */
typedef struct hk_lock_entry hk_lock_entry; /* one locked kernel; lives as long as its lockfile */

typedef enum hk_lock_format { HK_LOCK_OLD = 0, HK_LOCK_NEW = 1 } hk_lock_format;

/* Parse kernels.lock (both formats, told apart by their keys). Free with hk_lockfile_free. */
HK_API int hk_lockfile_read(hk_lockfile **out, const char *path);
HK_API int hk_lockfile_parse(hk_lockfile **out, const char *json, size_t len);
/* An empty lockfile (new format) to fill with hk_lockfile_add and write. */
HK_API int hk_lockfile_new(hk_lockfile **out);
HK_API void hk_lockfile_free(hk_lockfile *lock);
HK_API hk_lock_format hk_lockfile_format(const hk_lockfile *lock);
HK_API size_t hk_lockfile_count(const hk_lockfile *lock);
/* The i-th entry in file order (NULL if i is out of range). */
HK_API const hk_lock_entry *hk_lockfile_entry(const hk_lockfile *lock, size_t i);
/* Find a repo's entry (NULL if absent). */
HK_API const hk_lock_entry *hk_lockfile_find(const hk_lockfile *lock, const char *repo_id);

HK_API const char *hk_lock_entry_repo_id(const hk_lock_entry *e);
/* HK_VERSION_UNSET when locked by revision (or old format). */
HK_API int hk_lock_entry_version(const hk_lock_entry *e);
HK_API const char *hk_lock_entry_revision(const hk_lock_entry *e); /* NULL unless locked by revision */
HK_API const char *hk_lock_entry_commit(const hk_lock_entry *e);   /* 40- or 64-hex */
/* Old format only: variant name → "sha256-<hex>" (git_lfs_concat); 0 variants otherwise. */
HK_API size_t hk_lock_entry_variant_count(const hk_lock_entry *e);
HK_API const char *hk_lock_entry_variant_name(const hk_lock_entry *e, size_t i);
HK_API const char *hk_lock_entry_variant_hash(const hk_lock_entry *e, size_t i);

/* Append a dependency and its commit (copied): exactly one of version (>= 0) and revision
 * (version HK_VERSION_UNSET). Checked by hk_lockfile_write. */
HK_API int hk_lockfile_add(hk_lockfile *lock, const char *repo_id, int version, const char *revision,
                           const char *commit);
/* Write lock's entries in the new (dependency/lock) format, sorted by (repo-id, version/revision),
 * atomically. An entry without a valid repo id, version or revision and full commit id, and
 * duplicate dependencies, are refused (HK_ERR_INVALID_ARG). */
HK_API int hk_lockfile_write(const char *path, const hk_lockfile *lock);

/* Add every node of opts->repo_id's tree to lock as `kernels lock` does (lock_kernel_tree): the
 * publisher of each node checked (unless opts->trust_remote_code), its version / revision resolved
 * to a commit, and the kernel-depends of *every* variant at that commit followed (not only this
 * machine's), cycles refused (HK_ERR_DEPENDENCY). The root is locked as asked (no redirects, as
 * kernels). Nodes already in lock are kept. Online only. */
HK_API int hk_lockfile_add_tree(hk_lockfile *lock, const hk_get_kernel_options *opts);

/* git_lfs_concat hash of a cached variant directory (snapshots/<commit>/build/<variant>): each file
 * is a symlink to blobs/<id>; a 64-char id is sha256 of the content (LFS), a 40-char id the git
 * blob sha1. *out: "sha256-<64 hex>", free with hk_free. */
HK_API int hk_variant_hash_from_cache(char **out, const char *variant_dir);

/* Pairs (relative path, hex id) → "sha256-<hex>" (the documented algorithm, for tree listings).
 * *out: free with hk_free. */
HK_API int hk_variant_hash_from_pairs(char **out, const char *const *paths, const char *const *ids,
                                      size_t count);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_KERNEL_H */
