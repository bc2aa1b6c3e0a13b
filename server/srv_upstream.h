/* The pull-through tier of the mirror (hubkern serve --upstream URL): what the HTTP side calls on a
 * miss, and what the upstream files share.
 *
 * Who owns what:
 *   upstream_http.c   one GET to an upstream: fallbacks, the token (only to that upstream's origin),
 *                     redirects followed by hand without it, 429 back-off shared by every client
 *                     (capped), the overall deadline, the request's client (its disconnect, its
 *                     budget of upstream misses), connections kept open between transfers (idle
 *                     handles)
 *   upstream_rev.c    revisions (branch/tag → commit with a TTL, stale-if-error, negative answers),
 *                     the commit's manifest, refs and organization overviews passed through
 *   upstream_blob.c   blobs: one transfer per blob (threads wait on a condition variable, processes on
 *                     an flock), verified against the manifest and the headers, then renamed in
 *   upstream_wait.c   the in-process coalescing table (key → in flight / done), waits with a deadline
 *   upstream_verdict.c  the revision step's kept "fresh" verdicts (a warm request does no file-system
 *                     work for it), what keeps them true
 *   manifest.c        the per-commit file list kept beside the store (store.c lists from it)
 *   http_metrics.c    counters and /metrics (Prometheus text) */
#ifndef HK_SRV_UPSTREAM_H
#define HK_SRV_UPSTREAM_H

#include "server/srv_internal.h"

typedef struct srv_server srv_server;
typedef struct repo_ref repo_ref;
typedef struct srv_upstream srv_upstream;

#include "internal.h"
#include "util/text.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* What the access log says about a request's content. */
typedef enum { UP_NONE = 0, UP_HIT, UP_MISS, UP_COALESCED, UP_STALE } up_mark;

/* An answer the mirror gives instead of the content (upstream said no, or is unwell). */
typedef struct up_answer {
    unsigned status;      /* 404, 429, 502, 503 */
    const char *code;     /* X-Error-Code or NULL */
    unsigned retry_after; /* seconds, 0 = no header */
    char msg[200];
} up_answer;

/* ---- upstream_wait.c: coalescing inside one process ------------------------------------------ */
typedef struct up_waitset up_waitset;
int srv_up_waitset_new(up_waitset **out, unsigned retry_s); /* retry_s: a waiter's 503 Retry-After */
void srv_up_waitset_free(up_waitset *w);
/* true: the caller leads (does the work, then calls srv_up_leave); false: another thread did it
 * meanwhile and the caller waited until it finished: *leader = what the leader answered its
 * client when it failed (status 0: it succeeded), so that every waiter answers the same (a 503
 * with its Retry-After, a 429, a 404, a 502) instead of a blanket 502. A wait lasts at most
 * wait_s and ends early when this thread's client disconnects or *stopping: then *leader is a 503
 * with Retry-After (the leader goes on for the others). */
bool srv_up_enter(up_waitset *w, const char *key, double wait_s, const atomic_bool *stopping, up_answer *leader);
/* failed: the leader's answer to its own client, or NULL when it succeeded. */
void srv_up_leave(up_waitset *w, const char *key, const up_answer *failed);
/* How many threads wait on the leader of key (0 when none leads it). */
unsigned srv_up_waiters(up_waitset *w, const char *key);
/* Waiters woken by a signal while their own key was still in flight, since the set was made (each
 * key has its own condition variable, so this stays 0 but for spurious wake-ups; for tests). */
unsigned long srv_up_futile_wakeups(up_waitset *w);

/* ---- upstream_queue.c: misses on transfer threads, their connections suspended ---------------- */
struct MHD_Connection;
/* One finished upstream step of a request: the key it was asked under, what the blocking call
 * returned (out 0: go on with the store; 1: answer ans), its mark, and a body (pass-through only,
 * when the answer was too large for the memo: the first client's alone). */
typedef struct up_result {
    char *key;
    int out;
    up_mark mark;
    up_answer ans;
    char *body;
} up_result;
typedef struct up_req up_req; /* one request's upstream steps (its req_ctx owns it) */
/* Runs a step on a transfer thread with the blocking code; fills res (res->body may be set). */
typedef void (*up_job_fn)(srv_server *srv, void *arg, up_result *res);
int srv_up_queue_start(srv_server *srv, unsigned threads, unsigned cap);
/* Idempotent. After u->stopping is set: running steps end, queued ones are answered 503, every
 * suspended connection is resumed. */
