/* The mirror server and publisher (hubkern serve / hubkern publish).
 *
 * hubkern_server is a static library kept out of libhubkern so that programs that only load kernels
 * never link an HTTP server. Same conventions as libhubkern: int return codes from hk_error, the
 * last error per thread (hk_last_error), messages through the log callback, never printing. */
#ifndef HK_SERVER_H
#define HK_SERVER_H

#include "hubkern/cache.h"
#include "hubkern/sys/cache.h" /* the mirror writes its store: refs, links, CACHEDIR.TAG */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Files of at least this many bytes are stored as LFS files (sha256 etag) by publish; the Hub's
 * own threshold for its web uploads is 10 MB (10 * 1000 * 1000 bytes). */
#define HK_LFS_THRESHOLD_DEFAULT 10000000ULL
/* Tree listing page size (entries per page) unless configured. The Hub pages at 1000 per page for
 * expand=false listings [inferred]. */
#define HK_TREE_PAGE_SIZE_DEFAULT 1000 /* plain: also printed in hubkern serve --help */

/* Defaults of the connection limits against slow clients (see srv_config). */
/* 0: no per-address limit by default. Behind a reverse proxy every client has the proxy's address,
 * so a default limit refused them (issue 25); the header deadline and --max-connections still
 * bound what slow clients can hold. */
#define HK_SERVE_PER_IP_DEFAULT 0
#define HK_SERVE_HEADER_TIMEOUT_DEFAULT 10 /* plain: also printed in hubkern serve --help */
/* Pull-through defaults: how long a branch/tag → commit answer from upstream is trusted, and how long
 * an upstream 404/410 is remembered (seconds). */
#define HK_SERVE_REVISION_TTL_DEFAULT 60 /* plain: also printed in hubkern serve --help */
#define HK_SERVE_NEGATIVE_TTL_DEFAULT 10 /* plain: also printed in hubkern serve --help */
/* Largest benchmark submission (POST /api/kernels/{repo}/benchmarks) accepted, bytes, and the most
 * that benchmark_max_bytes may ask for. */
#define HK_SERVE_BENCHMARK_MAX_DEFAULT 1048576 /* plain: also printed in hubkern serve --help */
#define HK_SERVE_BENCHMARK_MAX_LIMIT (64ull << 20)
/* Tree-listing page size of a mirror without public_url and without page_size (Links it writes are
 * relative, which huggingface_hub cannot follow, so it pages only past this many entries). */
#define HK_SERVE_UNPAGED_MAX 100000
/* Per-repo quota of stored benchmark submissions: past either bound the oldest are evicted. */
#define HK_SERVE_BENCHMARK_QUOTA_COUNT_DEFAULT 1000 /* plain: also printed in hubkern serve --help */
#define HK_SERVE_BENCHMARK_QUOTA_BYTES_DEFAULT 67108864 /* 64 MiB; plain: printed in --help */
#define HK_SERVE_UPSTREAM_TRANSFERS_DEFAULT 16
#define HK_SERVE_UPSTREAM_QUEUE_DEFAULT 256
#define HK_SERVE_UPSTREAM_TIMEOUT_DEFAULT 30 /* seconds without a byte from an upstream (connect: at most 10) */
/* Against a hostile or dripping upstream and greedy clients of a pull-through tier: */
#define HK_SERVE_UPSTREAM_DEADLINE_DEFAULT 300 /* plain: also printed in hubkern serve --help */
#define HK_SERVE_UPSTREAM_MIN_RATE 65536       /* bytes/s a transfer must average past its deadline */
#define HK_SERVE_UPSTREAM_MEMO_DEFAULT (64ull << 20)
#define HK_SERVE_CLIENT_MISSES_DEFAULT 600 /* plain: also printed in hubkern serve --help */
#define HK_SERVE_CLIENT_WINDOW_DEFAULT 60  /* plain: also printed in hubkern serve --help */
#define HK_SERVE_MAX_BACKOFF_DEFAULT 60    /* plain: also printed in hubkern serve --help */
#define HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT 5 /* plain: also printed in hubkern serve --help */

