/* ROCm: the gcnArchName field of hk_env (validation, HUBKERN_GPU_ARCH, JSON), the arch base
 * ("gfx90a:sramecc+:xnack-" → "gfx90a"), the metadata check (kernels 0.17 rules), the refusal and
 * acceptance when loading a real tvm-ffi variant whose metadata says rocm, and the dlopen path of
 * detection failing cleanly (no HIP runtime on this machine, or a library that is not one). No
 * stand-in HIP library here: tests/integration/test_env_rocm.py has those. */
#include "support.h"

#include "env/env_internal.h"
#include "hubkern/env.h"
#include "hubkern.h"
#include "internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static void test_arch_base(void) {
    char b[64];
    CHECK(hk_rocm_arch_base(b, sizeof b, "gfx942:sramecc+:xnack-"));
    CHECK_STR(b, "gfx942");
    CHECK(hk_rocm_arch_base(b, sizeof b, "gfx90a:sramecc+:xnack-"));
    CHECK_STR(b, "gfx90a");
    CHECK(hk_rocm_arch_base(b, sizeof b, "gfx1100"));
    CHECK_STR(b, "gfx1100");
    CHECK(hk_rocm_arch_base(b, sizeof b, "gfx908:xnack+"));
    CHECK_STR(b, "gfx908");
    CHECK(hk_rocm_arch_base(b, sizeof b, "gfx942:"));
    CHECK_STR(b, "gfx942");
    /* no base: empty output, false */
    CHECK(!hk_rocm_arch_base(b, sizeof b, ":xnack-"));
    CHECK_STR(b, "");
    CHECK(!hk_rocm_arch_base(b, sizeof b, ""));
    CHECK(!hk_rocm_arch_base(b, sizeof b, NULL));
    CHECK_STR(b, "");
    /* does not fit: "gfx942" needs 7 bytes */
    CHECK(!hk_rocm_arch_base(b, 6, "gfx942:xnack-"));
    CHECK_STR(b, "");
    CHECK(hk_rocm_arch_base(b, 7, "gfx942:xnack-"));
    CHECK_STR(b, "gfx942");
}

static void test_hip_version(void) {
    char v[32];
    CHECK(hk__hip_version_text(v, sizeof v, 60342134)); /* ROCm 6.3.x: HIP_VERSION 6.3.42134 */
    CHECK_STR(v, "6.3");
    CHECK(hk__hip_version_text(v, sizeof v, 70051831));
    CHECK_STR(v, "7.0");
    CHECK(hk__hip_version_text(v, sizeof v, 50731921));
    CHECK_STR(v, "5.7");
    CHECK(hk__hip_version_text(v, sizeof v, 61200000));
    CHECK_STR(v, "6.12");
    CHECK(!hk__hip_version_text(v, sizeof v, 603)); /* the old MAJOR*100+MINOR form: not trusted */
    CHECK(!hk__hip_version_text(v, sizeof v, 0));
}

static void test_env_field(void) {
    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    if (!env) return;
    CHECK(hk_env_gpu_arch(env) == NULL);
    CHECK(hk_env_hip_runtime_version(env) == NULL);
    static const char *const good[] = {"gfx942", "gfx90a:sramecc+:xnack-", "gfx1100", "gfx908:xnack+",
                                       "gfx1201", "gfx950:sramecc-"};
    for (size_t i = 0; i < HK_ARRAY_LEN(good); i++) {
        CHECK_RC(hk_env_set(env, "gpu_arch", good[i]), HK_OK);
        CHECK_STR(hk_env_gpu_arch(env), good[i]); /* kept verbatim, feature flags included */
        CHECK_STR(hk_env_get(env, "gpu_arch"), good[i]);
    }
    static const char *const bad[] = {"9.0", "sm_90", "gfx", "GFX942", "gfx942:", "gfx942 ",
                                      "gfx942::xnack-", "gfx942:xnack+-", "amdgcn-amd-amdhsa--gfx942",
                                      "none"};
    for (size_t i = 0; i < HK_ARRAY_LEN(bad); i++) {
        CHECK_RC(hk_env_set(env, "gpu_arch", bad[i]), HK_ERR_INVALID_ARG);
        CHECK(strstr(hk_last_error(), "gcnArchName") != NULL);
        CHECK_STR(hk_env_gpu_arch(env), "gfx950:sramecc-"); /* unchanged */
    }
    CHECK_RC(hk_env_set(env, "hip_runtime_version", "6.3.42134-abc"), HK_OK);
    CHECK_STR(hk_env_hip_runtime_version(env), "6.3");
    /* JSON and clone carry both */
    char *json = hk_env_to_json(env);
    CHECK(json && strstr(json, "\"gpu_arch\":\t\"gfx950:sramecc-\""));
    CHECK(json && strstr(json, "\"hip_runtime_version\":\t\"6.3\""));
    hk_free(json);
    hk_env *c = NULL;
    CHECK_RC(hk_env_clone(&c, env), HK_OK);
    CHECK_STR(hk_env_gpu_arch(c), "gfx950:sramecc-");
    hk_env_free(c);
    /* "" clears; JSON says null */
    CHECK_RC(hk_env_set(env, "gpu_arch", ""), HK_OK);
    CHECK(hk_env_gpu_arch(env) == NULL);
    json = hk_env_to_json(env);
    CHECK(json && strstr(json, "\"gpu_arch\":\tnull"));
    hk_free(json);
    hk_env_free(env);
}

