/* The public cache API (hubkern/cache.h) as a program sees it: options versions (a wrong one is
 * HK_ERR_INVALID_ARG with a message), defaults, argument checks, report accessors, repo types and
 * ids, the cache root, refs, bundles and receipts. Includes only public headers and the test
 * harness. */
#include "support.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMMIT "6666666666666666666666666666666666666666"

static void test_options_versions(void) {
    hk_cache_options o;
    memset(&o, 0xAB, sizeof o);
    CHECK_RC(hk_cache_options_init(&o, HK_CACHE_OPTIONS_VERSION), HK_OK);
    CHECK(o.version == HK_CACHE_OPTIONS_VERSION && o.cache_dir == NULL && o.repo_id == NULL && o.revision == NULL);
    CHECK(o.dry_run == 0 && o.detached == 0 && o.json == 0 && o.line_fn == NULL && o.line_userdata == NULL);
    CHECK(o.finding_fn == NULL && o.finding_userdata == NULL);
    /* a version 1 struct ends before finding_fn: init writes nothing past it, and a call reads
     * nothing past it (an older program's stack garbage there is never called) */
    memset(&o, 0xAB, sizeof o);
    CHECK_RC(hk_cache_options_init(&o, 1), HK_OK);
    CHECK(o.version == 1 && o.line_userdata == NULL);
    unsigned char past[sizeof o.finding_fn];
    memset(past, 0xAB, sizeof past);
    CHECK(memcmp(&o.finding_fn, past, sizeof past) == 0);
    const char *v1cache = hk_test_tmpdir();
    char v1repo[1024];
    snprintf(v1repo, sizeof v1repo, "%s/kernels--org--v1", v1cache);
    CHECK(mkdir(v1repo, 0755) == 0); /* no snapshots/: a problem to report */
    o.cache_dir = v1cache;
    hk_cache_report *r1 = NULL;
    CHECK_RC(hk_cache_verify(&r1, &o), HK_OK);
    CHECK(hk_cache_report_problems(r1) == 1);
    hk_cache_report_free(r1);
    CHECK(strcmp(hk_cache_finding_kind_name(HK_CACHE_PROBLEM), "problem") == 0);
    CHECK(strcmp(hk_cache_finding_kind_name(HK_CACHE_WOULD_REMOVE), "would_remove") == 0);
    CHECK(hk_cache_finding_kind_name((hk_cache_finding_kind)5) == NULL);
    CHECK_RC(hk_cache_options_init(&o, 0), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "hk_cache_options") != NULL);
    CHECK_RC(hk_cache_options_init(&o, HK_CACHE_OPTIONS_VERSION + 1), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_cache_options_init(NULL, HK_CACHE_OPTIONS_VERSION), HK_ERR_INVALID_ARG);

    /* every call checks the version on entry and hands back no report */
    hk_cache_options bad = HK_CACHE_OPTIONS_INIT;
    bad.cache_dir = hk_test_tmpdir();
    bad.repo_id = "org/x";
    bad.version = 99;
    int (*const calls[])(hk_cache_report **, const hk_cache_options *) = {hk_cache_ls, hk_cache_verify, hk_cache_prune,
                                                                          hk_cache_rm};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        hk_cache_report *rep = (hk_cache_report *)&bad; /* must be reset to NULL */
        hk_clear_error();
        CHECK_RC(calls[i](&rep, &bad), HK_ERR_INVALID_ARG);
        CHECK(rep == NULL);
        CHECK(strstr(hk_last_error(), "hk_cache_options has version 99") != NULL);
        CHECK(strstr(hk_last_error(), "hk_cache_options_init") != NULL);
    }

    hk_bundle_options b;
    CHECK_RC(hk_bundle_options_init(&b, HK_BUNDLE_OPTIONS_VERSION), HK_OK);
    CHECK(b.version == HK_BUNDLE_OPTIONS_VERSION && b.cache_dir == NULL && b.repo_type == HK_REPO_KERNEL);
    CHECK_RC(hk_bundle_options_init(&b, 2), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "hk_bundle_options") != NULL);
    hk_bundle_options badb = HK_BUNDLE_OPTIONS_INIT;
    badb.version = 0;
    hk_bundle_report *br = NULL;
    const char *ids[] = {"org/x"};
    CHECK_RC(hk_bundle_create(&br, "/nonexistent/x.tar", ids, 1, &badb), HK_ERR_INVALID_ARG);
    CHECK(br == NULL && strstr(hk_last_error(), "hk_bundle_options has version 0") != NULL);
    CHECK_RC(hk_bundle_extract(&br, "/nonexistent/x.tar", &badb), HK_ERR_INVALID_ARG);
    badb = (hk_bundle_options)HK_BUNDLE_OPTIONS_INIT;
    badb.repo_type = (hk_repo_type)42;
    CHECK_RC(hk_bundle_extract(&br, "/nonexistent/x.tar", &badb), HK_ERR_INVALID_ARG);
}

static int nlines;
static void count_line(void *ud, const char *line) {
    (void)ud;
    (void)line;
    nlines++;
}

