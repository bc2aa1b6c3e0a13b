/* Names are checked where they enter (issue 21, "parse, don't validate"): the cache's path makers
 * refuse a name that would leave its folder, hk_cache_repo_dir refuses what is not a repo id, and
 * every edge that takes a repo id or revision from outside (the public API, metadata.json
 * kernel-depends, kernels.lock) refuses a bad one with its own error, before any path or URL is
 * made of it. Each hostile name is tried at every edge, as a class, not one case. */
#include "support.h"

#include "cache/cache_internal.h"
#include "hubkern.h"
#include "kernel/kernel_internal.h"
#include "util/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C40 "0123456789abcdef0123456789abcdef01234567"

/* Names no edge may take as a revision (each would leave refs/, break a URL or a git ref rule). */
static const char *const bad_revs[] = {
    "", "..", "../x", "a/../b", "/abs", "a//b", "a/", ".hidden", "a/.b", "-opt", "a b", "a~1", "a^", "a:b",
    "a?b", "a*b", "a[b", "a\\b", "x@{1}", "x.lock", "x.", "a\x01z", "a\x7fz", "x%2F..%2Fy",
    "a%2Fb", "\xc0\xae\xc0\xae", "\xff", "@", "x/y.lock/z",
};
#define N_BAD_REVS (sizeof bad_revs / sizeof *bad_revs)

/* Can s be written raw between JSON quotes? */
static int json_plain(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '\\' || *s == '"') return 0;
    return 1;
}
static const char *const good_revs[] = {"main", "v1", "v10", "refs/pr/1", "v1.0.2", "release/2026-12", C40,
                                        "feature_x", "caf\xc3\xa9"};

/* Repo ids no edge may take as a kernel repo. */
static const char *const bad_repos[] = {"", "org", "org/", "/name", "org/x/../../other", "org/x/y", "org/..",
                                        "../org/x", "org/.x", "org/x.", "org/a--b", "org/a..b", "or g/x",
                                        "org/x%2F..", "org/x\\y", "org/\x01"};

static void test_revision_rule(void) {
    for (size_t i = 0; i < N_BAD_REVS; i++) {
        if (hk__revision_valid(bad_revs[i])) fprintf(stderr, "accepted revision '%s'\n", bad_revs[i]);
        CHECK(!hk__revision_valid(bad_revs[i]));
    }
    CHECK(!hk__revision_valid(NULL));
    for (size_t i = 0; i < sizeof good_revs / sizeof *good_revs; i++) CHECK(hk__revision_valid(good_revs[i]));
    char longrev[300];
    memset(longrev, 'a', sizeof longrev - 1);
    longrev[sizeof longrev - 1] = '\0';
    CHECK(!hk__revision_valid(longrev));
}

