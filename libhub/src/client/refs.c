/* Versions and revisions: the refs API (branches vN and tags), the revision endpoint, and the same
 * answers offline from refs/ of the cache (hub-protocol.md §13, kernel-hub-format.md §2). */
#include "cache/cache_internal.h"
#include "util/vec.h"
#include "client/client.h"
#include "client/memo.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON API helpers --------------------------------------------------------------------- */
static int api_json(cJSON **out, hk_hub *hub, const char *url, const char *what, long *out_status) {
    *out = NULL;
    hk_http_resp r;
    int rc = hk__http_get(&r, hub, url, HK_API_MAX);
    if (rc) {
        hk__http_resp_free(&r);
        return hk__fail_context("%s", what);
    }
    if (out_status) *out_status = r.status;
    if (r.status != 200) {
        rc = hk__http_fail(&r, what);
        hk__http_resp_free(&r);
        return rc;
    }
    *out = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
    hk__http_resp_free(&r);
    if (!*out) return hk__fail(HK_ERR_PROTOCOL, "%s: the server's answer is not JSON", what);
    return HK_OK;
}

/* refs → branches: name/commit pairs. */
typedef struct ref_list {
    char **names;
    char **commits;
    bool *is_tag;
    size_t n;
} ref_list;

static void ref_list_free(ref_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->names[i]);
        free(l->commits[i]);
    }
    free(l->names);
    free(l->commits);
    free(l->is_tag);
    memset(l, 0, sizeof *l);
}

/* The refs of repo_id: the answer of the last freshness window (client/memo.c), else asked. A
 * hubkern mirror's "X-Kernel-Publisher-Trusted: true" on it is recorded as the org's trust answer
 * (client/trust.c). */
static int fetch_refs(ref_list *out, hk_hub *hub, const char *repo_id) {
    memset(out, 0, sizeof *out);
    char *key = hk__memo_key(hub, "refs", repo_id, NULL);
    char *body = hk__memo_get(hub->share, key, hub->freshness_ms);
    cJSON *j = body ? cJSON_Parse(body) : NULL;
    free(body);
    if (!j) {
        char *url = hk__asprintf("%s/api/kernels/%s/refs", hub->endpoint, repo_id);
        char *what = hk__asprintf("listing the refs of %s", repo_id);
        if (!url || !what) {
            free(url);
            free(what);
            free(key);
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
        hk_http_resp r;
        int rc = hk__http_get(&r, hub, url, HK_API_MAX);
        free(url);
        if (rc) hk__fail_context("%s", what);
        else if (r.status != 200) rc = hk__http_fail(&r, what);
        else if (!(j = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len)))
            rc = hk__fail(HK_ERR_PROTOCOL, "%s: the server's answer is not JSON", what);
        if (rc == HK_ERR_NOT_FOUND)
            rc = hk__fail(HK_ERR_REPO_NOT_FOUND, "%s: no kernel repo %s on %s (404)", what, repo_id, hub->endpoint);
        if (rc == HK_OK && r.h.x_publisher_trusted && strcmp(r.h.x_publisher_trusted, "true") == 0) {
            char org[128];
            snprintf(org, sizeof org, "%.*s", (int)(strchr(repo_id, '/') - repo_id), repo_id);
            hk__client_trust_remember(hub, org);
        }
        if (rc == HK_OK && hk__memo_on(hub)) {
            char *copy = hk__strndup(r.body.data ? r.body.data : "", r.body.len);
            hk__memo_put(hub->share, key, copy);
            free(copy);
        }
        free(what);
        hk__http_resp_free(&r);
        if (rc) {
            free(key);
            return rc;
        }
    }
    free(key);
    const char *keys[] = {"branches", "tags"};
    size_t cap = 0;
    for (int k = 0; k < 2; k++) cap += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, keys[k]));
    out->names = calloc(cap + 1, sizeof(char *));
    out->commits = calloc(cap + 1, sizeof(char *));
    out->is_tag = calloc(cap + 1, sizeof(bool));
    if (!out->names || !out->commits || !out->is_tag) {
        cJSON_Delete(j);
        ref_list_free(out);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < 2; k++) {
        cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, keys[k])) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
            const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "targetCommit"));
            if (!name || !c || !hk__is_commit_id(c)) continue;
            out->names[out->n] = hk__strdup(name);
            out->commits[out->n] = hk__strdup(c);
            out->is_tag[out->n] = k == 1;
            out->n++;
            if (!out->names[out->n - 1] || !out->commits[out->n - 1]) {
                cJSON_Delete(j);
                ref_list_free(out);
                return hk__fail(HK_ERR_NOMEM, "out of memory");
            }
        }
    }
    cJSON_Delete(j);
    return HK_OK;
}

