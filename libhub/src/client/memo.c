/* The process-wide memo of metadata answers (memo.h). A small list under one mutex: a few dozen
 * entries at most, so a linear search costs nothing next to the request it saves. The oldest entry
 * goes first when a bound is reached. */
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
    void *obj;                 /* an object of its owner's type (a listing: client/tree.c) */
    const hk__memo_type *type; /* how to copy and clear obj; NULL for a string */
    size_t weight;
    uint64_t stamp; /* hk__now_ms() when stored: the age checked against a window */
    uint64_t op;    /* the operation that stored it (0: none) */
    uint64_t used;  /* order of the last store or use: the least recent goes first */
} memo_entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static memo_entry g_v[MEMO_MAX_ENTRIES];
static size_t g_n;
static size_t g_obj_weight;
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
    if (e->obj) {
        g_obj_weight -= e->weight;
        e->type->clear(e->obj);
        free(e->obj);
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

static void remove_oldest(bool objects_only) {
    size_t best = g_n;
    for (size_t i = 0; i < g_n; i++)
        if ((!objects_only || g_v[i].obj) && (best == g_n || g_v[i].used < g_v[best].used)) best = i;
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
    if (i < g_n && !g_v[i].obj) {
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

bool hk__memo_get_obj(void *out, const char *key, long window_ms, const hk__memo_type *type) {
    memset(out, 0, type->size);
    if (!key) return false;
    bool hit = false;
    pthread_mutex_lock(&g_lock);
    size_t i = find(key);
    if (i < g_n && g_v[i].type == type && usable(&g_v[i], window_ms)) {
        hit = type->copy(out, g_v[i].obj) == HK_OK;
        if (hit) g_v[i].used = ++g_clock; /* recently used: evicted last */
    }
    pthread_mutex_unlock(&g_lock);
    hk_clear_error();
    return hit;
}

void hk__memo_put_obj(const char *key, const void *obj, size_t weight, const hk__memo_type *type) {
    if (!key || weight > MEMO_MAX_OBJ_WEIGHT) return;
    void *copy = calloc(1, type->size);
    if (!copy) return;
    if (type->copy(copy, obj) != HK_OK) {
        free(copy);
        hk_clear_error();
        return;
    }
    pthread_mutex_lock(&g_lock);
    size_t i = find(key);
    if (i < g_n) remove_at(i);
    while (g_obj_weight + weight > MEMO_MAX_OBJ_WEIGHT) remove_oldest(true);
    memo_entry *e = slot_for(key);
    if (e) {
        e->obj = copy;
        e->type = type;
        e->weight = weight;
        g_obj_weight += weight;
        copy = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    if (copy) {
        type->clear(copy);
        free(copy);
    }
    hk_clear_error();
}

void hk__memo_clear(void) {
    pthread_mutex_lock(&g_lock);
    while (g_n) remove_at(g_n - 1);
    pthread_mutex_unlock(&g_lock);
}