static void test_cache_paths(void) {
    const char *rd = "/c/kernels--org--x";
    char *p = hk__cache_snapshot_path(rd, C40, "build/v/metadata.json");
    CHECK(p && strcmp(p, "/c/kernels--org--x/snapshots/" C40 "/build/v/metadata.json") == 0);
    free(p);
    p = hk_cache_variant_entry(C40, "torch-universal"); /* relative to the repo folder, as findings name it */
    CHECK(p && strcmp(p, "snapshots/" C40 "/build/torch-universal") == 0);
    hk_free(p);
    static const char *const bad_commits[] = {"main", "../" C40, C40 "/..", "0123456789ABCDEF0123456789abcdef01234567", ""};
    for (size_t i = 0; i < sizeof bad_commits / sizeof *bad_commits; i++) {
        CHECK(hk__cache_snapshot_path(rd, bad_commits[i], NULL) == NULL);
        CHECK(hk_last_error_code() == HK_ERR_UNSAFE_PATH);
        CHECK(hk__cache_variant_path(rd, bad_commits[i], "v") == NULL);
        CHECK(hk_cache_variant_entry(bad_commits[i], "v") == NULL && hk_last_error_code() == HK_ERR_UNSAFE_PATH);
        CHECK(hk__cache_no_exist_path(rd, bad_commits[i], "kernel-status.toml") == NULL);
    }
    static const char *const bad_rel[] = {"../x", "/etc/passwd", "a/../../b", "a//b", "", ".", "a\\b", "a/\x01"};
    for (size_t i = 0; i < sizeof bad_rel / sizeof *bad_rel; i++) {
        CHECK(hk__cache_snapshot_path(rd, C40, bad_rel[i]) == NULL);
        CHECK(hk_last_error_code() == HK_ERR_UNSAFE_PATH);
    }
    static const char *const bad_component[] = {"../x", "a/b", "..", ".", "", ".hidden", "/abs"};
    for (size_t i = 0; i < sizeof bad_component / sizeof *bad_component; i++) {
        CHECK(hk__cache_variant_path(rd, C40, bad_component[i]) == NULL);
        CHECK(hk_cache_variant_entry(C40, bad_component[i]) == NULL);
        CHECK(hk__cache_blob_path(rd, bad_component[i], NULL) == NULL);
        CHECK(hk__cache_staging_path(rd, bad_component[i]) == NULL);
        CHECK(hk_last_error_code() == HK_ERR_UNSAFE_PATH);
    }
    CHECK(hk__cache_blob_path(rd, C40, "/../x") == NULL);
    p = hk__cache_blob_path(rd, C40, ".incomplete");
    CHECK(p && strcmp(p, "/c/kernels--org--x/blobs/" C40 ".incomplete") == 0);
    free(p);
    static const char *const bad_refs[] = {"../x", "/abs", "a/../../b", ""};
    for (size_t i = 0; i < sizeof bad_refs / sizeof *bad_refs; i++) {
        CHECK(hk__cache_ref_path(rd, bad_refs[i]) == NULL);
        CHECK(hk_last_error_code() == HK_ERR_UNSAFE_PATH);
    }
    p = hk__cache_ref_path(rd, "refs/pr/1");
    CHECK(p && strcmp(p, "/c/kernels--org--x/refs/refs/pr/1") == 0);
    free(p);
    /* the public face: a repo folder only for a repo id, a snapshot only for a commit */
    for (size_t i = 0; i < sizeof bad_repos / sizeof *bad_repos; i++) {
        if (!strchr(bad_repos[i], '/') && bad_repos[i][0]) continue; /* "org": a model id, fine here */
        char *d = hk_cache_repo_dir("/c", HK_REPO_KERNEL, bad_repos[i]);
        if (d) fprintf(stderr, "repo folder for '%s': %s\n", bad_repos[i], d);
        CHECK(d == NULL);
        hk_free(d);
    }
    CHECK(hk_cache_snapshot_dir(rd, "../x") == NULL && hk_last_error_code() == HK_ERR_UNSAFE_PATH);
}

/* The public API refuses a bad revision or repo id before any work (no client, no network). */
static void test_api_edge(void) {
    for (size_t i = 0; i < N_BAD_REVS; i++) {
        if (!bad_revs[i][0]) continue; /* "" reads as no revision given */
        hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
        o.repo_id = "org/name";
        o.revision = bad_revs[i];
        o.hub_options.endpoint = "http://127.0.0.1:9";
        hk_kernel *k = NULL;
        CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG);
        CHECK(k == NULL && strstr(hk_last_error(), "revision"));
        hk_pull_spec s = HK_PULL_SPEC_INIT;
        s.repo_id = "org/name";
        s.revision = bad_revs[i];
        hk_hub_options ho = HK_HUB_OPTIONS_INIT;
        ho.endpoint = "http://127.0.0.1:9";
        ho.cache_dir = hk_test_tmpdir();
        hk_hub *hub = NULL;
        CHECK_RC(hk_hub_new(&hub, &ho), HK_OK);
        char *r = NULL, *rv = NULL, *c = NULL;
        CHECK_RC(hk_hub_resolve_spec(&r, &rv, &c, hub, &s), HK_ERR_INVALID_ARG);
        hk_pull_result *pr = NULL;
        CHECK_RC(hk_hub_pull(&pr, hub, &s), HK_ERR_INVALID_ARG);
        CHECK(pr == NULL);
        hk_hub_free(hub);
    }
    for (size_t i = 0; i < sizeof bad_repos / sizeof *bad_repos; i++) {
        hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
        o.repo_id = bad_repos[i];
        o.kernel_version = 1;
        o.no_local_kernels = 1;
        o.hub_options.endpoint = "http://127.0.0.1:9";
        hk_kernel *k = NULL;
        CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG);
        /* the lock writer's edge too ("org" alone reached an org split that needs the '/') */
        hk_lockfile *lf = NULL;
        CHECK_RC(hk_lockfile_new(&lf), HK_OK);
        if (lf) CHECK_RC(hk_lockfile_add_tree(lf, &o), HK_ERR_INVALID_ARG);
        hk_lockfile_free(lf);
    }
}