static void test_env_override_variable(void) {
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .no_python = 1, .no_cuda = 1, .no_rocm = 1};
    hk_env *env = NULL;
    setenv("HUBKERN_GPU_ARCH", "gfx90a:sramecc+:xnack-", 1);
    setenv("HUBKERN_HIP_RUNTIME_VERSION", "6.4.43482", 1);
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK_STR(hk_env_gpu_arch(env), "gfx90a:sramecc+:xnack-");
    CHECK_STR(hk_env_hip_runtime_version(env), "6.4");
    hk_env_free(env);
    env = NULL;
    /* ignored with no_env_overrides */
    o.no_env_overrides = 1;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    CHECK(env && hk_env_gpu_arch(env) == NULL);
    hk_env_free(env);
    env = NULL;
    o.no_env_overrides = 0;
    /* a malformed value names the variable */
    setenv("HUBKERN_GPU_ARCH", "9.0", 1);
    CHECK_RC(hk_env_detect(&env, &o), HK_ERR_INVALID_ARG);
    CHECK(env == NULL);
    CHECK(strstr(hk_last_error(), "HUBKERN_GPU_ARCH") != NULL);
    unsetenv("HUBKERN_GPU_ARCH");
    unsetenv("HUBKERN_HIP_RUNTIME_VERSION");
}

/* The real dlopen path with nothing to find: every field stays unknown and no error is set. */
static void test_detect_without_hip(void) {
    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    if (!env) return;
    hk_clear_error();
    static const char *const missing[] = {"/nonexistent/libamdhip64.so", "libamdhip64-not-here.so.6"};
    hk__env_detect_rocm(env, missing, HK_ARRAY_LEN(missing));
    CHECK(hk_env_gpu_arch(env) == NULL && hk_env_hip_runtime_version(env) == NULL);
    CHECK(hk_last_error_code() == HK_OK);
    /* a library that loads but is no HIP runtime (no hipGetDeviceCount ...): ignored, unloaded */
    static const char *const not_hip[] = {"libm.so.6"};
    hk__env_detect_rocm(env, not_hip, 1);
    CHECK(hk_env_gpu_arch(env) == NULL && hk_env_hip_runtime_version(env) == NULL);
    CHECK(hk_last_error_code() == HK_OK);
    /* an explicit arch survives a failed detection (detection only ever adds what it found) */
    CHECK_RC(hk_env_set(env, "gpu_arch", "gfx942"), HK_OK);
    hk__env_detect_rocm(env, missing, HK_ARRAY_LEN(missing));
    CHECK_STR(hk_env_gpu_arch(env), "gfx942");
    hk_env_free(env);

    /* hk_env_detect with the default sonames: on this machine (CI: no ROCm) nothing loads */
    void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libamdhip64.so.7", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .no_python = 1, .no_cuda = 1, .no_env_overrides = 1};
    env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK);
    if (!h) {
        CHECK(env && hk_env_gpu_arch(env) == NULL && hk_env_hip_runtime_version(env) == NULL);
    } else {
        fprintf(stderr, "note: a HIP runtime is installed here; only checked that detection succeeds\n");
        dlclose(h);
    }
    hk_env_free(env);
}

