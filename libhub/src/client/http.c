/* HTTP plumbing of the Hub client: request setup, header capture, redirects by hand (the token
 * only ever goes to the endpoint's own origin), retries with back-off and error classification. */
#include "client/client.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- headers -------------------------------------------------------------------------------- */
void hk__http_headers_init(hk_http_headers *h) {
    memset(h, 0, sizeof *h);
    h->content_length = -1;
    h->x_linked_size = -1;
}

void hk__http_headers_free(hk_http_headers *h) {
    char **fields[] = {&h->x_repo_commit, &h->etag, &h->x_linked_etag, &h->location, &h->link,
                       &h->retry_after, &h->ratelimit, &h->x_error_code, &h->x_error_message,
                       &h->content_range, &h->x_publisher_trusted};
    for (size_t i = 0; i < HK_ARRAY_LEN(fields); i++) {
        free(*fields[i]);
        *fields[i] = NULL;
    }
    h->content_length = -1;
    h->x_linked_size = -1;
}

static int64_t parse_i64(const char *s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    return (int64_t)v;
}

void hk__http_headers_feed(hk_http_headers *h, const char *line, size_t len) {
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) { /* a new response begins */
        hk__http_headers_free(h);
        return;
    }
    const char *colon = memchr(line, ':', len);
    if (!colon) return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
    char *value = hk__strndup(v, (size_t)(end - v));
    if (!value) return;
    struct {
        const char *name;
        char **slot;
    } map[] = {{"x-repo-commit", &h->x_repo_commit}, {"etag", &h->etag},
               {"x-linked-etag", &h->x_linked_etag}, {"location", &h->location},
               {"link", &h->link}, {"retry-after", &h->retry_after},
               {"ratelimit", &h->ratelimit}, {"x-error-code", &h->x_error_code},
               {"x-error-message", &h->x_error_message}, {"content-range", &h->content_range},
               {"x-kernel-publisher-trusted", &h->x_publisher_trusted}};
    for (size_t i = 0; i < HK_ARRAY_LEN(map); i++) {
        if (strlen(map[i].name) == nlen && strncasecmp(line, map[i].name, nlen) == 0) {
            if (*map[i].slot && map[i].slot == &h->link) { /* several Link headers: join */
                char *joined = hk__asprintf("%s, %s", *map[i].slot, value);
                free(value);
                value = joined;
            }
            free(*map[i].slot);
            *map[i].slot = value;
            return;
        }
    }
    if (nlen == 14 && strncasecmp(line, "content-length", 14) == 0) h->content_length = parse_i64(value);
    else if (nlen == 13 && strncasecmp(line, "x-linked-size", 13) == 0) h->x_linked_size = parse_i64(value);
    else if (nlen == 12 && strncasecmp(line, "x-hf-warning", 12) == 0) hk__log(HK_LOG_WARN, "Hub: %s", value);
    free(value);
}

void hk__http_resp_free(hk_http_resp *r) {
    hk__http_headers_free(&r->h);
    hk__sb_free(&r->body);
    free(r->url);
    memset(r, 0, sizeof *r);
}

bool hk__http_status_transient(long status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
           status == 504;
}

static long ratelimit_field(const char *rl, char key) {
    /* "resolvers";r=0;t=12 */
    for (const char *p = rl; p && *p; p++) {
        if (*p == ';' && p[1] == key && p[2] == '=') return strtol(p + 3, NULL, 10);
    }
    return -1;
}

long hk__retry_delay_ms(const hk_hub *hub, int attempt, long status, const hk_http_headers *h) {
    long base = hub->retry_base_ms;
    if (status == 429 && h) {
        if (h->ratelimit && ratelimit_field(h->ratelimit, 'r') == 0) {
            long t = ratelimit_field(h->ratelimit, 't');
            if (t >= 0) return (t > 300 ? 300 : t) * base + base;
        }
        if (h->retry_after) {
            char *end;
            long s = strtol(h->retry_after, &end, 10);
            if (end != h->retry_after && *end == '\0' && s >= 0) return (s > 300 ? 300 : s) * base + base;
        }
    }
    static const long steps[] = {1, 2, 4, 8, 8};
    return steps[attempt < 5 ? attempt : 4] * base;
}