static void test_calls_on_a_cache(void) {
    char *root = malloc(strlen(hk_test_tmpdir()) + 8);
    sprintf(root, "%s/cache", hk_test_tmpdir());
    hk_cache_options o = HK_CACHE_OPTIONS_INIT;
    o.cache_dir = root;
    /* a cache that does not exist is empty */
    hk_cache_report *rep = NULL;
    CHECK_RC(hk_cache_ls(&rep, &o), HK_OK);
    CHECK(rep != NULL && hk_cache_report_repos(rep) == 0 && hk_cache_report_bytes(rep) == 0);
    hk_cache_report_free(rep);
    CHECK_RC(hk_cache_verify(NULL, &o), HK_OK); /* the report is optional */
    CHECK(hk_last_error_code() == HK_OK);       /* HK_OK leaves no error set */
    o.repo_id = "org/absent";
    CHECK_RC(hk_cache_verify(&rep, &o), HK_ERR_NOT_FOUND);
    CHECK(rep == NULL);
    CHECK_RC(hk_cache_rm(&rep, &o), HK_ERR_NOT_FOUND);
    o.repo_id = NULL;
    CHECK_RC(hk_cache_rm(&rep, &o), HK_ERR_INVALID_ARG); /* rm needs a repo */
    CHECK(strstr(hk_last_error(), "repo_id") != NULL);

    /* one cached repo, made of a blob, a link and a ref, read back through the public calls */
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/pub");
    CHECK(repo != NULL && strstr(repo, "/kernels--org--pub") != NULL);
    char *p = malloc(strlen(repo) + 200);
    const char *blob = "b45ef6fec89518d314f546fd6c3025367b721684"; /* git blob sha1 of "Hello, World!" */
    sprintf(p, "%s/blobs/%s", repo, blob);
    hk_test_write(p, "Hello, World!");
    sprintf(p, "%s/snapshots/%s/build/v", repo, COMMIT);
    hk_test_write(strcat(p, "/keep"), "");
    unlink(p);
    sprintf(p, "%s/snapshots/%s/build/v/a.txt", repo, COMMIT);
    CHECK(symlink("../../../../blobs/b45ef6fec89518d314f546fd6c3025367b721684", p) == 0);
    sprintf(p, "%s/refs/v1", repo);
    hk_test_write(p, COMMIT);

    char *commit = NULL;
    CHECK_RC(hk_cache_resolve_ref(&commit, repo, "v1"), HK_OK);
    CHECK_STR(commit, COMMIT);
    hk_free(commit);
    CHECK_RC(hk_cache_resolve_ref(&commit, repo, "v2"), HK_ERR_NOT_FOUND);
    CHECK(commit == NULL);
    CHECK_RC(hk_cache_resolve_ref(&commit, repo, "../../etc"), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_cache_resolve_ref(NULL, repo, "v1"), HK_ERR_INVALID_ARG);

    o.line_fn = count_line;
    nlines = 0;
    CHECK_RC(hk_cache_ls(&rep, &o), HK_OK);
    CHECK(hk_cache_report_repos(rep) == 1 && hk_cache_report_refs(rep) == 1 && hk_cache_report_snapshots(rep) == 1);
    CHECK(hk_cache_report_bytes(rep) == 13 && nlines == 1);
    hk_cache_report_free(rep);
    CHECK_RC(hk_cache_verify(&rep, &o), HK_OK);
    CHECK(hk_cache_report_blobs(rep) == 1 && hk_cache_report_problems(rep) == 0);
    hk_cache_report_free(rep);
    o.dry_run = 1;
    o.detached = 1;
    CHECK_RC(hk_cache_prune(&rep, &o), HK_OK);
    CHECK(hk_cache_report_removed(rep) == 0 && hk_cache_report_removed_bytes(rep) == 0);
    hk_cache_report_free(rep);
    o.repo_id = "org/pub";
    o.revision = "v1";
    CHECK_RC(hk_cache_rm(&rep, &o), HK_OK); /* dry run: lists the snapshot and the ref */
    CHECK(hk_cache_report_removed(rep) == 2);
    hk_cache_report_free(rep);
    sprintf(p, "%s/refs/v1", repo);
    CHECK(access(p, F_OK) == 0);

    /* NULL reports read as zero */
    CHECK(hk_cache_report_repos(NULL) == 0 && hk_cache_report_problems(NULL) == 0 &&
          hk_cache_report_removed_bytes(NULL) == 0);
    hk_cache_report_free(NULL);

    /* bundles: create from this cache, list, extract into another */
    char *tar = malloc(strlen(hk_test_tmpdir()) + 16), *dst = malloc(strlen(hk_test_tmpdir()) + 8);
    sprintf(tar, "%s/pub.tar", hk_test_tmpdir());
    sprintf(dst, "%s/dst", hk_test_tmpdir());
    hk_bundle_options bo = HK_BUNDLE_OPTIONS_INIT;
    bo.cache_dir = root;
    const char *ids[] = {"org/pub"};
    hk_bundle_report *br = NULL;
    CHECK_RC(hk_bundle_create(&br, tar, ids, 1, &bo), HK_OK);
    CHECK(hk_bundle_report_repos(br) == 1 && hk_bundle_report_blobs_added(br) == 1 && hk_bundle_report_links(br) == 1);
    CHECK(hk_bundle_report_refs(br) == 1 && hk_bundle_report_bytes(br) == 13);
    hk_bundle_report_free(br);
    nlines = 0;
    CHECK_RC(hk_bundle_list(tar, NULL, NULL), HK_ERR_INVALID_ARG);
    bo.cache_dir = dst;
    CHECK_RC(hk_bundle_extract(&br, tar, &bo), HK_OK);
    CHECK(hk_bundle_report_blobs_added(br) == 1 && hk_bundle_report_blobs_present(br) == 0);
    hk_bundle_report_free(br);
    CHECK_RC(hk_bundle_extract(NULL, tar, &bo), HK_OK); /* again: already present, report optional */
    CHECK(hk_bundle_report_repos(NULL) == 0);
    hk_bundle_report_free(NULL);

    /* receipts: where they are, and forgetting one */
    char *rp = NULL;
    CHECK_RC(hk_cache_receipt_path(&rp, root, "org/pub", COMMIT, "v"), HK_OK);
    CHECK(rp != NULL && strstr(rp, "kernels--org--pub") != NULL && strstr(rp, COMMIT "/v.json") != NULL);
    hk_test_write(rp, "{}");
    CHECK_RC(hk_cache_receipt_forget(root, "org/pub", COMMIT, "v"), HK_OK);
    CHECK(access(rp, F_OK) != 0);
    CHECK_RC(hk_cache_receipt_forget(root, "org/pub", COMMIT, "v"), HK_OK); /* missing is fine */
    hk_free(rp);
    CHECK_RC(hk_cache_receipt_path(&rp, root, "org/pub", COMMIT, "../v"), HK_ERR_INVALID_ARG);
    CHECK(rp == NULL);
    CHECK_RC(hk_cache_receipt_path(&rp, root, "not a repo", COMMIT, "v"), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_cache_receipt_path(&rp, root, "org/pub", NULL, "v"), HK_ERR_INVALID_ARG);
    setenv("HUBKERN_VERIFY", "always", 1);
    CHECK(hk_receipts_enabled() == 0);
    unsetenv("HUBKERN_VERIFY");
    CHECK(hk_receipts_enabled() == 1);

    free(dst);
    free(tar);
    free(p);
    hk_free(repo);
    free(root);
}

