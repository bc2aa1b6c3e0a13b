/* Response headers as libcurl hands them to the client (client/http.c, url.c): every line fed to
 * hk__http_headers_feed, then the values the client acts on: Link rel="next" (resolved against
 * the page URL, rebased and escaped as the tree listing does), Retry-After / RateLimit delays and
 * ETag normalisation. */
#include "fuzz_util.h"
#include "client/client.h"

static hk_hub *hub;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    setenv("HUBKERN_RETRY_BASE_MS", "1000", 1);
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.endpoint = "http://127.0.0.1:9";
    o.cache_dir = hk_fuzz_dir("headers");
    o.offline = 1;
    o.token = "";
    if (hk_hub_new(&hub, &o) != HK_OK) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    hk_http_headers h;
    hk__http_headers_init(&h);
    /* lines as curl gives them: each with its CRLF */
    size_t start = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n' || i + 1 == size) {
            hk__http_headers_feed(&h, (const char *)data + start, i + 1 - start);
            start = i + 1;
        }
    }
    if (h.link) {
        char *next = hk__link_next(h.link);
        if (next) {
            char *abs = hk__url_resolve("http://127.0.0.1:9/api/kernels/org/x/tree/abc/build?cursor=1", next);
            char *reb = abs ? hk__url_rebase(abs, "http://127.0.0.1:9") : NULL;
            char *esc = reb ? hk__url_escape_unsafe(reb) : NULL;
            if (esc) {
                for (const unsigned char *p = (const unsigned char *)esc; *p; p++) {
                    if (*p <= 0x20 || *p >= 0x7f) abort(); /* escaped means sendable */
                }
            }
            free(esc);
            free(reb);
            free(abs);
            free(next);
        }
    }
    for (int attempt = 0; attempt < 6; attempt++) {
        long d = hk__retry_delay_ms(hub, attempt, 429, &h);
        if (d < 0 || d > 301L * 1000) abort(); /* bounded whatever the server says */
    }
    if (h.etag) free(hk__etag_normalize(h.etag));
    if (h.x_linked_etag) free(hk__etag_normalize(h.x_linked_etag));
    hk__http_headers_free(&h);
    return 0;
}
