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

/* Cache-Control class of an answer addressed by `rev` (set before the answer is queued). */
static void addressed_by(req_ctx *ctx, const char *rev) { ctx->cacheable = hk__is_commit_id(rev) ? 2 : 1; }

/* Repo info at main from the store; when the store lost the ref a kept verdict passed, the
 * revision step again by the file system (srv_up_retake) and the store asked once more. */
static enum MHD_Result repo_info_main(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo) {
    char commit[65];
    enum MHD_Result ret;
    for (;;) {
        if (!repo->dir) return srv_repo_not_found(c, ctx);
        if (srv_store_resolve_rev(commit, repo->dir, "main") == HK_OK)
            return srv_handle_repo_info(srv, c, ctx, repo, commit);
        hk_clear_error();
        int r = srv_up_retake(srv, c, ctx, repo, "main", &ret);
        if (r == 1) return ret;
        if (r == 0) break;
    }
    return srv_send_error(c, ctx, 404, "RevisionNotFound", NULL, "Invalid rev id: main");
}

/* /api/T/{repo}[/...]: the repo's own routes once the token was checked against it. */
static enum MHD_Result route_repo_api(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
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
        if (!is_get && !is_head) ret = srv_method_not_allowed(c, ctx);
        else if (srv->up && srv_up_prepare(srv, c, ctx, repo, "main", &ret)) {
        } else ret = repo_info_main(srv, c, ctx, repo);
    } else if (srv_seg_is(s, a, "refs") && s->n == a + 1) {
        /* a kernel repo's refs also carry the trust answer of its publisher (hubkern clients read it) */
        if ((is_get || is_head) && repo->type == HK_REPO_KERNEL) ctx->publisher_trusted = srv_repo_publisher_trusted(srv, repo->id);
        if (!is_get && !is_head) ret = srv_method_not_allowed(c, ctx);
        else if (srv->up) {
            bool prs = srv_query_true(c, "include_prs");
            char *pq = hk__asprintf("/api/%s/%s/refs%s", hk_repo_type_plural(repo->type), repo->id,
                                    prs ? "?include_prs=1" : "");
            ret = pq ? srv_up_json(srv, c, ctx, pq, repo) : MHD_NO;
            free(pq);
        } else if (!repo->dir) ret = srv_repo_not_found(c, ctx);
        else ret = srv_handle_refs(c, ctx, repo, srv->memo);
    } else if (srv_seg_is(s, a, "revision") && s->n > a + 1) {
        if (!is_get && !is_head) ret = srv_method_not_allowed(c, ctx);
        else if (srv_route_rev(srv, c, ctx, repo, s, a + 1, true, commit, &rev, &used, &ret)) {
        } else {
            addressed_by(ctx, rev);
            ret = srv_handle_repo_info(srv, c, ctx, repo, commit);
        }
    } else if (srv_seg_is(s, a, "paths-info") && s->n > a + 1) {
        if (!is_post) ret = srv_method_not_allowed(c, ctx);
        else if (srv_route_rev(srv, c, ctx, repo, s, a + 1, true, commit, &rev, &used, &ret)) {
        } else ret = srv_handle_paths_info(srv, c, ctx, repo, commit);
    } else if (srv_seg_is(s, a, "tree") && s->n > a + 1) {
        if (!is_get && !is_head) ret = srv_method_not_allowed(c, ctx);
        else if (srv_route_rev(srv, c, ctx, repo, s, a + 1, false, commit, &rev, &used, &ret)) {
        } else {
            bool bad;
            char *path = srv_join_path(s, a + 1 + used, &bad);
            addressed_by(ctx, rev);
            if (bad || !path) ret = srv_send_error(c, ctx, 400, NULL, NULL, "Invalid path");
            else ret = srv_handle_tree(srv, c, ctx, repo, commit, path);
            free(path);
        }
    } else {
        ret = srv_send_error(c, ctx, 404, NULL, NULL, "Not found");
    }
    free(rev);
    return ret;
}


