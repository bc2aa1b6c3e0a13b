/* util/ and cache/layout: hashing test vectors, path safety, relative links, refs. */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_hashes(void) {
    const char *dir = hk_test_tmpdir();
    char *p = hk__path_join(dir, "hello.txt");
    hk_test_write(p, "Hello, World!");
    char hex[129];
    CHECK_RC(hk__hash_file_hex(hex, sizeof hex, HK_HASH_GIT_BLOB, p), HK_OK);
    CHECK_STR(hex, "b45ef6fec89518d314f546fd6c3025367b721684"); /* reference test vector */
    CHECK_RC(hk__hash_file_hex(hex, sizeof hex, HK_HASH_SHA256, p), HK_OK);
    CHECK_STR(hex, "dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f");
    char b64[100];
    CHECK_RC(hk__hash_file_b64(b64, sizeof b64, HK_HASH_SHA256, p), HK_OK);
    CHECK_STR(b64, "3/1gIbsr1bCvZ2KQgJ7DpTGR3YHH9wpLKGiKNiGCmG8=");
    free(p);
}

static void test_paths(void) {
    CHECK(hk__path_is_safe_relative("build/v/x.so"));
    CHECK(!hk__path_is_safe_relative("../x"));
    CHECK(!hk__path_is_safe_relative("a/../../x"));
    CHECK(!hk__path_is_safe_relative("/etc/passwd"));
    CHECK(!hk__path_is_safe_relative("a\\b"));
    CHECK(!hk__path_is_safe_relative("C:x"));
    CHECK(!hk__path_is_safe_relative("a//b"));
    CHECK(!hk__path_is_safe_relative("a/./b"));
    CHECK(!hk__path_is_safe_relative(""));
    CHECK(!hk__path_is_safe_relative("a/"));
    CHECK(!hk__path_is_safe_relative("a\nb"));
    char *r = hk__relpath("/c/repo/blobs/abc", "/c/repo/snapshots/123/build/v");
    CHECK_STR(r, "../../../../blobs/abc");
    free(r);
    r = hk__relpath("/c/repo/blobs/abc", "/c/repo/snapshots/123");
    CHECK_STR(r, "../../blobs/abc");
    free(r);
}

static void test_repo_ids(void) {
    CHECK(hk_repo_id_valid("kernels-community/activation"));
    CHECK(hk_repo_id_valid("gpt2"));
    CHECK(!hk_repo_id_valid("a/b/c"));
    CHECK(!hk_repo_id_valid("../x"));
    CHECK(!hk_repo_id_valid("a--b/c"));
    CHECK(!hk_repo_id_valid("a/"));
    CHECK(!hk_repo_id_valid(""));
    char *d = hk_cache_repo_dir("/root", HK_REPO_KERNEL, "kernels-community/activation");
    CHECK_STR(d, "/root/kernels--kernels-community--activation");
    free(d);
}

static void test_refs(void) {
    const char *dir = hk_test_tmpdir();
    char *repo = hk__path_join(dir, "kernels--org--k");
    const char *sha = "0123456789abcdef0123456789abcdef01234567";
    CHECK_RC(hk_cache_write_ref(repo, "v1", sha), HK_OK);
    CHECK_RC(hk_cache_write_ref(repo, "refs/pr/1", sha), HK_OK);
    CHECK_RC(hk_cache_write_ref(repo, "../evil", sha), HK_ERR_INVALID_ARG);
    char *ref = hk__path_join(repo, "refs/v1");
    char *data = NULL;
    size_t len = 0;
    CHECK_RC(hk__read_file(&data, &len, ref, 100), HK_OK);
    CHECK(len == 40); /* no trailing newline */
    free(data);
    char commit[65];
    CHECK_RC(hk__cache_read_ref(commit, repo, "refs/pr/1"), HK_OK);
    CHECK_STR(commit, sha);
    CHECK_RC(hk__cache_read_ref(commit, repo, "v9"), HK_ERR_NOT_FOUND);
    char *snap = hk__asprintf("%s/snapshots/%s", repo, sha);
    CHECK(hk__is_dir(snap));
    CHECK_RC(hk_cache_link_snapshot(repo, sha, "build/v/a.txt", "deadbeef"), HK_OK);
    char *link = hk__asprintf("%s/build/v/a.txt", snap);
    char target[512];
    ssize_t n = readlink(link, target, sizeof target - 1);
    CHECK(n > 0);
    if (n > 0) {
        target[n] = '\0';
        CHECK_STR(target, "../../../../blobs/deadbeef");
    }
    CHECK_RC(hk_cache_link_snapshot(repo, sha, "../x", "deadbeef"), HK_ERR_UNSAFE_PATH);
    free(link);
    free(snap);
    free(ref);
    free(repo);
}

/* audit: text from outside formatted into an error or a log line reaches a terminal or a JSON
 * error printable: an ESC sequence, a NUL-free control byte and invalid or overlong UTF-8 become
 * \xNN; valid UTF-8, '\n' and '\t' stay. */
static char g_logged[2048];
static void keep_log(void *ud, hk_log_level level, const char *msg) {
    (void)ud;
    (void)level;
    snprintf(g_logged, sizeof g_logged, "%s", msg);
}

static void test_messages_printable(void) {
    const char *hostile = "org/\x1b]0;pwned\x07\xc0\xae\xe2\x82 caf\xc3\xa9\tok\nline\x7f";
    const char *shown = "org/\\x1b]0;pwned\\x07\\xc0\\xae\\xe2\\x82 caf\xc3\xa9\tok\nline\\x7f";
    CHECK_RC(hk__fail(HK_ERR_PARSE, "redirects to '%s'", hostile), HK_ERR_PARSE);
    char *want = hk__asprintf("redirects to '%s'", shown);
    CHECK_STR(hk_last_error(), want);
    free(want);
    hk__fail_context("kernel-status.toml of %s", "org/\x1bx");
    want = hk__asprintf("kernel-status.toml of org/\\x1bx: redirects to '%s'", shown);
    CHECK_STR(hk_last_error(), want);
    free(want);
    hk_clear_error();
    hk_set_log_callback(keep_log, NULL, HK_LOG_WARN);
    hk__log(HK_LOG_WARN, "Hub: %s", "\x1b[2Jcleared");
    CHECK_STR(g_logged, "Hub: \\x1b[2Jcleared");
    hk_set_log_callback(NULL, NULL, HK_LOG_WARN);
}

int main(void) {
    test_messages_printable();
    test_hashes();
    test_paths();
    test_repo_ids();
    test_refs();
    return hk_test_finish();
}
