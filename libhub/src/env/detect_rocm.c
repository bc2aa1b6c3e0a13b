/* ROCm detection through dlopen of libamdhip64: the runtime version and device 0's gcnArchName. */
#include "env/env_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ROCm (HIP) ----------------------------------------------------------------------------- */

typedef int (*hip_int_fn)(int *);
typedef int (*hip_props_fn)(void *, int);

/* Where the runtime writes `char gcnArchName[256]` (LP64 Linux; from the HIP headers):
 *   hipDeviceProp_tR0600, filled by hipGetDevicePropertiesR0600 (exported since HIP 6.0, the
 *   struct a HIP >= 6 program's `hipGetDeviceProperties` macro names): byte 1160 of 1472;
 *   hipDeviceProp_t of HIP 5 (= hipDeviceProp_tR0000), filled by the symbol hipGetDeviceProperties
 *   in HIP 5 and, for old binaries, still by that plain symbol in HIP 6 and later: byte 396 of 792.
 * The symbol picks the layout, not the runtime version: HIP 6's plain hipGetDeviceProperties
 * still writes the old struct. The buffer is far larger than either struct and zeroed, and the
 * name read back must look like a gcnArchName, so a layout we do not know gives "unknown". */
#define HK_HIP_ARCH_OFFSET_R0600 1160
#define HK_HIP_ARCH_OFFSET_R0000 396
#define HK_HIP_PROPS_BUF (64u << 10)

void hk__env_detect_rocm(hk_env *env, const char *const *libs, size_t nlibs) {
    static const char *const defaults[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                                           "libamdhip64.so.5"};
    if (!libs) {
        libs = defaults;
        nlibs = HK_ARRAY_LEN(defaults);
    }
    if (sizeof(void *) != 8 || sizeof(size_t) != 8) return; /* the offsets are LP64 ones */
    void *h = NULL;
    for (size_t i = 0; i < nlibs && !h; i++) h = libs[i] ? dlopen(libs[i], RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        const char *e = dlerror();
        hk__log(HK_LOG_DEBUG, "no HIP runtime (libamdhip64): %s", e ? e : "not found");
        return;
    }
    hip_int_fn rt_version = HK_SYM(hip_int_fn, h, "hipRuntimeGetVersion");
    hip_int_fn dev_count = HK_SYM(hip_int_fn, h, "hipGetDeviceCount");
    hip_props_fn props = HK_SYM(hip_props_fn, h, "hipGetDevicePropertiesR0600");
    size_t offset = HK_HIP_ARCH_OFFSET_R0600;
    if (!props) {
        props = HK_SYM(hip_props_fn, h, "hipGetDeviceProperties");
        offset = HK_HIP_ARCH_OFFSET_R0000;
    }
    if (!rt_version || !dev_count || !props) {
        /* nothing was called: unloading is safe */
        hk__log(HK_LOG_DEBUG, "the HIP runtime found lacks hipRuntimeGetVersion / hipGetDeviceCount / "
               "hipGetDeviceProperties; ignoring it");
        dlclose(h);
        (void)dlerror();
        return;
    }
    /* From here on the runtime may have initialised itself: the handle stays open (as for
     * libcuda, and as torch keeps it). */
    int v = 0;
    char buf[32];
    if (rt_version(&v) == 0 && hk__hip_version_text(buf, sizeof buf, v))
        hk__env_put(env, HK_K_HIP_RUNTIME_VERSION, buf);
    int n = 0;
    if (dev_count(&n) != 0 || n <= 0) {
        hk__log(HK_LOG_DEBUG, "the HIP runtime reports no device");
        return;
    }
    unsigned char *p = calloc(1, HK_HIP_PROPS_BUF);
    if (!p) return;
    if (props(p, 0) == 0) {
        const char *name = (const char *)p + offset;
        if (memchr(name, '\0', 256) && hk__env_gcn_arch_valid(name))
            hk__env_put(env, HK_K_GPU_ARCH, name);
        else
            hk__log(HK_LOG_DEBUG, "the HIP runtime's device properties hold no gcnArchName where "
                   "expected (byte %zu); GPU arch unknown", offset);
    }
    free(p);
}

