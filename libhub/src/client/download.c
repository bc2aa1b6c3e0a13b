/* Parallel blob downloads over one curl multi handle: bounded transfers, per-blob locks shared
 * with other processes, streaming hash and size checks, Range resume after a cut and from the
 * blobs/<etag>.incomplete an earlier attempt or process left (partial.c; its bytes are re-hashed
 * first), clean restart when a Range request is answered 200, back-off on 408/429/5xx, quick
 * failure on a refused connection, the pull's deadline, redirects followed by hand so that the
 * token never leaves the endpoint's origin. Memory stays flat: bytes go straight from libcurl's
 * buffer to the temp file. */
#include "cache/cache.h"
#include "client/client.h"
#include "client/partial.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum xstate { X_CHECK, X_LOCK, X_READY, X_ACTIVE, X_DONE };

typedef struct xfer {
    hk_dl_item *item;
    enum xstate state;
    uint64_t ready_at;       /* X_LOCK / X_READY: not before this time */
    uint64_t lock_since;
    uint64_t next_lock_log;
    int lock_fd;
    int fd;
    char *tmp;
    char *resolve_url;       /* where every attempt starts */
    char *url;               /* current hop */
    int hops;
    CURL *easy;
    struct curl_slist *hdrs;
    hk_http_headers h;
    hk_hasher *hasher;
    uint64_t written;
    uint64_t range_from;     /* Range start of the current attempt */
    uint64_t written_at_attempt;
    long status;
    bool body_ok;            /* current response's body is the file */
    bool headers_seen;       /* the current attempt's response began */
    int err;                 /* fatal error recorded by a callback (hk__fail already called) */
    int status_retries;      /* 408/429/5xx answers so far */
    int stalls;              /* consecutive failures without progress */
    int fast_fails;          /* connection refused / unknown host so far */
    uint64_t kept;           /* bytes taken over from an earlier attempt's .incomplete */
    bool resumable;          /* tmp is blobs/<etag>.incomplete: kept for the next attempt on failure */
    bool refetched;          /* kept bytes were discarded once (the server's file changed) */
    bool bad;                /* the temp file's content is suspect: never kept */
    char errbody[256];
    size_t errbody_len;
    char errbuf[CURL_ERROR_SIZE]; /* libcurl's text for the current attempt's failure */
    unsigned char *buf;      /* write-behind buffer: bytes received but not yet written */
    size_t buf_len;
} xfer;

#define HK_XFER_BUF (1u << 20)

typedef struct dl_ctx {
    hk_hub *hub;
    const char *repo_id;
    const char *repo_dir;
    const char *commit;
    hk_dl_stats *stats;
    uint64_t total_bytes;
    uint64_t done_bytes; /* of finished files */
    size_t total_files, done_files;
    uint64_t last_progress;
    bool cancelled;
    bool link; /* make the snapshot links (else blobs only) */
    uint64_t deadline; /* the pull's deadline (hk__now_ms clock), 0: none */
} dl_ctx;

static void xfer_drop_temp(xfer *x) {
    free(x->buf);
    x->buf = NULL;
    x->buf_len = 0;
    if (x->fd >= 0) close(x->fd);
    x->fd = -1;
    if (x->tmp) unlink(x->tmp);
    free(x->tmp);
    x->tmp = NULL;
    hk__hasher_free(x->hasher);
    x->hasher = NULL;
}

static hk_hash_kind kind_of(const char *etag) { return strlen(etag) == 64 ? HK_HASH_SHA256 : HK_HASH_GIT_BLOB; }

