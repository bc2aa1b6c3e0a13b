/* Routing: the raw URL split into segments (libmicrohttpd's unescaping is off, so each segment is
 * decoded here: "refs%2Fpr%2F1" stays one revision and an encoded '/' never splits a path), then
 * authentication and the route.
 *
 * Routes (T = models | datasets | spaces | kernels; {repo} = org/name or name):
 *   GET  /api/T/{repo}                         repo info at main
 *   GET  /api/T/{repo}/revision/{rev}          repo info (sha, siblings; ?blobs=true adds sizes, LFS)
 *   GET  /api/T/{repo}/tree/{rev}[/{path}]     listing (?recursive=true), paged with Link rel="next"
 *   POST /api/T/{repo}/paths-info/{rev}        entries for paths=... (form) or {"paths": [...]} (JSON)
 *   GET  /api/T/{repo}/refs                    branches, tags (?include_prs=1 adds pullRequests)
 *   GET  /api/organizations/{org}/overview     trustedKernelPublisher from configuration
 *   POST /api/kernels/{repo}/benchmarks        store a benchmark submission (http_benchmarks.c)
 *   GET  /api/kernels/{repo}/benchmarks        the submissions, newest first (?limit=&cursor=)
 *   HEAD/GET /[datasets/|spaces/|kernels/]{repo}/resolve/{rev}/{path}   file content and metadata
 *   HEAD/GET /lfs/T/{repo}/{sha256}?commit=&sig=                         blob route behind --lfs-302 */
#include "util/text.h"
#include "server/srv_http.h"

#include <stdlib.h>
#include <string.h>

bool hk_srv_seg_is(const seglist *s, size_t i, const char *lit) {
    return i < s->n && s->len[i] == strlen(lit) && memcmp(s->p[i], lit, s->len[i]) == 0;
}

char *hk_srv_seg_decode(const seglist *s, size_t i) { return i < s->n ? hk__strdup(s->d[i]) : NULL; }


/* Decoded segments [at, at+k) joined with '/' (NULL when out of memory). */
static char *join_decoded(const seglist *s, size_t at, size_t k) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "");
    for (size_t i = at; i < at + k && i < s->n; i++) {
        if (i > at) hk__sb_append(&sb, "/");
        hk__sb_append(&sb, s->d[i]);
    }
    return hk__sb_steal(&sb);
}

/* An encoded '/' joins like a real one: huggingface_hub sends tree paths as "build%2Fvariant". The
 * joined result must be a checked path, so "..%2F.." is refused the same as "../..". */
char *hk_srv_join_path(const seglist *s, size_t from, bool *bad) {
    *bad = false;
    char *out = join_decoded(s, from, from < s->n ? s->n - from : 0);
    if (out && !(!*out || hk__repo_path_valid(out))) {
        free(out);
        *bad = true;
        return NULL;
    }
    return out;
}

void hk_srv_repo_ref_free(repo_ref *r) {
    free(r->id);
    free(r->dir);
}

/* One part of a repo id as the Hub names them (decoded: an encoded '/' makes it invalid). */
static bool id_part_ok(const char *p) { return p && !strchr(p, '/') && hk_repo_id_valid(p); }

/* "org/name" when that repo exists or when the segment after "org" is not an action keyword;
 * else "name". Every id made here is checked (repo_ref's promise). */
repo_parse hk_srv_parse_repo(repo_ref *out, hk_server *srv, const seglist *s, size_t at, hk_repo_type type,
                             const char *const *keywords) {
    memset(out, 0, sizeof *out);
    out->type = type;
    if (at >= s->n) return REPO_NONE;
    const char *a = s->d[at];
    const char *b = at + 1 < s->n ? s->d[at + 1] : NULL;
    if (!id_part_ok(a)) return REPO_INVALID;
    bool b_ok = id_part_ok(b);
    char *two = b_ok ? hk__asprintf("%s/%s", a, b) : NULL;
    char *dir2 = two ? hk_store_repo_dir(srv->store, type, two) : NULL;
    char *dir1 = dir2 ? NULL : hk_store_repo_dir(srv->store, type, a);
    bool b_is_kw = false;
    for (size_t k = 0; b && keywords[k]; k++)
        if (strcmp(b, keywords[k]) == 0) b_is_kw = true;
    repo_parse rc = REPO_OK;
    if (dir2) {
        out->id = two;
        out->dir = dir2;
        out->next = at + 2;
        two = NULL;
    } else if (dir1 || !b || b_is_kw) {
        out->id = hk__strdup(a);
        out->dir = dir1;
        out->next = at + 1;
    } else if (!b_ok) {
        rc = REPO_INVALID; /* "org/<not a name>": never looked up, here or upstream */
    } else {
        out->id = two;
        out->next = at + 2;
        two = NULL;
    }
    free(two);
    if (rc == REPO_OK && !out->id) rc = REPO_NONE;
    return rc;
}

