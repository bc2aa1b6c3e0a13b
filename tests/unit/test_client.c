/* Hub client pieces that need no server: etag normalisation, header parsing, Link pagination,
 * URL encoding / origin rules, back-off delays, option precedence, metadata.json digest checks,
 * and offline resolution from a hand-made cache (with an unreachable endpoint). */
#include "support.h"

#include "cache/cache_internal.h"
#include "client/client.h"
#include "util/strmap.h"
#include "hubkern/hub.h"
#include "internal.h"

#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void feed(hk_http_headers *h, const char *line) { hk__http_headers_feed(h, line, strlen(line)); }

static void test_etag(void) {
    struct {
        const char *in, *out;
    } v[] = {{"\"abc123\"", "abc123"},
             {"W/\"abc123\"", "abc123"},
             {"WW//\"deadbeef\"", "deadbeef"}, /* character-set strip of W and /, like Python */
             {"W/\"Wx\"", "Wx"},               /* a W after the quote stays */
             {"plain", "plain"},
             {"\"\"", ""}};
    for (size_t i = 0; i < HK_ARRAY_LEN(v); i++) {
        char *n = hk__etag_normalize(v[i].in);
        CHECK_STR(n, v[i].out);
        free(n);
    }
}

static void test_headers(void) {
    hk_http_headers h;
    hk__http_headers_init(&h);
    feed(&h, "HTTP/1.1 302 Found\r\n");
    feed(&h, "X-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n");
    feed(&h, "x-linked-etag:   \"aa\"  \r\n");
    feed(&h, "X-Linked-Size: 1234\r\n");
    feed(&h, "Content-Length: 341\r\n");
    feed(&h, "Location: https://cdn.example/x\r\n");
    feed(&h, "Link: <https://a/1>; rel=\"first\"\r\n");
    feed(&h, "Link: <https://a/2>; rel=\"next\"\r\n");
    CHECK_STR(h.x_repo_commit, "0123456789abcdef0123456789abcdef01234567");
    CHECK_STR(h.x_linked_etag, "\"aa\"");
    CHECK(h.x_linked_size == 1234);
    CHECK(h.content_length == 341);
    CHECK_STR(h.location, "https://cdn.example/x");
    char *next = hk__link_next(h.link);
    CHECK_STR(next, "https://a/2");
    free(next);
    /* a new status line (the next hop) forgets the previous response's headers */
    feed(&h, "HTTP/2 200\r\n");
    CHECK(h.x_repo_commit == NULL);
    CHECK(h.x_linked_size == -1);
    CHECK(h.location == NULL);
    feed(&h, "Retry-After: 7\r\n");
    feed(&h, "RateLimit: \"resolvers\";r=0;t=5\r\n");
    CHECK_STR(h.retry_after, "7");
    hk__http_headers_free(&h);
}

static void test_link(void) {
    char *n = hk__link_next("<http://127.0.0.1:9/api/kernels/o/n/tree/abc/build?cursor=xyz&recursive=true>; rel=\"next\"");
    CHECK_STR(n, "http://127.0.0.1:9/api/kernels/o/n/tree/abc/build?cursor=xyz&recursive=true");
    free(n);
    n = hk__link_next("<https://x/p1>; rel=\"prev\", <https://x/p3>; rel=next");
    CHECK_STR(n, "https://x/p3");
    free(n);
    CHECK(hk__link_next("<https://x/p1>; rel=\"prev\"") == NULL);
    CHECK(hk__link_next(NULL) == NULL);
}

