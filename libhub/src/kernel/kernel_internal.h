/* Internal interfaces of the loader (libhub/src/kernel). */
#ifndef HK_KERNEL_INTERNAL_H
#define HK_KERNEL_INTERNAL_H

#include "hubkern/env.h"
#include "hubkern/arch.h"
#include "hubkern/call.h"
#include "hubkern/kernel.h"
#include "hubkern/lockfile.h"
#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- elf.c -------------------------------------------------------------------------------- */
/* Names of defined, exported dynamic symbols that start with `prefix` (prefix stripped), sorted,
 * de-duplicated. *out is an array of *count strings (free with hk__kstrv_free). */
int hk__elf_exported_with_prefix(char ***out, size_t *count, const char *path, const char *prefix);
/* Is `name` an undefined dynamic symbol of the library? (used to spot libtorch / Python needs) */
int hk__elf_needed_libs(char ***out, size_t *count, const char *path);
void hk__kstrv_free(char **v, size_t n);

/* Code objects of a fat binary (hk_code_objects, hubkern/kernel.h). */
typedef struct hk_code_object {
    bool is_ptx;        /* PTX (JIT-compilable for >= sm) vs a cubin (SASS) */
    int sm;             /* 80, 90, 100, ... */
    bool arch_specific; /* "a" (sm_90a) */
    bool family;        /* "f" (sm_100f) */
    bool compressed;
} hk_code_object;

struct hk_code_objects {
    hk_code_object *v;
    size_t n;
};

/* ---- metadata.c --------------------------------------------------------------------------- */
/* One kernel-depends entry: exactly one of version (>= 0) and revision. */
typedef struct hk_dep_spec {
    char *repo_id;
    int version;    /* HK_VERSION_UNSET when by revision */
    char *revision; /* NULL when by version */
} hk_dep_spec;

typedef struct hk_metadata_owned {
    hk_kernel_metadata pub; /* first: a hk_kernel_metadata * of ours casts back */
    char **archs;
    hk_dep_spec *deps;
    size_t num_deps;
    char *kernels_minver;
    char *builder_version, *builder_commit, *source_commit; /* provenance; NULL when absent */
    int builder_dirty, source_dirty;                        /* -1 when unknown */
} hk_metadata_owned;
/* Bound on kernel-depends entries of one variant (a fan-out bomb is refused while parsing). */
#define HK_DEP_MAX_FANOUT 32
int hk__metadata_read(hk_metadata_owned *md, const char *variant_dir);
int hk__metadata_parse(hk_metadata_owned *md, const char *json, size_t len, const char *what);
void hk__metadata_free(hk_metadata_owned *md);
/* kernels' Version::from_str (trimmed; three '.'-separated u64): 0, else the part count or -1. */
int hk__kernels_version_parse(uint64_t out[3], const char *text);
/* HK_ERR_UNSUPPORTED when md's kernels-minver is newer than the kernels version hubkern implements
 * (kernels 0.17.2 MinverValidator, applied to every node of a load). */
int hk__metadata_check_minver(const hk_metadata_owned *md, const char *variant);

/* ---- tvmffi.c ------------------------------------------------------------------------------ */
/* The callable for exported symbol sym (`__tvm_ffi_<name>`) of a loaded tvm-ffi kernel k. */
int hk__function_make(hk_function **out, const hk_kernel *k, const char *name, void *sym);
typedef int (*hk_tvm_safe_call)(void *self, const void *args, int32_t num_args, void *result);
/* Make sure libtvm_ffi is loaded: explicit path, HUBKERN_TVM_FFI_LIB, TVM_FFI_LIB, one already in
 * the process, `hint` (the Python package's copy that env detection found), other Python
 * environments, the system. */
int hk__tvm_ffi_ensure(const char *explicit_path, const char *hint);

/* ---- arch.c -------------------------------------------------------------------------------- */
/* CUDA compute capability of device 0 through the driver API (dlopen libcuda.so.1).
 * HK_ERR_NOT_FOUND when there is no driver or no device. */
int hk__cuda_device_capability(int *major, int *minor);
/* Is libtorch (c10 dispatcher / the stable C shim) loaded in this process? */
bool hk__libtorch_in_process(void);
/* "8.0 9.0a" style text of the code objects (caller frees). */
char *hk__code_objects_describe(const hk_code_objects *objs);

