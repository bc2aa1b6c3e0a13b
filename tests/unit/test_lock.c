/* kernels.lock: both formats, the writer (byte format of kernels 0.17.2's KernelLocks.to_json, also
 * checked against the real package in tests/integration/test_load_lock.py), and the old format's
 * git_lfs_concat hash (expected values computed independently from the documented algorithm). */
#include "support.h"

#include "hubkern.h"
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

#define C40A "cccccccccccccccccccccccccccccccccccccccc"
#define C40B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define C40C "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static void test_parse_new(void) {
    const char *j = "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1},\"lock\":{\"commit\":\"" C40A "\"}},"
                    "{\"dependency\":{\"repo-id\":\"org/b\",\"revision\":\"main\"},\"lock\":{\"commit\":\"" C40B
                    "\",\"hash\":\"sha256-xyz\"}}]";
    hk_lockfile *l = NULL;
    CHECK_RC(hk_lockfile_parse(&l, j, strlen(j)), HK_OK);
    if (!l) return;
    CHECK(hk_lockfile_format(l) == HK_LOCK_NEW && hk_lockfile_count(l) == 2);
    const hk_lock_entry *e = hk_lockfile_find(l, "org/a");
    CHECK(e && hk_lock_entry_version(e) == 1 && !hk_lock_entry_revision(e));
    if (e) CHECK_STR(hk_lock_entry_commit(e), C40A);
    e = hk_lockfile_find(l, "org/b");
    CHECK(e && hk_lock_entry_version(e) == HK_VERSION_UNSET);
    if (e) CHECK_STR(hk_lock_entry_revision(e), "main");
    CHECK(hk_lockfile_find(l, "org/c") == NULL);
    hk_lockfile_free(l);

    /* rejected: unknown fields, duplicates, both/neither version+revision, short commits, mixes */
    const char *bad[] = {
        "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1},\"lock\":{\"commit\":\"" C40A "\",\"x\":1}}]",
        "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1},\"lock\":{\"commit\":\"" C40A "\"},\"y\":2}]",
        "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1},\"lock\":{\"commit\":\"" C40A "\"}},"
        "{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1},\"lock\":{\"commit\":\"" C40B "\"}}]",
        "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1,\"revision\":\"v1\"},\"lock\":{\"commit\":\"" C40A "\"}}]",
        "[{\"dependency\":{\"repo-id\":\"org/a\"},\"lock\":{\"commit\":\"" C40A "\"}}]",
        "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1},\"lock\":{\"commit\":\"abc123\"}}]",
        "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1.5},\"lock\":{\"commit\":\"" C40A "\"}}]",
        "[{\"dependency\":{\"repo-id\":\"../x\",\"version\":1},\"lock\":{\"commit\":\"" C40A "\"}}]",
        "[{\"dependency\":{\"repo-id\":\"org/a\",\"version\":1},\"lock\":{\"commit\":\"" C40A "\"}},"
        "{\"repo_id\":\"org/b\",\"sha\":\"" C40B "\",\"variants\":{}}]",
        "{\"not\":\"an array\"}",
        "[1]",
        "[{",
    };
    for (size_t i = 0; i < HK_ARRAY_LEN(bad); i++) {
        l = (hk_lockfile *)1;
        CHECK_RC(hk_lockfile_parse(&l, bad[i], strlen(bad[i])), HK_ERR_PARSE);
        CHECK(l == NULL);
    }
}

