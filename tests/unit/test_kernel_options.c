/* The versioned options structs of env.h, variant.h and kernel.h (libgit2 style): _INIT and
 * _init agree, and every entry point refuses a version it does not know with HK_ERR_INVALID_ARG
 * and a message naming the struct, before doing anything else. Also the one variant chooser. */
#include "support.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

static void check_refused(int rc, const char *type, int line) {
    hk_test_checks++;
    if (rc != HK_ERR_INVALID_ARG || !strstr(hk_last_error(), type) || !strstr(hk_last_error(), "version")) {
        hk_test_failures++;
        fprintf(stderr, "line %d: rc %s, message '%s' (want HK_ERR_INVALID_ARG naming %s)\n", line,
                hk_error_name(rc), hk_last_error(), type);
    }
}
#define REFUSED(expr, type) check_refused((expr), (type), __LINE__)

static void test_env_options(void) {
    hk_env_options a = HK_ENV_OPTIONS_INIT, b;
    memset(&b, 0x5a, sizeof b);
    CHECK_RC(hk_env_options_init(&b, HK_ENV_OPTIONS_VERSION), HK_OK);
    CHECK(b.version == a.version && b.python == a.python && b.site_packages == a.site_packages &&
          b.libtorch_dir == a.libtorch_dir && b.tvm_ffi_lib == a.tvm_ffi_lib && b.no_python == a.no_python &&
          b.no_cuda == a.no_cuda && b.no_env_overrides == a.no_env_overrides &&
          b.python_timeout_ms == a.python_timeout_ms && b.no_rocm == a.no_rocm);
    CHECK(a.version == HK_ENV_OPTIONS_VERSION && !a.python && !a.no_python && a.python_timeout_ms == 0);
    REFUSED(hk_env_options_init(&b, 0), "hk_env_options");
    REFUSED(hk_env_options_init(&b, HK_ENV_OPTIONS_VERSION + 1), "hk_env_options");
    CHECK_RC(hk_env_options_init(NULL, HK_ENV_OPTIONS_VERSION), HK_ERR_INVALID_ARG);

    hk_env *env = NULL;
    hk_env_options z;
    memset(&z, 0, sizeof z); /* zero-initialised: version 0 */
    z.no_python = z.no_cuda = z.no_rocm = 1;
    REFUSED(hk_env_detect(&env, &z), "hk_env_options");
    CHECK(env == NULL);
    z.version = 7;
    REFUSED(hk_env_detect(&env, &z), "hk_env_options");
    z.version = HK_ENV_OPTIONS_VERSION;
    CHECK_RC(hk_env_detect(&env, &z), HK_OK);
    hk_env_free(env);
}

static void test_choose(void) {
    hk_choose_options a = HK_CHOOSE_OPTIONS_INIT, b;
    memset(&b, 0x5a, sizeof b);
    CHECK_RC(hk_choose_options_init(&b, HK_CHOOSE_OPTIONS_VERSION), HK_OK);
    CHECK(b.version == a.version && b.backend == a.backend && b.families == a.families &&
          b.fallback_families == a.fallback_families && b.variant == a.variant && b.where == a.where &&
          b.family_note == a.family_note);
    REFUSED(hk_choose_options_init(&b, 2), "hk_choose_options");

    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    const char *sys[][2] = {{"os", "linux"}, {"cpu", "x86_64"}, {"python_version", "3.12.0"},
                            {"torch_version", "2.10"}, {"torch_cuda_version", "12.9"},
                            {"tvm_ffi_version", "0.1"}};
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++) CHECK_RC(hk_env_set(env, sys[i][0], sys[i][1]), HK_OK);
    const char *names[] = {"torch210-cxx11-cu128-x86_64-linux", "tvm-ffi01-cu128-x86_64-linux", "torch-cuda",
                           "tvm-ffi01-cpu-aarch64-linux"};
    char *best = NULL;
    CHECK_RC(hk_choose_variant(&best, env, names, 4, NULL), HK_OK); /* NULL opts: defaults, any family */
    if (best) CHECK_STR(best, "torch210-cxx11-cu128-x86_64-linux");
    hk_free(best);
    hk_choose_options o = HK_CHOOSE_OPTIONS_INIT;
    o.families = HK_FAMILY_BIT(HK_FAMILY_TVM_FFI);
    CHECK_RC(hk_choose_variant(&best, env, names, 4, &o), HK_OK);
    if (best) CHECK_STR(best, "tvm-ffi01-cu128-x86_64-linux");
    hk_free(best);
    /* nothing of the mask fits: the fallback families, else the trace naming what was left out */
    o.families = HK_FAMILY_BIT(HK_FAMILY_TORCH_STABLE_ABI);
    o.fallback_families = HK_FAMILY_BIT(HK_FAMILY_NOARCH);
    CHECK_RC(hk_choose_variant(&best, env, names, 4, &o), HK_OK);
    if (best) CHECK_STR(best, "torch-cuda");
    hk_free(best);
    o.fallback_families = 0;
    o.where = "org/k@abc";
    o.family_note = "only stable-ABI builds load here";
    CHECK_RC(hk_choose_variant(&best, env, names, 4, &o), HK_ERR_NO_VARIANT);
    CHECK(best == NULL);
    CHECK(strstr(hk_last_error(), "no build variant of org/k@abc fits this machine (backend cu129)") != NULL);
    CHECK(strstr(hk_last_error(), "torch210-cxx11-cu128-x86_64-linux fits but is of a family the caller "
                                  "cannot load (only stable-ABI builds load here)") != NULL);
    CHECK(strstr(hk_last_error(), "tvm-ffi01-cpu-aarch64-linux: CPU (aarch64) does not match") != NULL);
    /* a named variant must be a candidate */
    o.variant = "torch-cuda";
    CHECK_RC(hk_choose_variant(&best, env, names, 4, &o), HK_OK);
    if (best) CHECK_STR(best, "torch-cuda");
    hk_free(best);
    o.variant = "torch-rocm";
    CHECK_RC(hk_choose_variant(&best, env, names, 4, &o), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "org/k@abc has no build variant 'torch-rocm'") != NULL);
    o.variant = NULL;
    CHECK_RC(hk_choose_variant(&best, env, names, 0, &o), HK_ERR_NO_VARIANT);
    o.backend = "rocm"; /* not the env's backend */
    CHECK_RC(hk_choose_variant(&best, env, names, 4, &o), HK_ERR_INVALID_ARG);
    o.backend = NULL;
    o.version = 0;
    REFUSED(hk_choose_variant(&best, env, names, 4, &o), "hk_choose_options");
    CHECK_RC(hk_choose_variant(NULL, env, names, 4, NULL), HK_ERR_INVALID_ARG);
    hk_env_free(env);
}