/* The single decoded segment is tried first, then raw "refs/pr/1"-style joins of up to 4. */
int hk_srv_resolve_rev_segs(char commit[65], char **rev_out, size_t *used, const repo_ref *repo, const seglist *s,
                            size_t at, bool rest_is_rev) {
    *rev_out = NULL;
    *used = 0;
    if (at >= s->n) return hk__fail(HK_ERR_REVISION_NOT_FOUND, "no revision");
    size_t max_k = rest_is_rev ? s->n - at : (s->n - at > 4 ? 4 : s->n - at);
    size_t first_k = rest_is_rev ? max_k : 1;
    for (size_t k = first_k; k >= 1 && k <= max_k; k = rest_is_rev ? 0 : k + 1) {
        char *rev = join_decoded(s, at, k);
        if (!rev) break;
        if (!hk__revision_valid(rev)) {
            if (k == first_k) { /* the revision as sent is no name at all */
                *rev_out = rev;
                return hk__fail(HK_ERR_INVALID_ARG, "invalid revision");
            }
            free(rev); /* a longer raw join is only a candidate */
            continue;
        }
        if (hk_store_resolve_rev(commit, repo->dir, rev) == HK_OK) {
            free(*rev_out);
            *rev_out = rev;
            *used = k;
            return HK_OK;
        }
        if (k == first_k) *rev_out = rev; /* reported in the error */
        else free(rev);
        if (rest_is_rev) break;
    }
    hk_clear_error();
    if (!*rev_out) *rev_out = hk__strdup("");
    return hk__fail(HK_ERR_REVISION_NOT_FOUND, "revision not found");
}

bool hk_srv_route_up(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                     size_t at, bool rest_is_rev, enum MHD_Result *ret) {
    if (!srv->up) return false;
    char *rev = join_decoded(s, at, rest_is_rev ? s->n - at : 1);
    if (!rev) {
        *ret = MHD_NO;
        return true;
    }
    bool answered;
    if (!hk__revision_valid(rev)) {
        *ret = hk_srv_rev_invalid(c, ctx, rev);
        answered = true;
    } else {
        answered = hk_srv_up_prepare(srv, c, ctx, repo, rev, ret);
    }
    free(rev);
    return answered;
}

/* The answer to a failed hk_srv_resolve_rev_segs. */
static enum MHD_Result rev_failed(struct MHD_Connection *c, req_ctx *ctx, const char *rev) {
    bool invalid = hk_last_error_code() == HK_ERR_INVALID_ARG;
    return invalid ? hk_srv_rev_invalid(c, ctx, rev) : hk_srv_rev_not_found(c, ctx, rev);
}

/* Cache-Control class of an answer addressed by `rev` (set before the answer is queued). */
static void addressed_by(req_ctx *ctx, const char *rev) { ctx->cacheable = hk__is_commit_id(rev) ? 2 : 1; }

