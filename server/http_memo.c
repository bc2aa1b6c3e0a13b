/* Finished answers kept for reuse (issue 25): a small file's 200 and a listing page are built once
 * (headers, body, the MHD response object) and queued again for the next request that proves them
 * unchanged, instead of opening, reading and formatting them again. What proves an entry is the
 * caller's: it stores proof bytes with the answer (a file's link and blob identity, a listing's
 * generation) and compares them with what it sees now before sending the kept answer.
 *
 * libmicrohttpd counts the references of a response: MHD_queue_response takes one for the
 * connection, MHD_destroy_response drops one. The memo holds the creation reference of each entry
 * and pins an entry (its own count) between the lookup and the queueing, so that an eviction in
 * another thread never destroys a response a request is about to queue. Bounded in bytes (keys,
 * proofs, bodies and an estimate of the headers): a client that asks for many distinct URLs only
 * evicts the least recently used entries. */
#include "server/srv_http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MEMO_BUCKETS 4096u  /* a power of two */
#define MEMO_HEADER_COST 1024u /* headers, MHD's response object, our entry */

struct srv_memo_entry {
    struct srv_memo_entry *next;       /* bucket chain */
    struct srv_memo_entry *prev_lru, *next_lru;
    uint64_t hash;
    unsigned pins;   /* requests between find and send/unpin */
    bool listed;     /* in the table (false once evicted or forgotten) */
    struct MHD_Response *r;
    unsigned status;
    uint64_t body_bytes;
    size_t cost;
    size_t klen, plen;
    char *buf;       /* plen proof bytes (aligned as malloc aligns), then the klen key bytes */
    const char *key;
};

struct srv_memo {
    pthread_mutex_t mu;
    size_t max_bytes, bytes, n;
    srv_memo_entry *buckets[MEMO_BUCKETS];
    srv_memo_entry *lru_head, *lru_tail; /* head: most recently used */
    uint64_t hits, misses;
};

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int srv_memo_new(srv_memo **out, size_t max_bytes) {
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    (*out)->max_bytes = max_bytes;
    return HK_OK;
}

static void entry_free(srv_memo_entry *e) {
    MHD_destroy_response(e->r); /* the memo's reference: connections still sending it keep theirs */
    free(e->buf);
    free(e);
}

static void lru_unlink(srv_memo *m, srv_memo_entry *e) {
    if (e->prev_lru) e->prev_lru->next_lru = e->next_lru;
    else m->lru_head = e->next_lru;
    if (e->next_lru) e->next_lru->prev_lru = e->prev_lru;
    else m->lru_tail = e->prev_lru;
    e->prev_lru = e->next_lru = NULL;
}

static void lru_push(srv_memo *m, srv_memo_entry *e) {
    e->next_lru = m->lru_head;
    e->prev_lru = NULL;
    if (m->lru_head) m->lru_head->prev_lru = e;
    m->lru_head = e;
    if (!m->lru_tail) m->lru_tail = e;
}

/* Out of the table and the LRU; freed now unless pinned (then by the last unpin). */
static void unlist_locked(srv_memo *m, srv_memo_entry *e) {
    srv_memo_entry **pp = &m->buckets[e->hash & (MEMO_BUCKETS - 1)];
    while (*pp && *pp != e) pp = &(*pp)->next;
    if (*pp) *pp = e->next;
    lru_unlink(m, e);
    e->listed = false;
    m->bytes -= e->cost;
    m->n--;
    if (e->pins == 0) entry_free(e);
}

void srv_memo_free(srv_memo *m) {
    if (!m) return;
    while (m->lru_head) unlist_locked(m, m->lru_head);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

srv_memo_entry *srv_memo_find(srv_memo *m, const char *key, size_t klen, const void **proof, size_t *plen) {
    if (!m) return NULL;
    uint64_t h = fnv1a(key, klen);
    pthread_mutex_lock(&m->mu);
    srv_memo_entry *e = m->buckets[h & (MEMO_BUCKETS - 1)];
    while (e && !(e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)) e = e->next;
    if (e) {
        e->pins++;
        lru_unlink(m, e);
        lru_push(m, e);
        m->hits++;
        *proof = e->buf; /* fixed while pinned */
        *plen = e->plen;
    } else {
        m->misses++;
    }
    pthread_mutex_unlock(&m->mu);
    return e;
}

void srv_memo_unpin(srv_memo *m, srv_memo_entry *e, bool forget) {
    pthread_mutex_lock(&m->mu);
    e->pins--;
    if (forget && e->listed) unlist_locked(m, e);
    else if (!e->listed && e->pins == 0) entry_free(e);
    pthread_mutex_unlock(&m->mu);
}

enum MHD_Result srv_memo_send(srv_memo *m, srv_memo_entry *e, struct MHD_Connection *c, req_ctx *ctx) {
    ctx->status = e->status;
    ctx->bytes = e->body_bytes;
    enum MHD_Result ret = MHD_queue_response(c, e->status, e->r); /* the connection's own reference */
    srv_memo_unpin(m, e, false);
    return ret;
}

void srv_memo_keep(srv_memo *m, const char *key, size_t klen, const void *proof, size_t plen,
                   struct MHD_Response *r, unsigned status, uint64_t body_bytes) {
    size_t cost = MEMO_HEADER_COST + klen + plen + (size_t)body_bytes;
    srv_memo_entry *e = m && cost <= m->max_bytes / 8 ? calloc(1, sizeof *e) : NULL;
    char *k = e ? malloc(plen + klen) : NULL;
    if (!k) { /* too large for the memo, or out of memory: the answer is simply not kept */
        free(e);
        MHD_destroy_response(r);
        return;
    }
    if (plen) memcpy(k, proof, plen);
    memcpy(k + plen, key, klen);
    *e = (srv_memo_entry){.hash = fnv1a(key, klen), .listed = true, .r = r, .status = status,
                          .body_bytes = body_bytes, .cost = cost, .klen = klen, .plen = plen, .buf = k,
                          .key = k + plen};
    pthread_mutex_lock(&m->mu);
    srv_memo_entry **pp = &m->buckets[e->hash & (MEMO_BUCKETS - 1)];
    for (srv_memo_entry *o = *pp; o; o = o->next)
        if (o->hash == e->hash && o->klen == klen && memcmp(o->key, key, klen) == 0) {
            unlist_locked(m, o); /* a concurrent miss kept it first, or it was proven stale */
            break;
        }
    while (m->lru_tail && m->bytes + cost > m->max_bytes) unlist_locked(m, m->lru_tail);
    e->next = *pp;
    *pp = e;
    lru_push(m, e);
    m->bytes += cost;
    m->n++;
    pthread_mutex_unlock(&m->mu);
}

void srv_memo_stats(srv_memo *m, size_t *bytes, size_t *entries, uint64_t *hits, uint64_t *misses) {
    pthread_mutex_lock(&m->mu);
    *bytes = m->bytes;
    *entries = m->n;
    *hits = m->hits;
    *misses = m->misses;
    pthread_mutex_unlock(&m->mu);
}
