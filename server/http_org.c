/* The organization overview (/api/organizations/{org}/overview) and the trust answer the refs of a
 * kernel repo carry (X-Kernel-Publisher-Trusted): from --trust, else, with upstreams, from the
 * upstream's own overview through the memoised pass-through. Apart from http_api.c, which the
 * pull-through tier calls back for refs (http_upstream.c), so that the two do not call each other. */
#include "server/srv_http.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Would /api/organizations/<org of repo_id>/overview answer "trustedKernelPublisher": true? From
 * --trust; with upstreams and the org not named there, from the upstream's answer (the memoised
 * pass-through the overview route uses, so a fleet's refs cost the upstream one overview per
 * revision TTL). A false or failed answer: false (the client then asks the overview itself). */
bool srv_repo_publisher_trusted(srv_server *srv, const char *repo_id) {
    const char *slash = repo_id ? strchr(repo_id, '/') : NULL;
    if (!slash || slash == repo_id || (size_t)(slash - repo_id) > 96) return false;
    char org[128];
    snprintf(org, sizeof org, "%.*s", (int)(slash - repo_id), repo_id);
    bool named = false, star = false;
    for (size_t i = 0; i < srv->n_trusted; i++) {
        if (strcmp(srv->trusted[i], org) == 0) named = true;
        if (strcmp(srv->trusted[i], "*") == 0) star = true;
    }
    if (named) return true;
    if (!srv->up) return star; /* the repo is in the store, so its namespace exists */
    char *pq = hk__asprintf("/api/organizations/%s/overview", org);
    char *body = NULL;
    up_mark mark = UP_NONE;
    up_answer ans;
    memset(&ans, 0, sizeof ans);
    bool trusted = false;
    if (pq && srv_up_passthrough(srv, pq, &body, &mark, &ans) == 0 && body) {
        cJSON *j = cJSON_Parse(body);
        trusted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "trustedKernelPublisher"));
        cJSON_Delete(j);
    }
    hk_clear_error();
    free(body);
    free(pq);
    return trusted;
}

enum MHD_Result srv_handle_org(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
                                  const token_spec *who) {
    char *org = srv_seg_decode(s, 2);
    /* A namespace the token does not grant answers exactly like one that does not exist, so that a
     * scoped token cannot learn which other namespaces the store holds. */
    if (!org || !hk_repo_id_valid(org) || strchr(org, '/') || !srv_token_allows_namespace(who, org)) {
        free(org);
        return srv_send_error(c, ctx, 404, NULL, NULL, "Organization not found");
    }
    bool trusted = false, named = false;
    for (size_t i = 0; i < srv->n_trusted; i++) {
        if (strcmp(srv->trusted[i], org) == 0) named = true;
        if (strcmp(srv->trusted[i], org) == 0 || strcmp(srv->trusted[i], "*") == 0) trusted = true;
    }
    bool exists = srv_store_has_namespace(srv->store, org);
    if (!named && srv->up) { /* the upstream's own answer, memoised (--trust ORG overrides it) */
        char *pq = hk__asprintf("/api/organizations/%s/overview", org);
        free(org);
        enum MHD_Result ret = pq ? srv_up_json(srv, c, ctx, pq, NULL) : MHD_NO;
        free(pq);
        return ret;
    }
    if (!exists && !named) {
        free(org);
        return srv_send_error(c, ctx, 404, NULL, NULL, "Organization not found");
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "{\"name\":");
    hk__sb_json_str(&sb, org);
    hk__sb_append(&sb, ",\"fullname\":");
    hk__sb_json_str(&sb, org);
    hk__sb_printf(&sb, ",\"avatarUrl\":\"\",\"type\":\"org\",\"isVerified\":false,\"trustedKernelPublisher\":%s}",
                 trusted ? "true" : "false");
    free(org);
    return srv_send_json(c, ctx, 200, &sb, NULL);
}