static void test_urls(void) {
    char *e = hk__pct_encode("refs/pr/1", false);
    CHECK_STR(e, "refs%2Fpr%2F1");
    free(e);
    e = hk__pct_encode("build/a b/c+d.so", true);
    CHECK_STR(e, "build/a%20b/c%2Bd.so");
    free(e);
    CHECK(hk__url_same_origin("http://127.0.0.1:80/x", "http://127.0.0.1/y"));
    CHECK(hk__url_same_origin("https://HF.co/a", "https://hf.co:443/b"));
    CHECK(!hk__url_same_origin("http://127.0.0.1:8000/x", "http://127.0.0.1:8001/x"));
    CHECK(!hk__url_same_origin("http://127.0.0.1/x", "https://127.0.0.1/x"));
    CHECK(!hk__url_same_origin("http://127.0.0.1/x", "http://127.0.0.2/x"));
    char *r = hk__url_resolve("http://h:1/kernels/a/b/resolve/c/f", "/kernels/A/b/resolve/c/f");
    CHECK_STR(r, "http://h:1/kernels/A/b/resolve/c/f");
    free(r);
    r = hk__url_resolve("http://h:1/a/b", "https://cdn.example/blob?sig=1");
    CHECK_STR(r, "https://cdn.example/blob?sig=1");
    free(r);
    r = hk__url_rebase("https://huggingface.co/api/kernels/o/n/tree/c/build?cursor=2", "http://127.0.0.1:5000");
    CHECK_STR(r, "http://127.0.0.1:5000/api/kernels/o/n/tree/c/build?cursor=2");
    free(r);
    r = hk__url_rebase("https://huggingface.co/api/x?c=1", "http://127.0.0.1:5000/mirror/");
    CHECK_STR(r, "http://127.0.0.1:5000/mirror/api/x?c=1");
    free(r);
}

static void test_options_and_backoff(void) {
    const char *dir = hk_test_tmpdir();
    char *home = hk__path_join(dir, "hfhome");
    char *tokfile = hk__path_join(home, "token");
    hk_test_write(tokfile, "  hf_filetoken\n");
    setenv("HF_HOME", home, 1);
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    unsetenv("HF_HUB_OFFLINE");
    setenv("HF_ENDPOINT", "http://127.0.0.1:1///", 1);
    setenv("HUBKERN_RETRY_BASE_MS", "10", 1);
    setenv("HF_HUB_ETAG_TIMEOUT", "2.5", 1);
    hk_hub_options o;
    hk_hub_options_init(&o, HK_HUB_OPTIONS_VERSION);
    o.etag_timeout_s = 99; /* the environment wins, as in huggingface_hub */
    hk_hub *h = NULL;
    CHECK_RC(hk_hub_new(&h, &o), HK_OK);
    if (h) {
        CHECK_STR(hk_hub_endpoint(h), "http://127.0.0.1:1");
        CHECK_STR(h->token, "hf_filetoken");
        CHECK(h->etag_timeout_ms == 2500);
        CHECK(h->download_timeout_ms == 10000);
        CHECK(h->max_retries == 5);
        CHECK(h->user_agent && strstr(h->user_agent, "hubkern/") == h->user_agent);
        /* back-off: 1,2,4,8,8 x base; 429 honours RateLimit r=0 (t+1) then Retry-After (+1) */
        long want[] = {10, 20, 40, 80, 80, 80};
        for (int i = 0; i < 6; i++) CHECK(hk__retry_delay_ms(h, i, 503, NULL) == want[i]);
        hk_http_headers hd;
        hk__http_headers_init(&hd);
        feed(&hd, "Retry-After: 3\r\n");
        CHECK(hk__retry_delay_ms(h, 0, 429, &hd) == 40);
        feed(&hd, "RateLimit: \"resolvers\";r=0;t=5\r\n");
        CHECK(hk__retry_delay_ms(h, 0, 429, &hd) == 60);
        hk__http_headers_free(&hd);
        hk__http_headers_init(&hd);
        feed(&hd, "Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n"); /* HTTP-dates are ignored, like Python */
        CHECK(hk__retry_delay_ms(h, 1, 429, &hd) == 20);
        hk__http_headers_free(&hd);
        CHECK(hk__http_status_transient(429) && hk__http_status_transient(503) && !hk__http_status_transient(404));
        hk_hub_free(h);
    }
    setenv("HF_TOKEN", "hf_envtoken", 1);
    setenv("DO_NOT_TRACK", "1", 1);
    setenv("HF_HUB_OFFLINE", "yes", 1);
    CHECK_RC(hk_hub_new(&h, NULL), HK_OK);
    if (h) {
        CHECK_STR(h->token, "hf_envtoken");
        CHECK(h->user_agent == NULL); /* telemetry off: no User-Agent, like the kernels library */
        CHECK(hk_hub_is_offline(h));
        hk_hub_free(h);
    }
    setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1", 1);
    o.token = NULL;
    CHECK_RC(hk_hub_new(&h, &o), HK_OK);
    if (h) {
        CHECK(h->token == NULL);
        hk_hub_free(h);
    }
    o.token = "explicit";
    o.endpoint = "ftp://x";
    CHECK_RC(hk_hub_new(&h, &o), HK_ERR_INVALID_ARG);
    unsetenv("HF_HUB_DISABLE_IMPLICIT_TOKEN");
    unsetenv("DO_NOT_TRACK");
    unsetenv("HF_TOKEN");
    unsetenv("HF_HUB_OFFLINE");
    unsetenv("HF_HUB_ETAG_TIMEOUT");
    free(tokfile);
    free(home);
}

