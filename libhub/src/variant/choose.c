/* The one variant chooser: a pull (client), hk_get_kernel / hk_has_kernel / hk_load_locked and
 * local loads (kernel) and the CLI all pick a build variant here, from an hk_env (the caller's,
 * else the process-wide detected one). */
#include "env/detected.h"
#include "variant/variant_internal.h"

#include <stdlib.h>
#include <string.h>

HK_API int hk_choose_options_init(hk_choose_options *opts, unsigned int version) {
    HK__OPTIONS_INIT_BODY(hk_choose_options, opts, version, HK_CHOOSE_OPTIONS_VERSION, HK_CHOOSE_OPTIONS_INIT);
}

static char *join_names(const char *const *names, size_t n) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < n; i++) hk__sb_printf(&sb, "%s%s", i ? ", " : "", names[i]);
    if (n == 0) hk__sb_append(&sb, "none");
    return hk__sb_steal(&sb);
}

/* The caller named the variant: it must be a candidate. */
static int take_named(char **out, const char *const *names, size_t n, const hk_choose_options *o) {
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], o->variant) == 0) {
            *out = hk__strdup(o->variant);
            return *out ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
        }
    char *list = join_names(names, n);
    int rc = hk__fail(HK_ERR_NO_VARIANT, "%s has no build variant '%s' (it has: %s)",
                     o->where ? o->where : "the repo", o->variant, list ? list : "?");
    free(list);
    return rc;
}

/* Nothing fits: the backend, the candidate the family mask left out, and the whole trace. */
static int no_fit(const hk_resolution *r, const hk_choose_options *o) {
    char *trace = hk_resolution_to_text(r);
    const char *any = hk_resolution_best(r); /* accepted but of a family the caller cannot use */
    const char *be = hk_resolution_backend(r);
    int rc = hk__fail(HK_ERR_NO_VARIANT,
                     /* no flag names here: which of them exist is the caller's business (the CLI
                      * adds the ones its command has as a hint) */
                     "no build variant%s%s fits this machine (backend %s)%s%s%s%s%s%s:\n%s"
                     "(name a variant or a backend explicitly)",
                     o->where ? " of " : "", o->where ? o->where : "", be ? be : "unknown",
                     any ? "; " : "", any ? any : "",
                     any ? " fits but is of a family the caller cannot load" : "",
                     any && o->family_note ? " (" : "", any && o->family_note ? o->family_note : "",
                     any && o->family_note ? ")" : "", trace && *trace ? trace : "(no candidates)\n");
    hk_free(trace);
    return rc;
}

HK_API int hk_choose_variant(char **out, const hk_env *env, const char *const *names, size_t count,
                             const hk_choose_options *opts) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_choose_variant: out is NULL");
    *out = NULL;
    hk_choose_options defaults = HK_CHOOSE_OPTIONS_INIT;
    const hk_choose_options *o = opts ? opts : &defaults;
    int rc = hk__check_options_version("hk_choose_options", o->version, HK_CHOOSE_OPTIONS_VERSION);
    if (rc) return rc;
    if (count && !names) return hk__fail(HK_ERR_INVALID_ARG, "hk_choose_variant: names is NULL");
    if (o->variant) return take_named(out, names, count, o);
    if (count == 0)
        return hk__fail(HK_ERR_NO_VARIANT, "%s has no build variants", o->where ? o->where : "the repo");
    if (!env && (rc = hk__env_cached(&env)) != HK_OK) return rc;
    hk_resolution *r = NULL;
    rc = hk_resolve_variants(&r, env, names, count, o->backend);
    if (rc) return rc;
    const char *best = o->families ? hk_resolution_best_of(r, o->families) : hk_resolution_best(r);
    if (!best && o->fallback_families) best = hk_resolution_best_of(r, o->fallback_families);
    if (best) {
        *out = hk__strdup(best);
        rc = *out ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    } else {
        rc = no_fit(r, o);
    }
    hk_resolution_free(r);
    return rc;
}
