/* hubkern/sys/cache.h — the primitives that write a cache-layout store: for mirrors, publishers and
 * tools that build a store by hand (`hubkern serve`, `hubkern publish` and bundle extraction use
 * them), not for loaders, which fill the cache through hk_hub_pull / hk_get_kernel and never write
 * refs or links themselves. As in libgit2's include/git2/sys/, these are part of the ABI but kept
 * out of the main headers (hubkern.h does not include this one), so that the API a loader sees is
 * what a loader needs. Writing by hand bypasses the pull's checks: the caller vouches for what it
 * links (the digest check of a variant still runs when a loader uses it). */
#ifndef HUBKERN_SYS_CACHE_H
#define HUBKERN_SYS_CACHE_H

#include "hubkern/cache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write <repo_dir>/refs/<ref> atomically (temp file + rename, no trailing newline; nested folders for
 * "refs/pr/1") naming commit, and create snapshots/<commit>/. ref must not be the commit itself.
 * Errors: HK_ERR_INVALID_ARG (a ref that would leave refs/), HK_ERR_IO / HK_ERR_DISK_FULL. */
HK_API int hk_cache_write_ref(const char *repo_dir, const char *ref, const char *commit);
/* Make snapshots/<commit>/<path> a relative symlink to blobs/<etag>, replacing what is there and
 * accepting an identical link made concurrently by another process; a link already naming that
 * blob is left as it is (nothing written). path must be a safe relative
 * path (HK_ERR_UNSAFE_PATH otherwise); HK_ERR_IO when the link cannot be made. */
HK_API int hk_cache_link_snapshot(const char *repo_dir, const char *commit, const char *path, const char *etag);
/* Write <root>/CACHEDIR.TAG (the backup-tool marker huggingface_hub writes) if it is absent. */
HK_API int hk_cache_ensure_tag(const char *root);

/* The paths of a store's parts, made the one way the library makes them, each refusing a name that
 * would leave its folder (NULL with HK_ERR_UNSAFE_PATH, or HK_ERR_NOMEM, as the last error): a
 * mirror or a tool that reads or writes a store asks these rather than spelling the layout.
 * Free each with hk_free. */
/* snapshots/<commit> (rel NULL) or snapshots/<commit>/<rel>: commit 40/64 lowercase hex, rel a safe
 * relative path. */
HK_API char *hk_cache_snapshot_path(const char *repo_dir, const char *commit, const char *rel);
/* blobs/<etag>: etag one path component, not starting with '.'. */
HK_API char *hk_cache_blob_path(const char *repo_dir, const char *etag);
/* refs/<ref>: ref a safe relative path (refs may nest, as refs/pr/1). */
HK_API char *hk_cache_ref_path(const char *repo_dir, const char *ref);
/* The folders of a repo folder: which is "blobs", "refs" or "snapshots" (NULL, HK_ERR_INVALID_ARG,
 * for anything else). */
HK_API char *hk_cache_repo_part(const char *repo_dir, const char *which);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_SYS_CACHE_H */
