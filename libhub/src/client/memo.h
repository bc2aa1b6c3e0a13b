/* The memo of the client's metadata answers (memo.c), held by an hk_share (hubkern/hub.h): the
 * one a client was given, else the process's default (hk__memo_default): what a repeat resolve of the same
 * (endpoint, token, repo, revision) would ask again. Answers about a branch, tag or version (refs,
 * revision lookups, positive publisher trust) are used for the freshness window only
 * (hk_hub.freshness_ms); answers about a commit (its root listing) never change and are kept until
 * evicted (bounded). Thread-safe. Internal. */
#ifndef HK_CLIENT_MEMO_H
#define HK_CLIENT_MEMO_H

#include <stdbool.h>
#include <stddef.h>

#include "hubkern/hub.h" /* hk_share */

struct hk_hub;
/* The share clients use when their options name none. */
hk_share *hk__memo_default(void);

/* The key of (kind, a, b) for hub: its endpoint and a tag of its token are part of it, so that
 * neither another mirror's nor another token's answers stand in. Caller frees; NULL: out of memory. */
char *hk__memo_key(const struct hk_hub *hub, const char *kind, const char *a, const char *b);
/* A copy of the value stored under key (caller frees) when it is younger than window_ms, or was
 * stored in this thread's current operation; window_ms < 0: any age (immutable answers). NULL when
 * none (window_ms == 0 outside an operation: always). */
char *hk__memo_get(hk_share *m, const char *key, long window_ms);
/* Store (a copy of) value under key, stamped now. Failures only cost a request later. */
void hk__memo_put(hk_share *m, const char *key, const char *value);
/* How the memo holds an object whose type it does not know (a listing, client/tree.c): the
 * owner's reference counting. The memo keeps a reference and hands out references, never copies,
 * so a held object must be immutable and its count thread-safe; it never looks inside. */
typedef struct hk__memo_type {
    void (*ref)(const void *obj);
    void (*unref)(const void *obj);
} hk__memo_type;
/* A new reference to the object of that type stored under key (drop it with type->unref), or
 * NULL. It stays valid however the memo evicts. window_ms: as hk__memo_get. */
const void *hk__memo_get_obj(hk_share *m, const char *key, long window_ms, const hk__memo_type *type);
/* Keep a reference to obj under key; weight counts toward the bound on all held objects (a
 * listing: its entries), the least recently used going first. Failures only cost a request later. */
void hk__memo_put_obj(hk_share *m, const char *key, const void *obj, size_t weight, const hk__memo_type *type);
/* One public call that asks several questions (hk_hub_pull, hk_get_kernel, ...) is an operation:
 * within it each answer is asked once, also with the freshness window off (0 means "every call
 * asks again", not "every step of a call"). Nested begin/end pairs join the outer operation; per
 * thread (worker threads of a call are outside it and keep the window's rule). */
void hk__memo_op_begin(void);
void hk__memo_op_end(void);
/* Does hub reuse answers now: its window is on, or this thread is in an operation? */
bool hk__memo_on(const struct hk_hub *hub);
/* Drop everything (hk_shutdown when the last reference goes, and tests). */
void hk__memo_clear(hk_share *m);

#endif
