/* cache/bundle: round trip of a cache through a tar bundle, and hostile bundles refused with
 * nothing recorded in refs/. */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *k_commit = "1111111111111111111111111111111111111111";

/* The counts of one public bundle call (hubkern/cache.h), copied out of its report. */
typedef struct counts {
    uint32_t repos, blobs_added, blobs_present, links, refs;
} counts;

static void copy_counts(counts *st, hk_bundle_report *r) {
    st->repos = hk_bundle_report_repos(r);
    st->blobs_added = hk_bundle_report_blobs_added(r);
    st->blobs_present = hk_bundle_report_blobs_present(r);
    st->links = hk_bundle_report_links(r);
    st->refs = hk_bundle_report_refs(r);
    hk_bundle_report_free(r);
}

static int bundle_create(counts *st, const char *out, const char *root, hk_repo_type type, const char *const *ids,
                         size_t n) {
    hk_bundle_options o = HK_BUNDLE_OPTIONS_INIT;
    o.cache_dir = root;
    o.repo_type = type;
    hk_bundle_report *r = NULL;
    int rc = hk_bundle_create(&r, out, ids, n, &o);
    CHECK((rc == HK_OK) == (r != NULL));
    copy_counts(st, r);
    return rc;
}

static int bundle_extract(counts *st, const char *in, const char *root) {
    hk_bundle_options o;
    CHECK_RC(hk_bundle_options_init(&o, HK_BUNDLE_OPTIONS_VERSION), HK_OK);
    o.cache_dir = root;
    hk_bundle_report *r = NULL;
    int rc = hk_bundle_extract(&r, in, &o);
    CHECK((rc == HK_OK) == (r != NULL));
    copy_counts(st, r);
    return rc;
}

/* Store `content` as a blob named by its git sha1 (small) or sha256 (lfs) and link it. */
static void put_file(const char *repo, const char *path, const char *content, bool lfs) {
    char *tmp = hk__asprintf("%s/tmpfile", repo);
    hk_test_write(tmp, content);
    char hex[129];
    hk__hash_file_hex(hex, sizeof hex, lfs ? HK_HASH_SHA256 : HK_HASH_GIT_BLOB, tmp);
    char *blob = hk__asprintf("%s/blobs/%s", repo, hex);
    hk__mkdirs(strrchr(blob, '/') ? repo : repo, 0777);
    char *blobs = hk__asprintf("%s/blobs", repo);
    hk__mkdirs(blobs, 0777);
    rename(tmp, blob);
    CHECK_RC(hk_cache_link_snapshot(repo, k_commit, path, hex), HK_OK);
    free(blobs);
    free(blob);
    free(tmp);
}

static char *read_all(const char *path) {
    char *d = NULL;
    if (hk__read_file(&d, NULL, path, 1 << 20) != HK_OK) return NULL;
    return d;
}

static int count_incomplete(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) n += hk__str_ends_with(de->d_name, ".incomplete");
    closedir(d);
    return n;
}

static void test_round_trip(void) {
    const char *tmp = hk_test_tmpdir();
    char *src = hk__path_join(tmp, "src");
    char *dst = hk__path_join(tmp, "dst");
    char *repo = hk_cache_repo_dir(src, HK_REPO_KERNEL, "org/rms");
    put_file(repo, "build/tvm-ffi01-cpu-x86_64-linux/metadata.json", "{\"name\":\"rms\"}", false);
    put_file(repo, "build/tvm-ffi01-cpu-x86_64-linux/_rms.so", "\x7f" "ELF pretend binary", true);
    CHECK_RC(hk_cache_write_ref(repo, "v1", k_commit), HK_OK);
    char *partial = hk__asprintf("%s/blobs/abc.12345678.incomplete", repo);
    hk_test_write(partial, "partial");

    char *bundle = hk__path_join(tmp, "b.tar.gz");
    const char *ids[] = {"org/rms"};
    counts st;
    CHECK_RC(bundle_create(&st, bundle, src, HK_REPO_KERNEL, ids, 1), HK_OK);
    CHECK(st.repos == 1 && st.blobs_added == 2 && st.links == 2 && st.refs == 1);
    const char *missing[] = {"org/absent"};
    CHECK_RC(bundle_create(&st, bundle, src, HK_REPO_KERNEL, missing, 1), HK_ERR_NOT_FOUND);
    CHECK(hk__path_exists(bundle)); /* a failed create before writing leaves the old bundle alone */

    CHECK_RC(bundle_extract(&st, bundle, dst), HK_OK);
    CHECK(st.blobs_added == 2 && st.blobs_present == 0 && st.links == 2 && st.refs == 1);
    char *drepo = hk_cache_repo_dir(dst, HK_REPO_KERNEL, "org/rms");
    char commit[65];
    CHECK_RC(hk__cache_read_ref(commit, drepo, "v1"), HK_OK);
    CHECK_STR(commit, k_commit);
    char *f = hk__asprintf("%s/snapshots/%s/build/tvm-ffi01-cpu-x86_64-linux/_rms.so", drepo, k_commit);
    char *data = read_all(f);
    CHECK_STR(data, "\x7f" "ELF pretend binary");
    free(data);
    struct stat lst;
    CHECK(lstat(f, &lst) == 0 && S_ISLNK(lst.st_mode)); /* links stay relative symlinks */
    char *tag = hk__path_join(dst, "CACHEDIR.TAG");
    CHECK(hk__path_exists(tag));
    char *dpartial = hk__asprintf("%s/blobs/abc.12345678.incomplete", drepo);
    CHECK(!hk__path_exists(dpartial)); /* temp files are not carried */
    /* importing twice is idempotent */
    CHECK_RC(bundle_extract(&st, bundle, dst), HK_OK);
    CHECK(st.blobs_added == 0 && st.blobs_present == 2);
    free(dpartial);
    free(tag);
    free(f);
    free(drepo);
    free(bundle);
    free(partial);
    free(repo);
    free(dst);
    free(src);
}

