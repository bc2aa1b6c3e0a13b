/* Internals of the Hub client (libhub/src/client). Not installed. */
#ifndef HK_CLIENT_INTERNAL_H
#define HK_CLIENT_INTERNAL_H

#include "hubkern/hub.h"
#include "internal.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

struct hk_hub {
    char *endpoint;       /* no trailing '/' */
    char *token;          /* NULL: none. Never logged. */
    char *cache_root;     /* absolute */
    bool offline;
    char *user_agent;     /* NULL: send none */
    int max_parallel;
    long etag_timeout_ms;
    long download_timeout_ms;
    int max_retries;
    long retry_base_ms;   /* HUBKERN_RETRY_BASE_MS, default 1000: scales every back-off delay */
    hk_progress_fn progress;
    void *progress_ud;
    CURL *api;            /* reused for API requests (keeps the connection alive) */
    uint64_t requests;    /* HTTP requests sent by this handle (API + files) */
};

/* Response headers that the client reads. Reset at every status line (redirects, 100s). */
typedef struct hk_http_headers {
    char *x_repo_commit;
    char *etag;
    char *x_linked_etag;
    char *location;
    char *link;
    char *retry_after;
    char *ratelimit;
    char *x_error_code;
    char *x_error_message;
    char *content_range;
    int64_t content_length; /* -1 when absent */
    int64_t x_linked_size;  /* -1 when absent */
} hk_http_headers;

void hk_http_headers_init(hk_http_headers *h);
void hk_http_headers_free(hk_http_headers *h);
/* Feed one raw header line (as libcurl's header callback gives it). */
void hk_http_headers_feed(hk_http_headers *h, const char *line, size_t len);

typedef struct hk_http_resp {
    long status;
    hk_http_headers h;
    hk_strbuf body;
    char *url; /* final URL after redirects */
} hk_http_resp;

void hk_http_resp_free(hk_http_resp *r);

/* GET an API URL: follows redirects by hand (Authorization only to the endpoint's origin),
 * retries connection errors, timeouts, 408/429/5xx with back-off. HK_OK whenever a final HTTP
 * answer arrived (any status): the caller classifies it with hk_http_fail(). */
int hk_http_get(hk_http_resp *out, hk_hub *hub, const char *url, size_t max_body);

/* Turn a non-2xx answer into an hk_fail() with the right code (X-Error-Code first, then status).
 * `what` names the request ("listing build/ of org/x at <sha>"). */
int hk_http_fail(const hk_http_resp *r, const char *what);

/* Configure an easy handle for a request to url (UA, auth when same origin as the endpoint,
 * timeouts, TLS/proxy from the environment, HTTP/2 over TLS). *hdrs receives the header list to
 * free after the transfer. */
int hk_http_setup(CURL *e, struct curl_slist **hdrs, hk_hub *hub, const char *url, bool download);

/* A TLS failure that retrying cannot fix: the peer's certificate (chain, name, pinned key, status)
 * does not verify, or the CA bundle / CRL file cannot be used. */
bool hk_curl_tls_fatal(CURLcode cc);
/* hk_fail() for a transfer that ended with curl error cc (not CURLE_OK): HK_ERR_TIMEOUT for a
 * timeout, else HK_ERR_NETWORK with a message naming the cause (TLS certificate rejected: set
 * SSL_CERT_FILE / CURL_CA_BUNDLE; unusable CA bundle; TLS handshake; unreachable). `what` (or NULL)
 * starts the message; detail is libcurl's CURLOPT_ERRORBUFFER text (may be NULL or empty). */
int hk_net_fail(CURLcode cc, const char *what, const char *url, const char *detail);

/* Same scheme, host and port (case-insensitive host; default ports made explicit). */
bool hk_url_same_origin(const char *a, const char *b);
/* Resolve a (possibly relative) reference against base, RFC 3986 style. Caller frees. */
char *hk_url_resolve(const char *base, const char *ref);
/* Replace the origin of url by the endpoint's (Link headers may name huggingface.co). */
char *hk_url_rebase(const char *url, const char *endpoint);
/* Percent-encode: keep unreserved characters (and '/' when keep_slash). Caller frees. */
char *hk_url_encode(const char *s, bool keep_slash);
/* rel="next" target of a Link header, or NULL. Caller frees. */
char *hk_link_next(const char *link);
/* Python's etag rule: strip leading 'W' and '/' characters, then '"' at both ends. Caller frees. */
char *hk_etag_normalize(const char *etag);
/* Back-off before retry number `attempt` (0-based) of a request that got `status` and headers h
 * (h may be NULL): Retry-After / RateLimit for 429, else 1,2,4,8,8 x base. */
long hk_retry_delay_ms(const hk_hub *hub, int attempt, long status, const hk_http_headers *h);
/* Is this status retried (408, 429, 500, 502, 503, 504)? */
bool hk_http_status_transient(long status);
uint64_t hk_now_ms(void);
void hk_sleep_ms(long ms);

/* ---- downloads (download.c) ---------------------------------------------------------------- */
typedef struct hk_dl_item {
    char *etag;        /* blob name: sha256 (64 hex) or git blob sha1 (40 hex) */
    uint64_t size;
    char **paths;      /* repo paths that point to this blob */
    size_t npaths;
    bool downloaded;   /* out: fetched by this call (false: was cached or fetched by another process) */
} hk_dl_item;

typedef struct hk_dl_stats {
    uint64_t bytes_downloaded;
    uint64_t bytes_verified;
    size_t files_downloaded;
} hk_dl_stats;

int hk_download_blobs(hk_dl_stats *stats, hk_hub *hub, const char *repo_id, const char *repo_dir,
                      const char *commit, hk_dl_item *items, size_t n);

/* One file of a kernel repo at a commit (path "build/<variant>/metadata.json"), as hf_hub_download
 * would fetch it: when its snapshot link resolves it is used as it is (no network); else, online,
 * its directory is listed (one level), its blob downloaded and checked against the listed hash,
 * and the snapshot link made; nothing else of the directory is fetched. Offline and absent:
 * HK_ERR_OFFLINE. *out_path (the snapshot path) is freed with hk_free. */
int hk_hub_fetch_file(char **out_path, hk_hub *hub, const char *repo_id, const char *commit, const char *path);

/* The metadata.json digest check and verification receipts are the cache layer's (cache/cache.h). */

#endif
