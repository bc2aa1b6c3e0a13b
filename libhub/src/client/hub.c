/* The Hub client: options, version/revision resolution, trust check, kernel-status redirects,
 * tree listings and the pull of build/<variant>/ into the shared cache
 * (hub-protocol.md §13, kernel-hub-format.md §2, §11.1, §13). */
#include "cache/cache.h"
#include "client/client.h"
#include "env/env_cache.h"
#include "hubkern/variant.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define HK_API_MAX (64u << 20)

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void hk_hub_options_init(hk_hub_options *o) {
    memset(o, 0, sizeof *o);
    o->offline = -1;
    o->max_retries = -1;
}

void hk_pull_spec_init(hk_pull_spec *s) {
    memset(s, 0, sizeof *s);
    s->version = -1;
}

static long env_timeout_ms(const char *name, double opt_s) {
    const char *v = hk_getenv(name);
    if (v) {
        char *end;
        double d = strtod(v, &end);
        if (end != v && d > 0) return (long)(d * 1000.0 + 0.5);
    }
    if (opt_s > 0) return (long)(opt_s * 1000.0 + 0.5);
    return 10000;
}

static char *read_token(const hk_hub_options *o) {
    if (o->token) return o->token[0] ? hk_strdup(o->token) : NULL;
    if (hk_env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN")) return NULL;
    const char *v;
    if ((v = hk_getenv("HF_TOKEN")) || (v = hk_getenv("HUGGING_FACE_HUB_TOKEN"))) return hk_strdup(v);
    char *path = NULL;
    if ((v = hk_getenv("HF_TOKEN_PATH"))) path = hk_strdup(v);
    else if ((v = hk_getenv("HF_HOME"))) path = hk_asprintf("%s/token", v);
    else if ((v = hk_getenv("XDG_CACHE_HOME"))) path = hk_asprintf("%s/huggingface/token", v);
    else if ((v = hk_getenv("HOME"))) path = hk_asprintf("%s/.cache/huggingface/token", v);
    if (!path) return NULL;
    char *data = NULL;
    if (hk_read_file(&data, NULL, path, 4096) != HK_OK) {
        hk_clear_error();
        free(path);
        return NULL;
    }
    free(path);
    char *s = data;
    while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t') s++;
    size_t n = strcspn(s, " \r\n\t");
    char *tok = n ? hk_strndup(s, n) : NULL;
    free(data);
    return tok;
}

static char *default_user_agent(void) {
    if (hk_env_true("HF_HUB_DISABLE_TELEMETRY") || hk_env_true("DISABLE_TELEMETRY") || hk_env_true("DO_NOT_TRACK"))
        return NULL; /* like the kernels library: no User-Agent at all */
    struct utsname u;
    const char *m = uname(&u) == 0 ? u.machine : "unknown";
    const char *origin = hk_getenv("HF_HUB_USER_AGENT_ORIGIN");
    return hk_asprintf("hubkern/%s; hf_hub/compatible; c/11; platform/%s-linux; file_type/kernel%s%s", hk_version(), m,
                       origin ? "; origin/" : "", origin ? origin : "");
}

int hk_hub_new(hk_hub **out, const hk_hub_options *opts) {
    *out = NULL;
    hk_hub_options defaults;
    if (!opts) {
        hk_hub_options_init(&defaults);
        opts = &defaults;
    }
    pthread_once(&g_curl_once, curl_init_once);
    hk_hub *h = calloc(1, sizeof *h);
    if (!h) return hk_fail(HK_ERR_NOMEM, "out of memory");
    const char *ep = opts->endpoint;
    if (!ep || !*ep) ep = hk_env_true("HUGGINGFACE_CO_STAGING") ? "https://hub-ci.huggingface.co" : hk_getenv("HF_ENDPOINT");
    if (!ep) ep = "https://huggingface.co";
    h->endpoint = hk_strdup(ep);
    if (!h->endpoint) goto oom;
    size_t el = strlen(h->endpoint);
    while (el > 0 && h->endpoint[el - 1] == '/') h->endpoint[--el] = '\0';
    if (!hk_str_starts_with(h->endpoint, "http://") && !hk_str_starts_with(h->endpoint, "https://")) {
        int rc = hk_fail(HK_ERR_INVALID_ARG, "endpoint '%s' must start with http:// or https://", h->endpoint);
        hk_hub_free(h);
        return rc;
    }
    h->token = read_token(opts);
    int rc = hk_cache_root(&h->cache_root, opts->cache_dir, HK_REPO_KERNEL);
    if (rc) {
        hk_hub_free(h);
        return rc;
    }
    h->offline = opts->offline >= 0 ? opts->offline != 0
                                    : (hk_env_true("HF_HUB_OFFLINE") || hk_env_true("TRANSFORMERS_OFFLINE"));
    if (opts->user_agent) h->user_agent = opts->user_agent[0] ? hk_strdup(opts->user_agent) : NULL;
    else h->user_agent = default_user_agent();
    h->max_parallel = opts->max_parallel > 0 ? opts->max_parallel : 8;
    const char *mp = hk_getenv("HUBKERN_MAX_PARALLEL");
    if (mp && atoi(mp) > 0 && opts->max_parallel <= 0) h->max_parallel = atoi(mp);
    h->etag_timeout_ms = env_timeout_ms("HF_HUB_ETAG_TIMEOUT", opts->etag_timeout_s);
    h->download_timeout_ms = env_timeout_ms("HF_HUB_DOWNLOAD_TIMEOUT", opts->download_timeout_s);
    h->max_retries = opts->max_retries >= 0 ? opts->max_retries : 5;
    const char *rb = hk_getenv("HUBKERN_RETRY_BASE_MS");
    h->retry_base_ms = rb ? strtol(rb, NULL, 10) : 1000;
    if (h->retry_base_ms < 0) h->retry_base_ms = 0;
    h->progress = opts->progress;
    h->progress_ud = opts->progress_userdata;
    *out = h;
    return HK_OK;
oom:
    hk_hub_free(h);
    return hk_fail(HK_ERR_NOMEM, "out of memory");
}

void hk_hub_free(hk_hub *h) {
    if (!h) return;
    if (h->api) curl_easy_cleanup(h->api);
    free(h->endpoint);
    if (h->token) memset(h->token, 0, strlen(h->token));
    free(h->token);
    free(h->cache_root);
    free(h->user_agent);
    free(h);
}

const char *hk_hub_endpoint(const hk_hub *h) { return h->endpoint; }
const char *hk_hub_cache_root(const hk_hub *h) { return h->cache_root; }
int hk_hub_is_offline(const hk_hub *h) { return h->offline; }

void hk_hub_strv_free(char **v) {
    if (!v) return;
    for (char **p = v; *p; p++) free(*p);
    free(v);
}

static bool is_commit(const char *rev) {
    size_t n = strlen(rev);
    return (n == 40 || n == 64) && hk_is_hex(rev, n);
}

static int check_repo_id(const char *repo_id) {
    if (!repo_id || !hk_repo_id_valid(repo_id) || !strchr(repo_id, '/'))
        return hk_fail(HK_ERR_INVALID_ARG, "'%s' is not a kernel repo id (expected org/name)", repo_id ? repo_id : "(null)");
    return HK_OK;
}

/* ---- JSON API helpers --------------------------------------------------------------------- */
static int api_json(cJSON **out, hk_hub *hub, const char *url, const char *what, long *out_status) {
    *out = NULL;
    hk_http_resp r;
    int rc = hk_http_get(&r, hub, url, HK_API_MAX);
    if (rc) {
        hk_http_resp_free(&r);
        return hk_fail_context("%s", what);
    }
    if (out_status) *out_status = r.status;
    if (r.status != 200) {
        rc = hk_http_fail(&r, what);
        hk_http_resp_free(&r);
        return rc;
    }
    *out = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
    hk_http_resp_free(&r);
    if (!*out) return hk_fail(HK_ERR_PROTOCOL, "%s: the server's answer is not JSON", what);
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

static int fetch_refs(ref_list *out, hk_hub *hub, const char *repo_id) {
    memset(out, 0, sizeof *out);
    char *url = hk_asprintf("%s/api/kernels/%s/refs", hub->endpoint, repo_id);
    char *what = hk_asprintf("listing the refs of %s", repo_id);
    if (!url || !what) {
        free(url);
        free(what);
        return hk_fail(HK_ERR_NOMEM, "out of memory");
    }
    cJSON *j = NULL;
    long st = 0;
    int rc = api_json(&j, hub, url, what, &st);
    free(url);
    if (rc == HK_ERR_NOT_FOUND)
        rc = hk_fail(HK_ERR_REPO_NOT_FOUND, "%s: no kernel repo %s on %s (404)", what, repo_id, hub->endpoint);
    free(what);
    if (rc) return rc;
    const char *keys[] = {"branches", "tags"};
    size_t cap = 0;
    for (int k = 0; k < 2; k++) cap += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, keys[k]));
    out->names = calloc(cap + 1, sizeof(char *));
    out->commits = calloc(cap + 1, sizeof(char *));
    out->is_tag = calloc(cap + 1, sizeof(bool));
    if (!out->names || !out->commits || !out->is_tag) {
        cJSON_Delete(j);
        ref_list_free(out);
        return hk_fail(HK_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < 2; k++) {
        cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, keys[k])) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
            const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "targetCommit"));
            if (!name || !c || !is_commit(c)) continue;
            out->names[out->n] = hk_strdup(name);
            out->commits[out->n] = hk_strdup(c);
            out->is_tag[out->n] = k == 1;
            out->n++;
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

