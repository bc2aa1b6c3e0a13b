/* One GET to an upstream (another hubkern mirror, or the Hub), on libcurl.
 *
 * - Connections: a transfer takes an idle handle (its connections to the upstream still open) and
 *   gives it back after a clean transfer, so that a burst of misses is not a TCP (and TLS) set-up
 *   each; a handle whose transfer failed is closed, never reused.
 * - Fallbacks: upstreams are tried in the order given; a network error, a 5xx or a 429 moves on to
 *   the next one. Any other answer (200, 404, ...) is final.
 * - The token goes only to the configured upstream's own origin (scheme, host, port). Redirects are
 *   followed here, by hand, so that a 302 to a CDN host is fetched without it.
 * - 429: the upstream's Retry-After (default 5 s, at most --upstream-max-backoff) becomes a back-off
 *   shared by every client of this mirror: no request goes to that upstream until it has passed.
 * - Deadlines: a transfer that sends nothing for --upstream-timeout is given up (from the last
 *   byte), and so is one still running --upstream-deadline after it started unless it averages
 *   HK_SERVE_UPSTREAM_MIN_RATE (a drip cannot hold a thread for longer), or whose client left with
 *   nobody else waiting on it.
 * - Per-client miss budgets: each client (its token when the mirror has tokens, else its address)
 *   may cause --client-miss-budget upstream misses per --client-miss-window, so that one client
 *   cannot spend the fleet's upstream quota (nor bring on the upstream's 429 for everyone). */
#define _GNU_SOURCE /* POLLRDHUP: a client that closed its side */
#include "server/srv_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define UP_MAX_REDIRECTS 5
#define UP_MAX_JSON (64u << 20)
#define UP_DEFAULT_RETRY_S 5

double srv_up_wait_s(const srv_upstream *u, uint64_t bytes) {
    /* the deadline, plus what the slowest transfer allowed past it needs for these bytes, plus a
     * little for the leader's answer to reach its waiters */
    return (double)u->deadline_s + (double)bytes / HK_SERVE_UPSTREAM_MIN_RATE + 2.0;
}


/* "scheme://host:port" of url (default ports filled in), or NULL. */
static char *url_origin(const char *url) {
    CURLU *u = curl_url();
    if (!u) return NULL;
    char *scheme = NULL, *host = NULL, *port = NULL, *out = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
        out = hk__asprintf("%s://%s:%s", scheme, host, port);
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    if (out)
        for (char *p = out; *p; p++)
            if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    return out;
}