/* ---- request setup --------------------------------------------------------------------------- */
int hk__http_setup(CURL *e, struct curl_slist **hdrs, hk_hub *hub, const char *url, bool download) {
    *hdrs = NULL;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* redirects are followed by hand */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* wait for a connection to multiplex on only where HTTP/2 is possible: on plain http it would
     * queue transfers behind each other instead of opening parallel connections */
    if (hk__str_starts_with(url, "https://")) curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    const char *ca = hk__getenv("SSL_CERT_FILE");
    if (!ca) ca = hk__getenv("CURL_CA_BUNDLE");
    if (ca) curl_easy_setopt(e, CURLOPT_CAINFO, ca);
    const char *cadir = hk__getenv("SSL_CERT_DIR");
    if (cadir) curl_easy_setopt(e, CURLOPT_CAPATH, cadir);
    long tmo = download ? hub->download_timeout_ms : hub->etag_timeout_ms;
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, tmo);
    /* a read timeout: abort when fewer than 1 byte/s arrive for the timeout (whole seconds) */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (tmo + 999) / 1000);
    if (hub->user_agent) curl_easy_setopt(e, CURLOPT_USERAGENT, hub->user_agent);
    struct curl_slist *l = NULL, *t;
    if (download) {
        if (!(t = curl_slist_append(l, "Accept-Encoding: identity"))) goto oom;
        l = t;
    } else {
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* JSON may come compressed; decoded */
    }
    if (hub->token && hk__url_same_origin(url, hub->endpoint)) {
        char *auth = hk__asprintf("Authorization: Bearer %s", hub->token);
        if (!auth) goto oom;
        t = curl_slist_append(l, auth);
        /* wipe our copy of the token-bearing header; curl keeps its own */
        memset(auth, 0, strlen(auth));
        free(auth);
        if (!t) goto oom;
        l = t;
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
    *hdrs = l;
    hub->requests++;
    return HK_OK;
oom:
    curl_slist_free_all(l);
    return hk__fail(HK_ERR_NOMEM, "out of memory");
}

/* ---- one API GET ----------------------------------------------------------------------------- */
typedef struct api_ctx {
    hk_http_resp *resp;
    size_t max_body;
    bool too_big;
    bool headers_seen; /* the response began */
} api_ctx;

static size_t api_header_cb(char *p, size_t sz, size_t n, void *ud) {
    api_ctx *c = ud;
    c->headers_seen = true;
    hk__http_headers_feed(&c->resp->h, p, sz * n);
    return sz * n;
}

static size_t api_body_cb(char *p, size_t sz, size_t n, void *ud) {
    api_ctx *c = ud;
    if (c->resp->body.len + sz * n > c->max_body) {
        c->too_big = true;
        return 0;
    }
    hk__sb_append_n(&c->resp->body, p, sz * n);
    return c->resp->body.oom ? 0 : sz * n;
}

bool hk__curl_tls_fatal(CURLcode cc) {
    return cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE || cc == CURLE_SSL_ISSUER_ERROR ||
           cc == CURLE_SSL_PINNEDPUBKEYNOTMATCH || cc == CURLE_SSL_INVALIDCERTSTATUS || cc == CURLE_SSL_CRL_BADFILE;
}

bool hk__curl_folded_header_risk(unsigned version_num) { return version_num < 0x080e01u; }

void hk__curl_warn_if_old(void) {
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    if (!v || !hk__curl_folded_header_risk(v->version_num) || atomic_flag_test_and_set(&warned)) return;
    hk__log(HK_LOG_WARN, "libcurl %s is older than 8.14.1: 7.88.1 reads freed memory on folded response header "
            "lines, which a hostile server can send; install libcurl >= 8.14 (Debian 12: bookworm-backports)",
            v->version);
}

bool hk__curl_header_too_large(CURLcode cc, bool headers_seen) {
#if LIBCURL_VERSION_NUM >= 0x080600
    if (cc == CURLE_TOO_LARGE) return true;
#endif
    /* libcurl before 8.6 answers a header line over its limit with CURLE_OUT_OF_MEMORY (and often
     * no error text); once the response has begun, that is what it means */
    return cc == CURLE_OUT_OF_MEMORY && headers_seen;
}

int hk__header_too_large_fail(const char *what, const char *url, const char *detail) {
    return hk__fail(HK_ERR_PROTOCOL, "%s%sthe response header from %s is too large (libcurl: %s; it refuses header "
                   "lines over 100 KB); the server or a proxy in between is misbehaving", what ? what : "",
                   what ? ": " : "", url, detail && *detail ? detail : "header too large");
}