static int cmp_version(const void *a, const void *b) {
    const hk_hub_version *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

/* repo dir holding refs for repo_id: kernels--, else legacy models-- if it has refs/<rev>. */
static char *local_repo_dir(const hk_hub *hub, const char *repo_id, const char *rev) {
    char *k = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
    if (!rev || !k) return k;
    char commit[65];
    if (is_commit(rev) || hk_cache_read_ref(commit, k, rev) == HK_OK) return k;
    char *m = hk_cache_repo_dir(hub->cache_root, HK_REPO_MODEL, repo_id);
    hk_clear_error();
    if (m && hk_cache_read_ref(commit, m, rev) == HK_OK) {
        free(k);
        return m;
    }
    hk_clear_error();
    free(m);
    return k;
}

static int list_versions_offline(hk_hub_version **out, size_t *out_n, hk_hub *hub, const char *repo_id) {
    hk_hub_version *v = NULL;
    size_t n = 0, cap = 0;
    const hk_repo_type types[] = {HK_REPO_KERNEL, HK_REPO_MODEL};
    for (int t = 0; t < 2; t++) {
        char *dir = hk_cache_repo_dir(hub->cache_root, types[t], repo_id);
        char *refs = dir ? hk_path_join(dir, "refs") : NULL;
        DIR *d = refs ? opendir(refs) : NULL;
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            int num = parse_vnum(de->d_name);
            if (num < 0) continue;
            bool dup = false;
            for (size_t i = 0; i < n; i++) dup |= v[i].version == num;
            char commit[65];
            if (dup || hk_cache_read_ref(commit, dir, de->d_name) != HK_OK) continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                hk_hub_version *nv = realloc(v, cap * sizeof *v);
                if (!nv) break;
                v = nv;
            }
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

int hk_hub_list_versions(hk_hub_version **out, size_t *out_n, hk_hub *hub, const char *repo_id) {
    *out = NULL;
    *out_n = 0;
    int rc = check_repo_id(repo_id);
    if (rc) return rc;
    if (hub->offline) return list_versions_offline(out, out_n, hub, repo_id);
    ref_list refs;
    if ((rc = fetch_refs(&refs, hub, repo_id))) return rc;
    hk_hub_version *v = calloc(refs.n + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < refs.n; i++) {
        int num = refs.is_tag[i] ? -1 : parse_vnum(refs.names[i]);
        if (num < 0) continue;
        v[n].version = num;
        snprintf(v[n].commit, sizeof v[n].commit, "%s", refs.commits[i]);
        n++;
    }
    ref_list_free(&refs);
    if (!v) return hk_fail(HK_ERR_NOMEM, "out of memory");
    qsort(v, n, sizeof *v, cmp_version);
    *out = v;
    *out_n = n;
    return HK_OK;
}

static int version_not_found(const hk_hub_version *v, size_t n, const char *repo_id, int version, bool offline) {
    hk_strbuf sb;
    hk_sb_init(&sb);
    for (size_t i = 0; i < n; i++) hk_sb_printf(&sb, "%s%d", i ? ", " : "", v[i].version);
    int rc = offline ? hk_fail(HK_ERR_OFFLINE,
                               "offline: version %d of %s is not in the cache (no refs/v%d; cached versions: %s); pull it "
                               "while online first or pass --revision <commit>",
                               version, repo_id, version, sb.data && sb.len ? sb.data : "none")
                     : hk_fail(HK_ERR_VERSION_NOT_FOUND, "Version %d of %s not found, available versions: %s", version,
                               repo_id, sb.data && sb.len ? sb.data : "none");
    hk_sb_free(&sb);
    return rc;
}

/* Resolve to a commit. out_label gets "vN" / the revision (for refs/<label>). */
static int resolve_commit(char out_commit[65], hk_hub *hub, const char *repo_id, int version, const char *revision) {
    out_commit[0] = '\0';
    int rc = check_repo_id(repo_id);
    if (rc) return rc;
    if ((version >= 0) == (revision != NULL))
        return hk_fail(HK_ERR_INVALID_ARG, "give exactly one of a version or a revision for %s", repo_id);
    if (revision && (!*revision || !hk_path_is_safe_relative(revision)))
        return hk_fail(HK_ERR_INVALID_ARG, "'%s' is not a valid revision", revision);
    if (revision && is_commit(revision) && hub->offline) {
        snprintf(out_commit, 65, "%s", revision);
        return HK_OK;
    }
    if (hub->offline) {
        char label[32];
        const char *rev = revision;
        if (!rev) {
            snprintf(label, sizeof label, "v%d", version);
            rev = label;
        }
        char *dir = local_repo_dir(hub, repo_id, rev);
        if (!dir) return hk_fail(HK_ERR_NOMEM, "out of memory");
        rc = hk_cache_read_ref(out_commit, dir, rev);
        free(dir);
        if (rc == HK_OK) return HK_OK;
        if (version >= 0) {
            hk_hub_version *v = NULL;
            size_t n = 0;
            list_versions_offline(&v, &n, hub, repo_id);
            rc = version_not_found(v, n, repo_id, version, true);
            free(v);
            return rc;
        }
        return hk_fail(HK_ERR_OFFLINE,
                       "offline: revision '%s' of %s is not in the cache (no refs/%s under %s); pull it while online first",
                       revision, repo_id, revision, hub->cache_root);
    }
    if (revision && is_commit(revision)) {
        snprintf(out_commit, 65, "%s", revision);
        return HK_OK;
    }
    ref_list refs;
    if ((rc = fetch_refs(&refs, hub, repo_id))) return rc;
    if (version >= 0) {
        int newest = -1;
        const char *found = NULL;
        hk_hub_version *v = calloc(refs.n + 1, sizeof *v);
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
            if (newest > version)
                hk_log(HK_LOG_WARN, "You are using version %d of %s, but version %d is available.", version, repo_id, newest);
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
    /* not a branch or tag name: ask the revision endpoint (short shas, refs/pr/N) */
    char *erev = hk_url_encode(revision, false);
    char *url = erev ? hk_asprintf("%s/api/kernels/%s/revision/%s", hub->endpoint, repo_id, erev) : NULL;
    char *what = hk_asprintf("resolving revision '%s' of %s", revision, repo_id);
    free(erev);
    cJSON *j = NULL;
    rc = url && what ? api_json(&j, hub, url, what, NULL) : hk_fail(HK_ERR_NOMEM, "out of memory");
    if (rc == HK_ERR_NOT_FOUND)
        rc = hk_fail(HK_ERR_REVISION_NOT_FOUND, "revision '%s' not found in %s (not a branch, tag or commit)", revision, repo_id);
    free(url);
    free(what);
    if (rc) return rc;
    const char *sha = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "sha"));
    if (!sha || !is_commit(sha)) rc = hk_fail(HK_ERR_PROTOCOL, "the revision endpoint gave no commit sha for '%s'", revision);
    else snprintf(out_commit, 65, "%s", sha);
    cJSON_Delete(j);
    return rc;
}

int hk_hub_resolve(char out_commit[65], hk_hub *hub, const char *repo_id, int version, const char *revision) {
    return resolve_commit(out_commit, hub, repo_id, version, revision);
}

int hk_hub_check_trust(int *out_trusted, hk_hub *hub, const char *org) {
    *out_trusted = 0;
    char *eorg = hk_url_encode(org, false);
    char *url = eorg ? hk_asprintf("%s/api/organizations/%s/overview", hub->endpoint, eorg) : NULL;
    free(eorg);
    if (!url) return hk_fail(HK_ERR_NOMEM, "out of memory");
    hk_http_resp r;
    int rc = hk_http_get(&r, hub, url, 1u << 20);
    free(url);
    if (rc == HK_OK) {
        if (r.status == 200) {
            cJSON *j = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
            if (!j) rc = hk_fail(HK_ERR_PROTOCOL, "organization overview of %s is not JSON", org);
            else *out_trusted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "trustedKernelPublisher"));
            cJSON_Delete(j);
        } else if (r.status != 404) {
            char *what = hk_asprintf("checking publisher trust of %s", org);
            rc = hk_http_fail(&r, what ? what : "trust check");
            free(what);
        }
    }
    hk_http_resp_free(&r);
    return rc;
}

