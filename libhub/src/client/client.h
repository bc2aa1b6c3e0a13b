/* Internals of the Hub client (libhub/src/client). Not installed. Includes the headers of each part
 * (hub_internal.h: the handle; http.h / url.h: HTTP plumbing; download.h: blobs; tree.h: listings)
 * and declares the digest check (digest.c) and the variant choice (pick.c). */
#ifndef HK_CLIENT_INTERNAL_H
#define HK_CLIENT_INTERNAL_H

#include "client/download.h"
#include "client/http.h"
#include "client/hub_internal.h"
#include "client/tree.h"
#include "client/url.h"
#include "hubkern/hub.h"
#include "internal.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- metadata.json digest (digest.c) ------------------------------------------------------- */
/* Recompute the digest of a variant directory and compare it with metadata.json. Each violation is
 * logged (warning) and listed in the HK_ERR_DIGEST message. *out_bytes gets the bytes hashed.
 * *out_has_digest = false (and HK_OK) when metadata.json carries no digest. */
int hk_verify_variant_digest(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir);
/* Same; quiet: no warnings (probing whether a cached variant is complete); fresh: sha256 blob names
 * this process has just written after hashing them (their files are not read again). */
int hk_verify_variant_digest_ex(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir, bool quiet,
                                const char *const *fresh, size_t nfresh);

/* What a digest check read: bytes_hashed were read and hashed now; bytes_fresh are blobs this process
 * has just downloaded (hashed while streaming, named by that hash); bytes_trusted were skipped because
 * the variant's verification receipt showed each file unchanged since it was hashed. */
typedef struct hk_verify_stats {
    uint64_t bytes_hashed, bytes_fresh, bytes_trusted;
    size_t files_hashed, files_fresh, files_trusted;
} hk_verify_stats;

/* The digest check of a variant directory of the cache at cache_root
 * (<cache_root>/<folder>/snapshots/<commit>/build/<variant>) with verification receipts
 * (cache/receipt.c): a file whose stat identity the receipt holds is not read again; all others are
 * hashed. Success writes a fresh receipt when anything was hashed; failure deletes it. cache_root
 * NULL (or HUBKERN_VERIFY=always): everything is hashed and no receipt is read or written. The
 * counts go to the log at debug level. */
int hk_verify_variant_cached(bool *out_has_digest, hk_verify_stats *out_stats, const char *variant_dir,
                             const char *cache_root, bool quiet, const char *const *fresh, size_t nfresh);

/* ---- variant choice (pick.c) --------------------------------------------------------------- */
/* Choose the best variant among names for this machine (backend may force "cpu" etc.).
 * *out is one of names (not a copy). */
int hk_pick_variant(const char **out, const char *const *names, size_t n, const char *backend);
/* The same, restricted to the families in `families` (HK_FAMILY_BIT mask; 0: any). */
int hk_pick_variant_of(const char **out, const char *const *names, size_t n, const char *backend,
                       unsigned families);

#endif
