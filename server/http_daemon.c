/* hubkern serve: a Hub-compatible mirror over a huggingface_hub-layout store, on libmicrohttpd.
 * This file owns the server's life: configuration, the listening socket, the daemon and its
 * callbacks (request state, body collection, access log). Routes are in http_route.c; srv_http.h
 * lists the other files. */
#include "server/srv_http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The client's address as text, formatted once and only where a log line or a per-address key
 * asks for it: most requests never need it. */
static const char *ctx_client(req_ctx *ctx) {
    if (!ctx->client[0]) srv_client_addr_text(ctx->client, sizeof ctx->client, &ctx->peer);
    return ctx->client;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    srv_server *srv = cls;
    req_ctx *ctx = *con_cls;
    if (!ctx) {
        srv_conn_guard_headers_done(c);
        ctx = calloc(1, sizeof *ctx);
        if (!ctx) return MHD_NO;
        hk__sb_init(&ctx->body);
        ctx->start_s = hk__now_s();
        size_t ml = strnlen(method, sizeof ctx->method - 1); /* longer ones are no route's anyway */
        memcpy(ctx->method, method, ml);
        ctx->method[ml] = '\0';
        if (srv->access_log) ctx->url = srv_sanitize(url, 1024);
        ctx->cache_control = (const char (*)[64])srv->cache_control;
        ctx->route = MET_OTHER;
        ctx->tokens = srv->n_tokens > 0;
        bool via_proxy = srv_request_client_addr(&ctx->peer, srv, c);
        /* behind a trusted proxy the limit counts each forwarded client's requests in flight (the
         * proxy's own connections are shared by its clients); direct peers' connections are counted
         * by the guard */
        if (via_proxy && srv->per_ip) {
            ctx->counted = srv_addr_acquire(srv->per_ip, ctx_client(ctx));
            ctx->over_limit = !ctx->counted;
        }
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (ctx->body.len + *upload_data_size > srv->max_body) ctx->body_too_big = true;
        else hk__sb_append_n(&ctx->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (ctx->over_limit) {
        hk__log(HK_LOG_INFO, "refusing a request of %s: it has %u in flight already (--max-connections-per-ip)",
                ctx_client(ctx), srv->per_ip_limit);
        up_answer busy = {.status = 429, .retry_after = 1};
        snprintf(busy.msg, sizeof busy.msg, "Too many requests in flight from %s; retry later", ctx_client(ctx));
        return srv_send_up_answer(c, ctx, &busy, NULL);
    }
    srv_up_begin(srv, c, srv->up ? ctx_client(ctx) : NULL, &ctx->up); /* the edge keys budgets on it */
    /* the store's folder verdicts may skip their stat()s within this request (store_watch.c) */
    srv_watch_begin(srv_store_watch(srv->store));
    enum MHD_Result ret = srv_dispatch(srv, c, ctx, url, method);
    srv_watch_end();
    if (srv_up_end()) {
        /* a miss: its step goes to the transfer threads and this connection is suspended until the
         * step ends; then libmicrohttpd calls this handler again, which answers from the store */
        up_answer busy;
        if (srv_up_submit(srv->up, ctx->up, c, &busy) == 0) return MHD_YES;
        return srv_send_up_answer(c, ctx, &busy, NULL);
    }
    /* a resumed request may find its file in the store now: it is still logged as the miss it was */
    for (unsigned i = 0; ctx->up && srv_up_req_mark(ctx->up, i) != UP_NONE; i++)
        srv_note_mark(ctx, srv_up_req_mark(ctx->up, i));
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    srv_server *srv = cls;
    req_ctx *ctx = *con_cls;
    if (!ctx) return;
    srv_conn_guard_request_done(c);
    if (ctx->counted) srv_addr_release(srv->per_ip, ctx_client(ctx));
    srv_metrics_count(&srv->metrics, ctx->route, ctx->status, ctx->bytes);
    srv_metrics_mark(&srv->metrics, ctx->mark);
    static const char *const marks[] = {"", " hit", " miss", " coalesced", " stale"};
    if (srv->access_log && hk__log_enabled(HK_LOG_INFO)) {
        double ms = (hk__now_s() - ctx->start_s) * 1e3;
        hk__log(HK_LOG_INFO, "access %s \"%s %s\" %u %llu %.1fms%s%s", ctx_client(ctx), ctx->method, ctx->url ? ctx->url : "?",
               ctx->status, (unsigned long long)ctx->bytes, ms, marks[ctx->mark],
               toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (aborted)");
    }
    hk__sb_free(&ctx->body);
    srv_up_req_free(ctx->up);
    free(ctx->url);
    free(ctx);
    *con_cls = NULL;
}

/* The URL is handed to on_request undecoded: routing decodes each segment itself. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s) { return strlen(s); }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
    hk__log(HK_LOG_DEBUG, "libmicrohttpd: %s", buf);
}

static int listen_socket(int *out_fd, unsigned *out_port, const char *host, unsigned port) {
    *out_fd = -1;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%u", port);
    int gai = getaddrinfo(host, ps, &hints, &res);
    if (gai != 0) return hk__fail(HK_ERR_INVALID_ARG, "cannot use address %s: %s", host, gai_strerror(gai));
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        /* a fleet connects in bursts: a short accept queue drops SYNs, and each dropped one costs
         * its client a 1 s retransmit (the kernel caps this at net.core.somaxconn) */
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 4096) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return hk__fail(HK_ERR_NETWORK, "cannot listen on %s:%u: %s", host, port, strerror(err));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return hk__fail(HK_ERR_NETWORK, "getsockname: %s", strerror(errno));
    }
    *out_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *out_fd = fd;
    return HK_OK;
}

