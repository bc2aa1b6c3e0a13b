/* hubkern/arch.h — GPU fitness: metadata.json archs against a device (CUDA capability rules, ROCm
 * gcnArchName) and the code objects (cubins, PTX) a kernel library embeds. hk_get_kernel runs these
 * checks itself; they are here for tools that inspect a build. */
#ifndef HUBKERN_ARCH_H
#define HUBKERN_ARCH_H

#include "hubkern/common.h"

#include <stddef.h>

typedef struct hk_kernel_metadata hk_kernel_metadata; /* hubkern/kernel.h */

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_ARCH_H */
