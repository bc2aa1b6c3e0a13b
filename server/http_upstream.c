/* The pull-through hooks the routes call (the upstream side is in upstream_*.c): revisions brought
 * into the store before it resolves them, upstream refusals answered the Hub's way with
 * Retry-After, refs and organization overviews passed through, the access-log mark. */
#include "server/srv_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_note_mark(req_ctx *ctx, up_mark m) {
    static const int rank[] = {[UP_NONE] = 0, [UP_HIT] = 1, [UP_COALESCED] = 2, [UP_MISS] = 3, [UP_STALE] = 4};
    if (rank[m] > rank[ctx->mark]) ctx->mark = m;
}

bool srv_up_prepare(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const char *rev,
                       enum MHD_Result *ret) {
    ctx->rev_kept = false;
    if (!srv->up) return false;
    up_mark mark = UP_NONE;
    up_answer ans;
    memset(&ans, 0, sizeof ans);
    int r = srv_up_revision(srv, repo, rev, &mark, &ans, &ctx->rev_kept);
    srv_note_mark(ctx, mark);
    if (!r) return false;
    *ret = srv_send_up_answer(c, ctx, &ans, NULL);
    return true;
}

enum MHD_Result srv_send_up_answer(struct MHD_Connection *c, req_ctx *ctx, const up_answer *a, const char *commit) {
    hk_strbuf body;
    hk__sb_init(&body);
    hk__sb_append(&body, "{\"error\":");
    hk__sb_json_str(&body, a->msg[0] ? a->msg : "upstream error");
    hk__sb_append(&body, "}");
    size_t len = body.len;
    char *data = hk__sb_steal(&body);
    char *hmsg = srv_sanitize(a->msg[0] ? a->msg : "upstream error", 512);
    struct MHD_Response *r = data ? MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(data);
        free(hmsg);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    if (a->code) MHD_add_response_header(r, "X-Error-Code", a->code);
    if (hmsg) MHD_add_response_header(r, "X-Error-Message", hmsg);
    if (commit && *commit) MHD_add_response_header(r, "X-Repo-Commit", commit);
    if (a->retry_after) {
        char ra[24];
        snprintf(ra, sizeof ra, "%u", a->retry_after);
        MHD_add_response_header(r, "Retry-After", ra);
    }
    free(hmsg);
    ctx->cacheable = 0;
    return srv_queue(c, ctx, a->status ? a->status : 502, r, len);
}

enum MHD_Result srv_up_json(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *path_query,
                               const repo_ref *refs_of) {
    char *body = NULL;
    up_mark mark = UP_NONE;
    up_answer ans;
    memset(&ans, 0, sizeof ans);
    int r = srv_up_passthrough(srv, path_query, &body, &mark, &ans);
    srv_note_mark(ctx, mark);
    /* upstream unwell, rate-limited, or this client over its budget: a repo the store holds still
     * gets its refs from the store, so that nobody's misses lock out what is already here */
    if (r && refs_of && refs_of->dir && (ans.status == 429 || ans.status == 502 || ans.status == 503)) {
        srv_note_mark(ctx, UP_STALE);
        return srv_handle_refs(c, ctx, refs_of, NULL); /* no memo on the edge */
    }
    if (r) return srv_send_up_answer(c, ctx, &ans, NULL);
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, body);
    free(body);
    ctx->cacheable = 1;
    return srv_send_json(c, ctx, 200, &sb, NULL);
}

void srv_up_begin(srv_server *srv, struct MHD_Connection *c, const char *client, up_req **r) {
    if (!srv->up) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    char key[72];
    const char *auth = srv->n_tokens ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization") : NULL;
    if (auth && *auth) {
        /* a mirror with tokens: the budget follows the (checked) token; without tokens an
         * Authorization header costs nothing to vary, so the address decides */
        char hex[65];
        hk__sha256_hex(hex, auth, strlen(auth));
        snprintf(key, sizeof key, "t:%.32s", hex);
    } else {
        snprintf(key, sizeof key, "a:%s", client);
    }
    srv_up_client_set(ci ? ci->connect_fd : -1, key);
    srv_up_req_enter(r, ci ? ci->connect_fd : -1, key);
}

bool srv_up_end(void) {
    srv_up_client_set(-1, NULL);
    return srv_up_req_leave();
}

int srv_up_retake(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const char *rev,
                  enum MHD_Result *ret) {
    if (!srv->up || !ctx->rev_kept) return 0;
    atomic_fetch_add(&srv->metrics.rev_dropped, 1);
    srv_up_verdict_drop(srv->up->verdicts, repo->type, repo->id, rev);
    return srv_up_prepare(srv, c, ctx, repo, rev, ret) ? 1 : 2; /* by the file system now: kept no more */
}

/* The revision the step of a route takes: one segment, or all the rest. */
static char *step_rev(const seglist *s, size_t at, bool rest_is_rev) {
    return srv_join_decoded(s, at, rest_is_rev ? s->n - at : 1);
}

int srv_route_retake(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                     size_t at, bool rest_is_rev, enum MHD_Result *ret) {
    if (!srv->up || !ctx->rev_kept) return 0;
    char *rev = step_rev(s, at, rest_is_rev); /* valid: srv_route_up checked it before the verdict passed it */
    if (!rev) {
        *ret = MHD_NO;
        return 1;
    }
    int r = srv_up_retake(srv, c, ctx, repo, rev, ret);
    free(rev);
    return r;
}

bool srv_route_rev(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                   size_t at, bool rest_is_rev, char commit[65], char **rev, size_t *used, enum MHD_Result *ret) {
    if (srv_route_up(srv, c, ctx, repo, s, at, rest_is_rev, ret)) return true;
    for (;;) {
        if (!repo->dir) { /* (no verdict is used without the repo folder) */
            *ret = srv_repo_not_found(c, ctx);
            return true;
        }
        if (srv_resolve_rev_segs(commit, rev, used, srv->store, repo, s, at, rest_is_rev) == HK_OK) return false;
        /* the store lost what a kept verdict passed (another process pruned the snapshot, removed the
         * ref): the step again, by the file system, which brings it back from upstream */
        int r = srv_route_retake(srv, c, ctx, repo, s, at, rest_is_rev, ret);
        if (r == 1) return true;
        if (r == 0) break;
        free(*rev);
        *rev = NULL;
    }
    bool invalid = hk_last_error_code() == HK_ERR_INVALID_ARG;
    *ret = invalid ? srv_rev_invalid(c, ctx, *rev) : srv_rev_not_found(c, ctx, *rev);
    return true;
}

bool srv_route_up(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                     size_t at, bool rest_is_rev, enum MHD_Result *ret) {
    ctx->rev_kept = false;
    if (!srv->up) return false;
    char *rev = step_rev(s, at, rest_is_rev);
    if (!rev) {
        *ret = MHD_NO;
        return true;
    }
    bool answered;
    if (!hk__revision_valid(rev)) {
        *ret = srv_rev_invalid(c, ctx, rev);
        answered = true;
    } else {
        answered = srv_up_prepare(srv, c, ctx, repo, rev, ret);
    }
    free(rev);
    return answered;
}
