/* POST /api/T/{repo}/paths-info/{rev}: entries for paths=... (form body) or {"paths": [...]} (JSON).
 * Each path is answered once, in the order first asked. Duplicates are found with a hash set so
 * that the work stays linear in the number of paths: a 1 MiB body holds about 100k of them, and
 * a pairwise check took seconds of a worker thread per request (issue 17, item 4). */
#include "server/srv_http.h"

#include "util/vec.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct path_vec {
    char **v;
    size_t n, cap;
} path_vec;

static void path_vec_free(path_vec *pv) {
    for (size_t i = 0; i < pv->n; i++) free(pv->v[i]);
    free(pv->v);
    memset(pv, 0, sizeof *pv);
}

/* Takes `s` (freed on failure). */
static int path_vec_push(path_vec *pv, char *s) {
    if (HK_VEC_RESERVE(pv->v, pv->cap, pv->n + 1) != HK_OK) {
        free(s);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    pv->v[pv->n++] = s;
    return HK_OK;
}

/* Open-addressing set of borrowed strings; capacity a power of two, at most half full. */
typedef struct path_set {
    const char **slot;
    size_t mask;
} path_set;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ULL;
    return h;
}

static int path_set_init(path_set *ps, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    ps->slot = calloc(cap, sizeof *ps->slot);
    ps->mask = cap - 1;
    return ps->slot ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

/* Adds s; false when it was already there. */
static bool path_set_add(path_set *ps, const char *s) {
    for (size_t i = (size_t)fnv1a(s) & ps->mask;; i = (i + 1) & ps->mask) {
        if (!ps->slot[i]) {
            ps->slot[i] = s;
            return true;
        }
        if (strcmp(ps->slot[i], s) == 0) return false;
    }
}

static int parse_json_paths(path_vec *pv, const char *body, size_t len) {
    cJSON *j = cJSON_ParseWithLength(body, len);
    cJSON *paths = j ? cJSON_GetObjectItemCaseSensitive(j, "paths") : NULL;
    cJSON *it;
    int rc = HK_OK;
    cJSON_ArrayForEach(it, paths) {
        if (!cJSON_IsString(it)) continue;
        char *d = hk__strdup(it->valuestring);
        if (!d) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        else rc = path_vec_push(pv, d);
        if (rc != HK_OK) break;
    }
    cJSON_Delete(j);
    return rc;
}

static int parse_form_paths(path_vec *pv, const char *body) {
    for (const char *p = body; *p;) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        if (eq && (size_t)(eq - p) == 5 && strncmp(p, "paths", 5) == 0) {
            char *d = hk__pct_decode(eq + 1, len - 6, true);
            if (d && path_vec_push(pv, d) != HK_OK) return HK_ERR_NOMEM;
        }
        p += len;
        if (*p == '&') p++;
    }
    return HK_OK;
}

/* paths=... from a form body, or {"paths": [...]} from a JSON body. */
static int parse_paths_body(path_vec *pv, const req_ctx *ctx, struct MHD_Connection *c) {
    memset(pv, 0, sizeof *pv);
    const char *body = ctx->body.data ? ctx->body.data : "";
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    int rc = ct && strncasecmp(ct, "application/json", 16) == 0 ? parse_json_paths(pv, body, ctx->body.len)
                                                                 : parse_form_paths(pv, body);
    if (rc != HK_OK) path_vec_free(pv);
    return rc;
}

enum MHD_Result srv_handle_paths_info(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx,
                                         const repo_ref *repo, const char *commit) {
    if (ctx->body_too_big || ctx->body.len > HK_SRV_MAX_BODY) return srv_send_error(c, ctx, 413, NULL, NULL, "Request body too large");
    path_vec paths;
    path_set seen = {0};
    if (parse_paths_body(&paths, ctx, c) != HK_OK || path_set_init(&seen, paths.n) != HK_OK) {
        hk_clear_error();
        path_vec_free(&paths);
        return MHD_NO;
    }
    const srv_listing *lp = NULL;
    if (srv_store_list_shared(&lp, srv->store, repo->dir, commit) != HK_OK) {
        hk_clear_error();
        path_vec_free(&paths);
        free(seen.slot);
        return srv_send_error(c, ctx, 500, NULL, NULL, "Cannot read the snapshot");
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "[");
    bool first = true;
    for (size_t i = 0; i < paths.n; i++) {
        if (!path_set_add(&seen, paths.v[i])) continue;
        long idx = srv_listing_find(lp, paths.v[i]);
        if (idx < 0) continue;
        if (!first) hk__sb_append(&sb, ",");
        first = false;
        srv_json_entry(&sb, &lp->v[idx]);
    }
    hk__sb_append(&sb, "]");
    srv_store_list_release(srv->store, lp);
    path_vec_free(&paths);
    free(seen.slot);
    return srv_send_json(c, ctx, 200, &sb, NULL);
}