int srv_up_create(srv_upstream **out, const srv_config *cfg) {
    *out = NULL;
    srv_upstream *u = calloc(1, sizeof *u);
    if (!u || !(u->sites = calloc(cfg->n_upstreams, sizeof *u->sites))) {
        free(u);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&u->mu, NULL);
    pthread_mutex_init(&u->hmu, NULL);
    pthread_mutex_init(&u->bmu, NULL);
    u->deadline_s = cfg->upstream_deadline ? cfg->upstream_deadline : HK_SERVE_UPSTREAM_DEADLINE_DEFAULT;
    u->max_backoff = cfg->upstream_max_backoff ? cfg->upstream_max_backoff : HK_SERVE_MAX_BACKOFF_DEFAULT;
    u->retry_s = cfg->upstream_retry_after ? cfg->upstream_retry_after : HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT;
    u->memo_cap = cfg->upstream_memo_bytes ? cfg->upstream_memo_bytes : HK_SERVE_UPSTREAM_MEMO_DEFAULT;
    u->miss_budget = cfg->client_miss_budget ? cfg->client_miss_budget : HK_SERVE_CLIENT_MISSES_DEFAULT;
    u->miss_window = cfg->client_miss_window ? cfg->client_miss_window : HK_SERVE_CLIENT_WINDOW_DEFAULT;
    u->budgets = srv_up_budgets_new();
    if (!u->budgets) {
        pthread_mutex_destroy(&u->hmu);
        pthread_mutex_destroy(&u->bmu);
        pthread_mutex_destroy(&u->mu);
        free(u->sites);
        free(u);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    u->rev_ttl = cfg->revision_ttl ? cfg->revision_ttl : HK_SERVE_REVISION_TTL_DEFAULT;
    u->neg_ttl = cfg->negative_ttl ? cfg->negative_ttl : HK_SERVE_NEGATIVE_TTL_DEFAULT;
    u->stall_s = cfg->upstream_timeout ? cfg->upstream_timeout : HK_SERVE_UPSTREAM_TIMEOUT_DEFAULT;
    atomic_init(&u->stopping, false);
    /* the client's rule (client/http.c, hk__curl_folded_header_risk): a hostile upstream can send
     * the folded header lines on which libcurl 7.88.1 reads freed memory */
    const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    if (cv && cv->version_num < 0x080e01u)
        hk__log(HK_LOG_WARN, "libcurl %s is older than 8.14.1: 7.88.1 reads freed memory on folded header lines an "
                "upstream can send; install libcurl >= 8.14 (Debian 12: bookworm-backports)", cv->version);
    int rc = srv_up_waitset_new(&u->waits, u->retry_s);
    if (rc == HK_OK) rc = srv_up_verdicts_new(&u->verdicts);
    for (size_t i = 0; rc == HK_OK && i < cfg->n_upstreams; i++) {
        up_site *s = &u->sites[i];
        const char *b = cfg->upstreams[i];
        size_t n = strlen(b);
        while (n && b[n - 1] == '/') n--;
        pthread_mutex_init(&s->mu, NULL);
        u->n_sites = i + 1;
        s->base = hk__strndup(b, n);
        s->origin = s->base ? url_origin(s->base) : NULL;
        if (!s->origin || (strncmp(s->base, "http://", 7) != 0 && strncmp(s->base, "https://", 8) != 0))
            rc = hk__fail(HK_ERR_INVALID_ARG, "--upstream expects an http:// or https:// URL, got '%s'", b);
    }
    if (rc == HK_OK && cfg->upstream_token && *cfg->upstream_token && !(u->token = hk__strdup(cfg->upstream_token)))
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    if (rc) {
        srv_up_free(u);
        return rc;
    }
    *out = u;
    return HK_OK;
}

void srv_up_free(srv_upstream *u) {
    if (!u) return;
    for (size_t i = 0; i < u->n_sites; i++) {
        free(u->sites[i].base);
        free(u->sites[i].origin);
        pthread_mutex_destroy(&u->sites[i].mu);
    }
    free(u->sites);
    if (u->token) {
        memset(u->token, 0, strlen(u->token));
        free(u->token);
    }
    srv_up_waitset_free(u->waits);
    srv_up_verdicts_free(u->verdicts);
    srv_up_memo_free(u);
    free(u->budgets);
    for (size_t i = 0; i < u->n_idle; i++) curl_easy_cleanup(u->idle[i]);
    pthread_mutex_destroy(&u->hmu);
    pthread_mutex_destroy(&u->bmu);
    pthread_mutex_destroy(&u->mu);
    free(u);
}

void srv_up_resp_init(up_resp *r) {
    memset(r, 0, sizeof *r);
    r->fd = -1;
    hk__sb_init(&r->body);
}

void srv_up_resp_free(up_resp *r) { hk__sb_free(&r->body); }

typedef struct xfer {
    up_resp *r;
    CURL *curl;
    const srv_upstream *u;
    int io_error;
    unsigned stall_s;      /* --upstream-timeout */
    curl_off_t last_bytes; /* received so far, when last_at was taken */
    double last_at;        /* hk__now_s() */
    bool stalled, overdue, abandoned;
} xfer;

/* libcurl's low-speed check averages over several seconds, so a body that stops after a fast start
 * would run on for that long: a stall is measured here from the last byte instead. */
static int on_progress(void *p, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal;
    (void)ultotal;
    (void)ulnow;
    xfer *x = p;
    if (atomic_load(&x->u->stopping)) return 1; /* libcurl calls this at least once a second */
    /* past the deadline only a transfer that averages the minimum rate goes on: a drip does not */
    double ran = hk__now_s() - x->r->t0;
    if (ran >= (double)x->u->deadline_s && (double)dlnow < HK_SERVE_UPSTREAM_MIN_RATE * ran) {
        x->overdue = true;
        return 1;
    }
    /* its client left and nobody else waits on it: the thread is released */
    if (srv_up_client_gone() && (!x->r->lead_key || srv_up_waiters(x->u->waits, x->r->lead_key) == 0)) {
        x->abandoned = true;
        return 1;
    }
    if (dlnow != x->last_bytes) {
        x->last_bytes = dlnow;
        x->last_at = hk__now_s();
    } else if (hk__now_s() - x->last_at >= (double)x->stall_s) {
        x->stalled = true;
        return 1;
    }
    return 0;
}

static void copy_header(char *dst, size_t cap, const char *v, size_t n) {
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
    while (n && *v == ' ') {
        v++;
        n--;
    }
    if (n >= cap) n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *p) {
    xfer *x = p;
    size_t n = size * nitems;
    static const struct {
        const char *name;
        size_t off, cap;
    } want[] = {
        {"etag:", offsetof(up_resp, etag), sizeof ((up_resp *)0)->etag},
        {"x-linked-etag:", offsetof(up_resp, linked_etag), sizeof ((up_resp *)0)->linked_etag},
        {"x-linked-size:", offsetof(up_resp, linked_size), sizeof ((up_resp *)0)->linked_size},
        {"x-repo-commit:", offsetof(up_resp, commit), sizeof ((up_resp *)0)->commit},
        {"retry-after:", offsetof(up_resp, retry_after), sizeof ((up_resp *)0)->retry_after},
        {"x-error-code:", offsetof(up_resp, error_code), sizeof ((up_resp *)0)->error_code},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t l = strlen(want[i].name);
        if (n > l && strncasecmp(buf, want[i].name, l) == 0)
            copy_header((char *)x->r + want[i].off, want[i].cap, buf + l, n - l);
    }
    return n;
}

static size_t on_body(char *buf, size_t size, size_t nitems, void *p) {
    xfer *x = p;
    up_resp *r = x->r;
    size_t n = size * nitems;
    long st = 0;
    curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &st);
    if (r->fd >= 0 && st == 200) {
        /* always bounded, 0 included: "0 = no limit" let an upstream stream without end into the
         * temp file of any empty file of a listing */
        if (n > r->max_body - r->written) {
            r->too_big = true;
            return 0; /* more than promised: stop now */
        }
        for (size_t off = 0; off < n;) {
            ssize_t w = write(r->fd, buf + off, n - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                x->io_error = errno ? errno : EIO;
                return 0;
            }
            off += (size_t)w;
        }
        if (r->h256) hk__hasher_update(r->h256, buf, n);
        if (r->hgit) hk__hasher_update(r->hgit, buf, n);
        r->written += n;
        return n;
    }
    if (r->body.len + n > UP_MAX_JSON) {
        r->too_big = true;
        return 0;
    }
    hk__sb_append_n(&r->body, buf, n);
    return n;
}