static void test_parse_old(void) {
    const char *j = "[{\"repo_id\":\"kernels-community/activation\",\"sha\":\"" C40C "\",\"variants\":{"
                    "\"torch27-cxx11-cu126-x86_64-linux\":{\"hash\":\"sha256-"
                    "1752d321e27596a7f7c1391acafb1b5e9787185e141b62f093dae9bbc3e71569\",\"hash_type\":\"git_lfs_concat\"}}}]";
    hk_lockfile *l = NULL;
    CHECK_RC(hk_lockfile_parse(&l, j, strlen(j)), HK_OK);
    if (!l) return;
    CHECK(hk_lockfile_format(l) == HK_LOCK_OLD && hk_lockfile_count(l) == 1);
    const hk_lock_entry *e = hk_lockfile_find(l, "kernels-community/activation");
    CHECK(e && hk_lock_entry_variant_count(e) == 1 && hk_lock_entry_version(e) == HK_VERSION_UNSET);
    if (e && hk_lock_entry_variant_count(e) == 1) {
        CHECK_STR(hk_lock_entry_commit(e), C40C);
        CHECK_STR(hk_lock_entry_variant_name(e, 0), "torch27-cxx11-cu126-x86_64-linux");
        CHECK_STR(hk_lock_entry_variant_hash(e, 0), "sha256-1752d321e27596a7f7c1391acafb1b5e9787185e141b62f093dae9bbc3e71569");
    }
    hk_lockfile_free(l);
    const char *bad = "[{\"repo_id\":\"org/a\",\"sha\":\"" C40C "\",\"variants\":{\"v\":{\"hash\":\"md5-00\"}}}]";
    CHECK_RC(hk_lockfile_parse(&l, bad, strlen(bad)), HK_ERR_PARSE);
}

/* A lockfile of three entries (the writer's input). */
typedef struct pin {
    const char *repo_id;
    int version;
    const char *revision;
    const char *commit;
} pin;

static int write_pins(const char *path, const pin *e, size_t n) {
    hk_lockfile *lf = NULL;
    int rc = hk_lockfile_new(&lf);
    for (size_t i = 0; i < n && rc == HK_OK; i++)
        rc = hk_lockfile_add(lf, e[i].repo_id, e[i].version, e[i].revision, e[i].commit);
    if (rc == HK_OK) rc = hk_lockfile_write(path, lf);
    hk_lockfile_free(lf);
    return rc;
}

static void test_write(void) {
    pin e[3];
    memset(e, 0, sizeof e);
    e[0].repo_id = "org/b"; e[0].version = 2; e[0].commit = C40C;
    e[1].repo_id = "org/a"; e[1].version = HK_VERSION_UNSET; e[1].revision = "main"; e[1].commit = C40B;
    e[2].repo_id = "org/a"; e[2].version = 1; e[2].commit = C40A;
    char *p = hk__asprintf("%s/kernels.lock", hk_test_tmpdir());
    CHECK_RC(write_pins(p, e, 3), HK_OK);
    char *got = NULL;
    CHECK_RC(hk__read_file(&got, NULL, p, 1 << 20), HK_OK);
    /* exactly what kernels 0.17.2 KernelLocks.to_json() prints for the same locks */
    const char *want =
        "[\n  {\n    \"dependency\": {\n      \"repo-id\": \"org/a\",\n      \"version\": 1\n    },\n"
        "    \"lock\": {\n      \"commit\": \"" C40A "\"\n    }\n  },\n"
        "  {\n    \"dependency\": {\n      \"repo-id\": \"org/a\",\n      \"revision\": \"main\"\n    },\n"
        "    \"lock\": {\n      \"commit\": \"" C40B "\"\n    }\n  },\n"
        "  {\n    \"dependency\": {\n      \"repo-id\": \"org/b\",\n      \"version\": 2\n    },\n"
        "    \"lock\": {\n      \"commit\": \"" C40C "\"\n    }\n  }\n]";
    CHECK_STR(got, want);
    free(got);
    hk_lockfile *l = NULL;
    CHECK_RC(hk_lockfile_read(&l, p), HK_OK); /* round trip */
    CHECK(l && hk_lockfile_count(l) == 3);
    hk_lockfile_free(l);
    e[0].repo_id = "org/a"; e[0].version = 1;
    CHECK_RC(write_pins(p, e, 3), HK_ERR_INVALID_ARG); /* duplicate */
    e[0].repo_id = "org/b"; e[0].commit = "short";
    CHECK_RC(write_pins(p, e, 3), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_lockfile_read(&l, "/nonexistent/kernels.lock"), HK_ERR_NOT_FOUND);
    free(p);
}

static void put_blob(const char *repo, const char *variant_dir, const char *rel, const char *blob,
                     const char *content, size_t len) {
    char *bp = hk__asprintf("%s/blobs/%s", repo, blob);
    CHECK_RC(hk__write_file_atomic(bp, content, len), HK_OK);
    char *lp = hk__asprintf("%s/%s", variant_dir, rel);
    char *dir = hk__strdup(lp);
    *strrchr(dir, '/') = '\0';
    hk__mkdirs(dir, 0777);
    CHECK(symlink(bp, lp) == 0);
    free(bp);
    free(lp);
    free(dir);
}

