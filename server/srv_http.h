/* Internals shared by the HTTP side of the server (server/http_*.c): the server object, one
 * request's state, the parsed URL, and the helpers every answer uses.
 *
 * Who owns what:
 *   http_daemon.c    srv_start/stop: configuration, the listening socket, libmicrohttpd callbacks
 *   http_guard.c     connection guard: the deadline for a request's headers (slowloris), the
 *                    per-address connection limit
 *   http_client.c    who the client is: trusted proxies, forwarded addresses, per-address counts
 *   http_auth.c      bearer tokens and their namespace scopes
 *   http_route.c     URL → segments (decoded once) → route; repo ids, revisions and paths checked there
 *   http_respond.c   queueing answers: JSON, Hub-style errors, base URL for links
 *   http_encode.c    sanitising for headers and logs, query flags, client address (percent-encoding
 *                    and JSON strings come from util/text.h)
 *   http_range.c     file bodies: If-None-Match (304), Range (206 / 416), the full 200
 *   http_file.c      resolve answers, the signed /lfs/ blob route and its 302
 *   http_api.c       /api/ JSON answers: repo info, tree pages, refs, organization overview
 *   http_paths.c     /api/.../paths-info (its own file: body parsing and the duplicate set)
 *   http_benchmarks.c  /api/kernels/{repo}/benchmarks: submissions stored and listed (srv_bench.h)
 *   http_fault.c     fault injection, compiled only with HK_TEST_HOOKS
 *   http_upstream.c  the pull-through hooks the routes call (srv_upstream.h has the upstream side)
 *   http_metrics.c   counters and /metrics
 *   http_memo.c      finished answers (small files, tree pages) kept for reuse with their proof */
#ifndef HK_SRV_HTTP_H
#define HK_SRV_HTTP_H

#include "server/srv_internal.h"
#include "server/srv_upstream.h"

#include "internal.h"
#include "util/text.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define HK_SRV_MAX_SEGS 256
#define HK_SRV_MAX_URL 8192
#define HK_SRV_MAX_BODY (1u << 20)
/* libmicrohttpd's memory per connection: it holds the request's header section (a request whose
 * headers do not fit gets 431) and is zeroed after every keep-alive request, so its size is paid
 * on each one (the 32 KiB default was ~4.5 % of a small file's server time). 16 KiB holds a
 * HK_SRV_MAX_URL URL with a real client's headers, and nginx's default of 8 KiB per header line. */
#define HK_SRV_CONN_MEMORY 16384u
/* File answers up to this many bytes are sent from memory with their headers (http_range.c). */
#define HK_SRV_INLINE_BODY_MAX 16384u

/* Inactivity timeout of a connection, seconds. */
#define HK_SRV_IDLE_TIMEOUT 120u

typedef struct token_spec {
    char *token;
    char **orgs; /* NULL = every namespace; an entry is a namespace "org" or one repo "org/name" */
    size_t n_orgs;
    bool write;  /* may also write (benchmark uploads); a plain token only reads */
} token_spec;

typedef struct srv_conn_guard srv_conn_guard;
typedef struct srv_memo srv_memo;
typedef struct srv_proxy_net srv_proxy_net;
typedef struct srv_addr_count srv_addr_count;

#ifdef HK_TEST_HOOKS
typedef struct srv_fault {
    uint64_t cut_after; /* 0 = off */
    atomic_uint left;   /* responses still to cut */
} srv_fault;
#endif

