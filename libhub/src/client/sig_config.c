/* Signature configuration of a hub handle: the mode names, policies (API and policy file), which
 * trusted_root.json is used (option, environment, installed, shipped beside the library or program)
 * and the `trust-root` operations (describe, install). */
#define _GNU_SOURCE 1 /* dladdr1, RTLD_DL_LINKMAP */
#include "client/signature.h"

#include "internal.h"
#include "util/vec.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Where the shipped trust root is from the directory of the library (<libdir>) and of a program
 * linking this code statically (<bindir>, the hubkern CLI); CMake computes both from the install
 * dirs. The build tree has the same layout (build/share/hubkern/sigstore beside build/libhub and
 * build/cli), so no source or build path is compiled in. */
#ifndef HK_SHIPPED_SIGSTORE_REL
#define HK_SHIPPED_SIGSTORE_REL "../share/hubkern/sigstore"
#endif
#ifndef HK_SHIPPED_SIGSTORE_REL_BIN
#define HK_SHIPPED_SIGSTORE_REL_BIN "../share/hubkern/sigstore"
#endif

#define TRUST_ROOT_MAX (4u << 20)

#define POLICY_FILE_MAX (1u << 20)

/* ---- modes ------------------------------------------------------------------------------------ */
HK_API int hk_signature_mode_parse(int *out, const char *text) {
    static const char *const names[] = {"default", "require", "warn", "off"};
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_signature_mode_parse: NULL out");
    for (int i = 0; text && i < 4; i++)
        if (strcmp(text, names[i]) == 0) {
            *out = i;
            return HK_OK;
        }
    return hk__fail(HK_ERR_INVALID_ARG, "signature mode '%s' is not one of require, warn, off, default",
                    text ? text : "(null)");
}

HK_API const char *hk_signature_mode_name(int mode) {
    static const char *const names[] = {"default", "require", "warn", "off"};
    return mode >= 0 && mode < 4 ? names[mode] : "?";
}

/* ---- policies --------------------------------------------------------------------------------- */
HK_API int hk_signature_policies_new(hk_signature_policies **out) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_signature_policies_new: NULL out");
    *out = calloc(1, sizeof **out);
    return *out ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

static void policy_clear(hk_sig_policy_own *p) {
    free(p->hub_org);
    free(p->issuer);
    free(p->source_repo);
    for (size_t i = 0; i < p->nsigners; i++) free(p->signers[i]);
    free(p->signers);
}

static void policies_clear(hk_signature_policies *p) {
    for (size_t i = 0; i < p->n; i++) policy_clear(&p->p[i]);
    free(p->p);
    memset(p, 0, sizeof *p);
}

HK_API void hk_signature_policies_free(hk_signature_policies *p) {
    if (!p) return;
    policies_clear(p);
    free(p);
}

HK_API size_t hk_signature_policies_count(const hk_signature_policies *p) { return p ? p->n : 0; }

