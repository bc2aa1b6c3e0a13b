/* Internals of the cache layer (not installed): the on-disk store, byte-compatible with the
 * huggingface_hub cache (see ../shared/reference/hub-protocol.md §7), as the rest of libhubkern
 * uses it: refs, snapshot links, blob locks and temp files, the metadata.json digest check and the
 * verification receipts. What programs use (ls, verify, prune, rm, bundles, the cache root, repo
 * types) is the public hubkern/cache.h, included here. cache/ includes nothing above the util layer. */
#ifndef HK_CACHE_H
#define HK_CACHE_H

#include "hubkern/cache.h"
#include "hubkern/sys/cache.h"
#include "internal.h"
#include "util/arena.h"

#include <stdbool.h>
#include <stddef.h>

/* "" / "datasets/" / "spaces/" / "kernels/" (resolve-URL prefix). */
const char *hk__repo_type_url_prefix(hk_repo_type t);
/* "kernel", "model", ...: the singular type huggingface_hub's cache tools print */
const char *hk__repo_type_singular(hk_repo_type t);
/* "kernel/org/name": how every cache report names a repo, as `hf cache ls` (its cache_id) does.
 * Caller frees; NULL on allocation failure. */
char *hk__cache_repo_label(hk_repo_type t, const char *repo_id);

/* ---- paths of a repo folder, spelled here and nowhere else (cache/layout.c) ------------------- */
/* Each checks the names it is given, so that no path it makes can leave its folder: NULL with
 * HK_ERR_UNSAFE_PATH (a name that is not one: "..", "/x", "a//b", a control character, a commit
 * that is not 40/64 lowercase hex, a blob or variant name with a '/') or HK_ERR_NOMEM set; read the
 * code with hk_last_error_code(). Caller frees. */
/* snapshots/<commit> (rel NULL), or snapshots/<commit>/<rel> (rel: a safe relative path). */
char *hk__cache_snapshot_path(const char *repo_dir, const char *commit, const char *rel);
/* snapshots/<commit>/build/<variant> (variant: one path component). */
char *hk__cache_variant_path(const char *repo_dir, const char *commit, const char *variant);
/* blobs/<etag><suffix> (etag: one path component not starting with '.'; suffix may be NULL). */
char *hk__cache_blob_path(const char *repo_dir, const char *etag, const char *suffix);
/* refs/<rev> (rev: a name under the one revision rule, hk__revision_valid; refs may nest, as
 * refs/pr/1). */
char *hk__cache_ref_path(const char *repo_dir, const char *rev);

/* The folders of a repo folder: "blobs", "refs", "snapshots" (which: one of those). */
char *hk__cache_repo_subdir(const char *repo_dir, const char *which);
/* .no_exist/<commit>/<rel>: huggingface_hub's record that rel is absent at commit. */
char *hk__cache_no_exist_path(const char *repo_dir, const char *commit, const char *rel);
/* .hk-staging/<name> (name: one path component): hubkern's staging folders, beside snapshots/. */
char *hk__cache_staging_path(const char *repo_dir, const char *name);

/* The one rule for the id of a kernel repo: a valid repo id (hk_repo_id_valid) with an org part
 * ("org/name"), as the Hub's kernel repos and kernels' get_kernel have them. */
bool hk__kernel_repo_id_valid(const char *repo_id);
/* A repo folder's name (its first n bytes): "<models|datasets|spaces|kernels>--" and a repo id
 * (hk_repo_id_valid) with '/' written "--", as hk_cache_repo_dir makes them; nothing else. */
bool hk__cache_repo_folder_valid(const char *folder, size_t n);
/* refs/<rev> → 40-hex commit (trimmed). HK_ERR_NOT_FOUND if absent. out gets 41+ bytes. */
int hk__cache_read_ref(char out_commit[65], const char *repo_dir, const char *rev);
/* The content of a ref file (the cache's or a bundle's): one commit id (40/64 lowercase hex) with
 * only ASCII white space around it (git ends it with a newline); anything else, trailing bytes
 * included, is no ref (false). */