struct srv_server {
    struct MHD_Daemon *daemon;
    srv_store *store;
    srv_conn_guard *guard;
    unsigned port;
    char *bound_base; /* "http://host:port" of the bound socket */
    char *public_url;
    unsigned page_size;
    token_spec *tokens;
    size_t n_tokens;
    char **trusted;
    size_t n_trusted;
    srv_proxy_net *proxies; /* --trusted-proxy: whose X-Forwarded-For / Forwarded is believed */
    size_t n_proxies;
    unsigned per_ip_limit;  /* 0: none */
    srv_addr_count *per_ip; /* NULL without a limit */
    bool lfs_302;
    bool access_log;
    unsigned char lfs_key[32];
    srv_upstream *up;    /* NULL: no pull-through */
    srv_memo *memo;      /* finished answers kept for reuse (http_memo.c) */
    unsigned rev_ttl;   /* max-age of branch-addressed answers */
    /* Cache-Control values, made once (not formatted per answer): [0] commit-addressed (immutable),
     * [1] branch-addressed (max-age = rev_ttl); private when the mirror needs tokens */
    char cache_control[2][64];
    uint64_t bench_max; /* largest benchmark submission accepted, bytes */
    uint64_t bench_quota_count, bench_quota_bytes; /* per repo; the oldest are evicted past them */
    size_t max_body;    /* request bodies are collected up to this many bytes */
    srv_metrics metrics;
#ifdef HK_TEST_HOOKS
    srv_fault fault;
#endif
};

/* A client's address: AF_INET (4 bytes) or AF_INET6 (16), IPv4-mapped ones unmapped; family 0
 * when unknown. */
typedef struct srv_client_addr {
    int family;
    unsigned char a[16];
} srv_client_addr;

typedef struct req_ctx {
    char method[8];
    srv_client_addr peer; /* the client (forwarded by a trusted proxy, else the peer) */
    char client[48];    /* its text, formatted on first use (srv_ctx_client); "" until then */
    bool counted;       /* holds a slot of the per-address limit (a proxied request) */
    bool over_limit;    /* a proxied request past the per-address limit: answered 429 */
    char *url; /* sanitised, for the access log */
    hk_strbuf body;
    bool body_too_big;
    unsigned status;
    uint64_t bytes;
    double start_s; /* hk__now_s() when the request came */
    met_route route;
    up_mark mark;       /* hit / miss / coalesced / stale, for the access log and /metrics */
    int cacheable;      /* 0: no Cache-Control; 1: branch-addressed (short); 2: commit-addressed (immutable) */
    const char (*cache_control)[64]; /* the server's two values, indexed by cacheable == 1 */
    bool tokens;        /* the mirror needs tokens: answers vary by Authorization */
    bool publisher_trusted; /* X-Kernel-Publisher-Trusted: true on this JSON answer (refs) */
    up_req *up;         /* with --upstream: the request's upstream steps (upstream_queue.c) */
    bool rev_kept;      /* its revision step passed on a kept verdict (upstream_verdict.c) */
} req_ctx;

/* Checked names: a revision is at most this long, a file path too (and each of its parts 255). */

/* The URL path split at '/': p/len the raw segment (route keywords are matched on it), d the segment
 * percent-decoded once, at the route entry (srv_dispatch); nothing decodes a segment again. */
/* q = '"' etag '"' (an etag is at most 64 characters): ETag and If-None-Match without snprintf. */
void srv_quote_etag(char q[80], const char *etag);

typedef struct seglist {
    const char *p[HK_SRV_MAX_SEGS];
    size_t len[HK_SRV_MAX_SEGS];
    const char *d[HK_SRV_MAX_SEGS];
    size_t n;
} seglist;

/* A repo named by a request. Only srv_parse_repo makes one, and only from an id that passed
 * hk_repo_id_valid part by part ("org/name" or "name": no '/', "..", '%', control characters), so
 * whatever takes a repo_ref (store paths, upstream URLs, token scopes) takes a checked id. */
typedef struct repo_ref {
    hk_repo_type type;
    char *id;       /* decoded, checked repo id */
    char *dir;      /* repo folder, NULL when absent */
    size_t next;    /* index of the first segment after the repo id */
} repo_ref;

typedef enum { REPO_OK, REPO_NONE, REPO_INVALID } repo_parse;

/* ---- http_encode.c -------------------------------------------------------------------------- */
/* (percent-encoding and JSON strings are the util layer's: util/text.h) */
/* A copy safe for a header value or a log line: printable ASCII only, at most `max` bytes. */
char *srv_sanitize(const char *s, size_t max);
/* ?key=true or ?key=1 */
bool srv_query_true(struct MHD_Connection *c, const char *key);
/* "2024-01-02T03:04:05.000Z" */
void srv_iso_time(char out[32], time_t t);
/* The client's address as text ("?" when unknown). */
void srv_client_ip(char *out, size_t cap, struct MHD_Connection *c);

