/* hubkern — build-variant names and variant resolution.
 *
 * A Kernel Hub repo holds one directory per build variant under build/ (e.g.
 * build/torch213-cxx11-cu130-x86_64-linux). hk_variant_parse understands every family the Python
 * `kernels` package 0.17 knows; hk_resolve_variants filters and ranks a list of names for an
 * hk_env exactly as kernels 0.17 does (`resolve_variants`), with a deterministic tie-break where
 * upstream depends on set order, and returns the full decision trace.
 *
 * Grammar (a name is split on '-'):
 *   torch<M><m…>[-cxx11|-cxx98]-<backend>-<cpu>-<os>   exact torch (single-digit major)
 *   torch-stable-abi<M><m…>-<backend>-<cpu>-<os>      torch stable ABI (works on torch >= M.m)
 *   tvm-ffi<M…><m…>-<backend>-<cpu>-<os>              tvm-ffi; the shortest major: 01 → 0.1
 *   torch-<name>                                      noarch (Python only), e.g. torch-cuda,
 *                                                     legacy torch-universal
 *   backend: cu<M…><m> (the last digit is the minor: cu130 = 13.0), rocm<M…><m>,
 *            xpu<M…><m> (xpu20253 = 2025.3), cann<M…><m>, cpu, metal, neuron, tpu.
 *   cpu and os are any non-empty token (upstream does not restrict them either: an unknown one is
 *   simply rejected by the CPU / OS rule).
 * Numbers are ASCII digits and must fit in 32 bits.
 */
#ifndef HUBKERN_VARIANT_H
#define HUBKERN_VARIANT_H

#include "hubkern/common.h"
#include "hubkern/env.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hk_variant_family {
    HK_FAMILY_INVALID = 0,          /* not a parseable variant name */
    HK_FAMILY_TORCH = 1,            /* torch213[-cxx11]-… : exact torch major.minor */
    HK_FAMILY_TORCH_STABLE_ABI = 2, /* torch-stable-abi211-… */
    HK_FAMILY_TVM_FFI = 3,          /* tvm-ffi01-… */
    HK_FAMILY_NOARCH = 4            /* torch-<name> */
} hk_variant_family;

/* Bit masks of families, for hk_resolution_best_of. */
#define HK_FAMILY_BIT(f) (1u << (unsigned)(f))
#define HK_FAMILIES_ALL                                                                         \
    (HK_FAMILY_BIT(HK_FAMILY_TORCH) | HK_FAMILY_BIT(HK_FAMILY_TORCH_STABLE_ABI) |               \
     HK_FAMILY_BIT(HK_FAMILY_TVM_FFI) | HK_FAMILY_BIT(HK_FAMILY_NOARCH))

typedef enum hk_backend_kind {
    HK_BACKEND_NONE = 0, /* noarch variants have no arch backend */
    HK_BACKEND_CUDA = 1,
    HK_BACKEND_ROCM = 2,
    HK_BACKEND_XPU = 3,
    HK_BACKEND_CANN = 4,
    HK_BACKEND_CPU = 5,
    HK_BACKEND_METAL = 6,
    HK_BACKEND_NEURON = 7,
    HK_BACKEND_TPU = 8
} hk_backend_kind;

/* A parsed variant name (opaque: read it with the accessors below). */
typedef struct hk_variant hk_variant;

/* Parse a variant name into a new hk_variant (free with hk_variant_free). On failure returns
 * HK_ERR_PARSE with a message saying which part is wrong and *out = NULL; never crashes on any
 * input, NULL included (HK_ERR_INVALID_ARG). Tokens longer than 31 bytes are a parse error. */
HK_API int hk_variant_parse(hk_variant **out, const char *name);
HK_API void hk_variant_free(hk_variant *v); /* NULL is fine */

/* Format a parsed variant back into its canonical name (parse → to_string is the identity for
 * canonical names; non-canonical numbers such as cu0130 come back as cu130). Free with hk_free.
 * NULL if v is NULL or on OOM. */