bool hk__cache_ref_text_parse(char out_commit[65], const char *data, size_t n);
/* hk_cache_write_ref, hk_cache_link_snapshot, hk_cache_ensure_tag: public (hubkern/cache.h). */


/* ---- blob store: locks, temp files, verification (cache/blobs.c) --------------------------- */
#include <stdint.h>

/* <root>/.locks/<repo folder>/<etag>.lock. Caller frees. */
char *hk__cache_filelock_path(const char *root, const char *repo_dir, const char *etag);
/* Try to take an exclusive lock (flock, mode 0664, O_NOFOLLOW, inode re-check after acquiring;
 * the lock file is never unlinked). *out_fd >= 0 when acquired, -1 when another process holds it.
 * Filesystems without flock: acquired "softly" (correctness then rests on temp file + rename). */
int hk__cache_filelock_try(int *out_fd, const char *lock_path);
/* Block until acquired (polling every 100 ms, logging every 10 s); timeout_ms < 0: forever. */
int hk__cache_filelock_wait(int *out_fd, const char *lock_path, long timeout_ms);
void hk__cache_filelock_release(int fd);

/* Small blobs (written to unique temp files, never resumed) share one lock file per repo,
 * <root>/.locks/<repo folder>/hubkern-small-blobs.lock, opened once per download call: a blob's
 * lock is one byte of it at an offset taken from its name, held with an open-file-description
 * lock (F_OFD_SETLK: it excludes other processes and other opens in this one). Two syscalls a blob
 * (lock, unlock) instead of a lock file's seven. *out_fd: -1 (no error) where the file cannot be
 * opened or the kernel or file system has no OFD locks: the caller takes per-blob locks then. */
void hk__cache_rangelock_open(int *out_fd, const char *root, const char *repo_dir);
/* Take the blob's byte without waiting: *out_got false when another holder has it. Errors other
 * than busy are returned as codes (HK_ERR_LOCK). */
int hk__cache_rangelock_try(bool *out_got, int fd, const char *etag);
void hk__cache_rangelock_release(int fd, const char *etag);
/* Whether some open of the repo's small-blob lock file holds etag's byte (cache prune: a temp
 * file of that blob is live then). */
bool hk__cache_rangelock_busy(const char *root, const char *repo_dir, const char *etag);

/* Open a fresh blobs/<etag>.<rand8>.incomplete (O_EXCL, mode 0666 & ~umask). Caller frees *out_tmp. */
int hk__cache_blob_tmp_open(int *out_fd, char **out_tmp, const char *repo_dir, const char *etag);
/* Rename a finished temp file to blobs/<etag>. */
int hk__cache_blob_commit(const char *tmp_path, const char *repo_dir, const char *etag);
/* Make blobs/<etag> of every etag durable (fdatasync each, 8 at a time: their writeback was
 * started as they arrived, so this mostly waits for the tail), then the names in blobs/ and the repo folder
 * (fsync of both directories). A snapshot may name these blobs only after this returns HK_OK. */
int hk__cache_blobs_durable(const char *repo_dir, const char *const *etags, size_t n);
/* blobs/<etag> exists as a regular file of `size` bytes (size UINT64_MAX: any size). */
bool hk__cache_blob_present(const char *repo_dir, const char *etag, uint64_t size);
/* snapshots/<commit>/<path> is a symlink that resolves to an existing blobs/<etag>. */
bool hk__cache_pointer_ok(const char *repo_dir, const char *commit, const char *path, const char *etag);
/* The largest metadata.json any reader takes (the digest check, verify, the strays, the
 * signature check); a receipt of a variant is sized from it (receipt.c). */
#define HK_METADATA_JSON_MAX (16u << 20)

/* Hash a blob as its name says (64 hex: sha256; 40 hex: git blob sha1). *out_checkable = false for
 * other names (mirror-fabricated etags). out_hex gets the actual digest. */