/* Write the buffered bytes to the temp file: 0 or an errno (no error recorded). */
static int flush_raw(xfer *x) {
    const unsigned char *q = x->buf;
    size_t left = x->buf_len;
    while (left > 0) {
        ssize_t w = write(x->fd, q, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        q += w;
        left -= (size_t)w;
    }
    x->buf_len = 0;
    return 0;
}

static int flush_buf(xfer *x) {
    int e = flush_raw(x);
    if (!e) return HK_OK;
    x->bad = true;
    return hk__fail(hk__errno_code(e), "cannot write %s: %s%s", x->tmp, strerror(e),
                   hk__errno_code(e) == HK_ERR_DISK_FULL ? " (free some space or point HF_HUB_CACHE elsewhere)" : "");
}

/* A call that failed this way leaves partial files worth resuming: the link or the server had a
 * passing problem, or the caller stopped. Not after a lie (size, hash, protocol: the server's other
 * bytes are suspect too) nor on a full disk. */
static bool keeps_partials(int rc) {
    return rc == HK_ERR_NETWORK || rc == HK_ERR_TIMEOUT || rc == HK_ERR_CANCELLED || rc == HK_ERR_HTTP ||
           rc == HK_ERR_RATE_LIMITED;
}

/* At the end of a failed call: keep a resumable temp file holding a correct prefix (flushed), so
 * that the next attempt continues there; drop anything else. */
static void xfer_keep_or_drop(xfer *x, int rc) {
    if (x->fd >= 0 && x->tmp && x->resumable && !x->bad && x->written > 0 && keeps_partials(rc) &&
        flush_raw(x) == 0) {
        hk__log(HK_LOG_INFO, "kept %llu of %llu bytes of %s in %s; the next pull resumes there",
                (unsigned long long)x->written, (unsigned long long)x->item->size, x->item->paths[0], x->tmp);
        close(x->fd);
        x->fd = -1;
        free(x->tmp);
        x->tmp = NULL;
    }
    xfer_drop_temp(x);
}

static int new_hasher(xfer *x) {
    hk__hasher_free(x->hasher);
    x->hasher = hk__hasher_new(kind_of(x->item->etag), x->item->size);
    return x->hasher ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

static int reset_content(xfer *x) {
    x->buf_len = 0;
    if (x->fd >= 0) {
        if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0) {
            x->bad = true;
            return hk__fail(hk__errno_code(errno), "cannot truncate %s: %s", x->tmp, strerror(errno));
        }
    }
    x->written = 0;
    x->kept = 0;
    return new_hasher(x);
}

/* The kept bytes are not a prefix of what the server has now (hash mismatch, 416): discard them
 * and fetch the blob again from byte 0, once. */
static int discard_kept(dl_ctx *c, xfer *x, const char *why) {
    hk__log(HK_LOG_INFO, "%s of %s: discarding the %llu bytes kept from an earlier attempt and downloading it again",
            why, x->item->paths[0], (unsigned long long)x->kept);
    free(x->buf);
    x->buf = NULL;
    x->buf_len = 0;
    x->refetched = true;
    x->kept = 0;
    x->written = 0;
    x->written_at_attempt = 0;
    int rc = hk__partial_discard(&x->fd, &x->tmp, &x->resumable, c->repo_dir, x->item->etag);
    return rc ? rc : new_hasher(x);
}

/* ---- libcurl callbacks ------------------------------------------------------------------------ */
static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = sz * n;
    x->headers_seen = true;
    hk__http_headers_feed(&x->h, p, len);
    if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) { /* end of one response's headers */
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
        x->body_ok = false;
        x->errbody_len = 0;
        uint64_t want = x->item->size;
        if (x->status == 200) {
            if (x->h.content_length >= 0 && (uint64_t)x->h.content_length != want) {
                x->err = hk__fail(HK_ERR_INTEGRITY,
                                 "size mismatch for %s (blob %s): the server sends %lld bytes, the listing promised %llu",
                                 x->item->paths[0], x->item->etag, (long long)x->h.content_length,
                                 (unsigned long long)want);
                return 0;
            }
            if (x->range_from > 0 || x->written > 0) {
                hk__log(HK_LOG_INFO, "server ignored Range for %s; restarting from byte 0", x->item->paths[0]);
                if ((x->err = reset_content(x))) return 0;
            }
            x->body_ok = true;
        } else if (x->status == 206) {
            unsigned long long s = 0, e = 0, t = 0;
            if (!x->h.content_range || sscanf(x->h.content_range, "bytes %llu-%llu/%llu", &s, &e, &t) != 3 ||
                s != x->written) {
                /* not the piece we asked for: start over without Range on the next attempt */
                hk__log(HK_LOG_INFO, "unexpected Content-Range for %s; restarting", x->item->paths[0]);
                if ((x->err = reset_content(x))) return 0;
                return 0; /* aborts this attempt; retried as a cut with written == 0 */
            }
            if (t != want) {
                x->err = hk__fail(HK_ERR_INTEGRITY,
                                 "size mismatch for %s (blob %s): the server's file has %llu bytes, the listing promised %llu",
                                 x->item->paths[0], x->item->etag, t, (unsigned long long)want);
                return 0;
            }
            x->body_ok = true;
        }
    }
    return len;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = sz * n;
    if (!x->body_ok) {
        size_t room = sizeof x->errbody - 1 - x->errbody_len;
        size_t k = len < room ? len : room;
        memcpy(x->errbody + x->errbody_len, p, k);
        x->errbody_len += k;
        x->errbody[x->errbody_len] = '\0';
        return len;
    }
    if (x->written + len > x->item->size) {
        x->err = hk__fail(HK_ERR_INTEGRITY,
                         "size mismatch for %s (blob %s): the server sent more than the %llu bytes promised",
                         x->item->paths[0], x->item->etag, (unsigned long long)x->item->size);
        return 0;
    }
    if (!x->buf && !(x->buf = malloc(HK_XFER_BUF))) {
        x->err = hk__fail(HK_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (size_t off = 0; off < len;) {
        size_t k = len - off < HK_XFER_BUF - x->buf_len ? len - off : HK_XFER_BUF - x->buf_len;
        memcpy(x->buf + x->buf_len, p + off, k);
        x->buf_len += k;
        off += k;
        if (x->buf_len == HK_XFER_BUF && (x->err = flush_buf(x))) return 0;
    }
    hk__hasher_update(x->hasher, p, len);
    x->written += len;
    return len;
}

/* ---- state transitions ------------------------------------------------------------------------ */
static int link_all(dl_ctx *c, xfer *x) {
    if (!c->link) return HK_OK; /* blobs only: the caller stages the links */
    for (size_t i = 0; i < x->item->npaths; i++) {
        int rc = hk_cache_link_snapshot(c->repo_dir, c->commit, x->item->paths[i], x->item->etag);
        if (rc) return rc;
    }
    return HK_OK;
}

static int pull_deadline_fail(const dl_ctx *c, const xfer *x) {
    return hk__fail(HK_ERR_TIMEOUT, "the pull's deadline of %.0f s passed while downloading %s (%llu of %llu bytes); "
                    "HUBKERN_PULL_TIMEOUT (option pull_timeout_s) sets it", (double)c->hub->pull_timeout_ms / 1000.0,
                    x->item->paths[0], (unsigned long long)x->written, (unsigned long long)x->item->size);
}

static int start_attempt(dl_ctx *c, CURLM *multi, xfer *x) {
    hk__http_headers_free(&x->h);
    x->status = 0;
    x->body_ok = false;
    x->headers_seen = false;
    x->range_from = x->written;
    if (!x->easy && !(x->easy = curl_easy_init())) return hk__fail(HK_ERR_NOMEM, "cannot create a curl handle");
    curl_easy_reset(x->easy);
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    int rc = hk__http_setup(x->easy, &x->hdrs, c->hub, x->url, true);
    if (rc) return rc;
    if (c->deadline) { /* the transfer may not outlive the pull */
        uint64_t now = hk__now_ms();
        if (now >= c->deadline) return pull_deadline_fail(c, x);
        curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)(c->deadline - now));
    }
    char range[64];
    if (x->written > 0) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)x->written);
        curl_easy_setopt(x->easy, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
    x->errbuf[0] = '\0';
    curl_easy_setopt(x->easy, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(x->easy, CURLOPT_BUFFERSIZE, 256L * 1024L);
    hk__log(HK_LOG_DEBUG, "GET %s%s%s", x->url, x->written ? " Range from " : "", x->written ? range : "");
    if (curl_multi_add_handle(multi, x->easy) != CURLM_OK) return hk__fail(HK_ERR_INTERNAL, "curl_multi_add_handle failed");
    x->state = X_ACTIVE;
    return HK_OK;
}

/* The whole blob is in the temp file: check its hash and move it into blobs/. *again: the kept
 * bytes of an earlier attempt made the hash fail; they were discarded and the blob is to be
 * fetched again from byte 0 (x is X_READY material). */
static int finish_file(dl_ctx *c, xfer *x, bool *again) {
    *again = false;
    int frc = flush_buf(x);
    if (frc) return frc;
    free(x->buf);
    x->buf = NULL;
    if (fsync(x->fd) != 0) {
        int e = errno;
        return hk__fail(hk__errno_code(e), "cannot write %s: %s", x->tmp, strerror(e));
    }
    close(x->fd);
    x->fd = -1;
    unsigned char d[64];
    size_t dn = hk__hasher_finish(x->hasher, d);
    x->hasher = NULL;
    char actual[129];
    hk__hex(actual, d, dn);
    if (strcmp(actual, x->item->etag) != 0) {
        if (x->kept > 0 && !x->refetched) {
            *again = true;
            return discard_kept(c, x, "hash mismatch");
        }
        x->bad = true;
        return hk__fail(HK_ERR_INTEGRITY, "hash mismatch for %s: expected %s %s, got %s (the download was discarded)",
                       x->item->paths[0], dn == 32 ? "sha256" : "git-blob-sha1", x->item->etag, actual);
    }
    int rc = hk__cache_blob_commit(x->tmp, c->repo_dir, x->item->etag);
    if (rc) {
        x->bad = true;
        return rc;
    }
    free(x->tmp);
    x->tmp = NULL;
    c->stats->bytes_downloaded += x->item->size;
    c->stats->bytes_verified += x->item->size;
    c->stats->files_downloaded++;
    x->item->downloaded = true;
    return link_all(c, x);
}

static void report(dl_ctx *c, const char *item, bool force, const xfer *xs, size_t n) {
    if (!c->hub->progress) return;
    uint64_t now = hk__now_ms();
    if (!force && now - c->last_progress < 100) return;
    c->last_progress = now;
    uint64_t done = c->done_bytes;
    for (size_t i = 0; i < n; i++)
        if (xs[i].state == X_ACTIVE || xs[i].state == X_READY) done += xs[i].written;
    hk_progress p = {"download", item, done, c->total_bytes, (uint32_t)c->done_files, (uint32_t)c->total_files};
    if (c->hub->progress(c->hub->progress_ud, &p) != 0) c->cancelled = true;
}

/* The next attempt starts at the resolve URL again, after delay ms. */
static int reschedule(xfer *x, long delay) {
    x->written_at_attempt = x->written;
    free(x->url);
    x->url = hk__strdup(x->resolve_url);
    x->hops = 0;
    if (!x->url) return hk__fail(HK_ERR_NOMEM, "out of memory");
    x->state = X_READY;
    x->ready_at = hk__now_ms() + (uint64_t)(delay > 0 ? delay : 0);
    return HK_OK;
}

/* Handle a finished attempt. Returns a fatal error code, or HK_OK (file done or rescheduled). */
static int on_done(dl_ctx *c, xfer *x, CURLcode cc) {
    hk_hub *hub = c->hub;
    if (x->err) {
        x->bad = true;
        return x->err;
    }
    long st = x->status;
    if (cc == CURLE_OK && (st == 200 || st == 206)) {
        if (x->written == x->item->size) {
            bool again = false;
            int rc = finish_file(c, x, &again);
            if (rc) return rc;
            if (again) return reschedule(x, 0);
            x->state = X_DONE;
            return HK_OK;
        }
        cc = CURLE_PARTIAL_FILE; /* the body ended early: resume like a cut */
    }
    if (cc == CURLE_OK && st >= 300 && st < 400 && x->h.location) {
        if (++x->hops > 10) return hk__fail(HK_ERR_PROTOCOL, "too many redirects for %s", x->item->paths[0]);
        char *next = hk__url_resolve(x->url, x->h.location);
        if (!next) return hk__fail(HK_ERR_PROTOCOL, "bad redirect Location for %s", x->item->paths[0]);
        hk__log(HK_LOG_DEBUG, "redirect %ld -> %s%s", st, next,
               hk__url_same_origin(next, hub->endpoint) ? "" : " (other host: token not sent)");
        free(x->url);
        x->url = next;
        x->state = X_READY;
        x->ready_at = 0;
        return HK_OK;
    }
    if (cc == CURLE_OK && st == 416 && x->range_from > 0) {
        if (x->kept > 0 && !x->refetched) { /* the file the kept bytes came from is gone or shorter */
            int rc = discard_kept(c, x, "HTTP 416 (range not satisfiable)");
            return rc ? rc : reschedule(x, 0);
        }
        return hk__fail(HK_ERR_INTEGRITY, "size mismatch for %s (blob %s): the server has fewer than the %llu bytes promised",
                       x->item->paths[0], x->item->etag, (unsigned long long)x->item->size);
    }
    if (cc == CURLE_OPERATION_TIMEDOUT && c->deadline && hk__now_ms() + 50 >= c->deadline)
        return pull_deadline_fail(c, x);
    if (cc == CURLE_OK && !hk__http_status_transient(st)) {
        hk_http_resp r = {.status = st, .h = x->h};
        char *what = hk__asprintf("downloading %s from %s", x->item->paths[0], c->repo_id);
        int rc = hk__http_fail(&r, what ? what : "download");
        free(what);
        return rc;
    }
    if (hk__curl_header_too_large(cc, x->headers_seen)) { /* stays too large: no retry */
        char *what = hk__asprintf("downloading %s from %s", x->item->paths[0], c->repo_id);
        int rc = hk__header_too_large_fail(what ? what : "download", x->url, x->errbuf);
        free(what);
        return rc;
    }
    if (cc != CURLE_OK && hk__curl_tls_fatal(cc)) { /* a rejected certificate stays rejected: no retry */
        char *what = hk__asprintf("downloading %s from %s", x->item->paths[0], c->repo_id);
        int rc = hk__net_fail(cc, what ? what : "download", x->url, x->errbuf);
        free(what);
        return rc;
    }
    /* transient: status 408/429/5xx, or a connection problem / cut / stall */
    long delay;
    if (cc == CURLE_OK) {
        if (x->status_retries >= hub->max_retries) {
            hk_http_resp r = {.status = st, .h = x->h};
            char *what = hk__asprintf("downloading %s from %s", x->item->paths[0], c->repo_id);
            int rc = hk__http_fail(&r, what ? what : "download");
            free(what);
            return rc;
        }
        delay = hk__retry_delay_ms(hub, x->status_retries, st, &x->h);
        x->status_retries++;
        hk__log(HK_LOG_INFO, "HTTP %ld for %s; retrying in %ld ms", st, x->item->paths[0], delay);
    } else if (hk__curl_connect_failed(cc)) {
        /* refused / unknown host: a few quick tries, not the patient back-off of a cut */
        long oserr = 0;
        curl_easy_getinfo(x->easy, CURLINFO_OS_ERRNO, &oserr);
        if (x->fast_fails >= HK_CONNECT_RETRIES || hub->max_retries == 0) {
            char *what = hk__asprintf("downloading %s from %s", x->item->paths[0], c->repo_id);
            int rc = hk__connect_fail(hub, cc, oserr, what ? what : "download", x->url, x->errbuf, x->fast_fails + 1);
            free(what);
            return rc;
        }
        delay = hk__connect_retry_delay_ms(hub, x->fast_fails++);
        hk__log(HK_LOG_INFO, "retrying in %ld ms: %s for %s (%d/%d)", delay, hk__connect_cause(cc, oserr), x->url,
                x->fast_fails, HK_CONNECT_RETRIES);
    } else {
        bool progressed = x->written > x->written_at_attempt;
        x->stalls = progressed ? 0 : x->stalls + 1;
        if (x->stalls > 5 || hub->max_retries == 0) {
            if (cc == CURLE_OPERATION_TIMEDOUT)
                return hk__fail(HK_ERR_TIMEOUT, "download of %s stalled (no data for %ld ms, %d times); raise HF_HUB_DOWNLOAD_TIMEOUT if the link is slow",
                               x->item->paths[0], hub->download_timeout_ms, x->stalls);
            return hk__fail(HK_ERR_NETWORK, "download of %s failed: %s (%d attempts without progress)", x->item->paths[0],
                           x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc), x->stalls);
        }
        delay = progressed ? 0 : hk__retry_delay_ms(hub, x->stalls - 1, 0, NULL);
        hk__log(HK_LOG_INFO, "%s while downloading %s at byte %llu; resuming in %ld ms", x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc),
               x->item->paths[0], (unsigned long long)x->written, delay);
    }
    return reschedule(x, delay);
}

