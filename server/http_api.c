/* The /api/ JSON answers in the Hub's shapes: repo info (siblings, ?blobs=true), tree pages with
 * Link rel="next", refs (branches, tags, ?include_prs=1). The organization overview is in
 * http_org.c. */
#include "server/srv_http.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void srv_json_entry(hk_strbuf *sb, const srv_sentry *e) {
    if (e->is_dir) {
        hk__sb_append(sb, "{\"type\":\"directory\",\"oid\":\"");
        hk__sb_append(sb, e->oid);
        hk__sb_append(sb, "\",\"size\":0,\"path\":");
        hk__sb_json_str(sb, e->path);
        hk__sb_append(sb, "}");
        return;
    }
    hk__sb_printf(sb, "{\"type\":\"file\",\"oid\":\"%s\",\"size\":%llu,\"path\":", e->oid, (unsigned long long)e->size);
    hk__sb_json_str(sb, e->path);
    if (e->lfs)
        hk__sb_printf(sb, ",\"lfs\":{\"oid\":\"%s\",\"size\":%llu,\"pointerSize\":%zu}", e->etag,
                     (unsigned long long)e->size, e->pointer_size);
    hk__sb_append(sb, "}");
}

/* The entry's JSON from its memo, rendered into it the first time (a race renders it twice and
 * keeps one). The memo is the one part of a shared listing that changes. */
static void append_entry(hk_strbuf *sb, const srv_sentry *e) {
    srv_sentry *m = (srv_sentry *)e;
    char *j = atomic_load_explicit(&m->json, memory_order_acquire);
    if (!j) {
        hk_strbuf t;
        hk__sb_init(&t);
        srv_json_entry(&t, e);
        char *mine = hk__sb_steal(&t);
        if (!mine) { /* out of memory: this answer formats it itself */
            srv_json_entry(sb, e);
            return;
        }
        char *none = NULL;
        if (atomic_compare_exchange_strong(&m->json, &none, mine)) j = mine;
        else {
            free(mine);
            j = none;
        }
    }
    hk__sb_append(sb, j);
}

enum MHD_Result srv_handle_repo_info(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx,
                                        const repo_ref *repo, const char *commit) {
    const srv_listing *lp = NULL;
    if (srv_store_list_shared(&lp, srv->store, repo->dir, commit) != HK_OK) {
        hk_clear_error();
        return srv_send_error(c, ctx, 500, NULL, NULL, "Cannot read the snapshot");
    }
    const srv_listing l = *lp;
    bool blobs = srv_query_true(c, "blobs");
    char *snap = hk_cache_snapshot_path(repo->dir, commit, NULL);
    struct stat st;
    time_t mtime = snap && stat(snap, &st) == 0 ? st.st_mtime : time(NULL);
    if (!snap) hk_clear_error();
    hk_free(snap);
    char when[32];
    srv_iso_time(when, mtime);
    const char *slash = strchr(repo->id, '/');
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "{\"_id\":");
    hk__sb_json_str(&sb, repo->id);
    hk__sb_append(&sb, ",\"id\":");
    hk__sb_json_str(&sb, repo->id);
    if (repo->type == HK_REPO_MODEL) {
        hk__sb_append(&sb, ",\"modelId\":");
        hk__sb_json_str(&sb, repo->id);
    }
    if (slash) {
        char *author = hk__strndup(repo->id, (size_t)(slash - repo->id));
        hk__sb_append(&sb, ",\"author\":");
        hk__sb_json_str(&sb, author ? author : "");
        free(author);
    }
    hk__sb_printf(&sb,
                 ",\"sha\":\"%s\",\"lastModified\":\"%s\",\"createdAt\":\"%s\",\"private\":false,\"gated\":false,"
                 "\"disabled\":false,\"downloads\":0,\"likes\":0,\"tags\":[],\"usedStorage\":%llu,\"siblings\":[",
                 commit, when, when, (unsigned long long)l.total_bytes);
    bool first = true;
    for (size_t i = 0; i < l.n; i++) {
        const srv_sentry *e = &l.v[i];
        if (e->is_dir) continue;
        if (!first) hk__sb_append(&sb, ",");
        first = false;
        hk__sb_append(&sb, "{\"rfilename\":");
        hk__sb_json_str(&sb, e->path);
        if (blobs) {
            hk__sb_printf(&sb, ",\"size\":%llu,\"blobId\":\"%s\"", (unsigned long long)e->size, e->oid);
            if (e->lfs)
                hk__sb_printf(&sb, ",\"lfs\":{\"sha256\":\"%s\",\"size\":%llu,\"pointerSize\":%zu}", e->etag,
                             (unsigned long long)e->size, e->pointer_size);
        }
        hk__sb_append(&sb, "}");
    }
    hk__sb_append(&sb, "]}");
    srv_store_list_release(srv->store, lp);
    return srv_send_json(c, ctx, 200, &sb, NULL);
}

