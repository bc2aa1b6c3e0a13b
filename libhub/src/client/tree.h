/* Tree listings of a kernel repo at a commit (tree.c; the listing object in tree_shared.c): every
 * page of GET /api/kernels/<repo>/tree/<commit>/<path>, bounded in entries and bytes, Link loops
 * refused, sizes range-checked. Internal. */
#ifndef HK_CLIENT_TREE_H
#define HK_CLIENT_TREE_H

#include "hubkern/hub.h"
#include "util/arena.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tree_entry {
    const char *path;
    bool dir;
    uint64_t size;
    const char *oid;     /* git blob sha1 */
    const char *lfs_oid; /* sha256 for LFS/Xet files */
} tree_entry;

/* A listing: made once (hk__client_list_tree, or hk__client_tree_new and _add), then immutable and
 * shared by reference: the memo, a pull's plan and its result hold the same one, so that a
 * listing of n files is held once, not copied per holder. Its strings live in one arena and stay
 * valid as long as any reference does. The count is atomic: the memo is shared across threads. */
typedef struct tree {
    tree_entry *e;
    size_t n, cap;
    hk_arena strs;      /* every entry's path and hashes */
    atomic_size_t refs; /* holders; the last hk__client_tree_unref frees it */
} tree;

/* An empty listing with one reference. */
int hk__client_tree_new(tree **out);
/* Append an entry (strings copied into t; oid and lfs_oid may be NULL), before t is shared. */
int hk__client_tree_add(tree *t, const char *path, bool dir, uint64_t size, const char *oid, const char *lfs_oid);
/* Give back the entry array's doubling slack once t is complete (up to a third of it at 100k). */
void hk__client_tree_trim(tree *t);
/* One more reference to t (t itself, for chaining); NULL-safe. */
const tree *hk__client_tree_ref(const tree *t);
/* Drop a reference; the last one frees t. NULL-safe. */
void hk__client_tree_unref(const tree *t);
/* A reference to the listing share m (client/memo.h) holds under key into *out (true), or false
 * (*out NULL). window_ms: as hk__memo_get (a commit's listing never changes: < 0 while the hub's
 * window is on, 0 when it is off). */
bool hk__memo_get_tree(hk_share *m, const tree **out, const char *key, long window_ms);
/* Let m hold a reference to t under key (listings are kept while their entries total at most a
 * bound). */
void hk__memo_put_tree(hk_share *m, const char *key, const tree *t);
/* A new listing (one reference: hk__client_tree_unref) of path at commit. */
int hk__client_list_tree(tree **out, hk_hub *hub, const char *repo_id, const char *commit, const char *path,
                         bool recursive);
/* The recursive listing of the whole repo at commit (every page), from the process's memo when
 * it holds it (client/memo.c; not with the freshness window off), else listed and memoised. An
 * unsafe path under build/ refuses it (HK_ERR_UNSAFE_PATH). *out is a reference: drop it with
 * hk__client_tree_unref. */
int hk__client_commit_tree(const tree **out, hk_hub *hub, const char *repo_id, const char *commit);
/* The same listing only when the memo holds it (no request); false otherwise. */
bool hk__client_commit_tree_known(const tree **out, hk_hub *hub, const char *repo_id, const char *commit);
/* The entry for path, or NULL. */
const tree_entry *hk__client_tree_find(const tree *t, const char *path);
/* Variant names (sorted, NULL-terminated; free with hk_hub_strv_free) of a commit's listing. */
int hk__client_variants_from_commit_tree(char ***out, size_t *out_n, const tree *t);
/* Variant directories of a local snapshot, sorted (HK_ERR_OFFLINE when it has no build/). */
int hk__client_list_variants_local(char ***out, size_t *out_n, const char *snapshot);
int hk__client_cmp_str(const void *a, const void *b);

#endif