HK_API char *hk_variant_to_string(const hk_variant *v);

/* Fields (NULL v reads HK_FAMILY_INVALID / 0 / -1 / HK_BACKEND_NONE / ""). Strings live as long
 * as v. */
HK_API hk_variant_family hk_variant_get_family(const hk_variant *v);
/* Framework version: torch / stable-ABI / tvm-ffi major.minor. 0.0 for noarch. */
HK_API uint32_t hk_variant_fw_major(const hk_variant *v);
HK_API uint32_t hk_variant_fw_minor(const hk_variant *v);
/* Exact torch only: -1 untagged, 1 "-cxx11", 0 "-cxx98". -1 for the other families. */
HK_API int hk_variant_cxx11(const hk_variant *v);
/* Arch families: the backend and, for cuda/rocm/xpu/cann, its version (13.0, 2025.3). */
HK_API hk_backend_kind hk_variant_backend(const hk_variant *v);
HK_API uint32_t hk_variant_backend_major(const hk_variant *v);
HK_API uint32_t hk_variant_backend_minor(const hk_variant *v);
/* Arch families: the cpu and os tokens ("x86_64", "linux"). "" for noarch. */
HK_API const char *hk_variant_cpu(const hk_variant *v);
HK_API const char *hk_variant_os(const hk_variant *v);
/* Noarch only: the name after "torch-" ("cuda", "universal"). "" for arch families. */
HK_API const char *hk_variant_noarch(const hk_variant *v);

/* "torch", "torch-stable-abi", "tvm-ffi", "noarch", or "invalid". Never NULL. */
HK_API const char *hk_variant_family_name(hk_variant_family family);
/* "cuda", "rocm", "xpu", "cann", "cpu", "metal", "neuron", "tpu", or "none". Never NULL. */
HK_API const char *hk_backend_kind_name(hk_backend_kind kind);

/* ---- resolution -------------------------------------------------------------------------- */

typedef struct hk_resolution hk_resolution;

/* Decide, for each candidate name, whether it fits the machine `env`, and rank them.
 *
 * backend_override: NULL (use hk_env_backend(env)), or "cpu", or the env's backend name
 *   (e.g. "cuda"); anything else fails with HK_ERR_INVALID_ARG ("Invalid backend 'rocm', system
 *   supported backends: cpu, cuda"), as kernels 0.17 does.
 *
 * Rules (kernels 0.17, see docs/env-and-variants.md):
 *   arch variants: rejected on free-threaded Python < 3.15; cpu / os must equal the env's;
 *   exact torch: major.minor must equal the torch version, a cxx tag must equal the ABI;
 *   stable ABI: torch known and ABI version <= torch version; tvm-ffi: exact major.minor;
 *   backend: CUDA same major and variant minor <= system minor, others equal variant strings;
 *   metal: macOS >= 26.0; noarch: name equals the backend ("npu" for cann) or "universal".
 *   hubkern-only: noarch variants need Python; they are rejected when the env has no Python
 *   (python_version unknown).
 * Order: accepted first; stable ABI (newest ABI, then highest backend minor), exact torch
 *   (untagged first, then highest minor), tvm-ffi, torch-<backend>, torch-universal; ties broken
 *   by name (bytewise). Unparseable names come last, rejected, with the parse error as reason.
 *   Duplicate names are kept once.
 *
 * Returns HK_OK even when nothing is accepted (hk_resolution_best then returns NULL). Free *out
 * with hk_resolution_free. */
HK_API int hk_resolve_variants(hk_resolution **out, const hk_env *env, const char *const *names,
                               size_t count, const char *backend_override);

/* Number of decisions (= distinct candidate names). */
HK_API size_t hk_resolution_count(const hk_resolution *r);
/* The i-th candidate, preferred first. NULL if i is out of range. */
HK_API const char *hk_resolution_name(const hk_resolution *r, size_t i);
/* 1 accepted, 0 rejected (or i out of range). */
HK_API int hk_resolution_accepted(const hk_resolution *r, size_t i);
/* One line: "compatible", "compatible, preferred", or the rejection reason in kernels' words,
 * e.g. "Torch version (2.12) does not match environment Torch version (2.13)". */
