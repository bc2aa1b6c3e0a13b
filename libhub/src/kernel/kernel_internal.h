/* Internal interfaces of the loader (libhub/src/kernel). */
#ifndef HK_KERNEL_INTERNAL_H
#define HK_KERNEL_INTERNAL_H

#include "hubkern/kernel.h"
#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- elf.c -------------------------------------------------------------------------------- */
/* Names of defined, exported dynamic symbols that start with `prefix` (prefix stripped), sorted,
 * de-duplicated. *out is an array of *count strings (free with hk_kstrv_free). */
int hk_elf_exported_with_prefix(char ***out, size_t *count, const char *path, const char *prefix);
/* Is `name` an undefined dynamic symbol of the library? (used to spot libtorch / Python needs) */
int hk_elf_needed_libs(char ***out, size_t *count, const char *path);
void hk_kstrv_free(char **v, size_t n);

/* ---- metadata.c --------------------------------------------------------------------------- */
typedef struct hk_metadata_owned {
    hk_kernel_metadata pub;
    char **archs;
} hk_metadata_owned;
int hk_metadata_read(hk_metadata_owned *md, const char *variant_dir);
int hk_metadata_parse(hk_metadata_owned *md, const char *json, size_t len, const char *what);
void hk_metadata_free(hk_metadata_owned *md);

/* ---- tvmffi.c ------------------------------------------------------------------------------ */
typedef int (*hk_tvm_safe_call)(void *self, const void *args, int32_t num_args, void *result);
/* Make sure libtvm_ffi is loaded: explicit path, HUBKERN_TVM_FFI_LIB, TVM_FFI_LIB, one already in
 * the process, `hint` (the Python package's copy that env detection found), other Python
 * environments, the system. */
int hk_tvm_ffi_ensure(const char *explicit_path, const char *hint);

/* ---- arch.c -------------------------------------------------------------------------------- */
/* CUDA compute capability of device 0 through the driver API (dlopen libcuda.so.1).
 * HK_ERR_NOT_FOUND when there is no driver or no device. */
int hk_cuda_device_capability(int *major, int *minor);
/* Is libtorch (c10 dispatcher / the stable C shim) loaded in this process? */
bool hk_libtorch_in_process(void);
/* "8.0 9.0a" style text of the code objects (caller frees). */
char *hk_code_objects_describe(const hk_code_object *objs, size_t count);

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
int hk_kernel_check_metadata_fitness(const hk_kernel_metadata *md, const hk_load_request *req);
/* Load (or find in the registry) the variant in req->variant_dir. */
int hk_kernel_load_variant(hk_kernel **out, const hk_load_request *req);
/* The loaded handle of a variant directory (one more reference), or NULL. */
hk_kernel *hk_kernel_registry_find(const char *variant_dir);

/* ---- get.c --------------------------------------------------------------------------------- */
struct hk_hub;
/* The variant of repo_id@commit this process would load (tvm-ffi; torch builds when libtorch is
 * in the process; noarch as a last resort), using the process-wide detected machine. Caller frees. */
int hk_loader_pick_variant(char **out, struct hk_hub *hub, const char *repo_id, const char *commit,
                           const char *backend);

/* ---- local.c ------------------------------------------------------------------------------- */
/* LOCAL_KERNELS lookup: *out_path gets the path mapped to repo_id (caller frees) or NULL. */
int hk_local_kernels_lookup(char **out_path, const char *repo_id);

#endif
