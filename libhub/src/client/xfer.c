/* One blob's transfer: the write-behind buffer and temp file (blobs/<etag>.incomplete, see
 * partial.c), the streaming size and hash checks in the libcurl callbacks, what is kept of a
 * failed attempt, and the rename into blobs/ once the hash matches (durable later, in one pass
 * over the pull's blobs: hk__cache_blobs_durable). */
#include "cache/cache_internal.h"
#include "client/partial.h"
#include "client/xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void hk__xfer_drop_temp(hk_xfer *x) {
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
static int flush_raw(hk_xfer *x) {
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
    /* writeback of every HK_XFER_WRITEBACK_STEP bytes starts now, overlapping the download: the
     * flush before the snapshot is published (hk__cache_blobs_durable) then waits for the tail */
    if (x->written < x->kicked) x->kicked = 0; /* the content started over */
    if (x->written - x->kicked >= HK_XFER_WRITEBACK_STEP) {
        hk__writeback_start(x->fd);
        x->kicked = x->written;
    }
    return 0;
}

static int flush_buf(hk_xfer *x) {
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
void hk__xfer_keep_or_drop(hk_xfer *x, int rc) {
    if (x->fd >= 0 && x->tmp && x->resumable && !x->bad && x->written > 0 && keeps_partials(rc) &&
        flush_raw(x) == 0) {
        hk__log(HK_LOG_INFO, "kept %llu of %llu bytes of %s in %s; the next pull resumes there",
                (unsigned long long)x->written, (unsigned long long)x->item->size, x->item->paths[0], x->tmp);
        close(x->fd);
        x->fd = -1;
        free(x->tmp);
        x->tmp = NULL;
    }
    hk__xfer_drop_temp(x);
}

int hk__xfer_new_hasher(hk_xfer *x) {
    hk__hasher_free(x->hasher);
    x->hasher = hk__hasher_new(kind_of(x->item->etag), x->item->size);
    return x->hasher ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
}

int hk__xfer_reset_content(hk_xfer *x) {
    x->buf_len = 0;
    x->written = 0;
    x->kept = 0;
    /* a new file, not a truncated one: a writer that the lock failed to exclude keeps its own */
    if (x->fd >= 0) {
        int rc = hk__partial_discard(&x->fd, &x->tmp, &x->resumable, x->repo_dir, x->item->etag);
        if (rc) {
            x->bad = true;
            return rc;
        }
    }
    return hk__xfer_new_hasher(x);
}

/* The kept bytes are not a prefix of what the server has now (hash mismatch, 416): discard them
 * and fetch the blob again from byte 0, once. */
int hk__xfer_discard_kept(hk_dl_ctx *c, hk_xfer *x, const char *why) {
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
    return rc ? rc : hk__xfer_new_hasher(x);
}

/* ---- libcurl callbacks ------------------------------------------------------------------------ */
size_t hk__xfer_on_header(char *p, size_t sz, size_t n, void *ud) {
    hk_xfer *x = ud;
    size_t len = sz * n;
    x->headers_seen = true;
    hk__http_headers_feed(&x->h, p, len);
    if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) { /* end of one response's headers */
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
        x->body_ok = false;
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
                if ((x->err = hk__xfer_reset_content(x))) return 0;
            }
            x->body_ok = true;
        } else if (x->status == 206) {
            unsigned long long s = 0, e = 0, t = 0;
            if (!x->h.content_range || sscanf(x->h.content_range, "bytes %llu-%llu/%llu", &s, &e, &t) != 3 ||
                s != x->written) {
                /* not the piece we asked for: start over without Range on the next attempt */
                hk__log(HK_LOG_INFO, "unexpected Content-Range for %s; restarting", x->item->paths[0]);
                if ((x->err = hk__xfer_reset_content(x))) return 0;
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

size_t hk__xfer_on_body(char *p, size_t sz, size_t n, void *ud) {
    hk_xfer *x = ud;
    size_t len = sz * n;
    if (!x->body_ok) return len; /* an error page or a redirect's body: the status says what went wrong */
    if (x->written + len > x->item->size) {
        x->err = hk__fail(HK_ERR_INTEGRITY,
                         "size mismatch for %s (blob %s): the server sent more than the %llu bytes promised",
                         x->item->paths[0], x->item->etag, (unsigned long long)x->item->size);
        return 0;
    }
    if (!x->buf) {
        /* sized to the blob: a small file's buffer is a small block, not a 1 MiB one per file that,
         * freed at the top of a small heap, glibc trims and the next file faults in again */
        x->buf_cap = x->item->size && x->item->size < HK_XFER_BUF ? (size_t)x->item->size : HK_XFER_BUF;
        if (!(x->buf = malloc(x->buf_cap))) {
            x->err = hk__fail(HK_ERR_NOMEM, "out of memory");
            return 0;
        }
    }
    for (size_t off = 0; off < len;) {
        size_t k = len - off < x->buf_cap - x->buf_len ? len - off : x->buf_cap - x->buf_len;
        memcpy(x->buf + x->buf_len, p + off, k);
        x->buf_len += k;
        off += k;
        if (x->buf_len == x->buf_cap && (x->err = flush_buf(x))) return 0;
    }
    hk__hasher_update(x->hasher, p, len);
    if (x->written < x->moved_mark) x->moved_mark = x->written; /* restarted lower: count from there */
    x->written += len;
    if (x->written - x->moved_mark >= HK_XFER_PROGRESS_STEP) {
        x->moved_at = hk__now_ms();
        x->moved_mark = x->written;
    }
    return len;
}

/* ---- state transitions ------------------------------------------------------------------------ */
int hk__xfer_link_all(hk_dl_ctx *c, const hk_dl_item *it) {
    if (!c->link) return HK_OK; /* blobs only: the caller stages the links */
    for (size_t i = 0; i < it->npaths; i++) {
        int rc = hk_cache_link_snapshot(c->repo_dir, c->commit, it->paths[i], it->etag);
        if (rc) return rc;
    }
    return HK_OK;
}

/* The whole blob is in the temp file: check its hash and move it into blobs/. *again: the kept
 * bytes of an earlier attempt made the hash fail; they were discarded and the blob is to be
 * fetched again from byte 0 (x is X_READY material). */
int hk__xfer_finish_file(hk_dl_ctx *c, hk_xfer *x, bool *again) {
    *again = false;
    int frc = flush_buf(x);
    if (frc) return frc;
    free(x->buf);
    x->buf = NULL;
    /* no fsync here (it blocked the download loop once per blob): the writeback of the rest starts
     * now, a large blob's flush on the flusher's thread below, and the caller flushes every blob
     * of the pull in one pass before any snapshot names it */
    hk__writeback_start(x->fd);
    unsigned char d[64];
    size_t dn = hk__hasher_finish(x->hasher, d);
    x->hasher = NULL;
    char actual[129];
    hk__hex(actual, d, dn);
    if (strcmp(actual, x->item->etag) != 0) {
        if (x->kept > 0 && !x->refetched) {
            *again = true;
            return hk__xfer_discard_kept(c, x, "hash mismatch");
        }
        x->bad = true;
        return hk__fail(HK_ERR_INTEGRITY, "hash mismatch for %s: expected %s %s, got %s (the download was discarded)",
                       x->item->paths[0], dn == 32 ? "sha256" : "git-blob-sha1", x->item->etag, actual);
    }
    bool gone = false;
    int rc = x->resumable ? hk__partial_claim(&gone, x->fd, &x->tmp, c->repo_dir, x->item->etag) : HK_OK;
    /* its flush starts now, beside the transfers still running (the final pass then finds it clean) */
    if (rc == HK_OK && !gone && x->item->size >= HK_XFER_EARLY_FLUSH_MIN)
        hk__flusher_give(c->flusher, x->fd, x->item->paths[0]);
    else
        close(x->fd);
    x->fd = -1;
    if (rc) {
        free(x->tmp); /* the name is another writer's: leave it */
        x->tmp = NULL;
        return rc;
    }
    if (gone && hk__cache_blob_present(c->repo_dir, x->item->etag, x->item->size)) {
        free(x->tmp); /* another writer of the same bytes committed it */
        x->tmp = NULL;
    } else if (gone) {
        free(x->tmp);
        x->tmp = NULL;
        return hk__fail(HK_ERR_LOCK, "the temp file of %s disappeared before it was complete: another process "
                        "removed it (cache prune, or a lock the filesystem does not enforce); pull again", x->item->paths[0]);
    } else if ((rc = hk__cache_blob_commit(x->tmp, c->repo_dir, x->item->etag))) {
        x->bad = true;
        return rc;
    }
    free(x->tmp);
    x->tmp = NULL;
    c->stats->bytes_downloaded += x->item->size - x->kept; /* what crossed the wire this time */
    c->stats->bytes_resumed += x->kept;
    c->stats->bytes_verified += x->item->size;
    c->stats->files_downloaded++;
    x->item->downloaded = true;
    return HK_OK; /* linked (when c->link) only once every blob is durable: download.c */
}