/* ---- tree listing --------------------------------------------------------------------------- */
typedef struct tree_entry {
    char *path;
    bool dir;
    uint64_t size;
    char *oid;     /* git blob sha1 */
    char *lfs_oid; /* sha256 for LFS/Xet files */
} tree_entry;

typedef struct tree {
    tree_entry *e;
    size_t n, cap;
} tree;

static void tree_free(tree *t) {
    for (size_t i = 0; i < t->n; i++) {
        free(t->e[i].path);
        free(t->e[i].oid);
        free(t->e[i].lfs_oid);
    }
    free(t->e);
    memset(t, 0, sizeof *t);
}

static int list_tree(tree *out, hk_hub *hub, const char *repo_id, const char *commit, const char *path, bool recursive) {
    memset(out, 0, sizeof *out);
    /* '/' kept in the path: the Hub takes both forms, some mirrors only this one */
    char *epath = hk_url_encode(path, true);
    char *url = epath ? hk_asprintf("%s/api/kernels/%s/tree/%s/%s?recursive=%s&expand=false", hub->endpoint, repo_id,
                                    commit, epath, recursive ? "true" : "false")
                      : NULL;
    free(epath);
    char *what = hk_asprintf("listing %s/ of %s at %s", path, repo_id, commit);
    int rc = url && what ? HK_OK : hk_fail(HK_ERR_NOMEM, "out of memory");
    for (int page = 0; rc == HK_OK && url; page++) {
        if (page > 10000) {
            rc = hk_fail(HK_ERR_PROTOCOL, "%s: too many pages", what);
            break;
        }
        hk_http_resp r;
        rc = hk_http_get(&r, hub, url, HK_API_MAX);
        if (rc) {
            hk_fail_context("%s", what);
            hk_http_resp_free(&r);
            break;
        }
        if (r.status != 200) {
            rc = hk_http_fail(&r, what);
            hk_http_resp_free(&r);
            break;
        }
        cJSON *j = cJSON_ParseWithLength(r.body.data ? r.body.data : "", r.body.len);
        char *next = hk_link_next(r.h.link);
        char *base = r.url ? hk_strdup(r.url) : hk_strdup(url);
        hk_http_resp_free(&r);
        free(url);
        url = NULL;
        if (!cJSON_IsArray(j)) {
            rc = hk_fail(HK_ERR_PROTOCOL, "%s: the answer is not a JSON list", what);
            cJSON_Delete(j);
            free(next);
            free(base);
            break;
        }
        cJSON *it;
        cJSON_ArrayForEach(it, j) {
            const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "type"));
            const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "path"));
            if (!type || !p) {
                rc = hk_fail(HK_ERR_PROTOCOL, "%s: an entry lacks type or path", what);
                break;
            }
            if (out->n == out->cap) {
                size_t nc = out->cap ? out->cap * 2 : 64;
                tree_entry *ne = realloc(out->e, nc * sizeof *ne);
                if (!ne) {
                    rc = hk_fail(HK_ERR_NOMEM, "out of memory");
                    break;
                }
                out->e = ne;
                out->cap = nc;
            }
            tree_entry *e = &out->e[out->n++];
            memset(e, 0, sizeof *e);
            e->path = hk_strdup(p);
            e->dir = strcmp(type, "directory") == 0;
            cJSON *sz = cJSON_GetObjectItemCaseSensitive(it, "size");
            e->size = cJSON_IsNumber(sz) && sz->valuedouble >= 0 ? (uint64_t)sz->valuedouble : 0;
            e->oid = hk_strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "oid")));
            cJSON *lfs = cJSON_GetObjectItemCaseSensitive(it, "lfs");
            if (cJSON_IsObject(lfs)) {
                const char *lo = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lfs, "oid"));
                if (!lo) lo = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lfs, "sha256"));
                e->lfs_oid = hk_strdup(lo);
                cJSON *ls = cJSON_GetObjectItemCaseSensitive(lfs, "size");
                if (cJSON_IsNumber(ls) && ls->valuedouble >= 0) e->size = (uint64_t)ls->valuedouble;
            }
            if (!e->path) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        }
        cJSON_Delete(j);
        if (rc == HK_OK && next) {
            char *abs = hk_url_resolve(base, next);
            url = abs && !hk_url_same_origin(abs, hub->endpoint) ? hk_url_rebase(abs, hub->endpoint) : hk_strdup(abs);
            free(abs);
            if (!url) rc = hk_fail(HK_ERR_PROTOCOL, "%s: bad Link header '%s'", what, next);
        }
        free(next);
        free(base);
    }
    free(url);
    free(what);
    if (rc) tree_free(out);
    return rc;
}

