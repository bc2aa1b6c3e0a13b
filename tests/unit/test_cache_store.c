/* cache/blobs.c and cache/maint.c: blob locks, temp files, blob hashing, and the verify / prune /
 * rm maintenance passes on a hand-made cache. */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_locks(void) {
    const char *dir = hk_test_tmpdir();
    char *repo = hk_cache_repo_dir(dir, HK_REPO_KERNEL, "org/k");
    char *lp = hk__cache_filelock_path(dir, repo, "abc");
    char *want = hk__asprintf("%s/.locks/kernels--org--k/abc.lock", dir);
    CHECK_STR(lp, want);
    int a = -1, b = -1;
    CHECK_RC(hk__cache_filelock_try(&a, lp), HK_OK);
    CHECK(a >= 0);
    struct stat st;
    CHECK(stat(lp, &st) == 0 && (st.st_mode & 0777) == 0664);
    /* a second open file description (as another process would have) cannot take it */
    CHECK_RC(hk__cache_filelock_try(&b, lp), HK_OK);
    CHECK(b == -1);
    CHECK_RC(hk__cache_filelock_wait(&b, lp, 300), HK_ERR_LOCK);
    hk__cache_filelock_release(a);
    CHECK(hk__path_exists(lp)); /* never unlinked */
    CHECK_RC(hk__cache_filelock_try(&b, lp), HK_OK);
    CHECK(b >= 0);
    hk__cache_filelock_release(b);
    /* a symlink planted at the lock path is refused (O_NOFOLLOW) */
    char *evil = hk__cache_filelock_path(dir, repo, "evil");
    symlink("/tmp/somewhere", evil);
    CHECK_RC(hk__cache_filelock_try(&a, evil), HK_ERR_LOCK);
    free(evil);
    free(want);
    free(lp);
    free(repo);
}

static void test_tmp_and_commit(void) {
    const char *dir = hk_test_tmpdir();
    char *repo = hk_cache_repo_dir(dir, HK_REPO_KERNEL, "org/t");
    const char *etag = "b45ef6fec89518d314f546fd6c3025367b721684"; /* git blob of "Hello, World!" */
    int fd = -1;
    char *tmp = NULL;
    mode_t old = umask(022);
    CHECK_RC(hk__cache_blob_tmp_open(&fd, &tmp, repo, etag), HK_OK);
    umask(old);
    CHECK(fd >= 0);
    char *prefix = hk__asprintf("%s/blobs/%s.", repo, etag);
    CHECK(tmp && hk__str_starts_with(tmp, prefix) && hk__str_ends_with(tmp, ".incomplete"));
    CHECK(tmp && strlen(tmp) == strlen(prefix) + 8 + strlen(".incomplete"));
    CHECK(write(fd, "Hello, World!", 13) == 13);
    close(fd);
    struct stat st;
    CHECK(stat(tmp, &st) == 0 && (st.st_mode & 0777) == 0644);
    CHECK(!hk__cache_blob_present(repo, etag, 13));
    CHECK_RC(hk__cache_blob_commit(tmp, repo, etag), HK_OK);
    CHECK(hk__cache_blob_present(repo, etag, 13));
    CHECK(!hk__cache_blob_present(repo, etag, 14));
    char *blob = hk__asprintf("%s/blobs/%s", repo, etag);
    char hex[129];
    bool ok = false;
    CHECK_RC(hk__cache_hash_blob(hex, &ok, blob, etag), HK_OK);
    CHECK(ok);
    CHECK_STR(hex, etag);
    CHECK_RC(hk__cache_hash_blob(hex, &ok, blob, "not-a-hash"), HK_OK);
    CHECK(!ok);
    CHECK_RC(hk_cache_link_snapshot(repo, "2222222222222222222222222222222222222222", "build/v/f.txt", etag), HK_OK);
    CHECK(hk__cache_pointer_ok(repo, "2222222222222222222222222222222222222222", "build/v/f.txt", etag));
    CHECK(!hk__cache_pointer_ok(repo, "2222222222222222222222222222222222222222", "build/v/g.txt", etag));
    /* a link already right is left as it is (the same inode): a burst of mirror requests for one
     * file rewrote it each, queued on the folders' locks (issue 25); a wrong one is still replaced */
    char *lnk = hk__asprintf("%s/snapshots/2222222222222222222222222222222222222222/build/v/f.txt", repo);
    struct stat l1, l2;
    CHECK(lstat(lnk, &l1) == 0 && S_ISLNK(l1.st_mode));
    CHECK_RC(hk_cache_link_snapshot(repo, "2222222222222222222222222222222222222222", "build/v/f.txt", etag), HK_OK);
    CHECK(lstat(lnk, &l2) == 0 && l2.st_ino == l1.st_ino);
    const char *other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    CHECK_RC(hk_cache_link_snapshot(repo, "2222222222222222222222222222222222222222", "build/v/f.txt", other), HK_OK);
    char tgt[256];
    ssize_t tn = readlink(lnk, tgt, sizeof tgt - 1);
    CHECK(tn > 0 && (tgt[tn] = '\0', strstr(tgt, other) != NULL));
    CHECK_RC(hk_cache_link_snapshot(repo, "2222222222222222222222222222222222222222", "build/v/f.txt", etag), HK_OK);
    CHECK(hk__cache_pointer_ok(repo, "2222222222222222222222222222222222222222", "build/v/f.txt", etag));
    free(lnk);
    free(blob);
    free(prefix);
    free(tmp);
    free(repo);
}

