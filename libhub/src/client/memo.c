/* The memo of metadata answers a set of clients share (memo.h; public as hk_share, hubkern/hub.h):
 * one instance per hk_share, and the process's default one for clients given none. A small list
 * under one mutex: a few dozen entries at most, so a linear search costs nothing next to the
 * request it saves. The least recently used entry goes first when a bound is reached. */
#include "client/memo.h"

#include "client/http.h" /* hk__now_ms */
#include "client/hub_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MEMO_MAX_ENTRIES 256
#define MEMO_MAX_OBJ_WEIGHT 200000u /* the weight of all objects held (a listing weighs its entries) */

typedef struct memo_entry {
    char *key;
    char *value;               /* string answers; NULL for an object */
    const void *obj;           /* a reference to an object of its owner's type (a listing: client/tree.c) */
    const hk__memo_type *type; /* how to count references to obj; NULL for a string */
    size_t weight;
    uint64_t stamp; /* hk__now_ms() when stored: the age checked against a window */
    uint64_t op;    /* the operation that stored it (0: none) */
    uint64_t used;  /* order of the last store or use: the least recent goes first */
} memo_entry;

struct hk_share {
    pthread_mutex_t lock;
    memo_entry v[MEMO_MAX_ENTRIES];
    size_t n;
    size_t obj_weight;
    uint64_t clock;
};

static hk_share g_default = {.lock = PTHREAD_MUTEX_INITIALIZER};

hk_share *hk__memo_default(void) { return &g_default; }

int hk_share_new(hk_share **out) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_share_new: NULL out");
    hk_share *m = calloc(1, sizeof *m);
    if (!m) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return hk__fail(HK_ERR_INTERNAL, "cannot create the share's lock");
    }
    *out = m;
    return HK_OK;
}

void hk_share_free(hk_share *m) {
    if (!m || m == &g_default) return;
    hk__memo_clear(m);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
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

static void entry_free(hk_share *m, memo_entry *e) {
    free(e->key);
    free(e->value);
    if (e->obj) {
        m->obj_weight -= e->weight;
        e->type->unref(e->obj); /* whoever got it from the memo holds a reference of their own */
    }
    memset(e, 0, sizeof *e);
}

static void remove_at(hk_share *m, size_t i) {
    entry_free(m, &m->v[i]);
    m->v[i] = m->v[--m->n];
}

static size_t find(const hk_share *m, const char *key) {
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->v[i].key, key) == 0) return i;
    return m->n;
}

static void remove_oldest(hk_share *m, bool objects_only) {
    size_t best = m->n;
    for (size_t i = 0; i < m->n; i++)
        if ((!objects_only || m->v[i].obj) && (best == m->n || m->v[i].used < m->v[best].used)) best = i;
    if (best < m->n) remove_at(m, best);
}

/* A slot for key (its old entry dropped), or NULL; called with the lock held. */
static memo_entry *slot_for(hk_share *m, const char *key) {
    size_t i = find(m, key);
    if (i < m->n) remove_at(m, i);
    if (m->n == MEMO_MAX_ENTRIES) remove_oldest(m, false);
    memo_entry *e = &m->v[m->n];
    memset(e, 0, sizeof *e);
    if (!(e->key = hk__strdup(key))) return NULL;
    e->stamp = hk__now_ms();
    e->op = t_op;
    e->used = ++m->clock;
    m->n++;
    return e;
}

char *hk__memo_get(hk_share *m, const char *key, long window_ms) {
    if (!key || (window_ms == 0 && !t_op)) return NULL;
    char *out = NULL;
    pthread_mutex_lock(&m->lock);
    size_t i = find(m, key);
    if (i < m->n && !m->v[i].obj) {
        if (usable(&m->v[i], window_ms)) out = hk__strdup(m->v[i].value);
        else if (window_ms > 0) remove_at(m, i); /* past the window: of no use to anyone */
    }
    pthread_mutex_unlock(&m->lock);
    return out;
}

void hk__memo_put(hk_share *m, const char *key, const char *value) {
    if (!key || !value) return;
    pthread_mutex_lock(&m->lock);
    memo_entry *e = slot_for(m, key);
    if (e && !(e->value = hk__strdup(value))) remove_at(m, (size_t)(e - m->v));
    pthread_mutex_unlock(&m->lock);
}

const void *hk__memo_get_obj(hk_share *m, const char *key, long window_ms, const hk__memo_type *type) {
    if (!key) return NULL;
    const void *out = NULL;
    pthread_mutex_lock(&m->lock);
    size_t i = find(m, key);
    if (i < m->n && m->v[i].type == type && usable(&m->v[i], window_ms)) {
        type->ref(m->v[i].obj); /* under the lock: an eviction cannot drop the memo's first */
        out = m->v[i].obj;
        m->v[i].used = ++m->clock; /* recently used: evicted last */
    }
    pthread_mutex_unlock(&m->lock);
    return out;
}

void hk__memo_put_obj(hk_share *m, const char *key, const void *obj, size_t weight, const hk__memo_type *type) {
    if (!key || weight > MEMO_MAX_OBJ_WEIGHT) return;
    pthread_mutex_lock(&m->lock);
    size_t i = find(m, key);
    if (i < m->n) remove_at(m, i);
    while (m->obj_weight + weight > MEMO_MAX_OBJ_WEIGHT) remove_oldest(m, true);
    memo_entry *e = slot_for(m, key);
    if (e) {
        type->ref(obj);
        e->obj = obj;
        e->type = type;
        e->weight = weight;
        m->obj_weight += weight;
    }
    pthread_mutex_unlock(&m->lock);
    hk_clear_error();
}

void hk__memo_clear(hk_share *m) {
    pthread_mutex_lock(&m->lock);
    while (m->n) remove_at(m, m->n - 1);
    pthread_mutex_unlock(&m->lock);
}
