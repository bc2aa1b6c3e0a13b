/* The hub.h C API against an in-process mirror (hubkern_server on loopback): resolve, versions,
 * variants, trust, pull result accessors, fetch_variant, progress reports, cancellation from the
 * progress callback (HK_ERR_CANCELLED, no temp file left), and a 1-transfer pull. */
#include "support.h"

#include "cache/cache_internal.h"
#include "hubkern/hub.h"
#include "internal.h"
#include "mirror.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static char g_endpoint[128];
static char *g_store;

static void put(const char *dir, const char *rel, const char *content) {
    char *p = hk__path_join(dir, rel);
    hk_test_write(p, content);
    free(p);
}

static void put_big(const char *dir, const char *rel, size_t n) {
    char *p = hk__path_join(dir, rel);
    char *data = malloc(n + 1);
    for (size_t i = 0; i < n; i++) data[i] = (char)('a' + (i * 7919 % 26));
    data[n] = '\0';
    hk_test_write(p, data);
    free(data);
    free(p);
}

static void publish(const char *src, const char *branch) {
    const srv_publish_options lfs = {.lfs_threshold = 100000};
    hk_test_publish(g_store, src, "org/capi", branch, &lfs, NULL);
}

static hk_hub *new_hub(const char *cache, hk_progress_fn fn, void *ud, int parallel) {
    hk_hub_options o;
    hk_hub_options_init(&o, HK_HUB_OPTIONS_VERSION);
    o.endpoint = g_endpoint;
    o.cache_dir = cache;
    o.token = "";
    o.offline = 0;
    o.progress = fn;
    o.progress_userdata = ud;
    o.max_parallel = parallel;
    hk_hub *h = NULL;
    CHECK_RC(hk_hub_new(&h, &o), HK_OK);
    return h;
}

typedef struct prog {
    int calls;
    int cancel_after; /* 0: never */
    uint64_t last_done, total;
    int saw_verify;
} prog;

static int on_progress(void *ud, const hk_progress *p) {
    prog *g = ud;
    g->calls++;
    if (strcmp(p->stage, "download") == 0) {
        CHECK(p->done_bytes <= p->total_bytes);
        g->last_done = p->done_bytes;
        g->total = p->total_bytes;
    }
    if (strcmp(p->stage, "verify") == 0) g->saw_verify = 1;
    return g->cancel_after && g->calls >= g->cancel_after;
}

static int count_incomplete(const char *cache) {
    char *blobs = hk__asprintf("%s/kernels--org--capi/blobs", cache);
    DIR *d = opendir(blobs);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) n += strstr(de->d_name, ".incomplete") != NULL;
    if (d) closedir(d);
    free(blobs);
    return n;
}

/* hk_hub_resolve into a local buffer (the commit is allocated since the versioned API). */
static int resolve65(char out[65], hk_hub *h, const char *repo, int version, const char *revision) {
    char *c = NULL;
    int rc = hk_hub_resolve(&c, h, repo, version, revision);
    snprintf(out, 65, "%s", c ? c : "");
    hk_free(c);
    return rc;
}

