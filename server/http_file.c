/* File answers: resolve (/[datasets/|spaces/|kernels/]{repo}/resolve/{rev}/{path}), and the signed
 * blob route /lfs/T/{repo}/{sha256}?commit=&sig= that --lfs-302 redirects LFS files to, as the Hub
 * redirects them to its CDN. The signature is an HMAC under a key drawn when the server starts. */
#include "server/srv_http.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void lfs_sig(srv_server *srv, char out[65], hk_repo_type type, const char *repo_id, const char *sha,
                    const char *commit) {
    char *msg = hk__asprintf("%s/%s/%s/%s", hk_repo_type_plural(type), repo_id, sha, commit);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    out[0] = '\0';
    if (!msg) return;
    if (HMAC(EVP_sha256(), srv->lfs_key, sizeof srv->lfs_key, (const unsigned char *)msg, strlen(msg), mac, &ml))
        hk__hex(out, mac, ml > 32 ? 32 : ml);
    free(msg);
}

static enum MHD_Result redirect_lfs(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                    srv_sfile *f, const char *commit) {
    char sig[65];
    lfs_sig(srv, sig, repo->type, repo->id, f->etag, commit);
    char *base = srv_base_url(srv); /* relative without --public-url: never the request's Host */
    char *loc = base ? hk__asprintf("%s/lfs/%s/%s/%s?commit=%s&sig=%s", base, hk_repo_type_plural(repo->type), repo->id,
                                   f->etag, commit, sig)
                     : NULL;
    free(base);
    close(f->fd);
    f->fd = -1;
    if (!loc) return MHD_NO;
    hk_strbuf b;
    hk__sb_init(&b);
    hk__sb_printf(&b, "Found. Redirecting to %s", loc);
    size_t blen = b.len;
    char *data = hk__sb_steal(&b);
    struct MHD_Response *r = data ? MHD_create_response_from_buffer(blen, data, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(data);
        free(loc);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Location", loc);
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    srv_add_file_headers(r, f, commit);
    free(loc);
    return srv_queue(c, ctx, 302, r, blen);
}

enum MHD_Result srv_handle_lfs(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                  const seglist *s) {
    hk_repo_type type;
    int trc = s->n > 1 ? hk_repo_type_parse(&type, s->d[1]) : HK_ERR_INVALID_ARG;
    hk_clear_error();
    if (trc || s->n < 4) return srv_send_error(c, ctx, 404, NULL, NULL, "Not found");
    static const char *const none[] = {NULL};
    repo_ref repo;
    repo_parse pr = srv_parse_repo(&repo, srv, s, 2, type, none);
    if (pr == REPO_INVALID) {
        srv_repo_ref_free(&repo);
        return srv_repo_invalid(c, ctx);
    }
    if (pr != REPO_OK || repo.next + 1 != s->n || !repo.dir) {
        srv_repo_ref_free(&repo);
        return srv_send_error(c, ctx, 404, NULL, NULL, "Not found");
    }
    char *sha = srv_seg_decode(s, repo.next);
    const char *commit = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "commit");
    const char *sig = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "sig");
    char want[65];
    bool ok = sha && sig && hk__is_commit_id(commit);
    if (ok) {
        lfs_sig(srv, want, type, repo.id, sha, commit);
        ok = strlen(sig) == 64 && CRYPTO_memcmp(sig, want, 64) == 0;
    }
    enum MHD_Result ret;
    srv_sfile f;
    if (!ok) {
        ret = srv_send_error(c, ctx, 403, NULL, NULL, "Invalid or missing blob signature");
    } else if (srv_store_open_blob(&f, srv->store, repo.dir, sha) != HK_OK) {
        hk_clear_error();
        ret = srv_send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found");
    } else {
        ret = srv_serve_file(srv, c, ctx, method, &f, commit, NULL);
    }
    free(sha);
    srv_repo_ref_free(&repo);
    return ret;
}

/* "kernels/x/resolve/..." could be the kernel x or the model "kernels/x": the typed repo wins unless
 * only the model exists. Returns the segment where the repo id starts and sets *type. */
