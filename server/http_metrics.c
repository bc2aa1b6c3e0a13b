/* Counters for operators and GET /metrics in the Prometheus text format (version 0.0.4): requests
 * by route and status, bytes served, content hits / misses / coalesced waits / stale answers, and
 * the upstream side (fetches, bytes, errors, rejected lies, rate limits), the answer memo's use.
 * Lock-free counters. */
#include "server/srv_http.h"

#include <stdlib.h>

static const char *const k_routes[MET_N_ROUTES] = {"api", "resolve", "lfs", "metrics", "other"};
static const unsigned k_status[7] = {200, 206, 304, 404, 429, 502, 503};

void srv_metrics_count(srv_metrics *m, met_route route, unsigned status, uint64_t bytes) {
    if ((unsigned)route >= MET_N_ROUTES) route = MET_OTHER;
    unsigned cls = status >= 100 && status < 600 ? status / 100 : 0;
    atomic_fetch_add(&m->req[route][cls], 1);
    size_t k = 7;
    for (size_t i = 0; i < 7; i++)
        if (k_status[i] == status) k = i;
    atomic_fetch_add(&m->by_status[route][k], 1);
    atomic_fetch_add(&m->bytes, bytes);
}

void srv_metrics_mark(srv_metrics *m, up_mark mark) {
    switch (mark) {
    case UP_HIT: atomic_fetch_add(&m->hits, 1); break;
    case UP_MISS: atomic_fetch_add(&m->misses, 1); break;
    case UP_STALE: atomic_fetch_add(&m->stale, 1); break;
    default: break; /* coalesced waits are counted where they happen */
    }
}

char *srv_metrics_text(const srv_metrics *m) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "# HELP hubkern_requests_total Requests answered, by route and status.\n"
                       "# TYPE hubkern_requests_total counter\n");
    for (int r = 0; r < MET_N_ROUTES; r++)
        for (int k = 0; k < 8; k++) {
            unsigned long long v = atomic_load(&m->by_status[r][k]);
            if (!v) continue;
            if (k < 7) hk__sb_printf(&sb, "hubkern_requests_total{route=\"%s\",status=\"%u\"} %llu\n", k_routes[r], k_status[k], v);
            else hk__sb_printf(&sb, "hubkern_requests_total{route=\"%s\",status=\"other\"} %llu\n", k_routes[r], v);
        }
    hk__sb_append(&sb, "# HELP hubkern_requests_by_class_total Requests answered, by route and status class.\n"
                       "# TYPE hubkern_requests_by_class_total counter\n");
    for (int r = 0; r < MET_N_ROUTES; r++)
        for (int c = 1; c < 6; c++) {
            unsigned long long v = atomic_load(&m->req[r][c]);
            if (v) hk__sb_printf(&sb, "hubkern_requests_by_class_total{route=\"%s\",class=\"%dxx\"} %llu\n", k_routes[r], c, v);
        }
    unsigned long long hits = atomic_load(&m->hits), misses = atomic_load(&m->misses),
                       coal = atomic_load(&m->coalesced), stale = atomic_load(&m->stale);
    double ratio = hits + misses + coal + stale ? (double)(hits + coal + stale) / (double)(hits + misses + coal + stale) : 0;
    hk__sb_printf(&sb,
                  "# HELP hubkern_bytes_served_total Response body bytes queued.\n"
                  "# TYPE hubkern_bytes_served_total counter\nhubkern_bytes_served_total %llu\n"
                  "# HELP hubkern_cache_total Content lookups by outcome (hit, miss, coalesced, stale).\n"
                  "# TYPE hubkern_cache_total counter\n"
                  "hubkern_cache_total{result=\"hit\"} %llu\nhubkern_cache_total{result=\"miss\"} %llu\n"
                  "hubkern_cache_total{result=\"coalesced\"} %llu\nhubkern_cache_total{result=\"stale\"} %llu\n"
                  "# HELP hubkern_cache_hit_ratio Lookups answered without an upstream transfer of their own.\n"
                  "# TYPE hubkern_cache_hit_ratio gauge\nhubkern_cache_hit_ratio %.6f\n"
                  "# HELP hubkern_coalesced_waits_total Requests that waited for another request's upstream transfer.\n"
                  "# TYPE hubkern_coalesced_waits_total counter\nhubkern_coalesced_waits_total %llu\n"
                  "# HELP hubkern_upstream_fetches_total Requests sent upstream.\n"
                  "# TYPE hubkern_upstream_fetches_total counter\nhubkern_upstream_fetches_total %llu\n"
                  "# HELP hubkern_upstream_bytes_total Body bytes received from upstream.\n"
                  "# TYPE hubkern_upstream_bytes_total counter\nhubkern_upstream_bytes_total %llu\n"
                  "# HELP hubkern_upstream_errors_total Upstream lookups that failed (network, 5xx, 429, lies).\n"
                  "# TYPE hubkern_upstream_errors_total counter\nhubkern_upstream_errors_total %llu\n"
                  "# HELP hubkern_upstream_rejected_total Upstream bodies refused for a wrong size or digest.\n"
                  "# TYPE hubkern_upstream_rejected_total counter\nhubkern_upstream_rejected_total %llu\n"
                  "# HELP hubkern_upstream_rate_limited_total Lookups refused while upstream asked to back off.\n"
                  "# TYPE hubkern_upstream_rate_limited_total counter\nhubkern_upstream_rate_limited_total %llu\n",
                  (unsigned long long)atomic_load(&m->bytes), hits, misses, coal, stale, ratio, coal,
                  (unsigned long long)atomic_load(&m->up_fetches), (unsigned long long)atomic_load(&m->up_bytes),
                  (unsigned long long)atomic_load(&m->up_errors), (unsigned long long)atomic_load(&m->up_rejected),
                  (unsigned long long)atomic_load(&m->up_rate_limited));
    return hk__sb_steal(&sb);
}

