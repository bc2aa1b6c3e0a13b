/* Tree listings (GET /api/kernels/<repo>/tree/<commit>/<path>, Link-paginated) and the variant
 * names they or a local snapshot hold. */
#include "cache/cache_internal.h"
#include "client/client.h"
#include "client/memo.h"
#include "util/strmap.h"
#include "variant/variant_internal.h"
#include "util/vec.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- tree listing --------------------------------------------------------------------------- */

/* The longest next-page URL followed. A relative Link that keeps growing the path ("x/..." against
 * ".../x/...") escapes the loop check (every page URL is new) and made the client hold and send
 * ever longer URLs, quadratic in the page count (found by tests/fuzz/fuzz_hub_json). */
#define HK_LINK_URL_MAX 8192

static void tree_ref_obj(const void *t) { hk__client_tree_ref(t); }
static void tree_unref_obj(const void *t) { hk__client_tree_unref(t); }
/* A listing as the memo holds it (client/memo.h): by reference, never copied. */
static const hk__memo_type k_tree_type = {tree_ref_obj, tree_unref_obj};

bool hk__memo_get_tree(hk_share *m, const tree **out, const char *key, long window_ms) {
    *out = hk__memo_get_obj(m, key, window_ms, &k_tree_type);
    return *out != NULL;
}

void hk__memo_put_tree(hk_share *m, const char *key, const tree *t) {
    hk__memo_put_obj(m, key, t, t->n, &k_tree_type);
}

/* A size from a listing: a JSON number that is a non-negative integer a double holds exactly
 * (<= 2^53). Anything else (1e30, -1, 1.5) is a protocol error, not a cast with undefined result. */
static int entry_size(uint64_t *out, const cJSON *n, const char *what, const char *path, const char *key) {
    if (!hk__byte_count(out, n->valuedouble))
        return hk__fail(HK_ERR_PROTOCOL, "%s: the listing gives %s a %s of %.17g, which is not a byte count", what, path,
                       key, n->valuedouble);
    return HK_OK;
}

/* "\u0000" anywhere in a JSON text (a literal "\\u0000" counts too: no listed name holds a '\\'). */
static bool has_nul_escape(const char *b, size_t n) {
    for (size_t i = 0; i + 6 <= n; i++)
        if (b[i] == '\\' && memcmp(b + i + 1, "u0000", 5) == 0) return true;
    return false;
}

/* The pages of one listing already requested (a Link back to one of them is a loop). */
typedef struct visited {
    char **urls;
    size_t n, cap;
    hk_strmap index;
} visited;

static void visited_free(visited *v) {
    for (size_t i = 0; i < v->n; i++) free(v->urls[i]);
    free(v->urls);
    hk__strmap_free(&v->index);
}