int hk__net_fail(CURLcode cc, const char *what, const char *url, const char *detail) {
    const char *d = detail && *detail ? detail : curl_easy_strerror(cc);
    const char *sep = what ? ": " : "";
    if (!what) what = "";

    if (cc == CURLE_OPERATION_TIMEDOUT)
        return hk__fail(HK_ERR_TIMEOUT, "%s%srequest to %s timed out (raise HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT if the link is slow)",
                       what, sep, url);
    if (cc == CURLE_SSL_CACERT_BADFILE || cc == CURLE_SSL_CRL_BADFILE)
        return hk__fail(HK_ERR_NETWORK, "%s%scannot use the CA bundle for %s: %s (SSL_CERT_FILE or CURL_CA_BUNDLE must name a "
                       "readable PEM file of CA certificates, SSL_CERT_DIR a directory of hashed ones)", what, sep, url, d);
    if (hk__curl_tls_fatal(cc))
        return hk__fail(HK_ERR_NETWORK, "%s%sthe TLS certificate of %s was rejected: %s (a server with a certificate from a "
                       "private CA needs SSL_CERT_FILE or CURL_CA_BUNDLE set to a PEM file holding that CA; a certificate "
                       "issued for another name needs HF_ENDPOINT to use a host name the certificate lists)", what, sep, url, d);
    if (cc == CURLE_SSL_CONNECT_ERROR)
        return hk__fail(HK_ERR_NETWORK, "%s%sTLS handshake with %s failed: %s (check that the endpoint speaks https on that "
                       "port, and the proxy settings)", what, sep, url, d);
    return hk__fail(HK_ERR_NETWORK, "%s%scannot reach %s: %s (check the network, HF_ENDPOINT and proxy settings)", what, sep, url, d);
}

/* ---- quick failure on an unreachable endpoint -------------------------------------------------- */
bool hk__curl_connect_failed(CURLcode cc) {
    return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY;
}

long hk__connect_retry_delay_ms(const hk_hub *hub, int n) { return (long)(n + 1) * hub->retry_base_ms / 4; }

const char *hk__connect_cause(CURLcode cc, long os_errno) {
    if (cc == CURLE_COULDNT_RESOLVE_HOST) return "unknown host";
    if (cc == CURLE_COULDNT_RESOLVE_PROXY) return "unknown proxy host";
    switch (os_errno) {
    case ECONNREFUSED: return "connection refused";
    case EHOSTUNREACH: return "host unreachable";
    case ENETUNREACH: return "network unreachable";
    case ETIMEDOUT: return "connection timed out";
    default: return "cannot connect";
    }
}

int hk__connect_fail(const hk_hub *hub, CURLcode cc, long os_errno, const char *what, const char *url,
                     const char *detail, int attempts) {
    const char *d = detail && *detail ? detail : curl_easy_strerror(cc);
    bool proxy = cc == CURLE_COULDNT_RESOLVE_PROXY;
    return hk__fail(HK_ERR_NETWORK, "%s%scannot connect to %s: %s (%s; %d attempt%s); check that the endpoint %s is right (HF_ENDPOINT or "
                    "--endpoint) and that this machine can reach it (network, %s)", what ? what : "", what ? ": " : "",
                    url, hk__connect_cause(cc, os_errno), d, attempts, attempts == 1 ? "" : "s", hub->endpoint,
                    proxy ? "the proxy named by HTTPS_PROXY / HTTP_PROXY / ALL_PROXY"
                          : "proxy settings HTTPS_PROXY / HTTP_PROXY / NO_PROXY");
}

/* ---- deadlines --------------------------------------------------------------------------------- */
bool hk__pull_deadline_begin(hk_hub *hub) {
    if (!hub || hub->pull_deadline_at || hub->pull_timeout_ms <= 0) return false;
    hub->pull_deadline_at = hk__now_ms() + (uint64_t)hub->pull_timeout_ms;
    return true;
}

void hk__pull_deadline_end(hk_hub *hub, bool started) {
    if (hub && started) hub->pull_deadline_at = 0;
}

static int api_deadline_fail(const hk_hub *hub, bool pull_bound, const char *url, size_t got) {
    if (pull_bound)
        return hk__fail(HK_ERR_TIMEOUT, "request to %s did not finish within the pull's deadline of %.0f s (%zu bytes "
                        "received); HUBKERN_PULL_TIMEOUT (option pull_timeout_s) sets it", url,
                        (double)hub->pull_timeout_ms / 1000.0, got);
    return hk__fail(HK_ERR_TIMEOUT, "request to %s did not finish within its deadline of %.0f s (%zu bytes received); "
                    "HUBKERN_REQUEST_TIMEOUT (option request_timeout_s) sets it", url,
                    (double)hub->request_timeout_ms / 1000.0, got);
}

/* One attempt of a GET: the request, then each redirect it answers with (at most 10; the token
 * rule of hk__http_setup applies to every hop), within the request's deadline. *cur is the URL of
 * the last hop (replaced on each redirect); *cc is libcurl's result (CURLE_OK with out->status set,
 * or a transport error the caller may retry). HK_OK unless this attempt ends the request. */
