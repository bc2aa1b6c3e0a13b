/* The process-wide memo of metadata answers (memo.h). A small list under one mutex: a few dozen
 * entries at most, so a linear search costs nothing next to the request it saves. The oldest entry
 * goes first when a bound is reached. */
#include "client/memo.h"

#include "client/client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MEMO_MAX_ENTRIES 256
#define MEMO_MAX_TREE_ENTRIES 200000u /* listing entries held over all memoised listings */

typedef struct memo_entry {
    char *key;
    char *value; /* string answers; NULL for a listing */
    tree t;      /* listing answers */
    bool is_tree;
    uint64_t stamp; /* hk__now_ms() when stored: the age checked against a window */
    uint64_t op;    /* the operation that stored it (0: none) */
    uint64_t used;  /* order of the last store or use: the least recent goes first */
} memo_entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static memo_entry g_v[MEMO_MAX_ENTRIES];
static size_t g_n;
static size_t g_tree_entries;
static uint64_t g_clock;
static atomic_uint_least64_t g_ops;   /* operations begun so far: their ids */
static _Thread_local uint64_t t_op;   /* this thread's current operation (0: none) */
static _Thread_local unsigned t_depth; /* nesting of begin/end pairs */

void hk__memo_op_begin(void) {
    if (t_depth++ == 0) t_op = atomic_fetch_add(&g_ops, 1) + 1;
}

void hk__memo_op_end(void) {
    if (t_depth && --t_depth == 0) t_op = 0;
}

bool hk__memo_on(const hk_hub *hub) { return hub->freshness_ms > 0 || t_op != 0; }

/* Is entry e usable under window_ms (see hk__memo_get)? */
static bool usable(const memo_entry *e, long window_ms) {
    if (t_op && e->op == t_op) return true;
    return window_ms < 0 || (window_ms > 0 && hk__now_ms() - e->stamp < (uint64_t)window_ms);
}

char *hk__memo_key(const hk_hub *hub, const char *kind, const char *a, const char *b) {
    return hk__asprintf("%s\x1f%s\x1f%s\x1f%s\x1f%s", kind, hub->endpoint, hub->token_tag, a ? a : "", b ? b : "");
}

static void entry_free(memo_entry *e) {
    free(e->key);
    free(e->value);
    if (e->is_tree) {
        g_tree_entries -= e->t.n;
        hk__client_tree_free(&e->t);
    }
    memset(e, 0, sizeof *e);
}

static void remove_at(size_t i) {
    entry_free(&g_v[i]);
    g_v[i] = g_v[--g_n];
}

static size_t find(const char *key) {
    for (size_t i = 0; i < g_n; i++)
        if (strcmp(g_v[i].key, key) == 0) return i;
    return g_n;
}

static void remove_oldest(bool trees_only) {
    size_t best = g_n;
    for (size_t i = 0; i < g_n; i++)
        if ((!trees_only || g_v[i].is_tree) && (best == g_n || g_v[i].used < g_v[best].used)) best = i;
    if (best < g_n) remove_at(best);
}

/* A slot for key (its old entry dropped), or NULL; called with the lock held. */
static memo_entry *slot_for(const char *key) {
    size_t i = find(key);
    if (i < g_n) remove_at(i);
    if (g_n == MEMO_MAX_ENTRIES) remove_oldest(false);
    memo_entry *e = &g_v[g_n];
    memset(e, 0, sizeof *e);
    if (!(e->key = hk__strdup(key))) return NULL;
    e->stamp = hk__now_ms();
    e->op = t_op;
    e->used = ++g_clock;
    g_n++;
    return e;
}

char *hk__memo_get(const char *key, long window_ms) {
    if (!key || (window_ms == 0 && !t_op)) return NULL;
    char *out = NULL;
    pthread_mutex_lock(&g_lock);
    size_t i = find(key);
    if (i < g_n && !g_v[i].is_tree) {
        if (usable(&g_v[i], window_ms)) out = hk__strdup(g_v[i].value);
        else if (window_ms > 0) remove_at(i); /* past the window: of no use to anyone */
    }
    pthread_mutex_unlock(&g_lock);
    return out;
}

void hk__memo_put(const char *key, const char *value) {
    if (!key || !value) return;
    pthread_mutex_lock(&g_lock);
    memo_entry *e = slot_for(key);
    if (e && !(e->value = hk__strdup(value))) remove_at((size_t)(e - g_v));
    pthread_mutex_unlock(&g_lock);
}

static int tree_copy(tree *out, const tree *t) {
    memset(out, 0, sizeof *out);
    out->e = calloc(t->n + 1, sizeof *out->e);
    if (!out->e) return hk__fail(HK_ERR_NOMEM, "out of memory");
    out->cap = t->n + 1;
    for (size_t i = 0; i < t->n; i++) {
        const tree_entry *s = &t->e[i];
        tree_entry *d = &out->e[out->n++];
        *d = *s;
        d->path = hk__strdup(s->path);
        d->oid = s->oid ? hk__strdup(s->oid) : NULL;
        d->lfs_oid = s->lfs_oid ? hk__strdup(s->lfs_oid) : NULL;
        if (!d->path || (s->oid && !d->oid) || (s->lfs_oid && !d->lfs_oid)) {
            hk__client_tree_free(out);
            return hk__fail(HK_ERR_NOMEM, "out of memory");
        }
    }
    return HK_OK;
}

bool hk__memo_get_tree(tree *out, const char *key, long window_ms) {
    memset(out, 0, sizeof *out);
    if (!key) return false;
    bool hit = false;
    pthread_mutex_lock(&g_lock);
    size_t i = find(key);
    if (i < g_n && g_v[i].is_tree && usable(&g_v[i], window_ms)) {
        hit = tree_copy(out, &g_v[i].t) == HK_OK;
        if (hit) g_v[i].used = ++g_clock; /* recently used: evicted last */
    }
    pthread_mutex_unlock(&g_lock);
    hk_clear_error();
    return hit;
}

void hk__memo_put_tree(const char *key, const tree *t) {
    if (!key || t->n > MEMO_MAX_TREE_ENTRIES) return;
    pthread_mutex_lock(&g_lock);
    size_t i = find(key);
    if (i < g_n) remove_at(i);
    while (g_tree_entries + t->n > MEMO_MAX_TREE_ENTRIES) remove_oldest(true);
    memo_entry *e = slot_for(key);
    if (e) {
        if (tree_copy(&e->t, t) == HK_OK) {
            e->is_tree = true;
            g_tree_entries += t->n;
        } else {
            remove_at((size_t)(e - g_v));
        }
    }
    pthread_mutex_unlock(&g_lock);
    hk_clear_error();
}

void hk__memo_clear(void) {
    pthread_mutex_lock(&g_lock);
    while (g_n) remove_at(g_n - 1);
    pthread_mutex_unlock(&g_lock);
}