/* Link to the page that starts at listing index `next_cursor`. */
static char *tree_next_link(srv_server *srv, const repo_ref *repo, const char *commit,
                            const char *path, bool recursive, size_t next_cursor) {
    char *base = srv_base_url(srv); /* "" without --public-url: a relative link */
    hk_strbuf lk;
    hk__sb_init(&lk);
    hk__sb_printf(&lk, "<%s/api/%s/%s/tree/%s", base ? base : "", hk_repo_type_plural(repo->type), repo->id, commit);
    if (*path) {
        hk__sb_append(&lk, "/");
        hk__sb_pct_encode(&lk, path, true);
    }
    hk__sb_printf(&lk, "?recursive=%s&expand=false&cursor=%zu>; rel=\"next\"", recursive ? "true" : "false",
                 next_cursor);
    free(base);
    return hk__sb_steal(&lk);
}

/* The memo key of a tree page: what the page depends on besides the listing. 0: too long. */
static size_t tree_key(char *out, size_t cap, const char *repo_dir, const char *commit, const char *path,
                       bool recursive, size_t cursor, int cacheable) {
    /* copied, not formatted: snprintf was ~4 % of a kept page's answer */
    size_t a = strlen(repo_dir), b = strlen(commit), p = strlen(path);
    if (a + b + p + 32 > cap) return 0;
    char *o = out;
    memcpy(o, "tree", 5);
    o += 5;
    memcpy(o, repo_dir, a + 1);
    o += a + 1;
    memcpy(o, commit, b + 1);
    o += b + 1;
    memcpy(o, path, p + 1);
    o += p + 1;
    *o++ = recursive ? 'r' : '-';
    *o++ = (char)('0' + cacheable);
    do { /* the cursor's digits, lowest first: a key only needs to be unique */
        *o++ = (char)('0' + cursor % 10);
        cursor /= 10;
    } while (cursor);
    return (size_t)(o - out);
}

enum MHD_Result srv_handle_tree(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                   const char *commit, const char *path) {
    const srv_listing *lp = NULL;
    if (srv_store_list_shared(&lp, srv->store, repo->dir, commit) != HK_OK) {
        hk_clear_error();
        return srv_send_error(c, ctx, 500, NULL, NULL, "Cannot read the snapshot");
    }
    const srv_listing l = *lp;
    size_t first = 0; /* the folder's entries follow it in the listing's order ('/' sorts lowest) */
    if (*path) {
        long k = srv_listing_find(&l, path);
        if (k >= 0) first = (size_t)k + 1;
        if (k < 0 || !l.v[k].is_dir) {
            srv_store_list_release(srv->store, lp);
            return srv_send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found: %s is not a directory",
                                     path);
        }
    }
    bool recursive = srv_query_true(c, "recursive");
    const char *cur = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
    size_t cursor = 0;
    if (cur && *cur) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cur, &end, 10);
        if (errno || *end || cur[0] < '0' || cur[0] > '9') {
            srv_store_list_release(srv->store, lp);
            return srv_send_error(c, ctx, 400, NULL, NULL, "Invalid cursor");
        }
        cursor = (size_t)v;
    }
    size_t plen = strlen(path);
    /* a page is kept with the number of the listing it was made from: the same listing (the
     * store's shared one, renewed after its TTL) gives the same page */
    char key[HK_SRV_MAX_URL];
    size_t klen = srv->memo && l.gen ? tree_key(key, sizeof key, repo->dir, commit, path, recursive, cursor,
                                                ctx->cacheable)
                                     : 0;
    if (klen) {
        const void *proof;
        size_t pl;
        srv_memo_entry *e = srv_memo_find(srv->memo, key, klen, &proof, &pl);
        if (e && pl == sizeof l.gen && memcmp(proof, &l.gen, sizeof l.gen) == 0) {
            srv_store_list_release(srv->store, lp);
            return srv_memo_send(srv->memo, e, c, ctx);
        }
        if (e) srv_memo_unpin(srv->memo, e, true);
    }
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "[");
    /* the cursor is the listing index of the page's first entry (a commit's listing never
     * changes), so a page costs O(page), not a walk over every entry before it: listing n
     * entries in pages is O(n), not O(n^2 / page) */
    size_t emitted = 0, next = 0;
    bool more = false;
    for (size_t i = cursor > first ? cursor : first; i < l.n; i++) {
        const char *p = l.v[i].path;
        const char *rest;
        if (plen) {
            if (strncmp(p, path, plen) != 0 || p[plen] != '/') break; /* past the folder's entries */
            rest = p + plen + 1;
        } else {
            rest = p;
        }
        if (!recursive && strchr(rest, '/')) continue;
        if (emitted == srv->page_size) {
            more = true;
            next = i;
            break;
        }
        if (emitted) hk__sb_append(&sb, ",");
        append_entry(&sb, &l.v[i]);
        emitted++;
    }
    hk__sb_append(&sb, "]");
    srv_store_list_release(srv->store, lp);
    char *link = more ? tree_next_link(srv, repo, commit, path, recursive, next) : NULL;
    if (!klen) {
        enum MHD_Result ret = srv_send_json(c, ctx, 200, &sb, link);
        free(link);
        return ret;
    }
    size_t len;
    struct MHD_Response *r = srv_json_response(ctx, &sb, link, &len);
    free(link);
    if (!r) return MHD_NO;
    enum MHD_Result ret = srv_queue_keep(c, ctx, 200, r, len);
    if (ret == MHD_YES) srv_memo_keep(srv->memo, key, klen, &l.gen, sizeof l.gen, r, 200, len);
    else MHD_destroy_response(r);
    return ret;
}

