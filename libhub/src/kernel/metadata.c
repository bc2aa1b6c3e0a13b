/* metadata.json of a build variant (kernel-hub-format §6). */
#include "kernel/kernel_internal.h"

#include "cache/cache_internal.h" /* hk__kernel_repo_id_valid */
#include "util/text.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HK_METADATA_MAX (1u << 20)
/* A parse-time sanity bound; the tree resolver applies the real fan-out bound (HK_DEP_MAX_FANOUT)
 * so that its error can name the path from the root. */
#define HK_METADATA_MAX_DEPS 4096

static char *dup_str_field(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? hk__strdup(it->valuestring) : NULL;
}

void hk__metadata_free(hk_metadata_owned *md) {
    if (!md) return;
    free((char *)md->pub.name);
    free((char *)md->pub.id);
    free((char *)md->pub.license);
    free((char *)md->pub.backend);
    free((char *)md->pub.upstream);
    free((char *)md->pub.source);
    free(md->kernels_minver);
    free(md->builder_version);
    free(md->builder_commit);
    free(md->source_commit);
    for (size_t i = 0; i < md->num_deps; i++) {
        free(md->deps[i].repo_id);
        free(md->deps[i].revision);
    }
    free(md->deps);
    hk__kstrv_free(md->archs, md->pub.num_archs);
    memset(md, 0, sizeof *md);
}

/* kernel-depends: [{"repo-id", "version"} | {"repo-id", "revision"}] (kernels' KernelDependency:
 * exactly one of the two). */
static int parse_kernel_depends(hk_metadata_owned *md, const cJSON *list, const char *what) {
    if (!list) return HK_OK;
    if (!cJSON_IsArray(list)) return hk__fail(HK_ERR_PARSE, "%s: 'kernel-depends' must be a list", what);
    int n = cJSON_GetArraySize(list);
    if (n == 0) return HK_OK;
    if (n > HK_METADATA_MAX_DEPS)
        return hk__fail(HK_ERR_PARSE, "%s: 'kernel-depends' lists %d kernels (at most %d)", what, n,
                       HK_METADATA_MAX_DEPS);
    md->deps = calloc((size_t)n, sizeof *md->deps);
    if (!md->deps) return hk__fail(HK_ERR_NOMEM, "out of memory");
    const cJSON *d;
    size_t i = 0;
    for (d = list->child; d; d = d->next, i++) {
        const cJSON *repo = cJSON_GetObjectItemCaseSensitive(d, "repo-id");
        const cJSON *ver = cJSON_GetObjectItemCaseSensitive(d, "version");
        const cJSON *rev = cJSON_GetObjectItemCaseSensitive(d, "revision");
        if (!cJSON_IsObject(d))
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu is not an object", what, i);
        /* kernels' KernelDependency is serde deny_unknown_fields: a typo'd key is an error there */
        for (const cJSON *k = d->child; k; k = k->next)
            if (strcmp(k->string, "repo-id") && strcmp(k->string, "version") && strcmp(k->string, "revision"))
                return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu has the unknown key '%.40s' "
                               "(expected repo-id, version, revision)", what, i, k->string);
        if (!cJSON_IsString(repo) || !repo->valuestring[0])
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu has no 'repo-id'", what, i);
        /* names are checked where they enter: nothing below builds a path or URL from an unchecked one */
        if (!hk__kernel_repo_id_valid(repo->valuestring))
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu: '%.80s' is not a kernel repo id (org/name)",
                           what, i, repo->valuestring);
        if (ver && rev)
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu (%s): `version` and `revision` "
                           "are mutually exclusive", what, i, repo->valuestring);
        if (!ver && !rev)
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu (%s): either `version` or "
                           "`revision` must be specified", what, i, repo->valuestring);
        if (ver && (!cJSON_IsNumber(ver) || ver->valuedouble < 0 || ver->valuedouble > 1e9 ||
                    ver->valuedouble != (double)ver->valueint))
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu (%s): 'version' must be a "
                           "non-negative integer", what, i, repo->valuestring);
        if (rev && (!cJSON_IsString(rev) || !rev->valuestring[0]))
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu (%s): 'revision' must be a "
                           "non-empty string", what, i, repo->valuestring);
        if (rev && !hk__revision_valid(rev->valuestring))
            return hk__fail(HK_ERR_PARSE, "%s: kernel-depends entry %zu (%s): '%.80s' is not a revision name", what,
                           i, repo->valuestring, rev->valuestring);
        hk_dep_spec *e = &md->deps[i];
        e->repo_id = hk__strdup(repo->valuestring);
        e->version = ver ? ver->valueint : HK_VERSION_UNSET;
        e->revision = rev ? hk__strdup(rev->valuestring) : NULL;
        md->num_deps = i + 1;
        if (!e->repo_id || (rev && !e->revision)) return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    return HK_OK;
}