static void free_server(srv_server *s) {
    if (!s) return;
    srv_up_queue_free(s->up); /* its threads use the store */
    srv_conn_guard_stop(s->guard);
    srv_memo_free(s->memo); /* after the daemon: no connection sends a kept answer any more */
    srv_store_close(s->store);
    srv_up_free(s->up);
    for (size_t i = 0; i < s->n_tokens; i++) srv_token_spec_free(&s->tokens[i]);
    free(s->tokens);
    for (size_t i = 0; i < s->n_trusted; i++) free(s->trusted[i]);
    free(s->trusted);
    free(s->proxies);
    srv_addr_count_free(s->per_ip);
    free(s->bound_base);
    free(s->public_url);
    free(s);
}

/* Everything of the configuration that is copied into the server, before any socket exists. */
static int take_config(srv_server *s, const srv_config *cfg) {
    /* Without --public-url a next-page Link can only be relative, and huggingface_hub 2.4 cannot
     * follow a relative Link (httpx2 refuses a URL without a scheme): unless a page size is asked
     * for, such a mirror answers a listing in one page of up to HK_SERVE_UNPAGED_MAX entries. */
    bool public_url = cfg->public_url && *cfg->public_url;
    s->page_size = cfg->page_size ? cfg->page_size : public_url ? HK_TREE_PAGE_SIZE_DEFAULT : HK_SERVE_UNPAGED_MAX;
    if (cfg->page_size && !public_url)
        hk__log(HK_LOG_WARN, "tree listings longer than %u entries get a relative next-page Link, which "
                "huggingface_hub cannot follow: give --public-url (the URL clients use)", s->page_size);
    s->lfs_302 = cfg->lfs_302;
    int prc = srv_proxy_nets_parse(&s->proxies, cfg->trusted_proxies, cfg->n_trusted_proxies);
    if (prc != HK_OK) return prc;
    s->n_proxies = cfg->n_trusted_proxies;
    s->per_ip_limit = cfg->max_connections_per_ip ? cfg->max_connections_per_ip : HK_SERVE_PER_IP_DEFAULT;
    if (s->per_ip_limit && (prc = srv_addr_count_new(&s->per_ip, s->per_ip_limit)) != HK_OK) return prc;
    s->access_log = cfg->access_log;
    s->rev_ttl = cfg->revision_ttl ? cfg->revision_ttl : HK_SERVE_REVISION_TTL_DEFAULT;
    const char *vis = cfg->n_tokens ? "private" : "public";
    snprintf(s->cache_control[0], sizeof s->cache_control[0], "%s, max-age=31536000, immutable", vis);
    snprintf(s->cache_control[1], sizeof s->cache_control[1], "%s, max-age=%u", vis, s->rev_ttl);
    s->bench_max = cfg->benchmark_max_bytes ? cfg->benchmark_max_bytes : HK_SERVE_BENCHMARK_MAX_DEFAULT;
    if (s->bench_max > HK_SERVE_BENCHMARK_MAX_LIMIT)
        return hk__fail(HK_ERR_INVALID_ARG, "benchmark_max_bytes: at most %llu",
                        (unsigned long long)HK_SERVE_BENCHMARK_MAX_LIMIT);
    s->max_body = s->bench_max > HK_SRV_MAX_BODY ? (size_t)s->bench_max : HK_SRV_MAX_BODY;
    s->bench_quota_count = cfg->benchmark_quota_count ? cfg->benchmark_quota_count : HK_SERVE_BENCHMARK_QUOTA_COUNT_DEFAULT;
    s->bench_quota_bytes = cfg->benchmark_quota_bytes ? cfg->benchmark_quota_bytes
                           : s->bench_max > HK_SERVE_BENCHMARK_QUOTA_BYTES_DEFAULT ? s->bench_max
                                                                                   : HK_SERVE_BENCHMARK_QUOTA_BYTES_DEFAULT;
    if (s->bench_quota_bytes < s->bench_max) /* else one accepted submission could never be kept */
        return hk__fail(HK_ERR_INVALID_ARG, "benchmark quota of %llu bytes is below the largest submission accepted "
                        "(%llu bytes)", (unsigned long long)s->bench_quota_bytes, (unsigned long long)s->bench_max);
    if (cfg->n_upstreams) {
        int urc = srv_up_create(&s->up, cfg);
        if (urc != HK_OK) return urc;
    }
#ifdef HK_TEST_HOOKS
    srv_fault_init(&s->fault, cfg);
    if (cfg->racy_window_ms) srv_refs_test_hooks((long long)cfg->racy_window_ms * 1000000LL, NULL);
    if (cfg->listing_ttl_ms) srv_store_test_hooks(cfg->listing_ttl_ms);
#endif
    if (RAND_bytes(s->lfs_key, sizeof s->lfs_key) != 1) return hk__fail(HK_ERR_INTERNAL, "cannot generate a random key");
    if (cfg->public_url && *cfg->public_url) {
        /* written into Link and Location as given: it must be an absolute http(s) URL, one line */
        bool ok = hk__str_starts_with(cfg->public_url, "http://") || hk__str_starts_with(cfg->public_url, "https://");
        for (const char *p = cfg->public_url; ok && *p; p++)
            ok = (unsigned char)*p > 0x20 && *p != 0x7f && *p != '<' && *p != '>' && *p != '"';
        if (!ok)
            return hk__fail(HK_ERR_INVALID_ARG, "public URL '%s': give an absolute http:// or https:// URL",
                            cfg->public_url);
        size_t n = strlen(cfg->public_url);
        while (n > 0 && cfg->public_url[n - 1] == '/') n--;
        if (!(s->public_url = hk__strndup(cfg->public_url, n))) return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    if (cfg->n_tokens) {
        if (!(s->tokens = calloc(cfg->n_tokens, sizeof *s->tokens))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < cfg->n_tokens; i++) {
            s->n_tokens = i + 1;
            int rc = srv_token_spec_parse(&s->tokens[i], cfg->tokens[i]);
            if (rc != HK_OK) return rc;
        }
    }
    if (cfg->n_trusted_orgs) {
        if (!(s->trusted = calloc(cfg->n_trusted_orgs, sizeof *s->trusted))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < cfg->n_trusted_orgs; i++) {
            if (!(s->trusted[i] = hk__strdup(cfg->trusted_orgs[i]))) return hk__fail(HK_ERR_NOMEM, "out of memory");
            s->n_trusted = i + 1;
        }
    }
    return HK_OK;
}

static int start_daemon(srv_server *s, const srv_config *cfg, const char *host, int fd) {
    unsigned threads = cfg->threads ? cfg->threads : 4;
    unsigned maxc = cfg->max_connections ? cfg->max_connections : 1024;
    unsigned header_s = cfg->header_timeout ? cfg->header_timeout : HK_SERVE_HEADER_TIMEOUT_DEFAULT;
    int rc = srv_conn_guard_start(&s->guard, header_s, s);
    if (rc != HK_OK) {
        close(fd);
        return rc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    /* With an upstream the pool serves too: a miss never blocks a worker. Its upstream step runs on
     * the server's own transfer threads and its connection is suspended until the step ends
     * (upstream_queue.c), so hits on the same worker go on at once, and a slow client holds a
     * connection slot, not a thread. */
    if (s->up) {
        unsigned xfers = cfg->upstream_transfers ? cfg->upstream_transfers : HK_SERVE_UPSTREAM_TRANSFERS_DEFAULT;
        unsigned queue = cfg->upstream_queue ? cfg->upstream_queue : HK_SERVE_UPSTREAM_QUEUE_DEFAULT;
        if ((rc = srv_up_queue_start(s, xfers, queue)) != HK_OK) {
            close(fd);
            return rc;
        }
        flags |= MHD_ALLOW_SUSPEND_RESUME;
    }
    /* The pool's workers poll(), not epoll: libmicrohttpd 0.9.75 (Debian 12) drains epoll in batches
     * of 128 and calls epoll_wait again with the blocking timeout after a full batch, so when exactly
     * 128 (256, ...) connections are ready at once a worker sleeps with their requests unanswered
     * until the idle timeout or a new event (wrk -c128: 95 req/s instead of 14k; issue 25). poll()
     * has no batch; over a worker's share of --max-connections its scan costs less than the stall. */
    flags |= MHD_USE_POLL;
#define HK_MHD_COMMON_OPTIONS                                                                         \
    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, maxc,                  \
        MHD_OPTION_CONNECTION_TIMEOUT, HK_SRV_IDLE_TIMEOUT, MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, (void *)NULL, \
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)s, MHD_OPTION_NOTIFY_CONNECTION, srv_conn_guard_notify, \
        (void *)s->guard, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)NULL, \
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HK_SRV_CONN_MEMORY
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, HK_MHD_COMMON_OPTIONS,
                                 MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_END);
