/* Variant choice for a pull: delegates to the foundation's resolver (hubkern/variant.h) when it is
 * part of the build; otherwise a conservative name match (backend token + this machine's arch). */
#include "client/client.h"

#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#if __has_include("hubkern/variant.h") && __has_include("hubkern/env.h")
#define HK_HAVE_RESOLVER 1
#include "hubkern/env.h"
#include "hubkern/variant.h"
#endif

#ifndef HK_HAVE_RESOLVER
static bool has_token(const char *name, const char *tok) {
    size_t n = strlen(tok);
    for (const char *p = name; (p = strstr(p, tok)) != NULL; p++) {
        bool start = p == name || p[-1] == '-';
        bool end = p[n] == '\0' || p[n] == '-';
        if (start && end) return true;
    }
    return false;
}

static int pick_by_name(const char **out, const char *const *names, size_t n, const char *backend) {
    struct utsname u;
    const char *arch = uname(&u) == 0 ? u.machine : "x86_64";
    const char *be = backend ? backend : "cpu";
    const char *best = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *v = names[i];
        bool be_ok = has_token(v, be) || (strcmp(be, "cuda") == 0 && strstr(v, "-cu") != NULL);
        bool arch_ok = strstr(v, "-linux") == NULL || strstr(v, arch) != NULL;
        if (be_ok && arch_ok && (!best || strcmp(v, best) > 0)) best = v;
    }
    if (!best) {
        hk_strbuf sb;
        hk_sb_init(&sb);
        for (size_t i = 0; i < n; i++) hk_sb_printf(&sb, "%s%s", i ? ", " : "", names[i]);
        int rc = hk_fail(HK_ERR_NO_VARIANT, "no build variant for backend %s on %s-linux among: %s (use --variant)", be,
                         arch, sb.data ? sb.data : "(none)");
        hk_sb_free(&sb);
        return rc;
    }
    *out = best;
    return HK_OK;
}
#endif

#ifdef HK_HAVE_RESOLVER
static int pick_with_resolver(const char **out, const char *const *names, size_t n, const char *backend,
                              unsigned families) {
    hk_env *env = NULL;
    int rc = hk_env_detect(&env, NULL);
    if (rc) return rc;
    hk_resolution *res = NULL;
    rc = hk_resolve_variants(&res, env, names, n, backend);
    hk_env_free(env);
    if (rc) return rc;
    const char *best = families ? hk_resolution_best_of(res, families) : hk_resolution_best(res);
    for (size_t i = 0; best && i < n; i++)
        if (strcmp(names[i], best) == 0) *out = names[i];
    if (!*out) {
        char *trace = hk_resolution_to_text(res);
        const char *any = families ? hk_resolution_best(res) : NULL;
        rc = hk_fail(HK_ERR_NO_VARIANT,
                     "no build variant fits this machine (backend %s)%s%s%s:\n%s(use --variant or --backend)",
                     hk_resolution_backend(res) ? hk_resolution_backend(res) : "unknown", any ? "; " : "",
                     any ? any : "", any ? " fits but is of a family the caller cannot load" : "",
                     trace ? trace : "");
        hk_free(trace);
    }
    hk_resolution_free(res);
    return rc;
}
#endif

int hk_pick_variant_of(const char **out, const char *const *names, size_t n, const char *backend,
                       unsigned families) {
    *out = NULL;
    if (n == 0) return hk_fail(HK_ERR_NO_VARIANT, "the repo has no build variants under build/");
#ifdef HK_HAVE_RESOLVER
    return pick_with_resolver(out, names, n, backend, families);
#else
    (void)families; /* names alone cannot tell families apart reliably */
    return pick_by_name(out, names, n, backend);
#endif
}

int hk_pick_variant(const char **out, const char *const *names, size_t n, const char *backend) {
    return hk_pick_variant_of(out, names, n, backend, 0);
}