int hk__cache_hash_blob(char out_hex[129], bool *out_checkable, const char *blob_path, const char *etag);
/* The same for blob_path relative to the folder dirfd (AT_FDCWD: as open(2)), and the bytes hashed
 * in *out_bytes (left alone when the name is not checkable). */
int hk__cache_hash_blob_at(char out_hex[129], bool *out_checkable, uint64_t *out_bytes, int dirfd, const char *blob_path,
                           const char *etag);

/* ---- verification receipts (cache/receipt.c) ------------------------------------------------ */
#include <sys/stat.h>
#include <time.h>

/* The stat identity (size, st_dev, st_ino, mtime and ctime in ns) of each file of a variant that
 * passed its metadata.json digest check, for build/<variant> at one commit of one cache root. */
typedef struct hk_receipt hk_receipt;

/* hk_receipts_enabled (public, hubkern/cache.h): 0 when HUBKERN_VERIFY=always. */
/* <root>/.locks/<repo folder>/hubkern-receipts/<commit>/<variant>.json, or with HUBKERN_RECEIPTS_DIR
 * set: <that dir>/<32 hex of sha256(root)>/<repo folder>/<commit>/<variant>.json. NULL when a name is
 * unusable or out of memory. Caller frees. */
char *hk__receipt_path(const char *root, const char *repo_dir, const char *commit, const char *variant);
/* The directories that may hold receipts of the repo folder `folder` ("kernels--org--name") of this
 * cache root: <root>/.locks/<folder>/hubkern-receipts and, with HUBKERN_RECEIPTS_DIR set, also
 * <that dir>/<32 hex of sha256(root)>/<folder>. Each one holds <commit>/<variant>.json. Returns how
 * many were put in out (caller frees each; 0 for an unusable folder name). */
size_t hk__receipt_repo_dirs(char *out[2], const char *root, const char *folder);
/* <HUBKERN_RECEIPTS_DIR>/<32 hex of sha256(root)>, NULL when the variable is unset. Caller frees. */
char *hk__receipt_outside_root_dir(const char *root);
/* The receipt at path, if it was written for exactly this cache root (path and st_dev/st_ino of the
 * root), repo folder, commit, variant and metadata.json (meta_sha256: hex SHA-256 of its bytes).
 * NULL otherwise (missing, unreadable, corrupt, stale: the reason is logged at debug level). */
hk_receipt *hk__receipt_load(const char *path, const char *root, const char *repo_dir, const char *commit,
                            const char *variant, const char *meta_sha256);
/* An empty receipt for a metadata.json with that SHA-256 (NULL: out of memory). */
hk_receipt *hk__receipt_new(const char *meta_sha256);
/* Record rel with the stat taken before its bytes were hashed (allocation failures are sticky and
 * make hk__receipt_save fail). */
void hk__receipt_add(hk_receipt *r, const char *rel, const struct stat *st);
/* Room for n entries in all (a check knows how many files it may record: no doubling slack). */
int hk__receipt_reserve(hk_receipt *r, size_t n);
size_t hk__receipt_count(const hk_receipt *r);
/* Is r's i-th entry (in the order added) the one hk__receipt_add(rel, st) would make? */
bool hk__receipt_entry_is(const hk_receipt *r, size_t i, const char *rel, const struct stat *st);
/* A new receipt for r's metadata.json holding r's first n entries, room made for reserve (NULL: out
 * of memory; one whose copy ran out of memory fails to save). */
hk_receipt *hk__receipt_copy_prefix(const hk_receipt *r, size_t n, size_t reserve);
/* Keep only r's first n entries. */
void hk__receipt_truncate(hk_receipt *r, size_t n);
/* Give r the digest list its check read (moved: *dl is emptied; freed with r), and take it back
 * (false: r holds none). A check handed a receipt of the same metadata.json uses its list. */
struct hk_digest_list;
void hk__receipt_keep_list(hk_receipt *r, struct hk_digest_list *dl);
bool hk__receipt_take_list(hk_receipt *r, struct hk_digest_list *out);
/* Index a receipt built with hk__receipt_add so that hk__receipt_vouches can consult it (paths
 * added in sorted order need none: they are found by binary search). */
