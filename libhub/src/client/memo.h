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
/* A copy of the value stored under key (caller frees) when it is younger than window_ms; window_ms
 * < 0: any age (immutable answers). NULL when none (or window_ms == 0). */
char *hk__memo_get(const char *key, long window_ms);
/* Store (a copy of) value under key, stamped now. Failures only cost a request later. */
void hk__memo_put(const char *key, const char *value);
/* A copy of the listing stored under key into *out (true), or false. */
bool hk__memo_get_tree(tree *out, const char *key);
/* Store a copy of t under key (listings are kept while their entries total at most a bound). */
void hk__memo_put_tree(const char *key, const tree *t);
/* Drop everything (hk_shutdown when the last reference goes, and tests). */
void hk__memo_clear(void);

#endif
