/* One blob's transfer in the parallel downloader (download.c runs the state machine): its temp
 * file, streaming hash, libcurl callbacks and the step that moves a finished file into blobs/
 * (xfer.c). Internal to the two. */
#ifndef HK_CLIENT_XFER_H
#define HK_CLIENT_XFER_H

#include "client/client.h"
#include "util/flusher.h"

#include <stdbool.h>
#include <stdint.h>

enum hk_xstate { X_CHECK, X_LOCK, X_READY, X_ACTIVE, X_DONE };

typedef struct hk_xfer {
    hk_dl_item *item;
    const char *repo_dir;
    enum hk_xstate state;
    uint64_t ready_at;       /* X_LOCK / X_READY: not before this time */
    uint64_t lock_since;
    uint64_t next_lock_log;
    int lock_fd;
    int range_fd;            /* >= 0: the blob's byte of the small-blob lock file is held (hk_dl_ctx.small_fd) */
    int fd;
    char *tmp;
    char *resolve_url;       /* where every attempt starts (made at the first attempt, freed when done) */
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
    char *errbuf;            /* libcurl's text for the current attempt's failure (CURL_ERROR_SIZE, held only) */
    unsigned char *buf;      /* write-behind buffer: bytes received but not yet written */
    size_t buf_len, buf_cap; /* buf_cap: the blob's size up to HK_XFER_BUF */
    /* the progress clock, across attempts: when the blob last got HK_XFER_PROGRESS_STEP more
     * bytes (or its first attempt began; 0: not yet) and its byte count then */
    uint64_t moved_at;
    uint64_t moved_mark;
    bool clock_restart;      /* a 408/429/5xx retry is pending: its wait is bounded apart */
    uint64_t kicked;         /* `written` when the file's writeback was last started */
} hk_xfer;

#define HK_XFER_BUF (1u << 20)
/* Start the temp file's writeback every this many bytes (sync_file_range, no wait), so that the
 * disk writes while the network delivers instead of all at the end. */
#define HK_XFER_WRITEBACK_STEP (8u << 20)
/* A finished blob of at least this many bytes is handed to the pull's background flusher
 * (util/flusher.h), flushed while the other transfers go on: a 300 MB pull of 20 or 300 files
 * 4-21 % faster than with every flush at the end (bench/durable_pull_bench.md, stops 38 and 39).
 * Smaller ones are left to the final pass, where one syncfs can cover thousands. */
#define HK_XFER_EARLY_FLUSH_MIN ((uint64_t)256 << 10)
/* ... but only in pulls of at most this many bytes to fetch. In a larger one the disk, not the
 * network, is the limit for most of the pull, and each early flush (a device cache flush) stalls
 * the writeback the other transfers need: a 2 GB pull of 202 files ran 21 % slower with them
 * (median of 15 interleaved reps, slower in 13 of 15 pairs; stop 39). Between 300 MB and 2 GB
 * nothing is measured, so the gate sits low. */
#define HK_XFER_EARLY_FLUSH_MAX_PULL ((uint64_t)512 << 20)
/* What counts as progress for HUBKERN_STALL_TIMEOUT: a body dripping a few bytes a second passes
 * libcurl's low-speed limit (1 byte/s) forever; 64 KiB per 30 s (about 2 KB/s) does not. */
#define HK_XFER_PROGRESS_STEP (64u << 10)

typedef struct hk_dl_ctx {
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
    /* the transfers that hold their blob lock (X_READY / X_ACTIVE): at most max_parallel, so
     * that each event costs O(max_parallel), not O(files) */
    hk_xfer **held;
    size_t nheld;
    /* curl handles of finished transfers, reused by the next ones (a handle is ~10 kB) */
    CURL **spare;
    size_t nspare;
    /* the repo's small-blob lock file (cache/blobs.c hk__cache_rangelock_open), -1: per-blob locks */
    int small_fd;
    hk_flusher *flusher; /* early flushes of finished blobs; NULL: none (out of memory) */
} hk_dl_ctx;

/* Close and unlink the temp file, free the buffer and the hasher. */
void hk__xfer_drop_temp(hk_xfer *x);
/* At the end of a call that failed with rc: keep a resumable temp file holding a correct prefix
 * (flushed) for the next attempt when rc is worth resuming after; drop it otherwise. */
void hk__xfer_keep_or_drop(hk_xfer *x, int rc);
int hk__xfer_new_hasher(hk_xfer *x);
/* Start the content over at byte 0 (truncate, new hasher). */
int hk__xfer_reset_content(hk_xfer *x);
/* The kept bytes are no prefix of what the server has now: discard them, fetch again once. */
int hk__xfer_discard_kept(hk_dl_ctx *c, hk_xfer *x, const char *why);
/* libcurl header and write callbacks (userdata: the hk_xfer). */
size_t hk__xfer_on_header(char *p, size_t sz, size_t n, void *ud);
size_t hk__xfer_on_body(char *p, size_t sz, size_t n, void *ud);
/* The snapshot links of the item's paths (when c->link). */
int hk__xfer_link_all(hk_dl_ctx *c, const hk_dl_item *it);
/* The whole blob is in the temp file: check its hash and move it into blobs/ (not yet durable,
 * not yet linked: hk__download_blobs does both for the whole batch). *again: the kept bytes of an
 * earlier attempt made the hash fail; they were discarded and the blob is to be fetched again
 * from byte 0. */
int hk__xfer_finish_file(hk_dl_ctx *c, hk_xfer *x, bool *again);

#endif
