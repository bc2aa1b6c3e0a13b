/* Concurrency (the ThreadSanitizer stage of scripts/test.sh runs this with test_kernel and
 * test_server): the process-wide env cache from many threads, a variant published next to its
 * readers, mkdir -p next to an rmdir of its parent, hk_get_kernel from many threads (one registry
 * entry and one handle per variant, shared and separate caches), and the in-process mirror under
 * load from many clients at once. */
#include "support.h"

#include "cache/cache_internal.h"
#include "client/stage.h"
#include "env/detected.h"
#include "hubkern/hub.h"
#include "hubkern.h"
#include "internal.h"
#include "mirror.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

enum { N = 8 };
static char g_endpoint[128];
static char *g_cache_shared;

/* ---- hk__env_cached ----------------------------------------------------------------------- */
typedef struct env_arg {
    const hk_env *got;
    int rc;
} env_arg;

static void *env_thread(void *p) {
    env_arg *a = p;
    a->rc = hk__env_cached(&a->got);
    return NULL;
}

static void test_env_cached(void) {
    pthread_t t[N];
    env_arg a[N];
    memset(a, 0, sizeof a);
    for (int i = 0; i < N; i++) pthread_create(&t[i], NULL, env_thread, &a[i]);
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        CHECK_RC(a[i].rc, HK_OK);
        CHECK(a[i].got != NULL && a[i].got == a[0].got); /* detected once, shared */
    }
    if (a[0].got) CHECK(hk_env_os(a[0].got) != NULL);
}

/* ---- hk_get_kernel -------------------------------------------------------------------------- */
typedef struct get_arg {
    const char *cache;
    int version;
    hk_kernel *k;
    int rc;
    char err[512]; /* the thread's own last error: hk_last_error() is per thread */
} get_arg;

static void *get_thread(void *p) {
    get_arg *a = p;
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.repo_id = "hubkern/rmsnorm";
    o.kernel_version = a->version;
    o.hub_options.endpoint = g_endpoint;
    o.hub_options.cache_dir = a->cache;
    o.backend = "cpu";
    o.hub_options.token = "";
    a->rc = hk_get_kernel(&a->k, &o);
    snprintf(a->err, sizeof a->err, "%s", hk_last_error());
    return NULL;
}

static void test_get_kernel_threads(void) {
    pthread_t t[N];
    get_arg a[N];
    char *own[N];
    memset(a, 0, sizeof a);
    for (int i = 0; i < N; i++) {
        /* half share one cache (pull locks, one download), half have their own */
        own[i] = hk__asprintf("%s/cache-%d", hk_test_tmpdir(), i);
        a[i].cache = i % 2 ? g_cache_shared : own[i];
        a[i].version = i % 4 == 3 ? 2 : 1;
        pthread_create(&t[i], NULL, get_thread, &a[i]);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        CHECK_MSG(a[i].rc == HK_OK, "thread %d (%s cache, version %d): %s: %s", i, a[i].cache == g_cache_shared ? "shared" : "own",
                  a[i].version, hk_error_name(a[i].rc), a[i].err);
        /* one handle per variant directory, whichever thread loaded it */
        for (int j = 0; j < i; j++) {
            if (a[i].k && a[j].k && a[i].cache == a[j].cache && a[i].version == a[j].version) CHECK(a[i].k == a[j].k);
        }
    }
    for (int i = 0; i < N; i++) {
        hk_kernel_unref(a[i].k);
        free(own[i]);
    }
}

/* ---- the mirror under load ---------------------------------------------------------------- */
static void *client_thread(void *p) {
    int *fails = p;
    hk_hub_options ho;
    hk_hub_options_init(&ho, HK_HUB_OPTIONS_VERSION);
    ho.endpoint = g_endpoint;
    ho.cache_dir = g_cache_shared;
    ho.token = "";
    hk_hub *hub = NULL;
    if (hk_hub_new(&hub, &ho) != HK_OK) {
        (*fails)++;
        return NULL;
    }
    for (int r = 0; r < 10; r++) {
        hk_hub_version_list *l = NULL;
        if (hk_hub_list_versions(&l, hub, "hubkern/small") != HK_OK || hk_hub_version_list_count(l) != 2) (*fails)++;
        char *c = NULL;
        char **v = NULL;
        size_t n = 0;
        if (l && (hk_hub_list_variants(&v, &n, hub, "hubkern/small", hk_hub_version_list_commit(l, 0)) != HK_OK || n != 2))
            (*fails)++;
        if (hk_hub_resolve(&c, hub, "hubkern/small", 1, NULL) != HK_OK) (*fails)++;
        hk_hub_strv_free(v);
        hk_free(c);
        hk_hub_version_list_free(l);
    }
    hk_hub_free(hub);
    return NULL;
}

static void test_server_load(void) {
    pthread_t t[N];
    int fails[N] = {0};
    for (int i = 0; i < N; i++) pthread_create(&t[i], NULL, client_thread, &fails[i]);
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) CHECK(fails[i] == 0);
}

/* ---- publishing next to readers and rmdir ------------------------------------------------- */
/* The arch check links a variant's metadata.json into the snapshot before the pull; the pull's
 * publish then replaces that incomplete copy. A reader of metadata.json (another thread's arch
 * check) must find it at every instant: the swap is one step, not "move aside, then rename". */
typedef struct reader_arg {
    const char *path;
    atomic_bool *stop;
    long reads, misses;
} reader_arg;

static void *reader_thread(void *p) {
    reader_arg *a = p;
    while (!atomic_load(a->stop)) {
        int fd = open(a->path, O_RDONLY);
        if (fd >= 0) close(fd);
        else a->misses++;
        a->reads++;
    }
    return NULL;
}