void srv_up_queue_stop(srv_upstream *u);
void srv_up_queue_free(srv_upstream *u); /* after the daemon stopped; stops first */
unsigned srv_up_queue_depth(srv_upstream *u); /* steps in flight (running or queued) */
up_req *srv_up_req_new(void);
void srv_up_req_free(up_req *r);
/* This pool thread answers the request whose up_req is *slot (made on its first step) now (fd: its
 * client's socket; client: its budget key): misses are deferred. srv_up_req_leave ends it: true
 * when a step was recorded (then srv_up_submit with *slot). */
void srv_up_req_enter(up_req **slot, int fd, const char *client);
bool srv_up_req_leave(void);
/* The mark of the request's i-th finished step (UP_NONE past the last): a resumed request may find
 * its file in the store without asking again, and is still logged as the miss it was. */
up_mark srv_up_req_mark(const up_req *r, unsigned i);
/* Is this thread answering a request whose misses are deferred (a pool thread)? */
bool srv_up_deferring(void);
/* Has the request this thread answers finished steps (it was resumed)? */
bool srv_up_has_steps(void);
/* Has a step been recorded by this dispatch (every answer queued meanwhile is dropped)? */
bool srv_up_deferred(void);
/* This request's finished step asked under key, or NULL. */
const up_result *srv_up_step_done(const char *key);
/* Record the step (arg owned: freed with free_arg) under its job's key (requests with the same key
 * share one run) and step_key (NULL: key), under which this request finds its end; returns 1 with
 * *ans a placeholder (dropped) or, when no step can be recorded, a real 503. */
int srv_up_defer(const char *key, const char *step_key, up_job_fn fn, void *arg, void (*free_arg)(void *),
                 up_answer *ans);
/* The recorded step submitted, joined to one in flight under its key or queued, and c suspended:
 * 0. 1: refused (*refused: 503 with Retry-After: the queue is full, or the mirror stops). */
int srv_up_submit(srv_upstream *u, up_req *r, struct MHD_Connection *c, up_answer *refused);

/* ---- upstream_http.c ------------------------------------------------------------------------ */
typedef struct up_site {
    char *base;    /* "http://host:port[/prefix]" without trailing '/' */
    char *origin;  /* "scheme://host:port" the token is bound to */
    pthread_mutex_t mu;
    double retry_until; /* hk__now_s() seconds; 429 back-off shared by every client */
} up_site;

typedef struct up_budget up_budget; /* one client's upstream misses (upstream_client.c) */
typedef struct up_verdicts up_verdicts; /* the revision step's kept verdicts (upstream_verdict.c) */

/* Transfer handles kept between requests (a handle keeps its connections: no TCP or TLS set-up
 * per miss); more may be in use at once, those are closed after their request. */
#define UP_IDLE_HANDLES 16

typedef struct srv_upstream {
    up_site *sites;
    size_t n_sites;
    char *token; /* never logged */
    unsigned rev_ttl, neg_ttl;
    unsigned stall_s; /* --upstream-timeout */
    unsigned deadline_s; /* --upstream-deadline */
    unsigned max_backoff; /* --upstream-max-backoff: most of a Retry-After honoured */
    unsigned retry_s; /* --upstream-retry-after: the Retry-After of a 503 for an upstream step not done now */
    atomic_bool stopping; /* the server is stopping: transfers in flight end now (srv_stop) */
    up_waitset *waits;
    pthread_mutex_t mu; /* the negative cache and the pass-through memo */
    struct up_memo *memo;
    size_t n_memo;
    uint64_t memo_bytes, memo_cap; /* held / --upstream-memo-bytes */
    uint64_t memo_tick;            /* LRU clock */
    pthread_mutex_t hmu;           /* the idle transfer handles */
    void *idle[UP_IDLE_HANDLES];   /* CURL *: each keeps its connections to the upstream open */
    size_t n_idle;
    pthread_mutex_t bmu;           /* the per-client miss budgets */
    up_budget *budgets;
    unsigned miss_budget, miss_window; /* --client-miss-budget misses per --client-miss-window s */
    struct up_queue *queue;        /* the transfer threads (upstream_queue.c) */
    up_verdicts *verdicts;         /* (repo, revision) found fresh, kept for the TTL (upstream_verdict.c) */
} srv_upstream;

