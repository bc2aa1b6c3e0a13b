/* hubkern/lockfile.h — kernels.lock files (kernels 0.17's format, old and new): read, build, write
 * and lock a dependency tree; the variant hashes of the old format. hk_load_locked, which loads from
 * one, is in hubkern/kernel.h. */
#ifndef HUBKERN_LOCKFILE_H
#define HUBKERN_LOCKFILE_H

#include "hubkern/kernel.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- lockfiles ------------------------------------------------------------------------------ */

typedef struct hk_lockfile hk_lockfile;     /* a parsed or built kernels.lock (opaque) */
typedef struct hk_lock_entry hk_lock_entry; /* one locked kernel; lives as long as its lockfile */

typedef enum hk_lock_format { HK_LOCK_OLD = 0, HK_LOCK_NEW = 1 } hk_lock_format;

/* Parse kernels.lock (both formats, told apart by their keys). Free with hk_lockfile_free. */
HK_API int hk_lockfile_read(hk_lockfile **out, const char *path);
HK_API int hk_lockfile_parse(hk_lockfile **out, const char *json, size_t len);
/* An empty lockfile (new format) to fill with hk_lockfile_add and write. */
HK_API int hk_lockfile_new(hk_lockfile **out);
HK_API void hk_lockfile_free(hk_lockfile *lock);
HK_API hk_lock_format hk_lockfile_format(const hk_lockfile *lock);
HK_API size_t hk_lockfile_count(const hk_lockfile *lock);
/* The i-th entry in file order (NULL if i is out of range). */
HK_API const hk_lock_entry *hk_lockfile_entry(const hk_lockfile *lock, size_t i);
/* Find a repo's entry (NULL if absent). */
HK_API const hk_lock_entry *hk_lockfile_find(const hk_lockfile *lock, const char *repo_id);

HK_API const char *hk_lock_entry_repo_id(const hk_lock_entry *e);
/* HK_VERSION_UNSET when locked by revision (or old format). */
HK_API int hk_lock_entry_version(const hk_lock_entry *e);
HK_API const char *hk_lock_entry_revision(const hk_lock_entry *e); /* NULL unless locked by revision */
HK_API const char *hk_lock_entry_commit(const hk_lock_entry *e);   /* 40- or 64-hex */
/* Old format only: variant name → "sha256-<hex>" (git_lfs_concat); 0 variants otherwise. */
HK_API size_t hk_lock_entry_variant_count(const hk_lock_entry *e);
HK_API const char *hk_lock_entry_variant_name(const hk_lock_entry *e, size_t i);
HK_API const char *hk_lock_entry_variant_hash(const hk_lock_entry *e, size_t i);

/* Append a dependency and its commit (copied): exactly one of version (>= 0) and revision
 * (version HK_VERSION_UNSET). Checked by hk_lockfile_write. */
HK_API int hk_lockfile_add(hk_lockfile *lock, const char *repo_id, int version, const char *revision,
                           const char *commit);
/* Write lock's entries in the new (dependency/lock) format, sorted by (repo-id, version/revision),
 * atomically. An entry without a valid repo id, version or revision and full commit id, and
 * duplicate dependencies, are refused (HK_ERR_INVALID_ARG). */
HK_API int hk_lockfile_write(const char *path, const hk_lockfile *lock);

/* Add every node of opts->repo_id's tree to lock as `kernels lock` does (lock_kernel_tree): the
 * publisher of each node checked (unless opts->trust_remote_code), its version / revision resolved
 * to a commit, and the kernel-depends of *every* variant at that commit followed (not only this
 * machine's), cycles refused (HK_ERR_DEPENDENCY). The root is locked as asked (no redirects, as
 * kernels). Nodes already in lock are kept. Online only. */
HK_API int hk_lockfile_add_tree(hk_lockfile *lock, const hk_get_kernel_options *opts);

/* git_lfs_concat hash of a cached variant directory (snapshots/<commit>/build/<variant>): each file
 * is a symlink to blobs/<id>; a 64-char id is sha256 of the content (LFS), a 40-char id the git
 * blob sha1. *out: "sha256-<64 hex>", free with hk_free. */
HK_API int hk_variant_hash_from_cache(char **out, const char *variant_dir);

/* Pairs (relative path, hex id) → "sha256-<hex>" (the documented algorithm, for tree listings).
 * *out: free with hk_free. */
HK_API int hk_variant_hash_from_pairs(char **out, const char *const *paths, const char *const *ids,
                                      size_t count);

#ifdef __cplusplus
}
#endif
#endif /* HUBKERN_LOCKFILE_H */
