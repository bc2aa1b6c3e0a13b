/* cache/receipt.c: receipt location, exact 64-bit round trip of the stat identity, what voids a
 * receipt, and the "settled" rule for coarse file-system clocks. */
#include "support.h"

#include "cache/cache_internal.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define META "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define COMMIT "1111111111111111111111111111111111111111"

static struct stat fake_stat(void) {
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_mode = S_IFREG | 0644;
    st.st_size = (off_t)((1ull << 40) + 7);
    st.st_dev = (dev_t)0xFFFFFFFFFFFFFF01ull; /* beyond 2^53: would be rounded as a JSON double */
    st.st_ino = (ino_t)0xFFFFFFFFFFFFFFF3ull;
    st.st_mtim.tv_sec = 1700000000;
    st.st_mtim.tv_nsec = 123456789;
    st.st_ctim.tv_sec = 1700000001;
    st.st_ctim.tv_nsec = 987654321;
    return st;
}

static void test_paths(void) {
    const char *root = hk_test_tmpdir();
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/k");
    unsetenv("HUBKERN_RECEIPTS_DIR");
    char *p = hk__receipt_path(root, repo, COMMIT, "torch-cpu");
    char *want = hk__asprintf("%s/.locks/kernels--org--k/hubkern-receipts/%s/torch-cpu.json", root, COMMIT);
    CHECK_STR(p, want);
    free(p);
    free(want);
    CHECK(hk__receipt_path(root, repo, COMMIT, "../x") == NULL);
    CHECK(hk__receipt_path(root, repo, "a/b", "v") == NULL);
    /* relocated: one directory per cache root */
    setenv("HUBKERN_RECEIPTS_DIR", "/r", 1);
    char *a = hk__receipt_path(root, repo, COMMIT, "v");
    char *b = hk__receipt_path("/other/root", repo, COMMIT, "v");
    CHECK(a && hk__str_starts_with(a, "/r/") && hk__str_ends_with(a, "/kernels--org--k/" COMMIT "/v.json"));
    CHECK(a && strlen(a) == strlen("/r/") + 32 + strlen("/kernels--org--k/" COMMIT "/v.json"));
    CHECK(a && b && strcmp(a, b) != 0);
    free(a);
    free(b);
    unsetenv("HUBKERN_RECEIPTS_DIR");
    setenv("HUBKERN_VERIFY", "always", 1);
    CHECK(!hk_receipts_enabled());
    unsetenv("HUBKERN_VERIFY");
    CHECK(hk_receipts_enabled());
    free(repo);
}