HK_API int hk_signature_policies_add(hk_signature_policies *p, const char *hub_org, const char *issuer,
                                     const char *source_repository, const char *const *signer_uris,
                                     size_t nsigner_uris) {
    if (!p || !issuer || !*issuer || !source_repository || !*source_repository || !signer_uris || nsigner_uris == 0)
        return hk__fail(HK_ERR_INVALID_ARG, "a signature policy needs an issuer, a source repository and at least "
                                            "one build signer URI");
    if (hub_org && (!*hub_org || strchr(hub_org, '/')))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a Hub org name", hub_org);
    for (size_t i = 0; i < nsigner_uris; i++)
        if (!signer_uris[i] || !*signer_uris[i]) return hk__fail(HK_ERR_INVALID_ARG, "empty build signer URI");
    if (HK_VEC_RESERVE(p->p, p->cap, p->n + 1)) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_sig_policy_own *e = &p->p[p->n];
    memset(e, 0, sizeof *e);
    bool ok = (!hub_org || (e->hub_org = hk__strdup(hub_org))) && (e->issuer = hk__strdup(issuer)) &&
              (e->source_repo = hk__strdup(source_repository)) && (e->signers = calloc(nsigner_uris, sizeof(char *)));
    for (size_t i = 0; ok && i < nsigner_uris; i++, e->nsigners++) ok = (e->signers[i] = hk__strdup(signer_uris[i]));
    if (!ok) {
        policy_clear(e);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    p->n++;
    return HK_OK;
}

static const char *jstr(const cJSON *o, const char *k) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

HK_API int hk_signature_policies_load_file(hk_signature_policies *p, const char *path) {
    if (!p || !path) return hk__fail(HK_ERR_INVALID_ARG, "hk_signature_policies_load_file: NULL argument");
    char *text = NULL;
    int rc = hk__read_file(&text, NULL, path, POLICY_FILE_MAX);
    if (rc) return hk__fail_context("reading the signature policy file");
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "policies");
    if (!cJSON_IsArray(list)) {
        cJSON_Delete(j);
        return hk__fail(HK_ERR_PARSE, "%s: expected {\"policies\": [...]}", path);
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *su = cJSON_GetObjectItemCaseSensitive(e, "build_signer_uris");
        int n = cJSON_IsArray(su) ? cJSON_GetArraySize(su) : 0;
        const char **uris = n > 0 ? calloc((size_t)n, sizeof *uris) : NULL;
        int k = 0;
        const cJSON *u;
        if (uris) cJSON_ArrayForEach(u, su) uris[k++] = cJSON_GetStringValue(u);
        const cJSON *org = cJSON_GetObjectItemCaseSensitive(e, "hub_org");
        if (!cJSON_IsObject(e) || (org && !cJSON_IsString(org) && !cJSON_IsNull(org)) || !uris)
            rc = hk__fail(HK_ERR_PARSE, "%s: policy %d: needs issuer, source_repository, build_signer_uris", path, i);
        else if ((rc = hk_signature_policies_add(p, cJSON_GetStringValue(org), jstr(e, "issuer"),
                                                 jstr(e, "source_repository"), uris, (size_t)n)) != HK_OK &&
                 rc != HK_ERR_NOMEM)
            rc = hk__fail_wrap(HK_ERR_PARSE, "%s: policy %d", path, i);
        free(uris);
        if (rc) break;
        i++;
    }
    cJSON_Delete(j);
    return rc;
}

/* ---- which trusted_root.json ------------------------------------------------------------------ */
static char *installed_path(void) {
    const char *x = hk__getenv("XDG_CONFIG_HOME"), *home = hk__getenv("HOME");
    if (x) return hk__asprintf("%s/hubkern/sigstore/trusted_root.json", x);
    return home ? hk__asprintf("%s/.config/hubkern/sigstore/trusted_root.json", home) : NULL;
}

/* The real path of the object holding this code: libhubkern.so, or the program it is linked into.
 * For the program glibc's dladdr reports argv[0], which is a bare "hubkern" when it was run from
 * PATH (issue 24: such an install never found its shipped root), so the program is read from
 * /proc/self/exe. *is_program: which of the two it is. */
static char *this_object(bool *is_program) {
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1((void *)(uintptr_t)hk_signature_trust_root_path, &info, (void **)&lm, RTLD_DL_LINKMAP))
        return NULL;
    *is_program = !lm || !lm->l_name || !lm->l_name[0];
    if (*is_program) {
        char buf[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n > 0) {
            buf[n] = '\0';
            return realpath(buf, NULL);
        }
        /* no /proc: argv[0] only when it names a path, never a lookup relative to the cwd */
        return info.dli_fname && strchr(info.dli_fname, '/') ? realpath(info.dli_fname, NULL) : NULL;
    }
    return realpath(lm->l_name, NULL);
}

/* <dir of this object>/<rel>/trusted_root.json, rel by what the object is */
static char *shipped_path(const char *rel_lib, const char *rel_bin) {
    bool program = false;
    char *real = this_object(&program);
    if (!real) return NULL;
    char *slash = strrchr(real, '/');
    if (slash) *slash = '\0';
    char *p = hk__asprintf("%s/%s/trusted_root.json", real, program ? rel_bin : rel_lib);
    free(real);
    return p;
}