typedef struct up_resp {
    long status;
    hk_strbuf body;       /* when fd < 0 */
    int fd;               /* the body goes here when >= 0 */
    hk_hasher *h256, *hgit; /* fed with the body when set */
    uint64_t written, max_body; /* max_body: the most bytes the body in fd may have (0: none) */
    double t0;            /* when the transfer started (srv_up_get sets it): the deadline counts from it */
    const char *lead_key; /* the coalescing key this transfer leads, if any (for srv_up_waiters) */
    bool too_big;
    char etag[80], linked_etag[80], linked_size[32], commit[72], retry_after[16], error_code[48];
    size_t site; /* the upstream that answered */
} up_resp;

int srv_up_create(srv_upstream **out, const srv_config *cfg);
void srv_up_free(srv_upstream *u);
/* upstream_memo.c: the memo of passed-through and negative answers (u->mu guards it). */
void srv_up_memo_free(srv_upstream *u);
uint64_t srv_up_memo_bytes(srv_upstream *u); /* bytes the pass-through memo holds now */
/* A copy of the answer kept for key if younger than max_age (any age when max_age < 0): body (may
 * be NULL: not wanted; *body NULL for a negative answer), status and error code. */
bool srv_up_memo_get(srv_upstream *u, const char *key, double max_age, char **body, unsigned *status, char code[48]);
/* Keep an answer (body NULL: a negative one) under key, evicting the least recently used. */
void srv_up_memo_put(srv_upstream *u, const char *key, const char *body, unsigned status, const char *code);
/* Would an answer of body_len bytes under key be kept (not larger than the whole memo)? */
bool srv_up_memo_fits(const srv_upstream *u, const char *key, size_t body_len);
/* upstream_lock.c: flock of <root>/.locks/<repo folder>/<name>.lock, waited for at most wait_s
 * (and not past the client's disconnect or the mirror's stop; woken by the holder's close): the fd, -1 when locking is impossible (the work is
 * then done unlocked), -2 when the wait was given up. srv_up_unlock(-1) is fine. */
int srv_up_lock(srv_upstream *u, const char *root, const char *repo_dir, const char *name, double wait_s);
/* How long a transfer of `bytes` (0: unknown) may run, and so how long to wait for one. */
double srv_up_wait_s(const srv_upstream *u, uint64_t bytes);
/* The client of the request this thread answers (with --upstream every connection has its own
 * thread): its socket, for noticing a disconnect, and its budget key (token or address). Set by
 * srv_up_begin around each request; fd -1 / key NULL clears it. */
/* upstream_client.c */
void srv_up_client_set(int fd, const char *key);
bool srv_up_client_gone(void);
/* On a transfer thread: the clients of the step it runs are asked instead of one socket (NULL: off). */
void srv_up_client_gone_hook(bool (*gone)(void));
/* Has this thread's client budget left for an upstream miss? false: *retry_s until it has. */
bool srv_up_client_may_miss(srv_upstream *u, unsigned *retry_s);
/* Spend one miss of this thread's client (the request is about to go upstream). */
void srv_up_client_spend(srv_upstream *u);
/* The table of client budgets an upstream handle keeps (free with free). */
up_budget *srv_up_budgets_new(void);
void srv_up_unlock(int fd);
#ifdef HK_TEST_HOOKS
/* upstream_lock.c: how often a lock's waiter looks at stop and disconnects when woken by events
 * (> 0), and how many turns the waits took so far (*turns, when set). */
void srv_up_lock_test_hooks(int wait_check_ms, unsigned *turns);
#endif
/* GET base + path_query from the first upstream that answers (fallbacks on network errors, 5xx and
 * 429). HK_OK with r->status set when some upstream answered; HK_ERR_NETWORK when none did;
 * HK_ERR_RATE_LIMITED-like: *backoff_s > 0 when every upstream is inside a 429 back-off. */
int srv_up_get(srv_upstream *u, const char *path_query, up_resp *r, unsigned *backoff_s);
/* Is a failed srv_up_get (rc, r->status) "the upstream is unavailable, try again later" (a 503
 * with Retry-After for the client: a 503, no answer, a stall, the mirror stopping) rather than a
 * bad answer (a 502)? */
bool srv_up_unavailable(int rc, long status);
void srv_up_resp_init(up_resp *r);
void srv_up_resp_free(up_resp *r);

