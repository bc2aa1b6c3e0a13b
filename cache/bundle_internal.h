/* Private to the bundle files (bundle.c, bundle_create.c, bundle_extract.c): the report and the
 * archive helpers they share. Bundles move cached repos between machines as one tar file, for
 * air-gapped fleets (`hubkern bundle create|extract|list`). Export keeps the huggingface_hub layout
 * (blobs, relative snapshot links, refs); import treats the archive as hostile: only the cache layout
 * is accepted, every blob is re-hashed against its name, and refs are written last, only if
 * everything else landed. */
#ifndef HK_CACHE_BUNDLE_INTERNAL_H
#define HK_CACHE_BUNDLE_INTERNAL_H

#include "cache/cache_internal.h"
#include "internal.h"

#include "cache/archive_lib.h"

#include <stdint.h>

#define HK_BUNDLE_CHUNK (1 << 20)
#define HK_BUNDLE_REF_MAX 256

struct hk_bundle_report {
    uint32_t repos;
    uint32_t blobs_added;   /* create: blobs written into the bundle; extract: new blobs written to the cache */
    uint32_t blobs_present; /* blobs the cache already had (content verified in the archive anyway) */
    uint32_t links;         /* snapshot entries */
    uint32_t refs;
    uint64_t bytes;         /* blob bytes read or written */
};

/* The runs behind the public calls, on a resolved cache root (bundle.c checks the options). */
int hk__bundle_run_create(hk_bundle_report *stats, const char *out_path, const char *cache_root, hk_repo_type type,
                         const char *const *repo_ids, size_t n_repos);
int hk__bundle_run_extract(hk_bundle_report *stats, const char *in_path, const char *cache_root);

/* hk__fail(HK_ERR_IO) with libarchive's message for ar. */
int hk__bundle_ar_fail(struct archive *ar, const char *what);
/* Open a bundle for reading (tar, plain, gzip or zstd). */
int hk__bundle_open_reader(struct archive **out, const char *path);

#endif