/* An idle handle (its connections open), or a new one (NULL: out of memory). */
static CURL *handle_take(srv_upstream *u) {
    pthread_mutex_lock(&u->hmu);
    CURL *c = u->n_idle ? u->idle[--u->n_idle] : NULL;
    pthread_mutex_unlock(&u->hmu);
    return c ? c : curl_easy_init();
}

/* After a transfer: kept for the next one when it ended cleanly, else closed with its connections. */
static void handle_give(srv_upstream *u, CURL *c, bool clean) {
    if (clean && !atomic_load(&u->stopping)) {
        /* options back to defaults (no header list, token or callback pointer left in it); the
         * open connections stay */
        curl_easy_reset(c);
        pthread_mutex_lock(&u->hmu);
        bool kept = u->n_idle < UP_IDLE_HANDLES;
        if (kept) u->idle[u->n_idle++] = c;
        pthread_mutex_unlock(&u->hmu);
        if (kept) return;
    }
    curl_easy_cleanup(c);
}

/* One request, no redirects followed. *next_url = the Location of a 3xx (caller frees). */
static int one_request(srv_upstream *u, const char *url, bool with_token, const char *token, up_resp *r,
                       char **next_url) {
    *next_url = NULL;
    CURL *c = handle_take(u);
    if (!c) return hk__fail(HK_ERR_NOMEM, "curl_easy_init failed");
    xfer x = {.r = r, .curl = c, .u = u};
    struct curl_slist *hdrs = curl_slist_append(NULL, "Accept-Encoding: identity");
    char *auth = NULL;
    if (with_token && token) {
        auth = hk__asprintf("Authorization: Bearer %s", token);
        if (auth) hdrs = curl_slist_append(hdrs, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "hubkern-mirror");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)(u->stall_s < 10 ? u->stall_s : 10));
    /* a stalled upstream (accepts and sends nothing, or stops mid-body): given up after --upstream-timeout */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)u->stall_s);
    x.stall_s = u->stall_s;
    x.last_at = hk__now_s();
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    CURLcode cc = curl_easy_perform(c);
    long st = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    r->status = st;
    int rc = HK_OK;
    if (atomic_load(&u->stopping) && cc == CURLE_ABORTED_BY_CALLBACK)
        rc = hk__fail(HK_ERR_CANCELLED, "the mirror is stopping: upstream transfer abandoned");
    else if (x.io_error) rc = hk__fail(hk__errno_code(x.io_error), "writing the upstream body: %s", strerror(x.io_error));
    else if (r->too_big) rc = hk__fail(HK_ERR_INTEGRITY, "upstream sent more than it promised");
    else if (x.overdue)
        rc = hk__fail(HK_ERR_TIMEOUT, "upstream transfer still running after %u s at under %u bytes/s "
                      "(--upstream-deadline)", u->deadline_s, (unsigned)HK_SERVE_UPSTREAM_MIN_RATE);
    else if (x.abandoned) rc = hk__fail(HK_ERR_CANCELLED, "the client disconnected: upstream transfer abandoned");
    else if (x.stalled || cc == CURLE_OPERATION_TIMEDOUT)
        rc = hk__fail(HK_ERR_TIMEOUT, "upstream sent nothing for %u s (--upstream-timeout)", x.stall_s);
    else if (cc != CURLE_OK) rc = hk__fail(HK_ERR_NETWORK, "upstream: %s", curl_easy_strerror(cc));
    else if (st >= 300 && st < 400) {
        char *loc = NULL;
        curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc);
        if (loc) *next_url = hk__strdup(loc);
    }
    handle_give(u, c, cc == CURLE_OK && rc == HK_OK);
    curl_slist_free_all(hdrs);
    if (auth) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
    return rc;
}