static int parse_vnum(const char *name) {
    if (name[0] != 'v' || !name[1]) return -1;
    long v = 0;
    for (const char *p = name + 1; *p; p++) {
        if (*p < '0' || *p > '9' || v > 1000000) return -1;
        v = v * 10 + (*p - '0');
    }
    return (int)v;
}

/* One vN branch; hk_hub_version_list holds them sorted by number. */
typedef struct version_entry {
    int version;
    char commit[65];
} version_entry;

struct hk_hub_version_list {
    version_entry *v;
    size_t n;
};

size_t hk_hub_version_list_count(const hk_hub_version_list *l) { return l ? l->n : 0; }
int hk_hub_version_list_number(const hk_hub_version_list *l, size_t i) { return l && i < l->n ? l->v[i].version : -1; }
const char *hk_hub_version_list_commit(const hk_hub_version_list *l, size_t i) {
    return l && i < l->n ? l->v[i].commit : NULL;
}
void hk_hub_version_list_free(hk_hub_version_list *l) {
    if (!l) return;
    free(l->v);
    free(l);
}

static int cmp_version(const void *a, const void *b) {
    const version_entry *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

/* repo dir holding refs for repo_id: kernels--, else legacy models-- if it has refs/<rev>. */
char *hk__client_local_repo_dir(const hk_hub *hub, const char *repo_id, const char *rev) {
    char *k = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
    if (!rev || !k) return k;
    char commit[65];
    if (hk__is_commit_id(rev) || hk__cache_read_ref(commit, k, rev) == HK_OK) return k;
    char *m = hk_cache_repo_dir(hub->cache_root, HK_REPO_MODEL, repo_id);
    hk_clear_error();
    if (m && hk__cache_read_ref(commit, m, rev) == HK_OK) {
        free(k);
        return m;
    }
    hk_clear_error();
    free(m);
    return k;
}

static int list_versions_offline(version_entry **out, size_t *out_n, hk_hub *hub, const char *repo_id) {
    version_entry *v = NULL;
    size_t n = 0, cap = 0;
    const hk_repo_type types[] = {HK_REPO_KERNEL, HK_REPO_MODEL};
    for (int t = 0; t < 2; t++) {
        char *dir = hk_cache_repo_dir(hub->cache_root, types[t], repo_id);
        char *refs = dir ? hk__cache_repo_subdir(dir, "refs") : NULL;
        DIR *d = refs ? opendir(refs) : NULL;
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            int num = parse_vnum(de->d_name);
            if (num < 0) continue;
            bool dup = false;
            for (size_t i = 0; i < n; i++) dup |= v[i].version == num;
            char commit[65];
            if (dup || hk__cache_read_ref(commit, dir, de->d_name) != HK_OK) continue;
            if (HK_VEC_RESERVE(v, cap, n + 1) != HK_OK) break;
            v[n].version = num;
            memcpy(v[n].commit, commit, sizeof commit);
            n++;
        }
        if (d) closedir(d);
        free(refs);
        free(dir);
    }
    hk_clear_error();
    if (n > 1) qsort(v, n, sizeof *v, cmp_version);
    *out = v;
    *out_n = n;
    return HK_OK;
}