int main(void) {
    setenv("HUBKERN_RETRY_BASE_MS", "10", 1);
    unsetenv("HF_HUB_OFFLINE");
    const char *tmp = hk_test_tmpdir();
    g_store = hk__path_join(tmp, "store");
    char *src = hk__path_join(tmp, "src");
    put(src, "build/torch-cpu/__init__.py", "x = 1\n");
    put(src, "build/torch-cpu/metadata.json", "{\"name\":\"capi\"}");
    put(src, "build/tvm-ffi01-cpu-x86_64-linux/__init__.py", "y = 1\n");
    put(src, "build/tvm-ffi01-cpu-x86_64-linux/same.txt", "same\n");
    put(src, "build/tvm-ffi01-cpu-x86_64-linux/copy/same.txt", "same\n"); /* one blob, two paths */
    put(src, "build/tvm-ffi01-cpu-x86_64-linux/metadata.json", "{\"name\":\"capi\"}");
    for (int i = 0; i < 4; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "build/tvm-ffi01-cpu-x86_64-linux/big%d.bin", i);
        put_big(src, rel, 3000000 + (size_t)i);
    }
    publish(src, "v1");
    publish(src, "v3");
    srv_server *srv = hk_test_start_mirror(g_store, "org", g_endpoint, sizeof g_endpoint - 1);
    if (!srv) return hk_test_finish();
    strcat(g_endpoint, "/"); /* a trailing '/' on the endpoint */

    char *cache = hk__path_join(tmp, "c1");
    hk_hub *h = new_hub(cache, NULL, NULL, 0);
    char want_ep[128];
    snprintf(want_ep, sizeof want_ep, "http://127.0.0.1:%u", srv_port(srv));
    CHECK_STR(hk_hub_endpoint(h), want_ep);
    char commit[65];
    CHECK_RC(resolve65(commit, h, "org/capi", 1, NULL), HK_OK);
    CHECK(strlen(commit) == 40);
    char c3[65];
    CHECK_RC(resolve65(c3, h, "org/capi", -1, "v3"), HK_OK);
    CHECK_RC(resolve65(c3, h, "org/capi", 2, NULL), HK_ERR_VERSION_NOT_FOUND);
    CHECK(strstr(hk_last_error(), "available versions: 1, 3") != NULL);
    CHECK_RC(resolve65(c3, h, "org/capi", 1, "v1"), HK_ERR_INVALID_ARG);
    CHECK_RC(resolve65(c3, h, "not a repo", 1, NULL), HK_ERR_INVALID_ARG);
    hk_hub_version_list *vs = NULL;
    CHECK_RC(hk_hub_list_versions(&vs, h, "org/capi"), HK_OK);
    size_t nv = hk_hub_version_list_count(vs);
    CHECK(nv == 2 && hk_hub_version_list_number(vs, 0) == 1 && hk_hub_version_list_number(vs, 1) == 3);
    hk_hub_version_list_free(vs);
    char **names = NULL;
    size_t nn = 0;
    CHECK_RC(hk_hub_list_variants(&names, &nn, h, "org/capi", commit), HK_OK);
    CHECK(nn == 2 && names && strcmp(names[0], "torch-cpu") == 0 && strcmp(names[1], "tvm-ffi01-cpu-x86_64-linux") == 0);
    CHECK(names && names[2] == NULL);
    hk_hub_strv_free(names);
    int trusted_flag = -1;
    CHECK_RC(hk_hub_check_trust(&trusted_flag, h, "org"), HK_OK);
    CHECK(trusted_flag == 1);
    CHECK_RC(hk_hub_check_trust(&trusted_flag, h, "someone"), HK_OK);
    CHECK(trusted_flag == 0);
    hk_hub_free(h);

    /* cancel from the progress callback: specific error, nothing partial left */
    prog g = {0, 2, 0, 0, 0};
    h = new_hub(cache, on_progress, &g, 1);
    hk_pull_spec s;
    hk_pull_spec_init(&s, HK_PULL_SPEC_VERSION);
    s.repo_id = "org/capi";
    s.kernel_version = 1;
    s.variant = "tvm-ffi01-cpu-x86_64-linux";
    hk_pull_result *r = NULL;
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_ERR_CANCELLED);
    CHECK(r == NULL);
    CHECK(count_incomplete(cache) == 0);
    char *ref = hk__asprintf("%s/kernels--org--capi/refs/v1", cache);
    CHECK(!hk__path_exists(ref));
    hk_hub_free(h);

    /* a full pull with one transfer at a time and progress reports */
    prog g2 = {0, 0, 0, 0, 0};
    h = new_hub(cache, on_progress, &g2, 1);
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_OK);
    if (r) {
        CHECK_STR(hk_pull_result_repo(r), "org/capi");
        CHECK_STR(hk_pull_result_revision(r), "v1");
        CHECK_STR(hk_pull_result_commit(r), commit);
        CHECK(hk_pull_result_variant_count(r) == 1);
        CHECK_STR(hk_pull_result_variant(r, 0), "tvm-ffi01-cpu-x86_64-linux");
        CHECK(hk_pull_result_variant(r, 1) == NULL);
        CHECK(strstr(hk_pull_result_variant_path(r, 0), "/snapshots/") != NULL);
        CHECK(hk_pull_result_file_count(r) == 8);
        CHECK(hk_pull_result_files_downloaded(r) <= 7); /* same.txt twice: one blob */
        CHECK(hk_pull_result_bytes_downloaded(r) >= 12000006);
        /* the blobs the cancelled pull finished are hashed again before they are reused, not fetched */
        CHECK(hk_pull_result_bytes_verified(r) >= hk_pull_result_bytes_downloaded(r));
        CHECK(!hk_pull_result_offline(r));
        char *copy = hk__asprintf("%s/copy/same.txt", hk_pull_result_variant_path(r, 0));
        char *data = NULL;
        CHECK_RC(hk__read_file(&data, NULL, copy, 100), HK_OK);
        CHECK_STR(data, "same\n");
        free(data);
        free(copy);
        hk_pull_result_free(r);
    }
    CHECK(g2.calls > 2 && g2.total >= 12000006 && g2.last_done == g2.total && g2.saw_verify);
    char *refdata = NULL;
    CHECK_RC(hk__read_file(&refdata, NULL, ref, 100), HK_OK);
    CHECK_STR(refdata, commit);
    free(refdata);
    hk_hub_free(h);

    /* fetch_variant: the loader's entry point; all_variants returns the first */
    h = new_hub(cache, NULL, NULL, 0);
    char *dir = NULL, *cm = NULL, *var = NULL;
    s.variant = "torch-cpu";
    CHECK_RC(hk_hub_fetch_variant(&dir, &cm, &var, h, &s), HK_OK);
    CHECK_STR(var, "torch-cpu");
    CHECK_STR(cm, commit);
    CHECK(dir && hk__str_ends_with(dir, "/build/torch-cpu"));
    hk_free(dir);
    hk_free(cm);
    hk_free(var);
    s.variant = "nope";
    CHECK_RC(hk_hub_fetch_variant(&dir, &cm, &var, h, &s), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "torch-cpu") != NULL);
    s.variant = "../x";
    CHECK_RC(hk_hub_pull(&r, h, &s), HK_ERR_INVALID_ARG);
    hk_hub_free(h);

    srv_stop(srv);
    free(ref);
    free(cache);
    free(src);
    free(g_store);
    return hk_test_finish();
}