/* X_CHECK / X_LOCK step: returns fatal error or HK_OK; may move to X_DONE or X_READY. */
static int try_acquire(dl_ctx *c, xfer *x, const char *lock_path) {
    if (hk__cache_blob_present(c->repo_dir, x->item->etag, x->item->size)) {
        int rc = link_all(c, x);
        if (rc) return rc;
        x->state = X_DONE;
        return HK_OK;
    }
    int rc = hk__cache_lock_try(&x->lock_fd, lock_path);
    if (rc) return rc;
    uint64_t now = hk__now_ms();
    if (x->lock_fd < 0) {
        if (!x->lock_since) x->lock_since = now, x->next_lock_log = now + 10000;
        if (now >= x->next_lock_log) {
            hk__log(HK_LOG_INFO, "waiting for %s: another process is downloading it", x->item->paths[0]);
            x->next_lock_log = now + 10000;
        }
        x->state = X_LOCK;
        x->ready_at = now + 100;
        return HK_OK;
    }
    /* re-check under the lock: the holder we waited for may have finished it */
    if (hk__cache_blob_present(c->repo_dir, x->item->etag, x->item->size)) {
        hk__partial_forget(c->repo_dir, x->item->etag);
        hk__cache_unlock(x->lock_fd);
        x->lock_fd = -1;
        if ((rc = link_all(c, x))) return rc;
        x->state = X_DONE;
        return HK_OK;
    }
    uint64_t kept = 0;
    if ((rc = hk__partial_open(&x->fd, &x->tmp, &kept, &x->resumable, c->repo_dir, x->item->etag, x->item->size)))
        return rc;
    if ((rc = new_hasher(x))) return rc;
    if (kept > 0) { /* the hash covers the whole file: the kept bytes first */
        if ((rc = hk__partial_rehash(x->hasher, x->fd, kept, x->tmp))) return rc;
        x->kept = x->written = x->written_at_attempt = kept;
        hk__log(HK_LOG_INFO, "resuming %s at byte %llu of %llu (kept in %s)", x->item->paths[0],
                (unsigned long long)kept, (unsigned long long)x->item->size, x->tmp);
    }
    if (kept == x->item->size) { /* all there: no request at all, unless the hash says otherwise */
        bool again = false;
        if ((rc = finish_file(c, x, &again))) return rc;
        if (!again) {
            hk__cache_unlock(x->lock_fd);
            x->lock_fd = -1;
            x->state = X_DONE;
            return HK_OK;
        }
    }
    x->state = X_READY;
    x->ready_at = 0;
    return HK_OK;
}

