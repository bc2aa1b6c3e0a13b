/* Queueing answers: JSON bodies, errors the way the Hub signals them (X-Error-Code,
 * X-Error-Message, {"error": ...}), and the base URL written into links and redirects. */
#include "server/srv_http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char k_expose[] =
    "X-Repo-Commit, X-Request-Id, X-Error-Code, X-Error-Message, X-Total-Count, ETag, Link, Accept-Ranges, "
    "Content-Range, X-Linked-Size, X-Linked-ETag";

enum MHD_Result srv_queue(struct MHD_Connection *c, req_ctx *ctx, unsigned status, struct MHD_Response *r,
                             uint64_t body_bytes) {
    if (!r) return MHD_NO;
    if (srv_up_deferred()) { /* an upstream step is pending: the answer comes when it is done */
        MHD_destroy_response(r);
        return MHD_YES;
    }
    enum MHD_Result ret = srv_queue_keep(c, ctx, status, r, body_bytes);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result srv_queue_keep(struct MHD_Connection *c, req_ctx *ctx, unsigned status, struct MHD_Response *r,
                               uint64_t body_bytes) {
    MHD_add_response_header(r, "Access-Control-Expose-Headers", k_expose);
    /* For the caches a fleet runs in front (nginx proxy_cache, Varnish, a CDN): content named by a
     * commit never changes; by a branch, only for the revision TTL. Errors are not cached. */
    if (ctx->cacheable && (status == 200 || status == 206 || status == 304 || status == 302)) {
        MHD_add_response_header(r, "Cache-Control", ctx->cache_control[ctx->cacheable == 1]);
        if (ctx->tokens) MHD_add_response_header(r, "Vary", "Authorization");
    }
    ctx->status = status;
    ctx->bytes = body_bytes;
    return MHD_queue_response(c, status, r);
}

struct MHD_Response *srv_json_response(const req_ctx *ctx, hk_strbuf *sb, const char *link, size_t *len) {
    *len = sb->len;
    char *data = hk__sb_steal(sb);
    if (!data) return NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer(*len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        return NULL;
    }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    if (link) MHD_add_response_header(r, "Link", link);
    if (ctx->publisher_trusted) MHD_add_response_header(r, "X-Kernel-Publisher-Trusted", "true");
    return r;
}

enum MHD_Result srv_send_json(struct MHD_Connection *c, req_ctx *ctx, unsigned status, hk_strbuf *sb,
                                 const char *link) {
    size_t len;
    struct MHD_Response *r = srv_json_response(ctx, sb, link, &len);
    return r ? srv_queue(c, ctx, status, r, len) : MHD_NO;
}

enum MHD_Result srv_send_error(struct MHD_Connection *c, req_ctx *ctx, unsigned status, const char *code,
                                  const char *commit, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hk_strbuf msg;
    hk__sb_init(&msg);
    hk__sb_vprintf(&msg, fmt, ap);
    va_end(ap);
    hk_strbuf body;
    hk__sb_init(&body);
    hk__sb_append(&body, "{\"error\":");
    hk__sb_json_str(&body, msg.data ? msg.data : "error");
    hk__sb_append(&body, "}");
    size_t len = body.len;
    char *data = hk__sb_steal(&body);
    char *hmsg = srv_sanitize(msg.data ? msg.data : "error", 512);
    hk__sb_free(&msg);
    if (!data || !hmsg) {
        free(data);
        free(hmsg);
        return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        free(hmsg);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    if (code) MHD_add_response_header(r, "X-Error-Code", code);
    MHD_add_response_header(r, "X-Error-Message", hmsg);
    if (commit && *commit) MHD_add_response_header(r, "X-Repo-Commit", commit);
    free(hmsg);
    return srv_queue(c, ctx, status, r, len);
}

enum MHD_Result srv_repo_not_found(struct MHD_Connection *c, req_ctx *ctx) {
    return srv_send_error(c, ctx, 404, "RepoNotFound", NULL, "Repository not found");
}

enum MHD_Result srv_rev_not_found(struct MHD_Connection *c, req_ctx *ctx, const char *rev) {
    hk_clear_error();
    char *m = srv_sanitize(rev ? rev : "", 200);
    enum MHD_Result ret = srv_send_error(c, ctx, 404, "RevisionNotFound", NULL, "Invalid rev id: %s", m ? m : "");
    free(m);
    return ret;
}

enum MHD_Result srv_method_not_allowed(struct MHD_Connection *c, req_ctx *ctx) {
    return srv_send_error(c, ctx, 405, NULL, NULL, "Method not allowed");
}

char *srv_base_url(srv_server *srv) { return hk__strdup(srv->public_url ? srv->public_url : ""); }

enum MHD_Result srv_repo_invalid(struct MHD_Connection *c, req_ctx *ctx) {
    return srv_send_error(c, ctx, 400, "BadRequest", NULL,
                             "Invalid repo id: expected org/name, each part letters, digits, '-', '_' or '.' "
                             "(no '/', '..', '--' or '%%' inside a part, at most 96 characters)");
}

enum MHD_Result srv_rev_invalid(struct MHD_Connection *c, req_ctx *ctx, const char *rev) {
    char *m = srv_sanitize(rev ? rev : "", 200);
    enum MHD_Result ret = srv_send_error(c, ctx, 400, "BadRequest", NULL, "Invalid revision: %s", m ? m : "");
    free(m);
    return ret;
}