/* Build a tar by hand: entries of (path, type, content or link target). */
typedef struct { const char *path; char type; const char *data; } entry;

static char *make_tar(const char *name, const entry *es, size_t n) {
    char *path = hk__path_join(hk_test_tmpdir(), name);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_open_filename(a, path);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, es[i].path);
        archive_entry_set_perm(e, 0644);
        if (es[i].type == 'l') {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, es[i].data);
            archive_write_header(a, e);
        } else if (es[i].type == 'c') { /* a device node (data unused) */
            archive_entry_set_filetype(e, AE_IFCHR);
            archive_entry_set_rdev(e, 0x0103); /* 1:3, /dev/null */
            archive_write_header(a, e);
        } else if (es[i].type == 'h') {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_hardlink(e, es[i].data);
            archive_write_header(a, e);
        } else {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_size(e, (la_int64_t)strlen(es[i].data));
            archive_write_header(a, e);
            archive_write_data(a, es[i].data, strlen(es[i].data));
        }
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    return path;
}

#define REPO "kernels--org--evil"
#define SNAP REPO "/snapshots/1111111111111111111111111111111111111111"
/* git blob sha1 of "hello" */
#define HELLO_SHA1 "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"

static void expect_refused(const char *name, const entry *es, size_t n, int want) {
    char *tar = make_tar(name, es, n);
    char *root = hk__path_join(hk_test_tmpdir(), "victim");
    counts st;
    CHECK_RC(bundle_extract(&st, tar, root), want);
    char *ref = hk__asprintf("%s/" REPO "/refs/v1", root);
    CHECK(!hk__path_exists(ref)); /* nothing recorded */
    char *blobs = hk__asprintf("%s/" REPO "/blobs", root);
    CHECK(count_incomplete(blobs) == 0); /* no temp file left behind */
    char *escape = hk__path_join(hk_test_tmpdir(), "escaped");
    CHECK(!hk__path_exists(escape));
    free(escape);
    free(blobs);
    free(ref);
    hk__rmtree(root);
    free(root);
    free(tar);
}

/* The bundle imports, and the file at rel (inside the cache) then holds want. */
static void expect_imported(const char *name, const entry *es, size_t n, const char *rel, const char *want) {
    char *tar = make_tar(name, es, n);
    char *root = hk__asprintf("%s.cache", tar);
    counts st;
    CHECK_RC(bundle_extract(&st, tar, root), HK_OK);
    char *f = hk__asprintf("%s/%s", root, rel);
    char *d = read_all(f);
    CHECK_STR(d, want);
    free(d);
    free(f);
    free(root);
    free(tar);
}