static void test_hash(void) {
    /* pairs → hash (ids as a tree listing gives them) */
    const char *paths[] = {"sub/x.json", "__init__.py", "_ops.so", "__pycache__/a.cpython-311.pyc", "b.pyc"};
    const char *ids[] = {"9e26dfeeb6e641a33dae4961196235bdb965b21b", "9f1b437537a2acdadafd3174f6f0af9c1a04f5e4",
                         "79c17c0a5fd863a218753adc5e664d9d77d7f233f3a6b1ae859a30d6bed6f818",
                         "0000000000000000000000000000000000000000", "1111111111111111111111111111111111111111"};
    char *h = NULL;
    CHECK_RC(hk_variant_hash_from_pairs(&h, paths, ids, 5), HK_OK);
    CHECK_STR(h, "sha256-1752d321e27596a7f7c1391acafb1b5e9787185e141b62f093dae9bbc3e71569");
    hk_free(h);

    /* the same files in a cache snapshot: recomputed from content */
    char *repo = hk__asprintf("%s/kernels--org--k", hk_test_tmpdir());
    char *vd = hk__asprintf("%s/snapshots/" C40A "/build/torch27-cxx11-cu126-x86_64-linux", repo);
    hk__mkdirs(vd, 0777);
    char big[1000];
    for (int i = 0; i < 100; i++) memcpy(big + 10 * i, "BINARYDATA", 10);
    char *blobs = hk__asprintf("%s/blobs", repo);
    hk__mkdirs(blobs, 0777);
    free(blobs);
    put_blob(repo, vd, "__init__.py", "9f1b437537a2acdadafd3174f6f0af9c1a04f5e4", "print('hi')\n", 12);
    put_blob(repo, vd, "_ops.so", "79c17c0a5fd863a218753adc5e664d9d77d7f233f3a6b1ae859a30d6bed6f818", big, sizeof big);
    put_blob(repo, vd, "sub/x.json", "9e26dfeeb6e641a33dae4961196235bdb965b21b", "{}", 2);
    put_blob(repo, vd, "__pycache__/z.pyc", "2222222222222222222222222222222222222222", "junk", 4);
    CHECK_RC(hk_variant_hash_from_cache(&h, vd), HK_OK);
    CHECK_STR(h, "sha256-1752d321e27596a7f7c1391acafb1b5e9787185e141b62f093dae9bbc3e71569");
    hk_free(h);
    /* a corrupted blob changes the hash */
    char *bp = hk__asprintf("%s/blobs/9e26dfeeb6e641a33dae4961196235bdb965b21b", repo);
    CHECK_RC(hk__write_file_atomic(bp, "{ }", 3), HK_OK);
    CHECK_RC(hk_variant_hash_from_cache(&h, vd), HK_OK);
    CHECK(h && strcmp(h, "sha256-1752d321e27596a7f7c1391acafb1b5e9787185e141b62f093dae9bbc3e71569") != 0);
    hk_free(h);
    free(bp);
    free(repo);
    free(vd);
}

/* A truncated or hand-broken lock says where (issue 15: the message had no position). */
static void test_parse_error_position(void) {
    hk_lockfile *l = NULL;
    const char *cut = "[{\"repo-id\": \"a/b\", \"sha\": \"";
    CHECK_RC(hk_lockfile_parse(&l, cut, strlen(cut)), HK_ERR_PARSE);
    CHECK(strstr(hk_last_error(), "line 1, column") != NULL);
    CHECK(strstr(hk_last_error(), "truncated") != NULL);
    const char *broken = "[{\"repo-id\": \"a/b\",\n  x }]";
    CHECK_RC(hk_lockfile_parse(&l, broken, strlen(broken)), HK_ERR_PARSE);
    CHECK(strstr(hk_last_error(), "line 2, column 4") != NULL);
    CHECK(strstr(hk_last_error(), "truncated") == NULL);
    CHECK(l == NULL);
}

int main(void) {
    test_parse_error_position();
    test_parse_new();
    test_parse_old();
    test_write();
    test_hash();
    return hk_test_finish();
}
