/* Noarch variants that declare archs (build.toml [torch-noarch] cuda-capabilities / rocm-archs →
 * metadata.json backend.archs): kernels 0.17.2 checks them against the device like any other build
 * (kernels/archs.py _check_arch_incompatibility keys on metadata.backend.type and .archs only), so
 * hubkern refuses such a torch-cuda / torch-rocm variant with HK_ERR_ARCH on a device it does not
 * cover, loads it on one it covers, and skips the check with skip_arch_check. The device comes from
 * an hk_env (hk_env_set, and the HUBKERN_GPUS / HUBKERN_GPU_ARCH overrides of hk_env_detect). */
#include "support.h"

#include "hubkern/env.h"
#include "hubkern.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* <tmp>/<case>/<variant>/metadata.json (+ an __init__.py, as a real noarch build has) */
static char *noarch_variant(const char *name, const char *variant, const char *backend, const char *archs_json) {
    char *dir = hk__asprintf("%s/%s/%s", hk_test_tmpdir(), name, variant);
    char *md = hk__asprintf("%s/metadata.json", dir);
    char *text = hk__asprintf("{\"name\":\"pyk\",\"id\":\"_pyk_%s_0a1b2c3\",\"version\":1,\"license\":\"MIT\","
                             "\"python-depends\":[],\"backend\":{\"type\":\"%s\"%s%s}}",
                             backend, backend, archs_json ? ",\"archs\":" : "", archs_json ? archs_json : "");
    hk_test_write(md, text);
    char *init = hk__asprintf("%s/__init__.py", dir);
    hk_test_write(init, "def f(x):\n    return x\n");
    free(init);
    free(text);
    free(md);
    return dir;
}

/* An env that describes the device only (tvm_ffi_version set so that nothing goes looking for a
 * libtvm_ffi: a noarch load needs none). */
static hk_env *env_with(const char *key, const char *value) {
    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    if (!env) return NULL;
    CHECK_RC(hk_env_set(env, "tvm_ffi_version", "0.1"), HK_OK);
    if (value) CHECK_RC(hk_env_set(env, key, value), HK_OK);
    return env;
}

/* Load dir with env; expect `want`. On success the handle must be the noarch one; it is released
 * again (the registry forgets the directory, so the next load checks afresh). */
static void expect_load(const char *dir, hk_env *env, bool skip, int want, int line) {
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.env = env;
    o.skip_arch_check = skip;
    hk_kernel *k = NULL;
    int rc = hk_get_local_kernel(&k, dir, &o);
    if (rc != want)
        fprintf(stderr, "test_kernel_noarch_arch.c:%d: (from here)\n", line);
    CHECK_RC(rc, want);
    if (want == HK_OK) {
        CHECK(k && hk_kernel_get_kind(k) == HK_KERNEL_NOARCH && hk_kernel_library_path(k) == NULL);
    } else {
        CHECK(k == NULL);
    }
    hk_kernel_unref(k);
}

static void test_cuda(void) {
    /* as kernel-builder writes a [torch-noarch] cuda-capabilities = ["8.0", "9.0a", "12.0+PTX"] */
    char *d = noarch_variant("cuda", "torch-cuda", "cuda", "[\"8.0\",\"9.0a\",\"12.0+PTX\"]");
    static const struct {
        const char *gpus;
        int want;
    } cases[] = {
        {"8.0", HK_OK},       /* "8.0": same major, minor >= 0 */
        {"8.9", HK_OK},       /* "8.0" covers 8.9 */
        {"9.0", HK_OK},       /* "9.0a": exactly 9.0 */
        {"12.0", HK_OK},      /* "12.0+PTX" */
        {"13.1", HK_OK},      /* PTX: any later capability */
        {"7.5", HK_ERR_ARCH}, /* below everything */
        {"9.1", HK_ERR_ARCH}, /* "9.0a" is 9.0 only */
        {"10.0", HK_ERR_ARCH},
        {"11.0", HK_ERR_ARCH},
    };
    for (size_t i = 0; i < HK_ARRAY_LEN(cases); i++) {
        hk_env *env = env_with("gpus", cases[i].gpus);
        expect_load(d, env, false, cases[i].want, __LINE__);
        if (cases[i].want == HK_ERR_ARCH) {
            const char *e = hk_last_error();
            char cc[64];
            snprintf(cc, sizeof cc, "compute capability %s", cases[i].gpus);
            CHECK(strstr(e, cc) && strstr(e, "[8.0, 9.0a, 12.0+PTX]") && strstr(e, "_pyk_cuda_0a1b2c3") &&
                  strstr(e, "--no-arch-check"));
            /* the existing option skips the check */
            expect_load(d, env, true, HK_OK, __LINE__);
        }
        hk_env_free(env);
    }
    /* no CUDA device known: nothing to check against (kernels skips without torch.cuda too) */
    hk_env *none = env_with("gpus", NULL);
    expect_load(d, none, false, HK_OK, __LINE__);
    hk_env_free(none);

    /* the same device through the HUBKERN_GPUS override of hk_env_detect */
    setenv("HUBKERN_GPUS", "10.0", 1);
    hk_env_options eo = {.version = HK_ENV_OPTIONS_VERSION, .no_python = 1, .no_cuda = 1, .no_rocm = 1};
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &eo), HK_OK);
    if (env) {
        CHECK_RC(hk_env_set(env, "tvm_ffi_version", "0.1"), HK_OK);
        expect_load(d, env, false, HK_ERR_ARCH, __LINE__);
        CHECK(strstr(hk_last_error(), "compute capability 10.0") != NULL);
        hk_env_free(env);
    }
    env = NULL;
    setenv("HUBKERN_GPUS", "8.6", 1);
    CHECK_RC(hk_env_detect(&env, &eo), HK_OK);
    if (env) {
        CHECK_RC(hk_env_set(env, "tvm_ffi_version", "0.1"), HK_OK);
        expect_load(d, env, false, HK_OK, __LINE__);
        hk_env_free(env);
    }
    unsetenv("HUBKERN_GPUS");

    /* every entry in an unknown format: supported (kernels' rule for CUDA) */
    char *junk = noarch_variant("cuda-junk", "torch-cuda", "cuda", "[\"sm_90\",\"hopper\"]");
    env = env_with("gpus", "7.0");
    expect_load(junk, env, false, HK_OK, __LINE__);
    hk_env_free(env);
    /* no archs declared (the usual noarch build): never refused */
    char *plain = noarch_variant("cuda-plain", "torch-cuda", "cuda", NULL);
    env = env_with("gpus", "7.0");
    expect_load(plain, env, false, HK_OK, __LINE__);
    hk_env_free(env);
    /* the check keys on metadata backend.type, as kernels does: rocm archs on a CUDA machine and
     * cuda archs of a cpu build are not a CUDA device's business */
    char *rocm_md = noarch_variant("cuda-rocm-md", "torch-rocm", "rocm", "[\"gfx942\"]");
    env = env_with("gpus", "9.0");
    expect_load(rocm_md, env, false, HK_OK, __LINE__);
    hk_env_free(env);
    char *universal = noarch_variant("universal", "torch-universal", "cpu", "[\"9.0\"]");
    env = env_with("gpus", "8.0");
    expect_load(universal, env, false, HK_OK, __LINE__);
    hk_env_free(env);
    /* a backend.type kernels' Backend enum lacks ("universal") is refused as kernels refuses it */
    char *unknown = noarch_variant("unknown-type", "torch-universal", "universal", "[\"9.0\"]");
    env = env_with("gpus", "8.0");
    expect_load(unknown, env, false, HK_ERR_PARSE, __LINE__);
    CHECK(strstr(hk_last_error(), "unknown backend.type") != NULL);
    hk_env_free(env);
    free(unknown);
    free(d);
    free(junk);
    free(plain);
    free(rocm_md);
    free(universal);
}

