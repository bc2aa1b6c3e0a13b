/* Internals shared by the server's files: git object hashing, the store reader, listings. */
#ifndef HK_SRV_INTERNAL_H
#define HK_SRV_INTERNAL_H

#include "server/server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- git objects (gitobj.c) --------------------------------------------------------------- */
/* The LFS pointer exactly as git-lfs writes it:
 * "version https://git-lfs.github.com/spec/v1\noid sha256:<hex>\nsize <n>\n". Returns its length. */
size_t srv_git_lfs_pointer(char *buf, size_t cap, const char *sha256_hex, uint64_t size);
/* Git blob oid of that pointer (what the Hub lists as the LFS file's "oid"), and its length. */
void srv_git_lfs_pointer_oid(char out[41], size_t *pointer_size, const char *sha256_hex, uint64_t size);
/* sha1("commit <len>\0tree T\n[parent P\n]author A 0 +0000\ncommitter A 0 +0000\n\n<message>\n") */
void srv_git_commit_oid(char out[41], const char *tree_oid, const char *parent_oid, const char *message);

/* One entry of a snapshot listing. */
typedef struct srv_sentry {
    char *path;          /* repo-relative, '/'-separated */
    bool is_dir;
    bool lfs;            /* file stored in LFS: etag is the content sha256 */
    uint64_t size;       /* content bytes (0 for directories) */
    size_t pointer_size; /* LFS pointer length */
    char etag[65];       /* blob name: git sha1 (40) or sha256 (64) */
    char oid[41];        /* git oid: blob sha1 (of the pointer for LFS) or tree sha1 */
    /* Its tree-listing JSON, rendered by the first answer that lists it (http_api.c) and freed with
     * the listing: a shared listing is answered by copying, not by formatting every entry again. */
    _Atomic(char *) json;
} srv_sentry;

typedef struct srv_listing {
    srv_sentry *v;        /* sorted depth-first ('/' orders before every other byte) */
    size_t n, cap;
    char root_oid[41];   /* git tree oid of the whole snapshot */
    uint64_t total_bytes;
    uint64_t gen;        /* a shared listing's number, unique per listing made (0: not shared) */
} srv_listing;

void srv_listing_free(srv_listing *l);
/* Add a file (path owned by the listing afterwards on success). */
int srv_listing_add_file(srv_listing *l, char *path, uint64_t size, const char *etag, bool lfs);
/* Sort, synthesise directory entries from file paths, compute every git oid. */
int srv_listing_finish(srv_listing *l);
/* Index of an entry by path, or -1. Listing must be finished. */
long srv_listing_find(const srv_listing *l, const char *path);
/* Path comparison used for the order ('/' lowest). */
int srv_path_cmp(const char *a, const char *b);

/* ---- folder watches (store_watch.c) ------------------------------------------------------- */
/* A kept verdict about a watched folder, proven by its stat() at generation g, holds without the
 * stat while srv_watch_gen() is still g (store_watch.c says why that is as strong). */
typedef struct srv_watch srv_watch;
/* *out NULL (HK_OK) where nothing can be watched: a network file system, no inotify. */
int srv_watch_new(srv_watch **out, int root_fd);
void srv_watch_free(srv_watch *w);
/* Watch the folder dir_fd names; false: it is not watched (its verdicts need their stat()). */
bool srv_watch_dir(srv_watch *w, int dir_fd);
/* Bracket one request on the thread answering it; the generation is drained on its first use. */
void srv_watch_begin(srv_watch *w);
void srv_watch_end(void);
/* This request's generation; 0 (no verdict may be skipped) outside a request or without a watch. */
uint64_t srv_watch_gen(srv_watch *w);

/* ---- store reader (store.c) --------------------------------------------------------------- */
typedef struct srv_store srv_store;

int srv_store_open(srv_store **out, const char *root, uint64_t lfs_threshold);
void srv_store_close(srv_store *s);
const char *srv_store_root(const srv_store *s);
/* The store's folder watch (NULL: none), for srv_watch_begin. */
srv_watch *srv_store_watch(const srv_store *s);

