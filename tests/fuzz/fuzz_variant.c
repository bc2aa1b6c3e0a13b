/* Variant names (hk_variant_parse) and their resolution. Input: line 1 = a machine as
 * "key=value key=value ..." (hk_env_set keys), the other lines = candidate variant names.
 * Checks: every parsed name round-trips through hk_variant_to_string; a failure has a message. */
#include "fuzz_util.h"
#include "hubkern/env.h"
#include "hubkern/variant.h"
#include "variant/variant_internal.h"

static void check_name(const char *name) {
    hk_variant *v = NULL;
    if (hk_variant_parse(&v, name) != HK_OK) {
        if (!*hk_last_error()) abort(); /* a failure without a message */
        return;
    }
    char *s = hk_variant_to_string(v);
    hk_variant *w = NULL;
    if (!s || hk_variant_parse(&w, s) != HK_OK || memcmp(v, w, sizeof *v) != 0) abort();
    (void)hk_variant_get_family(v);
    (void)hk_variant_cpu(v);
    (void)hk_variant_os(v);
    (void)hk_variant_noarch(v);
    hk_free(s);
    hk_variant_free(w);
    hk_variant_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = hk_fuzz_cstr(data, size);
    char *lines[64];
    size_t n = hk_fuzz_lines(lines, HK_ARRAY_LEN(lines), text);
    for (size_t i = 0; i < n; i++) check_name(lines[i]);

    hk_env *env = NULL;
    if (n >= 1 && hk_env_new(&env) == HK_OK) {
        char *save = NULL;
        for (char *kv = strtok_r(lines[0], " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) continue;
            *eq = '\0';
            (void)hk_env_set(env, kv, eq + 1);
        }
        hk_resolution *r = NULL;
        if (hk_resolve_variants(&r, env, (const char *const *)lines + 1, n - 1, NULL) == HK_OK) {
            for (size_t i = 0; i < hk_resolution_count(r); i++) {
                (void)hk_resolution_reason(r, i);
                (void)hk_resolution_accepted(r, i);
            }
            (void)hk_resolution_best(r);
            hk_free(hk_resolution_to_json(r));
            hk_free(hk_resolution_to_text(r));
            hk_resolution_free(r);
        }
        hk_env_free(env);
    }
    free(text);
    return 0;
}