/* GET from one site, following up to UP_MAX_REDIRECTS redirects; the token only on the site's origin. */
static int site_get(srv_upstream *u, up_site *s, const char *path_query, up_resp *r) {
    char *url = hk__asprintf("%s%s", s->base, path_query);
    int rc = url ? HK_OK : hk__fail(HK_ERR_NOMEM, "out of memory");
    for (int hop = 0; rc == HK_OK; hop++) {
        char *origin = url_origin(url);
        bool same = origin && strcmp(origin, s->origin) == 0;
        free(origin);
        char *next = NULL;
        /* a redirect's earlier body and headers are not the answer */
        hk__sb_free(&r->body);
        hk__sb_init(&r->body);
        char keep_commit[72], keep_linked[80], keep_size[32];
        snprintf(keep_commit, sizeof keep_commit, "%s", r->commit);
        snprintf(keep_linked, sizeof keep_linked, "%s", r->linked_etag);
        snprintf(keep_size, sizeof keep_size, "%s", r->linked_size);
        r->etag[0] = r->linked_etag[0] = r->linked_size[0] = r->commit[0] = r->retry_after[0] = r->error_code[0] = 0;
        rc = one_request(u, url, same, u->token, r, &next);
        /* the Hub puts the metadata on its 302 to the CDN; the CDN's answer lacks it */
        if (!r->commit[0]) snprintf(r->commit, sizeof r->commit, "%s", keep_commit);
        if (!r->linked_etag[0]) snprintf(r->linked_etag, sizeof r->linked_etag, "%s", keep_linked);
        if (!r->linked_size[0]) snprintf(r->linked_size, sizeof r->linked_size, "%s", keep_size);
        if (rc != HK_OK || !next) {
            free(next);
            break;
        }
        if (hop == UP_MAX_REDIRECTS) {
            free(next);
            rc = hk__fail(HK_ERR_PROTOCOL, "upstream: too many redirects");
            break;
        }
        free(url);
        url = next;
    }
    free(url);
    return rc;
}