/* ---- serve -------------------------------------------------------------------------------- */
typedef struct srv_config {
    const char *cache_dir;       /* the store: a huggingface_hub-layout cache directory (required) */
    const char *host;            /* address to bind, default "127.0.0.1" ("0.0.0.0" / "::" for all) */
    unsigned port;               /* 0 = an ephemeral port, see srv_port() */
    unsigned threads;            /* worker threads (libmicrohttpd thread pool), default 4 */
    unsigned max_connections;    /* simultaneous connections, default 1024 */
    /* Against clients that hold connections open (slowloris): at most this many simultaneous
     * connections from one client address (default 0: no limit), and a deadline in seconds for receiving a
     * request's headers, counted from accept or from the end of the previous answer on a
     * keep-alive connection (default 10; an idle keep-alive connection is closed after it too). */
    unsigned max_connections_per_ip;
    unsigned header_timeout;
    /* Reverse proxies ("ADDR" or "ADDR/PREFIX", IPv4 or IPv6) whose X-Forwarded-For (else Forwarded)
     * names the client: only on their connections is the client the right-most forwarded address
     * that is not itself a trusted proxy; the access log, the per-address limit (counting that
     * client's requests in flight) and the upstream miss budget are keyed on it. Anyone else's
     * forwarding headers are ignored. */
    const char *const *trusted_proxies;
    size_t n_trusted_proxies;
    unsigned page_size;          /* tree listing entries per page, default HK_TREE_PAGE_SIZE_DEFAULT with
                                    public_url, HK_SERVE_UNPAGED_MAX without */
    const char *public_url;      /* base URL (http:// or https://) written into Link headers and
                                    --lfs-302 redirects (e.g. behind a TLS proxy); without it they are
                                    relative, never built from the request's Host header */
    /* Access control. With no tokens every request is served. Otherwise each request needs
     * "Authorization: Bearer <token>" with a configured token. A token spec is "TOKEN" (all repos)
     * or "TOKEN:org1,org2/name" (only repos of those namespaces, or those repos; others get 403),
     * read-only; ":write" after it ("TOKEN::write", "TOKEN:org1:write") also allows benchmark
     * uploads. */
    const char *const *tokens;
    size_t n_tokens;
    /* Namespaces answered with "trustedKernelPublisher": true by /api/organizations/<org>/overview;
     * "*" trusts every namespace present in the store. */
    const char *const *trusted_orgs;
    size_t n_trusted_orgs;
    /* Blobs whose name is not a 40/64-hex etag (caches written without symlinks, or by mirrors that
     * invent etags) are hashed on first use; files this large or binary get a sha256 (LFS) etag. */
    uint64_t lfs_threshold;      /* 0 = HK_LFS_THRESHOLD_DEFAULT */
    /* Answer resolves of LFS files with a 302 to the mirror's own /lfs/ blob route (metadata headers
     * on the 302 itself, like the Hub's CDN redirects), instead of a direct 200. */
    bool lfs_302;
    bool access_log;             /* one INFO log line per request through the log callback */
    /* Pull-through (docs/serve.md, "Pull-through tiers"): what the store cannot answer is fetched from
     * the first of these base URLs that answers (another hubkern mirror or the Hub), verified and
     * kept. upstream_token is sent only to the origins of these URLs and never logged. */
    const char *const *upstreams;
    size_t n_upstreams;
    const char *upstream_token;
    unsigned upstream_timeout;   /* 0 = HK_SERVE_UPSTREAM_TIMEOUT_DEFAULT: an upstream that sends nothing for this long is given up */
    unsigned revision_ttl;       /* 0 = HK_SERVE_REVISION_TTL_DEFAULT; also the max-age of branch-addressed answers */
    unsigned negative_ttl;       /* 0 = HK_SERVE_NEGATIVE_TTL_DEFAULT */
    /* 0 = HK_SERVE_UPSTREAM_DEADLINE_DEFAULT: an upstream transfer (and a wait for one) that has run
     * this long is given up unless it averages HK_SERVE_UPSTREAM_MIN_RATE */
    unsigned upstream_deadline;
    uint64_t upstream_memo_bytes; /* 0 = HK_SERVE_UPSTREAM_MEMO_DEFAULT: bytes of pass-through answers kept (LRU) */
    /* Upstream misses one client (its token when the mirror has tokens, else its address) may cause
     * per window; more get 429. 0 = HK_SERVE_CLIENT_MISSES_DEFAULT / HK_SERVE_CLIENT_WINDOW_DEFAULT. */
    unsigned client_miss_budget;
    unsigned client_miss_window;
    unsigned upstream_max_backoff; /* 0 = HK_SERVE_MAX_BACKOFF_DEFAULT: most of an upstream's Retry-After honoured */
    /* 0 = HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT: the Retry-After (seconds) of the 503 a client gets when
     * its upstream step cannot be done now (upstream unavailable, a transfer or wait given up) */
    unsigned upstream_retry_after;
    /* Misses run on this many transfer threads of the server's own (0 = HK_SERVE_UPSTREAM_TRANSFERS_DEFAULT),
     * their connections suspended meanwhile; at most upstream_queue distinct misses are in flight
     * (running or waiting for a thread; 0 = HK_SERVE_UPSTREAM_QUEUE_DEFAULT), one more gets 503 with
     * Retry-After. A request for a file already in flight joins it. */
    unsigned upstream_transfers;
    unsigned upstream_queue;
    /* Benchmark submissions (docs/serve.md, "Benchmarks"): bodies larger than this are refused with
     * 413. 0 = HK_SERVE_BENCHMARK_MAX_DEFAULT; at most HK_SERVE_BENCHMARK_MAX_LIMIT. */
    uint64_t benchmark_max_bytes;
    /* Per repo: at most this many submissions and bytes are kept; a new one evicts the oldest past
     * either bound. 0 = the defaults; bytes must be at least benchmark_max_bytes. */
    uint64_t benchmark_quota_count, benchmark_quota_bytes;
#ifdef HK_TEST_HOOKS
    /* Test builds only (HK_TEST_HOOKS): the first `fault_cut_count` GET responses whose body is
     * longer than `fault_cut_after` bytes are cut (connection closed) after that many bytes. 0 = off.
     * The struct is not installed; every target of a build sees the same HK_TEST_HOOKS. */
    uint64_t fault_cut_after;
    unsigned fault_cut_count;
    /* The racy window of kept answers (store_refs.c, 2 s) and the shared listing's TTL (store.c, 5 s),
     * in ms: shorter, so that tests of what is kept need not wait out the real ones. 0 = the real one. */
    unsigned racy_window_ms, listing_ttl_ms;
#endif
} srv_config;

