/* The memo of the pull-through tier: passed-through answers (refs, organization overviews) for the
 * revision TTL and negative answers (4xx but 429) for the negative TTL, bounded by bytes
 * (--upstream-memo-bytes) and entries, the least recently used first out. Kept by the upstream
 * handle (upstream_http.c frees it), used by the revisions (upstream_rev.c). */
#include "server/srv_http.h"

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UP_MEMO_MAX 1024 /* entries, whatever their bytes (the lookups are linear) */

typedef struct up_memo {
    char *key;
    char *body;      /* NULL for a negative answer */
    unsigned status; /* 200, or the remembered 4xx */
    char code[48];
    double at;
    uint64_t used; /* LRU tick of the last use */
    size_t bytes;  /* what it holds, counted against u->memo_cap */
} up_memo;

void srv_up_memo_free(srv_upstream *u) {
    for (size_t i = 0; i < u->n_memo; i++) {
        free(u->memo[i].key);
        free(u->memo[i].body);
    }
    free(u->memo);
    u->memo = NULL;
    u->n_memo = 0;
    u->memo_bytes = 0;
}

/* u->mu held */
static void memo_drop(srv_upstream *u, size_t i) {
    up_memo *m = &u->memo[i];
    u->memo_bytes -= m->bytes;
    free(m->key);
    free(m->body);
    u->memo[i] = u->memo[--u->n_memo];
}

/* A copy of the memo for key if younger than max_age (or any age when max_age < 0). */
bool srv_up_memo_get(srv_upstream *u, const char *key, double max_age, char **body, unsigned *status, char code[48]) {
    bool found = false;
    double now = hk__now_s();
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n_memo; i++) {
        up_memo *m = &u->memo[i];
        if (strcmp(m->key, key) != 0) continue;
        if (max_age < 0 || now - m->at < max_age) {
            found = true;
            m->used = ++u->memo_tick;
            if (body) *body = m->body ? hk__strdup(m->body) : NULL;
            if (status) *status = m->status;
            if (code) snprintf(code, 48, "%s", m->code);
        }
        break;
    }
    pthread_mutex_unlock(&u->mu);
    return found;
}

void srv_up_memo_put(srv_upstream *u, const char *key, const char *body, unsigned status, const char *code) {
    size_t bytes = sizeof(up_memo) + strlen(key) + 1 + (body ? strlen(body) + 1 : 0);
    char *k = hk__strdup(key), *b = body ? hk__strdup(body) : NULL;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n_memo; i++)
        if (strcmp(u->memo[i].key, key) == 0) {
            memo_drop(u, i);
            break;
        }
    /* an answer larger than the whole memo is answered, not kept */
    bool keep = k && (b || !body) && bytes <= u->memo_cap;
    while (keep && u->n_memo && (u->memo_bytes + bytes > u->memo_cap || u->n_memo >= UP_MEMO_MAX)) {
        size_t lru = 0;
        for (size_t i = 1; i < u->n_memo; i++)
            if (u->memo[i].used < u->memo[lru].used) lru = i;
        memo_drop(u, lru);
    }
    up_memo *nv = keep ? realloc(u->memo, (u->n_memo + 1) * sizeof *nv) : NULL;
    if (nv) {
        u->memo = nv;
        up_memo *m = &u->memo[u->n_memo++];
        memset(m, 0, sizeof *m);
        m->key = k;
        m->body = b;
        k = b = NULL;
        m->status = status;
        snprintf(m->code, sizeof m->code, "%s", code ? code : "");
        m->at = hk__now_s();
        m->used = ++u->memo_tick;
        m->bytes = bytes;
        u->memo_bytes += bytes;
    }
    pthread_mutex_unlock(&u->mu);
    free(k);
    free(b);
}

uint64_t srv_up_memo_bytes(srv_upstream *u) {
    pthread_mutex_lock(&u->mu);
    uint64_t n = u->memo_bytes;
    pthread_mutex_unlock(&u->mu);
    return n;
}

bool srv_up_memo_fits(const srv_upstream *u, const char *key, size_t body_len) {
    return sizeof(up_memo) + strlen(key) + 1 + body_len + 1 <= u->memo_cap;
}
