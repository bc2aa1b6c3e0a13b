/* cache/strays.c, verify.c, prune.c (issue 17 item 1, cache side): a cache left broken by a hostile
 * pull of an older hubkern, built by hand (files, symlinks): stray files the variant's metadata.json
 * digest does not list and a file turned into a directory (x.py/inner). verify reports each, prune
 * removes exactly those entries and the blobs only they used, blobs honest entries point to
 * survive, and an honest re-link of x.py then works and the digest verifies. Only the public
 * hubkern/cache.h calls the maintenance; the cache is laid out with the internal helpers. */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMMIT "5555555555555555555555555555555555555555"

typedef struct lines {
    char buf[16384];
} lines;

static void collect(void *ud, const char *line) {
    lines *l = ud;
    strncat(l->buf, line, sizeof l->buf - strlen(l->buf) - 2);
    strcat(l->buf, "\n");
}

/* Store content as a blob named by its git sha1 (the cache's name for small files); returns the name. */
static char *put_blob(const char *repo, const char *content) {
    char *tmp = hk__asprintf("%s/tmpfile", repo);
    hk_test_write(tmp, content);
    char hex[129];
    CHECK_RC(hk__hash_file_hex(hex, sizeof hex, HK_HASH_GIT_BLOB, tmp), HK_OK);
    char *blob = hk__asprintf("%s/blobs/%s", repo, hex);
    char *blobs = hk__asprintf("%s/blobs", repo);
    hk__mkdirs(blobs, 0777);
    CHECK(rename(tmp, blob) == 0);
    free(blobs);
    free(blob);
    free(tmp);
    return hk__strdup(hex);
}

static char *b64_of(const char *content) {
    char *tmp = hk__path_join(hk_test_tmpdir(), "b64src");
    hk_test_write(tmp, content);
    char b64[100];
    CHECK_RC(hk__hash_file_b64(b64, sizeof b64, HK_HASH_SHA256, tmp), HK_OK);
    unlink(tmp);
    free(tmp);
    return hk__strdup(b64);
}

static bool blob_exists(const char *repo, const char *name) {
    char *p = hk__asprintf("%s/blobs/%s", repo, name);
    bool e = hk__path_exists(p);
    free(p);
    return e;
}

static bool entry_exists(const char *vdir, const char *rel) {
    char *p = hk__path_join(vdir, rel);
    struct stat st;
    bool e = lstat(p, &st) == 0;
    free(p);
    return e;
}

static int op(hk_cache_report **rep, int (*fn)(hk_cache_report **, const hk_cache_options *), const char *root,
              int dry_run, lines *out) {
    hk_cache_options o = HK_CACHE_OPTIONS_INIT;
    o.cache_dir = root;
    o.dry_run = dry_run;
    o.line_fn = collect;
    o.line_userdata = out;
    memset(out, 0, sizeof *out);
    return fn(rep, &o);
}

static const char k_a[] = "import x\n", k_so[] = "\x7f" "ELF honest kernel", k_x[] = "a = 1\n";

