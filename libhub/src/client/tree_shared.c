/* A listing as an object (tree.h): built entry by entry, its strings in one arena, then shared by
 * an atomic reference count (the memo, a pull's plan and its result hold one copy). Fetching and
 * memoising listings is tree.c's. */
#include "client/tree.h"

#include "util/internal.h"
#include "util/vec.h"

#include <stdlib.h>

int hk__client_tree_new(tree **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    atomic_init(&(*out)->refs, 1);
    return HK_OK;
}

int hk__client_tree_add(tree *t, const char *path, bool dir, uint64_t size, const char *oid, const char *lfs_oid) {
    if (HK_VEC_RESERVE(t->e, t->cap, t->n + 1) != HK_OK) return hk__fail(HK_ERR_NOMEM, "out of memory");
    tree_entry *e = &t->e[t->n];
    e->path = hk__arena_strdup(&t->strs, path);
    e->oid = hk__arena_strdup(&t->strs, oid);
    e->lfs_oid = hk__arena_strdup(&t->strs, lfs_oid);
    if (!e->path || (oid && !e->oid) || (lfs_oid && !e->lfs_oid)) return hk__fail(HK_ERR_NOMEM, "out of memory");
    e->dir = dir;
    e->size = size;
    t->n++;
    return HK_OK;
}

void hk__client_tree_trim(tree *t) {
    if (t->cap <= t->n + 1) return;
    tree_entry *e = realloc(t->e, (t->n + 1) * sizeof *e);
    if (!e) return; /* the larger block stays valid */
    t->e = e;
    t->cap = t->n + 1;
}

const tree *hk__client_tree_ref(const tree *t) {
    /* the count is the one mutable part of a shared listing */
    if (t) atomic_fetch_add_explicit(&((tree *)t)->refs, 1, memory_order_relaxed);
    return t;
}

void hk__client_tree_unref(const tree *t) {
    if (!t) return;
    tree *m = (tree *)t;
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
    free(m->e);
    hk__arena_free(&m->strs);
    free(m);
}