static void test_round_trip(void) {
    const char *root = hk_test_tmpdir();
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/k");
    char *path = hk__receipt_path(root, repo, COMMIT, "v");
    struct stat st = fake_stat();
    hk_receipt *r = hk__receipt_new(META);
    hk__receipt_add(r, "lib/_k.so", &st);
    CHECK_RC(hk__receipt_save(r, path, root, repo, COMMIT, "v"), HK_OK);
    hk__receipt_free(r);

    hk_receipt *l = hk__receipt_load(path, root, repo, COMMIT, "v", META);
    CHECK(l != NULL && hk__receipt_count(l) == 1);
    CHECK(hk__receipt_vouches(l, "lib/_k.so", &st));
    CHECK(!hk__receipt_vouches(l, "lib/other.so", &st));
    struct stat x = st;
    x.st_ctim.tv_nsec++;
    CHECK(!hk__receipt_vouches(l, "lib/_k.so", &x));
    x = st;
    x.st_ino--;
    CHECK(!hk__receipt_vouches(l, "lib/_k.so", &x));
    x = st;
    x.st_dev ^= 1;
    CHECK(!hk__receipt_vouches(l, "lib/_k.so", &x));
    x = st;
    x.st_mtim.tv_sec--;
    CHECK(!hk__receipt_vouches(l, "lib/_k.so", &x));
    x = st;
    x.st_size++;
    CHECK(!hk__receipt_vouches(l, "lib/_k.so", &x));
    x = st;
    x.st_mode = S_IFDIR | 0755;
    CHECK(!hk__receipt_vouches(l, "lib/_k.so", &x));
    hk__receipt_free(l);

    /* anything else it was written for voids it */
    CHECK(hk__receipt_load(path, root, repo, COMMIT, "v2", META) == NULL);
    CHECK(hk__receipt_load(path, root, repo, "2222222222222222222222222222222222222222", "v", META) == NULL);
    CHECK(hk__receipt_load(path, root, repo, COMMIT, "v",
                          "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") == NULL);
    char *other = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/j");
    CHECK(hk__receipt_load(path, root, other, COMMIT, "v", META) == NULL);
    free(other);
    char *root2 = hk__asprintf("%s/.", root); /* same directory, other spelling: not the same root string */
    CHECK(hk__receipt_load(path, root2, repo, COMMIT, "v", META) == NULL);
    free(root2);
    CHECK(hk_last_error_code() == HK_OK); /* a miss is not an error */

    /* an entry with an unsafe path or a short stat voids the whole receipt */
    char *text = NULL;
    CHECK_RC(hk__read_file(&text, NULL, path, 1 << 20), HK_OK);
    char *bad = text ? strdup(text) : NULL;
    char *at = bad ? strstr(bad, "lib/_k.so") : NULL;
    if (at) memcpy(at, "../_k.so", 8);
    hk_test_write(path, bad ? bad : "");
    CHECK(hk__receipt_load(path, root, repo, COMMIT, "v", META) == NULL);
    hk_test_write(path, text ? text : "");
    hk_receipt *again = hk__receipt_load(path, root, repo, COMMIT, "v", META); /* the intact text loads */
    CHECK(again != NULL);
    hk__receipt_free(again);
    free(bad);
    free(text);

    hk__receipt_remove(path);
    CHECK(!hk__path_exists(path));
    hk__receipt_remove(path); /* twice is fine */
    CHECK(hk__receipt_load(path, root, repo, COMMIT, "v", META) == NULL);
    free(path);
    free(repo);
}

/* Paths in sorted order are found by binary search, others through an index made when the order
 * breaks; either way the first entry of a path counts. */
static void test_order(void) {
    const char *root = hk_test_tmpdir();
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/o");
    char *path = hk__receipt_path(root, repo, COMMIT, "v");
    struct stat st = fake_stat(), other = fake_stat();
    other.st_ino++;
    const char *names[] = {"a.py", "b/c.py", "b/d.py", "e.py"};
    for (int shuffled = 0; shuffled < 2; shuffled++) {
        hk_receipt *r = hk__receipt_new(META);
        CHECK_RC(hk__receipt_reserve(r, 2), HK_OK);
        for (int i = 0; i < 4; i++) hk__receipt_add(r, names[shuffled ? 3 - i : i], &st);
        hk__receipt_add(r, "b/c.py", &other); /* a second entry of a path: the first counts */
        CHECK_RC(hk__receipt_index(r), HK_OK);
        for (int i = 0; i < 4; i++) CHECK(hk__receipt_vouches(r, names[i], &st));
        CHECK(!hk__receipt_vouches(r, "b", &st) && !hk__receipt_vouches(r, "f.py", &st));
        CHECK_RC(hk__receipt_save(r, path, root, repo, COMMIT, "v"), HK_OK);
        hk__receipt_free(r);
        hk_receipt *l = hk__receipt_load(path, root, repo, COMMIT, "v", META);
        CHECK(l != NULL && hk__receipt_count(l) == 4);
        for (int i = 0; i < 4; i++) CHECK(hk__receipt_vouches(l, names[i], &st));
        CHECK(!hk__receipt_vouches(l, "b/c.py", &other) && !hk__receipt_vouches(l, "0.py", &st));
        hk__receipt_free(l);
    }
    free(path);
    free(repo);
}