static int get_once(hk_http_resp *out, char **cur, CURLcode *cc, hk_hub *hub, const char *url, size_t max_body,
                    uint64_t deadline, bool pull_bound, char errbuf[CURL_ERROR_SIZE]) {
    int hops = 0;
    for (;;) {
        hk__http_headers_free(&out->h);
        hk__sb_free(&out->body);
        out->status = 0;
        CURL *e = hub->api;
        curl_easy_reset(e);
        struct curl_slist *hdrs = NULL;
        int rc = hk__http_setup(e, &hdrs, hub, *cur, false);
        if (rc) return rc;
        if (deadline) {
            uint64_t now = hk__now_ms();
            if (now >= deadline) {
                curl_slist_free_all(hdrs);
                return api_deadline_fail(hub, pull_bound, *cur, 0);
            }
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(deadline - now));
        }
        api_ctx ctx = {out, max_body, false, false};
        errbuf[0] = '\0';
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, api_header_cb);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, &ctx);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, api_body_cb);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &ctx);
        hk__log(HK_LOG_DEBUG, "GET %s", *cur);
        *cc = curl_easy_perform(e);
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
        curl_slist_free_all(hdrs);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
        if (ctx.too_big) return hk__fail(HK_ERR_PROTOCOL, "answer from %s is larger than %zu bytes", url, max_body);
        if (hk__curl_header_too_large(*cc, ctx.headers_seen)) /* stays too large: no retry */
            return hk__header_too_large_fail(NULL, *cur, errbuf);
        if (*cc == CURLE_OPERATION_TIMEDOUT && deadline && hk__now_ms() + 50 >= deadline)
            return api_deadline_fail(hub, pull_bound, *cur, out->body.len);
        if (*cc != CURLE_OK) return HK_OK;
        if (out->status >= 300 && out->status < 400 && out->h.location) {
            if (++hops > 10) return hk__fail(HK_ERR_PROTOCOL, "too many redirects from %s", url);
            char *next = hk__url_resolve(*cur, out->h.location);
            if (!next) return hk__fail(HK_ERR_PROTOCOL, "bad redirect Location from %s", *cur);
            hk__log(HK_LOG_DEBUG, "redirect %ld -> %s%s", out->status, next,
                   hk__url_same_origin(next, hub->endpoint) ? "" : " (other host: no token)");
            free(*cur);
            *cur = next;
            continue;
        }
        return HK_OK;
    }
}

int hk__http_get(hk_http_resp *out, hk_hub *hub, const char *url, size_t max_body) {
    memset(out, 0, sizeof *out);
    out->token_source = hub->token ? hub->token_source : NULL;
    hk__http_headers_init(&out->h);
    hk__sb_init(&out->body);
    if (hub->offline) return hk__fail(HK_ERR_OFFLINE, "offline mode: refusing to fetch %s", url);
    if (!hub->api && !(hub->api = curl_easy_init())) return hk__fail(HK_ERR_NOMEM, "cannot create a curl handle");
    int rc = HK_OK;
    char errbuf[CURL_ERROR_SIZE];
    /* one deadline for every attempt, redirect and byte of this request; the pull's if sooner */
    uint64_t deadline = hub->request_timeout_ms > 0 ? hk__now_ms() + (uint64_t)hub->request_timeout_ms : 0;
    bool pull_bound = false;
    if (hub->pull_deadline_at && (!deadline || hub->pull_deadline_at < deadline)) {
        deadline = hub->pull_deadline_at;
        pull_bound = true;
    }
    int fast_fails = 0;
    for (int attempt = 0;;) {
        char *cur = hk__strdup(url);
        CURLcode cc = CURLE_OK;
        if (!cur) return hk__fail(HK_ERR_NOMEM, "out of memory");
        rc = get_once(out, &cur, &cc, hub, url, max_body, deadline, pull_bound, errbuf);
        if (rc) {
            free(cur);
            return rc;
        }
        long delay;
        if (cc != CURLE_OK && hk__curl_connect_failed(cc)) {
            /* refused / unknown host: a few quick tries, then a message that says what to check */
            long oserr = 0;
            curl_easy_getinfo(hub->api, CURLINFO_OS_ERRNO, &oserr);
            if (fast_fails >= HK_CONNECT_RETRIES || hub->max_retries == 0) {
                rc = hk__connect_fail(hub, cc, oserr, NULL, cur, errbuf, fast_fails + 1);
                free(cur);
                return rc;
            }
            delay = hk__connect_retry_delay_ms(hub, fast_fails++);
            hk__log(HK_LOG_INFO, "retrying in %ld ms: %s for %s (%d/%d)", delay, hk__connect_cause(cc, oserr), cur,
                    fast_fails, HK_CONNECT_RETRIES);
        } else {
            /* a certificate that does not verify will not verify on the next try either */
            bool transient = (cc != CURLE_OK && !hk__curl_tls_fatal(cc)) || hk__http_status_transient(out->status);
            if (!transient || attempt >= hub->max_retries) {
                if (cc != CURLE_OK) {
                    rc = hk__net_fail(cc, NULL, cur, errbuf);
                    free(cur);
                    return rc;
                }
                out->url = cur;
                return HK_OK;
            }
            delay = hk__retry_delay_ms(hub, attempt, cc == CURLE_OK ? out->status : 0, &out->h);
            hk__log(HK_LOG_INFO, "%s from %s; retrying in %ld ms (%d/%d)",
                   cc != CURLE_OK ? curl_easy_strerror(cc) : "transient HTTP status", cur, delay,
                   attempt + 1, hub->max_retries);
            attempt++;
        }
        if (deadline && hk__now_ms() + (uint64_t)delay >= deadline) { /* the retry would come too late */
            rc = api_deadline_fail(hub, pull_bound, cur, out->body.len);
            free(cur);
            return rc;
        }
        free(cur);
        hk__sleep_ms(delay);
    }
}

