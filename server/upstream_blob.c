/* Blobs from upstream, once each: threads of this process wait on the leader (upstream_wait.c),
 * processes over the same store wait on .locks/<repo folder>/<etag>.lock (the lock file
 * huggingface_hub takes for the same blob, so a Python client filling the store at the same time is
 * coordinated too). The body goes to a temporary file in blobs/ while its sha256 (LFS) or git blob
 * sha1 is computed; it becomes blobs/<etag> by rename only when size and digest match what the
 * manifest promised and the upstream's headers (X-Linked-Etag, X-Linked-Size, ETag) agree. A lie
 * leaves nothing behind and the client gets a 502: neither the bytes nor the claim they contradict
 * (the manifest is demoted to its verified entries, srv_manifest_reject), so that once the upstream
 * is honest again the next request is answered. */
#include "server/srv_http.h"

#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool blob_present(const char *repo_dir, const char *etag) {
    char *p = hk_cache_blob_path(repo_dir, etag);
    struct stat st;
    bool ok = p && lstat(p, &st) == 0 && S_ISREG(st.st_mode);
    if (!p) hk_clear_error();
    hk_free(p);
    return ok;
}

/* "\"abc\"" or W/"abc" → abc */
static void unquote(char *out, size_t cap, const char *v) {
    if (v[0] == 'W' && v[1] == '/') v += 2;
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n >= cap) n = cap - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

/* What is wrong with the body just received, or NULL when it is what was promised. */
static const char *check_body(up_resp *r, const srv_sentry *e, const char *digest) {
    if (r->status != 200) return "status";
    if (r->written != e->size) return "size";
    if (r->linked_size[0] && strtoull(r->linked_size, NULL, 10) != e->size) return "X-Linked-Size";
    char h[80];
    if (r->linked_etag[0]) {
        unquote(h, sizeof h, r->linked_etag);
        if (strcmp(h, e->etag) != 0) return "X-Linked-Etag";
    }
    if (r->etag[0] && !e->lfs) {
        unquote(h, sizeof h, r->etag);
        if ((hk__is_hex(h, 40) || hk__is_hex(h, 64)) && strcmp(h, e->etag) != 0) return "ETag";
    }
    if (strcmp(digest, e->etag) != 0) return e->lfs ? "sha256" : "git sha1";
    return NULL;
}