typedef struct lines {
    char buf[8192];
} lines;

static void collect(void *ud, const char *line) {
    lines *l = ud;
    strncat(l->buf, line, sizeof l->buf - strlen(l->buf) - 2);
    strcat(l->buf, "\n");
}

/* The counts of one public call (hubkern/cache.h), copied out of its report. */
typedef struct counts {
    size_t repos, problems, removed;
} counts;

static int run_op(counts *rep, int (*op)(hk_cache_report **, const hk_cache_options *), const char *root,
                  const char *repo_id, const char *revision, bool json, bool detached, bool dry_run, lines *out) {
    hk_cache_options o;
    CHECK_RC(hk_cache_options_init(&o, HK_CACHE_OPTIONS_VERSION), HK_OK);
    o.cache_dir = root;
    o.repo_id = repo_id;
    o.revision = revision;
    o.json = json;
    o.detached = detached;
    o.dry_run = dry_run;
    o.line_fn = collect;
    o.line_userdata = out;
    hk_cache_report *r = NULL;
    int rc = op(&r, &o);
    CHECK((rc == HK_OK) == (r != NULL));
    rep->repos = hk_cache_report_repos(r);
    rep->problems = hk_cache_report_problems(r);
    rep->removed = hk_cache_report_removed(r);
    hk_cache_report_free(r);
    return rc;
}
#define cache_verify(rep, root, repo, fn, ud) run_op(rep, hk_cache_verify, root, repo, NULL, false, false, false, ud)
#define cache_ls(rep, root, repo, json, fn, ud) run_op(rep, hk_cache_ls, root, repo, NULL, json, false, false, ud)
#define cache_prune(rep, root, detached, dry, fn, ud) run_op(rep, hk_cache_prune, root, NULL, NULL, false, detached, dry, ud)
#define cache_rm(rep, root, repo, rev, dry, fn, ud) run_op(rep, hk_cache_rm, root, repo, rev, false, false, dry, ud)

