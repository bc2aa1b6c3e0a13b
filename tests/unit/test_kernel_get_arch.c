/* The metadata arch check before the download, against an in-process mirror (hubkern_server on
 * loopback), as kernels 0.17.2 does it (resolver.py fetches build/<variant>/metadata.json alone;
 * load.py runs ArchValidator on it before installing the variant, and has_kernel(check_arch=True)
 * answers False when it refuses):
 *  - hk_has_kernel says no (HK_OK, *out 0, no error set, the reason in its out-parameters and the log) when the
 *    chosen variant's backend.archs exclude the device (CUDA capability; ROCm gcnArchName), yes
 *    with skip_arch_check and on a device the archs cover; it fetches metadata.json only, and
 *    nothing at all when no GPU is known (no archs list could refuse it then);
 *  - hk_get_kernel refuses with HK_ERR_ARCH having fetched only metadata.json: the cache then holds
 *    one blob (that file's) and the variant's snapshot directory nothing else; on a covered device
 *    (or with skip_arch_check) the same cache completes and the kernel loads and computes.
 * The device comes from the HUBKERN_* overrides of hk_env_detect (gpus, gpu_arch, backend). The
 * CUDA build is the real RMSNorm CPU tvm-ffi library under a cu130 variant name whose metadata
 * says backend cuda, archs ["9.0"]: it embeds no CUDA code objects, so once the metadata admits the
 * device it loads and runs on the CPU. */
#include "support.h"

#include "cache/cache_internal.h"
#include "hubkern/env.h"
#include "hubkern/hub.h"
#include "hubkern.h"
#include "internal.h"
#include "mirror.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_VARIANT "tvm-ffi01-cu130-x86_64-linux"
#define ROCM_VARIANT "torch-rocm"

static char g_endpoint[128];
static char *g_store;

static void publish(const char *src, const char *repo) { hk_test_publish(g_store, src, repo, "v1", NULL, NULL); }

/* The machine: backend, its version and the device, through the HUBKERN_* overrides. */
static hk_env *device_env(const char *backend, const char *version, const char *gpus, const char *gpu_arch) {
    setenv("HUBKERN_BACKEND", backend, 1);
    setenv("HUBKERN_BACKEND_VERSION", version, 1);
    if (gpus) setenv("HUBKERN_GPUS", gpus, 1);
    else unsetenv("HUBKERN_GPUS");
    if (gpu_arch) setenv("HUBKERN_GPU_ARCH", gpu_arch, 1);
    else unsetenv("HUBKERN_GPU_ARCH");
    hk_env_options eo = {.version = HK_ENV_OPTIONS_VERSION, .no_cuda = 1, .no_rocm = 1};
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &eo), HK_OK);
    return env;
}

static void opts(hk_get_kernel_options *o, const char *repo, const char *cache, const hk_env *env) {
    hk_get_kernel_options_init(o, HK_GET_KERNEL_OPTIONS_VERSION);
    o->repo_id = repo;
    o->kernel_version = 1;
    o->hub_options.endpoint = g_endpoint;
    o->hub_options.cache_dir = cache;
    o->hub_options.token = "";
    o->env = env;
}

static char *cache_dir(const char *name) {
    char *p = hk__asprintf("%s/%s", hk_test_tmpdir(), name);
    hk__mkdirs(p, 0777);
    return p;
}

/* Entries of dir (not starting with '.'); -1 when it cannot be listed. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static int count_blobs(const char *cache, const char *folder) {
    char *p = hk__asprintf("%s/%s/blobs", cache, folder);
    int n = count_entries(p);
    free(p);
    return n;
}

/* Files in every snapshot's build/<variant> of the repo folder (0 when none exists). */
static int count_variant_files(const char *cache, const char *folder, const char *variant) {
    char *snaps = hk__asprintf("%s/%s/snapshots", cache, folder);
    DIR *d = opendir(snaps);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *v = hk__asprintf("%s/%s/build/%s", snaps, de->d_name, variant);
        int k = count_entries(v);
        if (k > 0) n += k;
        free(v);
    }
    if (d) closedir(d);
    free(snaps);
    return n;
}

static bool snapshot_has(const char *cache, const char *folder, const char *variant, const char *file) {
    char *snaps = hk__asprintf("%s/%s/snapshots", cache, folder);
    DIR *d = opendir(snaps);
    bool found = false;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *p = hk__asprintf("%s/%s/build/%s/%s", snaps, de->d_name, variant, file);
        found |= hk__path_exists(p);
        free(p);
    }
    if (d) closedir(d);
    free(snaps);
    return found;
}

static char g_log[8192];
static void capture_log(void *ud, hk_log_level level, const char *msg) {
    (void)ud;
    (void)level;
    size_t have = strlen(g_log);
    snprintf(g_log + have, sizeof g_log - have, "%s\n", msg);
}