/* The folder of repo_id in the store, existing or not; NULL (HK_ERR_INVALID_ARG) for an id that
 * fails hk_repo_id_valid: every repo folder name is made here or by srv_store_repo_dir. */
char *srv_store_repo_path(const srv_store *s, hk_repo_type type, const char *repo_id);
/* Repo folder (realpath) if it exists as a directory; NULL otherwise. Caller frees. */
char *srv_store_repo_dir(const srv_store *s, hk_repo_type type, const char *repo_id);
/* Branch, tag, "refs/pr/N", "refs/heads/X" or a commit id present in snapshots/ → commit.
 * HK_ERR_REVISION_NOT_FOUND otherwise. */
int srv_store_resolve_rev(char out_commit[65], const char *repo_dir, const char *rev);
/* The same, a commit answered from the store's kept snapshot handles once proven (store_linked.c). */
int srv_store_resolve_rev_kept(char out_commit[65], srv_store *s, const char *repo_dir, const char *rev);

/* The file at `path` in snapshot `commit`: opened fd (O_RDONLY) and its metadata.
 * HK_ERR_ENTRY_NOT_FOUND if absent, a directory, or a link leaving the repo folder. */
typedef struct srv_sfile {
    int fd;
    uint64_t size;
    bool lfs;
    char etag[65];
} srv_sfile;
int srv_store_open_file(srv_sfile *out, srv_store *s, const char *repo_dir, const char *commit, const char *path);
/* What proves a kept answer of a snapshot entry still right: the entry (a canonical link) and its
 * blob by identity and stamps, taken when the file was opened. ok only when both were settled
 * (srv_refs_settled: stamps old enough that any later change shows in them). */
typedef struct srv_file_proof {
    bool ok;
    uint64_t link_dev, link_ino, blob_dev, blob_ino, blob_size;
    long long link_mtime, link_ctime, blob_mtime, blob_ctime; /* ns */
} srv_file_proof;
/* srv_store_open_file that also fills *proof (ok false for an entry the linked path does not take). */
int srv_store_open_file_proved(srv_sfile *out, srv_file_proof *proof, srv_store *s, const char *repo_dir,
                               const char *commit, const char *path);
/* Do the entry at path and blob `etag` still have proof's identity and stamps? Two fstatat()s of
 * the kept snapshot and blobs/ folders. */
bool srv_store_file_unchanged(srv_store *s, const char *repo_dir, const char *commit, const char *path,
                              const char *etag, const srv_file_proof *proof);
/* The common case of srv_store_open_file without realpath() (store_linked.c): true when path is a
 * link of the canonical shape into the repo's blobs/ and the blob is open in *out; false: use the
 * general resolution (nothing recorded as an error). */
typedef struct srv_snap_cache srv_snap_cache;
int srv_snap_cache_new(srv_snap_cache **out);
/* The watch (may be NULL) that lets srv_snap_commit_kept skip its fstat()s. */
void srv_snap_cache_use_watch(srv_snap_cache *c, srv_watch *w);
void srv_snap_cache_free(srv_snap_cache *c);
bool srv_store_open_linked(srv_sfile *out, srv_file_proof *proof, srv_snap_cache *c, const char *repo_dir,
                           const char *commit, const char *path);
bool srv_store_linked_unchanged(srv_snap_cache *c, const char *repo_dir, const char *commit, const char *path,
                                const char *etag, const srv_file_proof *proof);
/* A revision of 40 or 64 hex digits names its snapshot when refs/<rev> is absent and
 * snapshots/<rev> a folder. Once proven (srv_snap_commit_prove, after the lookup by path said so),
 * the kept handle answers it with two fstat()s of refs/ and snapshots/ instead of two path lookups
 * (none while the watch's generation has not moved since they last passed); any entry added,
 * removed or renamed in either folder since changes its stamps and ends the proof. */