HK_API const char *hk_resolution_reason(const hk_resolution *r, size_t i);
/* The family of the i-th candidate (HK_FAMILY_INVALID for an unparseable name). */
HK_API hk_variant_family hk_resolution_family(const hk_resolution *r, size_t i);
/* The parsed i-th candidate (lives as long as r); NULL for unparseable names or i out of range. */
HK_API const hk_variant *hk_resolution_variant(const hk_resolution *r, size_t i);
/* The preferred accepted candidate, or NULL if none was accepted. */
HK_API const char *hk_resolution_best(const hk_resolution *r);
/* The preferred accepted candidate whose family is in `family_mask` (HK_FAMILY_BIT(...) ORed),
 * or NULL. A C loader that cannot run torch variants asks for HK_FAMILY_BIT(HK_FAMILY_TVM_FFI). */
HK_API const char *hk_resolution_best_of(const hk_resolution *r, unsigned family_mask);
/* The backend the decision used, as a variant string ("cu130", "cpu"), or NULL if unknown. */
HK_API const char *hk_resolution_backend(const hk_resolution *r);
/* The trace as JSON: {"system": {...}, "backend": "cu130", "best": name|null,
 * "candidates": [{"name", "accepted", "preferred", "family", "reason"}...]}. Free with hk_free. */
HK_API char *hk_resolution_to_json(const hk_resolution *r);
/* The trace as text, one line per candidate, like `kernels versions`:
 * "<name> compatible, preferred ✅" / "<name>: <reason>". Free with hk_free. */
HK_API char *hk_resolution_to_text(const hk_resolution *r);
HK_API void hk_resolution_free(hk_resolution *r);

/* ---- choosing one variant ---------------------------------------------------------------- */

/* Options of hk_choose_variant. Initialise with HK_CHOOSE_OPTIONS_INIT or hk_choose_options_init. */
typedef struct hk_choose_options {
    unsigned int version;       /* HK_CHOOSE_OPTIONS_VERSION */
    const char *backend;        /* NULL: the env's backend; else as hk_resolve_variants' override */
    unsigned families;          /* HK_FAMILY_BIT mask of the families the caller can use; 0: any */
    unsigned fallback_families; /* tried when nothing in `families` fits (a loader's noarch
                                   fallback); 0: none */
    const char *variant;        /* NULL: choose; else exactly this name, which must be a candidate */
    const char *where;          /* names the repo (and commit) in messages; may be NULL */
    const char *family_note;    /* why `families` leaves the others out, added to the message when
                                   it left a fitting candidate out; may be NULL */
} hk_choose_options;

#define HK_CHOOSE_OPTIONS_VERSION 1
#define HK_CHOOSE_OPTIONS_INIT {HK_CHOOSE_OPTIONS_VERSION, NULL, 0, 0, NULL, NULL, NULL}

/* Defaults into *opts; HK_ERR_INVALID_ARG for a version this library does not know. */
HK_API int hk_choose_options_init(hk_choose_options *opts, unsigned int version);

/* The variant to use among `names` on the machine `env` (NULL: this process's machine, detected
 * once per process with hk_env_detect's defaults): hk_resolve_variants, then the preferred
 * accepted candidate of opts->families, else of opts->fallback_families. opts may be NULL (the
 * defaults). *out is a copy (free with hk_free).
 * Errors: HK_ERR_NO_VARIANT when nothing fits (the message names opts->where, the backend and
 * every candidate with its reason, and says which accepted candidate the family mask left out);
 * HK_ERR_NO_VARIANT naming the candidates when opts->variant is not among them; HK_ERR_INVALID_ARG
 * for a bad backend override or options version; detection errors of the process's machine. */
HK_API int hk_choose_variant(char **out, const hk_env *env, const char *const *names, size_t count,
                             const hk_choose_options *opts);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_VARIANT_H */