/* {"commit" | "sha", "dirty"}: kernels requires both or neither of the git fields. */
static int parse_git(char **commit, int *dirty, const cJSON *o, const char *what, const char *part) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "commit");
    if (!c) c = cJSON_GetObjectItemCaseSensitive(o, "sha");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "dirty");
    if ((c != NULL) != (d != NULL) || (c && !cJSON_IsString(c)) || (d && !cJSON_IsBool(d)))
        return hk__fail(HK_ERR_PARSE, "%s: provenance.%s: git commit and dirty must be specified "
                       "together", what, part);
    if (!c) return HK_OK;
    if (!(*commit = hk__strdup(c->valuestring))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    *dirty = cJSON_IsTrue(d) ? 1 : 0;
    return HK_OK;
}

static int parse_provenance(hk_metadata_owned *md, const cJSON *p, const char *what) {
    md->builder_dirty = md->source_dirty = -1;
    if (!p || cJSON_IsNull(p)) return HK_OK;
    const cJSON *kb = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "kernel-builder") : NULL;
    const cJSON *kv = kb ? cJSON_GetObjectItemCaseSensitive(kb, "version") : NULL;
    if (!cJSON_IsObject(kb) || !cJSON_IsString(kv))
        return hk__fail(HK_ERR_PARSE, "%s: provenance needs kernel-builder.version", what);
    if (!(md->builder_version = hk__strdup(kv->valuestring))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = parse_git(&md->builder_commit, &md->builder_dirty, kb, what, "kernel-builder");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(p, "kernel");
    if (rc == HK_OK && k && !cJSON_IsNull(k)) {
        if (!cJSON_IsObject(k)) return hk__fail(HK_ERR_PARSE, "%s: provenance.kernel must be an object", what);
        rc = parse_git(&md->source_commit, &md->source_dirty, k, what, "kernel");
        if (rc == HK_OK && !md->source_commit)
            rc = hk__fail(HK_ERR_PARSE, "%s: provenance.kernel needs commit and dirty", what);
    }
    return rc;
}

/* The loader names the variant's library <variant>/<id><suffix> (kernel.c) and registers torch ops
 * under it, so the id must be one file name of identifier characters: a "../x" would dlopen a
 * library outside the verified snapshot. kernels 0.17.2 accepts any string (it only names a Python
 * module with it); hubkern refuses what it cannot use safely. */
static bool id_is_safe(const char *id) {
    size_t n = strlen(id);
    if (n == 0 || n > 200 || id[0] == '.' || id[0] == '-') return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)id[i];
        if (!(isalnum(ch) || ch == '_' || ch == '-' || ch == '.')) return false;
    }
    return true;
}

/* ---- what cJSON cannot tell: integer tokens -------------------------------------------------- */
/* cJSON keeps numbers as doubles, so "version": 1.0 reads as 1; kernels (serde, usize) refuses a
 * number token with a fraction or exponent. This walks the (already valid) JSON text and reports
 * whether the top-level "version", or the "version" of an object in the top-level
 * "kernel-depends" list, is written as a non-integer token. */
typedef struct {
    const char *p, *end;
    bool bad;
} jscan;