typedef struct srv_server srv_server;

/* Bind, start the worker threads and return. Requests are served until srv_stop(). */
int srv_start(srv_server **out, const srv_config *config);
/* The TCP port actually bound (useful with port 0). */
unsigned srv_port(const srv_server *server);
/* Stop accepting, finish, free. NULL is ignored. */
void srv_stop(srv_server *server);

/* ---- publish ------------------------------------------------------------------------------ */
typedef struct srv_publish_options {
    const char *src_dir;     /* directory to record; it becomes the repo root */
    const char *repo_id;     /* "org/name" */
    hk_repo_type repo_type;  /* HK_REPO_KERNEL unless set */
    const char *branch;      /* branch to move, e.g. "v1" or "main" (required) */
    const char *message;     /* commit message, default "Publish <branch>" */
    const char *cache_dir;   /* store root; NULL = the default cache (hk_cache_root) */
    uint64_t lfs_threshold;  /* 0 = HK_LFS_THRESHOLD_DEFAULT */
} srv_publish_options;

typedef struct srv_publish_result {
    char commit[41];         /* the branch's commit after publishing */
    char parent[41];         /* previous head of the branch, "" if the branch is new */
    bool changed;            /* false when the tree equals the branch head's tree (nothing written) */
    size_t files;            /* files recorded */
    size_t lfs_files;        /* of which stored as LFS (sha256 etag) */
    uint64_t bytes;          /* total content bytes */
} srv_publish_result;

/* Record src_dir as a new commit on `branch` (see docs/serve.md for the exact rules). */
int srv_publish(srv_publish_result *out, const srv_publish_options *options);

#ifdef __cplusplus
}
#endif
#endif