static void test_maint(void) {
    char *root = hk__path_join(hk_test_tmpdir(), "m");
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/m");
    const char *c1 = "3333333333333333333333333333333333333333";
    const char *c2 = "4444444444444444444444444444444444444444";
    const char *good = "b45ef6fec89518d314f546fd6c3025367b721684";
    const char *bad = "0000000000000000000000000000000000000000";
    char *p = hk__asprintf("%s/blobs/%s", repo, good);
    hk_test_write(p, "Hello, World!");
    free(p);
    p = hk__asprintf("%s/blobs/%s", repo, bad);
    hk_test_write(p, "corrupt");
    free(p);
    CHECK_RC(hk_cache_link_snapshot(repo, c1, "build/v/a.txt", good), HK_OK);
    CHECK_RC(hk_cache_link_snapshot(repo, c1, "build/v/b.txt", bad), HK_OK);
    CHECK_RC(hk_cache_write_ref(repo, "v1", c1), HK_OK);
    counts rep;
    lines out = {{0}};
    CHECK_RC(cache_verify(&rep, root, NULL, collect, &out), HK_OK);
    CHECK(rep.problems == 1);
    CHECK(strstr(out.buf, bad) != NULL && strstr(out.buf, "corrupt blob") != NULL);
    /* clean it: rm the blob by hand, the link is now broken -> problem "Blob missing" */
    p = hk__asprintf("%s/blobs/%s", repo, bad);
    unlink(p);
    free(p);
    memset(&out, 0, sizeof out);
    CHECK_RC(cache_verify(&rep, root, "org/m", collect, &out), HK_OK);
    CHECK(rep.problems == 1 && strstr(out.buf, "Blob missing") != NULL);
    /* a ref with a trailing newline is a problem (Python would look for snapshots/<sha>\n) */
    p = hk__asprintf("%s/refs/main", repo);
    hk_test_write(p, "3333333333333333333333333333333333333333\n");
    free(p);
    memset(&out, 0, sizeof out);
    CHECK_RC(cache_verify(&rep, root, NULL, collect, &out), HK_OK);
    CHECK(rep.problems == 2 && strstr(out.buf, "refs/main") != NULL);
    p = hk__asprintf("%s/refs/main", repo);
    unlink(p);
    free(p);
    /* leftovers + an orphan blob + a detached snapshot */
    p = hk__asprintf("%s/blobs/%s.deadbeef.incomplete", repo, good);
    hk_test_write(p, "Hel");
    free(p);
    const char *orphan = "dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f";
    p = hk__asprintf("%s/blobs/%s", repo, orphan);
    hk_test_write(p, "Hello, World!");
    free(p);
    CHECK_RC(hk_cache_link_snapshot(repo, c2, "x.txt", good), HK_OK);
    memset(&out, 0, sizeof out);
    CHECK_RC(cache_prune(&rep, root, false, true, collect, &out), HK_OK); /* dry run */
    size_t would = rep.removed;
    CHECK(would == 3); /* broken link, temp file, orphan blob */
    p = hk__asprintf("%s/blobs/%s", repo, orphan);
    CHECK(hk__path_exists(p));
    memset(&out, 0, sizeof out);
    CHECK_RC(cache_prune(&rep, root, false, false, collect, &out), HK_OK);
    CHECK(rep.removed == 3);
    CHECK(!hk__path_exists(p));
    free(p);
    memset(&out, 0, sizeof out);
    CHECK_RC(cache_verify(&rep, root, NULL, collect, &out), HK_OK);
    CHECK(rep.problems == 0);
    /* --detached removes the snapshot no ref names (c2), keeps c1 */
    CHECK_RC(cache_prune(&rep, root, true, false, collect, &out), HK_OK);
    p = hk__asprintf("%s/snapshots/%s", repo, c2);
    CHECK(!hk__path_exists(p));
    free(p);
    p = hk__asprintf("%s/snapshots/%s/build/v/a.txt", repo, c1);
    CHECK(hk__path_exists(p));
    free(p);
    /* ls */
    memset(&out, 0, sizeof out);
    CHECK_RC(cache_ls(&rep, root, NULL, true, collect, &out), HK_OK);
    CHECK(rep.repos == 1 && strstr(out.buf, "\"repo_id\":\"org/m\"") != NULL && strstr(out.buf, c1) != NULL);
    /* rm one revision: snapshot, ref and now-unused blob go */
    CHECK_RC(cache_rm(&rep, root, "org/m", "v1", false, collect, &out), HK_OK);
    p = hk__asprintf("%s/blobs/%s", repo, good);
    CHECK(!hk__path_exists(p));
    free(p);
    p = hk__asprintf("%s/refs/v1", repo);
    CHECK(!hk__path_exists(p));
    free(p);
    CHECK_RC(cache_rm(&rep, root, "org/m", "v9", false, collect, &out), HK_ERR_NOT_FOUND);
    CHECK_RC(cache_rm(&rep, root, "org/m", NULL, false, collect, &out), HK_OK);
    CHECK(!hk__path_exists(repo));
    CHECK_RC(cache_rm(&rep, root, "org/m", NULL, false, collect, &out), HK_ERR_NOT_FOUND);
    free(repo);
    free(root);
}