bool srv_snap_commit_kept(srv_snap_cache *c, const char *repo_dir, const char *commit);
void srv_snap_commit_prove(srv_snap_cache *c, const char *repo_dir, const char *commit);
/* Open blobs/<sha256> of a repo (for the /lfs/ route). */
int srv_store_open_blob(srv_sfile *out, srv_store *s, const char *repo_dir, const char *sha256);

/* Walk snapshots/<commit>/ into a finished listing. */
int srv_store_list(srv_listing *out, srv_store *s, const char *repo_dir, const char *commit);

/* The same, shared between requests for a few seconds (tree pages, repo info, paths-info): release
 * with srv_store_list_release(). */
int srv_store_list_shared(const srv_listing **out, srv_store *s, const char *repo_dir, const char *commit);
void srv_store_list_release(srv_store *s, const srv_listing *l);
/* Drop the shared listing of that commit (its manifest changed): the next request lists it anew. */
void srv_store_forget_listing(srv_store *s, const char *repo_dir, const char *commit);

/* Branches (and PR refs) of a repo: names relative to refs/ with their commits. */
typedef struct srv_ref {
    char *name;
    char commit[65];
} srv_ref;
/* Read from a kept view while every ref file and folder it came from is unchanged (store_refs.c). */
int srv_store_list_refs(srv_ref **out, size_t *n, const char *repo_dir);
/* The same, with the number of the reading the refs came from (*gen; 0: that reading was not kept,
 * it was too fresh to prove unchanged later): an answer made from it stays right while
 * srv_store_refs_gen(repo_dir) gives that number. */
int srv_store_list_refs_gen(srv_ref **out, size_t *n, uint64_t *gen, const char *repo_dir);
/* The number of repo_dir's kept reading of its refs if its files still show what was read (a few
 * lstats, nothing copied), else 0. */
uint64_t srv_store_refs_gen(const char *repo_dir);
/* The commit in ref file ref_path (refs/<rev> of repo_dir, lstat'ed: a regular file), kept while
 * the file's identity and stamps are unchanged; HK_ERR_REVISION_NOT_FOUND when there is none. */
int srv_refs_resolve(char out_commit[65], const char *repo_dir, const char *rev, const char *ref_path);
/* The racy rule of the refs memo, for other kept answers: a file or folder stat'ed after `now`
 * (srv_refs_clock_ns()) whose stamps are old enough that any later change shows in them. */
struct stat;
long long srv_refs_clock_ns(void);
bool srv_refs_settled(const struct stat *st, long long now);
#ifdef HK_TEST_HOOKS
/* Tests: the racy window set (when >= 0; a file changed within it of its read is not kept), and
 * the count of ref files read so far. */
void srv_refs_test_hooks(long long racy_window_ns, unsigned long long *reads);
/* Tests: the shared listing's TTL (ms) set; the store's requests within it share one listing. */
void srv_store_test_hooks(unsigned listing_ttl_ms);
#endif
void srv_refs_free(srv_ref *refs, size_t n);

/* Does any repo of namespace `org` exist in the store (any type)? */
bool srv_store_has_namespace(const srv_store *s, const char *org);

/* ---- blob names (blob_name.c: used by publish.c and store.c) ------------------------------- */
/* Hash a file the way publish names it: LFS (sha256) when it is binary (a NUL byte in its first
 * 8000 bytes, git's rule) or at least lfs_threshold bytes; otherwise its git blob sha1. */
int srv_classify_file(char etag[65], bool *lfs, uint64_t *size, const char *path, uint64_t lfs_threshold);
/* Hash an open file as srv_classify_file names it (force_lfs: -1 decide, 0 git blob, 1 sha256),
 * writing its bytes to copy_fd too when that is >= 0. */
int srv_hash_stream(char etag[65], bool *lfs, uint64_t *size, int fd, const char *what, uint64_t lfs_threshold,
                   int force_lfs, int copy_fd);

#endif
