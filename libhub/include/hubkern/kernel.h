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
 * machine. LOCAL_KERNELS=org/name=/path:... takes precedence, for the root and for every
 * dependency of its tree, as in kernels 0.17.2 (no network, no trust check for a listed node).
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
 * skip_arch_check are read). repo_id, when given in opts, is reported by hk_kernel_repo_id. Its
 * kernel-depends are resolved and loaded first (LOCAL_KERNELS, then the Hub through opts' client
 * options), and kernels-minver is checked for the whole tree before anything is installed. */
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
 * (hk_kernel_get_metadata, hk_kernel_tree_metadata, hk_kernel_metadata_read; not one a caller
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
HK_API const hk_kernel_metadata *hk_kernel_get_metadata(const hk_kernel *k);
/* The earlier name of hk_kernel_get_metadata (beside hk_kernel_get_kind it read as a method of the
 * metadata); kept for programs built against it. */
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

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_KERNEL_H */