/* Write a variant with a correct metadata.json digest; returns the variant dir (caller frees). */
static char *make_variant(const char *base) {
    char *v = hk__path_join(base, "build/torch-cpu");
    char *f1 = hk__path_join(v, "__init__.py");
    char *f2 = hk__path_join(v, "sub/data.json");
    char *f3 = hk__path_join(v, "__pycache__/x.pyc"); /* skipped by the digest */
    hk_test_write(f1, "print('hi')\n");
    hk_test_write(f2, "{}");
    hk_test_write(f3, "junk");
    char b1[100], b2[100];
    hk__hash_file_b64(b1, sizeof b1, HK_HASH_SHA256, f1);
    hk__hash_file_b64(b2, sizeof b2, HK_HASH_SHA256, f2);
    char *meta = hk__asprintf("{\"name\":\"tk\",\"id\":\"_t\",\"version\":1,\"license\":\"MIT\",\"python-depends\":[],"
                             "\"backend\":{\"type\":\"cpu\"},\"digest\":{\"algorithm\":\"sha256\",\"files\":"
                             "{\"__init__.py\":\"%s\",\"sub/data.json\":\"%s\"}}}",
                             b1, b2);
    char *mp = hk__path_join(v, "metadata.json");
    hk_test_write(mp, meta);
    free(meta);
    free(mp);
    free(f1);
    free(f2);
    free(f3);
    return v;
}

static void test_digest(void) {
    char *base = hk__path_join(hk_test_tmpdir(), "digest");
    char *v = make_variant(base);
    bool has = false;
    uint64_t bytes = 0;
    CHECK_RC(hk__verify_variant_digest(&has, &bytes, v), HK_OK);
    CHECK(has);
    CHECK(bytes == 14);
    char *f1 = hk__path_join(v, "__init__.py");
    char *f2 = hk__path_join(v, "sub/data.json");
    char *f4 = hk__path_join(v, "extra.so");
    hk_test_write(f1, "print('HI')\n"); /* same size, other bytes */
    unlink(f2);
    hk_test_write(f4, "x");
    CHECK_RC(hk__verify_variant_digest(&has, &bytes, v), HK_ERR_DIGEST);
    const char *msg = hk_last_error();
    CHECK(strstr(msg, "3 violations") != NULL);
    CHECK(strstr(msg, "HashMismatch: __init__.py") != NULL);
    CHECK(strstr(msg, "MissingFile: sub/data.json") != NULL);
    CHECK(strstr(msg, "UnknownFile: extra.so") != NULL);
    /* unknown algorithm */
    char *mp = hk__path_join(v, "metadata.json");
    hk_test_write(mp, "{\"digest\":{\"algorithm\":\"md5\",\"files\":{}}}");
    CHECK_RC(hk__verify_variant_digest(&has, &bytes, v), HK_ERR_DIGEST);
    CHECK(strstr(hk_last_error(), "AlgorithmMismatch") != NULL);
    /* no digest: allowed (warning), per-file hashes still protect the download */
    hk_test_write(mp, "{\"name\":\"tk\"}");
    CHECK_RC(hk__verify_variant_digest(&has, &bytes, v), HK_OK);
    CHECK(!has);
    free(mp);
    free(f1);
    free(f2);
    free(f4);
    free(v);
    free(base);
}