enum MHD_Result srv_handle_metrics(srv_server *srv, struct MHD_Connection *c, req_ctx *ctx) {
    char *text = srv_metrics_text(&srv->metrics);
    if (text && srv->memo) { /* the answer memo's use (http_memo.c) */
        size_t bytes, entries;
        uint64_t hits, misses;
        srv_memo_stats(srv->memo, &bytes, &entries, &hits, &misses);
        char *more = hk__asprintf("%s# HELP hubkern_answer_memo_total Answers looked up in the memo of finished answers, by outcome.\n"
                                  "# TYPE hubkern_answer_memo_total counter\n"
                                  "hubkern_answer_memo_total{result=\"hit\"} %llu\nhubkern_answer_memo_total{result=\"miss\"} %llu\n"
                                  "# HELP hubkern_answer_memo_bytes Bytes of finished answers kept (headers estimated).\n"
                                  "# TYPE hubkern_answer_memo_bytes gauge\nhubkern_answer_memo_bytes %zu\n",
                                  text, (unsigned long long)hits, (unsigned long long)misses, bytes);
        free(text);
        text = more;
    }
    if (text && srv->up) { /* the memo's bound (--upstream-memo-bytes), the queue's depth, the kept verdicts' use */
        const srv_metrics *m = &srv->metrics;
        char *more = hk__asprintf("%s# HELP hubkern_upstream_memo_bytes Bytes of passed-through answers held in memory.\n"
                                  "# TYPE hubkern_upstream_memo_bytes gauge\nhubkern_upstream_memo_bytes %llu\n"
                                  "# HELP hubkern_upstream_queue Distinct upstream misses in flight (running or queued).\n"
                                  "# TYPE hubkern_upstream_queue gauge\nhubkern_upstream_queue %u\n"
                                  "# HELP hubkern_rev_verdict_total Revision steps by how their freshness was known: "
                                  "kept (in memory, no file-system work), checked (by the file system), dropped (the "
                                  "store lacked what a kept verdict passed: checked again).\n"
                                  "# TYPE hubkern_rev_verdict_total counter\n"
                                  "hubkern_rev_verdict_total{result=\"kept\"} %llu\n"
                                  "hubkern_rev_verdict_total{result=\"checked\"} %llu\n"
                                  "hubkern_rev_verdict_total{result=\"dropped\"} %llu\n",
                                  text, (unsigned long long)srv_up_memo_bytes(srv->up), srv_up_queue_depth(srv->up),
                                  (unsigned long long)atomic_load(&m->rev_kept),
                                  (unsigned long long)atomic_load(&m->rev_checked),
                                  (unsigned long long)atomic_load(&m->rev_dropped));
        free(text);
        text = more;
    }
    if (!text) return MHD_NO;
    size_t len = strlen(text);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    return srv_queue(c, ctx, 200, r, len);
}
