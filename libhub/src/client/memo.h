/* The process-wide memo of the client's metadata answers (memo.c): what a repeat resolve of the same
 * (endpoint, token, repo, revision) would ask again. Answers about a branch, tag or version (refs,
 * revision lookups, positive publisher trust) are used for the freshness window only
 * (hk_hub.freshness_ms); answers about a commit (its root listing) never change and are kept until
 * evicted (bounded). Thread-safe. Internal. */
#ifndef HK_CLIENT_MEMO_H
#define HK_CLIENT_MEMO_H

#include "client/tree.h"

#include <stdbool.h>

struct hk_hub;

/* The key of (kind, a, b) for hub: its endpoint and a tag of its token are part of it, so that
 * neither another mirror's nor another token's answers stand in. Caller frees; NULL: out of memory. */
char *hk__memo_key(const struct hk_hub *hub, const char *kind, const char *a, const char *b);
/* A copy of the value stored under key (caller frees) when it is younger than window_ms, or was
 * stored in this thread's current operation; window_ms < 0: any age (immutable answers). NULL when
 * none (window_ms == 0 outside an operation: always). */
char *hk__memo_get(const char *key, long window_ms);
/* Store (a copy of) value under key, stamped now. Failures only cost a request later. */
void hk__memo_put(const char *key, const char *value);
/* A copy of the listing stored under key into *out (true), or false. window_ms: as hk__memo_get
 * (a commit's listing never changes: < 0 while the hub's window is on, 0 when it is off). */
bool hk__memo_get_tree(tree *out, const char *key, long window_ms);
/* Store a copy of t under key (listings are kept while their entries total at most a bound). */
void hk__memo_put_tree(const char *key, const tree *t);
/* One public call that asks several questions (hk_hub_pull, hk_get_kernel, ...) is an operation:
 * within it each answer is asked once, also with the freshness window off (0 means "every call
 * asks again", not "every step of a call"). Nested begin/end pairs join the outer operation; per
 * thread (worker threads of a call are outside it and keep the window's rule). */
void hk__memo_op_begin(void);
void hk__memo_op_end(void);
/* Does hub reuse answers now: its window is on, or this thread is in an operation? */
bool hk__memo_on(const struct hk_hub *hub);
/* Drop everything (hk_shutdown when the last reference goes, and tests). */
void hk__memo_clear(void);

#endif