/* Record url (taken over: freed with v). */
static int visited_add(visited *v, char *url) {
    if (HK_VEC_RESERVE(v->urls, v->cap, v->n + 1) != HK_OK) {
        free(url);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    v->urls[v->n] = url;
    int rc = hk__strmap_put(&v->index, url, v->n);
    v->n++;
    return rc;
}

/* A listed path where a listing enters (issue: the audit of names from outside): the one file-path
 * rule (hk__repo_path_valid: no "..", '\\', control bytes, components over 255 bytes, invalid or
 * overlong UTF-8) and one entry per path over all pages: a second entry for a path (another hash,
 * or a name a NUL cut short in a C string) would leave which blob is linked to the order of
 * links (the caller records p once the listing holds its copy). Every listing is made here, so
 * callers never check its names again. */
static int check_entry_path(const hk_strmap *paths, const char *p, const char *what) {
    if (!hk__repo_path_valid(p)) /* the message shows raw bytes as \xNN (util/error.c) */
        return hk__fail(HK_ERR_UNSAFE_PATH, "%s: refusing file name '%s' from the server's listing: it is no repo "
                        "path (a '..', '\\' or control byte, a component over 255 bytes, or invalid UTF-8)", what, p);
    if (hk__strmap_get(paths, p, NULL))
        return hk__fail(HK_ERR_PROTOCOL, "%s: the listing names %s twice (a lying or broken server)", what, p);
    return HK_OK;
}

/* The entries of one page of a listing (a JSON list) appended to out, within the hub's bound on
 * entries; paths checked (check_entry_path) and sizes range-checked (entry_size). */
static int add_page_entries(tree *out, hk_strmap *paths, const cJSON *j, const hk_hub *hub, const char *what) {
    int rc = HK_OK;
    cJSON *it;
    cJSON_ArrayForEach(it, j) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "type"));
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "path"));
        if (!type || !p) {
            rc = hk__fail(HK_ERR_PROTOCOL, "%s: an entry lacks type or path", what);
            break;
        }
        if ((uint64_t)out->n >= hub->max_listing_entries) {
            rc = hk__fail(HK_ERR_PROTOCOL,
                         "%s: the listing has more than %" PRIu64 " entries (the bound set by "
                         "HUBKERN_MAX_LISTING_ENTRIES / hk_hub_options.max_listing_entries)",
                         what, hub->max_listing_entries);
            break;
        }
        if ((rc = check_entry_path(paths, p, what))) break;
        bool dir = strcmp(type, "directory") == 0;
        uint64_t size = 0;
        cJSON *sz = cJSON_GetObjectItemCaseSensitive(it, "size");
        if (cJSON_IsNumber(sz) && (rc = entry_size(&size, sz, what, p, "size"))) break;
        const char *oid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "oid")), *lo = NULL;
        cJSON *lfs = cJSON_GetObjectItemCaseSensitive(it, "lfs");
        if (cJSON_IsObject(lfs)) {
            lo = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lfs, "oid"));
            if (!lo) lo = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lfs, "sha256"));
            cJSON *ls = cJSON_GetObjectItemCaseSensitive(lfs, "size");
            if (cJSON_IsNumber(ls) && (rc = entry_size(&size, ls, what, p, "lfs.size"))) break;
        }
        if ((rc = hk__client_tree_add(out, p, dir, size, oid, lo))) break;
        /* the map borrows the listing's own copy: the page's cJSON is freed before the next one */
        if ((rc = hk__strmap_put(paths, out->e[out->n - 1].path, 0))) break;
    }
    return rc;
}

