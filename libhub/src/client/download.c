/* Parallel blob downloads over one curl multi handle: bounded transfers, per-blob locks shared
 * with other processes, streaming hash and size checks, Range resume after a cut and from the
 * blobs/<etag>.incomplete an earlier attempt or process left (partial.c; its bytes are re-hashed
 * first), clean restart when a Range request is answered 200, back-off on 408/429/5xx, quick
 * failure on a refused connection, the pull's deadline, redirects followed by hand so that the
 * token never leaves the endpoint's origin. Memory stays flat: bytes go straight from libcurl's
 * buffer to the temp file. */
#include "cache/cache_internal.h"
#include "client/client.h"
#include "client/partial.h"
#include "client/xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int pull_deadline_fail(const hk_dl_ctx *c, const hk_xfer *x) {
    return hk__fail(HK_ERR_TIMEOUT, "the pull's deadline of %.0f s passed while downloading %s (%llu of %llu bytes); "
                    "HUBKERN_PULL_TIMEOUT (option pull_timeout_s) sets it", (double)c->hub->pull_timeout_ms / 1000.0,
                    x->item->paths[0], (unsigned long long)x->written, (unsigned long long)x->item->size);
}

static int stall_fail(const hk_dl_ctx *c, const hk_xfer *x) {
    return hk__fail(HK_ERR_TIMEOUT, "download of %s from %s made no progress for %g s (less than %u KiB arrived; %llu of "
                    "%llu bytes so far): the server or the link stalls or drips; try again later or another "
                    "endpoint, or raise HUBKERN_STALL_TIMEOUT (seconds, 0: off) for a link this slow",
                    x->item->paths[0], c->repo_id, (double)c->hub->stall_timeout_ms / 1000.0,
                    HK_XFER_PROGRESS_STEP >> 10, (unsigned long long)x->written, (unsigned long long)x->item->size);
}

/* Has x gone HUBKERN_STALL_TIMEOUT without progress (active, or waiting to resume after a cut)? */
static bool stalled(const hk_dl_ctx *c, const hk_xfer *x, uint64_t now) {
    return c->hub->stall_timeout_ms > 0 && x->moved_at && !x->clock_restart &&
           (x->state == X_ACTIVE || x->state == X_READY) && now - x->moved_at >= (uint64_t)c->hub->stall_timeout_ms;
}

