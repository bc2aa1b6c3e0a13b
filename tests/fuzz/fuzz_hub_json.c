/* The Hub's answers through the real client (client/refs.c, tree.c, trust.c, status_toml.c,
 * pull.c, download.c): the network is the fake Hub of fake_hub.h. Input: line 1 = the operation
 * (0 versions, 1 resolve v1, 2 list variants, 3 resolve spec: refs + kernel-status.toml + trust,
 * 4 pull of one variant at a commit, 5 trust check); then answers separated by a line "%%", each
 * "<status>\n<header lines>\n\n<body>". Request i gets answer i (the last one repeats). */
#include "fake_hub.h"
#include "fuzz_util.h"
#include "hubkern/hub.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <strings.h>

#define COMMIT "0123456789abcdef0123456789abcdef01234567"

static int verbose; /* HK_FUZZ_VERBOSE=1: print each request and outcome (for writing seeds) */
static const uint8_t *cur;
static size_t cur_size;
static hk_hub *hub;
static char cache[600];

static void answer(hk_strbuf *out, unsigned index, const char *request_line) {
    if (verbose) fprintf(stderr, "  request %u: %s\n", index, request_line);
    /* skip the op line, then `index` separators (stay on the last answer) */
    const char *s = (const char *)cur, *end = s + cur_size;
    const char *p = memchr(s, '\n', cur_size);
    p = p ? p + 1 : end;
    for (unsigned i = 0; i < index; i++) {
        const char *sep = NULL;
        for (const char *q = p; q + 3 <= end; q++) {
            if (q[0] == '%' && q[1] == '%' && q[2] == '\n' && (q == p || q[-1] == '\n')) {
                sep = q;
                break;
            }
        }
        if (!sep) break;
        p = sep + 3;
    }
    const char *a_end = p;
    while (a_end + 3 <= end && !(a_end[0] == '%' && a_end[1] == '%' && a_end[2] == '\n' && (a_end == p || a_end[-1] == '\n')))
        a_end++;
    if (a_end + 3 > end) a_end = end;
    else if (a_end > p) a_end--; /* the newline before "%%" belongs to the separator */
    int status = 200;
    const char *nl = memchr(p, '\n', (size_t)(a_end - p));
    if (nl) {
        int v = 0; /* the input is not NUL-terminated: no atoi */
        for (const char *d = p; d < nl && d < p + 3 && *d >= '0' && *d <= '9'; d++) v = v * 10 + (*d - '0');
        if (v >= 100 && v <= 599) status = v;
        p = nl + 1;
    }
    /* header lines up to the first empty line, then the body */
    const char *head = p, *q = p;
    while (q < a_end && *q != '\n') {
        const char *e = memchr(q, '\n', (size_t)(a_end - q));
        q = e ? e + 1 : a_end;
    }
    const char *body = q < a_end ? q + 1 : a_end;
    /* Folded header lines (a line starting with a blank) are dropped when the libcurl in use is
     * older than 8.14: 7.88.1 itself reads freed memory on them (tests/fuzz/findings/
     * hub_json-libcurl-uaf, README), which a fuzzer finds within seconds and which would otherwise
     * hide everything behind it. With 8.14 they reach the client. */
    static _Thread_local char kept[65536];
    const bool drop_folded = curl_version_info(CURLVERSION_NOW)->version_num < 0x080e00;
    size_t nk = 0;
    for (const char *l = head; l < q && nk < sizeof kept;) {
        const char *e = memchr(l, '\n', (size_t)(q - l));
        const char *next = e ? e + 1 : q;
        size_t n = (size_t)(next - l);
        if ((!drop_folded || (*l != ' ' && *l != '\t')) && nk + n <= sizeof kept) {
            memcpy(kept + nk, l, n);
            nk += n;
        }
        l = next;
    }
    hk_fake_response(out, status, kept, nk, body, (size_t)(a_end - body));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    verbose = getenv("HK_FUZZ_VERBOSE") != NULL;
    const char *endpoint = hk_fake_hub_start(answer);
    snprintf(cache, sizeof cache, "%s/cache", hk_fuzz_dir("hubjson"));
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.endpoint = endpoint;
    o.cache_dir = cache;
    o.offline = 0;
    o.token = "hf_fuzz";
    o.max_retries = 1;
    o.etag_timeout_s = 5;
    o.download_timeout_s = 5;
    o.max_parallel = 1; /* one transfer at a time: answers are handed out in request order */
    o.max_listing_entries = 10000;
    o.max_listing_bytes = 1u << 20;
    o.freshness_s = -1; /* every input is parsed: no answer memoised from the one before */
    if (hk_hub_new(&hub, &o) != HK_OK) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 18)) return 0;
    cur = data;
    cur_size = size;
    atomic_store(&hk_fake_count, 0);
    int op = size ? (data[0] - '0') : 0;
    switch (op) {
    case 0: {
        hk_hub_version_list *l = NULL;
        if (hk_hub_list_versions(&l, hub, "org/relu") == HK_OK) {
            for (size_t i = 0; i < hk_hub_version_list_count(l); i++) {
                if (!hk_hub_version_list_commit(l, i)) abort();
            }
            hk_hub_version_list_free(l);
        }
        break;
    }
    case 1: {
        char *c = NULL;
        if (hk_hub_resolve(&c, hub, "org/relu", 1, NULL) == HK_OK) {
            size_t n = strlen(c);
            if ((n != 40 && n != 64) || !hk__is_hex(c, n)) abort(); /* only a commit id comes back */
        }
        hk_free(c);
        break;
    }
    case 2: {
        char **v = NULL;
        size_t n = 0;
        if (hk_hub_list_variants(&v, &n, hub, "org/relu", COMMIT) == HK_OK) {
            for (size_t i = 0; i < n; i++) {
                if (!hk__path_is_safe_relative(v[i]) || strchr(v[i], '/')) abort(); /* one safe name */
            }
            hk_hub_strv_free(v);
        }
        break;
    }
    case 3: {
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = "org/relu";
        s.revision = "main";
        char *repo = NULL, *rev = NULL, *commit = NULL;
        (void)hk_hub_resolve_spec(&repo, &rev, &commit, hub, &s);
        hk_free(repo);
        hk_free(rev);
        hk_free(commit);
        break;
    }
    case 4: {
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = "org/relu";
        s.revision = COMMIT;
        s.variant = "torch-universal";
        s.trust_remote_code = 1;
        hk_pull_result *r = NULL;
        if (hk_hub_pull(&r, hub, &s) == HK_OK) {
            for (size_t i = 0; i < hk_pull_result_file_count(r); i++) {
                if (!hk__path_is_safe_relative(hk_pull_result_file(r, i))) abort();
            }
        }
        hk_pull_result_free(r);
        break;
    }
    default: {
        int trusted = 0;
        (void)hk_hub_check_trust(&trusted, hub, "org");
        break;
    }
    }
    if (verbose) fprintf(stderr, "op %d after %u requests: %s\n", op, atomic_load(&hk_fake_count), hk_last_error());
    hk__rmtree(cache);
    return 0;
}