HK_API int hk_signature_trust_root_path(char **out, const char **out_source, const char *explicit_path) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_signature_trust_root_path: NULL out");
    *out = NULL;
    if (out_source) *out_source = NULL;
    const char *env = hk__getenv("HUBKERN_SIGSTORE_TRUST_ROOT");
    const char *src = explicit_path ? "option" : env ? "HUBKERN_SIGSTORE_TRUST_ROOT" : NULL;
    if (src) { /* named explicitly: used or refused, never silently replaced */
        const char *p = explicit_path ? explicit_path : env;
        if (!hk__path_exists(p))
            return hk__fail(HK_ERR_NOT_FOUND, "the Sigstore trust root %s (%s) does not exist", p, src);
        if (!(*out = hk__strdup(p))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        if (out_source) *out_source = src;
        return HK_OK;
    }
    /* the build tree's libhubkern.so and hubkern sit one level below build/, so ../share also
     * holds when the install dirs are deeper (lib/x86_64-linux-gnu) */
    struct {
        char *path;
        const char *source;
    } c[3] = {{installed_path(), "installed"},
              {shipped_path(HK_SHIPPED_SIGSTORE_REL, HK_SHIPPED_SIGSTORE_REL_BIN), "shipped"},
              {shipped_path("../share/hubkern/sigstore", "../share/hubkern/sigstore"), "shipped"}};
    if (c[1].path && c[2].path && strcmp(c[1].path, c[2].path) == 0) {
        free(c[2].path);
        c[2].path = NULL;
    }
    hk_strbuf looked;
    hk__sb_init(&looked);
    for (int i = 0; i < 3; i++) {
        if (!*out && c[i].path && hk__path_exists(c[i].path)) {
            char *canon = i > 0 ? realpath(c[i].path, NULL) : NULL; /* <bin>/../share: say where */
            if (canon) {
                free(c[i].path);
                c[i].path = canon;
            }
            *out = c[i].path;
            if (out_source) *out_source = c[i].source;
            continue;
        }
        if (c[i].path) hk__sb_printf(&looked, "%s%s", looked.len ? ", " : "", c[i].path);
        free(c[i].path);
    }
    int rc = *out ? HK_OK
                  : hk__fail(HK_ERR_NOT_FOUND,
                             "no Sigstore trust root found (looked at %s): set HUBKERN_SIGSTORE_TRUST_ROOT, run "
                             "`hubkern trust-root install FILE`, or reinstall hubkern (share/hubkern/sigstore)",
                             looked.len && !looked.oom ? looked.data : "nothing: neither HOME nor this object's path is known");
    hk__sb_free(&looked);
    return rc;
}

static void add_validity(cJSON *o, const cJSON *src) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, "validFor");
    if (jstr(v, "start")) cJSON_AddStringToObject(o, "valid_from", jstr(v, "start"));
    if (jstr(v, "end")) cJSON_AddStringToObject(o, "valid_until", jstr(v, "end"));
}

HK_API int hk_signature_trust_root_describe(char **out_json, const char *path) {
    if (!out_json || !path) return hk__fail(HK_ERR_INVALID_ARG, "hk_signature_trust_root_describe: NULL argument");
    *out_json = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = hk__read_file(&text, &len, path, TRUST_ROOT_MAX);
    if (rc) return rc;
    hk_sigstore_trust_root *root = NULL;
    rc = hk__sigstore_trust_root_parse(&root, text, len);
    hk__sigstore_trust_root_free(root);
    cJSON *j = rc ? NULL : cJSON_Parse(text);
    if (rc) {
        free(text);
        return hk__fail_context("%s", path);
    }
    char hex[65];
    hk__sha256_hex(hex, text, len);
    free(text);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "sha256", hex);
    if (jstr(j, "mediaType")) cJSON_AddStringToObject(o, "media_type", jstr(j, "mediaType"));
    static const char *const groups[][3] = {{"certificateAuthorities", "certificate_authorities", "uri"},
                                           {"tlogs", "transparency_logs", "baseUrl"},
                                           {"ctlogs", "ct_logs", "baseUrl"},
                                           {"timestampAuthorities", "timestamp_authorities", "uri"}};
    for (size_t g = 0; g < 4; g++) {
        cJSON *arr = cJSON_AddArrayToObject(o, groups[g][1]);
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, groups[g][0])) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddItemToArray(arr, x);
            if (jstr(e, groups[g][2])) cJSON_AddStringToObject(x, "url", jstr(e, groups[g][2]));
            const cJSON *pk = cJSON_GetObjectItemCaseSensitive(e, "publicKey");
            if (jstr(pk, "keyDetails")) cJSON_AddStringToObject(x, "key", jstr(pk, "keyDetails"));
            add_validity(x, pk ? pk : e);
        }
    }
    cJSON_Delete(j);
    *out_json = cJSON_Print(o);
    cJSON_Delete(o);
    return *out_json ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

