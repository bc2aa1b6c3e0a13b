/* Issue 24 items 4-6 below the CLI: the plans of unfinished pulls (cache/pull_plan.c) that keep
 * their blobs from prune, the digest's missing-file count (cache/digest.c), versioned hk_pull_spec
 * (a version 1 struct is read and written only as far as it goes) and read-only clients. */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <hubkern.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <utime.h>

#define COMMIT "0123456789abcdef0123456789abcdef01234567"
#define BLOB_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define BLOB_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void test_plans(void) {
    const char *root = hk_test_tmpdir();
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/plan");
    const char *names[] = {BLOB_A, BLOB_B};
    CHECK_RC(hk__pull_plan_write(root, repo, COMMIT, names, 2), HK_OK);
    hk_pull_plans p;
    CHECK_RC(hk__pull_plans_load(&p, root, repo), HK_OK);
    CHECK(p.n == 2 && p.nstale == 0);
    CHECK(hk__pull_plans_name(&p, BLOB_A) && hk__pull_plans_name(&p, BLOB_B));
    CHECK(!hk__pull_plans_name(&p, "cccc"));
    hk__pull_plans_free(&p);
    /* a commit that is no commit id never becomes a path */
    CHECK_RC(hk__pull_plan_write(root, repo, "../../etc", names, 2), HK_ERR_UNSAFE_PATH);
    /* a week-old plan protects nothing and is listed for removal */
    char *path = hk__asprintf("%s/.locks/kernels--org--plan/hubkern-pulls/%s", root, COMMIT);
    struct utimbuf old = {time(NULL) - 8 * 24 * 3600, time(NULL) - 8 * 24 * 3600};
    CHECK(utime(path, &old) == 0);
    CHECK_RC(hk__pull_plans_load(&p, root, repo), HK_OK);
    CHECK(p.n == 0 && p.nstale == 1 && p.stale && strcmp(p.stale[0], path) == 0);
    hk__pull_plans_free(&p);
    hk__pull_plan_remove(root, repo, COMMIT);
    CHECK(!hk__path_exists(path));
    free(path);
    free(repo);
}

static void test_missing_files(void) {
    const char *root = hk_test_tmpdir();
    char *vdir = hk__asprintf("%s/v", root);
    char *meta = hk__asprintf("%s/metadata.json", vdir);
    char *one = hk__asprintf("%s/a.py", vdir);
    hk_test_write(meta, "{\"digest\": {\"algorithm\": \"sha256\", \"files\": {\"a.py\": \"x\", \"b.py\": \"y\"}}}");
    hk_test_write(one, "a\n");
    size_t missing = 9, listed = 9;
    char *first = NULL;
    CHECK_RC(hk__digest_missing_files(&missing, &listed, &first, vdir), HK_OK);
    CHECK(missing == 1 && listed == 2);
    CHECK_STR(first, "b.py");
    free(first);
    /* counted over what patterns choose on the repo path: a.py is there, b.py is not */
    const char *inc_a[] = {"build/v/a*", NULL}, *inc_all[] = {"*.py", NULL}, *exc_b[] = {"*/b.py", NULL};
    CHECK_RC(hk__digest_missing_chosen(&missing, &listed, &first, vdir, "build/v", inc_a, NULL), HK_OK);
    CHECK(missing == 0 && listed == 1 && first == NULL);
    CHECK_RC(hk__digest_missing_chosen(&missing, &listed, &first, vdir, "build/v", inc_all, NULL), HK_OK);
    CHECK(missing == 1 && listed == 2);
    CHECK_STR(first, "b.py");
    free(first);
    first = NULL;
    CHECK_RC(hk__digest_missing_chosen(&missing, &listed, &first, vdir, "build/v", NULL, exc_b), HK_OK);
    CHECK(missing == 0 && listed == 1);
    CHECK_RC(hk__digest_missing_chosen(&missing, &listed, &first, vdir, "build/v", exc_b, NULL), HK_OK);
    CHECK(missing == 1 && listed == 1);
    free(first);
    hk_test_write(meta, "{}");
    CHECK_RC(hk__digest_missing_files(&missing, &listed, NULL, vdir), HK_ERR_NOT_FOUND);
    free(one);
    free(meta);
    free(vdir);
}

static void test_spec_versions(void) {
    /* a version 1 spec ends before force_download: init writes nothing past it */
    unsigned char buf[sizeof(hk_pull_spec) + 16];
    memset(buf, 0xAB, sizeof buf);
    CHECK_RC(hk_pull_spec_init((hk_pull_spec *)(void *)buf, 1), HK_OK);
    for (size_t i = offsetof(hk_pull_spec, force_download); i < sizeof buf; i++) CHECK(buf[i] == 0xAB);
    CHECK(((hk_pull_spec *)(void *)buf)->version == 1);
    /* a version 2 spec ends before include: nothing past it either */
    memset(buf, 0xAB, sizeof buf);
    CHECK_RC(hk_pull_spec_init((hk_pull_spec *)(void *)buf, 2), HK_OK);
    for (size_t i = offsetof(hk_pull_spec, include); i < sizeof buf; i++) CHECK(buf[i] == 0xAB);
    CHECK(((hk_pull_spec *)(void *)buf)->force_download == 0);
    hk_pull_spec s;
    CHECK_RC(hk_pull_spec_init(&s, HK_PULL_SPEC_VERSION), HK_OK);
    CHECK(s.version == 3 && s.force_download == 0 && s.include == NULL && s.exclude == NULL && s.dry_run == 0);
    CHECK_RC(hk_pull_spec_init(&s, 4), HK_ERR_INVALID_ARG);
}

static void test_read_only_client(void) {
    CHECK_RC(hk_hub_set_read_only(NULL, 1), HK_ERR_INVALID_ARG);
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.cache_dir = hk_test_tmpdir();
    o.offline = 1;
    hk_hub *hub = NULL;
    CHECK_RC(hk_hub_new(&hub, &o), HK_OK);
    CHECK_RC(hk_hub_set_read_only(hub, 1), HK_OK);
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = "org/ro";
    s.revision = COMMIT;
    hk_pull_result *r = NULL;
    CHECK_RC(hk_hub_pull(&r, hub, &s), HK_ERR_INVALID_ARG);
    CHECK(r == NULL && strstr(hk_last_error(), "read-only") != NULL);
    /* a dry run writes nothing, so a read-only client may make one (offline: not cached here) */
    s.dry_run = 1;
    CHECK_RC(hk_hub_pull(&r, hub, &s), HK_ERR_OFFLINE);
    CHECK(r == NULL && strstr(hk_last_error(), "read-only") == NULL);
    hk_hub_free(hub);
}

int main(void) {
    test_plans();
    test_missing_files();
    test_spec_versions();
    test_read_only_client();
    return hk_test_finish();
}