/* /api/T/{repo}[/...]: the repo's own routes once the token was checked against it. */
static enum MHD_Result route_repo_api(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
                                      repo_ref *repo, const char *method) {
    bool is_get = strcmp(method, "GET") == 0, is_head = strcmp(method, "HEAD") == 0,
         is_post = strcmp(method, "POST") == 0;
    size_t a = repo->next;
    char commit[65];
    char *rev = NULL;
    size_t used = 0;
    enum MHD_Result ret;

    if (a == s->n) { /* repo info at main */
        ctx->cacheable = 1;
        if (!is_get && !is_head) ret = hk_srv_method_not_allowed(c, ctx);
        else if (srv->up && hk_srv_up_prepare(srv, c, ctx, repo, "main", &ret)) {
        } else if (!repo->dir) ret = hk_srv_repo_not_found(c, ctx);
        else if (hk_store_resolve_rev(commit, repo->dir, "main") != HK_OK) {
            hk_clear_error();
            ret = hk_srv_send_error(c, ctx, 404, "RevisionNotFound", NULL, "Invalid rev id: main");
        } else ret = hk_srv_handle_repo_info(srv, c, ctx, repo, commit);
    } else if (hk_srv_seg_is(s, a, "refs") && s->n == a + 1) {
        /* a kernel repo's refs also carry the trust answer of its publisher (hubkern clients read it) */
        if ((is_get || is_head) && repo->type == HK_REPO_KERNEL) ctx->publisher_trusted = hk_srv_repo_publisher_trusted(srv, repo->id);
        if (!is_get && !is_head) ret = hk_srv_method_not_allowed(c, ctx);
        else if (srv->up) {
            bool prs = hk_srv_query_true(c, "include_prs");
            char *pq = hk__asprintf("/api/%s/%s/refs%s", hk_repo_type_plural(repo->type), repo->id,
                                    prs ? "?include_prs=1" : "");
            ret = pq ? hk_srv_up_json(srv, c, ctx, pq, repo) : MHD_NO;
            free(pq);
        } else if (!repo->dir) ret = hk_srv_repo_not_found(c, ctx);
        else ret = hk_srv_handle_refs(c, ctx, repo);
    } else if (hk_srv_seg_is(s, a, "revision") && s->n > a + 1) {
        if (!is_get && !is_head) ret = hk_srv_method_not_allowed(c, ctx);
        else if (hk_srv_route_up(srv, c, ctx, repo, s, a + 1, true, &ret)) {
        } else if (!repo->dir) ret = hk_srv_repo_not_found(c, ctx);
        else if (hk_srv_resolve_rev_segs(commit, &rev, &used, repo, s, a + 1, true) != HK_OK)
            ret = rev_failed(c, ctx, rev);
        else {
            addressed_by(ctx, rev);
            ret = hk_srv_handle_repo_info(srv, c, ctx, repo, commit);
        }
    } else if (hk_srv_seg_is(s, a, "paths-info") && s->n > a + 1) {
        if (!is_post) ret = hk_srv_method_not_allowed(c, ctx);
        else if (hk_srv_route_up(srv, c, ctx, repo, s, a + 1, true, &ret)) {
        } else if (!repo->dir) ret = hk_srv_repo_not_found(c, ctx);
        else if (hk_srv_resolve_rev_segs(commit, &rev, &used, repo, s, a + 1, true) != HK_OK)
            ret = rev_failed(c, ctx, rev);
        else ret = hk_srv_handle_paths_info(srv, c, ctx, repo, commit);
    } else if (hk_srv_seg_is(s, a, "tree") && s->n > a + 1) {
        if (!is_get && !is_head) ret = hk_srv_method_not_allowed(c, ctx);
        else if (hk_srv_route_up(srv, c, ctx, repo, s, a + 1, false, &ret)) {
        } else if (!repo->dir) ret = hk_srv_repo_not_found(c, ctx);
        else if (hk_srv_resolve_rev_segs(commit, &rev, &used, repo, s, a + 1, false) != HK_OK) {
            ret = rev_failed(c, ctx, rev);
        } else {
            bool bad;
            char *path = hk_srv_join_path(s, a + 1 + used, &bad);
            addressed_by(ctx, rev);
            if (bad || !path) ret = hk_srv_send_error(c, ctx, 400, NULL, NULL, "Invalid path");
            else ret = hk_srv_handle_tree(srv, c, ctx, repo, commit, path);
            free(path);
        }
    } else {
        ret = hk_srv_send_error(c, ctx, 404, NULL, NULL, "Not found");
    }
    free(rev);
    return ret;
}


static enum MHD_Result route_api(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
                                 const char *method, const token_spec *who) {
    bool is_get = strcmp(method, "GET") == 0, is_head = strcmp(method, "HEAD") == 0;
    if (hk_srv_seg_is(s, 1, "agent-harnesses") && s->n == 2) {
        /* huggingface_hub >= 2 fetches this registry for its User-Agent; an empty one is valid */
        hk_strbuf sb;
        hk__sb_init(&sb);
        hk__sb_append(&sb, "{\"standardEnvVars\":[],\"harnesses\":{}}");
        return hk_srv_send_json(c, ctx, 200, &sb, NULL);
    }
    if (hk_srv_seg_is(s, 1, "organizations") && s->n == 4 && hk_srv_seg_is(s, 3, "overview")) {
        if (!is_get && !is_head) return hk_srv_method_not_allowed(c, ctx);
        return hk_srv_handle_org(srv, c, ctx, s, who);
    }
    static const char *const types[] = {"models", "datasets", "spaces", "kernels"};
    int ti = -1;
    for (int i = 0; i < 4; i++)
        if (hk_srv_seg_is(s, 1, types[i])) ti = i;
    if (ti < 0 || s->n < 3) return hk_srv_send_error(c, ctx, 404, NULL, NULL, "Not found");
    static const char *const kws[] = {"revision", "tree", "refs", "paths-info", "commits", "benchmarks", NULL};
    repo_ref repo;
    repo_parse pr = hk_srv_parse_repo(&repo, srv, s, 2, (hk_repo_type)ti, kws);
    if (pr != REPO_OK) {
        hk_srv_repo_ref_free(&repo);
        return pr == REPO_INVALID ? hk_srv_repo_invalid(c, ctx) : hk_srv_repo_not_found(c, ctx);
    }
    enum MHD_Result ret;
    if (repo.type == HK_REPO_KERNEL && hk_srv_seg_is(s, repo.next, "benchmarks") && s->n == repo.next + 1)
        ret = hk_srv_handle_benchmarks(srv, c, ctx, &repo, method, who); /* checks id and scope itself */
    else if (!hk_srv_token_allows(who, &repo))
        ret = hk_srv_send_error(c, ctx, 403, "GatedRepo", NULL, "Access to %s is restricted: this token does not grant it",
                                repo.id);
    else if (!repo.dir && !srv->up) ret = hk_srv_repo_not_found(c, ctx);
    else ret = route_repo_api(srv, c, ctx, s, &repo, method);
    hk_srv_repo_ref_free(&repo);
    return ret;
}