/* rms_norm(out, x, w, eps) with x all 2.0: out = 2 / sqrt(4 + eps) * w = w (to 1e-6). */
static bool computes(const hk_kernel *k) {
    enum { R = 2, H = 33 };
    float x[R * H], out[R * H], w[H];
    for (int i = 0; i < R * H; i++) {
        x[i] = 2.0f;
        out[i] = -1.0f;
    }
    for (int i = 0; i < H; i++) w[i] = 0.25f + (float)i / 8.0f;
    int64_t s[2] = {R, H}, ws[1] = {H};
    hk_dltensor tx = {x, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, s, NULL, 0};
    hk_dltensor to = {out, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, s, NULL, 0};
    hk_dltensor tw = {w, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_FLOAT, 32, 1}, ws, NULL, 0};
    hk_value a[4] = {hk_value_tensor(&to), hk_value_tensor(&tx), hk_value_tensor(&tw), hk_value_float(1e-6)};
    if (hk_kernel_call(NULL, k, "rms_norm", a, 4) != HK_OK) return false;
    for (int i = 0; i < R * H; i++) {
        float d = out[i] - w[i % H];
        if (d > 1e-5f || d < -1e-5f) return false;
    }
    return true;
}

static void test_has_kernel_cuda(void) {
    char *cache = cache_dir("has-cuda");
    const char *folder = "kernels--hubkern--gpunorm";
    hk_get_kernel_options o;
    int has = true;

    /* compute capability 8.0, the build lists 9.0 only: no, with the reason */
    hk_env *env = device_env("cuda", "13.0", "8.0", NULL);
    opts(&o, "hubkern/gpunorm", cache, env);
    g_log[0] = '\0';
    hk_set_log_callback(capture_log, NULL, HK_LOG_INFO);
    int why = HK_OK;
    char *reason = NULL;
    CHECK_RC(hk_has_kernel(&has, &why, &reason, &o), HK_OK);
    hk_set_log_callback(NULL, NULL, HK_LOG_WARN);
    CHECK(!has);
    CHECK(hk_last_error_code() == HK_OK && hk_last_error()[0] == '\0'); /* "no" leaves no error */
    const char *r = reason ? reason : "";
    CHECK(why == HK_ERR_ARCH);
    CHECK(strstr(r, "compute capability 8.0") != NULL);
    CHECK(strstr(r, "[9.0]") != NULL);
    CHECK(strstr(r, CUDA_VARIANT) != NULL);
    hk_free(reason);
    CHECK(strstr(g_log, "hubkern/gpunorm: no kernel for this machine") != NULL);
    CHECK(strstr(g_log, "compute capability 8.0") != NULL);
    /* it fetched metadata.json and nothing else of the build */
    CHECK(count_blobs(cache, folder) == 1);
    CHECK(count_variant_files(cache, folder, CUDA_VARIANT) == 1);
    CHECK(snapshot_has(cache, folder, CUDA_VARIANT, "metadata.json"));

    /* skip_arch_check: yes (check_arch=False) */
    o.skip_arch_check = true;
    has = false;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(has);
    hk_env_free(env);

    /* a device the build covers: yes (metadata.json now read from the cache) */
    env = device_env("cuda", "13.0", "9.0", NULL);
    opts(&o, "hubkern/gpunorm", cache, env);
    has = false;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(has);
    /* offline the version does not resolve: refs/v1 is written only by a complete pull */
    o.hub_options.offline = true;
    CHECK(hk_has_kernel(&has, NULL, NULL, &o) != HK_OK);
    hk_env_free(env);
    CHECK(count_blobs(cache, folder) == 1);

    /* no GPU known: no archs list can refuse it, so yes without fetching anything */
    char *c2 = cache_dir("has-cuda-nogpu");
    env = device_env("cuda", "13.0", NULL, NULL);
    opts(&o, "hubkern/gpunorm", c2, env);
    has = false;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(has);
    CHECK(count_blobs(c2, folder) <= 0);
    hk_env_free(env);
    free(c2);
    free(cache);
}

static void test_has_kernel_rocm(void) {
    char *cache = cache_dir("has-rocm");
    hk_get_kernel_options o;
    int has = true;
    /* gfx90a against archs [gfx942]: no */
    hk_env *env = device_env("rocm", "7.1", NULL, "gfx90a:sramecc+:xnack-");
    opts(&o, "hubkern/rocmnorm", cache, env);
    int why = HK_OK;
    char *reason = NULL;
    CHECK_RC(hk_has_kernel(&has, &why, &reason, &o), HK_OK);
    CHECK(!has);
    const char *r = reason ? reason : "";
    CHECK(why == HK_ERR_ARCH);
    CHECK(strstr(r, "gfx90a") != NULL && strstr(r, "gfx942") != NULL);
    hk_free(reason);
    o.skip_arch_check = true;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(has);
    hk_env_free(env);
    /* gfx942 (feature flags are not compared): yes */
    env = device_env("rocm", "7.1", NULL, "gfx942:sramecc+:xnack-");
    opts(&o, "hubkern/rocmnorm", cache, env);
    has = false;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(has);
    hk_env_free(env);
    free(cache);
}