static void test_hostile(void) {
    const entry ok_ref = {REPO "/refs/v1", 'f', "1111111111111111111111111111111111111111"};
    const entry good_blob = {REPO "/blobs/" HELLO_SHA1, 'f', "hello"};
    /* sanity: the good pieces import */
    const entry good[] = {good_blob, {SNAP "/a.txt", 'l', "../../blobs/" HELLO_SHA1}, ok_ref};
    expect_imported("good.tar", good, 3, SNAP "/a.txt", "hello");
    const entry traversal[] = {{"../escaped", 'f', "x"}, ok_ref};
    expect_refused("t1.tar", traversal, 2, HK_ERR_UNSAFE_PATH);
    const entry nested_traversal[] = {good_blob, {REPO "/blobs/../../escaped", 'f', "x"}, ok_ref};
    expect_refused("t2.tar", nested_traversal, 3, HK_ERR_UNSAFE_PATH);
    const entry absolute[] = {{"/tmp/escaped", 'f', "x"}, ok_ref};
    expect_refused("t3.tar", absolute, 2, HK_ERR_UNSAFE_PATH);
    const entry abs_link[] = {good_blob, {SNAP "/a.txt", 'l', "/etc/passwd"}, ok_ref};
    expect_refused("t4.tar", abs_link, 3, HK_ERR_UNSAFE_PATH);
    const entry up_link[] = {good_blob, {SNAP "/a.txt", 'l', "../../../../escaped"}, ok_ref};
    expect_refused("t5.tar", up_link, 3, HK_ERR_UNSAFE_PATH);
    const entry wrong_hash[] = {{REPO "/blobs/" HELLO_SHA1, 'f', "hellO"}, ok_ref};
    expect_refused("t6.tar", wrong_hash, 2, HK_ERR_INTEGRITY);
    const entry fake_name[] = {{REPO "/blobs/not-a-hash", 'f', "hello"}, ok_ref};
    expect_refused("t7.tar", fake_name, 2, HK_ERR_INTEGRITY);
    const entry dangling[] = {{SNAP "/a.txt", 'l', "../../blobs/" HELLO_SHA1}, ok_ref};
    expect_refused("t8.tar", dangling, 2, HK_ERR_INTEGRITY);
    const entry hardlink[] = {good_blob, {SNAP "/a.txt", 'h', REPO "/blobs/" HELLO_SHA1}, ok_ref};
    expect_refused("t9.tar", hardlink, 3, HK_ERR_UNSAFE_PATH);
    const entry stray[] = {{"models--x/evil.sh", 'f', "rm -rf /"}, ok_ref};
    expect_refused("t10.tar", stray, 2, HK_ERR_UNSAFE_PATH);
    const entry other_folder[] = {{"notacache/refs/v1", 'f', "x"}};
    expect_refused("t11.tar", other_folder, 1, HK_ERR_UNSAFE_PATH);
    const entry bad_ref[] = {good_blob, {REPO "/refs/v1", 'f', "not a commit"}};
    expect_refused("t12.tar", bad_ref, 2, HK_ERR_PARSE);

    /* audit: names and entries no existing case used */
    /* a hard link where a blob goes, named by the empty blob's hash: no bytes to hash, a link to follow */
    const entry hard_blob[] = {{REPO "/blobs/e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", 'h', "/etc/passwd"}, ok_ref};
    expect_refused("a1.tar", hard_blob, 2, HK_ERR_UNSAFE_PATH);
    const entry device[] = {{REPO "/blobs/" HELLO_SHA1, 'c', ""}, ok_ref};
    expect_refused("a2.tar", device, 2, HK_ERR_UNSAFE_PATH);
    /* a ref holds one commit id and nothing else (git writes a newline, allowed) */
    const entry ref_garbage[] = {{REPO "/refs/v1", 'f', "1111111111111111111111111111111111111111 trailing garbage"}};
    expect_refused("a3.tar", ref_garbage, 1, HK_ERR_PARSE);
    const entry ref_upper[] = {{REPO "/refs/v1", 'f', "ABCDEF1111111111111111111111111111111111"}};
    expect_refused("a4.tar", ref_upper, 1, HK_ERR_PARSE);
    /* ref names follow the one revision rule, as every revision does */
    const entry ref_lock[] = {ok_ref, {REPO "/refs/main.lock", 'f', "1111111111111111111111111111111111111111"}};
    expect_refused("a5.tar", ref_lock, 2, HK_ERR_UNSAFE_PATH);
    const entry ref_pct[] = {ok_ref, {REPO "/refs/a%2Fb", 'f', "1111111111111111111111111111111111111111"}};
    expect_refused("a6.tar", ref_pct, 2, HK_ERR_UNSAFE_PATH);
    /* a repo folder is one that a repo id names: "kernels--org--a--b" is no id, nor "kernels--.." */
    const entry folder_dashes[] = {{"kernels--org--a--b/refs/v1", 'f', "1111111111111111111111111111111111111111"}};
    expect_refused("a7.tar", folder_dashes, 1, HK_ERR_UNSAFE_PATH);
    const entry folder_dots[] = {{"kernels--../refs/v1", 'f', "1111111111111111111111111111111111111111"}};
    expect_refused("a8.tar", folder_dots, 1, HK_ERR_UNSAFE_PATH);
    const entry nl[] = {{REPO "/refs/v1", 'f', "1111111111111111111111111111111111111111\n"}};
    expect_imported("a9.tar", nl, 1, REPO "/refs/v1", "1111111111111111111111111111111111111111");

    char *junk = hk__path_join(hk_test_tmpdir(), "junk.tar");
    hk_test_write(junk, "this is not a tar archive at all, just text that goes on for a while........");
    char *root = hk__path_join(hk_test_tmpdir(), "junkroot");
    counts st;
    CHECK_RC(bundle_extract(&st, junk, root), HK_ERR_PARSE);
    free(root);
    free(junk);
}

int main(void) {
    test_round_trip();
    test_hostile();
    return hk_test_finish();
}