static void test_offline(void) {
    const char *dir = hk_test_tmpdir();
    char *cache = hk__path_join(dir, "cache");
    const char *commit = "1111111111111111111111111111111111111111";
    char *repo = hk_cache_repo_dir(cache, HK_REPO_KERNEL, "org/kern");
    char *snap = hk__asprintf("%s/snapshots/%s", repo, commit);
    char *v = make_variant(snap);
    free(v);
    CHECK_RC(hk_cache_write_ref(repo, "v1", commit), HK_OK);
    hk_hub_options o;
    hk_hub_options_init(&o, HK_HUB_OPTIONS_VERSION);
    o.cache_dir = cache;
    o.offline = 1;
    o.endpoint = "http://127.0.0.1:1"; /* nothing listens: any network use would fail */
    hk_hub *h = NULL;
    CHECK_RC(hk_hub_new(&h, &o), HK_OK);
    hk_pull_spec s;
    hk_pull_spec_init(&s, HK_PULL_SPEC_VERSION);
    s.repo_id = "org/kern";
    s.kernel_version = 1;
    s.backend = "cpu"; /* the variant choice must not depend on this machine's GPU */
    char *vdir = NULL, *c = NULL, *var = NULL;
    CHECK_RC(hk_hub_fetch_variant(&vdir, &c, &var, h, &s), HK_OK);
    char *want = hk__asprintf("%s/build/torch-cpu", snap);
    CHECK_STR(vdir, want);
    CHECK_STR(c, commit);
    CHECK_STR(var, "torch-cpu");
    free(want);
    hk_free(vdir);
    hk_free(c);
    hk_free(var);
    CHECK(h->requests == 0);
    /* versions offline come from refs/vN */
    hk_hub_version_list *vs = NULL;
    CHECK_RC(hk_hub_list_versions(&vs, h, "org/kern"), HK_OK);
    size_t n = hk_hub_version_list_count(vs);
    CHECK(n == 1 && vs && hk_hub_version_list_number(vs, 0) == 1 && strcmp(hk_hub_version_list_commit(vs, 0), commit) == 0);
    hk_hub_version_list_free(vs);
    /* a version that is not cached: a clear offline error naming it */
    s.kernel_version = 2;
    hk_pull_result *r = NULL;
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_ERR_OFFLINE);
    CHECK(strstr(hk_last_error(), "version 2") != NULL && strstr(hk_last_error(), "refs/v2") != NULL);
    CHECK(strstr(hk_last_error(), "cached versions: 1") != NULL);
    /* a commit that is cached resolves without refs */
    s.kernel_version = -1;
    s.revision = commit;
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_OK);
    if (r) {
        CHECK(hk_pull_result_offline(r));
        CHECK(hk_pull_result_file_count(r) == 3); /* __init__.py, metadata.json, sub/data.json; not __pycache__ */
        hk_pull_result_free(r);
    }
    s.revision = "main";
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_ERR_OFFLINE);
    CHECK(strstr(hk_last_error(), "refs/main") != NULL);
    /* audit: hk_hub_resolve takes revisions under the one revision rule, as a pull spec does */
    const char *no_revisions[] = {"main.lock", "a%2Fb", "x:y", "main@{1}", "a/.b", "-x", "a b"};
    for (size_t i = 0; i < sizeof no_revisions / sizeof *no_revisions; i++) {
        char *got = NULL;
        CHECK_RC(hk_hub_resolve(&got, h, "org/kern", -1, no_revisions[i]), HK_ERR_INVALID_ARG);
        CHECK(got == NULL);
    }
    /* a ref with bytes after its commit is damaged, not read as that commit */
    {
        char *bad = hk__asprintf("%s/refs/damaged", repo);
        hk_test_write(bad, "1111111111111111111111111111111111111111 trailing garbage");
        char *got = NULL;
        CHECK_RC(hk_hub_resolve(&got, h, "org/kern", -1, "damaged"), HK_ERR_PARSE);
        CHECK(got == NULL && strstr(hk_last_error(), "refs/damaged") != NULL);
        hk_test_write(bad, "1111111111111111111111111111111111111111\n"); /* git's newline is fine */
        CHECK_RC(hk_hub_resolve(&got, h, "org/kern", -1, "damaged"), HK_OK);
        CHECK_STR(got, commit);
        hk_free(got);
        free(bad);
    }
    /* the wrong variant name */
    s.revision = commit;
    s.variant = "tvm-ffi01-cu130-x86_64-linux";
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_ERR_NO_VARIANT);
    /* both version and revision */
    s.variant = NULL;
    s.kernel_version = 1;
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_ERR_INVALID_ARG);
    CHECK(h->requests == 0);
    hk_hub_free(h);
    free(snap);
    free(repo);
    free(cache);
}