/* ---- kernel.c ------------------------------------------------------------------------------ */
typedef struct hk_load_request {
    const char *variant_dir;      /* absolute */
    const char *variant_name;     /* basename when NULL */
    const char *repo_id;          /* may be NULL */
    const char *commit;           /* may be NULL */
    const char *tvm_ffi_library;  /* may be NULL */
    const char *tvm_ffi_hint;     /* libtvm_ffi found by env detection; may be NULL */
    bool skip_arch_check;
    int cuda_major, cuda_minor;   /* device 0 capability; -1 = ask the driver, -2 = no GPU */
    uint64_t bytes_verified, bytes_trusted; /* of the digest check before the load (0: none) */
    const char *gpu_arch;         /* ROCm gcnArchName of device 0 (hk_env_gpu_arch); NULL = none */
} hk_load_request;

/* The metadata-only part of the GPU fitness check of a load (kernels 0.17.2 ArchValidator, run on
 * the resolved variant's metadata.json before anything else is installed): md's backend.archs
 * against req's device (CUDA capability rules; ROCm gcnArchName base). HK_OK when skipped
 * (skip_arch_check), when md lists no archs, for other backends, or when the device is unknown
 * (the load itself then warns); HK_ERR_ARCH otherwise. The code objects are not looked at. */
int hk__kernel_check_metadata_fitness(const hk_kernel_metadata *md, const hk_load_request *req);
/* Load (or find in the registry) the variant in req->variant_dir. */
int hk__kernel_load_variant(hk_kernel **out, const hk_load_request *req);
/* The loaded handle of a variant directory (one more reference), or NULL. */
hk_kernel *hk__kernel_registry_find(const char *variant_dir);

/* ---- loader.c: what hk_get_kernel, hk_has_kernel, hk_load_locked and local loads share ---- */
struct hk_hub;
struct hk_pull_spec;

/* The env to resolve and load with: o->env, else the process-wide detected machine
 * (hk__env_cached). When it knows no tvm-ffi version (no Python package) but a libtvm_ffi can be
 * loaded, the runtime's version is used, through a private copy in *owned (free with hk_env_free;
 * NULL when none was needed). o may be NULL. */
int hk__loader_env(const hk_env **out, hk_env **owned, const hk_get_kernel_options *o);
/* A load request for env's device (capability of GPU 0, ROCm arch) and o's runtime / arch-check
 * options; the caller fills in the variant. */
void hk__loader_fill_request(hk_load_request *req, const hk_get_kernel_options *o, const hk_env *env);
/* hk_choose_variant with the loader's families (tvm-ffi; torch next to libtorch; noarch last),
 * o->backend and o->variant. *out: free with hk_free. */
int hk__loader_choose(char **out, const hk_env *env, const hk_get_kernel_options *o,
                     const char *const *names, size_t n, const char *where);
/* The call's client: o->hub (*owned false), else a new one from o->hub_options (*owned true: free
 * it with hk_hub_free). */
int hk__loader_hub(struct hk_hub **out, bool *owned, const hk_get_kernel_options *o);
/* hk_hub_pull of one variant: its directory, commit and name (free each with hk_free) and the
 * bytes the digest check hashed [0] and its verification receipt vouched for [1]. With t (the
 * call's one resolution, client/hub_internal.h) nothing is resolved again: t says where and with
 * which signature mode; without, s is resolved as hk_hub_pull does. */
struct hk__target;
/* The pull of one node of a call (the root or a dependency): every option of the caller a pull
 * takes comes from o, the place and the signature mode from the call's resolution t: one place,
 * so that no node of a tree is pulled with options the caller did not give. */
struct hk_pull_spec hk__loader_pull_spec(const hk_get_kernel_options *o, const struct hk__target *t,
                                         const char *variant);
int hk__loader_fetch_variant(char **out_dir, char **out_commit, char **out_variant, uint64_t out_bytes[2],
                            struct hk_hub *hub, const struct hk_pull_spec *s, const struct hk__target *t);
/* 1 (and *out one more reference) when repo_id@commit's variant is loaded in this process. */
int hk__loader_already_loaded(hk_kernel **out, struct hk_hub *hub, const char *repo_id,
                             const char *commit, const char *variant);
/* The caller's options as the current struct: src of any known version (versions 1 and 2 are laid
 * out otherwise; their client fields land in hub_options), or the defaults for NULL. Every entry
 * point takes its options through this once and uses only the copy. HK_ERR_INVALID_ARG naming fn
 * for a version this library does not know. */
int hk__get_kernel_options_take(hk_get_kernel_options *dst, const hk_get_kernel_options *src, const char *fn);

/* ---- local.c -------------------------------------------------------------------------------- */
/* LOCAL_KERNELS lookup, parsed as kernels 0.17.2 does (':'-separated entries, each split at its
 * first '=', the last entry of a repo wins, an entry without '=' is HK_ERR_INVALID_ARG): *out_path
 * gets the path mapped to repo_id (caller frees) or NULL. */