/* The small blobs' shared lock file: one byte a blob, taken by an open file description, so a
 * second open (as another process, or another pull in this one) waits; prune sees a held byte. */
static void test_small_blob_locks(void) {
    char *root = hk__path_join(hk_test_tmpdir(), "rl");
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/rl");
    const char *e1 = "1111111111111111111111111111111111111111", *e2 = "2222222222222222222222222222222222222222";
    int a = -1, b = -1;
    hk__cache_rangelock_open(&a, root, repo);
    hk__cache_rangelock_open(&b, root, repo);
    CHECK(a >= 0 && b >= 0);
    char *lp = hk__cache_filelock_path(root, repo, "hubkern-small-blobs");
    struct stat st;
    CHECK(stat(lp, &st) == 0 && (st.st_mode & 0777) == 0664);
    bool got = false;
    CHECK(!hk__cache_rangelock_busy(root, repo, e1));
    CHECK_RC(hk__cache_rangelock_try(&got, a, e1), HK_OK);
    CHECK(got);
    CHECK(hk__cache_rangelock_busy(root, repo, e1));
    CHECK(!hk__cache_rangelock_busy(root, repo, e2));
    CHECK_RC(hk__cache_rangelock_try(&got, b, e1), HK_OK);
    CHECK(!got); /* held by the other open */
    CHECK_RC(hk__cache_rangelock_try(&got, b, e2), HK_OK);
    CHECK(got); /* another blob's byte is free */
    /* prune keeps a small blob's temp file while its byte is held, removes it once released */
    char *tmp = hk__asprintf("%s/blobs/%s.0badf00d.incomplete", repo, e1);
    hk_test_write(tmp, "par");
    counts rep;
    lines out = {{0}};
    CHECK_RC(cache_prune(&rep, root, false, false, collect, &out), HK_OK);
    CHECK(hk__path_exists(tmp));
    hk__cache_rangelock_release(a, e1);
    CHECK(!hk__cache_rangelock_busy(root, repo, e1));
    CHECK_RC(hk__cache_rangelock_try(&got, b, e1), HK_OK);
    CHECK(got);
    hk__cache_rangelock_release(b, e1);
    hk__cache_rangelock_release(b, e2);
    CHECK_RC(cache_prune(&rep, root, false, false, collect, &out), HK_OK);
    CHECK(!hk__path_exists(tmp));
    close(a);
    close(b);
    /* a symlink planted at the lock file's path: no shared file (per-blob locks then), no error */
    char *root2 = hk__path_join(hk_test_tmpdir(), "rl2");
    char *repo2 = hk_cache_repo_dir(root2, HK_REPO_KERNEL, "org/rl");
    char *lp2 = hk__cache_filelock_path(root2, repo2, "hubkern-small-blobs");
    char *ld2 = hk__asprintf("%s/.locks/kernels--org--rl", root2);
    CHECK_RC(hk__mkdirs(ld2, 0777), HK_OK);
    free(ld2);
    symlink("/tmp/somewhere", lp2);
    hk__cache_rangelock_open(&a, root2, repo2);
    CHECK(a == -1 && hk_last_error_code() == HK_OK);
    free(lp2);
    free(repo2);
    free(root2);
    free(tmp);
    free(lp);
    free(repo);
    free(root);
}

int main(void) {
    test_locks();
    test_small_blob_locks();
    test_tmp_and_commit();
    test_maint();
    return hk_test_finish();
}