static void js_ws(jscan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

/* a string token; key_out (when not NULL) gets its raw text when short */
static void js_string(jscan *s, char *key_out, size_t cap) {
    const char *start = ++s->p;
    while (s->p < s->end && *s->p != '"') s->p += (*s->p == '\\') ? 2 : 1;
    size_t n = (size_t)(s->p - start);
    if (key_out) {
        if (n >= cap) n = 0; /* too long to be a key we look for */
        memcpy(key_out, start, n);
        key_out[n] = '\0';
    }
    if (s->p < s->end) s->p++;
}

/* role: 0 other, 1 the top object, 2 the kernel-depends list, 3 an entry of it */
static void js_value(jscan *s, int role, int depth) {
    js_ws(s);
    if (depth > 64) { /* the fields looked at are at depth 3 at most: stop, consuming everything */
        s->p = s->end;
        return;
    }
    if (s->p >= s->end) return;
    char ch = *s->p;
    if (ch == '"') {
        js_string(s, NULL, 0);
    } else if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        s->p++;
        for (;;) {
            js_ws(s);
            if (s->p >= s->end || *s->p == close) break;
            const char *before = s->p; /* every round consumes something, whatever the text */
            int sub = 0;
            bool version_key = false;
            if (ch == '{') {
                char key[32];
                js_string(s, key, sizeof key);
                js_ws(s);
                if (s->p < s->end && *s->p == ':') s->p++;
                version_key = (role == 1 || role == 3) && strcmp(key, "version") == 0;
                if (role == 1 && strcmp(key, "kernel-depends") == 0) sub = 2;
            } else if (role == 2) {
                sub = 3;
            }
            js_ws(s);
            const char *tok = s->p;
            js_value(s, sub, depth + 1);
            if (version_key && tok < s->end && (*tok == '-' || (*tok >= '0' && *tok <= '9')))
                for (const char *q = tok; q < s->p; q++)
                    if (*q == '.' || *q == 'e' || *q == 'E') s->bad = true;
            js_ws(s);
            if (s->p < s->end && *s->p == ',') s->p++;
            if (s->p == before) s->p = s->end;
        }
        if (s->p < s->end) s->p++;
    } else {
        while (s->p < s->end && !strchr(",]} \t\r\n", *s->p)) s->p++;
    }
}

static bool versions_are_integer_tokens(const char *json, size_t len) {
    jscan s = {json, json + len, false};
    js_value(&s, 1, 0);
    return !s.bad;
}