/* ---- http_respond.c ------------------------------------------------------------------------- */
/* Queue `r` (destroyed here) with `status`; records status and body bytes for the access log. */
enum MHD_Result srv_queue(struct MHD_Connection *c, req_ctx *ctx, unsigned status, struct MHD_Response *r,
                             uint64_t body_bytes);
/* Queue sb's text as application/json (sb is emptied); `link` is an optional Link header. */
enum MHD_Result srv_send_json(struct MHD_Connection *c, req_ctx *ctx, unsigned status, hk_strbuf *sb,
                                 const char *link);
/* Errors the way the Hub signals them: X-Error-Code, X-Error-Message, {"error": ...}. */
enum MHD_Result srv_send_error(struct MHD_Connection *c, req_ctx *ctx, unsigned status, const char *code,
                                  const char *commit, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
enum MHD_Result srv_repo_not_found(struct MHD_Connection *c, req_ctx *ctx);
/* 404 RevisionNotFound naming the revision as the client sent it; clears the resolve error. */
enum MHD_Result srv_rev_not_found(struct MHD_Connection *c, req_ctx *ctx, const char *rev);
enum MHD_Result srv_method_not_allowed(struct MHD_Connection *c, req_ctx *ctx);
/* Base URL for links and redirects: --public-url, else "" (the link is relative). Never the request's
 * Host: a cache in front that keys without it would hand a hostile Host to every later client. */
char *srv_base_url(srv_server *srv);
/* 400 "Invalid repo id" / "Invalid revision" (the checked-name refusals every route shares). */
enum MHD_Result srv_repo_invalid(struct MHD_Connection *c, req_ctx *ctx);
enum MHD_Result srv_rev_invalid(struct MHD_Connection *c, req_ctx *ctx, const char *rev);

/* srv_send_json's response, not queued (sb is emptied; *len its body bytes); NULL when out of memory. */
struct MHD_Response *srv_json_response(const req_ctx *ctx, hk_strbuf *sb, const char *link, size_t *len);
/* Queue `r` with srv_queue's headers and keep the caller's reference (the answer memo takes it). */
enum MHD_Result srv_queue_keep(struct MHD_Connection *c, req_ctx *ctx, unsigned status, struct MHD_Response *r,
                               uint64_t body_bytes);

/* ---- http_memo.c ---------------------------------------------------------------------------- */
/* Finished answers kept under a key with the caller's proof bytes, bounded in bytes (LRU). */
typedef struct srv_memo_entry srv_memo_entry;
int srv_memo_new(srv_memo **out, size_t max_bytes);
void srv_memo_free(srv_memo *m);
/* The entry of key, pinned (send it or unpin it), with its proof bytes (aligned for any type,
 * unchanged while pinned); NULL when none is kept. */
srv_memo_entry *srv_memo_find(srv_memo *m, const char *key, size_t klen, const void **proof, size_t *plen);
/* Queue a pinned entry's answer on c (status and bytes recorded in ctx) and unpin it. */
enum MHD_Result srv_memo_send(srv_memo *m, srv_memo_entry *e, struct MHD_Connection *c, req_ctx *ctx);
/* Unpin without sending; forget: its proof failed, drop it. */
void srv_memo_unpin(srv_memo *m, srv_memo_entry *e, bool forget);
/* Keep r (every header on it already; the caller's reference is taken, or dropped when it is not
 * kept: larger than an eighth of the bound, or out of memory). Least recently used entries go first. */
void srv_memo_keep(srv_memo *m, const char *key, size_t klen, const void *proof, size_t plen,
                   struct MHD_Response *r, unsigned status, uint64_t body_bytes);
void srv_memo_stats(srv_memo *m, size_t *bytes, size_t *entries, uint64_t *hits, uint64_t *misses);
/* The bytes the server's memo may hold. */
#define HK_SRV_MEMO_BYTES (16u << 20)

/* ---- http_auth.c ---------------------------------------------------------------------------- */
typedef enum { AUTH_OK, AUTH_MISSING, AUTH_INVALID } auth_result;

/* "TOKEN", "TOKEN:org1,org2/name" (scopes: namespaces or single repos), and either with ":write"
 * after (":" alone for every repo: "TOKEN::write") → t (freed with srv_token_spec_free, also after
 * a failure). Scopes must be valid ids. */
int srv_token_spec_parse(token_spec *t, const char *spec);
void srv_token_spec_free(token_spec *t);
/* The request's bearer token among the configured ones; AUTH_OK with *who NULL when none is needed. */
auth_result srv_check_token(srv_server *srv, struct MHD_Connection *c, const token_spec **who);
/* May `who` see the repo? The whole checked id is compared with each scope, case-insensitively as the
 * Hub compares ids: a namespace scope grants "ns/anything", a repo scope that repo only. */
bool srv_token_allows(const token_spec *who, const repo_ref *repo);
/* May `who` write (benchmark uploads) to the repo? Needs a write token whose scope allows it. */
bool srv_token_may_write(const token_spec *who, const repo_ref *repo);
/* May `who` see namespace `ns` at all? */
bool srv_token_allows_namespace(const token_spec *who, const char *ns);

/* ---- http_route.c --------------------------------------------------------------------------- */
/* The access handler's work once the request (body included) is in. */
enum MHD_Result srv_dispatch(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *url,
                                const char *method);
bool srv_seg_is(const seglist *s, size_t i, const char *lit);
/* A copy of the decoded segment i (NULL when out of memory). */
char *srv_seg_decode(const seglist *s, size_t i);
/* Revisions and file paths are checked by the project's one rule for each (util/text.h:
 * hk__revision_valid, hk__repo_path_valid; "" is the repo root for a path). */
/* Segments [from, n) '/'-joined into a checked path (hk__repo_path_valid); NULL and *bad if not. */
char *srv_join_path(const seglist *s, size_t from, bool *bad);
/* Decoded segments [at, at + k) '/'-joined (unchecked; NULL when out of memory). */
char *srv_join_decoded(const seglist *s, size_t at, size_t k);
/* A repo id at segment `at` ("org/name" or "name"; `keywords` end a one-part id). REPO_INVALID: the
 * id is not one the Hub could have (answer 400, never look it up anywhere); REPO_NONE: no id there. */
repo_parse srv_parse_repo(repo_ref *out, srv_server *srv, const seglist *s, size_t at, hk_repo_type type,
                             const char *const *keywords);
void srv_repo_ref_free(repo_ref *r);
/* The revision in segments from `at` (one segment, or a raw "refs/pr/1" over several; all the rest
 * when rest_is_rev); *used = segments taken; *rev_out = the revision text, also on failure.
 * HK_ERR_INVALID_ARG when the revision is not a valid name (answer srv_rev_invalid). */
int srv_resolve_rev_segs(char commit[65], char **rev_out, size_t *used, srv_store *store, const repo_ref *repo,
                         const seglist *s, size_t at, bool rest_is_rev);
/* With --upstream: the revision at `at` (all the rest when rest_is_rev) checked, then brought into
 * the store (srv_up_prepare). false = go on; true = answered (*ret): 400 for a name that is not a
 * valid revision (never sent upstream), or the upstream's refusal. */
bool srv_route_up(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                     size_t at, bool rest_is_rev, enum MHD_Result *ret);
/* srv_route_up, then the store's resolution (srv_resolve_rev_segs) with its answers: 404 for no repo
 * folder or no such revision, 400 for an invalid one. When the store cannot resolve what the step
 * passed on a kept verdict, the step is taken again by the file system (srv_route_retake) and the
 * store asked once more. false = resolved (commit, *rev, *used); true = answered (*ret). */
bool srv_route_rev(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                   size_t at, bool rest_is_rev, char commit[65], char **rev, size_t *used, enum MHD_Result *ret);
/* The store lacks something the revision step passed on a kept verdict (ctx->rev_kept), without
 * looking at the store: the verdict dropped and the step taken again by the file system, the
 * revision of srv_route_up (srv_route_retake) or rev (srv_up_retake). 0: no verdict was used (the
 * store's word stands); 1: the step answered (*ret); 2: go on (ask the store again). */
int srv_route_retake(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const seglist *s,
                     size_t at, bool rest_is_rev, enum MHD_Result *ret);
int srv_up_retake(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const char *rev,
                  enum MHD_Result *ret);

/* ---- http_range.c --------------------------------------------------------------------------- */
/* Headers every file answer carries: X-Repo-Commit, ETag, Accept-Ranges, X-Linked-* for LFS. */
void srv_add_file_headers(struct MHD_Response *r, const srv_sfile *f, const char *commit);
/* Parse a single "bytes=a-b" / "bytes=a-" / "bytes=-n" range. 0: no usable Range (serve 200),
 * 1: range in *start,*len, -1: unsatisfiable (416). */
int srv_parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len);
/* A file answer the memo may keep: its key and the proof taken when the file was opened. */
typedef struct srv_file_memo {
    const char *key;
    size_t klen;
    srv_file_proof proof;
} srv_file_memo;
/* The proof bytes kept with a file answer (http_file.c checks them before reusing it). */
typedef struct srv_kept_file {
    srv_file_proof proof;
    char etag[65];
} srv_kept_file;
/* Answer an opened file: 304, 416, 206 or 200 (takes ownership of f->fd). With fm (NULL: none), a
 * full 200 GET sent from memory whose proof is settled is kept in srv->memo under fm->key. */