static void test_names_and_root(void) {
    hk_repo_type t = HK_REPO_MODEL;
    CHECK_RC(hk_repo_type_parse(&t, "kernel"), HK_OK);
    CHECK(t == HK_REPO_KERNEL);
    CHECK_RC(hk_repo_type_parse(&t, "datasets"), HK_OK);
    CHECK(t == HK_REPO_DATASET);
    CHECK_RC(hk_repo_type_parse(&t, "repo"), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "model, dataset, space or kernel") != NULL);
    CHECK_RC(hk_repo_type_parse(&t, NULL), HK_ERR_INVALID_ARG);
    CHECK_STR(hk_repo_type_plural(HK_REPO_SPACE), "spaces");
    CHECK(hk_repo_type_plural((hk_repo_type)7) == NULL);
    CHECK(hk_repo_id_valid("org/name") == 1 && hk_repo_id_valid("name") == 1);
    CHECK(hk_repo_id_valid("a--b/c") == 0 && hk_repo_id_valid(NULL) == 0);
    CHECK(hk_cache_repo_dir(NULL, HK_REPO_KERNEL, "org/x") == NULL);
    CHECK(hk_last_error_code() == HK_ERR_INVALID_ARG);
    char *d = hk_cache_repo_dir("/r", HK_REPO_DATASET, "org/x");
    CHECK_STR(d, "/r/datasets--org--x");
    hk_free(d);

    char *root = NULL;
    setenv("KERNELS_CACHE", "/nonexistent/kc", 1);
    setenv("HF_HUB_CACHE", "/nonexistent/hf", 1);
    CHECK_RC(hk_cache_root(&root, NULL, HK_REPO_KERNEL), HK_OK);
    CHECK_STR(root, "/nonexistent/kc");
    hk_free(root);
    CHECK_RC(hk_cache_root(&root, NULL, HK_REPO_MODEL), HK_OK); /* KERNELS_CACHE is for kernels only */
    CHECK_STR(root, "/nonexistent/hf");
    hk_free(root);
    CHECK_RC(hk_cache_root(&root, "/nonexistent/explicit", HK_REPO_KERNEL), HK_OK);
    CHECK_STR(root, "/nonexistent/explicit");
    hk_free(root);
    unsetenv("KERNELS_CACHE");
    unsetenv("HF_HUB_CACHE");
    CHECK_RC(hk_cache_root(NULL, NULL, HK_REPO_KERNEL), HK_ERR_INVALID_ARG);
}

int main(void) {
    test_options_versions();
    test_calls_on_a_cache();
    test_names_and_root();
    return hk_test_finish();
}