static int variants_from_tree(char ***out, size_t *out_n, const tree *t) {
    char **v = calloc(t->n + 1, sizeof *v);
    if (!v) return hk_fail(HK_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!t->e[i].dir) continue;
        const char *p = t->e[i].path;
        if (!hk_str_starts_with(p, "build/")) continue;
        const char *name = p + 6;
        if (!hk_path_is_safe_relative(name) || strchr(name, '/')) {
            hk_hub_strv_free(v);
            return hk_fail(HK_ERR_UNSAFE_PATH, "refusing unsafe variant name '%s' from the server", p);
        }
        if (!(v[n] = hk_strdup(name))) {
            hk_hub_strv_free(v);
            return hk_fail(HK_ERR_NOMEM, "out of memory");
        }
        n++;
    }
    *out = v;
    *out_n = n;
    return HK_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_variants_local(char ***out, size_t *out_n, const char *snapshot) {
    char *build = hk_path_join(snapshot, "build");
    if (!build) return hk_fail(HK_ERR_NOMEM, "out of memory");
    int rc = hk_list_subdirs(out, out_n, build);
    free(build);
    if (rc == HK_ERR_NOT_FOUND)
        return hk_fail(HK_ERR_OFFLINE, "offline: %s has no build/ directory (the kernel was not pulled here)", snapshot);
    if (rc) return rc;
    qsort(*out, *out_n, sizeof **out, cmp_str);
    return HK_OK;
}

int hk_hub_list_variants(char ***out, size_t *out_n, hk_hub *hub, const char *repo_id, const char *commit) {
    *out = NULL;
    *out_n = 0;
    int rc = check_repo_id(repo_id);
    if (rc) return rc;
    if (!commit || !is_commit(commit)) return hk_fail(HK_ERR_INVALID_ARG, "a commit id is required");
    if (hub->offline) {
        char *dir = local_repo_dir(hub, repo_id, commit);
        char *snap = dir ? hk_asprintf("%s/snapshots/%s", dir, commit) : NULL;
        rc = snap ? list_variants_local(out, out_n, snap) : hk_fail(HK_ERR_NOMEM, "out of memory");
        free(dir);
        free(snap);
        return rc;
    }
    tree t;
    if ((rc = list_tree(&t, hub, repo_id, commit, "build", false))) return rc;
    rc = variants_from_tree(out, out_n, &t);
    tree_free(&t);
    if (rc == HK_OK) qsort(*out, *out_n, sizeof **out, cmp_str);
    return rc;
}

/* ---- kernel-status.toml --------------------------------------------------------------------- */
/* Minimal TOML reading for the three string keys of a redirect. */
static char *toml_string(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (strncmp(p, key, kl) != 0) continue;
        p += kl;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '=') continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        char q = *p;
        if (q != '"' && q != '\'') continue;
        const char *e = strchr(p + 1, q);
        if (!e) return NULL;
        return hk_strndup(p + 1, (size_t)(e - p - 1));
    }
    return NULL;
}

/* *out_dest / *out_rev set when the repo redirects. */
static int check_status(char **out_dest, char **out_rev, hk_hub *hub, const char *repo_id, const char *commit) {
    *out_dest = *out_rev = NULL;
    char *url = hk_asprintf("%s/kernels/%s/resolve/%s/kernel-status.toml", hub->endpoint, repo_id, commit);
    if (!url) return hk_fail(HK_ERR_NOMEM, "out of memory");
    hk_http_resp r;
    int rc = hk_http_get(&r, hub, url, 1u << 20);
    free(url);
    if (rc) {
        hk_http_resp_free(&r);
        return hk_fail_context("checking kernel-status.toml of %s", repo_id);
    }
    if (r.status == 404) {
        /* no redirect; remember the absence like Python does */
        char *dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
        const char *rc_commit = r.h.x_repo_commit && is_commit(r.h.x_repo_commit) ? r.h.x_repo_commit : commit;
        char *marker = dir ? hk_asprintf("%s/.no_exist/%s/kernel-status.toml", dir, rc_commit) : NULL;
        char *mdir = marker ? hk_strdup(marker) : NULL;
        char *snaps = dir ? hk_path_join(dir, "snapshots") : NULL;
        if (snaps) hk_mkdirs(snaps, 0777); /* a repo folder without snapshots/ reads as corrupt */
        free(snaps);
        if (mdir) {
            *strrchr(mdir, '/') = '\0';
            if (hk_mkdirs(mdir, 0777) == HK_OK && !hk_path_exists(marker)) hk_write_file_atomic(marker, "", 0);
        }
        hk_clear_error();
        free(mdir);
        free(marker);
        free(dir);
        hk_http_resp_free(&r);
        return HK_OK;
    }
    if (r.status != 200) {
        char *what = hk_asprintf("checking kernel-status.toml of %s", repo_id);
        rc = hk_http_fail(&r, what ? what : "kernel-status.toml");
        free(what);
        hk_http_resp_free(&r);
        return rc;
    }
    const char *text = r.body.data ? r.body.data : "";
    char *kind = toml_string(text, "kind");
    if (!kind || strcmp(kind, "redirect") != 0) {
        rc = hk_fail(HK_ERR_PARSE, "kernel-status.toml of %s: unknown kind '%s'", repo_id, kind ? kind : "(none)");
    } else {
        *out_dest = toml_string(text, "destination");
        *out_rev = toml_string(text, "revision");
        if (!*out_dest) rc = hk_fail(HK_ERR_PARSE, "kernel-status.toml of %s has no destination", repo_id);
        else if (!*out_rev) *out_rev = hk_strdup("main");
    }
    free(kind);
    hk_http_resp_free(&r);
    if (rc) {
        free(*out_dest);
        free(*out_rev);
        *out_dest = *out_rev = NULL;
    }
    return rc;
}

/* ---- one file ---------------------------------------------------------------------------------- */