/* ---- upstream_verdict.c: the revision step's kept verdicts (what keeps them true: the file) ---- */
int srv_up_verdicts_new(up_verdicts **out);
void srv_up_verdicts_free(up_verdicts *vs);
/* Read before a file-system check whose "fresh" is to be kept: a forget after it voids the keep. */
uint64_t srv_up_verdict_gen(up_verdicts *vs);
/* Is rev of the repo known fresh without looking at the store (kept, inside its TTL and proof)? */
bool srv_up_verdict_kept(up_verdicts *vs, hk_repo_type type, const char *id, const char *rev);
/* Keep "fresh" for rev, until fresh_until (wall clock; 0: a commit, no end of its own), unless a
 * forget came after gen was read. */
void srv_up_verdict_keep(up_verdicts *vs, hk_repo_type type, const char *id, const char *rev, time_t fresh_until,
                         uint64_t gen);
/* Every verdict of the repo dropped: this process changed what they were made from. */
void srv_up_verdict_forget(up_verdicts *vs, hk_repo_type type, const char *id);
/* rev's verdict dropped: the store lacked what it passed (the next step checks the file system). */
void srv_up_verdict_drop(up_verdicts *vs, hk_repo_type type, const char *id, const char *rev);

/* ---- upstream_rev.c ------------------------------------------------------------------------- */
/* Before the store resolves `rev` of `repo`: make sure the store knows it (fetch on a miss or past
 * the TTL), repo->dir refreshed. 0 = go on with the store (which may still say 404); 1 = answer
 * with *ans. *mark says hit / miss / coalesced / stale; *kept (may be NULL): passed on a kept verdict,
 * without looking at the store (whose failure then calls for the step again: srv_up_retake). */
int srv_up_revision(srv_server *srv, repo_ref *repo, const char *rev, up_mark *mark, up_answer *ans, bool *kept);
/* Upstream's refs (or overview) JSON, memoised for the revision TTL, stale on error. 0 = *body
 * (caller frees), 1 = answer with *ans. */
int srv_up_passthrough(srv_server *srv, const char *path_query, char **body, up_mark *mark, up_answer *ans);

/* ---- upstream_blob.c ------------------------------------------------------------------------ */
/* The file `path` of `commit` (from the manifest) into blobs/ and the snapshot. 0 = now in the store;
 * 1 = answer with *ans (404 when the manifest has no such file). */
int srv_up_file(srv_server *srv, const repo_ref *repo, const char *commit, const char *path, up_mark *mark,
                   up_answer *ans);

/* ---- manifest.c ----------------------------------------------------------------------------- */
/* <root>/.hubkern-upstream/<repo folder>/<commit>: one line per file, "<etag> <size> <L|G> <path>". */
char *srv_manifest_path(const char *root, const char *repo_dir, const char *commit);
int srv_manifest_write(const char *root, const char *repo_dir, const char *commit, const srv_listing *l);
/* Files of the manifest added to l (not finished). HK_ERR_NOT_FOUND when there is none. */
int srv_manifest_read(srv_listing *l, const char *root, const char *repo_dir, const char *commit);
bool srv_manifest_exists(const char *root, const char *repo_dir, const char *commit);
/* Bytes contradicted what the manifest claimed for a file (upstream_blob.c): keep only the entries
 * whose blobs are in the store (verified when they were renamed in) and mark the manifest partial,
 * so that the commit is asked upstream again instead of the lie being believed for good. */
int srv_manifest_reject(const char *root, const char *repo_dir, const char *commit);
bool srv_manifest_partial(const char *root, const char *repo_dir, const char *commit);

/* ---- http_metrics.c ------------------------------------------------------------------------- */
typedef enum { MET_API, MET_RESOLVE, MET_LFS, MET_METRICS, MET_OTHER, MET_N_ROUTES } met_route;
typedef struct srv_metrics {
    atomic_ullong req[MET_N_ROUTES][6]; /* status class 1xx..5xx, [0] = other */
    atomic_ullong by_status[MET_N_ROUTES][8]; /* 200 206 304 404 429 502 503 other */
    atomic_ullong bytes;
    atomic_ullong hits, misses, coalesced, stale;
    atomic_ullong up_fetches, up_bytes, up_errors, up_rejected, up_rate_limited;
    /* revision steps passed on a kept verdict / checked by the file system; verdicts dropped because
     * the store lacked what one passed */
    atomic_ullong rev_kept, rev_checked, rev_dropped;
} srv_metrics;
void srv_metrics_count(srv_metrics *m, met_route route, unsigned status, uint64_t bytes);
void srv_metrics_mark(srv_metrics *m, up_mark mark);
char *srv_metrics_text(const srv_metrics *m);

#endif
