/* HTTP plumbing of the Hub client (http.c): response headers, one API GET with redirects by hand
 * and retries, request setup, error classification, back-off. Internal. */
#ifndef HK_CLIENT_HTTP_H
#define HK_CLIENT_HTTP_H

#include "hubkern/hub.h"
#include "internal.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

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
    char *x_publisher_trusted; /* X-Kernel-Publisher-Trusted (a hubkern mirror's refs answer) */
    int64_t content_length; /* -1 when absent */
    int64_t x_linked_size;  /* -1 when absent */
} hk_http_headers;

void hk__http_headers_init(hk_http_headers *h);
void hk__http_headers_free(hk_http_headers *h);
/* Feed one raw header line (as libcurl's header callback gives it). */
void hk__http_headers_feed(hk_http_headers *h, const char *line, size_t len);

typedef struct hk_http_resp {
    long status;
    hk_http_headers h;
    hk_strbuf body;
    char *url; /* final URL after redirects */
    const char *token_source; /* where the token sent came from (the hub's; NULL: none sent), for a 401's message */
} hk_http_resp;

void hk__http_resp_free(hk_http_resp *r);

/* GET an API URL: follows redirects by hand (Authorization only to the endpoint's origin),
 * retries connection errors, timeouts, 408/429/5xx with back-off. HK_OK whenever a final HTTP
 * answer arrived (any status): the caller classifies it with hk__http_fail(). */
int hk__http_get(hk_http_resp *out, hk_hub *hub, const char *url, size_t max_body);

/* Turn a non-2xx answer into an hk__fail() with the right code (X-Error-Code first, then status).
 * `what` names the request ("listing build/ of org/x at <sha>"). */
int hk__http_fail(const hk_http_resp *r, const char *what);

/* Configure an easy handle for a request to url (UA, auth when same origin as the endpoint,
 * timeouts, TLS/proxy from the environment, HTTP/2 over TLS). *hdrs receives the header list to
 * free after the transfer. */
int hk__http_setup(CURL *e, struct curl_slist **hdrs, hk_hub *hub, const char *url, bool download);

/* A TLS failure that retrying cannot fix: the peer's certificate (chain, name, pinned key, status)
 * does not verify, or the CA bundle / CRL file cannot be used. */
bool hk__curl_tls_fatal(CURLcode cc);
/* hk__fail() for a transfer that ended with curl error cc (not CURLE_OK): HK_ERR_TIMEOUT for a
 * timeout, else HK_ERR_NETWORK with a message naming the cause (TLS certificate rejected: set
 * SSL_CERT_FILE / CURL_CA_BUNDLE; unusable CA bundle; TLS handshake; unreachable). `what` (or NULL)
 * starts the message; detail is libcurl's CURLOPT_ERRORBUFFER text (may be NULL or empty). */
int hk__net_fail(CURLcode cc, const char *what, const char *url, const char *detail);

/* Back-off before retry number `attempt` (0-based) of a request that got `status` and headers h
 * (h may be NULL): Retry-After / RateLimit for 429, else 1,2,4,8,8 x base. */
long hk__retry_delay_ms(const hk_hub *hub, int attempt, long status, const hk_http_headers *h);
/* Is this status retried (408, 429, 500, 502, 503, 504)? */
bool hk__http_status_transient(long status);

/* ---- quick failure on an unreachable endpoint ---- */
/* Retries after a refused connection or an unknown host: few and quick (the patient back-off is
 * for 429/503/cuts/timeouts), so that a wrong endpoint fails within about a second. */
#define HK_CONNECT_RETRIES 2
/* Could not connect at all: refused, unreachable, unknown host or proxy. */
bool hk__curl_connect_failed(CURLcode cc);
/* Delay before quick retry n (0-based): n+1 quarters of HUBKERN_RETRY_BASE_MS (250, 500 ms). */
long hk__connect_retry_delay_ms(const hk_hub *hub, int n);
/* "connection refused", "unknown host", ... from the curl code and CURLINFO_OS_ERRNO. */
const char *hk__connect_cause(CURLcode cc, long os_errno);
/* HK_ERR_NETWORK naming the endpoint, the cause, the attempts and what to check (HF_ENDPOINT,
 * network, proxy). what (or NULL) starts the message. */
int hk__connect_fail(const hk_hub *hub, CURLcode cc, long os_errno, const char *what, const char *url,
                     const char *detail, int attempts);

/* ---- deadlines ---- */
/* Start the pull deadline of hub (pull_timeout_ms from now) unless one runs already; returns
 * whether it was started here (then pass true to hk__pull_deadline_end). */
bool hk__pull_deadline_begin(hk_hub *hub);
void hk__pull_deadline_end(hk_hub *hub, bool started);

/* A curl result that means "a response header line or the header block was too large" (libcurl
 * reports it as out of memory before 8.6; headers_seen: the response had begun): answered as such
 * (hk__header_too_large_fail: HK_ERR_PROTOCOL), never retried. */
bool hk__curl_header_too_large(CURLcode cc, bool headers_seen);
/* Is libcurl version_num (curl_version_info's) older than 8.14.1, the first version this project's
 * fuzzing found clean of a use-after-free on folded response header lines (7.88.1 has it:
 * tests/fuzz/README.md)? Then an online hub warns once per process (hk__curl_warn_if_old). */
bool hk__curl_folded_header_risk(unsigned version_num);
void hk__curl_warn_if_old(void);
int hk__header_too_large_fail(const char *what, const char *url, const char *detail);

#endif