static void test_publish_keeps_metadata_visible(void) {
    const char *commit = "0123456789abcdef0123456789abcdef01234567";
    const char *etag = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    char *root = hk__asprintf("%s/publish-cache", hk_test_tmpdir());
    char *repo = hk_cache_repo_dir(root, HK_REPO_KERNEL, "org/k");
    char *blob = hk__cache_blob_path(repo, etag, NULL);
    hk_test_write(blob, "{}\n");
    CHECK_RC(hk_cache_link_snapshot(repo, commit, "build/v/metadata.json", etag), HK_OK);
    char *meta = hk__cache_snapshot_path(repo, commit, "build/v/metadata.json");
    atomic_bool stop = false;
    reader_arg ra[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        ra[i] = (reader_arg){meta, &stop, 0, 0};
        pthread_create(&t[i], NULL, reader_thread, &ra[i]);
    }
    int failed = 0;
    for (int round = 0; round < 150; round++) {
        hk_stage st;
        int rc = hk__stage_open(&st, root, repo, commit);
        if (rc == HK_OK) rc = hk__stage_link(&st, "build/v/metadata.json", etag);
        if (rc == HK_OK) rc = hk__stage_link(&st, "build/v/kernel.py", etag);
        if (rc == HK_OK) rc = hk__stage_publish(&st, "v", NULL, NULL); /* no `complete`: always replaced */
        if (rc == HK_OK) hk__stage_discard(&st);
        if (rc) failed++;
    }
    atomic_store(&stop, true);
    long reads = 0, misses = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        reads += ra[i].reads;
        misses += ra[i].misses;
    }
    CHECK(failed == 0);
    CHECK_MSG(misses == 0, "metadata.json was missing for %ld of %ld reads during 150 publishes", misses, reads);
    char *py = hk__cache_snapshot_path(repo, commit, "build/v/kernel.py");
    CHECK(hk__path_exists(py));
    free(py);
    free(meta);
    free(blob);
    free(repo);
    free(root);
}

/* hk__mkdirs while another process removes the parent whenever it is empty (as a stage's discard
 * removes .hk-staging): the missing parent is made again, never reported as ENOENT. */
typedef struct rmdir_arg {
    const char *dir;
    atomic_bool *stop;
} rmdir_arg;

static void *rmdir_thread(void *p) {
    rmdir_arg *a = p;
    while (!atomic_load(a->stop)) {
        rmdir(a->dir);
        usleep(300); /* a discard now and then, not a livelock */
    }
    return NULL;
}

static void test_mkdirs_against_rmdir(void) {
    char *parent = hk__asprintf("%s/staging-like", hk_test_tmpdir());
    atomic_bool stop = false;
    rmdir_arg ra = {parent, &stop};
    pthread_t t;
    pthread_create(&t, NULL, rmdir_thread, &ra);
    int failed = 0;
    char last[512] = "";
    for (int i = 0; i < 3000; i++) {
        char *child = hk__asprintf("%s/stage-%d", parent, i);
        if (hk__mkdirs(child, 0777) != HK_OK) {
            failed++;
            snprintf(last, sizeof last, "%s", hk_last_error());
        } else {
            rmdir(child);
        }
        free(child);
    }
    atomic_store(&stop, true);
    pthread_join(t, NULL);
    CHECK_MSG(failed == 0, "%d of 3000 mkdirs failed; last: %s", failed, last);
    free(parent);
}

int main(void) {
    test_env_cached();
    test_publish_keeps_metadata_visible();
    test_mkdirs_against_rmdir();
    const char *b = getenv("HK_BUILD_DIR");
    char *src = hk__asprintf("%s/kernels/rmsnorm/hub", b ? b : ".");
    char *variant = hk__asprintf("%s/build/tvm-ffi01-cpu-x86_64-linux", src);
    char *store = hk__asprintf("%s/store", hk_test_tmpdir());
    /* a small repo for the load test: two variants, two versions */
    char *small = hk__asprintf("%s/small", hk_test_tmpdir());
    char *f = hk__asprintf("%s/build/torch-universal/small/__init__.py", small);
    hk_test_write(f, "x = 1\n");
    free(f);
    f = hk__asprintf("%s/build/tvm-ffi01-cpu-x86_64-linux/metadata.json", small);
    hk_test_write(f, "{\"version\": 1}\n");
    free(f);
    hk_test_publish(store, small, "hubkern/small", "v1", NULL, NULL);
    srv_publish_options second = {.message = "second major version"};
    hk_test_publish(store, small, "hubkern/small", "v2", &second, NULL);
    bool have_kernel = hk__is_dir(variant);
    if (have_kernel) {
        hk_test_publish(store, src, "hubkern/rmsnorm", "v1", NULL, NULL);
        hk_test_publish(store, src, "hubkern/rmsnorm", "v2", &second, NULL);
    }
    srv_server *srv = hk_test_start_mirror(store, "hubkern", g_endpoint, sizeof g_endpoint);
    if (!srv) return hk_test_finish();
    unsetenv("HF_HUB_OFFLINE");
    g_cache_shared = hk__asprintf("%s/cache-shared", hk_test_tmpdir());
    if (have_kernel) test_get_kernel_threads();
    else fprintf(stderr, "hk_get_kernel threads skipped: no staged RMSNorm variant %s (HK_BUILD_KERNELS=OFF)\n", variant);
    test_server_load();
    srv_stop(srv);
    free(g_cache_shared);
    free(small);
    free(store);
    free(variant);
    free(src);
    return hk_test_finish();
}