enum MHD_Result srv_serve_file(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                  srv_sfile *f, const char *commit, const srv_file_memo *fm);

/* ---- http_file.c ---------------------------------------------------------------------------- */
/* /[datasets/|spaces/|kernels/]{repo}/resolve/{rev}/{path} */
enum MHD_Result srv_handle_resolve(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                      const seglist *s, const token_spec *who);
/* /lfs/T/{repo}/{sha256}?commit=&sig= */
enum MHD_Result srv_handle_lfs(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                                  const seglist *s);

/* ---- http_api.c ----------------------------------------------------------------------------- */
/* One tree / paths-info entry as the Hub writes it. */
void srv_json_entry(hk_strbuf *sb, const srv_sentry *e);
enum MHD_Result srv_handle_repo_info(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx,
                                        const repo_ref *repo, const char *commit);
enum MHD_Result srv_handle_tree(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo,
                                   const char *commit, const char *path);
/* memo: where the answer is kept (NULL: not kept, as on the edge) */
enum MHD_Result srv_handle_refs(struct MHD_Connection *c, req_ctx *ctx, const repo_ref *repo, srv_memo *memo);
/* Is the namespace of repo_id a trusted kernel publisher, as this mirror's overview would say? The
 * refs answer then carries X-Kernel-Publisher-Trusted: true (the client skips its overview request). */