static void test_get_refused_before_download(void) {
    char *cache = cache_dir("get-cuda");
    const char *folder = "kernels--hubkern--gpunorm";
    hk_get_kernel_options o;
    hk_kernel *k = (hk_kernel *)1;

    hk_env *env = device_env("cuda", "13.0", "8.6", NULL);
    opts(&o, "hubkern/gpunorm", cache, env);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_ARCH);
    CHECK(k == NULL);
    CHECK(strstr(hk_last_error(), "compute capability 8.6") != NULL);
    CHECK(strstr(hk_last_error(), "skip_arch_check") != NULL);
    /* only metadata.json came down: one blob, the library's is not in the cache */
    CHECK(count_blobs(cache, folder) == 1);
    CHECK(count_variant_files(cache, folder, CUDA_VARIANT) == 1);
    CHECK(snapshot_has(cache, folder, CUDA_VARIANT, "metadata.json"));
    CHECK(!snapshot_has(cache, folder, CUDA_VARIANT, "__init__.py"));
    /* asked again (metadata.json now from the cache): refused again, still nothing else fetched */
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_ARCH);
    CHECK(count_blobs(cache, folder) == 1);
    hk_env_free(env);

    /* a covered device: the same cache completes, the kernel loads and computes */
    env = device_env("cuda", "13.0", "9.0", NULL);
    opts(&o, "hubkern/gpunorm", cache, env);
    k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (k) {
        CHECK_STR(hk_kernel_variant(k), CUDA_VARIANT);
        CHECK_STR(hk_kernel_get_metadata(k)->backend, "cuda");
        CHECK(computes(k));
    }
    CHECK(count_blobs(cache, folder) == 4);
    CHECK(count_variant_files(cache, folder, CUDA_VARIANT) == 4);
    hk_kernel_unref(k);
    hk_env_free(env);

    /* skip_arch_check on the excluded device: downloaded and loaded (fresh cache) */
    char *c2 = cache_dir("get-cuda-skip");
    env = device_env("cuda", "13.0", "8.6", NULL);
    opts(&o, "hubkern/gpunorm", c2, env);
    o.skip_arch_check = true;
    k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (k) CHECK(computes(k));
    CHECK(count_blobs(c2, folder) == 4);
    hk_kernel_unref(k);
    hk_env_free(env);
    free(c2);
    free(cache);
}

int main(void) {
    const char *b = getenv("HK_BUILD_DIR");
    char *cpu = hk__asprintf("%s/kernels/rmsnorm/hub/build/tvm-ffi01-cpu-x86_64-linux", b ? b : ".");
    if (!hk__is_dir(cpu)) {
        fprintf(stderr, "the staged RMSNorm variant %s is missing (build the rmsnorm_hub_variants target)\n", cpu);
        return 1;
    }
    const char *tmp = hk_test_tmpdir();
    g_store = hk__asprintf("%s/store", tmp);
    /* gpunorm: the CPU build's files as a CUDA variant whose metadata lists archs ["9.0"] (the
     * digest covers the other files, so it still verifies) */
    char *src = hk__asprintf("%s/gpusrc", tmp);
    char *cmd = hk__asprintf("mkdir -p '%s/build/" CUDA_VARIANT "' && cp '%s'/* '%s/build/" CUDA_VARIANT "/' && "
                            "sed -i 's#\"type\": \"cpu\"#\"type\": \"cuda\", \"archs\": [\"9.0\"]#' "
                            "'%s/build/" CUDA_VARIANT "/metadata.json' && "
                            "grep -q '\"archs\": \\[\"9.0\"\\]' '%s/build/" CUDA_VARIANT "/metadata.json' && "
                            "test $(ls '%s/build/" CUDA_VARIANT "' | wc -l) = 4",
                            src, cpu, src, src, src, src);
    CHECK(system(cmd) == 0);
    free(cmd);
    publish(src, "hubkern/gpunorm");
    /* rocmnorm: a Python-only ROCm build declaring archs [gfx942] */
    char *rsrc = hk__asprintf("%s/rocmsrc", tmp);
    char *md = hk__asprintf("%s/build/" ROCM_VARIANT "/metadata.json", rsrc);
    char *init = hk__asprintf("%s/build/" ROCM_VARIANT "/__init__.py", rsrc);
    hk_test_write(md, "{\"name\":\"rocmnorm\",\"id\":\"_rocmnorm_rocm_0a1b2c3\",\"version\":1,"
                      "\"license\":\"MIT\",\"python-depends\":[],"
                      "\"backend\":{\"type\":\"rocm\",\"archs\":[\"gfx942\"]}}");
    hk_test_write(init, "def f(x):\n    return x\n");
    publish(rsrc, "hubkern/rocmnorm");

    srv_server *srv = hk_test_start_mirror(g_store, "hubkern", g_endpoint, sizeof g_endpoint);
    if (!srv) return hk_test_finish();
    unsetenv("HF_HUB_OFFLINE");
    unsetenv("LOCAL_KERNELS");
    setenv("HUBKERN_RETRY_BASE_MS", "1", 1);

    test_has_kernel_cuda();
    test_has_kernel_rocm();
    test_get_refused_before_download();

    srv_stop(srv);
    free(md);
    free(init);
    free(rsrc);
    free(src);
    free(cpu);
    free(g_store);
    return hk_test_finish();
}