/* A 401 for the token sent: name where that token came from, since the fix is there (the caller's
 * option, a variable, or the token file), not always HF_TOKEN. */
static int invalid_token(const hk_http_resp *r, const char *what) {
    const char *src = r->token_source;
    if (src && strcmp(src, "option") == 0)
        return hk__fail(HK_ERR_AUTH, "%s: invalid token (the token passed in the options was rejected)", what);
    if (src)
        return hk__fail(HK_ERR_AUTH, "%s: invalid token (the token from %s was rejected; check or replace it)", what, src);
    return hk__fail(HK_ERR_AUTH, "%s: invalid token (check HF_TOKEN or the token file)", what);
}

int hk__http_fail(const hk_http_resp *r, const char *what) {
    const char *code = r->h.x_error_code ? r->h.x_error_code : "";
    const char *msg = r->h.x_error_message ? r->h.x_error_message : "";
    long st = r->status;
    if (strcmp(code, "RevisionNotFound") == 0)
        return hk__fail(HK_ERR_REVISION_NOT_FOUND, "%s: revision not found (%s)", what, msg);
    if (strcmp(code, "EntryNotFound") == 0)
        return hk__fail(HK_ERR_ENTRY_NOT_FOUND, "%s: file not found at that revision (%s)", what, msg);
    if (strcmp(code, "GatedRepo") == 0)
        return st == 401 ? hk__fail(HK_ERR_AUTH, "%s: gated repo; log in (HF_TOKEN) and request access", what)
                         : hk__fail(HK_ERR_FORBIDDEN, "%s: gated repo; your token is not on the access list", what);
    if (strcmp(msg, "Access to this resource is disabled.") == 0)
        return hk__fail(HK_ERR_FORBIDDEN, "%s: this repo is disabled", what);
    if (strcmp(code, "RepoNotFound") == 0)
        return hk__fail(HK_ERR_REPO_NOT_FOUND, "%s: repository not found (check the name; private repos need HF_TOKEN)", what);
    if (st == 401) {
        if (strcmp(msg, "Invalid credentials in Authorization header") == 0)
            return invalid_token(r, what);
        return hk__fail(HK_ERR_REPO_NOT_FOUND, "%s: repository not found or not accessible (HTTP 401; private repos need HF_TOKEN)", what);
    }
    if (st == 403) return hk__fail(HK_ERR_FORBIDDEN, "%s: forbidden (HTTP 403) %s", what, msg);
    if (st == 404) return hk__fail(HK_ERR_NOT_FOUND, "%s: not found (HTTP 404) %s", what, msg);
    if (st == 429) return hk__fail(HK_ERR_RATE_LIMITED, "%s: rate limited (HTTP 429) after retries; send a token (HF_TOKEN) or wait", what);
    if (st >= 500 && st < 600) /* transient statuses (502, 503, 504) come here after every retry */
        return hk__fail(HK_ERR_HTTP, "%s: the server failed (HTTP %ld%s%s); try again later (a mirror's upstream may be down)",
                        what, st, *msg ? ": " : "", msg);
    return hk__fail(HK_ERR_HTTP, "%s: unexpected HTTP %ld %s", what, st, msg);
}