int hk__client_list_tree(tree **out_tree, hk_hub *hub, const char *repo_id, const char *commit, const char *path,
                         bool recursive) {
    *out_tree = NULL;
    tree *out;
    int rc = hk__client_tree_new(&out);
    if (rc) return rc;
    /* '/' kept in the path: the Hub takes both forms, some mirrors only this one */
    char *epath = hk__pct_encode(path, true);
    char *url = epath ? hk__asprintf("%s/api/kernels/%s/tree/%s%s%s?recursive=%s&expand=false", hub->endpoint, repo_id,
                                    commit, *path ? "/" : "", epath, recursive ? "true" : "false")
                      : NULL;
    free(epath);
    char *what = *path ? hk__asprintf("listing %s/ of %s at %s", path, repo_id, commit)
                       : hk__asprintf("listing the files of %s at %s", repo_id, commit);
    rc = url && what ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    visited seen;
    memset(&seen, 0, sizeof seen);
    hk__strmap_init(&seen.index);
    hk_strmap paths; /* keys: the entries' own paths */
    hk__strmap_init(&paths);
    uint64_t total_bytes = 0;
    for (int page = 0; rc == HK_OK && url; page++) {
        if (page > 10000) {
            rc = hk__fail(HK_ERR_PROTOCOL, "%s: too many pages", what);
            break;
        }
        char *seen_url = hk__strdup(url);
        if (!seen_url || (rc = visited_add(&seen, seen_url))) {
            rc = rc ? rc : hk__fail(HK_ERR_NOMEM, "out of memory");
            break;
        }
        hk_http_resp r;
        rc = hk__http_get(&r, hub, url, HK_API_MAX);
        if (rc) {
            hk__fail_context("%s", what);
            hk__http_resp_free(&r);
            break;
        }
        if (r.status != 200) {
            rc = hk__http_fail(&r, what);
            hk__http_resp_free(&r);
            break;
        }
        total_bytes += r.body.len;
        if (total_bytes > hub->max_listing_bytes) {
            rc = hk__fail(HK_ERR_PROTOCOL,
                         "%s: the listing is larger than %" PRIu64 " bytes over %d page%s (the bound set by "
                         "HUBKERN_MAX_LISTING_BYTES / hk_hub_options.max_listing_bytes)",
                         what, hub->max_listing_bytes, page + 1, page ? "s" : "");
            hk__http_resp_free(&r);
            break;
        }
        /* cJSON cuts a string at an escaped NUL: "x.py\u0000y" would be listed as "x.py" */
        bool nul = r.body.data && has_nul_escape(r.body.data, r.body.len);
        cJSON *j = nul ? NULL : cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
        char *next = hk__link_next(r.h.link);
        char *base = r.url ? hk__strdup(r.url) : hk__strdup(url);
        hk__http_resp_free(&r);
        free(url);
        url = NULL;
        if (!base) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            cJSON_Delete(j);
            free(next);
            break;
        }
        if (!cJSON_IsArray(j)) {
            rc = nul ? hk__fail(HK_ERR_PROTOCOL, "%s: the answer has a NUL (\\u0000) in a string, which no name holds", what)
                     : hk__fail(HK_ERR_PROTOCOL, "%s: the answer is not a JSON list", what);
            cJSON_Delete(j);
            free(next);
            free(base);
            break;
        }
        rc = add_page_entries(out, &paths, j, hub, what);
        cJSON_Delete(j);
        if (rc == HK_OK && next) {
            /* raw bytes >= 0x80, spaces, quotes ... in the header never reach the request line */
            char *safe = hk__url_escape_unsafe(next);
            char *abs = safe ? hk__url_resolve(base, safe) : NULL;
            url = abs && !hk__url_same_origin(abs, hub->endpoint) ? hk__url_rebase(abs, hub->endpoint) : hk__strdup(abs);
            free(abs);
            free(safe);
            if (!url) rc = hk__fail(HK_ERR_PROTOCOL, "%s: bad Link header '%s'", what, next);
            else if (strlen(url) > HK_LINK_URL_MAX)
                rc = hk__fail(HK_ERR_PROTOCOL, "%s: the Link header of page %d leads to a URL of %zu bytes (at most %d)",
                             what, page + 1, strlen(url), HK_LINK_URL_MAX);
            else if (hk__strmap_get(&seen.index, url, NULL))
                rc = hk__fail(HK_ERR_PROTOCOL, "%s: the Link header of page %d points back at a page already listed "
                             "(%s): a pagination loop", what, page + 1, url);
        }
        free(next);
        free(base);
    }
    free(url);
    free(what);
    visited_free(&seen);
    hk__strmap_free(&paths);
    if (rc) {
        hk__client_tree_unref(out);
        return rc;
    }
    hk__client_tree_trim(out); /* the entry array's doubling slack given back */
    *out_tree = out;
    return HK_OK;
}

/* ---- the listing of a commit ------------------------------------------------------------------ */

int hk__client_commit_tree(const tree **out, hk_hub *hub, const char *repo_id, const char *commit) {
    /* a commit never changes: its listing is reused for as long as the memo keeps it */
    char *key = hk__memo_on(hub) ? hk__memo_key(hub, "tree", repo_id, commit) : NULL;
    if (key && hk__memo_get_tree(hub->share, out, key, hub->freshness_ms > 0 ? -1 : 0)) {
        free(key);
        return HK_OK;
    }
    tree *t;
    int rc = hk__client_list_tree(&t, hub, repo_id, commit, "", true); /* its names checked there */
    if (rc == HK_OK && key) hk__memo_put_tree(hub->share, key, t); /* shared, not copied */
    free(key);
    *out = rc == HK_OK ? t : NULL;
    return rc;
}

const tree_entry *hk__client_tree_find(const tree *t, const char *path) {
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->e[i].path, path) == 0) return &t->e[i];
    return NULL;
}

bool hk__client_commit_tree_known(const tree **out, hk_hub *hub, const char *repo_id, const char *commit) {
    *out = NULL;
    char *key = hk__memo_on(hub) ? hk__memo_key(hub, "tree", repo_id, commit) : NULL;
    bool hit = key && hk__memo_get_tree(hub->share, out, key, hub->freshness_ms > 0 ? -1 : 0);
    free(key);
    return hit;
}