/* Link targets from a server: raw bytes >= 0x80, controls, space and " < > \ ^ ` { | } never reach
 * a request line unencoded; what is already encoded (and reserved characters) stays. */
static void test_escape_unsafe(void) {
    char *e = hk__url_escape_unsafe("/api/x?cursor=\xe9\x01 \"<>\\^`{|}&a=%41#f");
    CHECK_STR(e, "/api/x?cursor=%E9%01%20%22%3C%3E%5C%5E%60%7B%7C%7D&a=%41#f");
    free(e);
    e = hk__url_escape_unsafe("https://h:1/p?q=1&r=a/b");
    CHECK_STR(e, "https://h:1/p?q=1&r=a/b");
    free(e);
}

static void test_strmap(void) {
    hk_strmap m;
    hk__strmap_init(&m);
    char keys[1000][8];
    for (int i = 0; i < 1000; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        CHECK_RC(hk__strmap_put(&m, keys[i], (size_t)i), HK_OK);
    }
    size_t v = 0;
    CHECK(hk__strmap_get(&m, "k0", &v) && v == 0);
    CHECK(hk__strmap_get(&m, "k999", &v) && v == 999);
    CHECK(hk__strmap_get(&m, "k500", &v) && v == 500);
    CHECK(!hk__strmap_get(&m, "k1000", NULL));
    CHECK(m.n == 1000 && m.cap >= 2000);
    hk__strmap_free(&m);
    CHECK(!hk__strmap_get(&m, "k0", NULL));
}

/* hk_init / hk_shutdown are counted; the versioned structs are checked on entry; the version list
 * and the allocated commit of the ABI (issue 11). */