static enum MHD_Result route(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
                             const char *method) {
    bool is_get = strcmp(method, "GET") == 0, is_head = strcmp(method, "HEAD") == 0;
    if (s->n == 1 && s->len[0] == 0) {
        hk_strbuf sb;
        hk__sb_init(&sb);
        hk__sb_printf(&sb, "{\"hubkern\":\"%s\",\"status\":\"ok\"}", hk_version());
        return hk_srv_send_json(c, ctx, 200, &sb, NULL);
    }
    if (hk_srv_seg_is(s, 0, "metrics") && s->n == 1) {
        ctx->route = MET_METRICS;
        if (!is_get && !is_head) return hk_srv_method_not_allowed(c, ctx);
        return hk_srv_handle_metrics(srv, c, ctx);
    }
    /* the /lfs/ route authenticates through its signature */
    if (hk_srv_seg_is(s, 0, "lfs")) {
        ctx->route = MET_LFS;
        ctx->cacheable = 2;
        if (!is_get && !is_head) return hk_srv_method_not_allowed(c, ctx);
        return hk_srv_handle_lfs(srv, c, ctx, method, s);
    }
    const token_spec *who = NULL;
    auth_result ar = hk_srv_check_token(srv, c, &who);
    /* As the Hub answers private repos to anonymous clients: 401 + RepoNotFound (existence not revealed) */
    if (ar == AUTH_MISSING && hk_srv_is_bench_post(s, method))
        return hk_srv_send_error(c, ctx, 401, "Unauthorized", NULL, "Benchmark uploads need a token "
                                 "(Authorization: Bearer <token>; kernels sends HF_TOKEN)");
    if (ar == AUTH_MISSING)
        return hk_srv_send_error(c, ctx, 401, "RepoNotFound", NULL, "Repository not found (this mirror needs a token)");
    if (ar == AUTH_INVALID)
        return hk_srv_send_error(c, ctx, 401, NULL, NULL, "Invalid credentials in Authorization header");
    if (hk_srv_seg_is(s, 0, "api")) {
        ctx->route = MET_API;
        return route_api(srv, c, ctx, s, method, who);
    }
    ctx->route = MET_RESOLVE;
    return hk_srv_handle_resolve(srv, c, ctx, method, s, who);
}

enum MHD_Result hk_srv_dispatch(hk_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *url,
                                const char *method) {
    if (strlen(url) > HK_SRV_MAX_URL) return hk_srv_send_error(c, ctx, 414, NULL, NULL, "URL too long");
    if (url[0] != '/') return hk_srv_send_error(c, ctx, 400, NULL, NULL, "Bad request");
    seglist *s = calloc(1, sizeof *s);
    if (!s) return MHD_NO;
    enum MHD_Result ret = MHD_NO;
    bool split = true;
    for (const char *p = url + 1;;) {
        if (s->n == HK_SRV_MAX_SEGS) {
            ret = hk_srv_send_error(c, ctx, 414, NULL, NULL, "URL too deep");
            split = false;
            break;
        }
        size_t n = strcspn(p, "/");
        s->p[s->n] = p;
        s->len[s->n] = n;
        s->n++;
        p += n;
        if (*p != '/') break;
        p++;
    }
    /* Percent-decoding happens here, once, for every route: what is behind sees decoded segments
     * only, so no later step can decode "%252F" a second time into a '/'. */
    for (size_t i = 0; split && i < s->n; i++) {
        char *d = hk__pct_decode(s->p[i], s->len[i], false);
        if (!d) {
            ret = hk_srv_send_error(c, ctx, 400, "BadRequest", NULL,
                                    "Invalid percent-encoding in the URL (a bad escape or %%00)");
            split = false;
            break;
        }
        s->d[i] = d;
    }
    if (split) ret = route(srv, c, ctx, s, method);
    for (size_t i = 0; i < s->n; i++) free((char *)s->d[i]);
    free(s);
    return ret;
}