/* *found: the repo the probe parsed when it is the answer (its parse is not done twice; id NULL
 * otherwise). */
static size_t resolve_repo_start(srv_server *srv, const seglist *s, hk_repo_type *type, repo_ref *found) {
    static const char *const kws[] = {"resolve", NULL};
    static const char *const prefixes[] = {NULL, "datasets", "spaces", "kernels"};
    size_t at = 0;
    *type = HK_REPO_MODEL;
    memset(found, 0, sizeof *found);
    for (int i = 1; i < 4; i++) {
        if (srv_seg_is(s, 0, prefixes[i]) && s->n >= 4) {
            repo_ref probe;
            bool okp = srv_parse_repo(&probe, srv, s, 1, (hk_repo_type)i, kws) == REPO_OK && probe.dir;
            if (okp) *found = probe;
            else srv_repo_ref_free(&probe);
            repo_ref mprobe;
            memset(&mprobe, 0, sizeof mprobe);
            bool okm = !okp && srv_parse_repo(&mprobe, srv, s, 0, HK_REPO_MODEL, kws) == REPO_OK && mprobe.dir;
            srv_repo_ref_free(&mprobe);
            if (okp || !okm) {
                *type = (hk_repo_type)i;
                at = 1;
            }
        }
    }
    return at;
}

/* May this request's answer come from, or go into, the memo? A plain-mirror GET of the whole
 * file, without a condition (304s and ranges are answered afresh). */
static bool memo_eligible(srv_server *srv, struct MHD_Connection *c, bool is_get) {
    if (!srv->memo || !is_get) return false;
#ifdef HK_TEST_HOOKS
    if (srv->fault.cut_after) return false; /* a cut answer must be made per request */
#endif
    return !MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range") &&
           !MHD_lookup_connection_value(c, MHD_HEADER_KIND, "If-None-Match");
}

/* The memo key of a file answer: repo folder, commit, path, and whether it was asked by commit
 * (its Cache-Control differs). 0 when it does not fit (that answer is not kept). */
static size_t memo_key(char *out, size_t cap, const char *repo_dir, const char *commit, const char *path,
                       int cacheable) {
    size_t a = strlen(repo_dir), b = strlen(commit), p = strlen(path);
    if (a + b + p + 4 > cap) return 0;
    memcpy(out, repo_dir, a + 1);
    memcpy(out + a + 1, commit, b + 1);
    memcpy(out + a + b + 2, path, p + 1);
    out[a + b + p + 3] = (char)('0' + cacheable);
    return a + b + p + 4;
}

/* Answered (*ret) from the memo when its proof still holds; a failed proof drops the entry. */
static bool memo_answer(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *repo_dir,
                        const char *commit, const char *path, const char *key, size_t klen,
                        enum MHD_Result *ret) {
    const void *proof;
    size_t plen;
    srv_memo_entry *e = srv_memo_find(srv->memo, key, klen, &proof, &plen);
    if (!e) return false;
    srv_kept_file kf;
    bool ok = plen == sizeof kf;
    if (ok) memcpy(&kf, proof, sizeof kf);
    if (ok && srv_store_file_unchanged(srv->store, repo_dir, commit, path, kf.etag, &kf.proof)) {
        *ret = srv_memo_send(srv->memo, e, c, ctx);
        return true;
    }
    srv_memo_unpin(srv->memo, e, true);
    return false;
}

/* A file the store lacks, from upstream: 0 = now in the store, else *ans says why not. */
static int up_file(srv_server *srv, req_ctx *ctx, const repo_ref *repo, const char *commit, const char *path,
                   up_answer *ans) {
    up_mark mark = UP_NONE;
    int r = srv_up_file(srv, repo, commit, path, &mark, ans);
    srv_note_mark(ctx, mark);
    return r;
}

/* The file from the store, else (with --upstream) from upstream. 0: *f open; 1: not there (*ans
 * says why, status 0: 404); 2: answered (*ret) by the revision step, taken again first when a kept
 * verdict passed it: another process may have marked the commit's manifest partial, and then the
 * commit is asked upstream again before its claims are believed. */