int hk_hub_fetch_file(char **out_path, hk_hub *hub, const char *repo_id, const char *commit, const char *path) {
    *out_path = NULL;
    int rc = check_repo_id(repo_id);
    if (rc) return rc;
    if (!commit || !is_commit(commit) || !path || !hk_path_is_safe_relative(path))
        return hk_fail(HK_ERR_INVALID_ARG, "hk_hub_fetch_file: a commit id and a safe relative path are required");
    char *repo_dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo_id);
    char *local = repo_dir ? hk_asprintf("%s/snapshots/%s/%s", repo_dir, commit, path) : NULL;
    char *dir = hk_strdup(path);
    if (!local || !dir) {
        rc = hk_fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (hk_path_exists(local)) goto out; /* the snapshot link and its blob are here: no network */
    if (hub->offline) {
        rc = hk_fail(HK_ERR_OFFLINE, "%s of %s at %s is not in the cache (%s) and the client is offline; "
                     "download it online first", path, repo_id, commit, hub->cache_root);
        goto out;
    }
    /* the file's blob id and size come from a listing of its directory (one page, not recursive) */
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else strcpy(dir, "");
    tree t;
    if ((rc = list_tree(&t, hub, repo_id, commit, dir, false))) goto out;
    const tree_entry *e = NULL;
    for (size_t i = 0; i < t.n && !e; i++)
        if (!t.e[i].dir && strcmp(t.e[i].path, path) == 0) e = &t.e[i];
    const char *etag = e ? (e->lfs_oid ? e->lfs_oid : e->oid) : NULL;
    size_t el = etag ? strlen(etag) : 0;
    if (!e) {
        rc = hk_fail(HK_ERR_NOT_FOUND, "%s has no file %s at %s", repo_id, path, commit);
    } else if (!((el == 64 && e->lfs_oid) || (el == 40 && !e->lfs_oid)) || !hk_is_hex(etag, el)) {
        rc = hk_fail(HK_ERR_PROTOCOL, "the listing gives no usable content hash for %s (oid '%s')", path,
                     etag ? etag : "(none)");
    } else {
        char *paths[1] = {(char *)path};
        hk_dl_item item;
        memset(&item, 0, sizeof item);
        item.etag = (char *)etag;
        item.size = e->size;
        item.paths = paths;
        item.npaths = 1;
        hk_dl_stats st = {0, 0, 0};
        rc = hk_download_blobs(&st, hub, repo_id, repo_dir, commit, &item, 1);
    }
    tree_free(&t);
out:
    free(dir);
    free(repo_dir);
    if (rc == HK_OK) *out_path = local;
    else free(local);
    return rc;
}

/* ---- pull ------------------------------------------------------------------------------------ */
struct hk_pull_result {
    char *repo, *revision, *commit, *snapshot;
    char **variants, **variant_paths;
    size_t nvariants;
    char **files;
    size_t nfiles;
    size_t files_downloaded;
    uint64_t bytes_downloaded, bytes_verified, bytes_trusted;
    bool offline;
};

void hk_pull_result_free(hk_pull_result *r) {
    if (!r) return;
    free(r->repo);
    free(r->revision);
    free(r->commit);
    free(r->snapshot);
    for (size_t i = 0; i < r->nvariants; i++) {
        free(r->variants[i]);
        free(r->variant_paths[i]);
    }
    free(r->variants);
    free(r->variant_paths);
    for (size_t i = 0; i < r->nfiles; i++) free(r->files[i]);
    free(r->files);
    free(r);
}

const char *hk_pull_result_repo(const hk_pull_result *r) { return r->repo; }
const char *hk_pull_result_revision(const hk_pull_result *r) { return r->revision; }
const char *hk_pull_result_commit(const hk_pull_result *r) { return r->commit; }
const char *hk_pull_result_snapshot(const hk_pull_result *r) { return r->snapshot; }
size_t hk_pull_result_variant_count(const hk_pull_result *r) { return r->nvariants; }
const char *hk_pull_result_variant(const hk_pull_result *r, size_t i) { return i < r->nvariants ? r->variants[i] : NULL; }
const char *hk_pull_result_variant_path(const hk_pull_result *r, size_t i) {
    return i < r->nvariants ? r->variant_paths[i] : NULL;
}
size_t hk_pull_result_file_count(const hk_pull_result *r) { return r->nfiles; }
const char *hk_pull_result_file(const hk_pull_result *r, size_t i) { return i < r->nfiles ? r->files[i] : NULL; }
size_t hk_pull_result_files_downloaded(const hk_pull_result *r) { return r->files_downloaded; }
uint64_t hk_pull_result_bytes_downloaded(const hk_pull_result *r) { return r->bytes_downloaded; }
uint64_t hk_pull_result_bytes_verified(const hk_pull_result *r) { return r->bytes_verified; }
uint64_t hk_pull_result_bytes_trusted(const hk_pull_result *r) { return r ? r->bytes_trusted : 0; }
int hk_pull_result_offline(const hk_pull_result *r) { return r->offline; }

static bool excluded(const char *path) {
    if (hk_str_ends_with(path, ".pyc")) return true;
    return strstr(path, "/__pycache__/") != NULL || hk_str_starts_with(path, "__pycache__/") ||
           hk_str_ends_with(path, "/__pycache__");
}

/* Choose which variants to pull among names. Fills r->variants. */
static int choose_variants(hk_pull_result *r, char **names, size_t n, const hk_pull_spec *spec, const char *where) {
    size_t want = spec->all_variants ? n : 1;
    r->variants = calloc(want + 1, sizeof(char *));
    r->variant_paths = calloc(want + 1, sizeof(char *));
    if (!r->variants || !r->variant_paths) return hk_fail(HK_ERR_NOMEM, "out of memory");
    if (spec->all_variants) {
        for (size_t i = 0; i < n; i++)
            if (!(r->variants[r->nvariants++] = hk_strdup(names[i]))) return hk_fail(HK_ERR_NOMEM, "out of memory");
        if (n == 0) return hk_fail(HK_ERR_NO_VARIANT, "%s has no build variants", where);
        return HK_OK;
    }
    if (spec->variant) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(names[i], spec->variant) == 0) {
                r->variants[r->nvariants++] = hk_strdup(names[i]);
                return r->variants[0] ? HK_OK : hk_fail(HK_ERR_NOMEM, "out of memory");
            }
        }
        hk_strbuf sb;
        hk_sb_init(&sb);
        for (size_t i = 0; i < n; i++) hk_sb_printf(&sb, "%s%s", i ? ", " : "", names[i]);
        int rc = hk_fail(HK_ERR_NO_VARIANT, "%s has no variant '%s'; available: %s", where, spec->variant,
                         sb.data ? sb.data : "none");
        hk_sb_free(&sb);
        return rc;
    }
    /* the process-wide detected machine until hk_pull_spec carries an env */
    const hk_env *env = NULL;
    hk_choose_options co = HK_CHOOSE_OPTIONS_INIT;
    co.backend = spec->backend;
    co.families = spec->variant_families;
    char *best = NULL;
    int rc = hk_env_cached(&env);
    if (rc == HK_OK) rc = hk_choose_variant(&best, env, (const char *const *)names, n, &co);
    if (rc) return hk_fail_context("%s", where);
    r->variants[r->nvariants++] = best;
    return HK_OK;
}

static int add_file(hk_pull_result *r, size_t *cap, const char *path) {
    if (r->nfiles == *cap) {
        *cap = *cap ? *cap * 2 : 32;
        char **nf = realloc(r->files, *cap * sizeof *nf);
        if (!nf) return hk_fail(HK_ERR_NOMEM, "out of memory");
        r->files = nf;
    }
    if (!(r->files[r->nfiles] = hk_strdup(path))) return hk_fail(HK_ERR_NOMEM, "out of memory");
    r->nfiles++;
    return HK_OK;
}