static void test_rocm(void) {
    /* [torch-noarch] rocm-archs = ["gfx942", "gfx90a"] */
    char *d = noarch_variant("rocm", "torch-rocm", "rocm", "[\"gfx942\",\"gfx90a\"]");
    static const struct {
        const char *arch;
        int want;
    } cases[] = {
        {"gfx942", HK_OK},
        {"gfx942:sramecc+:xnack-", HK_OK}, /* feature flags stripped: the base is compared */
        {"gfx90a:sramecc-:xnack+", HK_OK},
        {"gfx1100", HK_ERR_ARCH},
        {"gfx908:xnack+", HK_ERR_ARCH},
        {"gfx9420", HK_ERR_ARCH}, /* exact names only */
    };
    for (size_t i = 0; i < HK_ARRAY_LEN(cases); i++) {
        hk_env *env = env_with("gpu_arch", cases[i].arch);
        expect_load(d, env, false, cases[i].want, __LINE__);
        if (cases[i].want == HK_ERR_ARCH) {
            const char *e = hk_last_error();
            char gcn[300];
            snprintf(gcn, sizeof gcn, "gcnArchName %s", cases[i].arch);
            CHECK(strstr(e, gcn) && strstr(e, "[gfx942, gfx90a]") && strstr(e, "_pyk_rocm_0a1b2c3") &&
                  strstr(e, "--no-arch-check"));
            expect_load(d, env, true, HK_OK, __LINE__);
        }
        hk_env_free(env);
    }
    /* unlike CUDA, unknown names are not "supported": kernels compares names only */
    char *junk = noarch_variant("rocm-junk", "torch-rocm", "rocm", "[\"mi300\"]");
    hk_env *env = env_with("gpu_arch", "gfx942");
    expect_load(junk, env, false, HK_ERR_ARCH, __LINE__);
    hk_env_free(env);
    /* no ROCm device known: nothing to check against */
    env = env_with("gpu_arch", NULL);
    expect_load(d, env, false, HK_OK, __LINE__);
    hk_env_free(env);
    /* through the HUBKERN_GPU_ARCH override */
    setenv("HUBKERN_GPU_ARCH", "gfx1201", 1);
    hk_env_options eo = {.version = HK_ENV_OPTIONS_VERSION, .no_python = 1, .no_cuda = 1, .no_rocm = 1};
    env = NULL;
    CHECK_RC(hk_env_detect(&env, &eo), HK_OK);
    if (env) {
        CHECK_RC(hk_env_set(env, "tvm_ffi_version", "0.1"), HK_OK);
        expect_load(d, env, false, HK_ERR_ARCH, __LINE__);
        CHECK(strstr(hk_last_error(), "ROCm arch gfx1201") != NULL);
        hk_env_free(env);
    }
    unsetenv("HUBKERN_GPU_ARCH");
    free(d);
    free(junk);
}

int main(void) {
    test_cuda();
    test_rocm();
    return hk_test_finish();
}