#undef HK_MHD_COMMON_OPTIONS
    if (!s->daemon) {
        close(fd);
        return hk__fail(HK_ERR_NETWORK, "cannot start the HTTP server on %s:%u", host, s->port);
    }
    return HK_OK;
}

int srv_start(srv_server **out, const srv_config *cfg) {
    *out = NULL;
    if (!cfg || !cfg->cache_dir) return hk__fail(HK_ERR_INVALID_ARG, "serve needs a store directory (--cache DIR)");
    srv_server *s = calloc(1, sizeof *s);
    if (!s) return hk__fail(HK_ERR_NOMEM, "out of memory");
    int rc = srv_store_open(&s->store, cfg->cache_dir, cfg->lfs_threshold);
    if (rc == HK_OK) rc = take_config(s, cfg);
    if (rc == HK_OK) rc = srv_memo_new(&s->memo, HK_SRV_MEMO_BYTES);
    const char *host = cfg->host && *cfg->host ? cfg->host : "127.0.0.1";
    int fd = -1;
    if (rc == HK_OK) rc = listen_socket(&fd, &s->port, host, cfg->port);
    if (rc == HK_OK) {
        bool v6 = strchr(host, ':') != NULL;
        s->bound_base = hk__asprintf(v6 ? "http://[%s]:%u" : "http://%s:%u", host, s->port);
        rc = start_daemon(s, cfg, host, fd);
    }
    if (rc) {
        free_server(s);
        return rc;
    }
    hk__log(HK_LOG_INFO, "serving %s on %s (%u threads)", srv_store_root(s->store), s->bound_base,
           cfg->threads ? cfg->threads : 4);
    *out = s;
    return HK_OK;
}

unsigned srv_port(const srv_server *s) { return s ? s->port : 0; }

void srv_stop(srv_server *s) {
    if (!s) return;
    /* upstream transfers in flight end first (their partial files removed), so that stopping
     * closes the in-flight responses at once instead of waiting for a slow upstream */
    if (s->up) atomic_store(&s->up->stopping, true);
    /* and every connection suspended on one is resumed: libmicrohttpd cannot stop with one */
    if (s->up) srv_up_queue_stop(s->up);
    if (s->daemon) MHD_stop_daemon(s->daemon);
    free_server(s);
}
