/* CUDA detection through dlopen: the driver (libcuda: version, devices and their compute
 * capabilities) and, without torch, the runtime (libcudart), as kernels' _get_cuda() does. */
#include "env/env_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CUDA ----------------------------------------------------------------------------------- */

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_dev_get_fn)(int *, int);
typedef int (*cu_attr_fn)(int *, int, int);
typedef int (*cu_name_fn)(char *, int, int);
typedef int (*cudart_ver_fn)(int *);

#define HK_CU_ATTR_CC_MAJOR 75 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
#define HK_CU_ATTR_CC_MINOR 76 /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */

static void put_cuda_int_version(hk_env *env, hk_env_key k, int v) {
    /* 12080 → 12.8, 13000 → 13.0 (same encoding for the driver and the runtime) */
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
    hk__env_put(env, k, buf);
}

static void detect_driver(hk_env *env) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        hk__log(HK_LOG_DEBUG, "no CUDA driver: %s", dlerror());
        return;
    }
    /* The handle stays open: unloading libcuda after cuInit is not safe. */
    cu_init_fn cu_init = HK_SYM(cu_init_fn, h, "cuInit");
    cu_int_fn drv_ver = HK_SYM(cu_int_fn, h, "cuDriverGetVersion");
    cu_int_fn dev_count = HK_SYM(cu_int_fn, h, "cuDeviceGetCount");
    cu_dev_get_fn dev_get = HK_SYM(cu_dev_get_fn, h, "cuDeviceGet");
    cu_attr_fn attr = HK_SYM(cu_attr_fn, h, "cuDeviceGetAttribute");
    cu_name_fn dev_name = HK_SYM(cu_name_fn, h, "cuDeviceGetName");
    int v = 0;
    if (drv_ver && drv_ver(&v) == 0 && v > 0) put_cuda_int_version(env, HK_K_CUDA_DRIVER_VERSION, v);
    int n = 0;
    if (!cu_init || !dev_count || !dev_get || !attr || cu_init(0) != 0 || dev_count(&n) != 0 || n <= 0)
        return;
    if (n > 256) n = 256;
    hk_gpu *gpus = calloc((size_t)n, sizeof *gpus);
    if (!gpus) return;
    int got = 0;
    for (int i = 0; i < n; i++) {
        int dev = 0, ma = 0, mi = 0;
        if (dev_get(&dev, i) != 0 || attr(&ma, HK_CU_ATTR_CC_MAJOR, dev) != 0 ||
            attr(&mi, HK_CU_ATTR_CC_MINOR, dev) != 0)
            continue;
        char name[256] = "";
        if (!dev_name || dev_name(name, (int)sizeof name - 1, dev) != 0) snprintf(name, sizeof name, "GPU %d", i);
        name[sizeof name - 1] = '\0';
        gpus[got].major = ma;
        gpus[got].minor = mi;
        gpus[got].name = hk__strdup(name);
        got++;
    }
    for (int i = 0; i < env->ngpus; i++) free(env->gpus[i].name);
    free(env->gpus);
    env->gpus = gpus;
    env->ngpus = got;
}

static void detect_runtime(hk_env *env) {
    /* kernels: ctypes.util.find_library("cudart") then cudaRuntimeGetVersion. */
    static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                        "libcudart.so.11.0"};
    for (size_t i = 0; i < HK_ARRAY_LEN(names); i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        cudart_ver_fn fn = HK_SYM(cudart_ver_fn, h, "cudaRuntimeGetVersion");
        int v = 0;
        if (fn && fn(&v) == 0 && v > 0) {
            put_cuda_int_version(env, HK_K_CUDA_RUNTIME_VERSION, v);
            return; /* the handle stays open, as ctypes keeps it */
        }
        dlclose(h);
    }
    (void)dlerror();
}

void hk__env_detect_cuda(hk_env *env) {
    detect_driver(env);
    if (!env->torch_installed) detect_runtime(env);
}