HK_API int hk_signature_trust_root_install(char **out_path, const char *file) {
    if (out_path) *out_path = NULL;
    if (!file) return hk__fail(HK_ERR_INVALID_ARG, "hk_signature_trust_root_install: NULL file");
    char *text = NULL;
    size_t len = 0;
    int rc = hk__read_file(&text, &len, file, TRUST_ROOT_MAX);
    if (rc) return rc;
    hk_sigstore_trust_root *root = NULL;
    if ((rc = hk__sigstore_trust_root_parse(&root, text, len))) {
        free(text);
        return hk__fail_context("%s is not a usable trusted_root.json; nothing was installed", file);
    }
    hk__sigstore_trust_root_free(root);
    char *dest = installed_path();
    char *dir = dest ? hk__strdup(dest) : NULL;
    if (!dir) rc = hk__fail(HK_ERR_NOT_FOUND, "neither XDG_CONFIG_HOME nor HOME is set");
    if (rc == HK_OK) {
        *strrchr(dir, '/') = '\0';
        rc = hk__mkdirs(dir, 0777);
    }
    if (rc == HK_OK) rc = hk__write_file_atomic(dest, text, len);
    free(dir);
    free(text);
    if (rc == HK_OK && out_path) {
        *out_path = dest;
        dest = NULL;
    }
    free(dest);
    return rc;
}

/* ---- the handle's configuration --------------------------------------------------------------- */
int hk__sig_config_new(hk_sig_config **out, const hk_hub_options *opts) {
    *out = NULL;
    hk_sig_config *c = calloc(1, sizeof *c);
    if (!c) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = HK_OK;
    const char *m = hk__getenv("HUBKERN_SIGNATURE");
    if (m && (rc = hk_signature_mode_parse(&c->env_mode, m))) hk__fail_context("HUBKERN_SIGNATURE");
    /* the signature fields are part of version 2 of hk_hub_options: a version-1 caller has none */
    const int v2 = opts->version >= 2;
    const char *root_opt = v2 ? opts->sigstore_trust_root : NULL, *file_opt = v2 ? opts->signature_policy_file : NULL;
    if (rc == HK_OK && root_opt && !(c->trust_root_option = hk__strdup(root_opt)))
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    const hk_signature_policies *api = v2 ? opts->signature_policies : NULL;
    for (size_t i = 0; rc == HK_OK && api && i < api->n; i++)
        rc = hk_signature_policies_add(&c->extra, api->p[i].hub_org, api->p[i].issuer, api->p[i].source_repo,
                                       (const char *const *)api->p[i].signers, api->p[i].nsigners);
    const char *file = file_opt ? file_opt : hk__getenv("HUBKERN_SIGNATURE_POLICIES");
    if (rc == HK_OK && file) rc = hk_signature_policies_load_file(&c->extra, file);
    if (rc) {
        hk__sig_config_free(c);
        return rc;
    }
    *out = c;
    return HK_OK;
}

void hk__sig_config_free(hk_sig_config *c) {
    if (!c) return;
    free(c->trust_root_option);
    free(c->trust_root_path);
    free(c->trust_root_text);
    hk__sigstore_trust_root_free(c->root);
    policies_clear(&c->extra);
    free(c);
}

int hk__sig_config_root_bytes(hk_sig_config *c) {
    if (c->trust_root_text) return HK_OK;
    int rc = c->trust_root_path ? HK_OK
                                : hk_signature_trust_root_path(&c->trust_root_path, &c->trust_root_source, c->trust_root_option);
    if (rc == HK_OK) rc = hk__read_file(&c->trust_root_text, &c->trust_root_len, c->trust_root_path, TRUST_ROOT_MAX);
    if (rc) return rc;
    hk__sha256_hex(c->trust_root_sha, c->trust_root_text, c->trust_root_len);
    return HK_OK;
}