static void test_metadata_check(void) {
    const char *archs[] = {"gfx942", "gfx90a"};
    hk_kernel_metadata md = {"k", "_k_rocm_1", 1, "MIT", "rocm", archs, 2, NULL, NULL};
    CHECK_RC(hk_kernel_check_rocm_arch(&md, "gfx942:sramecc+:xnack-"), HK_OK);
    CHECK_RC(hk_kernel_check_rocm_arch(&md, "gfx942"), HK_OK);
    CHECK_RC(hk_kernel_check_rocm_arch(&md, "gfx90a:sramecc-:xnack+"), HK_OK);
    CHECK_RC(hk_kernel_check_rocm_arch(&md, "gfx1100"), HK_ERR_ARCH);
    const char *e = hk_last_error();
    CHECK(strstr(e, "gfx1100") && strstr(e, "[gfx942, gfx90a]") && strstr(e, "_k_rocm_1") &&
          strstr(e, "skip_arch_check"));
    /* exact names: no prefix, no superstring, no case folding */
    CHECK_RC(hk_kernel_check_rocm_arch(&md, "gfx94"), HK_ERR_ARCH);
    CHECK_RC(hk_kernel_check_rocm_arch(&md, "gfx9420:xnack-"), HK_ERR_ARCH);
    CHECK_RC(hk_kernel_check_rocm_arch(&md, "GFX942"), HK_ERR_ARCH);
    CHECK_RC(hk_kernel_check_rocm_arch(&md, ":xnack-"), HK_ERR_ARCH);
    /* unknown device: nothing to check against */
    CHECK_RC(hk_kernel_check_rocm_arch(&md, NULL), HK_OK);
    /* no archs listed; other backends are not this check's business */
    hk_kernel_metadata none = {"k", "_k_rocm_1", 1, "MIT", "rocm", NULL, 0, NULL, NULL};
    CHECK_RC(hk_kernel_check_rocm_arch(&none, "gfx1100"), HK_OK);
    hk_kernel_metadata cuda = {"k", "_k_cuda_1", 1, "MIT", "cuda", archs, 2, NULL, NULL};
    CHECK_RC(hk_kernel_check_rocm_arch(&cuda, "gfx1100"), HK_OK);
    /* unlike CUDA there is no "every entry unparseable = supported" rule (kernels has none) */
    const char *junk[] = {"mi300", "cdna3"};
    hk_kernel_metadata j = {"k", "_k_rocm_1", 1, "MIT", "rocm", junk, 2, NULL, NULL};
    CHECK_RC(hk_kernel_check_rocm_arch(&j, "gfx942"), HK_ERR_ARCH);
    /* and the CUDA check leaves rocm metadata alone */
    CHECK_RC(hk_kernel_check_arch(&md, NULL, 9, 0), HK_OK);
}

/* ---- loading a rocm variant -------------------------------------------------------------------- */

static char *g_fixture_lib; /* the built tvm-ffi CPU fixture library */

/* A tvm-ffi variant directory whose metadata says backend rocm with archs gfx942, gfx90a; its
 * library is the real tvm-ffi fixture (the loader does not care what the code was built for). */
static char *rocm_variant(const char *name) {
    char *root = hk__asprintf("%s/%s", hk_test_tmpdir(), name);
    char *dir = hk__asprintf("%s/tvm-ffi01-rocm63-x86_64-linux", root);
    hk__mkdirs(dir, 0777);
    char *md = hk__asprintf("%s/metadata.json", dir);
    hk_test_write(md, "{\"name\":\"hkfixture\",\"id\":\"_hkfixture_rocm_0000001\",\"version\":1,"
                      "\"license\":\"Apache-2.0\",\"python-depends\":[],"
                      "\"backend\":{\"type\":\"rocm\",\"archs\":[\"gfx942\",\"gfx90a\"]}}");
    char *cmd = hk__asprintf("cp '%s' '%s/_hkfixture_rocm_0000001.so'", g_fixture_lib, dir);
    CHECK(system(cmd) == 0);
    free(cmd);
    free(md);
    free(root);
    return dir;
}