int hk__receipt_index(hk_receipt *r);
/* Whether r was made for the metadata.json of this SHA-256 (hex). */
bool hk__receipt_meta_is(const hk_receipt *r, const char *meta_sha256);
/* Does r hold rel with exactly this identity (and is it a regular file)? */
bool hk__receipt_vouches(const hk_receipt *r, const char *rel, const struct stat *st);
/* Was st (taken after the clock read taken_before) late enough after the file's last change that a
 * later change must alter ctime? (Coarse file-system clocks: a change within the same tick keeps it.) */
bool hk__receipt_stat_settled(const struct stat *st, const struct timespec *taken_before);
/* For a file about to be hashed: if its last change is within the racy window (and the wait is at
 * most ~21 ms, i.e. not a whole-second file system), sleep past it and take taken_before and st again,
 * so that the stat recorded after hashing is one that any later change must alter. */
void hk__receipt_settle(struct stat *st, struct timespec *taken_before, const char *path);
/* Write atomically (temp file + rename; concurrent writers: the last complete one wins). */
int hk__receipt_save(const hk_receipt *r, const char *path, const char *root, const char *repo_dir, const char *commit,
                    const char *variant);
/* Delete (missing is fine; other failures are logged as warnings). */
/* Write a receipt document to path (its folder made as needed) atomically, temp file + rename;
 * takes ownership of doc. Shared by the digest receipts and the signature receipts. */
struct cJSON;
int hk__receipt_write_json(const char *path, struct cJSON *doc);
void hk__receipt_remove(const char *path);
void hk__receipt_free(hk_receipt *r);

/* ---- plans of unfinished pulls (cache/pull_plan.c) ------------------------------------------ */
/* A plan older than this (seconds) belongs to a pull nobody resumed: it no longer protects its blobs
 * from prune, which removes it. */
#define HK_PULL_PLAN_MAX_AGE_S (7 * 24 * 3600)
/* Record, before downloading, the blob names a pull of commit will link (atomic write). */
int hk__pull_plan_write(const char *root, const char *repo_dir, const char *commit, const char *const *etags,
                        size_t n);
/* The pull's variant is published (or it has nothing left to fetch): forget its plan. */
void hk__pull_plan_remove(const char *root, const char *repo_dir, const char *commit);
/* The blob names of the repo's live plans (sorted), and the paths of its stale plans. */
typedef struct hk_pull_plans {
    char **names;
    size_t n;
    char **stale;
    size_t nstale;
} hk_pull_plans;
int hk__pull_plans_load(hk_pull_plans *p, const char *root, const char *repo_dir);
bool hk__pull_plans_name(const hk_pull_plans *p, const char *etag);
void hk__pull_plans_free(hk_pull_plans *p);

/* ---- a variant's metadata.json digest list (cache/digest_list.c) ---------------------------- */
/* One listed file: rel below build/<variant>/, want its base64 digest (NULL: not a string). */
typedef struct hk_digest_entry {
    const char *rel, *want;
} hk_digest_entry;
/* The list sorted by rel; its strings are copies in strs (the parsed JSON is gone once it is read:
 * at 100k files the tree cost ~160 B a file, the copies ~60). */
typedef struct hk_digest_list {
    bool has_digest, has_files; /* a "digest" object; its "files" object */
    hk_hash_kind kind;
    hk_digest_entry *e;
    size_t n;
    hk_arena strs;
} hk_digest_list;
/* Parse metadata.json text (what: the variant folder, for messages). HK_ERR_PARSE: not JSON; HK_OK with
 * has_digest false: no digest; HK_ERR_DIGEST: an unknown algorithm, no files object, a name listed
 * twice. The list is filled as far as it got (free it in every case). */