static int open_or_fetch(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                         size_t at, const char *commit, const char *path, srv_sfile *f, srv_file_proof *proof,
                         up_answer *ans, enum MHD_Result *ret) {
    if (srv_store_open_file_proved(f, proof, srv->store, repo->dir, commit, path) == HK_OK) return 0;
    hk_clear_error();
    if (!srv->up) return 1;
    if (srv_route_retake(srv, c, ctx, repo, s, at, false, ret) == 1) return 2;
    if (!repo->dir || up_file(srv, ctx, repo, commit, path, ans) ||
        srv_store_open_file(f, srv->store, repo->dir, commit, path) != HK_OK) {
        hk_clear_error();
        return 1;
    }
    return 0;
}

enum MHD_Result srv_handle_resolve(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                      const seglist *s, const token_spec *who) {
    static const char *const kws[] = {"resolve", NULL};
    bool is_get = strcmp(method, "GET") == 0, is_head = strcmp(method, "HEAD") == 0;
    hk_repo_type type;
    repo_ref repo;
    size_t at = resolve_repo_start(srv, s, &type, &repo);
    repo_parse pr = repo.id ? REPO_OK : srv_parse_repo(&repo, srv, s, at, type, kws);
    if (pr == REPO_INVALID) {
        srv_repo_ref_free(&repo);
        return srv_repo_invalid(c, ctx);
    }
    if (pr != REPO_OK || !srv_seg_is(s, repo.next, "resolve")) {
        srv_repo_ref_free(&repo);
        return srv_send_error(c, ctx, 404, NULL, NULL, "Not found");
    }
    enum MHD_Result ret;
    char commit[65];
    char *rev = NULL;
    size_t used = 0;
    size_t a = repo.next + 1;
    if (!is_get && !is_head) {
        ret = srv_method_not_allowed(c, ctx);
    } else if (!srv_token_allows(who, &repo)) {
        ret = srv_send_error(c, ctx, 403, "GatedRepo", NULL, "Access to %s is restricted: this token does not grant it",
                                repo.id);
    } else if (srv_route_rev(srv, c, ctx, &repo, s, a, false, commit, &rev, &used, &ret)) {
        /* answered: upstream refused, or no such repo or revision */
    } else {
        bool bad;
        char *path = srv_join_path(s, a + used, &bad);
        srv_sfile f;
        up_answer ans;
        memset(&ans, 0, sizeof ans);
        ctx->cacheable = hk__is_commit_id(rev) ? 2 : 1;
        char key[HK_SRV_MAX_URL];
        srv_file_memo fm = {.key = key};
        int got;
        if (path && !bad && *path && memo_eligible(srv, c, is_get))
            fm.klen = memo_key(key, sizeof key, repo.dir, commit, path, ctx->cacheable);
        if (bad || !path) {
            ret = srv_send_error(c, ctx, 400, NULL, NULL, "Invalid path");
        } else if (!*path) {
            ret = srv_send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found");
        } else if (fm.klen && memo_answer(srv, c, ctx, repo.dir, commit, path, key, fm.klen, &ret)) {
            /* the kept answer, proven unchanged */
        } else if ((got = open_or_fetch(srv, c, ctx, &repo, s, a, commit, path, &f, fm.klen ? &fm.proof : NULL, &ans,
                                        &ret)) != 0) {
            if (got == 2) { /* answered by the revision step */
            } else if (ans.status) ret = srv_send_up_answer(c, ctx, &ans, commit);
            else ret = srv_send_error(c, ctx, 404, "EntryNotFound", commit, "Entry not found");
        } else if (srv->lfs_302 && f.lfs) {
            ret = redirect_lfs(srv, c, ctx, &repo, &f, commit);
        } else {
            ret = srv_serve_file(srv, c, ctx, method, &f, commit, fm.klen ? &fm : NULL);
        }
        free(path);
    }
    free(rev);
    srv_repo_ref_free(&repo);
    return ret;
}
