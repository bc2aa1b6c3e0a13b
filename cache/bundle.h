/* Cache bundles: move cached repos between machines as one tar file, for air-gapped fleets
 * (`hubkern bundle create|extract|list`). Export keeps the huggingface_hub layout (blobs, relative
 * snapshot links, refs); import treats the archive as hostile: only the cache layout is accepted,
 * every blob is re-hashed against its name, and refs are written last, only if everything else
 * landed. */
#ifndef HK_CACHE_BUNDLE_H
#define HK_CACHE_BUNDLE_H

#include "cache/cache.h"

#include <stdint.h>

typedef struct hk_bundle_stats {
    uint32_t repos;
    uint32_t blobs_added;    /* create: blobs written into the bundle; extract: new blobs written to the cache */
    uint32_t blobs_present;  /* blobs the cache already had (content verified in the archive anyway) */
    uint32_t links;          /* snapshot entries */
    uint32_t refs;
    uint64_t bytes;          /* blob bytes read or written */
} hk_bundle_stats;

/* Write the repos (cache folder names such as "kernels--org--name", or repo ids with `type`) found
 * under cache_root into a tar archive at out_path (gzip when the name ends in .gz/.tgz, zstd for
 * .zst). Temp files, locks and .incomplete blobs are left out. */
int hk_bundle_create(hk_bundle_stats *out_stats, const char *out_path, const char *cache_root,
                     hk_repo_type type, const char *const *repo_ids, size_t n_repos);

/* Import a bundle into cache_root (created if needed). On any error nothing that references
 * unverified data is left: refs are only written after all blobs were verified. */
int hk_bundle_extract(hk_bundle_stats *out_stats, const char *in_path, const char *cache_root);

/* Visit each entry of a bundle without extracting it. */
typedef void (*hk_bundle_visit_fn)(void *ud, const char *path, char kind, uint64_t size, const char *link_target);
int hk_bundle_list(const char *in_path, hk_bundle_visit_fn fn, void *ud);

#endif