int hk__digest_list_parse(hk_digest_list *out, const char *text, size_t len, const char *what);
/* The same, taking text over (freed once it is parsed, before the list is copied out of it). */
int hk__digest_list_parse_owned(hk_digest_list *out, char *text, size_t len, const char *what);
/* The entry for rel, or NULL. */
const hk_digest_entry *hk__digest_list_find(const hk_digest_list *l, const char *rel);
void hk__digest_list_free(hk_digest_list *l);

/* ---- metadata.json digest of a cached variant (cache/digest.c) ------------------------------ */
/* Recompute the digest of a variant directory and compare it with metadata.json. Each violation is
 * logged (warning) and listed in the HK_ERR_DIGEST message. *out_bytes gets the bytes hashed.
 * *out_has_digest = false (and HK_OK) when metadata.json carries no digest. */
int hk__verify_variant_digest(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir);
/* Same; quiet: no warnings (probing whether a cached variant is complete); fresh: sha256 blob names
 * this process has just written after hashing them (their files are not read again). */
int hk__verify_variant_digest_ex(bool *out_has_digest, uint64_t *out_bytes, const char *variant_dir, bool quiet,
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
int hk__verify_variant_cached(bool *out_has_digest, hk_verify_stats *out_stats, const char *variant_dir,
                             const char *cache_root, bool quiet, const char *const *fresh, size_t nfresh);
/* hk__verify_variant_cached with flags: HK_VERIFY_PRESENT_ONLY checks the files that are there
 * (a pull of some of a variant's files: the digest entries of the others are not missing files);
 * HK_VERIFY_NO_WRITE reads receipts but writes or deletes none (a dry run writes nothing). */
#define HK_VERIFY_PRESENT_ONLY 1u
#define HK_VERIFY_NO_WRITE 2u
/* (hk__verify_variant_prior, *io_prior NULL) the receipt handed back carries the digest list too,
 * so that the next check of the same metadata.json parses nothing: its memory held until then,
 * for one variant at a time (a pull of several would hold every list where it held receipts) */
#define HK_VERIFY_KEEP_LIST 4u
int hk__verify_variant_flags(bool *out_has_digest, hk_verify_stats *out_stats, const char *variant_dir,
                            const char *cache_root, bool quiet, const char *const *fresh, size_t nfresh,
                            unsigned flags);
/* hk__verify_variant_flags with a receipt carried between two checks of one pull: *io_prior NULL:
 * this check's findings are handed back in it (a receipt in memory only, of the files hashed and
 * settled); else that receipt vouches for this check's files where the variant has no receipt of
 * its own (the published copy of a staged variant: its links resolve to the same blobs, so a
 * file's stat identity proves it unchanged since it was hashed), and is freed once used (*io_prior
 * NULL again: not held while this check writes its own). The caller frees what *io_prior holds. */
int hk__verify_variant_prior(bool *out_has_digest, hk_verify_stats *out_stats, const char *variant_dir,
                             const char *cache_root, bool quiet, const char *const *fresh, size_t nfresh,
                             unsigned flags, hk_receipt **io_prior);

/* How many of the files the variant's metadata.json digest lists are absent from variant_dir
 * (*out_missing of *out_listed; *out_first, when not NULL, the first one absent, to free). A
 * variant left by an interrupted pull, or by a metadata.json fetched alone, has some missing.
 * HK_ERR_NOT_FOUND when there is no readable metadata.json with a digest. */
int hk__digest_missing_files(size_t *out_missing, size_t *out_listed, char **out_first, const char *variant_dir);
/* The same counted over the listed files a pull's patterns choose: those whose repo path
 * (repo_prefix "/" the listed name, repo_prefix "build/<variant>") matches one of include (NULL:
 * any) and none of exclude; repo_prefix NULL: every listed file. */
int hk__digest_missing_chosen(size_t *out_missing, size_t *out_listed, char **out_first, const char *variant_dir,
                              const char *repo_prefix, const char *const *include, const char *const *exclude);

/* Is `name` (one path component inside build/<variant>/) left out of the digest: __pycache__ and
 * *.pyc anywhere, metadata.json and metadata.json.sigstore at the top (top != 0)? */
bool hk__digest_skips(const char *name, int top);

#endif
