/* Signature receipts (cache/sig_receipt.c): a verified Sigstore bundle of a cached variant, keyed by
 * the SHA-256 of everything the verification read (metadata.json, metadata.json.sigstore, the trust
 * root, the policies), so that a warm load does not redo the cryptography while those bytes are
 * the same. Kept beside the variant's digest receipt as <variant>.signature (prune and rm treat the
 * receipt folder as a whole). Like the digest receipt it is only ever a reason to skip work. */
#ifndef HK_CACHE_SIG_RECEIPT_H
#define HK_CACHE_SIG_RECEIPT_H

#include <stdbool.h>

/* Path of the signature receipt of a variant (NULL: unusable name or out of memory). Caller frees. */
char *hk__sig_receipt_path(const char *root, const char *repo_dir, const char *commit, const char *variant);
/* Does the receipt at path hold exactly this key? *identity (may be NULL): the signer it recorded,
 * allocated, caller frees. */
bool hk__sig_receipt_vouches(const char *path, const char *key, char **identity);
/* Write it atomically (HK_OK, or the error; callers treat a failure as "no receipt"). */
int hk__sig_receipt_save(const char *path, const char *key, const char *identity);

#endif