/* Digest check of every pulled variant (verification receipts of hub's cache honoured); skip[i]:
 * already checked; fresh: blobs just written. */
static int verify_variants(hk_pull_result *r, const hk_hub *hub, const bool *skip, const char *const *fresh,
                           size_t nfresh) {
    for (size_t i = 0; i < r->nvariants; i++) {
        if (skip && skip[i]) continue;
        bool has = false;
        hk_verify_stats st;
        int rc = hk_verify_variant_cached(&has, &st, r->variant_paths[i], hub->cache_root, false, fresh, nfresh);
        if (rc) return rc;
        if (has && r->offline) r->bytes_verified += st.bytes_hashed + st.bytes_fresh;
        r->bytes_trusted += st.bytes_trusted;
    }
    return HK_OK;
}

static int collect_local_files(hk_pull_result *r, size_t *cap, const char *dir, const char *rel) {
    char *path = rel[0] ? hk_asprintf("%s/%s", dir, rel) : hk_strdup(dir);
    DIR *d = path ? opendir(path) : NULL;
    int rc = HK_OK;
    struct dirent *de;
    while (d && rc == HK_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        if (strcmp(de->d_name, "__pycache__") == 0 || hk_str_ends_with(de->d_name, ".pyc")) continue;
        char *childrel = rel[0] ? hk_asprintf("%s/%s", rel, de->d_name) : hk_strdup(de->d_name);
        char *child = childrel ? hk_asprintf("%s/%s", dir, childrel) : NULL;
        if (child && hk_is_dir(child)) rc = collect_local_files(r, cap, dir, childrel);
        else if (child) rc = add_file(r, cap, childrel);
        free(child);
        free(childrel);
    }
    if (d) closedir(d);
    free(path);
    return rc;
}

static int pull_offline(hk_pull_result *r, hk_hub *hub, const hk_pull_spec *spec) {
    char commit[65];
    int rc = resolve_commit(commit, hub, spec->repo_id, spec->version, spec->revision);
    if (rc) return rc;
    if (!spec->trust_remote_code)
        hk_log(HK_LOG_WARN, "skipping the publisher trust check for %s: offline mode", spec->repo_id);
    const char *rev = spec->revision;
    char label[32];
    if (!rev) {
        snprintf(label, sizeof label, "v%d", spec->version);
        rev = label;
    }
    char *dir = local_repo_dir(hub, spec->repo_id, rev);
    r->repo = hk_strdup(spec->repo_id);
    r->revision = hk_strdup(rev);
    r->commit = hk_strdup(commit);
    r->snapshot = dir ? hk_asprintf("%s/snapshots/%s", dir, commit) : NULL;
    free(dir);
    if (!r->repo || !r->revision || !r->commit || !r->snapshot) return hk_fail(HK_ERR_NOMEM, "out of memory");
    if (!hk_is_dir(r->snapshot))
        return hk_fail(HK_ERR_OFFLINE, "offline: %s at %s is not in the cache (missing %s); pull it while online first",
                       spec->repo_id, commit, r->snapshot);
    char **names = NULL;
    size_t n = 0;
    if ((rc = list_variants_local(&names, &n, r->snapshot))) return rc;
    char *where = hk_asprintf("%s at %s (offline)", spec->repo_id, commit);
    rc = where ? choose_variants(r, names, n, spec, where) : hk_fail(HK_ERR_NOMEM, "out of memory");
    free(where);
    hk_hub_strv_free(names);
    if (rc) {
        if (rc == HK_ERR_NO_VARIANT)
            hk_fail_context("offline: only the variants pulled earlier are in %s/build", r->snapshot);
        return rc;
    }
    size_t cap = 0;
    for (size_t i = 0; i < r->nvariants; i++) {
        r->variant_paths[i] = hk_asprintf("%s/build/%s", r->snapshot, r->variants[i]);
        if (!r->variant_paths[i]) return hk_fail(HK_ERR_NOMEM, "out of memory");
        char *rel = hk_asprintf("build/%s", r->variants[i]);
        if (!rel) return hk_fail(HK_ERR_NOMEM, "out of memory");
        rc = collect_local_files(r, &cap, r->snapshot, rel);
        free(rel);
        if (rc) return rc;
    }
    return verify_variants(r, hub, NULL, NULL, 0);
}

/* Is snapshots/<commit>/build/<variant> complete and intact, as its metadata.json digest proves?
 * (A commit never changes, so then no listing or download is needed.) */
static bool variant_complete_locally(const hk_hub *hub, const char *variant_dir, hk_verify_stats *st) {
    bool has = false;
    memset(st, 0, sizeof *st);
    char *meta = hk_path_join(variant_dir, "metadata.json");
    bool present = meta && hk_path_exists(meta);
    free(meta);
    if (!present) return false;
    int rc = hk_verify_variant_cached(&has, st, variant_dir, hub->cache_root, true, NULL, 0);
    hk_clear_error();
    return rc == HK_OK && has;
}

/* One repo visited while following redirects: the revision asked there and the commit it had. */
typedef struct redirect_hop {
    char *repo, *rev;
    char commit[65];
} redirect_hop;

#define HK_MAX_REDIRECTS 5

/* Fail with the chain hops[0..n-1] followed by the revisit of hops[again] (same repo, and the same
 * revision name or the same commit): a loop that no number of hops would leave. */
static int fail_redirect_loop(const redirect_hop *hops, size_t n, size_t again, bool by_commit) {
    hk_strbuf sb;
    hk_sb_init(&sb);
    for (size_t i = 0; i < n; i++) hk_sb_printf(&sb, "%s%s@%s", i ? " -> " : "", hops[i].repo, hops[i].rev);
    if (by_commit)
        hk_sb_printf(&sb, " (commit %.12s, as %s@%s)", hops[n - 1].commit, hops[again].repo, hops[again].rev);
    int rc = hk_fail(HK_ERR_PROTOCOL,
                     "kernel-status.toml redirects loop: %s; fix the kernel-status.toml of one of them",
                     sb.data ? sb.data : "?");
    hk_sb_free(&sb);
    return rc;
}

/* Resolve spec's version/revision and follow kernel-status.toml redirects (online), checking the
 * publisher of every repo on the way unless trust_remote_code. *out_repo: the final repo;
 * *out_redirect_rev: the revision the last redirect named, NULL when none was followed.
 * A redirect back to a repo already visited, at the same revision name or the same commit, fails at
 * once (HK_ERR_PROTOCOL naming the loop); a chain of more than HK_MAX_REDIRECTS redirects fails too. */
