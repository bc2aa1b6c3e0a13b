/* Consumer of an installed hubkern: only the public headers, only exported symbols. Exits 0 when
 * detection runs and the reference resolution comes out right. */
#include <hubkern.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "consumer: %s: %s [%s]\n", what, hk_last_error(), hk_error_name(hk_last_error_code()));
    return 1;
}

int main(void) {
    printf("hubkern %s\n", hk_version());

    /* detection on this machine, without an interpreter or CUDA: a normal, fast result */
    hk_env_options opts = HK_ENV_OPTIONS_INIT;
    opts.no_python = 1;
    opts.no_cuda = 1;
    hk_env *env = NULL;
    if (hk_env_detect(&env, &opts) != HK_OK) return fail("hk_env_detect");
    char *json = hk_env_to_json(env);
    if (!json || !strstr(json, "\"backend\"")) return fail("hk_env_to_json");
    hk_free(json);
    hk_env_free(env);

    /* the reference case "CUDA 12.9 takes the best older minor" (kernel-hub-format.md §5.2) */
    if (hk_env_new(&env) != HK_OK) return fail("hk_env_new");
    const char *sys[][2] = {{"os", "linux"}, {"cpu", "x86_64"}, {"python_version", "3.12.0"},
                            {"torch_version", "2.10"}, {"torch_cxx11_abi", "1"},
                            {"torch_cuda_version", "12.9"}};
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++)
        if (hk_env_set(env, sys[i][0], sys[i][1]) != HK_OK) return fail("hk_env_set");
    const char *names[] = {"torch210-cxx11-cu126-x86_64-linux", "torch210-cxx11-cu128-x86_64-linux",
                           "torch210-cxx11-cu130-x86_64-linux", "torch-cuda", "torch-cpu"};
    hk_resolution *r = NULL;
    if (hk_resolve_variants(&r, env, names, 5, NULL) != HK_OK) return fail("hk_resolve_variants");
    const char *best = hk_resolution_best(r);
    int ok = best && strcmp(best, "torch210-cxx11-cu128-x86_64-linux") == 0;
    printf("selected: %s\n", best ? best : "(none)");

    hk_variant *v = NULL;
    if (hk_variant_parse(&v, "tvm-ffi01-cu130-x86_64-linux") != HK_OK) return fail("hk_variant_parse");
    char *s = hk_variant_to_string(v);
    ok = ok && s && strcmp(s, "tvm-ffi01-cu130-x86_64-linux") == 0 && hk_variant_get_family(v) == HK_FAMILY_TVM_FFI;
    hk_free(s);
    hk_variant_free(v);
    hk_resolution_free(r);
    hk_env_free(env);
    if (!ok) {
        fprintf(stderr, "consumer: unexpected resolution\n");
        return 1;
    }
    printf("consumer ok\n");
    return 0;
}