static void test_settled(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct stat st = fake_stat();
    st.st_ctim = now;
    if (st.st_ctim.tv_nsec == 0) st.st_ctim.tv_nsec = 1;
    CHECK(!hk__receipt_stat_settled(&st, &now)); /* changed this very moment */
    struct timespec later = st.st_ctim;
    later.tv_nsec += 10000000; /* 10 ms: possibly the same coarse tick */
    if (later.tv_nsec >= 1000000000) later.tv_sec++, later.tv_nsec -= 1000000000;
    CHECK(!hk__receipt_stat_settled(&st, &later));
    later = st.st_ctim;
    later.tv_sec += 1; /* well past any tick */
    CHECK(hk__receipt_stat_settled(&st, &later));
    /* whole-second timestamps: two seconds of margin */
    st.st_ctim.tv_nsec = 0;
    later = st.st_ctim;
    later.tv_sec += 1;
    CHECK(!hk__receipt_stat_settled(&st, &later));
    later.tv_sec += 2;
    CHECK(hk__receipt_stat_settled(&st, &later));
    /* a ctime in the future (clock set back) is never settled */
    later = st.st_ctim;
    later.tv_sec -= 100;
    CHECK(!hk__receipt_stat_settled(&st, &later));
}

static void test_settle(void) {
    const char *dir = hk_test_tmpdir();
    char *path = hk__asprintf("%s/just-written", dir);
    struct timespec t0, t1;
    hk_test_write(path, "new content");
    clock_gettime(CLOCK_REALTIME, &t0);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    /* written a moment ago: not settled (unless this process was descheduled for 20 ms right here) */
    bool was = hk__receipt_stat_settled(&st, &t0);
    struct timespec before = t0;
    hk__receipt_settle(&st, &t0, path);
    clock_gettime(CLOCK_REALTIME, &t1);
    CHECK(hk__receipt_stat_settled(&st, &t0)); /* waited past the window, took both again */
    if (!was) CHECK(t0.tv_sec > before.tv_sec || (t0.tv_sec == before.tv_sec && t0.tv_nsec > before.tv_nsec));
    struct stat now;
    CHECK(stat(path, &now) == 0 && now.st_ino == st.st_ino && now.st_ctim.tv_nsec == st.st_ctim.tv_nsec);
    /* a whole-second file system (2 s window) is not waited for */
    struct stat coarse = st;
    coarse.st_ctim = t1;
    coarse.st_ctim.tv_nsec = 0;
    struct timespec t2 = t1, t3;
    hk__receipt_settle(&coarse, &t2, path);
    clock_gettime(CLOCK_REALTIME, &t3);
    CHECK(coarse.st_ctim.tv_nsec == 0 && t2.tv_sec == t1.tv_sec && t2.tv_nsec == t1.tv_nsec);
    CHECK((t3.tv_sec - t1.tv_sec) * 1000000000L + (t3.tv_nsec - t1.tv_nsec) < 500000000L);
    unlink(path);
    free(path);
}

/* The staged check of a pull hands its findings to the check of the published copy, whose links
 * resolve to the same files: those are then vouched for, not read again, and the receipt of the
 * published variant is written; a file touched in between is hashed again. */