/* kernels' KernelName: [a-z][a-z0-9-]*[a-z0-9], at least two characters. */
static bool kernel_name_valid(const char *n) {
    size_t len = strlen(n);
    if (len < 2 || !(n[0] >= 'a' && n[0] <= 'z')) return false;
    for (size_t i = 1; i < len; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') || n[i] == '-')) return false;
    return n[len - 1] != '-';
}

/* backend.type: kernels' Backend enum (serde: exact, lower case). */
static bool backend_type_known(const char *t) {
    static const char *const known[] = {"cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(t, known[i]) == 0) return true;
    return false;
}

/* Length of a Unicode White_Space character at p (Rust char::is_whitespace, which str::trim uses),
 * 0 when there is none. */
static size_t utf8_space_len(const unsigned char *p, const unsigned char *end) {
    if (p >= end) return 0;
    if (*p == ' ' || (*p >= 0x09 && *p <= 0x0d)) return 1;
    if (end - p >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
    if (end - p >= 3) {
        unsigned cp = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
        if ((p[0] & 0xf0) == 0xe0 && (p[1] & 0xc0) == 0x80 && (p[2] & 0xc0) == 0x80 &&
            (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
             cp == 0x202f || cp == 0x205f || cp == 0x3000))
            return 3;
    }
    return 0;
}

/* The kernels version hubkern answers as (docs/loading.md): a kernel whose kernels-minver is newer
 * is refused at load, as kernels 0.17.2's MinverValidator refuses it. */
#define HK__KERNELS_COMPAT_MAJOR 0
#define HK__KERNELS_COMPAT_MINOR 17
#define HK__KERNELS_COMPAT_PATCH 2

int hk__metadata_check_minver(const hk_metadata_owned *md, const char *variant) {
    uint64_t mv[3];
    if (!md->kernels_minver || hk__kernels_version_parse(mv, md->kernels_minver) != 0) return HK_OK;
    const uint64_t have[3] = {HK__KERNELS_COMPAT_MAJOR, HK__KERNELS_COMPAT_MINOR, HK__KERNELS_COMPAT_PATCH};
    for (int i = 0; i < 3; i++) {
        if (mv[i] < have[i]) return HK_OK;
        if (mv[i] > have[i])
            return hk__fail(HK_ERR_UNSUPPORTED, "kernel '%s' variant '%s' requires kernels>=%llu.%llu.%llu, but "
                            "hubkern implements kernels %d.%d.%d: use a newer hubkern, or an older version "
                            "of the kernel", md->pub.name, variant ? variant : "?", (unsigned long long)mv[0],
                            (unsigned long long)mv[1], (unsigned long long)mv[2], HK__KERNELS_COMPAT_MAJOR,
                            HK__KERNELS_COMPAT_MINOR, HK__KERNELS_COMPAT_PATCH);
    }
    return HK_OK;
}

int hk__kernels_version_parse(uint64_t out[3], const char *text) {
    const unsigned char *b = (const unsigned char *)text, *e = b + strlen(text);
    for (size_t k; (k = utf8_space_len(b, e)) != 0;) b += k;
    for (;;) { /* trailing: step back over whole characters */
        size_t k = 0;
        for (size_t back = 1; back <= 3 && back <= (size_t)(e - b) && !k; back++)
            if (utf8_space_len(e - back, e) == back) k = back;
        if (!k) break;
        e -= k;
    }
    /* kernels' Version::from_str: exactly three '.'-separated u64 (Rust parse: an optional '+') */
    size_t part = 0;
    const unsigned char *p = b;
    for (;;) {
        const unsigned char *q = p;
        if (q < e && *q == '+') q++;
        if (q >= e || *q < '0' || *q > '9' || part >= 3) return -1;
        uint64_t v = 0;
        for (; q < e && *q >= '0' && *q <= '9'; q++) {
            if (v > (UINT64_MAX - (uint64_t)(*q - '0')) / 10) return -1;
            v = v * 10 + (uint64_t)(*q - '0');
        }
        out[part++] = v;
        if (q == e) break;
        if (*q != '.') return -1;
        p = q + 1;
    }
    return part == 3 ? 0 : (int)part;
}

/* One piece: the fields are read in the order kernels 0.17.2 checks them, so that the first error
 * reported is the one kernels reports; the parts with structure of their own (kernel-depends,
 * provenance) are functions. */
int hk__metadata_parse(hk_metadata_owned *md, const char *json, size_t len, const char *what) {
    memset(md, 0, sizeof *md);
    md->builder_dirty = md->source_dirty = -1;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return hk__fail(HK_ERR_PARSE, "%s is not a JSON object; the variant is damaged: re-download it",
                       what);
    }
    int rc = HK_OK;
    const char *missing = NULL;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *license = cJSON_GetObjectItemCaseSensitive(root, "license");
    const cJSON *backend = cJSON_GetObjectItemCaseSensitive(root, "backend");
    const cJSON *btype = cJSON_IsObject(backend) ? cJSON_GetObjectItemCaseSensitive(backend, "type") : NULL;
    if (!cJSON_IsString(name)) missing = "name";
    else if (!cJSON_IsString(id)) missing = "id";
    else if (!cJSON_IsNumber(version)) missing = "version";
    else if (!cJSON_IsString(license)) missing = "license";
    else if (!cJSON_IsString(btype)) missing = "backend.type";
    else if (!cJSON_GetObjectItemCaseSensitive(root, "python-depends")) missing = "python-depends";
    if (missing) {
        rc = hk__fail(HK_ERR_PARSE,
                     "%s lacks the required field '%s' (builds older than kernels 0.14 carry only "
                     "python-depends; use a newer version of the kernel)",
                     what, missing);
        goto done;
    }
    /* the rest of what kernels' serde parse refuses (kernels 0.17.2 Metadata.from_bytes) */
    const cJSON *pydeps = cJSON_GetObjectItemCaseSensitive(root, "python-depends");
    bool pydeps_ok = cJSON_IsArray(pydeps);
    for (const cJSON *it = pydeps_ok ? pydeps->child : NULL; it; it = it->next)
        if (!cJSON_IsString(it)) pydeps_ok = false;
    if (!pydeps_ok) {
        rc = hk__fail(HK_ERR_PARSE, "%s: 'python-depends' must be a list of strings", what);
        goto done;
    }
    if (version->valuedouble < 0 || version->valuedouble > 2147483647.0 ||
        version->valuedouble != (double)version->valueint || !versions_are_integer_tokens(json, len)) {
        rc = hk__fail(HK_ERR_PARSE, "%s: 'version' must be a non-negative integer (written without a "
                      "fraction or exponent)", what);
        goto done;
    }
    if (!kernel_name_valid(name->valuestring)) {
        rc = hk__fail(HK_ERR_PARSE, "%s: invalid kernel name \"%.64s\": a name starts with a lowercase "
                      "letter, holds only lowercase letters, digits and dashes, ends with a letter or digit "
                      "and is at least 2 characters long", what, name->valuestring);
        goto done;
    }
    if (!backend_type_known(btype->valuestring)) {
        rc = hk__fail(HK_ERR_PARSE, "%s: unknown backend.type \"%.40s\" (expected one of cann, cpu, cuda, "
                      "metal, neuron, rocm, tpu, xpu)", what, btype->valuestring);
        goto done;
    }
    if (!id_is_safe(id->valuestring)) {
        rc = hk__fail(HK_ERR_PARSE, "%s: 'id' \"%.64s\" is not a kernel id (letters, digits, '_', '-', '.'; one file "
                      "name, at most 200 characters): the variant cannot be loaded safely", what, id->valuestring);
        goto done;
    }
    md->pub.name = hk__strdup(name->valuestring);
    md->pub.id = hk__strdup(id->valuestring);
    md->pub.version = version->valueint;
    md->pub.license = hk__strdup(license->valuestring);
    md->pub.backend = hk__strdup(btype->valuestring);
    md->pub.upstream = dup_str_field(root, "upstream");
    md->pub.source = dup_str_field(root, "source");
    if (!md->pub.name || !md->pub.id || !md->pub.license || !md->pub.backend) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto done;
    }
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(backend, "archs");
    if (cJSON_IsArray(archs)) {
        int n = cJSON_GetArraySize(archs);
        if (n > 0) {
            md->archs = calloc((size_t)n, sizeof *md->archs);
            if (!md->archs) {
                rc = hk__fail(HK_ERR_NOMEM, "out of memory");
                goto done;
            }
            const cJSON *a;
            cJSON_ArrayForEach(a, archs) {
                if (!cJSON_IsString(a)) continue;
                char *c = hk__strdup(a->valuestring);
                if (!c) {
                    rc = hk__fail(HK_ERR_NOMEM, "out of memory");
                    goto done;
                }
                md->archs[md->pub.num_archs++] = c;
            }
        }
    }
    md->pub.archs = (const char *const *)md->archs;
    const cJSON *minver = cJSON_GetObjectItemCaseSensitive(root, "kernels-minver");
    uint64_t mv[3];
    if (minver && !cJSON_IsNull(minver) &&
        (!cJSON_IsString(minver) || hk__kernels_version_parse(mv, minver->valuestring) != 0)) {
        rc = hk__fail(HK_ERR_PARSE, "%s: 'kernels-minver' \"%.40s\" is not a version of three numbers "
                      "(major.minor.patch)", what, cJSON_IsString(minver) ? minver->valuestring : "?");
        goto done;
    }
    if (cJSON_IsString(minver) && !(md->kernels_minver = hk__strdup(minver->valuestring))) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto done;
    }
    rc = parse_kernel_depends(md, cJSON_GetObjectItemCaseSensitive(root, "kernel-depends"), what);
    if (rc == HK_OK) rc = parse_provenance(md, cJSON_GetObjectItemCaseSensitive(root, "provenance"), what);
done:
    cJSON_Delete(root);
    if (rc) hk__metadata_free(md);
    return rc;
}