int hk__sig_config_root(const hk_sigstore_trust_root **out, hk_sig_config *c) {
    *out = NULL;
    int rc = hk__sig_config_root_bytes(c);
    if (rc == HK_OK && !c->root && (rc = hk__sigstore_trust_root_parse(&c->root, c->trust_root_text, c->trust_root_len)))
        hk__fail_context("Sigstore trust root %s", c->trust_root_path);
    *out = c->root;
    return rc;
}

/* ---- policies of a repo ----------------------------------------------------------------------- */
static const char k_default_org[] = "kernels-community";

/* The Hub treats repo ids case-insensitively (Kernels-Community/x is kernels-community/x), so a
 * policy's org must cover every spelling of it. */
static bool org_is(const char *repo_id, const char *org) {
    size_t n = strlen(org);
    return strncasecmp(repo_id, org, n) == 0 && repo_id[n] == '/';
}

int hk__sig_policies_for(hk_sigstore_policy **out, size_t *n, bool *covered, char fp[65], const hk_sig_config *c,
                         const char *repo_id) {
    *out = NULL;
    *n = 0;
    *covered = org_is(repo_id, k_default_org);
    for (size_t i = 0; i < c->extra.n; i++)
        if (c->extra.p[i].hub_org && org_is(repo_id, c->extra.p[i].hub_org)) *covered = true;
    hk_sigstore_policy *v = calloc(c->extra.n + 1, sizeof *v);
    if (!v) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_strbuf sb;
    hk__sb_init(&sb);
    if (!*covered || org_is(repo_id, k_default_org)) v[(*n)++] = *hk__sigstore_default_policy();
    for (size_t i = 0; i < c->extra.n; i++) {
        const hk_sig_policy_own *p = &c->extra.p[i];
        if (*covered && !(p->hub_org && org_is(repo_id, p->hub_org))) continue;
        hk_sigstore_policy *q = &v[(*n)++];
        memset(q, 0, sizeof *q);
        q->issuer = p->issuer;
        q->issuer_exts = HK_SIGSTORE_ISSUER_V1 | HK_SIGSTORE_ISSUER_V2; /* as kernels' GitHubWorkflowPolicy */
        q->source_repo = p->source_repo;
        q->signer_uris = (const char *const *)p->signers;
        q->nsigner_uris = p->nsigners;
    }
    for (size_t i = 0; i < *n; i++) {
        hk__sb_printf(&sb, "%s\n%u\n%s\n%s\n", v[i].issuer ? v[i].issuer : "", v[i].issuer_exts, v[i].san ? v[i].san : "",
                      v[i].source_repo ? v[i].source_repo : "");
        for (size_t k = 0; k < v[i].nsigner_uris; k++) hk__sb_printf(&sb, "%s\n", v[i].signer_uris[k]);
        hk__sb_append(&sb, "\n");
    }
    if (sb.oom) {
        hk__sb_free(&sb);
        free(v);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    hk__sha256_hex(fp, sb.data ? sb.data : "", sb.len);
    hk__sb_free(&sb);
    *out = v;
    return HK_OK;
}

int hk__sig_effective_mode(const hk_sig_config *c, int mode, const char *repo_id) {
    if (mode >= HK_SIGNATURE_REQUIRE && mode <= HK_SIGNATURE_OFF) return mode;
    if (c->env_mode != HK_SIGNATURE_DEFAULT) return c->env_mode;
    bool covered = org_is(repo_id, k_default_org);
    for (size_t i = 0; i < c->extra.n; i++)
        if (c->extra.p[i].hub_org && org_is(repo_id, c->extra.p[i].hub_org)) covered = true;
    return covered ? HK_SIGNATURE_REQUIRE : HK_SIGNATURE_WARN;
}

int hk__sig_request_mode(const hk_sig_config *c, int requested, int floor, const char *repo_id) {
    if (requested >= HK_SIGNATURE_REQUIRE && requested <= HK_SIGNATURE_OFF) return requested;
    int here = hk__sig_effective_mode(c, HK_SIGNATURE_DEFAULT, repo_id);
    /* REQUIRE (1) < WARN (2) < OFF (3): the smaller is the stricter */
    return floor >= HK_SIGNATURE_REQUIRE && floor < here ? floor : here;
}