static enum MHD_Result route_api(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
                                 const char *method, const token_spec *who) {
    bool is_get = strcmp(method, "GET") == 0, is_head = strcmp(method, "HEAD") == 0;
    if (srv_seg_is(s, 1, "agent-harnesses") && s->n == 2) {
        /* huggingface_hub >= 2 fetches this registry for its User-Agent; an empty one is valid */
        hk_strbuf sb;
        hk__sb_init(&sb);
        hk__sb_append(&sb, "{\"standardEnvVars\":[],\"harnesses\":{}}");
        return srv_send_json(c, ctx, 200, &sb, NULL);
    }
    if (srv_seg_is(s, 1, "organizations") && s->n == 4 && srv_seg_is(s, 3, "overview")) {
        if (!is_get && !is_head) return srv_method_not_allowed(c, ctx);
        return srv_handle_org(srv, c, ctx, s, who);
    }
    static const char *const types[] = {"models", "datasets", "spaces", "kernels"};
    int ti = -1;
    for (int i = 0; i < 4; i++)
        if (srv_seg_is(s, 1, types[i])) ti = i;
    if (ti < 0 || s->n < 3) return srv_send_error(c, ctx, 404, NULL, NULL, "Not found");
    static const char *const kws[] = {"revision", "tree", "refs", "paths-info", "commits", "benchmarks", NULL};
    repo_ref repo;
    repo_parse pr = srv_parse_repo(&repo, srv, s, 2, (hk_repo_type)ti, kws);
    if (pr != REPO_OK) {
        srv_repo_ref_free(&repo);
        return pr == REPO_INVALID ? srv_repo_invalid(c, ctx) : srv_repo_not_found(c, ctx);
    }
    enum MHD_Result ret;
    if (repo.type == HK_REPO_KERNEL && srv_seg_is(s, repo.next, "benchmarks") && s->n == repo.next + 1)
        ret = srv_handle_benchmarks(srv, c, ctx, &repo, method, who); /* checks id and scope itself */
    else if (!srv_token_allows(who, &repo))
        ret = srv_send_error(c, ctx, 403, "GatedRepo", NULL, "Access to %s is restricted: this token does not grant it",
                                repo.id);
    else if (!repo.dir && !srv->up) ret = srv_repo_not_found(c, ctx);
    else ret = route_repo_api(srv, c, ctx, s, &repo, method);
    srv_repo_ref_free(&repo);
    return ret;
}

static enum MHD_Result route(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
                             const char *method) {
    bool is_get = strcmp(method, "GET") == 0, is_head = strcmp(method, "HEAD") == 0;
    if (s->n == 1 && s->len[0] == 0) {
        hk_strbuf sb;
        hk__sb_init(&sb);
        hk__sb_printf(&sb, "{\"hubkern\":\"%s\",\"status\":\"ok\"}", hk_version());
        return srv_send_json(c, ctx, 200, &sb, NULL);
    }
    if (srv_seg_is(s, 0, "metrics") && s->n == 1) {
        ctx->route = MET_METRICS;
        if (!is_get && !is_head) return srv_method_not_allowed(c, ctx);
        return srv_handle_metrics(srv, c, ctx);
    }
    /* the /lfs/ route authenticates through its signature */
    if (srv_seg_is(s, 0, "lfs")) {
        ctx->route = MET_LFS;
        ctx->cacheable = 2;
        if (!is_get && !is_head) return srv_method_not_allowed(c, ctx);
        return srv_handle_lfs(srv, c, ctx, method, s);
    }
    const token_spec *who = NULL;
    auth_result ar = srv_check_token(srv, c, &who);
    /* As the Hub answers private repos to anonymous clients: 401 + RepoNotFound (existence not revealed) */
    if (ar == AUTH_MISSING && srv_is_bench_post(s, method))
        return srv_send_error(c, ctx, 401, "Unauthorized", NULL, "Benchmark uploads need a token "
                                 "(Authorization: Bearer <token>; kernels sends HF_TOKEN)");
    if (ar == AUTH_MISSING)
        return srv_send_error(c, ctx, 401, "RepoNotFound", NULL, "Repository not found (this mirror needs a token)");
    if (ar == AUTH_INVALID)
        return srv_send_error(c, ctx, 401, NULL, NULL, "Invalid credentials in Authorization header");
    if (srv_seg_is(s, 0, "api")) {
        ctx->route = MET_API;
        return route_api(srv, c, ctx, s, method, who);
    }
    ctx->route = MET_RESOLVE;
    return srv_handle_resolve(srv, c, ctx, method, s, who);
}

enum MHD_Result srv_dispatch(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *url,
                                const char *method) {
    if (strlen(url) > HK_SRV_MAX_URL) return srv_send_error(c, ctx, 414, NULL, NULL, "URL too long");
    if (url[0] != '/') return srv_send_error(c, ctx, 400, NULL, NULL, "Bad request");
    seglist *s = calloc(1, sizeof *s);
    if (!s) return MHD_NO;
    enum MHD_Result ret = MHD_NO;
    bool split = true;
    for (const char *p = url + 1;;) {
        if (s->n == HK_SRV_MAX_SEGS) {
            ret = srv_send_error(c, ctx, 414, NULL, NULL, "URL too deep");
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
            ret = srv_send_error(c, ctx, 400, "BadRequest", NULL,
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