static int start_attempt(hk_dl_ctx *c, CURLM *multi, hk_xfer *x) {
    /* the clock runs across cuts and resumes (a server that sends a little and then cuts gains no
     * time); it starts over only after a 408/429/5xx, whose retries are bounded by max_retries */
    if (!x->moved_at || x->clock_restart) {
        x->moved_at = hk__now_ms();
        x->moved_mark = x->written;
        x->clock_restart = false;
    }
    hk__http_headers_free(&x->h);
    x->status = 0;
    x->body_ok = false;
    x->headers_seen = false;
    x->range_from = x->written;
    if (!x->resolve_url) { /* made here, not for every queued file: memory per file stays small */
        char *epath = hk__pct_encode(x->item->paths[0], true);
        char *erev = hk__pct_encode(c->commit, false);
        x->resolve_url = epath && erev ? hk__asprintf("%s/kernels/%s/resolve/%s/%s", c->hub->endpoint, c->repo_id,
                                                      erev, epath) : NULL;
        free(epath);
        free(erev);
        free(x->url);
        x->url = hk__strdup(x->resolve_url);
        if (!x->url) return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (!x->errbuf && !(x->errbuf = malloc(CURL_ERROR_SIZE))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (!x->easy && c->nspare > 0) x->easy = c->spare[--c->nspare];
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
    curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, hk__xfer_on_header);
    curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, hk__xfer_on_body);
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

/* What a cancel leaves: the files completed (their blobs stay, verified) apart from the bytes of
 * the transfers still running (kept as .incomplete files where resumable, for the next pull). */
static int cancelled_fail(const hk_dl_ctx *c) {
    uint64_t partial = 0;
    size_t nparts = 0;
    for (size_t i = 0; i < c->nheld; i++)
        if (c->held[i]->written > 0 && c->held[i]->resumable) partial += c->held[i]->written, nparts++;
    return hk__fail(HK_ERR_CANCELLED, "download cancelled: %zu of %zu file%s complete (%llu of %llu bytes)%s; "
                    "%zu partial file%s (%llu bytes) kept to resume from", c->done_files, c->total_files,
                    c->total_files == 1 ? "" : "s", (unsigned long long)c->done_bytes,
                    (unsigned long long)c->total_bytes, c->done_files ? ", kept in the cache" : "", nparts,
                    nparts == 1 ? "" : "s", (unsigned long long)partial);
}

/* O(max_parallel): only the transfers holding a lock have bytes in flight. The file named is one
 * streaming now, the one with the most left to come (the one the wait is for), never one that
 * just finished (issue 24: "metadata.json 10 %" while two blobs streamed). */
static void report(hk_dl_ctx *c, bool force) {
    if (!c->hub->progress) return;
    uint64_t now = hk__now_ms();
    if (!force && now - c->last_progress < 100) return;
    c->last_progress = now;
    uint64_t done = c->done_bytes, most_left = 0;
    const char *item = NULL;
    uint32_t active = 0;
    for (size_t i = 0; i < c->nheld; i++) {
        const hk_xfer *x = c->held[i];
        done += x->written;
        if (x->state != X_ACTIVE) continue;
        active++;
        uint64_t left = x->item->size > x->written ? x->item->size - x->written : 0;
        if (!item || left > most_left) item = x->item->paths[0], most_left = left;
    }
    hk_progress p = {"download", item, done, c->total_bytes, (uint32_t)c->done_files, (uint32_t)c->total_files,
                     active};
    if (c->hub->progress(c->hub->progress_ud, &p) != 0) c->cancelled = true;
}

/* x is done: out of the held set, its curl handle, headers, URLs and error buffer released (the
 * handle to the spare pool) so that memory does not grow with the number of files. */
static void release(hk_dl_ctx *c, hk_xfer *x, size_t maxp) {
    for (size_t i = 0; i < c->nheld; i++)
        if (c->held[i] == x) {
            c->held[i] = c->held[--c->nheld];
            break;
        }
    if (x->easy) {
        if (c->nspare < maxp) c->spare[c->nspare++] = x->easy;
        else curl_easy_cleanup(x->easy);
        x->easy = NULL;
    }
    curl_slist_free_all(x->hdrs);
    x->hdrs = NULL;
    hk__http_headers_free(&x->h);
    hk__http_headers_init(&x->h);
    free(x->errbuf);
    free(x->url);
    free(x->resolve_url);
    x->errbuf = x->url = x->resolve_url = NULL;
}

/* The next attempt starts at the resolve URL again, after delay ms. */
static int reschedule(hk_xfer *x, long delay) {
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
/* One piece: the end of one transfer decides in one place between done, resumed, retried and
 * failed, from the status, the hash and the retry budget together. */
static int on_done(hk_dl_ctx *c, hk_xfer *x, CURLcode cc) {
    hk_hub *hub = c->hub;
    if (x->err) {
        x->bad = true;
        return x->err;
    }
    long st = x->status;
    if (cc == CURLE_OK && (st == 200 || st == 206)) {
        if (x->written == x->item->size) {
            bool again = false;
            int rc = hk__xfer_finish_file(c, x, &again);
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
            int rc = hk__xfer_discard_kept(c, x, "HTTP 416 (range not satisfiable)");
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
        x->clock_restart = true;
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

/* Whichever lock x holds released: its lock file's, or its byte of the small-blob lock file. */
static void unlock(hk_xfer *x) {
    hk__cache_filelock_release(x->lock_fd);
    x->lock_fd = -1;
    hk__cache_rangelock_release(x->range_fd, x->item->etag);
    x->range_fd = -1;
}

/* The blob's temp file (its kept bytes hashed first when resumed): X_READY, or X_DONE when the
 * kept bytes were all of it. */
static int open_temp(hk_dl_ctx *c, hk_xfer *x) {
    uint64_t kept = 0;
    int rc;
    /* whole, into a unique temp file renamed over the old blob when its hash matches: a refetch, or
     * a small blob (not worth resuming) */
    if (x->item->refetch || x->item->size <= HK__SMALL_BLOB_MAX) {
        x->resumable = false;
        if ((rc = hk__cache_blob_tmp_open(&x->fd, &x->tmp, c->repo_dir, x->item->etag))) return rc;
    } else if ((rc = hk__partial_open(&x->fd, &x->tmp, &kept, &x->resumable, c->repo_dir, x->item->etag,
                                      x->item->size))) {
        return rc;
    }
    if ((rc = hk__xfer_new_hasher(x))) return rc;
    if (kept > 0) { /* the hash covers the whole file: the kept bytes first */
        if ((rc = hk__partial_rehash(x->hasher, x->fd, kept, x->tmp))) return rc;
        x->kept = x->written = x->written_at_attempt = kept;
        hk__log(HK_LOG_INFO, "resuming %s at byte %llu of %llu (kept in %s)", x->item->paths[0],
                (unsigned long long)kept, (unsigned long long)x->item->size, x->tmp);
    }
    if (kept == x->item->size) { /* all there: no request at all, unless the hash says otherwise */
        bool again = false;
        if ((rc = hk__xfer_finish_file(c, x, &again))) return rc;
        if (!again) {
            unlock(x);
            x->state = X_DONE;
            return HK_OK;
        }
    }
    x->state = X_READY;
    x->ready_at = 0;
    return HK_OK;
}

/* X_CHECK / X_LOCK step: returns fatal error or HK_OK; may move to X_DONE or X_READY. A small
 * blob (unique temp file, never resumed: nothing but the download itself to guard) takes its byte
 * of the repo's small-blob lock file; a larger one its own lock file, which also guards the shared
 * resumable <etag>.incomplete (partial.c) and is the one huggingface_hub takes. */
static int try_acquire(hk_dl_ctx *c, hk_xfer *x) {
    bool refetch = x->item->refetch; /* the cached blob is not to be trusted: never "already there" */
    /* the first try follows the look of the call's start (or the caller's); after a lock wait the
     * holder may have finished it, and then no lock is needed to notice */
    if (!refetch && x->lock_since && hk__cache_blob_present(c->repo_dir, x->item->etag, x->item->size)) {
        x->state = X_DONE;
        return HK_OK;
    }
    bool small = c->small_fd >= 0 && x->item->size <= HK__SMALL_BLOB_MAX, got = false;
    int rc;
    if (small) {
        rc = hk__cache_rangelock_try(&got, c->small_fd, x->item->etag);
        if (got) x->range_fd = c->small_fd;
    } else {
        char *lock_path = hk__cache_filelock_path(c->hub->cache_root, c->repo_dir, x->item->etag);
        rc = lock_path ? hk__cache_filelock_try(&x->lock_fd, lock_path) : hk__fail(HK_ERR_NOMEM, "out of memory");
        free(lock_path);
        got = x->lock_fd >= 0;
    }
    if (rc) return rc;
    uint64_t now = hk__now_ms();
    if (!got) {
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
    if (!refetch && hk__cache_blob_present(c->repo_dir, x->item->etag, x->item->size)) {
        /* a partial file is removed only under the lock its writers take (never a small blob's) */
        if (!small) hk__partial_forget(c->repo_dir, x->item->etag);
        unlock(x);
        x->state = X_DONE;
        return HK_OK;
    }
    return open_temp(c, x);
}

/* Every blob of the batch (downloaded now, or found here: another process may have renamed it in
 * just before its own flush) durable before anything names it: the background flusher's work
 * on the large ones ended, one fdatasync pass (their writeback began as their bytes arrived, and
 * what the flusher did is clean), then the directories; only then the snapshot links
 * when c->link (the fetch of single files; a pull links in its stage, after this). Replaces an
 * fsync per blob that blocked the transfer loop each time a file finished. */
static int commit_batch(hk_dl_ctx *c, const hk_dl_item *items, size_t n) {
    const char **etags = calloc(n, sizeof *etags);
    if (!etags) return hk__fail(HK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) etags[i] = items[i].etag;
    int rc = hk__flusher_end(c->flusher); /* its errors are reported to its descriptors only */
    c->flusher = NULL;
    if (rc == HK_OK) rc = hk__cache_blobs_durable(c->repo_dir, etags, n);
    free(etags);
    for (size_t i = 0; rc == HK_OK && i < n; i++) rc = hk__xfer_link_all(c, &items[i]);
    return rc;
}

/* A transfer's state exists only from its first lock try until it is done (or the call ends):
 * the per-file cost of a pull of n files is one pointer here, not a whole hk_xfer (~350 bytes). */
static hk_xfer done_mark; /* its address marks a finished item; never written */
#define XFER_DONE (&done_mark)

static hk_xfer *xfer_new(hk_dl_item *item, const char *repo_dir) {
    hk_xfer *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->item = item;
    x->repo_dir = repo_dir;
    x->fd = -1;
    x->lock_fd = -1;
    x->range_fd = -1;
    hk__http_headers_init(&x->h);
    return x;
}

/* Everything x holds released (a kept partial file stays when rc is worth resuming after). */
static void xfer_free(CURLM *multi, hk_xfer *x, int rc) {
    if (!x || x == XFER_DONE) return;
    if (x->easy) {
        if (multi) curl_multi_remove_handle(multi, x->easy);
        curl_easy_cleanup(x->easy);
    }
    curl_slist_free_all(x->hdrs);
    hk__xfer_keep_or_drop(x, rc); /* before the unlock: prune may take a temp file once it is free */
    unlock(x);
    hk__http_headers_free(&x->h);
    free(x->url);
    free(x->resolve_url);
    free(x->errbuf);
    free(x);
}

/* One piece (about 200 lines): the curl multi event loop. Starting, finishing and resuming a
 * transfer are functions of their own (on_done, the start path); what stays here is the loop over
 * the state they all share (the held set, the spare handles, the stall clock, progress), which
 * split up would be passed between functions by a dozen pointers. */
int hk__download_blobs(hk_dl_stats *stats, hk_hub *hub, const char *repo_id, const char *repo_dir,
                      const char *commit, hk_dl_item *items, size_t n, bool link) {
    if (n == 0) return HK_OK;
    hk_xfer **xs = calloc(n, sizeof *xs); /* NULL: not looked at yet; XFER_DONE: finished */
    CURLM *multi = curl_multi_init();
    int rc = HK_OK;
    hk_dl_ctx c = {hub, repo_id, repo_dir, commit, stats, 0, 0, n, 0, 0, false, link, hub->pull_deadline_at, NULL, 0, NULL, 0, -1, NULL};
    if (!xs || !multi) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    int maxp = hub->max_parallel > 0 ? hub->max_parallel : 8;
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)maxp);
    if ((rc = hk_cache_ensure_tag(hub->cache_root))) goto out;
    for (size_t i = 0; i < n; i++) /* opened once, when some blob is small */
        if (items[i].size <= HK__SMALL_BLOB_MAX) {
            hk__cache_rangelock_open(&c.small_fd, hub->cache_root, repo_dir);
            break;
        }
    size_t remaining = 0;
    for (size_t i = 0; i < n; i++) {
        /* already complete in the cache? (no lock needed to notice) */
        if (!items[i].refetch && !items[i].absent && hk__cache_blob_present(repo_dir, items[i].etag, items[i].size)) {
            xs[i] = XFER_DONE;
            c.total_files--;
        } else {
            remaining++;
            c.total_bytes += items[i].size;
        }
    }
    if (c.total_bytes <= HK_XFER_EARLY_FLUSH_MAX_PULL) c.flusher = hk__flusher_new(); /* larger: the disk is the limit */
    size_t next_check = 0;            /* X_CHECK items are taken in order: none before this index */
    size_t *waiting = calloc(n, sizeof *waiting); /* X_LOCK items (another process holds the lock) */
    size_t nwaiting = 0;
    c.held = calloc((size_t)maxp, sizeof *c.held);
    c.spare = calloc((size_t)maxp, sizeof *c.spare);
    if (!waiting || !c.held || !c.spare) {
        free(waiting);
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto out;
    }
    report(&c, true);
    while (remaining > 0) {
        uint64_t now = hk__now_ms();
        if (c.deadline && now >= c.deadline) { /* waiting for a lock or a retry counts too */
            for (size_t i = 0; i < n; i++)
                if (xs[i] != XFER_DONE) {
                    hk_xfer idle = {.item = &items[i]}; /* not started: nothing written */
                    rc = pull_deadline_fail(&c, xs[i] ? xs[i] : &idle);
                    goto out_loop;
                }
        }
        for (size_t i = 0; i < c.nheld; i++)
            if (stalled(&c, c.held[i], now)) {
                rc = stall_fail(&c, c.held[i]);
                goto out_loop;
            }
        int active = 0;
        for (size_t i = 0; i < c.nheld; i++) active += c.held[i]->state == X_ACTIVE;
        /* fill free slots: files that already hold their lock first, then new locks */
        for (size_t i = 0; i < c.nheld && active < maxp; i++) {
            hk_xfer *x = c.held[i];
            if (x->state == X_READY && x->ready_at <= now) {
                if ((rc = start_attempt(&c, multi, x))) goto out_loop;
                active++;
            }
        }
        /* then locks: those waited for (in order), then new files */
        for (size_t k = 0; k < nwaiting + (n - next_check) && (int)c.nheld < maxp;) {
            bool from_wait = k < nwaiting;
            size_t i = from_wait ? waiting[k] : next_check;
            if (!from_wait && xs[i] == XFER_DONE) { /* done up front (already in the cache) */
                next_check++;
                continue;
            }
            if (!xs[i] && !(xs[i] = xfer_new(&items[i], repo_dir))) {
                rc = hk__fail(HK_ERR_NOMEM, "out of memory");
                goto out_loop;
            }
            hk_xfer *x = xs[i];
            if (from_wait && x->ready_at > now) {
                k++;
                continue;
            }
            if ((rc = try_acquire(&c, x))) goto out_loop;
            if (from_wait && x->state != X_LOCK) waiting[k] = waiting[--nwaiting]; /* (k stays) */
            else if (from_wait) k++;
            else {
                next_check++;
                if (x->state == X_LOCK) waiting[nwaiting++] = i, k++;
            }
            if (x->state == X_READY) {
                c.held[c.nheld++] = x;
                if (active < maxp) {
                    if ((rc = start_attempt(&c, multi, x))) goto out_loop;
                    active++;
                }
            } else if (x->state == X_DONE) {
                remaining--;
                c.done_files++;
                c.done_bytes += x->item->size;
                xfer_free(multi, x, HK_OK);
                xs[i] = XFER_DONE;
            }
        }
        if (remaining == 0) break;
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            hk_xfer *x = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            CURLcode cc = m->data.result;
            curl_multi_remove_handle(multi, m->easy_handle);
            if ((rc = on_done(&c, x, cc))) goto out_loop;
            if (x->state == X_DONE) {
                unlock(x);
                release(&c, x, (size_t)maxp);
                remaining--;
                c.done_files++;
                c.done_bytes += x->item->size;
                report(&c, true);
                xs[x->item - items] = XFER_DONE;
                xfer_free(multi, x, HK_OK);
            }
        }
        if (c.cancelled) {
            rc = cancelled_fail(&c);
            goto out_loop;
        }
        report(&c, false);
        if (remaining == 0) break;
        /* Block for socket activity (curl_multi_poll also wakes for libcurl's own timers), but wake
         * for scheduled retries and lock polls. Not at all only when something can start now: a
         * due transfer with a free slot, or a file to lock with a free lock slot. Files merely
         * queued behind full slots used to make the wait 0, spinning on curl_multi_perform. */
        long wait = 100;
        now = hk__now_ms();
        active = 0;
        for (size_t i = 0; i < c.nheld; i++) active += c.held[i]->state == X_ACTIVE;
        for (size_t i = 0; i < c.nheld; i++) {
            hk_xfer *x = c.held[i];
            if (x->state != X_READY) continue;
            if (x->ready_at > now) {
                long d = (long)(x->ready_at - now);
                if (d < wait) wait = d;
            } else if (active < maxp) {
                wait = 0;
            }
        }
        if ((int)c.nheld < maxp) {
            for (size_t k = 0; k < nwaiting; k++) {
                const hk_xfer *x = xs[waiting[k]];
                long d = x->ready_at > now ? (long)(x->ready_at - now) : 0;
                if (d < wait) wait = d;
            }
            if (next_check < n) wait = 0;
        }
        if (wait > 0) curl_multi_poll(multi, NULL, 0, (int)wait, NULL);
    }
out_loop:
    free(waiting);
    if (rc) goto out;
    report(&c, true);
    rc = commit_batch(&c, items, n);
out:
    hk__flusher_abandon(c.flusher); /* a failed call's; commit_batch ended it otherwise */
    if (xs)
        for (size_t i = 0; i < n; i++) xfer_free(multi, xs[i], rc);
    if (c.small_fd >= 0) close(c.small_fd); /* after every byte lock was released above */
    for (size_t i = 0; i < c.nspare; i++) curl_easy_cleanup(c.spare[i]);
    free(c.spare);
    free(c.held);
    free(xs);
    if (multi) curl_multi_cleanup(multi);
    return rc;
}