static void test_prior(void) {
    unsetenv("HUBKERN_VERIFY");
    unsetenv("HUBKERN_RECEIPTS_DIR");
    char *root = hk__path_join(hk_test_tmpdir(), "prior");
    char *staged = hk__path_join(root, "stage-v");
    char *vdir = hk__asprintf("%s/kernels--org--p/snapshots/" COMMIT "/build/v", root);
    CHECK(hk__mkdirs(staged, 0777) == HK_OK && hk__mkdirs(vdir, 0777) == HK_OK);
    hk_strbuf meta;
    hk__sb_init(&meta);
    hk__sb_append(&meta, "{\"digest\":{\"algorithm\":\"sha256\",\"files\":{");
    enum { N = 5 };
    for (int i = 0; i < N; i++) {
        char rel[16], body[16];
        snprintf(rel, sizeof rel, "f%d.py", i);
        snprintf(body, sizeof body, "# %d\n", i);
        char *sp = hk__path_join(staged, rel), *pp = hk__path_join(vdir, rel);
        CHECK(hk__write_file_atomic(sp, body, strlen(body)) == HK_OK);
        CHECK(symlink(sp, pp) == 0); /* the published link: the same file */
        char b64[100];
        CHECK(hk__hash_file_b64(b64, sizeof b64, HK_HASH_SHA256, sp) == HK_OK);
        hk__sb_printf(&meta, "%s\"%s\":\"%s\"", i ? "," : "", rel, b64);
        free(sp);
        free(pp);
    }
    hk__sb_append(&meta, "}}}");
    char *m1 = hk__path_join(staged, "metadata.json"), *m2 = hk__path_join(vdir, "metadata.json");
    CHECK(hk__write_file_atomic(m1, meta.data, meta.len) == HK_OK);
    CHECK(symlink(m1, m2) == 0);
    usleep(50 * 1000); /* past the racy-ctime margin: the staged check may record them */
    bool has = false;
    hk_verify_stats st;
    hk_receipt *prior = NULL;
    CHECK_RC(hk__verify_variant_prior(&has, &st, staged, NULL, true, NULL, 0, HK_VERIFY_KEEP_LIST, &prior), HK_OK);
    CHECK(has && st.files_hashed == N && prior != NULL && hk__receipt_count(prior) == N);
    CHECK_RC(hk__verify_variant_prior(&has, &st, vdir, root, true, NULL, 0, 0, &prior), HK_OK);
    CHECK(st.files_trusted == N && st.files_hashed == 0);
    CHECK(prior == NULL); /* used: freed before the published copy's receipt was written */
    char *repo = hk__asprintf("%s/kernels--org--p", root);
    char *rp = hk__receipt_path(root, repo, COMMIT, "v");
    CHECK(hk__path_exists(rp)); /* written although nothing was read */
    char msha[65];
    CHECK(hk__sha256_hex(msha, meta.data, meta.len) == HK_OK);
    hk_receipt *got = hk__receipt_load(rp, root, repo, COMMIT, "v", msha);
    CHECK(got && hk__receipt_count(got) == N); /* the staged check's entries, no second receipt made */
    hk__receipt_free(got);
    /* without its own receipt, a file changed since the staged check is read again; the receipt
     * written then holds the staged entries before it, its new stat, and the entries after it */
    unlink(rp);
    CHECK_RC(hk__verify_variant_prior(&has, &st, staged, NULL, true, NULL, 0, HK_VERIFY_KEEP_LIST, &prior), HK_OK);
    CHECK(prior != NULL && hk__receipt_count(prior) == N);
    char *f2 = hk__path_join(staged, "f2.py");
    CHECK(hk__write_file_atomic(f2, "# 2\n", 4) == HK_OK); /* same bytes, a new inode */
    usleep(50 * 1000);                                        /* settled: recorded */
    CHECK_RC(hk__verify_variant_prior(&has, &st, vdir, root, true, NULL, 0, 0, &prior), HK_OK);
    CHECK(st.files_trusted == N - 1 && st.files_hashed == 1);
    CHECK(prior == NULL);
    got = hk__receipt_load(rp, root, repo, COMMIT, "v", msha);
    struct stat s2;
    CHECK(stat(f2, &s2) == 0);
    CHECK(got && hk__receipt_count(got) == N && hk__receipt_vouches(got, "f2.py", &s2));
    hk__receipt_free(got);
    /* the published copy's metadata.json differs from the staged one: nothing carried is used */
    unlink(rp);
    CHECK_RC(hk__verify_variant_prior(&has, &st, staged, NULL, true, NULL, 0, HK_VERIFY_KEEP_LIST, &prior), HK_OK);
    unlink(m2);
    CHECK(hk__write_file_atomic(m2, meta.data, meta.len - 3) == HK_OK); /* "}}}" cut: not JSON */
    CHECK_RC(hk__verify_variant_prior(&has, &st, vdir, root, true, NULL, 0, 0, &prior), HK_ERR_PARSE);
    CHECK(prior != NULL); /* not borrowed: the caller's to free */
    hk__receipt_free(prior);
    free(f2);
    free(rp);
    free(repo);
    free(m1);
    free(m2);
    hk__sb_free(&meta);
    free(vdir);
    free(staged);
    free(root);
}

