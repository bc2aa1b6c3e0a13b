/* Blob downloads of the Hub client (download.c) and the one-file fetch (fetch_file.c). Internal. */
#ifndef HK_CLIENT_DOWNLOAD_H
#define HK_CLIENT_DOWNLOAD_H

#include "hubkern/hub.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- downloads (download.c) ---------------------------------------------------------------- */
/* A blob of at most this many bytes is written, under its lock as any other, to a unique temp file
 * (one O_EXCL open) renamed into place once its hash matches, not to the resumable
 * <etag>.incomplete: resuming it would save less than the shared name costs (its open without
 * O_EXCL, fstat and seek, then the claim: rename to a unique name, fstat, stat). */
#define HK__SMALL_BLOB_MAX ((uint64_t)64 * 1024)

typedef struct hk_dl_item {
    const char *etag;   /* blob name: sha256 (64 hex) or git blob sha1 (40 hex) */
    uint64_t size;
    const char *const *paths; /* repo paths that point to this blob (borrowed: a pull's listing's) */
    size_t npaths;
    bool downloaded;    /* out: fetched by this call (false: was cached or fetched by another process) */
    bool refetch;       /* in: fetch it even though blobs/ has it (corrupt, or a forced download): from
                           byte 0 into a unique temp file renamed over the old blob, so that readers
                           see the old file or the new one, never a partial one */
    bool hashed;        /* in: its cached blob was hashed against etag by this pull (no need again) */
    bool absent;        /* in: the caller has just found no blob for it: not looked for again before its
                           lock is taken (the look under the lock, which decides, stays) */
} hk_dl_item;

typedef struct hk_dl_stats {
    uint64_t bytes_downloaded; /* bytes transferred by this call (resumed prefixes not counted) */
    uint64_t bytes_resumed;    /* bytes taken over from .incomplete files an earlier attempt kept */
    uint64_t bytes_verified;
    size_t files_downloaded;
} hk_dl_stats;

/* Download each item's blob at commit into blobs/ of repo_dir (size and hash checked while
 * streaming). With link, snapshots/<commit>/<path> links are made for each item's paths as its blob
 * is there; without: blobs only (a pull stages and verifies the links before publishing them). */
int hk__download_blobs(hk_dl_stats *stats, hk_hub *hub, const char *repo_id, const char *repo_dir,
                      const char *commit, hk_dl_item *items, size_t n, bool link);

/* One file of a kernel repo at a commit (path "build/<variant>/metadata.json"), as hf_hub_download
 * would fetch it: when its snapshot link resolves it is used as it is (no network); else, online,
 * its directory is listed (one level), its blob downloaded and checked against the listed hash,
 * and the snapshot link made; nothing else of the directory is fetched. A variant's metadata.json
 * comes with its metadata.json.sigstore, checked (signature_mode: hubkern/signature.h) before
 * either is linked. Offline and absent:
 * HK_ERR_OFFLINE. *out_path (the snapshot path) is freed with hk_free. */
int hk__hub_fetch_file(char **out_path, hk_hub *hub, const char *repo_id, const char *commit, const char *path,
                       int signature_mode);
/* The bytes of one file of a kernel repo at a commit, read without writing anything to the cache
 * (hk_has_kernel stores nothing): the snapshot's copy when there is one, else one GET of the file
 * (at most max bytes). Offline and absent: HK_ERR_OFFLINE. *out (NUL-terminated, *out_len bytes)
 * and *out_where (the path or URL read, for messages) are freed with free. */
int hk__hub_peek_file(char **out, size_t *out_len, char **out_where, hk_hub *hub, const char *repo_id,
                      const char *commit, const char *path, size_t max);

#endif