/* Variant names of a recursive listing: the folders build/<name>, and the <name> of files
 * build/<name>/... (a git folder always holds a file, so both give the same set; a listing that
 * leaves folders out still names them). Sorted, each once. */
int hk__client_variants_from_commit_tree(char ***out, size_t *out_n, const tree *t) {
    *out = NULL;
    *out_n = 0;
    char **v = calloc(t->n + 1, sizeof *v);
    if (!v) return hk__fail(HK_ERR_NOMEM, "out of memory");
    size_t n = 0;
    hk_strmap seen;
    hk__strmap_init(&seen);
    int rc = HK_OK;
    for (size_t i = 0; rc == HK_OK && i < t->n; i++) {
        const char *p = t->e[i].path;
        if (!hk__str_starts_with(p, "build/")) continue;
        const char *name = p + 6;
        const char *slash = strchr(name, '/');
        if (!slash && !t->e[i].dir) continue; /* a file directly in build/ is no variant */
        char *nm = slash ? hk__strndup(name, (size_t)(slash - name)) : hk__strdup(name);
        if (!nm) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            break;
        }
        if (!*nm || !hk__path_is_safe_relative(nm)) {
            rc = hk__fail(HK_ERR_UNSAFE_PATH, "refusing unsafe variant name 'build/%s' from the server", nm);
            free(nm);
            break;
        }
        /* kernels get_variants: a folder whose name does not parse as a variant (build/docs) is
         * skipped, not an error */
        hk_variant pv;
        if (hk__strmap_get(&seen, nm, NULL) || hk__variant_parse_into(&pv, nm) != HK_OK) {
            hk_clear_error();
            free(nm);
            continue;
        }
        v[n] = nm;
        rc = hk__strmap_put(&seen, v[n], n);
        n++;
    }
    hk__strmap_free(&seen);
    if (rc) {
        hk_hub_strv_free(v);
        return rc;
    }
    qsort(v, n, sizeof *v, hk__client_cmp_str);
    *out = v;
    *out_n = n;
    return HK_OK;
}

int hk__client_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int hk__client_list_variants_local(char ***out, size_t *out_n, const char *snapshot) {
    char *build = hk__path_join(snapshot, "build");
    if (!build) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = hk__list_subdirs(out, out_n, build);
    free(build);
    if (rc == HK_ERR_NOT_FOUND)
        return hk__fail(HK_ERR_OFFLINE, "offline: %s has no build/ directory (the kernel was not pulled here)", snapshot);
    if (rc) return rc;
    /* kernels get_variants_local: names that are not variants are skipped */
    size_t k = 0;
    for (size_t i = 0; i < *out_n; i++) {
        hk_variant pv;
        if (hk__variant_parse_into(&pv, (*out)[i]) == HK_OK) (*out)[k++] = (*out)[i];
        else free((*out)[i]);
    }
    hk_clear_error();
    (*out)[k] = NULL;
    *out_n = k;
    qsort(*out, *out_n, sizeof **out, hk__client_cmp_str);
    return HK_OK;
}

int hk_hub_list_variants(char ***out, size_t *out_n, hk_hub *hub, const char *repo_id, const char *commit) {
    *out = NULL;
    *out_n = 0;
    int rc = hk__client_check_repo_id(repo_id);
    if (rc) return rc;
    if (!commit || !hk__is_commit_id(commit)) return hk__fail(HK_ERR_INVALID_ARG, "a commit id is required");
    if (hub->offline) {
        char *dir = hk__client_local_repo_dir(hub, repo_id, commit);
        char *snap = dir ? hk__cache_snapshot_path(dir, commit, NULL) : NULL;
        rc = snap ? hk__client_list_variants_local(out, out_n, snap) : hk_last_error_code();
        free(dir);
        free(snap);
        return rc;
    }
    /* one recursive listing of the commit answers this, kernel-status.toml and the pull (memo.c) */
    const tree *t;
    if ((rc = hk__client_commit_tree(&t, hub, repo_id, commit))) return rc;
    rc = hk__client_variants_from_commit_tree(out, out_n, t);
    hk__client_tree_unref(t);
    return rc;
}
