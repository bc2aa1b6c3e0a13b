/* Benchmark submissions kept by a hubkern mirror (GET /api/kernels/<repo>/benchmarks, docs/serve.md
 * "Benchmarks"): one page, newest first, and the cursor of the next page from its Link header. */
#include "cache/cache_internal.h"
#include "client/http.h"
#include "client/url.h"
#include "hubkern/hub.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The page answer is at most the mirror's page bound (8 MiB of records) plus the brackets. */
#define BENCH_PAGE_MAX_BYTES ((size_t)9 << 20)

/* The cursor= value of a next-page URL (NULL when absent). */
static char *cursor_of(const char *url) {
    const char *q = strchr(url, '?');
    for (const char *p = q; p && *p; p = strchr(p + 1, '&')) {
        const char *kv = p + 1;
        if (strncmp(kv, "cursor=", 7) == 0) return hk__pct_decode(kv + 7, strcspn(kv + 7, "&#"), false);
    }
    return NULL;
}

HK_API int hk_hub_list_benchmarks(char **out_json, char **out_next_cursor, hk_hub *hub, const char *repo_id,
                                  unsigned limit, const char *cursor) {
    if (out_json) *out_json = NULL;
    if (out_next_cursor) *out_next_cursor = NULL;
    if (!out_json || !hub || !repo_id) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_list_benchmarks: NULL argument");
    if (!hk__kernel_repo_id_valid(repo_id))
        return hk__fail(HK_ERR_INVALID_ARG, "invalid repo id '%s' (expected org/name)", repo_id);
    if (hk_hub_is_offline(hub))
        return hk__fail(HK_ERR_OFFLINE, "benchmarks of %s: the client is offline", repo_id);
    hk_strbuf u;
    hk__sb_init(&u);
    hk__sb_printf(&u, "%s/api/kernels/%s/benchmarks", hk_hub_endpoint(hub), repo_id);
    char sep = '?';
    if (limit) {
        hk__sb_printf(&u, "%climit=%u", sep, limit);
        sep = '&';
    }
    if (cursor && *cursor) {
        hk__sb_printf(&u, "%ccursor=", sep);
        hk__sb_pct_encode(&u, cursor, false);
    }
    char *url = hk__sb_steal(&u);
    if (!url) return hk__fail(HK_ERR_NOMEM, "out of memory");
    hk_http_resp r;
    int rc = hk__http_get(&r, hub, url, BENCH_PAGE_MAX_BYTES);
    if (rc == HK_OK && (r.status < 200 || r.status > 299)) {
        char *what = hk__asprintf("benchmarks of %s", repo_id);
        rc = hk__http_fail(&r, what ? what : url);
        free(what);
    }
    if (rc == HK_OK) {
        *out_json = hk__strndup(r.body.data ? r.body.data : "", r.body.len);
        char *next = r.h.link ? hk__link_next(r.h.link) : NULL;
        if (next && out_next_cursor) *out_next_cursor = cursor_of(next);
        free(next);
        if (!*out_json) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    hk__http_resp_free(&r);
    free(url);
    if (rc == HK_OK) hk_clear_error();
    return rc;
}
