/* Variant names: parse and format (kernel-hub-format.md §3, kernels 0.17 variants.py /
 * backends.py parse procedure), and the accessors of the opaque hk_variant. */
#include "variant/variant_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK_VARIANT_MAX_PARTS 16

const char *hk_variant_family_name(hk_variant_family family) {
    switch (family) {
    case HK_FAMILY_TORCH: return "torch";
    case HK_FAMILY_TORCH_STABLE_ABI: return "torch-stable-abi";
    case HK_FAMILY_TVM_FFI: return "tvm-ffi";
    case HK_FAMILY_NOARCH: return "noarch";
    default: return "invalid";
    }
}

const char *hk_backend_kind_name(hk_backend_kind kind) {
    switch (kind) {
    case HK_BACKEND_CUDA: return "cuda";
    case HK_BACKEND_ROCM: return "rocm";
    case HK_BACKEND_XPU: return "xpu";
    case HK_BACKEND_CANN: return "cann";
    case HK_BACKEND_CPU: return "cpu";
    case HK_BACKEND_METAL: return "metal";
    case HK_BACKEND_NEURON: return "neuron";
    case HK_BACKEND_TPU: return "tpu";
    default: return "none";
    }
}

/* Variant-string prefix of a versioned backend ("cu" for CUDA), NULL for unversioned ones. */
static const char *backend_prefix(hk_backend_kind kind) {
    switch (kind) {
    case HK_BACKEND_CUDA: return "cu";
    case HK_BACKEND_ROCM: return "rocm";
    case HK_BACKEND_XPU: return "xpu";
    case HK_BACKEND_CANN: return "cann";
    default: return NULL;
    }
}

/* Parse s[0..n) (all ASCII digits, n >= 1) into a uint32; false on overflow. */
static bool digits_u32(const char *s, size_t n, uint32_t *out) {
    uint64_t v = 0;
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > UINT32_MAX) return false;
    }
    *out = (uint32_t)v;
    return true;
}

static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* `<digits>` split as (\d+)(\d+) greedy (major = all but the last digit) or lazy (major = the
 * first digit). Needs at least two digits. */
static bool split_version(const char *digits, bool lazy_major, uint32_t *major, uint32_t *minor) {
    size_t n = strlen(digits);
    if (n < 2 || !all_digits(digits)) return false;
    size_t cut = lazy_major ? 1 : n - 1;
    return digits_u32(digits, cut, major) && digits_u32(digits + cut, n - cut, minor);
}

static int parse_backend(hk_variant *v, const char *s) {
    static const struct { const char *name; hk_backend_kind kind; } literal[] = {
        {"cpu", HK_BACKEND_CPU}, {"metal", HK_BACKEND_METAL},
        {"neuron", HK_BACKEND_NEURON}, {"tpu", HK_BACKEND_TPU}};
    for (size_t i = 0; i < HK_ARRAY_LEN(literal); i++)
        if (strcmp(s, literal[i].name) == 0) {
            v->backend = literal[i].kind;
            return HK_OK;
        }
    /* Same order as kernels' parse_backend: cu, rocm, xpu, cann. */
    static const struct { const char *prefix; hk_backend_kind kind; const char *what; } versioned[] = {
        {"cu", HK_BACKEND_CUDA, "CUDA"}, {"rocm", HK_BACKEND_ROCM, "ROCm"},
        {"xpu", HK_BACKEND_XPU, "XPU"}, {"cann", HK_BACKEND_CANN, "CANN"}};
    for (size_t i = 0; i < HK_ARRAY_LEN(versioned); i++) {
        if (!hk__str_starts_with(s, versioned[i].prefix)) continue;
        if (!split_version(s + strlen(versioned[i].prefix), false, &v->backend_major,
                           &v->backend_minor))
            return hk__fail(HK_ERR_PARSE, "Invalid %s variant string: '%s'", versioned[i].what, s);
        v->backend = versioned[i].kind;
        return HK_OK;
    }
    return hk__fail(HK_ERR_PARSE, "Unknown backend variant string: '%s'", s);
}

