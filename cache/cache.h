/* The on-disk store, byte-compatible with the huggingface_hub cache (see
 * ../shared/reference/hub-protocol.md §7). Internal to hubkern: used by the client (pull),
 * the mirror server (serve/publish) and the loader. */
#ifndef HK_CACHE_H
#define HK_CACHE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum hk_repo_type {
    HK_REPO_MODEL = 0,
    HK_REPO_DATASET = 1,
    HK_REPO_SPACE = 2,
    HK_REPO_KERNEL = 3
} hk_repo_type;

/* "models" / "datasets" / "spaces" / "kernels" (API segment and folder prefix). */
const char *hk_repo_type_plural(hk_repo_type t);
/* "" / "datasets/" / "spaces/" / "kernels/" (resolve-URL prefix). */
const char *hk_repo_type_url_prefix(hk_repo_type t);
/* Parse "model", "dataset", "space", "kernel" (singular or plural). */
int hk_repo_type_parse(hk_repo_type *out, const char *s);

/* Validate "org/name" or "name" as the Hub accepts it (no "..", no "--" confusion, [A-Za-z0-9._-]). */
bool hk_repo_id_valid(const char *repo_id);

/* Cache root: explicit, else KERNELS_CACHE (kernels only), HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
 * HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub; made absolute and
 * symlink-free when it exists. Caller frees. */
int hk_cache_root(char **out, const char *explicit_root, hk_repo_type type);

/* <root>/<type>s--org--name. Caller frees. */
char *hk_cache_repo_dir(const char *root, hk_repo_type type, const char *repo_id);

/* refs/<rev> → 40-hex commit (trimmed). HK_ERR_NOT_FOUND if absent. out gets 41+ bytes. */
int hk_cache_read_ref(char out_commit[65], const char *repo_dir, const char *rev);
/* Write refs/<rev> atomically with no trailing newline (nested dirs for "refs/pr/1"), and make sure
 * snapshots/<commit>/ exists. Never call with rev == commit. */
int hk_cache_write_ref(const char *repo_dir, const char *rev, const char *commit);

/* Create snapshots/<commit>/<path> as a relative symlink to blobs/<etag> (replacing what is there;
 * accepting a concurrent identical link). */
int hk_cache_link_snapshot(const char *repo_dir, const char *commit, const char *path, const char *etag);

/* Write CACHEDIR.TAG at the root if absent. */
int hk_cache_ensure_tag(const char *root);


/* ---- blob store: locks, temp files, verification (cache/store.c) --------------------------- */
#include <stdint.h>

/* <root>/.locks/<repo folder>/<etag>.lock. Caller frees. */
char *hk_cache_lock_path(const char *root, const char *repo_dir, const char *etag);
/* Try to take an exclusive lock (flock, mode 0664, O_NOFOLLOW, inode re-check after acquiring;
 * the lock file is never unlinked). *out_fd >= 0 when acquired, -1 when another process holds it.
 * Filesystems without flock: acquired "softly" (correctness then rests on temp file + rename). */
int hk_cache_lock_try(int *out_fd, const char *lock_path);
/* Block until acquired (polling every 100 ms, logging every 10 s); timeout_ms < 0: forever. */
int hk_cache_lock_wait(int *out_fd, const char *lock_path, long timeout_ms);
void hk_cache_unlock(int fd);

/* Open a fresh blobs/<etag>.<rand8>.incomplete (O_EXCL, mode 0666 & ~umask). Caller frees *out_tmp. */
int hk_cache_blob_tmp_open(int *out_fd, char **out_tmp, const char *repo_dir, const char *etag);
/* Rename a finished temp file to blobs/<etag>. */
int hk_cache_blob_commit(const char *tmp_path, const char *repo_dir, const char *etag);
/* blobs/<etag> exists as a regular file of `size` bytes (size UINT64_MAX: any size). */
bool hk_cache_blob_present(const char *repo_dir, const char *etag, uint64_t size);
/* snapshots/<commit>/<path> is a symlink that resolves to an existing blobs/<etag>. */
bool hk_cache_pointer_ok(const char *repo_dir, const char *commit, const char *path, const char *etag);
/* Hash a blob as its name says (64 hex: sha256; 40 hex: git blob sha1). *out_checkable = false for
 * other names (mirror-fabricated etags). out_hex gets the actual digest. */
int hk_cache_hash_blob(char out_hex[129], bool *out_checkable, const char *blob_path, const char *etag);

/* ---- verification receipts (cache/receipt.c) ------------------------------------------------ */
#include <sys/stat.h>
#include <time.h>

/* The stat identity (size, st_dev, st_ino, mtime and ctime in ns) of each file of a variant that
 * passed its metadata.json digest check, for build/<variant> at one commit of one cache root. */
typedef struct hk_receipt hk_receipt;