/* The memo key of a refs answer: the repo and what else changes its bytes or headers. */
static size_t refs_key(char *out, size_t cap, const char *repo_dir, bool prs, const req_ctx *ctx) {
    size_t a = strlen(repo_dir);
    if (a + 16 > cap) return 0;
    memcpy(out, "refs", 5);
    memcpy(out + 5, repo_dir, a + 1);
    char *o = out + 5 + a + 1;
    *o++ = prs ? 'p' : '-';
    *o++ = ctx->publisher_trusted ? 't' : '-';
    *o++ = (char)('0' + ctx->cacheable);
    return (size_t)(o - out);
}

enum MHD_Result srv_handle_refs(struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo, srv_memo *memo) {
    bool prs = srv_query_true(c, "include_prs");
    /* kept with the number of the refs' reading it was made from: while the ref files and folders
     * still show what was read (store_refs.c), the same bytes */
    char key[HK_SRV_MAX_URL];
    size_t klen = memo ? refs_key(key, sizeof key, repo->dir, prs, ctx) : 0;
    if (klen) {
        uint64_t now = srv_store_refs_gen(repo->dir);
        const void *proof;
        size_t pl;
        srv_memo_entry *e = now ? srv_memo_find(memo, key, klen, &proof, &pl) : NULL;
        if (e && pl == sizeof now && memcmp(proof, &now, sizeof now) == 0) return srv_memo_send(memo, e, c, ctx);
        if (e) srv_memo_unpin(memo, e, true);
    }
    srv_ref *refs = NULL;
    size_t n = 0;
    uint64_t gen = 0;
    if (srv_store_list_refs_gen(&refs, &n, &gen, repo->dir) != HK_OK) {
        hk_clear_error();
        return srv_send_error(c, ctx, 500, NULL, NULL, "Cannot read the refs");
    }
    hk_strbuf br, tg, pr;
    hk__sb_init(&br);
    hk__sb_init(&tg);
    hk__sb_init(&pr);
    for (size_t i = 0; i < n; i++) {
        const char *name = refs[i].name;
        hk_strbuf *sb;
        const char *shown = name;
        char *full = NULL;
        if (hk__str_starts_with(name, "refs/pr/")) {
            sb = &pr;
            full = hk__strdup(name);
        } else if (hk__str_starts_with(name, "refs/tags/")) {
            sb = &tg;
            shown = name + 10;
            full = hk__strdup(name);
        } else if (hk__str_starts_with(name, "refs/heads/")) {
            sb = &br;
            shown = name + 11;
            full = hk__strdup(name);
        } else if (hk__str_starts_with(name, "refs/")) {
            continue;
        } else {
            sb = &br;
            full = hk__asprintf("refs/heads/%s", name);
        }
        if (sb->len) hk__sb_append(sb, ",");
        hk__sb_append(sb, "{\"name\":");
        hk__sb_json_str(sb, shown);
        hk__sb_append(sb, ",\"ref\":");
        hk__sb_json_str(sb, full ? full : "");
        hk__sb_printf(sb, ",\"targetCommit\":\"%s\"}", refs[i].commit);
        free(full);
    }
    srv_refs_free(refs, n);
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_printf(&sb, "{\"branches\":[%s],\"tags\":[%s],\"converts\":[]", br.data ? br.data : "",
                 tg.data ? tg.data : "");
    if (prs) hk__sb_printf(&sb, ",\"pullRequests\":[%s]", pr.data ? pr.data : "");
    hk__sb_append(&sb, "}");
    hk__sb_free(&br);
    hk__sb_free(&tg);
    hk__sb_free(&pr);
    if (!klen || !gen) return srv_send_json(c, ctx, 200, &sb, NULL);
    size_t len;
    struct MHD_Response *r = srv_json_response(ctx, &sb, NULL, &len);
    if (!r) return MHD_NO;
    enum MHD_Result ret = srv_queue_keep(c, ctx, 200, r, len);
    if (ret == MHD_YES) srv_memo_keep(memo, key, klen, &gen, sizeof gen, r, 200, len);
    else MHD_destroy_response(r);
    return ret;
}