bool srv_repo_publisher_trusted(srv_server *srv, const char *repo_id);
/* /api/organizations/{org}/overview; a namespace outside the token's scope answers as unknown. */
enum MHD_Result srv_handle_org(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const seglist *s,
                                  const token_spec *who);

/* ---- http_paths.c --------------------------------------------------------------------------- */
enum MHD_Result srv_handle_paths_info(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx,
                                         const repo_ref *repo, const char *commit);

/* ---- http_benchmarks.c --------------------------------------------------------------------- */
/* POST /api/kernels/.../benchmarks (answered with its own 401 when no token was sent). */
bool srv_is_bench_post(const seglist *s, const char *method);
/* /api/kernels/{repo}/benchmarks: POST stores a submission, GET/HEAD lists them (?limit=&cursor=). */
enum MHD_Result srv_handle_benchmarks(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx,
                                         const repo_ref *repo, const char *method, const token_spec *who);

/* ---- http_metrics.c ------------------------------------------------------------------------- */
/* GET /metrics: the counters, the answer memo's use and, on an edge, the upstream side. */
enum MHD_Result srv_handle_metrics(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx);

/* ---- http_upstream.c ------------------------------------------------------------------------ */
/* With --upstream: bring the checked revision `rev` (srv_rev_valid; the router checks it) of repo
 * into the store before the store resolves it. false = go on; true = answered (*ret). */