static void test_get_kernel_options(void) {
    hk_get_kernel_options a = HK_GET_KERNEL_OPTIONS_INIT, b;
    memset(&b, 0x5a, sizeof b);
    CHECK_RC(hk_get_kernel_options_init(&b, HK_GET_KERNEL_OPTIONS_VERSION), HK_OK);
    CHECK(b.version == a.version && b.repo_id == a.repo_id && b.kernel_version == a.kernel_version &&
          b.revision == a.revision && b.backend == a.backend && b.trust_remote_code == a.trust_remote_code &&
          b.hub_options.offline == a.hub_options.offline && b.hub_options.endpoint == a.hub_options.endpoint && b.hub_options.cache_dir == a.hub_options.cache_dir &&
          b.hub_options.token == a.hub_options.token && b.hub_options.progress == a.hub_options.progress && b.hub_options.progress_userdata == a.hub_options.progress_userdata &&
          b.env == a.env && b.tvm_ffi_library == a.tvm_ffi_library && b.skip_arch_check == a.skip_arch_check &&
          b.no_local_kernels == a.no_local_kernels && b.variant == a.variant);
    CHECK(a.kernel_version == HK_VERSION_UNSET && !a.trust_remote_code && !a.skip_arch_check && !a.env);
    CHECK(a.hub_options.freshness_s == 0 && b.hub_options.freshness_s == 0);
    CHECK(a.hub_options.version == HK_HUB_OPTIONS_VERSION && a.hub_options.offline == -1 && a.hub == NULL);
    REFUSED(hk_get_kernel_options_init(&b, 0), "hk_get_kernel_options");
    REFUSED(hk_get_kernel_options_init(&b, HK_GET_KERNEL_OPTIONS_VERSION + 1), "hk_get_kernel_options");

    /* a struct from a newer header: refused on entry, before any work (no network, no cache) */
    hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
    o.repo_id = "org/name";
    o.kernel_version = 1;
    o.hub_options.endpoint = "http://127.0.0.1:9";
    o.hub_options.cache_dir = "/nonexistent-cache";
    o.version = HK_GET_KERNEL_OPTIONS_VERSION + 1;
    hk_kernel *k = NULL;
    REFUSED(hk_get_kernel(&k, &o), "hk_get_kernel_options");
    CHECK(k == NULL);
    int has = 1, why = -1;
    char *reason = (char *)"x";
    REFUSED(hk_has_kernel(&has, &why, &reason, &o), "hk_get_kernel_options");
    CHECK(has == 0 && why == HK_OK && reason == NULL);
    REFUSED(hk_get_local_kernel(&k, hk_test_tmpdir(), &o), "hk_get_kernel_options");
    REFUSED(hk_load_locked(&k, "/nonexistent/kernels.lock", "org/name", &o), "hk_get_kernel_options");
    const char *names[] = {"tvm-ffi01-cpu-x86_64-linux"};
    char *best = NULL;
    REFUSED(hk_kernel_choose_variant(&best, &o, names, 1), "hk_get_kernel_options");
    o.version = 0;
    REFUSED(hk_get_kernel(&k, &o), "hk_get_kernel_options");

    /* the loader's choice: tvm-ffi for this process (no libtorch here), the named one when given */
    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    CHECK_RC(hk_env_set(env, "os", "linux"), HK_OK);
    CHECK_RC(hk_env_set(env, "cpu", "x86_64"), HK_OK);
    CHECK_RC(hk_env_set(env, "tvm_ffi_version", "0.1"), HK_OK);
    CHECK_RC(hk_env_set(env, "torch_version", "2.13"), HK_OK);
    CHECK_RC(hk_env_set(env, "backend", "cpu"), HK_OK);
    hk_get_kernel_options lo = HK_GET_KERNEL_OPTIONS_INIT;
    lo.env = env;
    lo.repo_id = "org/name";
    const char *both[] = {"torch213-cpu-x86_64-linux", "tvm-ffi01-cpu-x86_64-linux"};
    CHECK_RC(hk_kernel_choose_variant(&best, &lo, both, 2), HK_OK);
    if (best) CHECK_STR(best, "tvm-ffi01-cpu-x86_64-linux");
    hk_free(best);
    CHECK_RC(hk_kernel_choose_variant(&best, &lo, both, 1), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "org/name") && strstr(hk_last_error(), "libtorch"));
    lo.variant = "torch213-cpu-x86_64-linux";
    CHECK_RC(hk_kernel_choose_variant(&best, &lo, both, 2), HK_OK);
    if (best) CHECK_STR(best, "torch213-cpu-x86_64-linux");
    hk_free(best);
    hk_env_free(env);
}