/* The receipt is read entry by entry (not as one cJSON tree): the documents cJSON_Parse takes it
 * takes, formatted or not, the first of a key counting and what follows the object ignored; what
 * cJSON_Parse refuses (a trailing comma, a truncated text) voids it. */
static void test_load_walk(void) {
    const char *root = hk_test_tmpdir();
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/w");
    char *path = hk__receipt_path(root, repo, COMMIT, "v");
    struct stat st = fake_stat();
    hk_receipt *r = hk__receipt_new(META);
    hk__receipt_add(r, "a.py", &st);
    hk__receipt_add(r, "b \"q\" \xc3\xa9.py", &st); /* an escape and UTF-8 in a path */
    CHECK_RC(hk__receipt_save(r, path, root, repo, COMMIT, "v"), HK_OK);
    hk__receipt_free(r);
    char *text = NULL;
    size_t len = 0;
    CHECK_RC(hk__read_file(&text, &len, path, 1 << 20), HK_OK);
    cJSON *doc = cJSON_Parse(text);
    CHECK(doc != NULL);
    char *pretty = cJSON_Print(doc);
    char *files = strstr(text, ",\"files\":[");
    CHECK(pretty && files);
    size_t head = (size_t)(files - text);
    struct {
        char *doc;
        size_t want; /* entries; 0: void */
        bool json;   /* cJSON_Parse takes it */
    } c[] = {
        {hk__strdup(text), 2, true},
        {hk__strdup(pretty), 2, true},
        {hk__asprintf("%s  trailing junk", text), 2, true},
        /* a second key: the first counts */
        {hk__asprintf("%.*s,\"format\":\"other\"%s", (int)head, text, files), 2, true},
        /* the first "files" is no list */
        {hk__asprintf("%.*s,\"files\":{}%s", (int)head, text, files), 0, true},
        /* other keys, any values */
        {hk__asprintf("%.*s,\"x\":[1,{\"y\":null}]%s", (int)head, text, files), 2, true},
        /* a stray comma */
        {hk__asprintf("%.*s,%s", (int)head, text, files), 0, false},
        {hk__asprintf("%.*s]}", (int)(strlen(text) - 2), text), 2, true},
        /* a trailing comma */
        {hk__asprintf("%.*s,]}", (int)(strlen(text) - 2), text), 0, false},
        /* truncated */
        {hk__asprintf("%.*s", (int)(strlen(text) - 1), text), 0, false},
        /* an entry without its stat */
        {hk__asprintf("%.*s,{\"path\":\"c.py\"}]}", (int)(strlen(text) - 2), text), 0, true},
        {hk__asprintf("%.*s,{\"path\":\"a.py\",\"stat\":\"1 2 3 4 5\"}]}", (int)(strlen(text) - 2), text), 2, true},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        CHECK(c[i].doc && hk__write_file_atomic(path, c[i].doc, strlen(c[i].doc)) == HK_OK);
        cJSON *ref = cJSON_Parse(c[i].doc); /* the walk's verdict on validity is cJSON's */
        CHECK((ref != NULL) == c[i].json);
        cJSON_Delete(ref);
        hk_receipt *l = hk__receipt_load(path, root, repo, COMMIT, "v", META);
        if (hk__receipt_count(l) != c[i].want || (c[i].want && !hk__receipt_vouches(l, "a.py", &st)))
            fprintf(stderr, "case %zu: %zu entries\n", i, hk__receipt_count(l));
        CHECK(hk__receipt_count(l) == c[i].want && (!c[i].want || hk__receipt_vouches(l, "a.py", &st)));
        hk__receipt_free(l);
        free(c[i].doc);
    }
    cJSON_Delete(doc);
    free(pretty);
    free(text);
    free(path);
    free(repo);
}

int main(void) {
    test_paths();
    test_round_trip();
    test_order();
    test_settled();
    test_settle();
    test_prior();
    test_load_walk();
    return hk_test_finish();
}
