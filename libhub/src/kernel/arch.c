/* GPU fitness: metadata backend.archs rules and the code objects embedded in a library. */
#include "kernel/kernel_internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "X.Y[a|f][+PTX]" → fields; false when the entry is not of that shape. */
static bool parse_cuda_arch(const char *s, int *x, int *y, char *suffix, bool *ptx) {
    const char *p = s;
    if (!isdigit((unsigned char)*p)) return false;
    long a = strtol(p, (char **)&p, 10);
    if (*p != '.' || !isdigit((unsigned char)p[1])) return false;
    p++;
    long b = strtol(p, (char **)&p, 10);
    if (a > 99 || b > 99) return false;
    *suffix = 0;
    if (*p == 'a' || *p == 'f') *suffix = *p++;
    *ptx = false;
    if (strcmp(p, "+PTX") == 0) {
        *ptx = true;
        p += 4;
    }
    if (*p) return false;
    *x = (int)a;
    *y = (int)b;
    return true;
}

HK_API int hk_cuda_arch_entry_matches(const char *entry, int major, int minor, int *out_parsed) {
    int x, y;
    char suffix;
    bool ptx;
    bool ok = entry && parse_cuda_arch(entry, &x, &y, &suffix, &ptx);
    if (out_parsed) *out_parsed = ok;
    if (!ok) return false;
    /* kernels 0.17.2 order: the suffix decides before +PTX ("9.0a+PTX" is 9.0 only) */
    if (suffix == 'a') return major == x && minor == y;
    if (suffix == 'f') return major == x && minor >= y;
    if (ptx) return major > x || (major == x && minor >= y);
    return major == x && minor >= y;
}

static bool object_fits(const hk_code_object *o, int major, int minor) {
    int dev = major * 10 + minor;
    int om = o->sm / 10, on = o->sm % 10;
    if (o->arch_specific) return o->sm == dev;
    if (o->is_ptx && !o->family) return dev >= o->sm; /* the driver JIT-compiles PTX for newer GPUs */
    /* cubins (and family PTX) run on the same major at an equal or later minor */
    return om == major && on <= minor;
}

HK_API int hk_code_objects_fit(const hk_code_objects *objs, int major, int minor) {
    for (size_t i = 0; objs && i < objs->n; i++)
        if (object_fits(&objs->v[i], major, minor)) return 1;
    return 0;
}

HK_API int hk_code_object_fits(const hk_code_objects *objs, size_t i, int major, int minor) {
    return objs && i < objs->n && object_fits(&objs->v[i], major, minor);
}

HK_API size_t hk_code_objects_count(const hk_code_objects *objs) { return objs ? objs->n : 0; }

#define HK_CODE_OBJECT_FIELD(fn, field)                                    \
    HK_API int fn(const hk_code_objects *objs, size_t i) {                 \
        return objs && i < objs->n ? (int)objs->v[i].field : 0;            \
    }
HK_CODE_OBJECT_FIELD(hk_code_object_is_ptx, is_ptx)
HK_CODE_OBJECT_FIELD(hk_code_object_sm, sm)
HK_CODE_OBJECT_FIELD(hk_code_object_arch_specific, arch_specific)
HK_CODE_OBJECT_FIELD(hk_code_object_family, family)
HK_CODE_OBJECT_FIELD(hk_code_object_compressed, compressed)
#undef HK_CODE_OBJECT_FIELD

char *hk__code_objects_describe(const hk_code_objects *objs) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    size_t count = objs ? objs->n : 0;
    for (size_t i = 0; i < count; i++) {
        const hk_code_object *o = &objs->v[i];
        hk__sb_printf(&sb, "%s%s_%d%s", i ? ", " : "", o->is_ptx ? "compute" : "sm", o->sm,
                     o->arch_specific ? "a" : o->family ? "f" : "");
        if (o->is_ptx) hk__sb_append(&sb, " (PTX)");
    }
    if (count == 0) hk__sb_append(&sb, "(none)");
    return hk__sb_steal(&sb);
}