/* hk_get_kernel_options as versions 1 and 2 of kernel.h laid it out (version 1 ends before
 * freshness_s): the ABI of programs built before the client's fields nested (version 3). */
typedef struct legacy_options_v2 {
    unsigned int version;
    const char *repo_id;
    int kernel_version;
    const char *revision, *backend;
    int trust_remote_code, offline;
    const char *endpoint, *cache_dir, *token;
    hk_progress_fn progress;
    void *progress_userdata;
    const struct hk_env *env;
    const char *tvm_ffi_library;
    int skip_arch_check, no_local_kernels;
    const char *variant;
    int signature;
    const char *sigstore_trust_root, *signature_policy_file;
    const struct hk_signature_policies *signature_policies;
    double freshness_s;
} legacy_options_v2;

static void test_legacy_get_kernel_options(void) {
    /* _init fills as much as the caller's struct of that version holds, and no more */
    legacy_options_v2 b;
    for (unsigned v = 1; v <= 2; v++) {
        memset(&b, 0x5a, sizeof b);
        CHECK_RC(hk_get_kernel_options_init((hk_get_kernel_options *)(void *)&b, v), HK_OK);
        CHECK(b.version == v && b.kernel_version == HK_VERSION_UNSET && !b.repo_id && !b.cache_dir && !b.offline &&
              !b.signature_policies);
        const unsigned char *tail = (const unsigned char *)&b + offsetof(legacy_options_v2, freshness_s);
        CHECK(v == 2 ? b.freshness_s == 0 : (tail[0] == 0x5a && tail[sizeof b.freshness_s - 1] == 0x5a));
    }
    /* and its fields are read where that version put them: offline and the cache are honoured (an
     * empty cache offline is HK_ERR_OFFLINE naming it, where a misread struct would go online or
     * elsewhere) */
    char cache[4096];
    snprintf(cache, sizeof cache, "%s/legacy-cache", hk_test_tmpdir());
    for (unsigned v = 1; v <= 2; v++) {
        CHECK_RC(hk_get_kernel_options_init((hk_get_kernel_options *)(void *)&b, v), HK_OK);
        b.repo_id = "org/name";
        b.kernel_version = 1;
        b.offline = 1;
        b.endpoint = "http://127.0.0.1:9";
        b.cache_dir = cache;
        b.no_local_kernels = 1;
        hk_kernel *k = NULL;
        CHECK_RC(hk_get_kernel(&k, (const hk_get_kernel_options *)(const void *)&b), HK_ERR_OFFLINE);
        CHECK(k == NULL && strstr(hk_last_error(), "org/name"));
        int has = 1, why = 0;
        char *reason = NULL;
        CHECK_RC(hk_has_kernel(&has, &why, &reason, (const hk_get_kernel_options *)(const void *)&b), HK_ERR_OFFLINE);
        hk_free(reason);
    }
}

int main(void) {
    test_env_options();
    test_legacy_get_kernel_options();
    test_choose();
    test_get_kernel_options();
    return hk_test_finish();
}