int hk__download_blobs(hk_dl_stats *stats, hk_hub *hub, const char *repo_id, const char *repo_dir,
                      const char *commit, hk_dl_item *items, size_t n, bool link) {
    if (n == 0) return HK_OK;
    xfer *xs = calloc(n, sizeof *xs);
    char **locks = calloc(n, sizeof *locks);
    CURLM *multi = curl_multi_init();
    int rc = HK_OK;
    if (!xs || !locks || !multi) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    dl_ctx c = {hub, repo_id, repo_dir, commit, stats, 0, 0, n, 0, 0, false, link, hub->pull_deadline_at};
    int maxp = hub->max_parallel > 0 ? hub->max_parallel : 8;
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)maxp);
    if ((rc = hk_cache_ensure_tag(hub->cache_root))) goto out;
    for (size_t i = 0; i < n; i++) {
        xs[i].item = &items[i];
        xs[i].fd = -1;
        xs[i].lock_fd = -1;
        hk__http_headers_init(&xs[i].h);
        c.total_bytes += items[i].size;
        char *epath = hk__pct_encode(items[i].paths[0], true);
        char *erev = hk__pct_encode(commit, false);
        xs[i].resolve_url = epath && erev ? hk__asprintf("%s/kernels/%s/resolve/%s/%s", hub->endpoint, repo_id, erev, epath) : NULL;
        free(epath);
        free(erev);
        xs[i].url = hk__strdup(xs[i].resolve_url);
        locks[i] = hk__cache_lock_path(hub->cache_root, repo_dir, items[i].etag);
        if (!xs[i].url || !locks[i]) {
            rc = hk__fail(HK_ERR_NOMEM, "out of memory");
            goto out;
        }
        /* already complete in the cache? (no lock needed to notice) */
        if (hk__cache_blob_present(repo_dir, items[i].etag, items[i].size)) {
            if ((rc = link_all(&c, &xs[i]))) goto out;
            xs[i].state = X_DONE;
            c.total_bytes -= items[i].size;
            c.total_files--;
        }
    }
    size_t remaining = 0;
    for (size_t i = 0; i < n; i++) remaining += xs[i].state != X_DONE;
    report(&c, NULL, true, xs, n);
    while (remaining > 0) {
        uint64_t now = hk__now_ms();
        if (c.deadline && now >= c.deadline) { /* waiting for a lock or a retry counts too */
            for (size_t i = 0; i < n; i++)
                if (xs[i].state != X_DONE) {
                    rc = pull_deadline_fail(&c, &xs[i]);
                    goto out;
                }
        }
        int active = 0;
        for (size_t i = 0; i < n; i++) active += xs[i].state == X_ACTIVE;
        /* fill free slots: files that already hold their lock first, then new locks */
        for (size_t i = 0; i < n && active < maxp; i++) {
            xfer *x = &xs[i];
            if (x->state == X_READY && x->ready_at <= now) {
                if ((rc = start_attempt(&c, multi, x))) goto out;
                active++;
            }
        }
        int holding = 0;
        for (size_t i = 0; i < n; i++) holding += xs[i].state == X_READY || xs[i].state == X_ACTIVE;
        for (size_t i = 0; i < n && holding < maxp; i++) {
            xfer *x = &xs[i];
            if ((x->state == X_CHECK || x->state == X_LOCK) && x->ready_at <= now) {
                if ((rc = try_acquire(&c, x, locks[i]))) goto out;
                if (x->state == X_READY) {
                    holding++;
                    if (active < maxp) {
                        if ((rc = start_attempt(&c, multi, x))) goto out;
                        active++;
                    }
                } else if (x->state == X_DONE) {
                    remaining--;
                    c.done_files++;
                    c.done_bytes += x->item->size;
                }
            }
        }
        if (remaining == 0) break;
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            xfer *x = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            CURLcode cc = m->data.result;
            curl_multi_remove_handle(multi, m->easy_handle);
            if ((rc = on_done(&c, x, cc))) goto out;
            if (x->state == X_DONE) {
                hk__cache_unlock(x->lock_fd);
                x->lock_fd = -1;
                remaining--;
                c.done_files++;
                c.done_bytes += x->item->size;
                report(&c, x->item->paths[0], true, xs, n);
            }
        }
        if (c.cancelled) {
            rc = hk__fail(HK_ERR_CANCELLED, "download cancelled by the progress callback");
            goto out;
        }
        report(&c, NULL, false, xs, n);
        if (remaining == 0) break;
        /* wait for socket activity, but wake up for scheduled retries and lock polls */
        long wait = 100;
        now = hk__now_ms();
        for (size_t i = 0; i < n; i++) {
            if ((xs[i].state == X_READY || xs[i].state == X_LOCK) && xs[i].ready_at > now) {
                long d = (long)(xs[i].ready_at - now);
                if (d < wait) wait = d;
            } else if (xs[i].state == X_READY || xs[i].state == X_CHECK) {
                wait = 0;
            }
        }
        if (wait > 0) curl_multi_poll(multi, NULL, 0, (int)wait, NULL);
    }
    report(&c, NULL, true, xs, n);
out:
    if (xs) {
        for (size_t i = 0; i < n; i++) {
            xfer *x = &xs[i];
            if (x->easy) {
                if (multi) curl_multi_remove_handle(multi, x->easy);
                curl_easy_cleanup(x->easy);
            }
            curl_slist_free_all(x->hdrs);
            xfer_keep_or_drop(x, rc);
            hk__cache_unlock(x->lock_fd);
            x->lock_fd = -1;
            hk__http_headers_free(&x->h);
            free(x->url);
            free(x->resolve_url);
        }
    }
    if (locks)
        for (size_t i = 0; i < n; i++) free(locks[i]);
    free(locks);
    free(xs);
    if (multi) curl_multi_cleanup(multi);
    return rc;
}