static int list_versions(version_entry **out, size_t *out_n, hk_hub *hub, const char *repo_id) {
    *out = NULL;
    *out_n = 0;
    int rc = hk__client_check_repo_id(repo_id);
    if (rc) return rc;
    if (hub->offline) return list_versions_offline(out, out_n, hub, repo_id);
    ref_list refs;
    if ((rc = fetch_refs(&refs, hub, repo_id))) return rc;
    version_entry *v = calloc(refs.n + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < refs.n; i++) {
        int num = refs.is_tag[i] ? -1 : parse_vnum(refs.names[i]);
        if (num < 0) continue;
        v[n].version = num;
        snprintf(v[n].commit, sizeof v[n].commit, "%s", refs.commits[i]);
        n++;
    }
    ref_list_free(&refs);
    if (!v) return hk__fail(HK_ERR_NOMEM, "out of memory");
    qsort(v, n, sizeof *v, cmp_version);
    *out = v;
    *out_n = n;
    return HK_OK;
}

static int version_not_found(const version_entry *v, size_t n, const char *repo_id, int version, bool offline) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < n; i++) hk__sb_printf(&sb, "%s%d", i ? ", " : "", v[i].version);
    int rc = offline ? hk__fail(HK_ERR_OFFLINE,
                               "offline: version %d of %s is not in the cache (no refs/v%d; cached versions: %s); pull it "
                               "while online first or pass --revision <commit>",
                               version, repo_id, version, sb.data && sb.len ? sb.data : "none")
                     : hk__fail(HK_ERR_VERSION_NOT_FOUND, "Version %d of %s not found, available versions: %s", version,
                               repo_id, sb.data && sb.len ? sb.data : "none");
    hk__sb_free(&sb);
    return rc;
}

/* Offline: the cache's refs/<vN or revision>, else an error saying what the cache holds. */
static int resolve_offline(char out_commit[65], hk_hub *hub, const char *repo_id, int version, const char *revision) {
    int rc;
    char label[32];
    const char *rev = revision;
    if (!rev) {
        snprintf(label, sizeof label, "v%d", version);
        rev = label;
    }
    char *dir = hk__client_local_repo_dir(hub, repo_id, rev);
    if (!dir) return hk__fail(HK_ERR_NOMEM, "out of memory");
    rc = hk__cache_read_ref(out_commit, dir, rev);
    free(dir);
    if (rc == HK_OK) return HK_OK;
    if (version >= 0) {
        version_entry *v = NULL;
        size_t n = 0;
        list_versions_offline(&v, &n, hub, repo_id);
        rc = version_not_found(v, n, repo_id, version, true);
        free(v);
        return rc;
    }
    return hk__fail(HK_ERR_OFFLINE,
                   "offline: revision '%s' of %s is not in the cache (no refs/%s under %s); pull it while online first",
                   revision, repo_id, revision, hub->cache_root);
}

/* A revision that is no branch or tag name (a short sha, refs/pr/N): the revision endpoint, its
 * answer kept in the hub's share for the freshness window. */
static int resolve_by_revision_api(char out_commit[65], hk_hub *hub, const char *repo_id, const char *revision) {
    int rc;
    char *rkey = hk__memo_key(hub, "revision", repo_id, revision);
    char *known = hk__memo_get(hub->share, rkey, hub->freshness_ms);
    if (known) {
        snprintf(out_commit, 65, "%s", known);
        free(known);
        free(rkey);
        return HK_OK;
    }
    char *erev = hk__pct_encode(revision, false);
    char *url = erev ? hk__asprintf("%s/api/kernels/%s/revision/%s", hub->endpoint, repo_id, erev) : NULL;
    char *what = hk__asprintf("resolving revision '%s' of %s", revision, repo_id);
    free(erev);
    cJSON *j = NULL;
    rc = url && what ? api_json(&j, hub, url, what, NULL) : hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_ERR_NOT_FOUND)
        rc = hk__fail(HK_ERR_REVISION_NOT_FOUND, "revision '%s' not found in %s (not a branch, tag or commit)", revision, repo_id);
    free(url);
    free(what);
    if (rc) {
        free(rkey);
        return rc;
    }
    const char *sha = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "sha"));
    if (!sha || !hk__is_commit_id(sha)) rc = hk__fail(HK_ERR_PROTOCOL, "the revision endpoint gave no commit sha for '%s'", revision);
    else snprintf(out_commit, 65, "%s", sha);
    cJSON_Delete(j);
    if (rc == HK_OK && hk__memo_on(hub)) hk__memo_put(hub->share, rkey, out_commit);
    free(rkey);
    return rc;
}