HK_API int hk_kernel_check_arch(const hk_kernel_metadata *md, const char *library_path, int major,
                                int minor) {
    if (md && md->backend && strcmp(md->backend, "cuda") == 0 && md->num_archs > 0) {
        bool any_parsed = false, match = false;
        for (size_t i = 0; i < md->num_archs; i++) {
            int parsed;
            if (hk_cuda_arch_entry_matches(md->archs[i], major, minor, &parsed)) match = true;
            any_parsed |= parsed;
        }
        if (any_parsed && !match) {
            hk_strbuf sb;
            hk__sb_init(&sb);
            for (size_t i = 0; i < md->num_archs; i++)
                hk__sb_printf(&sb, "%s%s", i ? ", " : "", md->archs[i]);
            char *list = hk__sb_steal(&sb);
            int rc = hk__fail(HK_ERR_ARCH,
                             "this GPU (compute capability %d.%d) is not supported by %s: its "
                             "metadata lists CUDA archs [%s]; use a GPU it covers, another "
                             "version of the kernel, or skip the check (skip_arch_check / "
                             "--no-arch-check) at your own risk",
                             major, minor, md->id ? md->id : "this kernel", list ? list : "?");
            free(list);
            return rc;
        }
    }
    if (library_path) {
        hk_code_objects *objs = NULL;
        int rc = hk_library_code_objects(&objs, library_path);
        if (rc) return rc;
        if (hk_code_objects_count(objs) > 0 && !hk_code_objects_fit(objs, major, minor)) {
            char *d = hk__code_objects_describe(objs);
            rc = hk__fail(HK_ERR_ARCH,
                         "this GPU (compute capability %d.%d) is not a compiled target of %s: its "
                         "CUDA code objects (%s) cannot run on sm_%d%d; use a GPU they cover or "
                         "another version of the kernel",
                         major, minor, library_path, d ? d : "?", major, minor);
            free(d);
        }
        hk_code_objects_free(objs);
        return rc;
    }
    return HK_OK;
}

/* ---- ROCm ------------------------------------------------------------------------------------ */

HK_API int hk_rocm_arch_base(char *out, size_t cap, const char *gcn_arch_name) {
    if (!out || cap == 0) return 0;
    out[0] = '\0';
    if (!gcn_arch_name) return 0;
    size_t n = strcspn(gcn_arch_name, ":");
    if (n == 0 || n >= cap) return 0;
    memcpy(out, gcn_arch_name, n);
    out[n] = '\0';
    return 1;
}

HK_API int hk_kernel_check_rocm_arch(const hk_kernel_metadata *md, const char *gcn_arch_name) {
    if (!md || !md->backend || strcmp(md->backend, "rocm") != 0 || md->num_archs == 0 ||
        !gcn_arch_name)
        return HK_OK;
    char base[256];
    hk_rocm_arch_base(base, sizeof base, gcn_arch_name); /* "" when malformed: matches nothing */
    for (size_t i = 0; i < md->num_archs; i++)
        if (base[0] && md->archs[i] && strcmp(md->archs[i], base) == 0) return HK_OK;
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < md->num_archs; i++)
        hk__sb_printf(&sb, "%s%s", i ? ", " : "", md->archs[i] ? md->archs[i] : "?");
    char *list = hk__sb_steal(&sb);
    int rc = hk__fail(HK_ERR_ARCH,
                     "this GPU (ROCm arch %s, gcnArchName %s) is not supported by %s: its metadata "
                     "lists ROCm archs [%s]; use a GPU it covers, another version of the kernel, or "
                     "skip the check (skip_arch_check / --no-arch-check) at your own risk",
                     base[0] ? base : "?", gcn_arch_name, md->id ? md->id : "this kernel",
                     list ? list : "?");
    free(list);
    return rc;
}

/* ---- device capability through the CUDA driver API ------------------------------------------ */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_attr_fn)(int *, int, int);

int hk__cuda_device_capability(int *major, int *minor) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return hk__fail(HK_ERR_NOT_FOUND, "no CUDA driver (libcuda.so.1) on this machine");
    cu_init_fn init;
    cu_count_fn count;
    cu_attr_fn attr;
    *(void **)&init = dlsym(h, "cuInit");
    *(void **)&count = dlsym(h, "cuDeviceGetCount");
    *(void **)&attr = dlsym(h, "cuDeviceGetAttribute");
    int n = 0, a = 0, b = 0, rc = HK_ERR_NOT_FOUND;
    if (init && count && attr && init(0) == 0 && count(&n) == 0 && n > 0 &&
        attr(&a, 75 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */, 0) == 0 &&
        attr(&b, 76 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */, 0) == 0) {
        *major = a;
        *minor = b;
        rc = HK_OK;
    }
    /* the driver stays loaded: unloading it after cuInit is not supported */
    if (rc) return hk__fail(rc, "the CUDA driver reports no usable device");
    return HK_OK;
}