static int copy_token(char *dst, size_t cap, const char *src, const char *what) {
    size_t n = strlen(src);
    if (n == 0) return hk__fail(HK_ERR_PARSE, "empty %s in variant name", what);
    if (n >= cap)
        return hk__fail(HK_ERR_PARSE, "%s '%.40s...' in variant name is too long (max %zu)", what,
                       src, cap - 1);
    memcpy(dst, src, n + 1);
    return HK_OK;
}

/* Arch = exactly three parts: backend, cpu, os. */
static int parse_arch(hk_variant *v, char **parts, size_t n) {
    if (n != 3) return hk__fail(HK_ERR_PARSE, "Invalid arch variant parts: expected <backend>-<cpu>-<os>, got %zu part%s", n, n == 1 ? "" : "s");
    int rc = parse_backend(v, parts[0]);
    if (rc) return rc;
    if ((rc = copy_token(v->cpu, sizeof v->cpu, parts[1], "cpu"))) return rc;
    return copy_token(v->os, sizeof v->os, parts[2], "os");
}

static int parse_into(hk_variant *v, const char *name, char *buf) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || *p == '/' || *p == '\\')
            return hk__fail(HK_ERR_PARSE,
                           "variant name contains a space, control, non-ASCII or path character");

    char *parts[HK_VARIANT_MAX_PARTS];
    size_t n = 0;
    parts[n++] = buf;
    for (char *p = buf; *p; p++)
        if (*p == '-') {
            if (n == HK_VARIANT_MAX_PARTS)
                return hk__fail(HK_ERR_PARSE, "variant name has too many '-' separated parts");
            *p = '\0';
            parts[n++] = p + 1;
        }

    v->cxx11 = -1;
    if (hk__str_starts_with(name, "torch-stable-abi")) {
        /* parts: "torch" "stable" "abi<M><m…>" arch... */
        const char *ver = n >= 3 ? parts[2] + 3 : "";
        if (n < 3 || !hk__str_starts_with(parts[2], "abi") || strlen(ver) < 2 || !all_digits(ver) ||
            !split_version(ver, true, &v->fw_major, &v->fw_minor))
            return hk__fail(HK_ERR_PARSE, "Invalid Torch stable ABI variant string in '%s'", name);
        v->family = HK_FAMILY_TORCH_STABLE_ABI;
        return parse_arch(v, parts + 3, n - 3);
    }
    if (strcmp(parts[0], "torch") == 0) {
        /* noarch: everything after "torch-" (upstream allows '-' inside it). */
        if (n < 2 || name[6] == '\0')
            return hk__fail(HK_ERR_PARSE, "noarch variant '%s' has no backend name after 'torch-'", name);
        v->family = HK_FAMILY_NOARCH;
        return copy_token(v->noarch, sizeof v->noarch, name + 6, "noarch backend name");
    }
    if (hk__str_starts_with(parts[0], "torch")) {
        size_t arch_at = 1;
        if (n >= 2 && (strcmp(parts[1], "cxx11") == 0 || strcmp(parts[1], "cxx98") == 0)) {
            v->cxx11 = strcmp(parts[1], "cxx11") == 0;
            arch_at = 2;
        }
        /* torch(\d)(\d+): a single-digit major, then the minor. */
        if (!split_version(parts[0] + 5, true, &v->fw_major, &v->fw_minor))
            return hk__fail(HK_ERR_PARSE, "Invalid Torch variant string: '%s'", parts[0]);
        v->family = HK_FAMILY_TORCH;
        return parse_arch(v, parts + arch_at, n - arch_at);
    }
    if (strcmp(parts[0], "tvm") == 0 && n >= 2 && hk__str_starts_with(parts[1], "ffi")) {
        /* tvm-ffi(\d+?)(\d+): lazy major = one digit. */
        if (!split_version(parts[1] + 3, true, &v->fw_major, &v->fw_minor))
            return hk__fail(HK_ERR_PARSE, "Invalid TvmFfi variant string: 'tvm-%s'", parts[1]);
        v->family = HK_FAMILY_TVM_FFI;
        return parse_arch(v, parts + 2, n - 2);
    }
    return hk__fail(HK_ERR_PARSE, "Unknown framework in variant string: '%s'", name);
}