/* One transfer into blobs/<etag>. 0 = done; 1 = *ans says why not. */
static int fetch_blob(srv_server *srv, const repo_ref *repo, const char *commit, const srv_sentry *e, const char *key,
                      up_answer *ans) {
    static const char *const prefix[] = {"", "datasets/", "spaces/", "kernels/"};
    char *blobs = hk_cache_repo_part(repo->dir, "blobs");
    char *tmp = blobs ? hk__asprintf("%s/.hk-upstream-%s.%ld.tmp", blobs, e->etag, (long)getpid()) : NULL;
    char *final = blobs ? hk_cache_blob_path(repo->dir, e->etag) : NULL;
    char *epath = hk__pct_encode(e->path, true);
    char *pq = epath ? hk__asprintf("/%s%s/resolve/%s/%s", prefix[repo->type], repo->id, commit, epath) : NULL;
    free(epath);
    int out = 1;
    int fd = -1;
    if (!tmp || !final || !pq || hk__mkdirs(blobs, 0755) != HK_OK ||
        (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        snprintf(ans->msg, sizeof ans->msg, "cannot write into the store");
        ans->status = 500;
        goto done;
    }
    up_resp r;
    srv_up_resp_init(&r);
    r.fd = fd;
    r.max_body = e->size;
    r.lead_key = key;
    unsigned backoff = 0;
    int rc = HK_OK;
    for (int attempt = 0; attempt < 2; attempt++) { /* one retry of a cut body, from scratch */
        r.h256 = e->lfs ? hk__hasher_new(HK_HASH_SHA256, 0) : NULL;
        r.hgit = e->lfs ? NULL : hk__hasher_new(HK_HASH_GIT_BLOB, e->size);
        atomic_fetch_add(&srv->metrics.up_fetches, 1);
        rc = srv_up_get(srv->up, pq, &r, &backoff);
        /* shorter than claimed: taken for a cut body once; a second time it is what upstream has */
        if (rc == HK_OK && r.status == 200 && r.written < e->size && attempt == 0)
            rc = hk__fail(HK_ERR_NETWORK, "upstream body cut");
        if (rc != HK_ERR_NETWORK || backoff) break;
        hk__hasher_free(r.h256);
        hk__hasher_free(r.hgit);
        r.h256 = r.hgit = NULL;
    }
    unsigned char dig[64];
    char hex[129] = "";
    hk_hasher *hh = r.h256 ? r.h256 : r.hgit;
    if (hh) hk__hex(hex, dig, hk__hasher_finish(hh, dig));
    r.h256 = r.hgit = NULL;
    atomic_fetch_add(&srv->metrics.up_bytes, r.written);
    const char *bad = NULL;
    if (rc == HK_OK && r.status == 200 && (bad = check_body(&r, e, hex)) == NULL) {
        if (fsync(fd) == 0 && rename(tmp, final) == 0 &&
            hk_cache_link_snapshot(repo->dir, commit, e->path, e->etag) == HK_OK) {
            out = 0;
        } else {
            ans->status = 500;
            snprintf(ans->msg, sizeof ans->msg, "cannot store the blob: %s", strerror(errno));
        }
    } else if (bad || rc == HK_ERR_INTEGRITY) {
        atomic_fetch_add(&srv->metrics.up_rejected, 1);
        /* the claim goes with the bytes: the listing or the body lied, and which one cannot be told */
        if (srv_manifest_reject(srv_store_root(srv->store), repo->dir, commit) != HK_OK) hk_clear_error();
        srv_store_forget_listing(srv->store, repo->dir, commit);
        srv_up_verdict_forget(srv->up->verdicts, repo->type, repo->id); /* the commit (and its branches) asked again */
        ans->status = 502;
        snprintf(ans->msg, sizeof ans->msg, "Upstream sent %s that does not match what it promised (%s); not kept",
                 e->path, bad ? bad : "size");
        hk__log(HK_LOG_WARN, "upstream lied about %s of %s@%s (%s): nothing kept", e->path, repo->id, commit,
               bad ? bad : "size");
    } else if (rc == HK_OK && (r.status == 404 || r.status == 410)) {
        ans->status = 404;
        ans->code = "EntryNotFound";
        snprintf(ans->msg, sizeof ans->msg, "Entry not found upstream");
    } else if (backoff) {
        atomic_fetch_add(&srv->metrics.up_rate_limited, 1);
        ans->status = 429;
        ans->retry_after = backoff;
        snprintf(ans->msg, sizeof ans->msg, "Upstream rate limit: retry later");
    } else {
        /* a 503, or no answer at all (unreachable, stalled past --upstream-timeout): try again later */
        ans->status = srv_up_unavailable(rc, r.status) ? 503 : 502;
        ans->retry_after = ans->status == 503 ? srv->up->retry_s : 0;
        snprintf(ans->msg, sizeof ans->msg, "Upstream unavailable for %s", e->path);
    }
    if (out) atomic_fetch_add(&srv->metrics.up_errors, 1);
    srv_up_resp_free(&r);
done:
    if (fd >= 0) close(fd);
    if (tmp && out) unlink(tmp);
    hk_clear_error();
    free(tmp);
    free(final);
    free(blobs);
    free(pq);
    return out;
}

/* A file step for a transfer thread: the request's repo, commit and path copied. */
typedef struct file_arg {
    repo_ref repo;
    char *commit, *path;
} file_arg;

static void file_arg_free(void *p) {
    file_arg *a = p;
    if (!a) return;
    free(a->repo.id);
    free(a->repo.dir);
    free(a->commit);
    free(a->path);
    free(a);
}

static void *file_arg_new(const repo_ref *repo, const char *commit, const char *path) {
    file_arg *a = calloc(1, sizeof *a);
    if (a) {
        a->repo.type = repo->type;
        a->repo.id = hk__strdup(repo->id);
        a->repo.dir = hk__strdup(repo->dir);
        a->commit = hk__strdup(commit);
        a->path = hk__strdup(path);
        if (!a->repo.id || !a->repo.dir || !a->commit || !a->path) {
            file_arg_free(a);
            a = NULL;
        }
    }
    hk_clear_error();
    return a;
}

static void file_job(srv_server *srv, void *arg, up_result *res) {
    file_arg *a = arg;
    res->out = srv_up_file(srv, &a->repo, a->commit, a->path, &res->mark, &res->ans);
}

int srv_up_file(srv_server *srv, const repo_ref *repo, const char *commit, const char *path, up_mark *mark,
                   up_answer *ans) {
    *mark = UP_HIT;
    /* this request's file step, found before the listing: a rejected body took its entry out */
    char *skey = hk__asprintf("file:%s@%s/%s", repo->dir ? repo->dir : "", commit, path);
    const up_result *step = skey ? srv_up_step_done(skey) : NULL;
    if (step && step->out) {
        *mark = step->mark;
        *ans = step->ans;
        free(skey);
        return 1;
    }
    const srv_listing *l = NULL;
    if (!repo->dir || srv_store_list_shared(&l, srv->store, repo->dir, commit) != HK_OK) {
        hk_clear_error();
        ans->status = 404;
        ans->code = "EntryNotFound";
        snprintf(ans->msg, sizeof ans->msg, "Entry not found");
        free(skey);
        return 1;
    }
    long i = srv_listing_find(l, path);
    if (i < 0 || l->v[i].is_dir) {
        srv_store_list_release(srv->store, l);
        ans->status = 404;
        ans->code = "EntryNotFound";
        snprintf(ans->msg, sizeof ans->msg, "Entry not found");
        free(skey);
        return 1;
    }
    srv_sentry e = l->v[i];
    char *epath = hk__strdup(e.path);
    srv_store_list_release(srv->store, l);
    if (!epath) {
        free(skey);
        return 1;
    }
    e.path = epath;
    int out = 0;
    char *key = hk__asprintf("blob:%s/%s", repo->dir, e.etag);
    up_answer leader;
    unsigned retry;
    double wait_s = srv_up_wait_s(srv->up, e.size);
    if (step) { /* brought in on a transfer thread for this request (perhaps under another path's name) */
        *mark = step->mark;
    } else if (blob_present(repo->dir, e.etag)) {
        /* another commit (or a client of the store) brought it: only the link is new */
    } else if (!srv_up_client_may_miss(srv->up, &retry)) {
        ans->status = 429;
        ans->retry_after = retry;
        snprintf(ans->msg, sizeof ans->msg, "Too many upstream misses from this client (--client-miss-budget): retry later");
        out = 1;
    } else if (key && srv_up_deferring()) { /* a pool thread: the transfer runs on a transfer thread */
        *mark = UP_NONE;
        out = srv_up_defer(key, skey, file_job, file_arg_new(repo, commit, e.path), file_arg_free, ans);
        free(skey);
        free(key);
        free(epath);
        return out; /* nothing to link yet */
    } else if (key && !srv_up_enter(srv->up->waits, key, wait_s, &srv->up->stopping, &leader)) {
        *mark = UP_COALESCED;
        atomic_fetch_add(&srv->metrics.coalesced, 1);
        if (!blob_present(repo->dir, e.etag)) {
            if (leader.status) { /* the leader's failure, as it answered it */
                *ans = leader;
            } else {
                ans->status = 502;
                snprintf(ans->msg, sizeof ans->msg, "Upstream transfer of %s failed", e.path);
            }
            out = 1;
        }
    } else {
        int fd = srv_up_lock(srv->up, srv_store_root(srv->store), repo->dir, e.etag, wait_s);
        if (fd == -2) { /* another process's transfer of it is past the deadline (or this client left) */
            ans->status = 503;
            ans->retry_after = srv->up->retry_s;
            snprintf(ans->msg, sizeof ans->msg, "Upstream unavailable: another transfer of %s is still running", e.path);
            out = 1;
        } else if (blob_present(repo->dir, e.etag)) {
            *mark = UP_COALESCED; /* another process fetched it while this one waited */
            atomic_fetch_add(&srv->metrics.coalesced, 1);
        } else {
            srv_up_client_spend(srv->up);
            out = fetch_blob(srv, repo, commit, &e, key, ans);
            if (!out) *mark = UP_MISS;
        }
        srv_up_unlock(fd);
        if (key) srv_up_leave(srv->up->waits, key, out ? ans : NULL);
    }
    if (!out && hk_cache_link_snapshot(repo->dir, commit, e.path, e.etag) != HK_OK) {
        hk_clear_error();
        ans->status = 500;
        snprintf(ans->msg, sizeof ans->msg, "cannot link the snapshot entry");
        out = 1;
    }
    free(skey);
    free(key);
    free(epath);
    return out;
}