int hk__metadata_read(hk_metadata_owned *md, const char *variant_dir) {
    char *path = hk__path_join(variant_dir, "metadata.json");
    if (!path) return hk__fail(HK_ERR_NOMEM, "out of memory");
    char *data = NULL;
    size_t len = 0;
    int rc = hk__read_file(&data, &len, path, HK_METADATA_MAX);
    if (rc == HK_ERR_NOT_FOUND)
        rc = hk__fail(HK_ERR_NOT_FOUND, "%s has no metadata.json: it is not a kernel build variant",
                     variant_dir);
    if (rc == HK_OK) rc = hk__metadata_parse(md, data, len, path);
    free(data);
    free(path);
    return rc;
}

/* ---- public: metadata.json on its own (hubkern info, tools) ------------------------------- */

HK_API size_t hk_kernel_metadata_dependency_count(const hk_kernel_metadata *md) {
    return md ? ((const hk_metadata_owned *)md)->num_deps : 0;
}

HK_API const char *hk_kernel_metadata_kernels_minver(const hk_kernel_metadata *md) {
    return md ? ((const hk_metadata_owned *)md)->kernels_minver : NULL;
}

HK_API int hk_kernel_metadata_provenance(const hk_kernel_metadata *md, const char **builder_version,
                                         const char **builder_commit, int *builder_dirty,
                                         const char **source_commit, int *source_dirty) {
    const hk_metadata_owned *o = (const hk_metadata_owned *)md;
    bool has = o && o->builder_version;
    if (builder_version) *builder_version = has ? o->builder_version : NULL;
    if (builder_commit) *builder_commit = has ? o->builder_commit : NULL;
    if (builder_dirty) *builder_dirty = has ? o->builder_dirty : -1;
    if (source_commit) *source_commit = has ? o->source_commit : NULL;
    if (source_dirty) *source_dirty = has ? o->source_dirty : -1;
    return has ? 1 : 0;
}