static hk_env *env_with_arch(const char *arch) {
    hk_env_options o = {.version = HK_ENV_OPTIONS_VERSION, .no_cuda = 1, .no_rocm = 1, .no_env_overrides = 1};
    hk_env *env = NULL;
    CHECK_RC(hk_env_detect(&env, &o), HK_OK); /* Python: where libtvm_ffi is */
    if (env && arch) CHECK_RC(hk_env_set(env, "gpu_arch", arch), HK_OK);
    return env;
}

static void test_load(void) {
    hk_get_kernel_options o;
    hk_kernel *k = NULL;

    /* refused: gfx1100 is not listed; nothing is loaded */
    char *d1 = rocm_variant("refused");
    hk_env *env = env_with_arch("gfx1100");
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.env = env;
    CHECK_RC(hk_get_local_kernel(&k, d1, &o), HK_ERR_ARCH);
    CHECK(k == NULL);
    const char *e = hk_last_error();
    CHECK(strstr(e, "ROCm arch gfx1100") && strstr(e, "[gfx942, gfx90a]") &&
          strstr(e, "--no-arch-check"));
    /* ... unless the caller skips the check */
    o.skip_arch_check = true;
    CHECK_RC(hk_get_local_kernel(&k, d1, &o), HK_OK);
    CHECK(k && hk_kernel_get_kind(k) == HK_KERNEL_TVM_FFI);
    hk_kernel_unref(k);
    k = NULL;
    hk_env_free(env);

    /* accepted: the base of the gcnArchName is listed; the kernel loads and runs */
    char *d2 = rocm_variant("accepted");
    env = env_with_arch("gfx90a:sramecc+:xnack-");
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.env = env;
    CHECK_RC(hk_get_local_kernel(&k, d2, &o), HK_OK);
    if (k) {
        CHECK_STR(hk_kernel_get_metadata(k)->backend, "rocm");
        hk_value r;
        hk_value a[] = {hk_value_int(41)};
        CHECK_RC(hk_kernel_call(&r, k, "add_one", a, 1), HK_OK);
        CHECK(r.kind == HK_VALUE_INT && r.v.i == 42);
        hk_value_clear(&r);
        hk_kernel_unref(k);
        k = NULL;
    }
    hk_env_free(env);

    /* no ROCm device known: not checked (as kernels, which checks only with a device) */
    char *d3 = rocm_variant("unknown");
    env = env_with_arch(NULL);
    o.env = env;
    CHECK_RC(hk_get_local_kernel(&k, d3, &o), HK_OK);
    hk_kernel_unref(k);
    k = NULL;
    hk_env_free(env);

    /* the process-wide detection (opts->env NULL) reads HUBKERN_GPU_ARCH: first use in this
     * process happens here, after setenv */
    char *d4 = rocm_variant("variable");
    setenv("HUBKERN_GPU_ARCH", "gfx1030", 1);
    setenv("HUBKERN_NO_CUDA", "1", 1);
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    CHECK_RC(hk_get_local_kernel(&k, d4, &o), HK_ERR_ARCH);
    CHECK(k == NULL && strstr(hk_last_error(), "gfx1030"));
    unsetenv("HUBKERN_GPU_ARCH");
    free(d1);
    free(d2);
    free(d3);
    free(d4);
}

int main(void) {
    test_arch_base();
    test_hip_version();
    test_env_field();
    test_env_override_variable();
    test_detect_without_hip();
    test_metadata_check();
    const char *b = getenv("HK_BUILD_DIR");
    g_fixture_lib = hk__asprintf("%s/tests/kernel-fixtures/tvm-ffi01-cpu-x86_64-linux/_hkfixture_cpu_0000001.so",
                                b ? b : ".");
    if (!hk__path_exists(g_fixture_lib)) {
        fprintf(stderr, "the tvm-ffi fixture %s was not built (needs a C++ compiler and "
                "apache-tvm-ffi: run scripts/setup.sh and re-configure)\n", g_fixture_lib);
        free(g_fixture_lib);
        hk_test_finish();
        return 1;
    }
    test_load();
    free(g_fixture_lib);
    return hk_test_finish();
}