static void test_init_and_abi(void) {
    CHECK_RC(hk_init(), HK_OK);
    CHECK_RC(hk_init(), HK_OK);
    CHECK(hk_shutdown() == 1);
    CHECK(hk_shutdown() == 0);
    CHECK(hk_shutdown() == 0); /* unpaired: nothing happens */
    hk_hub_options o;
    CHECK_RC(hk_hub_options_init(&o, HK_HUB_OPTIONS_VERSION + 1), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "hk_hub_options") != NULL);
    CHECK_RC(hk_hub_options_init(&o, HK_HUB_OPTIONS_VERSION), HK_OK);
    CHECK(o.version == HK_HUB_OPTIONS_VERSION && o.offline == -1 && o.max_retries == -1 && !o.endpoint);
    hk_hub_options lit = HK_HUB_OPTIONS_INIT;
    CHECK(lit.version == o.version && lit.offline == o.offline && lit.max_retries == o.max_retries &&
          lit.max_parallel == 0 && !lit.token && lit.max_listing_entries == 0 && lit.max_listing_bytes == 0 &&
          lit.request_timeout_s == 0 && lit.pull_timeout_s == 0);
    CHECK(lit.freshness_s == 0 && o.freshness_s == 0);
    /* a program built against version 2 (no freshness_s): its shorter struct is not overrun */
    memset(&o, 0x5a, sizeof o);
    CHECK_RC(hk_hub_options_init(&o, 2), HK_OK);
    CHECK(o.version == 2 && o.request_timeout_s == 0 && !o.signature_policies);
    CHECK(((const unsigned char *)&o)[offsetof(hk_hub_options, freshness_s)] == 0x5a);
    /* a program built against version 1 (no deadline fields) is still accepted */
    CHECK_RC(hk_hub_options_init(&o, 1), HK_OK);
    CHECK(o.version == 1);
    hk_hub *h = NULL;
    o.version = 0;
    CHECK_RC(hk_hub_new(&h, &o), HK_ERR_INVALID_ARG);
    CHECK(h == NULL);
    CHECK_RC(hk_init(), HK_OK);
    o.version = HK_HUB_OPTIONS_VERSION;
    o.offline = 1;
    o.endpoint = "http://127.0.0.1:1";
    o.cache_dir = hk_test_tmpdir();
    CHECK_RC(hk_hub_new(&h, &o), HK_OK);
    hk_pull_spec s;
    CHECK_RC(hk_pull_spec_init(&s, 7), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_pull_spec_init(&s, HK_PULL_SPEC_VERSION), HK_OK);
    hk_pull_spec slit = HK_PULL_SPEC_INIT;
    CHECK(slit.version == s.version && slit.kernel_version == -1 && s.kernel_version == -1 && !s.repo_id &&
          !s.revision && !s.variant && !s.all_variants && !s.trust_remote_code && !s.backend && !s.variant_families);
    s.repo_id = "org/none";
    s.kernel_version = 1;
    s.version = 99;
    hk_pull_result *r = NULL;
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "hk_pull_spec") != NULL);
    char *repo = NULL, *rev = NULL, *commit = NULL;
    CHECK_RC(hk_hub_resolve_spec(&repo, &rev, &commit, h, &s), HK_ERR_INVALID_ARG);
    s.version = HK_PULL_SPEC_VERSION;
    CHECK_RC(hk_hub_resolve_spec(&repo, &rev, &commit, h, &s), HK_ERR_OFFLINE);
    CHECK(repo == NULL && rev == NULL && commit == NULL);
    CHECK_RC(hk_hub_resolve(&commit, h, "org/none", -1, "0123456789abcdef0123456789abcdef01234567"), HK_OK);
    CHECK_STR(commit, "0123456789abcdef0123456789abcdef01234567");
    CHECK(hk_last_error_code() == HK_OK);
    hk_free(commit);
    hk_hub_version_list *vl = NULL;
    CHECK_RC(hk_hub_list_versions(&vl, h, "org/none"), HK_OK);
    CHECK(vl && hk_hub_version_list_count(vl) == 0);
    CHECK(hk_hub_version_list_number(vl, 0) == -1 && hk_hub_version_list_commit(vl, 0) == NULL);
    hk_hub_version_list_free(vl);
    CHECK(hk_hub_version_list_count(NULL) == 0);
    hk_hub_free(h);
    CHECK(hk_shutdown() == 0);
}

/* The libcurl versions an online hub warns about: 7.88.1 has the folded-header use-after-free,
 * 8.14.1 (the first found clean) and later do not. */
static void test_curl_version_warning(void) {
    CHECK(hk__curl_folded_header_risk(0x075801)); /* 7.88.1 */
    CHECK(hk__curl_folded_header_risk(0x080500)); /* 8.5.0: not shown clean */
    CHECK(hk__curl_folded_header_risk(0x080e00)); /* 8.14.0 */
    CHECK(!hk__curl_folded_header_risk(0x080e01)); /* 8.14.1 */
    CHECK(!hk__curl_folded_header_risk(0x081500)); /* 8.21.0 */
}

int main(void) {
    test_init_and_abi();
    test_curl_version_warning();
    test_escape_unsafe();
    test_strmap();
    test_etag();
    test_headers();
    test_link();
    test_urls();
    test_options_and_backoff();
    test_digest();
    test_offline();
    return hk_test_finish();
}