int hk__local_kernels_lookup(char **out_path, const char *repo_id);
/* The variant directory of the local kernel at path (kernels resolve_local_kernel: the best of
 * path's subdirectories, else of path/build's, else path itself when it holds a metadata.json);
 * HK_ERR_NO_VARIANT when none fits. *out: free. */
int hk__local_variant_dir(char **out, const char *path, const hk_env *env, const hk_get_kernel_options *o);
/* Load the local kernel at path (a checkout, directory of variants or variant directory) with
 * its dependency tree (LOCAL_KERNELS, then the Hub); repo_id: what the handle reports (NULL for
 * hk_get_local_kernel). */
int hk__local_kernel_load(hk_kernel **out, const char *path, const char *repo_id, const hk_get_kernel_options *o);
/* hk_has_kernel's question for a local root: its variant, archs and whole tree (nothing stored). */
int hk__local_kernel_check(const char *path, const char *repo_id, const hk_get_kernel_options *o);

/* ---- deps.c: dependency trees -------------------------------------------------------------- */
struct hk_hub;
typedef struct hk__tnode {
    char *decl_repo;  /* as declared by the parent (the root: as asked) */
    char *repo_id;    /* where it resolved (the root after redirects) */
    int version;      /* as declared; HK_VERSION_UNSET when by revision */
    char *revision;
    char *commit, *variant;
    hk_metadata_owned md;
    bool has_md;
    int parent, depth;
    char *dir;        /* the installed variant directory (set by the caller for the root; set
                         while resolving for a LOCAL_KERNELS node, which has no commit) */
    int signature;    /* the signature mode in force for it: the caller's, else the strictest of
                         its own default and its dependent's (never lowered down the tree) */
} hk__tnode;

struct hk_kernel_tree {
    hk__tnode *v;
    size_t n, cap;
};

typedef struct hk__tree_ctx {
    struct hk_hub *hub;
    const hk_env *env;
    const hk_get_kernel_options *o;
    const hk_lockfile *lock; /* pins every node (NULL: resolve on the Hub / in the cache) */
    const char *lockpath;
    bool trust;              /* no publisher checks */
    bool store;              /* metadata.json fetched into the cache (false: read, nothing stored) */
    bool local;              /* LOCAL_KERNELS consulted for each node (get/has/local loads) */
} hk__tree_ctx;

int hk__tree_new(hk_kernel_tree **out);
int hk__tree_push(size_t *out_idx, hk_kernel_tree *t, const char *decl_repo, int version, const char *revision,
                  int parent);
char *hk__tree_path(const hk_kernel_tree *t, size_t i);
int hk__tree_fetch_metadata(hk_metadata_owned *md, struct hk_hub *hub, const char *repo, const char *commit,
                            const char *variant, int signature, bool store);
/* Node i of t as the local kernel at path (local.c): variant directory, metadata, repo id. */
int hk__local_tree_node(hk_kernel_tree *t, size_t i, const char *path, const hk_env *env,
                        const hk_get_kernel_options *o);
/* kernels 0.17.2 MinverValidator over the whole tree, root first then depth-first as kernels
 * walks it, before anything is installed: HK_ERR_UNSUPPORTED naming the first node refused. */
int hk__tree_check_minver(const hk_kernel_tree *t);
/* Resolve the dependencies of node i (its metadata read) recursively, with the bounds and checks. */
int hk__tree_expand(hk_kernel_tree *t, size_t i, const hk__tree_ctx *c);
/* Install and load every dependency of the root (depth-first, dependencies first); *out_deps: the
 * root's direct dependencies, one reference each (hand them to hk__kernel_set_deps). */
int hk__tree_load_root_deps(hk_kernel ***out_deps, size_t *out_n, hk_kernel_tree *t, const hk__tree_ctx *c);
/* get.c: the root of a tree for hk_get_kernel / hk_has_kernel / hk_kernel_tree_resolve (online or
 * offline; redirects followed) with its metadata and the whole tree below it. */
int hk__tree_resolve_hub(hk_kernel_tree **out, struct hk_hub *hub, const hk_env *env,
                         const hk_get_kernel_options *o, bool trust_root, bool trust_deps, bool store);

/* locked.c: the tree of repo_id (NULL: o->repo_id) pinned by lockfile, from the cache. */
int hk__locked_tree(hk_kernel_tree **out, const char *repo_id, const hk_get_kernel_options *o,
                    const char *lockfile);

/* kernel.c: a loaded handle's dependencies (takes the references; a handle that has them already,
 * loaded earlier in this process, keeps its own and these are released). */
void hk__kernel_set_deps(hk_kernel *k, hk_kernel **deps, size_t n);
void hk__kernel_unref_all(hk_kernel **deps, size_t n); /* and frees the array */

#endif
