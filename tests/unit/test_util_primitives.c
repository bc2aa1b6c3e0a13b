/* The util layer's primitives: growable arrays, directory walks, hex, percent-encoding, JSON
 * string escaping, the options-version check, the background flusher, the library's threads. */
#include "support.h"

#include "internal.h"
#include "util/flusher.h"
#include "util/text.h"
#include "util/vec.h"
#include "util/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_vec(void) {
    int *v = NULL;
    size_t cap = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK_RC(HK_VEC_RESERVE(v, cap, (size_t)i + 1), HK_OK);
        v[i] = i;
    }
    CHECK(cap >= 1000 && cap < 2048);
    long sum = 0;
    for (int i = 0; i < 1000; i++) sum += v[i];
    CHECK(sum == 999L * 1000 / 2);
    size_t old_cap = cap;
    int *old = v;
    /* an impossible size fails cleanly and keeps the old buffer */
    CHECK_RC(HK_VEC_RESERVE(v, cap, SIZE_MAX / 2), HK_ERR_NOMEM);
    CHECK(v == old && cap == old_cap && v[999] == 999);
    free(v);
}

typedef struct seen {
    hk_strbuf sb;
    int stop_at;
    int calls;
} seen;

static int record(void *ud, const hk_walk_entry *e, int post) {
    seen *s = ud;
    s->calls++;
    hk__sb_printf(&s->sb, "%s%s%s;", post ? "post:" : "", e->rel, S_ISLNK(e->st.st_mode) ? "@" : "");
    if (s->stop_at && s->calls == s->stop_at) return HK_WALK_STOP;
    if (!post && !strcmp(e->name, "skipme")) return HK_WALK_SKIP;
    return HK_WALK_CONTINUE;
}

static int failing(void *ud, const hk_walk_entry *e, int post) {
    (void)ud;
    (void)post;
    if (!strcmp(e->name, "b")) {
        hk__fail(HK_ERR_IO, "callback failed at %s", e->rel);
        return -1;
    }
    return HK_WALK_CONTINUE;
}

static void test_walk(void) {
    const char *dir = hk_test_tmpdir();
    char *root = hk__path_join(dir, "w");
    char *f;
    f = hk__path_join(root, "b/x.txt"); hk_test_write(f, "x"); free(f);
    f = hk__path_join(root, "a.txt"); hk_test_write(f, "a"); free(f);
    f = hk__path_join(root, "skipme/hidden.txt"); hk_test_write(f, "h"); free(f);
    f = hk__path_join(root, "c"); CHECK(symlink("b", f) == 0); free(f); /* not followed */

    seen s = {.stop_at = 0};
    hk__sb_init(&s.sb);
    CHECK_RC(hk__walk(root, -1, HK_WALK_SORTED | HK_WALK_POSTORDER, record, &s), HK_OK);
    CHECK_STR(s.sb.data, "a.txt;b;b/x.txt;post:b;c@;skipme;");
    hk__sb_free(&s.sb);

    seen d = {.stop_at = 0};
    hk__sb_init(&d.sb);
    CHECK_RC(hk__walk(root, 0, HK_WALK_SORTED, record, &d), HK_OK); /* depth 0: top level only */
    CHECK_STR(d.sb.data, "a.txt;b;c@;skipme;");
    hk__sb_free(&d.sb);

    seen t = {.stop_at = 2};
    hk__sb_init(&t.sb);
    CHECK_RC(hk__walk(root, -1, HK_WALK_SORTED, record, &t), HK_OK);
    CHECK_STR(t.sb.data, "a.txt;b;");
    hk__sb_free(&t.sb);

    CHECK_RC(hk__walk(root, -1, HK_WALK_SORTED, failing, NULL), HK_ERR_IO);
    CHECK(strstr(hk_last_error(), "callback failed at b") != NULL);

    char *missing = hk__path_join(dir, "nope");
    CHECK_RC(hk__walk(missing, -1, 0, record, &t), HK_ERR_NOT_FOUND);
    free(missing);
    free(root);
}