bool srv_up_prepare(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, repo_ref *repo, const char *rev,
                       enum MHD_Result *ret);
/* Answer an upstream refusal (404 / 429 / 502 / 503, Retry-After when known). */
enum MHD_Result srv_send_up_answer(struct MHD_Connection *c, req_ctx *ctx, const up_answer *a, const char *commit);
/* The marks of one request combined: stale beats miss beats coalesced beats hit. */
void srv_note_mark(req_ctx *ctx, up_mark m);
/* refs / organization overview from upstream (JSON passed through). */
/* refs_of: the repo of a refs request, answered from the store when upstream cannot answer. */
enum MHD_Result srv_up_json(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx, const char *path_query,
                               const repo_ref *refs_of);
/* Around each request with --upstream: whose request this thread answers (srv_up_client_set), and
 * its upstream steps (*r, made on the first). srv_up_end: true when the dispatch recorded a step to submit. */
void srv_up_begin(srv_server *srv, struct MHD_Connection *c, const char *client, up_req **r);
bool srv_up_end(void);

/* ---- http_client.c -------------------------------------------------------------------------- */
/* "ADDR" or "ADDR/PREFIX" (IPv4 or IPv6) each → *out (free()), NULL when n is 0. */
int srv_proxy_nets_parse(srv_proxy_net **out, const char *const *specs, size_t n);
/* Is the connection's peer a trusted proxy? */
bool srv_peer_is_proxy(const srv_server *srv, struct MHD_Connection *c);
/* The request's client address as text: from a trusted proxy, the right-most X-Forwarded-For (else
 * Forwarded for=) address that is not itself a trusted proxy; otherwise the peer. Returns whether
 * the peer is a trusted proxy. */
bool srv_request_client(char *out, size_t cap, const srv_server *srv, struct MHD_Connection *c);
/* The same address kept binary (no inet_ntop per request); srv_client_addr_text formats it when a
 * log line or a per-address key needs it. */
bool srv_request_client_addr(srv_client_addr *out, const srv_server *srv, struct MHD_Connection *c);
void srv_client_addr_text(char *out, size_t cap, const srv_client_addr *a);
/* Counts per address under a limit (> 0): acquire takes one unless `key` holds `limit` already. */
int srv_addr_count_new(srv_addr_count **out, unsigned limit);
void srv_addr_count_free(srv_addr_count *t);
bool srv_addr_acquire(srv_addr_count *t, const char *key);
void srv_addr_release(srv_addr_count *t, const char *key);

/* ---- http_guard.c --------------------------------------------------------------------------- */
/* Start the watchdog that closes connections whose request headers take longer than timeout_s. With
 * srv->per_ip, a connection from an address (not a trusted proxy) that holds the limit already is
 * closed at once. */
int srv_conn_guard_start(srv_conn_guard **out, unsigned timeout_s, const srv_server *srv);
/* Stop and free it (after MHD_stop_daemon). NULL is ignored. */
void srv_conn_guard_stop(srv_conn_guard *g);
/* MHD_OPTION_NOTIFY_CONNECTION callback (cls = the guard): tracks connections from accept to close. */
void srv_conn_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);
/* The request's headers are in (first access-handler call): its deadline no longer applies. */
void srv_conn_guard_headers_done(struct MHD_Connection *c);
/* A request finished: the connection now waits for the next request's headers, deadline restarts. */
void srv_conn_guard_request_done(struct MHD_Connection *c);

/* ---- http_fault.c (HK_TEST_HOOKS only) ------------------------------------------------------ */
#ifdef HK_TEST_HOOKS
void srv_fault_init(srv_fault *f, const srv_config *cfg);
/* For a body of `len` bytes from `start` of fd: when this response is one to cut, *out is a response
 * that ends after the configured byte count (fd owned by it, or closed when that fails) and true is
 * returned; false leaves fd alone. */
bool srv_fault_cut(struct MHD_Response **out, srv_fault *f, bool is_get, int fd, uint64_t start,
                      uint64_t len);
#endif

#endif