int hk__variant_parse_into(hk_variant *out, const char *name) {
    memset(out, 0, sizeof *out);
    out->cxx11 = -1;
    if (!name) return hk__fail(HK_ERR_INVALID_ARG, "hk_variant_parse: name is NULL");
    if (!*name) return hk__fail(HK_ERR_PARSE, "empty variant name");
    if (strlen(name) > 255) return hk__fail(HK_ERR_PARSE, "variant name is longer than 255 bytes");
    char buf[256];
    strcpy(buf, name);
    int rc = parse_into(out, name, buf);
    if (rc) {
        memset(out, 0, sizeof *out);
        out->cxx11 = -1;
        out->family = HK_FAMILY_INVALID;
    }
    return rc;
}

HK_API int hk_variant_parse(hk_variant **out, const char *name) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_variant_parse: out is NULL");
    *out = NULL;
    hk_variant *v = malloc(sizeof *v);
    if (!v) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = hk__variant_parse_into(v, name);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    return HK_OK;
}

HK_API void hk_variant_free(hk_variant *v) { free(v); }

HK_API hk_variant_family hk_variant_get_family(const hk_variant *v) { return v ? v->family : HK_FAMILY_INVALID; }
HK_API uint32_t hk_variant_fw_major(const hk_variant *v) { return v ? v->fw_major : 0; }
HK_API uint32_t hk_variant_fw_minor(const hk_variant *v) { return v ? v->fw_minor : 0; }
HK_API int hk_variant_cxx11(const hk_variant *v) { return v ? v->cxx11 : -1; }
HK_API hk_backend_kind hk_variant_backend(const hk_variant *v) { return v ? v->backend : HK_BACKEND_NONE; }
HK_API uint32_t hk_variant_backend_major(const hk_variant *v) { return v ? v->backend_major : 0; }
HK_API uint32_t hk_variant_backend_minor(const hk_variant *v) { return v ? v->backend_minor : 0; }
HK_API const char *hk_variant_cpu(const hk_variant *v) { return v ? v->cpu : ""; }
HK_API const char *hk_variant_os(const hk_variant *v) { return v ? v->os : ""; }
HK_API const char *hk_variant_noarch(const hk_variant *v) { return v ? v->noarch : ""; }

/* A token is acceptable in a name if it is non-empty, printable, and has no '-' or '/'. */
static bool token_ok(const char *s, size_t cap, bool allow_dash) {
    size_t n = strnlen(s, cap);
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '/' || c == '\\' || (c == '-' && !allow_dash))
            return false;
    }
    return true;
}

HK_API char *hk_variant_to_string(const hk_variant *v) {
    if (!v) return NULL;
    if (v->family == HK_FAMILY_NOARCH)
        return token_ok(v->noarch, sizeof v->noarch, true) ? hk__asprintf("torch-%s", v->noarch) : NULL;

    char fw[64];
    switch (v->family) {
    case HK_FAMILY_TORCH:
        if (v->fw_major > 9) return NULL; /* the grammar has a single-digit torch major */
        snprintf(fw, sizeof fw, "torch%u%u%s", v->fw_major, v->fw_minor,
                 v->cxx11 < 0 ? "" : v->cxx11 ? "-cxx11" : "-cxx98");
        break;
    case HK_FAMILY_TORCH_STABLE_ABI:
        if (v->fw_major > 9) return NULL;
        snprintf(fw, sizeof fw, "torch-stable-abi%u%u", v->fw_major, v->fw_minor);
        break;
    case HK_FAMILY_TVM_FFI:
        if (v->fw_major > 9) return NULL; /* a longer major would not parse back (lazy group) */
        snprintf(fw, sizeof fw, "tvm-ffi%u%u", v->fw_major, v->fw_minor);
        break;
    default: return NULL;
    }

    char be[48];
    const char *prefix = backend_prefix(v->backend);
    if (prefix) {
        if (v->backend_minor > 9) return NULL; /* the last digit is the minor */
        snprintf(be, sizeof be, "%s%u%u", prefix, v->backend_major, v->backend_minor);
    } else if (v->backend >= HK_BACKEND_CPU && v->backend <= HK_BACKEND_TPU) {
        snprintf(be, sizeof be, "%s", hk_backend_kind_name(v->backend));
    } else {
        return NULL;
    }
    if (!token_ok(v->cpu, sizeof v->cpu, false) || !token_ok(v->os, sizeof v->os, false)) return NULL;
    return hk__asprintf("%s-%s-%s-%s", fw, be, v->cpu, v->os);
}