static void test_text(void) {
    unsigned char b[4];
    CHECK_RC(hk__unhex(b, "00fFa9", 3), HK_OK);
    CHECK(b[0] == 0 && b[1] == 0xff && b[2] == 0xa9);
    CHECK_RC(hk__unhex(b, "0g", 1), HK_ERR_PARSE);
    CHECK_RC(hk__unhex(b, "a", 1), HK_ERR_PARSE); /* odd length: the NUL is not a digit */
    CHECK(hk__is_commit_id("0123456789abcdef0123456789abcdef01234567"));
    CHECK(!hk__is_commit_id("0123456789ABCDEF0123456789abcdef01234567"));
    CHECK(!hk__is_commit_id("0123456789abcdef0123456789abcdef0123456"));
    CHECK(hk__is_commit_id("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(!hk__is_commit_id(NULL));

    char *e = hk__pct_encode("a b/c~\xc3\xa9%", true);
    CHECK_STR(e, "a%20b/c~%C3%A9%25");
    free(e);
    e = hk__pct_encode("a/b", false);
    CHECK_STR(e, "a%2Fb");
    free(e);
    char *d = hk__pct_decode("a%20b+c%2F", 10, true);
    CHECK_STR(d, "a b c/");
    free(d);
    CHECK(hk__pct_decode("a%00", 4, false) == NULL); /* encoded NUL */
    CHECK(hk__pct_decode("a%2", 3, false) == NULL);  /* truncated escape */
    CHECK(hk__pct_decode("%zz", 3, false) == NULL);

    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_json_str(&sb, "q\"b\\\n\x01\xc3\xa9");
    CHECK_STR(sb.data, "\"q\\\"b\\\\\\u000a\\u0001\xc3\xa9\"");
    hk__sb_free(&sb);
}

/* The per-request path builders: hk__concat and hk__path_join (no printf format behind them). */
static void test_concat(void) {
    char *s = hk__concat("/root", "/refs/", "main", (char *)NULL);
    CHECK(s && strcmp(s, "/root/refs/main") == 0);
    free(s);
    s = hk__concat("", (char *)NULL);
    CHECK(s && *s == '\0');
    free(s);
    s = hk__concat("%s%n", "/", "x", (char *)NULL); /* no format: taken as it is */
    CHECK(s && strcmp(s, "%s%n/x") == 0);
    free(s);
    s = hk__path_join("/a//", "//b/c");
    CHECK(s && strcmp(s, "/a/b/c") == 0);
    free(s);
}

static void test_options_version(void) {
    CHECK_RC(hk__check_options_version("hk_x_options", 1, 1), HK_OK);
    CHECK_RC(hk__check_options_version("hk_x_options", 0, 1), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "hk_x_options has version 0") != NULL);
    CHECK(strstr(hk_last_error(), "hk_x_options_init") != NULL);
    CHECK_RC(hk__check_options_version("hk_x_options", 3, 2), HK_ERR_INVALID_ARG);
}

/* A message that wraps the previous one reads the buffer it is written to: every way of wrapping
 * (hk__fail with hk_last_error() as an argument, or a pointer into it, hk__fail_context,
 * hk__fail_wrap) gives the exact text, also when the result is cut at the buffer's size. */
static void test_error_wrap(void) {
    char old[3001], want[8192];
    for (size_t i = 0; i < sizeof old - 1; i++) old[i] = (char)('a' + i % 26);
    old[sizeof old - 1] = '\0';
    hk__fail(HK_ERR_NOT_FOUND, "%s", old);
    CHECK_RC(hk__fail(HK_ERR_IO, "cannot open %s: %s", "/some/dir", hk_last_error()), HK_ERR_IO);
    snprintf(want, sizeof want, "cannot open /some/dir: %s", old);
    CHECK_STR(hk_last_error(), want);
    CHECK_RC(hk_last_error_code(), HK_ERR_IO);

    hk__fail(HK_ERR_PARSE, "%s", old);
    hk__fail(HK_ERR_SIGNATURE, "bundle: %s (%s)", hk_last_error() + 2000, hk_last_error());
    snprintf(want, sizeof want, "bundle: %s (%s)", old + 2000, old);
    CHECK_STR(hk_last_error(), want);

    /* twice the buffer: cut at its size (4095 characters), the start intact */
    hk__fail(HK_ERR_PARSE, "%s", old);
    hk__fail(HK_ERR_PARSE, "%s|%s", hk_last_error(), hk_last_error());
    snprintf(want, sizeof want, "%s|%s", old, old);
    want[4095] = '\0';
    CHECK_STR(hk_last_error(), want);
    CHECK(strlen(hk_last_error()) == 4095);

    hk__fail(HK_ERR_PARSE, "%s", old);
    CHECK_RC(hk__fail_context("reading %.20s", hk_last_error()), HK_ERR_PARSE);
    snprintf(want, sizeof want, "reading %.20s: %s", old, old);
    CHECK_STR(hk_last_error(), want);

    hk__fail(HK_ERR_PARSE, "%s", old);
    CHECK_RC(hk__fail_wrap(HK_ERR_SIGNATURE, "invalid bundle %s", "b.json"), HK_ERR_SIGNATURE);
    snprintf(want, sizeof want, "invalid bundle b.json: %s", old);
    CHECK_STR(hk_last_error(), want);
    CHECK_RC(hk_last_error_code(), HK_ERR_SIGNATURE);
    hk__fail(HK_ERR_PARSE, "%s%s", old, old);
    hk__fail_wrap(HK_ERR_IO, "%s", "ctx");
    snprintf(want, sizeof want, "ctx: %s%s", old, old);
    want[4095] = '\0';
    CHECK_STR(hk_last_error(), want);
    /* a prefix holding the whole message: cut at 1023 characters, the cause after it */
    hk__fail(HK_ERR_PARSE, "%s", old);
    hk__fail_context("in %s", hk_last_error());
    snprintf(want, sizeof want, "in %.1020s: %s", old, old);
    want[4095] = '\0';
    CHECK_STR(hk_last_error(), want);
    hk_clear_error();
}

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

/* Every descriptor handed over is closed by the end, those the busy flusher left too; a failed
 * flush is reported by the end with the file's label; no flusher (out of memory) closes at once. */
static void test_flusher(void) {
    enum { N = 100 };
    int fds[N];
    hk_flusher *f = hk__flusher_new();
    CHECK(f != NULL);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "flush-%d", i);
        char *path = hk__path_join(hk_test_tmpdir(), name);
        fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fds[i] >= 0 && write(fds[i], name, strlen(name)) == (ssize_t)strlen(name));
        hk__flusher_give(f, fds[i], name);
        free(path);
    }
    CHECK_RC(hk__flusher_end(f), HK_OK);
    int open_after = 0;
    for (int i = 0; i < N; i++) open_after += fd_open(fds[i]);
    CHECK(open_after == 0);

    /* fdatasync of a pipe fails (EINVAL): the one failure is the end's error, named */
    int p[2];
    CHECK(pipe(p) == 0);
    f = hk__flusher_new();
    hk__flusher_give(f, p[0], "build/x/not-a-file.so");
    CHECK(hk__flusher_end(f) != HK_OK);
    CHECK(strstr(hk_last_error(), "cannot flush build/x/not-a-file.so to disk") != NULL);
    CHECK(!fd_open(p[0]));
    close(p[1]);
    hk_clear_error();

    /* abandoned (a failed pull): still waits and closes, reports nothing */
    CHECK(pipe(p) == 0);
    f = hk__flusher_new();
    hk__flusher_give(f, p[0], "a");
    hk__flusher_give(f, p[1], "b");
    hk__flusher_abandon(f);
    CHECK(!fd_open(p[0]) && !fd_open(p[1]));
    CHECK_STR(hk_last_error(), "");

    CHECK(pipe(p) == 0);
    hk__flusher_give(NULL, p[0], "c");
    CHECK(!fd_open(p[0]));
    close(p[1]);
    CHECK_RC(hk__flusher_end(NULL), HK_OK);
}

static void *report_mask(void *arg) {
    sigset_t *thread_mask = arg;
    pthread_sigmask(SIG_BLOCK, NULL, thread_mask);
    return NULL;
}

/* A library thread takes none of the application's signals; the caller's mask is left as it was. */
static void test_thread_start(void) {
    sigset_t before, after, thread_mask;
    sigemptyset(&thread_mask);
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    pthread_t t;
    CHECK(hk__thread_start(&t, report_mask, &thread_mask) == 0);
    pthread_join(t, NULL);
    CHECK(sigismember(&thread_mask, SIGINT) == 1 && sigismember(&thread_mask, SIGTERM) == 1 && sigismember(&thread_mask, SIGUSR1) == 1);
    pthread_sigmask(SIG_BLOCK, NULL, &after);
    CHECK(sigismember(&after, SIGINT) == sigismember(&before, SIGINT));
    CHECK(sigismember(&after, SIGTERM) == sigismember(&before, SIGTERM));
}

int main(void) {
    test_error_wrap();
    test_vec();
    test_walk();
    test_text();
    test_concat();
    test_options_version();
    test_flusher();
    test_thread_start();
    return hk_test_finish();
}