static void test_poisoned_snapshot(void) {
    char *root = hk__path_join(hk_test_tmpdir(), "poisoned");
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/s");
    char *vdir = hk__asprintf("%s/snapshots/%s/build/v", repo, COMMIT);
    /* an honest variant: a.py, lib/_k.so, x.py and a metadata.json whose digest lists them */
    char *a = put_blob(repo, k_a), *so = put_blob(repo, k_so), *x = put_blob(repo, k_x);
    char *ba = b64_of(k_a), *bso = b64_of(k_so), *bx = b64_of(k_x);
    char *meta_text = hk__asprintf("{\"name\":\"sk\",\"digest\":{\"algorithm\":\"sha256\",\"files\":{\"a.py\":\"%s\","
                                  "\"lib/_k.so\":\"%s\",\"x.py\":\"%s\"}}}",
                                  ba, bso, bx);
    char *meta = put_blob(repo, meta_text);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/metadata.json", meta), HK_OK);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/a.py", a), HK_OK);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/lib/_k.so", so), HK_OK);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/x.py", x), HK_OK);
    CHECK_RC(hk_cache_write_ref(repo, "v1", COMMIT), HK_OK);
    /* Python's bytecode beside the sources is no stray (the digest skips it) */
    char *pyc = hk__asprintf("%s/__pycache__/a.cpython-312.pyc", vdir);
    hk_test_write(pyc, "bytecode");
    lines out;
    hk_cache_report *rep = NULL;
    CHECK_RC(op(&rep, hk_cache_verify, root, 0, &out), HK_OK);
    CHECK(hk_cache_report_problems(rep) == 0);
    hk_cache_report_free(rep);
    bool has = false;
    CHECK_RC(hk__verify_variant_digest(&has, NULL, vdir), HK_OK);

    /* what a hostile pull left: a stray with its own blob, a stray sharing an honest entry's blob,
     * a stray deep in new directories, and x.py turned into a directory */
    char *evil = put_blob(repo, "evil payload\n"), *inner = put_blob(repo, "inner\n"), *deep = put_blob(repo, "deep\n");
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/stray.txt", evil), HK_OK);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/lib/extra.so", a), HK_OK);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/extra/deep/f.py", deep), HK_OK);
    char *xp = hk__path_join(vdir, "x.py");
    CHECK(unlink(xp) == 0);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/x.py/inner", inner), HK_OK);
    /* today's honest pull fails on it exactly as issue 17 says */
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/x.py", x), HK_ERR_IO);
    CHECK_RC(hk__verify_variant_digest(&has, NULL, vdir), HK_ERR_DIGEST);
    CHECK(strstr(hk_last_error(), "UnknownFile: stray.txt") != NULL);
    hk_clear_error();
    /* a receipt vouching for the variant must not survive the finding */
    char *rp = hk__receipt_path(root, repo, COMMIT, "v");
    hk_test_write(rp, "{}");

    CHECK_RC(op(&rep, hk_cache_verify, root, 0, &out), HK_OK);
    CHECK(hk_cache_report_problems(rep) >= 4);
    CHECK(strstr(out.buf, "stray file stray.txt is not in the metadata.json digest") != NULL);
    CHECK(strstr(out.buf, "stray file lib/extra.so") != NULL);
    CHECK(strstr(out.buf, "stray file extra/deep/f.py") != NULL);
    CHECK(strstr(out.buf, "x.py is a directory where the metadata.json digest lists a file") != NULL);
    CHECK(strstr(out.buf, "stray file x.py/inner") == NULL); /* the directory is the finding */
    CHECK(strstr(out.buf, "__pycache__") == NULL);
    CHECK(hk__path_exists(rp)); /* verify reads only (a load's digest check finds the strays itself) */
    hk_cache_report_free(rep);

    /* a dry run lists, and changes nothing */
    CHECK_RC(op(&rep, hk_cache_prune, root, 1, &out), HK_OK);
    CHECK(strstr(out.buf, "would remove kernel/org/s: stray file snapshots/" COMMIT "/build/v/stray.txt") != NULL);
    CHECK(strstr(out.buf, evil) != NULL);      /* its blob would go with it */
    CHECK(strstr(out.buf, "blobs/") != NULL);
    CHECK(entry_exists(vdir, "stray.txt") && entry_exists(vdir, "x.py/inner") && blob_exists(repo, evil));
    size_t would = hk_cache_report_removed(rep);
    hk_cache_report_free(rep);

    /* prune repairs */
    CHECK_RC(op(&rep, hk_cache_prune, root, 0, &out), HK_OK);
    CHECK(hk_cache_report_removed(rep) == would);
    hk_cache_report_free(rep);
    CHECK(!entry_exists(vdir, "stray.txt"));
    CHECK(!entry_exists(vdir, "lib/extra.so"));
    CHECK(!entry_exists(vdir, "x.py"));
    CHECK(!entry_exists(vdir, "extra")); /* emptied directories go too */
    CHECK(entry_exists(vdir, "a.py") && entry_exists(vdir, "lib/_k.so") && entry_exists(vdir, "metadata.json"));
    CHECK(hk__path_exists(pyc));
    CHECK(!blob_exists(repo, evil) && !blob_exists(repo, inner) && !blob_exists(repo, deep));
    CHECK(blob_exists(repo, a));  /* shared with the stray lib/extra.so: an honest entry still uses it */
    CHECK(blob_exists(repo, so));
    CHECK(blob_exists(repo, meta));
    CHECK(!blob_exists(repo, x)); /* no entry used it any more (the directory stood in its place) */

    /* an honest pull now works: the blob comes back, x.py links, the digest verifies */
    free(put_blob(repo, k_x));
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/x.py", x), HK_OK);
    CHECK_RC(hk__verify_variant_digest(&has, NULL, vdir), HK_OK);
    CHECK_RC(op(&rep, hk_cache_verify, root, 0, &out), HK_OK);
    CHECK(hk_cache_report_problems(rep) == 0);
    hk_cache_report_free(rep);
    CHECK_RC(op(&rep, hk_cache_prune, root, 1, &out), HK_OK);
    CHECK(hk_cache_report_removed(rep) == 0);
    hk_cache_report_free(rep);

    free(rp);
    free(xp);
    free(evil);
    free(inner);
    free(deep);
    free(pyc);
    free(meta);
    free(meta_text);
    free(ba);
    free(bso);
    free(bx);
    free(a);
    free(so);
    free(x);
    free(vdir);
    free(repo);
    free(root);
}

/* A variant without a digest has nothing to compare against: prune leaves all of it alone. */
static void test_no_digest_untouched(void) {
    char *root = hk__path_join(hk_test_tmpdir(), "nodigest");
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/n");
    char *meta = put_blob(repo, "{\"name\":\"nk\"}");
    char *f = put_blob(repo, "anything\n");
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/metadata.json", meta), HK_OK);
    CHECK_RC(hk_cache_link_snapshot(repo, COMMIT, "build/v/any.py", f), HK_OK);
    CHECK_RC(hk_cache_write_ref(repo, "v1", COMMIT), HK_OK);
    lines out;
    hk_cache_report *rep = NULL;
    CHECK_RC(op(&rep, hk_cache_prune, root, 0, &out), HK_OK);
    CHECK(hk_cache_report_removed(rep) == 0);
    hk_cache_report_free(rep);
    char *p = hk__asprintf("%s/snapshots/%s/build/v/any.py", repo, COMMIT);
    CHECK(hk__path_exists(p));
    free(p);
    free(f);
    free(meta);
    free(repo);
    free(root);
}

int main(void) {
    test_poisoned_snapshot();
    test_no_digest_untouched();
    return hk_test_finish();
}