/* Resolve to a commit. out_label gets "vN" / the revision (for refs/<label>). */
int hk__client_resolve_commit(char out_commit[65], hk_hub *hub, const char *repo_id, int version, const char *revision) {
    out_commit[0] = '\0';
    int rc = hk__client_check_repo_id(repo_id);
    if (rc) return rc;
    if ((version >= 0) == (revision != NULL))
        return hk__fail(HK_ERR_INVALID_ARG, "give exactly one of a version or a revision for %s", repo_id);
    if (revision && !hk__revision_valid(revision))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a valid revision", revision);
    if (revision && hk__is_commit_id(revision) && hub->offline) {
        snprintf(out_commit, 65, "%s", revision);
        return HK_OK;
    }
    if (hub->offline) return resolve_offline(out_commit, hub, repo_id, version, revision);
    if (revision && hk__is_commit_id(revision)) {
        snprintf(out_commit, 65, "%s", revision);
        return HK_OK;
    }
    ref_list refs;
    if ((rc = fetch_refs(&refs, hub, repo_id))) return rc;
    if (version >= 0) {
        int newest = -1;
        const char *found = NULL;
        version_entry *v = calloc(refs.n + 1, sizeof *v);
        size_t n = 0;
        for (size_t i = 0; i < refs.n; i++) {
            int num = refs.is_tag[i] ? -1 : parse_vnum(refs.names[i]);
            if (num < 0) continue;
            if (num > newest) newest = num;
            if (num == version) found = refs.commits[i];
            if (v) v[n++].version = num;
        }
        if (!found) {
            if (v) qsort(v, n, sizeof *v, cmp_version);
            rc = version_not_found(v, n, repo_id, version, false);
        } else {
            snprintf(out_commit, 65, "%s", found);
            /* once per handle: a tree walk or a CLI command may resolve the same version again */
            char *key = newest > version ? hk__asprintf("%s v%d", repo_id, version) : NULL;
            if (key && (!hub->newer_warned || strcmp(hub->newer_warned, key) != 0)) {
                hk__log(HK_LOG_WARN, "You are using version %d of %s, but version %d is available.", version, repo_id, newest);
                free(hub->newer_warned);
                hub->newer_warned = key;
                key = NULL;
            }
            free(key);
        }
        free(v);
        ref_list_free(&refs);
        return rc;
    }
    for (size_t i = 0; i < refs.n; i++) {
        if (strcmp(refs.names[i], revision) == 0) {
            snprintf(out_commit, 65, "%s", refs.commits[i]);
            ref_list_free(&refs);
            return HK_OK;
        }
    }
    ref_list_free(&refs);
    return resolve_by_revision_api(out_commit, hub, repo_id, revision);
}

int hk_hub_list_versions(hk_hub_version_list **out, hk_hub *hub, const char *repo_id) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_list_versions: NULL out");
    *out = NULL;
    if (!hub) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_list_versions: NULL hub");
    hk_hub_version_list *l = calloc(1, sizeof *l);
    if (!l) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = list_versions(&l->v, &l->n, hub, repo_id);
    if (rc) {
        hk_hub_version_list_free(l);
        return rc;
    }
    *out = l;
    hk_clear_error();
    return HK_OK;
}

int hk_hub_resolve(char **out_commit, hk_hub *hub, const char *repo_id, int version, const char *revision) {
    if (!out_commit) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_resolve: NULL out_commit");
    *out_commit = NULL;
    if (!hub) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_resolve: NULL hub");
    char commit[65];
    int rc = hk__client_resolve_commit(commit, hub, repo_id, version, revision);
    if (rc) return rc;
    if (!(*out_commit = hk__strdup(commit))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_clear_error();
    return HK_OK;
}