bool srv_up_unavailable(int rc, long status) {
    if (status == 503) return true;
    return rc != HK_OK && (rc == HK_ERR_TIMEOUT || rc == HK_ERR_CANCELLED || status == 0);
}

int srv_up_get(srv_upstream *u, const char *path_query, up_resp *r, unsigned *backoff_s) {
    *backoff_s = 0;
    if (r->t0 <= 0) r->t0 = hk__now_s();
    double now = hk__now_s(), soonest = 0;
    bool answered = false;
    int rc = hk__fail(HK_ERR_NETWORK, "no upstream answered");
    for (size_t i = 0; i < u->n_sites; i++) {
        up_site *s = &u->sites[i];
        pthread_mutex_lock(&s->mu);
        double until = s->retry_until;
        pthread_mutex_unlock(&s->mu);
        if (until > now) {
            if (!soonest || until < soonest) soonest = until;
            continue;
        }
        if (r->fd >= 0 && (ftruncate(r->fd, 0) != 0 || lseek(r->fd, 0, SEEK_SET) != 0)) {
            rc = hk__fail(HK_ERR_IO, "cannot reset the temporary file: %s", strerror(errno));
            break;
        }
        r->written = 0;
        r->site = i;
        rc = site_get(u, s, path_query, r);
        if (rc == HK_OK && r->status == 429) {
            unsigned ra = (unsigned)strtoul(r->retry_after, NULL, 10);
            if (!ra) ra = UP_DEFAULT_RETRY_S;
            if (ra > u->max_backoff) ra = u->max_backoff; /* a hostile Retry-After cannot lock the tier out */
            pthread_mutex_lock(&s->mu);
            s->retry_until = hk__now_s() + ra;
            until = s->retry_until;
            pthread_mutex_unlock(&s->mu);
            if (!soonest || until < soonest) soonest = until;
            hk__log(HK_LOG_WARN, "upstream %s: 429, backing off %u s", s->base, ra);
            answered = true;
            continue;
        }
        if (rc == HK_OK && r->status < 500) {
            hk_clear_error();
            return HK_OK;
        }
        answered = rc == HK_OK;
        if (rc == HK_OK) hk__log(HK_LOG_WARN, "upstream %s: HTTP %ld", s->base, r->status);
        else hk__log(HK_LOG_WARN, "upstream %s: %s", s->base, hk_last_error());
        if (rc == HK_ERR_IO || rc == HK_ERR_DISK_FULL || rc == HK_ERR_INTEGRITY || rc == HK_ERR_CANCELLED)
            break; /* ours, a liar, or stopping */
    }
    if (soonest > 0 && (!answered || r->status == 429)) {
        double left = soonest - hk__now_s();
        *backoff_s = left < 1 ? 1 : (unsigned)(left + 0.999);
        return hk__fail(HK_ERR_RATE_LIMITED, "upstream rate limit: retry in %u s", *backoff_s);
    }
    if (answered && rc == HK_OK) {
        hk_clear_error();
        return HK_OK; /* the last 5xx, passed on */
    }
    return rc;
}