/* A variant name a caller gives: one component of the path rule, not hidden, refused before any
 * work by hk_get_kernel and by a pull. */
static void test_variant_edge(void) {
    char longname[300];
    memset(longname, 'v', 256);
    longname[256] = '\0';
    const char *bad[] = {"", ".", "..", ".hidden", "a/b", "/abs", longname, "\xc0\xae", "\xff", "a\\b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(!hk__variant_name_valid(bad[i]));
        hk_get_kernel_options o = HK_GET_KERNEL_OPTIONS_INIT;
        o.repo_id = "org/name";
        o.kernel_version = 1;
        o.variant = bad[i];
        o.no_local_kernels = 1;
        o.hub_options.endpoint = "http://127.0.0.1:9";
        hk_kernel *k = NULL;
        if (bad[i][0]) CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG);
    }
    CHECK(hk__variant_name_valid("torch-universal") && hk__variant_name_valid("tvm-ffi01-cu128-x86_64-linux"));
}

/* metadata.json kernel-depends and kernels.lock: where a dependency's names enter. */
static void test_document_edges(void) {
    for (size_t i = 0; i < sizeof bad_repos / sizeof *bad_repos; i++) {
        if (!bad_repos[i][0] || !json_plain(bad_repos[i])) continue; /* "no repo-id" has its own message */
        char *md = hk__asprintf("{\"name\":\"xk\",\"id\":\"_x_1\",\"version\":1,\"license\":\"MIT\",\"python-depends\":[],"
                                "\"backend\":{\"type\":\"cpu\"},\"kernel-depends\":[{\"repo-id\":\"%s\",\"version\":1}]}",
                                bad_repos[i]);
        hk_metadata_owned m;
        int rc = hk__metadata_parse(&m, md, strlen(md), "metadata.json");
        if (rc == HK_OK) {
            fprintf(stderr, "kernel-depends took repo '%s'\n", bad_repos[i]);
            hk__metadata_free(&m);
        }
        CHECK(rc == HK_ERR_PARSE && strstr(hk_last_error(), "repo id"));
        free(md);
    }
    for (size_t i = 0; i < sizeof bad_repos / sizeof *bad_repos; i++) {
        if (!json_plain(bad_repos[i])) continue;
        char *lock = hk__asprintf("[{\"dependency\":{\"repo-id\":\"%s\",\"version\":1},"
                                  "\"lock\":{\"commit\":\"" C40 "\"}}]", bad_repos[i]);
        hk_lockfile *lf = NULL;
        int rc = hk_lockfile_parse(&lf, lock, strlen(lock));
        if (rc == HK_OK) fprintf(stderr, "kernels.lock took repo '%s'\n", bad_repos[i]);
        CHECK(rc == HK_ERR_PARSE && lf == NULL);
        hk_lockfile_free(lf);
        free(lock);
    }
    for (size_t i = 0; i < N_BAD_REVS; i++) {
        if (!bad_revs[i][0] || !json_plain(bad_revs[i])) continue; /* written raw into JSON below */
        char *md = hk__asprintf("{\"name\":\"xk\",\"id\":\"_x_1\",\"version\":1,\"license\":\"MIT\",\"python-depends\":[],"
                                "\"backend\":{\"type\":\"cpu\"},\"kernel-depends\":[{\"repo-id\":\"org/dep\","
                                "\"revision\":\"%s\"}]}", bad_revs[i]);
        hk_metadata_owned m;
        int rc = hk__metadata_parse(&m, md, strlen(md), "metadata.json");
        if (rc == HK_OK) hk__metadata_free(&m);
        CHECK(rc == HK_ERR_PARSE && strstr(hk_last_error(), "revision"));
        char *lock = hk__asprintf("[{\"dependency\":{\"repo-id\":\"org/dep\",\"revision\":\"%s\"},"
                                  "\"lock\":{\"commit\":\"" C40 "\"}}]", bad_revs[i]);
        hk_lockfile *lf = NULL;
        rc = hk_lockfile_parse(&lf, lock, strlen(lock));
        if (rc == HK_OK) fprintf(stderr, "kernels.lock took revision '%s'\n", bad_revs[i]);
        CHECK(rc == HK_ERR_PARSE && lf == NULL);
        hk_lockfile_free(lf);
        free(lock);
        free(md);
    }
}

int main(void) {
    test_variant_edge();
    test_revision_rule();
    test_cache_paths();
    test_api_edge();
    test_document_edges();
    return hk_test_finish();
}
