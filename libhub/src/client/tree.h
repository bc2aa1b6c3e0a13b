/* Tree listings of a kernel repo at a commit (tree.c): every page of
 * GET /api/kernels/<repo>/tree/<commit>/<path>, bounded in entries and bytes, Link loops refused,
 * sizes range-checked. Internal. */
#ifndef HK_CLIENT_TREE_H
#define HK_CLIENT_TREE_H

#include "hubkern/hub.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tree_entry {
    char *path;
    bool dir;
    uint64_t size;
    char *oid;     /* git blob sha1 */
    char *lfs_oid; /* sha256 for LFS/Xet files */
} tree_entry;

typedef struct tree {
    tree_entry *e;
    size_t n, cap;
} tree;

void hk__client_tree_free(tree *t);
/* A copy of the listing share m (client/memo.h) holds under key into *out (true), or false.
 * window_ms: as hk__memo_get (a commit's listing never changes: < 0 while the hub's window is on,
 * 0 when it is off). */
bool hk__memo_get_tree(hk_share *m, tree *out, const char *key, long window_ms);
/* Store a copy of t under key (listings are kept while their entries total at most a bound). */
void hk__memo_put_tree(hk_share *m, const char *key, const tree *t);
int hk__client_list_tree(tree *out, hk_hub *hub, const char *repo_id, const char *commit, const char *path,
                        bool recursive);
/* The recursive listing of the whole repo at commit (every page), from the process's memo when
 * it holds it (client/memo.c; not with the freshness window off), else listed and memoised. An
 * unsafe path under build/ refuses it (HK_ERR_UNSAFE_PATH). Free with hk__client_tree_free. */
int hk__client_commit_tree(tree *out, hk_hub *hub, const char *repo_id, const char *commit);
/* The same listing only when the memo holds it (no request); false otherwise. */
bool hk__client_commit_tree_known(tree *out, hk_hub *hub, const char *repo_id, const char *commit);
/* The entry for path, or NULL. */
const tree_entry *hk__client_tree_find(const tree *t, const char *path);
/* Variant names (sorted, NULL-terminated; free with hk_hub_strv_free) of a commit's listing. */
int hk__client_variants_from_commit_tree(char ***out, size_t *out_n, const tree *t);
/* Variant directories of a local snapshot, sorted (HK_ERR_OFFLINE when it has no build/). */
int hk__client_list_variants_local(char ***out, size_t *out_n, const char *snapshot);
int hk__client_cmp_str(const void *a, const void *b);

#endif