HK_API int hk_kernel_metadata_dependency(const hk_kernel_metadata *md, size_t i, const char **repo_id,
                                         int *version, const char **revision) {
    if (!md || i >= ((const hk_metadata_owned *)md)->num_deps)
        return hk__fail(HK_ERR_INVALID_ARG, "hk_kernel_metadata_dependency: no dependency %zu", i);
    const hk_dep_spec *d = &((const hk_metadata_owned *)md)->deps[i];
    if (repo_id) *repo_id = d->repo_id;
    if (version) *version = d->version;
    if (revision) *revision = d->revision;
    return HK_OK;
}

HK_API int hk_kernel_metadata_read(hk_kernel_metadata **out, const char *path) {
    if (!out || !path) return hk__fail(HK_ERR_INVALID_ARG, "hk_kernel_metadata_read: NULL argument");
    *out = NULL;
    hk_metadata_owned *md = calloc(1, sizeof *md);
    if (!md) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc;
    if (hk__is_dir(path)) {
        rc = hk__metadata_read(md, path);
    } else {
        char *data = NULL;
        size_t len = 0;
        rc = hk__read_file(&data, &len, path, HK_METADATA_MAX);
        if (rc == HK_OK) rc = hk__metadata_parse(md, data, len, path);
        free(data);
    }
    if (rc) {
        free(md);
        return rc;
    }
    *out = &md->pub;
    return HK_OK;
}

HK_API void hk_kernel_metadata_free(hk_kernel_metadata *md) {
    if (!md) return;
    hk_metadata_owned *o = (hk_metadata_owned *)md;
    hk__metadata_free(o);
    free(o);
}
