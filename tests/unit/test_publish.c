/* srv_publish: blob naming (git sha1 / sha256 by the binary and size rules), deterministic commit
 * ids, no-op re-publish, parents, skipped files, symlink policy, branch-name validation, and two
 * publishers racing on one branch. */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"
#include "server/server.h"
#include "server/srv_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *g_dir;

static char *pathf(const char *name) { return hk__path_join(g_dir, name); }

static void write_bytes(const char *path, const void *data, size_t n) {
    char *d = hk__strdup(path);
    *strrchr(d, '/') = '\0';
    hk__mkdirs(d, 0777);
    free(d);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static bool blob_exists(const char *store, const char *repo_folder, const char *etag) {
    char *p = hk__asprintf("%s/%s/blobs/%s", store, repo_folder, etag);
    bool ok = hk__path_exists(p);
    free(p);
    return ok;
}

static void test_blob_rules(void) {
    char *src = pathf("rules");
    char *store = pathf("store-rules");
    char *p;
    /* NUL inside the first 8000 bytes → binary → LFS (sha256) */
    char buf[10000];
    memset(buf, 'a', sizeof buf);
    buf[7999] = '\0';
    p = hk__asprintf("%s/nul-at-7999.bin", src);
    write_bytes(p, buf, 9000);
    free(p);
    /* NUL only at 8000 → text → git blob */
    buf[7999] = 'a';
    buf[8000] = '\0';
    p = hk__asprintf("%s/nul-at-8000.txt", src);
    write_bytes(p, buf, 9000);
    free(p);
    /* exactly the threshold (9500 here) → LFS; one byte less → git blob */
    memset(buf, 'b', sizeof buf);
    p = hk__asprintf("%s/at-threshold.txt", src);
    write_bytes(p, buf, 9500);
    free(p);
    p = hk__asprintf("%s/below-threshold.txt", src);
    write_bytes(p, buf, 9499);
    free(p);
    p = hk__asprintf("%s/empty", src);
    write_bytes(p, "", 0);
    free(p);
    srv_publish_options o = {.src_dir = src, .repo_id = "org/rules", .repo_type = HK_REPO_MODEL, .branch = "main",
                            .cache_dir = store, .lfs_threshold = 9500};
    srv_publish_result r;
    CHECK_RC(srv_publish(&r, &o), HK_OK);
    CHECK(r.files == 5 && r.lfs_files == 2 && r.changed && r.parent[0] == '\0');
    srv_store *s = NULL;
    CHECK_RC(srv_store_open(&s, store, 9500), HK_OK);
    char *repo = srv_store_repo_dir(s, HK_REPO_MODEL, "org/rules");
    CHECK(repo != NULL);
    srv_listing l;
    CHECK_RC(srv_store_list(&l, s, repo, r.commit), HK_OK);
    const char *lfs_files[] = {"nul-at-7999.bin", "at-threshold.txt"};
    const char *git_files[] = {"nul-at-8000.txt", "below-threshold.txt", "empty"};
    for (int i = 0; i < 2; i++) {
        long k = srv_listing_find(&l, lfs_files[i]);
        CHECK(k >= 0 && l.v[k].lfs && strlen(l.v[k].etag) == 64);
        if (k >= 0) CHECK(blob_exists(store, "models--org--rules", l.v[k].etag));
    }
    for (int i = 0; i < 3; i++) {
        long k = srv_listing_find(&l, git_files[i]);
        CHECK(k >= 0 && !l.v[k].lfs && strlen(l.v[k].etag) == 40);
    }
    long k = srv_listing_find(&l, "empty");
    if (k >= 0) CHECK_STR(l.v[k].etag, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"); /* git's empty blob */
    srv_listing_free(&l);
    free(repo);
    srv_store_close(s);
    /* the store looks like a huggingface_hub cache */
    p = hk__asprintf("%s/CACHEDIR.TAG", store);
    CHECK(hk__path_exists(p));
    free(p);
    p = hk__asprintf("%s/models--org--rules/refs/main", store);
    char *ref = NULL;
    CHECK_RC(hk__read_file(&ref, NULL, p, 100), HK_OK);
    CHECK_STR(ref, r.commit); /* 40 hex, no newline */
    free(ref);
    free(p);
    free(src);
    free(store);
}

static void test_commits(void) {
    char *src = pathf("tree");
    char *store = pathf("store-a");
    char *store2 = pathf("store-b");
    char *p = hk__asprintf("%s/build/torch-cpu/__init__.py", src);
    hk_test_write(p, "x = 1\n");
    free(p);
    p = hk__asprintf("%s/build/torch-cpu/__pycache__/__init__.cpython-311.pyc", src);
    hk_test_write(p, "junk");
    free(p);
    p = hk__asprintf("%s/build/torch-cpu/mod.pyc", src);
    hk_test_write(p, "junk");
    free(p);
    p = hk__asprintf("%s/.git/HEAD", src);
    hk_test_write(p, "ref: refs/heads/main\n");
    free(p);
    p = hk__asprintf("%s/build/torch-cpu/data.json", src);
    hk_test_write(p, "{}\n");
    free(p);
    /* a symlink that stays inside is stored as the file it names */
    p = hk__asprintf("%s/build/alias.json", src);
    CHECK(symlink("torch-cpu/data.json", p) == 0);
    free(p);

    srv_publish_options o = {.src_dir = src, .repo_id = "org/k", .repo_type = HK_REPO_KERNEL, .branch = "v1",
                            .cache_dir = store};
    srv_publish_result r1, again, other, r2;
    CHECK_RC(srv_publish(&r1, &o), HK_OK);
    CHECK(r1.files == 3 && r1.changed); /* __init__.py, data.json, alias.json */
    char *snap = hk__asprintf("%s/kernels--org--k/snapshots/%s", store, r1.commit);
    char *q = hk__asprintf("%s/build/torch-cpu/__pycache__", snap);
    CHECK(!hk__path_exists(q));
    free(q);
    q = hk__asprintf("%s/build/torch-cpu/mod.pyc", snap);
    CHECK(!hk__path_exists(q));
    free(q);
    q = hk__asprintf("%s/.git", snap);
    CHECK(!hk__path_exists(q));
    free(q);
    q = hk__asprintf("%s/build/alias.json", snap);
    char *content = NULL;
    CHECK_RC(hk__read_file(&content, NULL, q, 100), HK_OK);
    CHECK_STR(content, "{}\n");
    free(content);
    free(q);

    /* same tree again: nothing changes */
    char *ref = hk__asprintf("%s/kernels--org--k/refs/v1", store);
    struct stat before, after;
    CHECK(stat(ref, &before) == 0);
    CHECK_RC(srv_publish(&again, &o), HK_OK);
    CHECK(!again.changed);
    CHECK_STR(again.commit, r1.commit);
    CHECK(stat(ref, &after) == 0 && before.st_ino == after.st_ino && before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);

    /* same tree, same (no) parent, same message, another store: the same id */
    o.cache_dir = store2;
    CHECK_RC(srv_publish(&other, &o), HK_OK);
    CHECK_STR(other.commit, r1.commit);
    /* ... but another message is another commit */
    o.branch = "v2";
    o.message = "different";
    CHECK_RC(srv_publish(&other, &o), HK_OK);
    CHECK(strcmp(other.commit, r1.commit) != 0);
    o.message = NULL;
    o.branch = "v1";
    o.cache_dir = store;

    /* a change: new commit whose parent is the old head; the old snapshot stays */
    p = hk__asprintf("%s/build/torch-cpu/__init__.py", src);
    hk_test_write(p, "x = 2\n");
    free(p);
    CHECK_RC(srv_publish(&r2, &o), HK_OK);
    CHECK(r2.changed && strcmp(r2.commit, r1.commit) != 0);
    CHECK_STR(r2.parent, r1.commit);
    CHECK(hk__is_dir(snap));
    char got[65];
    char *repo_dir = hk__asprintf("%s/kernels--org--k", store);
    CHECK_RC(hk__cache_read_ref(got, repo_dir, "v1"), HK_OK);
    CHECK_STR(got, r2.commit);
    /* the commit id is the git commit of (tree, parent, message) */
    srv_store *s = NULL;
    CHECK_RC(srv_store_open(&s, store, 0), HK_OK);
    srv_listing l;
    CHECK_RC(srv_store_list(&l, s, repo_dir, r2.commit), HK_OK);
    char want[41];
    srv_git_commit_oid(want, l.root_oid, r1.commit, "Publish v1");
    CHECK_STR(r2.commit, want);
    srv_listing_free(&l);
    srv_store_close(s);

    free(repo_dir);
    free(ref);
    free(snap);
    free(src);
    free(store);
    free(store2);
}

static void test_refusals(void) {
    char *src = pathf("bad");
    char *store = pathf("store-bad");
    char *p = hk__asprintf("%s/ok.txt", src);
    hk_test_write(p, "ok\n");
    free(p);
    srv_publish_options o = {.src_dir = src, .repo_id = "org/k", .repo_type = HK_REPO_KERNEL, .branch = "v1",
                            .cache_dir = store};
    srv_publish_result r;
    const char *bad_branches[] = {"../x", "a/../b", "", "refs/heads/x", "0123456789012345678901234567890123456789",
                                  "x y", "v1.lock"};
    for (size_t i = 0; i < HK_ARRAY_LEN(bad_branches); i++) {
        o.branch = bad_branches[i];
        CHECK_RC(srv_publish(&r, &o), HK_ERR_INVALID_ARG);
    }
    o.branch = "v1";
    o.repo_id = "org/../x";
    CHECK_RC(srv_publish(&r, &o), HK_ERR_INVALID_ARG);
    o.repo_id = "org/k";
    o.src_dir = "/nonexistent/hk-src";
    CHECK_RC(srv_publish(&r, &o), HK_ERR_NOT_FOUND);
    o.src_dir = src;
    /* a symlink leaving the source directory */
    p = hk__asprintf("%s/leak", src);
    CHECK(symlink("/etc/hostname", p) == 0);
    CHECK_RC(srv_publish(&r, &o), HK_ERR_UNSAFE_PATH);
    CHECK(strstr(hk_last_error(), "outside") != NULL);
    unlink(p);
    free(p);
    p = hk__asprintf("%s/up", src);
    CHECK(symlink("..", p) == 0);
    CHECK_RC(srv_publish(&r, &o), HK_ERR_UNSAFE_PATH);
    unlink(p);
    free(p);
    /* a broken link and a fifo */
    p = hk__asprintf("%s/broken", src);
    CHECK(symlink("does-not-exist", p) == 0);
    CHECK(srv_publish(&r, &o) != HK_OK);
    unlink(p);
    free(p);
    p = hk__asprintf("%s/fifo", src);
    CHECK(mkfifo(p, 0600) == 0);
    CHECK_RC(srv_publish(&r, &o), HK_ERR_INVALID_ARG);
    unlink(p);
    free(p);
    /* nothing was recorded by the refused attempts */
    p = hk__asprintf("%s/kernels--org--k/refs/v1", store);
    CHECK(!hk__path_exists(p));
    free(p);
    /* an empty directory */
    char *empty = pathf("empty-src");
    hk__mkdirs(empty, 0777);
    o.src_dir = empty;
    CHECK_RC(srv_publish(&r, &o), HK_ERR_INVALID_ARG);
    free(empty);
    free(src);
    free(store);
}

typedef struct race_arg {
    const char *src;
    const char *store;
    srv_publish_result r;
    int rc;
} race_arg;

static void *race(void *p) {
    race_arg *a = p;
    srv_publish_options o = {.src_dir = a->src, .repo_id = "org/race", .repo_type = HK_REPO_KERNEL, .branch = "v1",
                            .cache_dir = a->store};
    a->rc = srv_publish(&a->r, &o);
    return NULL;
}

static void test_race(void) {
    char *store = pathf("store-race");
    char *s1 = pathf("race1");
    char *s2 = pathf("race2");
    char *p = hk__asprintf("%s/f.txt", s1);
    hk_test_write(p, "one\n");
    free(p);
    p = hk__asprintf("%s/f.txt", s2);
    hk_test_write(p, "two\n");
    free(p);
    race_arg a = {.src = s1, .store = store}, b = {.src = s2, .store = store};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race, &a);
    pthread_create(&tb, NULL, race, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.rc == HK_OK && b.rc == HK_OK);
    /* the lock serialised them: exactly one saw the other's commit as its parent */
    bool a_after_b = strcmp(a.r.parent, b.r.commit) == 0, b_after_a = strcmp(b.r.parent, a.r.commit) == 0;
    CHECK(a_after_b != b_after_a);
    char got[65];
    char *repo_dir = hk__asprintf("%s/kernels--org--race", store);
    CHECK_RC(hk__cache_read_ref(got, repo_dir, "v1"), HK_OK);
    CHECK_STR(got, a_after_b ? a.r.commit : b.r.commit);
    free(repo_dir);
    free(store);
    free(s1);
    free(s2);
}

int main(void) {
    g_dir = hk__strdup(hk_test_tmpdir());
    test_blob_rules();
    test_commits();
    test_refusals();
    test_race();
    free(g_dir);
    return hk_test_finish();
}