/* false when HUBKERN_VERIFY=always: receipts are neither read nor written. */
bool hk_receipts_enabled(void);
/* <root>/.locks/<repo folder>/hubkern-receipts/<commit>/<variant>.json, or with HUBKERN_RECEIPTS_DIR
 * set: <that dir>/<32 hex of sha256(root)>/<repo folder>/<commit>/<variant>.json. NULL when a name is
 * unusable or out of memory. Caller frees. */
char *hk_receipt_path(const char *root, const char *repo_dir, const char *commit, const char *variant);
/* The directories that may hold receipts of the repo folder `folder` ("kernels--org--name") of this
 * cache root: <root>/.locks/<folder>/hubkern-receipts and, with HUBKERN_RECEIPTS_DIR set, also
 * <that dir>/<32 hex of sha256(root)>/<folder>. Each one holds <commit>/<variant>.json. Returns how
 * many were put in out (caller frees each; 0 for an unusable folder name). */
size_t hk_receipt_repo_dirs(char *out[2], const char *root, const char *folder);
/* <HUBKERN_RECEIPTS_DIR>/<32 hex of sha256(root)>, NULL when the variable is unset. Caller frees. */
char *hk_receipt_outside_root_dir(const char *root);
/* The receipt at path, if it was written for exactly this cache root (path and st_dev/st_ino of the
 * root), repo folder, commit, variant and metadata.json (meta_sha256: hex SHA-256 of its bytes).
 * NULL otherwise (missing, unreadable, corrupt, stale: the reason is logged at debug level). */
hk_receipt *hk_receipt_load(const char *path, const char *root, const char *repo_dir, const char *commit,
                            const char *variant, const char *meta_sha256);
/* An empty receipt for a metadata.json with that SHA-256 (NULL: out of memory). */
hk_receipt *hk_receipt_new(const char *meta_sha256);
/* Record rel with the stat taken before its bytes were hashed (allocation failures are sticky and
 * make hk_receipt_save fail). */
void hk_receipt_add(hk_receipt *r, const char *rel, const struct stat *st);
size_t hk_receipt_count(const hk_receipt *r);
/* Does r hold rel with exactly this identity (and is it a regular file)? */
bool hk_receipt_vouches(const hk_receipt *r, const char *rel, const struct stat *st);
/* Was st (taken after the clock read taken_before) late enough after the file's last change that a
 * later change must alter ctime? (Coarse file-system clocks: a change within the same tick keeps it.) */
bool hk_receipt_stat_settled(const struct stat *st, const struct timespec *taken_before);
/* For a file about to be hashed: if its last change is within the racy window (and the wait is at
 * most ~21 ms, i.e. not a whole-second file system), sleep past it and take taken_before and st again,
 * so that the stat recorded after hashing is one that any later change must alter. */
void hk_receipt_settle(struct stat *st, struct timespec *taken_before, const char *path);
/* Write atomically (temp file + rename; concurrent writers: the last complete one wins). */
int hk_receipt_save(const hk_receipt *r, const char *path, const char *root, const char *repo_dir, const char *commit,
                    const char *variant);
/* Delete (missing is fine; other failures are logged as warnings). */
void hk_receipt_remove(const char *path);
void hk_receipt_free(hk_receipt *r);

/* ---- cache maintenance (cache/maint.c): hubkern cache ls | verify | prune | rm -------------- */
typedef struct hk_cache_report {
    size_t repos, snapshots, blobs, refs;
    uint64_t bytes;          /* blob bytes on disk */
    size_t problems;         /* verify: mismatches, broken links, bad refs */
    size_t removed;          /* prune/rm: entries removed */
    uint64_t removed_bytes;
} hk_cache_report;

/* Callback receiving one line of human-readable output per item (problem, listing row, removal). */
typedef void (*hk_cache_line_fn)(void *ud, const char *line);

/* List repos, refs and snapshots (json: one JSON document in a single line call). */
int hk_cache_ls(hk_cache_report *rep, const char *root, const char *repo_id, bool json,
                hk_cache_line_fn fn, void *ud);
/* Re-hash every blob against its name, check every snapshot link, ref and metadata.json digest.
 * HK_OK with rep->problems == 0 when clean; problems are reported through fn. */
int hk_cache_verify(hk_cache_report *rep, const char *root, const char *repo_id,
                    hk_cache_line_fn fn, void *ud);
/* Remove leftovers: *.incomplete and *.tmp files (not locked by a live download), broken links,
 * blobs no snapshot points to, empty directories; with detached: also snapshots no ref names. */
int hk_cache_prune(hk_cache_report *rep, const char *root, bool detached, bool dry_run,
                   hk_cache_line_fn fn, void *ud);
/* Remove a repo (revision NULL) or one revision (branch/tag/commit: its snapshot, the refs naming
 * it, then blobs left unreferenced). */
int hk_cache_rm(hk_cache_report *rep, const char *root, const char *repo_id, const char *revision,
                bool dry_run, hk_cache_line_fn fn, void *ud);

#endif