static int follow_redirects(char **out_repo, char **out_redirect_rev, char commit[65], hk_hub *hub,
                            const hk_pull_spec *spec) {
    *out_repo = *out_redirect_rev = NULL;
    redirect_hop hops[HK_MAX_REDIRECTS + 2];
    size_t n = 0;
    int rc = HK_OK;
    hops[0].repo = hk_strdup(spec->repo_id);
    hops[0].rev = spec->revision ? hk_strdup(spec->revision) : hk_asprintf("v%d", spec->version);
    hops[0].commit[0] = '\0';
    n = 1;
    if (!hops[0].repo || !hops[0].rev) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
    while (rc == HK_OK) {
        redirect_hop *h = &hops[n - 1];
        const char *repo = h->repo;
        /* back at a (repo, revision) of the chain: a loop, known before asking the Hub again */
        for (size_t i = 0; i + 1 < n && rc == HK_OK; i++)
            if (strcmp(hops[i].repo, repo) == 0 && strcmp(hops[i].rev, h->rev) == 0)
                rc = fail_redirect_loop(hops, n, i, false);
        if (rc) break;
        if (n > HK_MAX_REDIRECTS + 1) {
            rc = hk_fail(HK_ERR_PROTOCOL, "kernel-status.toml redirects form a chain longer than %d from %s",
                         HK_MAX_REDIRECTS, spec->repo_id);
            break;
        }
        if ((rc = check_repo_id(repo))) break;
        if (!spec->trust_remote_code) {
            char org[128];
            snprintf(org, sizeof org, "%.*s", (int)(strchr(repo, '/') - repo), repo);
            int trusted = 0;
            if ((rc = hk_hub_check_trust(&trusted, hub, org))) break;
            if (!trusted) {
                rc = hk_fail(HK_ERR_UNTRUSTED,
                             "kernel repository '%s' is not from a trusted publisher (or its trust status could not be "
                             "verified); pass --trust-remote-code (trust_remote_code = 1) to load it anyway",
                             repo);
                break;
            }
        }
        if ((rc = resolve_commit(commit, hub, repo, n > 1 ? -1 : spec->version, n > 1 ? h->rev : spec->revision)))
            break;
        snprintf(h->commit, sizeof h->commit, "%s", commit);
        /* another name of a commit already visited (a@main -> b -> a@v1, main == v1) loops as well */
        for (size_t i = 0; i + 1 < n && rc == HK_OK; i++)
            if (strcmp(hops[i].repo, repo) == 0 && strcmp(hops[i].commit, commit) == 0)
                rc = fail_redirect_loop(hops, n, i, true);
        if (rc) break;
        char *dest = NULL, *drev = NULL;
        if ((rc = check_status(&dest, &drev, hub, repo, commit))) break;
        if (!dest) break;
        hk_log(HK_LOG_WARN, "'%s' redirected to '%s' (revision %s)", repo, dest, drev);
        hops[n].repo = dest;
        hops[n].rev = drev;
        hops[n].commit[0] = '\0';
        n++;
    }
    if (rc == HK_OK && n > 1) {
        *out_repo = hops[n - 1].repo;
        *out_redirect_rev = hops[n - 1].rev;
        hops[n - 1].repo = hops[n - 1].rev = NULL;
    } else if (rc == HK_OK) {
        *out_repo = hops[0].repo;
        hops[0].repo = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        free(hops[i].repo);
        free(hops[i].rev);
    }
    return rc;
}

int hk_hub_resolve_spec(char **out_repo, char **out_revision, char out_commit[65], hk_hub *hub,
                        const hk_pull_spec *spec) {
    if (out_repo) *out_repo = NULL;
    if (out_revision) *out_revision = NULL;
    if (out_commit) out_commit[0] = '\0';
    if (!out_repo || !out_revision || !out_commit || !hub || !spec)
        return hk_fail(HK_ERR_INVALID_ARG, "hk_hub_resolve_spec: NULL argument");
    int rc = check_repo_id(spec->repo_id);
    if (rc) return rc;
    if ((spec->version >= 0) == (spec->revision != NULL))
        return hk_fail(HK_ERR_INVALID_ARG, "give exactly one of a version or a revision for %s", spec->repo_id);
    char *repo = NULL, *redirect_rev = NULL;
    if (hub->offline) { /* the cache keeps no kernel-status.toml: nothing to follow */
        rc = resolve_commit(out_commit, hub, spec->repo_id, spec->version, spec->revision);
        if (rc == HK_OK && !(repo = hk_strdup(spec->repo_id))) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
    } else {
        rc = follow_redirects(&repo, &redirect_rev, out_commit, hub, spec);
    }
    if (rc) return hk_fail_context("resolving %s", spec->repo_id);
    char label[32];
    const char *rev = redirect_rev ? redirect_rev : spec->revision;
    if (!rev) {
        snprintf(label, sizeof label, "v%d", spec->version);
        rev = label;
    }
    char *r = hk_strdup(rev);
    free(redirect_rev);
    if (!r) {
        free(repo);
        return hk_fail(HK_ERR_NOMEM, "out of memory");
    }
    *out_repo = repo;
    *out_revision = r;
    return HK_OK;
}

static int pull_online(hk_pull_result *r, hk_hub *hub, const hk_pull_spec *spec_in) {
    hk_pull_spec spec = *spec_in;
    char *repo = NULL;
    char *redirect_rev = NULL;
    char commit[65];
    int rc = follow_redirects(&repo, &redirect_rev, commit, hub, &spec);
    if (rc) return rc;
    char label[32];
    const char *rev = redirect_rev ? redirect_rev : spec.revision;
    if (!rev) {
        snprintf(label, sizeof label, "v%d", spec.version);
        rev = label;
    }
    char *repo_dir = hk_cache_repo_dir(hub->cache_root, HK_REPO_KERNEL, repo);
    r->repo = repo;
    r->revision = hk_strdup(rev);
    free(redirect_rev);
    rev = NULL; /* pointed into redirect_rev */
    r->commit = hk_strdup(commit);
    r->snapshot = repo_dir ? hk_asprintf("%s/snapshots/%s", repo_dir, commit) : NULL;
    if (!r->revision || !r->commit || !r->snapshot) {
        free(repo_dir);
        return hk_fail(HK_ERR_NOMEM, "out of memory");
    }
    /* variants from the build/ listing (skipped when the named variant is already complete here) */
    tree t;
    char **names = NULL;
    size_t n = 0;
    char *local = spec.variant && !spec.all_variants ? hk_asprintf("%s/build/%s", r->snapshot, spec.variant) : NULL;
    hk_verify_stats local_st;
    memset(&local_st, 0, sizeof local_st);
    bool local_ok = local && variant_complete_locally(hub, local, &local_st);
    if (local_ok) {
        names = calloc(2, sizeof *names);
        if (names) names[0] = hk_strdup(spec.variant);
        n = 1;
        rc = names && names[0] ? HK_OK : hk_fail(HK_ERR_NOMEM, "out of memory");
    } else if ((rc = list_tree(&t, hub, repo, commit, "build", false)) == HK_OK) {
        rc = variants_from_tree(&names, &n, &t);
        tree_free(&t);
    }
    free(local);
    if (rc) {
        free(repo_dir);
        return rc;
    }
    if (rc == HK_OK) {
        qsort(names, n, sizeof *names, cmp_str);
        char *where = hk_asprintf("%s at %s", repo, commit);
        rc = where ? choose_variants(r, names, n, &spec, where) : hk_fail(HK_ERR_NOMEM, "out of memory");
        free(where);
    }
    hk_hub_strv_free(names);
    /* files of each chosen variant, grouped by blob */
    hk_dl_item *items = NULL;
    size_t nitems = 0, icap = 0, fcap = 0;
    bool *checked = rc == HK_OK ? calloc(r->nvariants + 1, sizeof *checked) : NULL;
    if (rc == HK_OK && !checked) rc = hk_fail(HK_ERR_NOMEM, "out of memory");
    for (size_t v = 0; rc == HK_OK && v < r->nvariants; v++) {
        char *prefix = hk_asprintf("build/%s", r->variants[v]);
        r->variant_paths[v] = hk_asprintf("%s/build/%s", r->snapshot, r->variants[v]);
        if (!prefix || !r->variant_paths[v]) {
            free(prefix);
            rc = hk_fail(HK_ERR_NOMEM, "out of memory");
            break;
        }
        hk_verify_stats vs = local_st;
        if ((local_ok && strcmp(r->variants[v], spec.variant) == 0) ||
            variant_complete_locally(hub, r->variant_paths[v], &vs)) {
            /* warm: the commit's variant is here and matches its digest */
            hk_log(HK_LOG_DEBUG, "%s is complete in the cache; nothing to fetch", r->variant_paths[v]);
            rc = collect_local_files(r, &fcap, r->snapshot, prefix);
            r->bytes_verified += vs.bytes_hashed;
            r->bytes_trusted += vs.bytes_trusted;
            checked[v] = true;
            free(prefix);
            continue;
        }
        rc = list_tree(&t, hub, repo, commit, prefix, true);
        size_t plen = strlen(prefix);
        for (size_t i = 0; rc == HK_OK && i < t.n; i++) {
            tree_entry *e = &t.e[i];
            if (!hk_path_is_safe_relative(e->path) || strncmp(e->path, prefix, plen) != 0 || e->path[plen] != '/') {
                rc = hk_fail(HK_ERR_UNSAFE_PATH,
                             "refusing file name '%s' from the server's listing of %s: it would leave the variant directory",
                             e->path, prefix);
                break;
            }
            if (e->dir || excluded(e->path)) continue;
            const char *etag = e->lfs_oid ? e->lfs_oid : e->oid;
            size_t el = etag ? strlen(etag) : 0;
            if (!etag || !((el == 64 && e->lfs_oid) || (el == 40 && !e->lfs_oid)) || !hk_is_hex(etag, el)) {
                rc = hk_fail(HK_ERR_PROTOCOL, "the listing gives no usable content hash for %s (oid '%s')", e->path,
                             etag ? etag : "(none)");
                break;
            }
            if ((rc = add_file(r, &fcap, e->path))) break;
            size_t k = 0;
            while (k < nitems && strcmp(items[k].etag, etag) != 0) k++;
            if (k < nitems && items[k].size != e->size) {
                rc = hk_fail(HK_ERR_PROTOCOL, "the listing gives two sizes for blob %s", etag);
                break;
            }
            if (k == nitems) {
                if (nitems == icap) {
                    icap = icap ? icap * 2 : 32;
                    hk_dl_item *ni = realloc(items, icap * sizeof *ni);
                    if (!ni) {
                        rc = hk_fail(HK_ERR_NOMEM, "out of memory");
                        break;
                    }
                    items = ni;
                }
                memset(&items[nitems], 0, sizeof *items);
                items[nitems].etag = hk_strdup(etag);
                items[nitems].size = e->size;
                nitems++;
            }
            char **np = realloc(items[k].paths, (items[k].npaths + 1) * sizeof(char *));
            if (!np || !items[k].etag) {
                free(np == items[k].paths ? NULL : np);
                rc = hk_fail(HK_ERR_NOMEM, "out of memory");
                break;
            }
            items[k].paths = np;
            if (!(np[items[k].npaths] = hk_strdup(e->path))) {
                rc = hk_fail(HK_ERR_NOMEM, "out of memory");
                break;
            }
            items[k].npaths++;
        }
        tree_free(&t);
        free(prefix);
    }
    if (rc == HK_OK) {
        hk_dl_stats st = {0, 0, 0};
        rc = hk_download_blobs(&st, hub, repo, repo_dir, commit, items, nitems);
        r->bytes_downloaded = st.bytes_downloaded;
        r->bytes_verified += st.bytes_verified;
        r->files_downloaded = st.files_downloaded;
    }
    if (rc == HK_OK) {
        if (hub->progress) {
            hk_progress p = {"verify", NULL, 0, 0, 0, (uint32_t)r->nvariants};
            hub->progress(hub->progress_ud, &p);
        }
        const char **fresh = calloc(nitems + 1, sizeof *fresh);
        size_t nfresh = 0;
        for (size_t i = 0; fresh && i < nitems; i++)
            if (items[i].downloaded) fresh[nfresh++] = items[i].etag;
        rc = verify_variants(r, hub, checked, fresh, nfresh);
        free(fresh);
    }
    free(checked);
    for (size_t i = 0; i < nitems; i++) {
        free(items[i].etag);
        for (size_t k = 0; k < items[i].npaths; k++) free(items[i].paths[k]);
        free(items[i].paths);
    }
    free(items);
    /* refs only once the variant is complete and verified, so that offline use never finds a
     * half-pulled snapshot through refs/vN */
    if (rc == HK_OK && strcmp(r->revision, commit) != 0) rc = hk_cache_write_ref(repo_dir, r->revision, commit);
    free(repo_dir);
    return rc;
}

int hk_hub_pull(hk_pull_result **out, hk_hub *hub, const hk_pull_spec *spec) {
    *out = NULL;
    if (!hub || !spec) return hk_fail(HK_ERR_INVALID_ARG, "hub and spec are required");
    int rc = check_repo_id(spec->repo_id);
    if (rc) return rc;
    if ((spec->version >= 0) == (spec->revision != NULL))
        return hk_fail(HK_ERR_INVALID_ARG, "give exactly one of a version or a revision for %s", spec->repo_id);
    if (spec->variant && (!hk_path_is_safe_relative(spec->variant) || strchr(spec->variant, '/')))
        return hk_fail(HK_ERR_INVALID_ARG, "'%s' is not a variant name", spec->variant);
    hk_pull_result *r = calloc(1, sizeof *r);
    if (!r) return hk_fail(HK_ERR_NOMEM, "out of memory");
    r->offline = hub->offline;
    rc = hub->offline ? pull_offline(r, hub, spec) : pull_online(r, hub, spec);
    if (rc) {
        hk_pull_result_free(r);
        return hk_fail_context("pulling %s", spec->repo_id);
    }
    *out = r;
    return HK_OK;
}

int hk_hub_fetch_variant(char **out_variant_dir, char **out_commit, char **out_variant, hk_hub *hub,
                         const hk_pull_spec *spec) {
    if (out_variant_dir) *out_variant_dir = NULL;
    if (out_commit) *out_commit = NULL;
    if (out_variant) *out_variant = NULL;
    hk_pull_result *r = NULL;
    int rc = hk_hub_pull(&r, hub, spec);
    if (rc) return rc;
    char *d = hk_strdup(r->variant_paths[0]), *c = hk_strdup(r->commit), *v = hk_strdup(r->variants[0]);
    hk_pull_result_free(r);
    if (!d || !c || !v) {
        free(d);
        free(c);
        free(v);
        return hk_fail(HK_ERR_NOMEM, "out of memory");
    }
    if (out_variant_dir) *out_variant_dir = d;
    else free(d);
    if (out_commit) *out_commit = c;
    else free(c);
    if (out_variant) *out_variant = v;
    else free(v);
    return HK_OK;
}
