/* hk_get_kernel end to end against an in-process mirror (hubkern_server on loopback) holding the
 * real RMSNorm CPU tvm-ffi variant staged by kernels/rmsnorm: resolve, pull, verify, load, call;
 * the registry across versions; hk_has_kernel; trust; offline; LOCAL_KERNELS; hk_load_locked;
 * and each bad input as its specific error.
 * Over 600 lines on purpose: every case shares one published mirror and its fixtures (one process).
 */
#include "support.h"

#include "cache/cache_internal.h"
#include "hubkern/hub.h"
#include "hubkern.h"
#include "hubkern/variant.h"
#include "internal.h"
#include "mirror.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char g_endpoint[128];
static char *g_store, *g_hub_src, *g_variant;

static char *cache_dir(const char *name) {
    char *p = hk__asprintf("%s/%s", hk_test_tmpdir(), name);
    hk__mkdirs(p, 0777);
    return p;
}

static void opts(hk_get_kernel_options *o, const char *repo, int version, const char *cache) {
    hk_get_kernel_options_init(o, HK_GET_KERNEL_OPTIONS_VERSION);
    o->repo_id = repo;
    o->kernel_version = version;
    o->hub_options.endpoint = g_endpoint;
    o->hub_options.cache_dir = cache;
    o->backend = "cpu"; /* deterministic on machines with CUDA libraries, as kernels allows */
    o->hub_options.token = "";
}

/* A Hub client on the test mirror with the given cache (no token). */
static hk_hub *mirror_hub(const char *cache) {
    hk_hub_options ho;
    hk_hub_options_init(&ho, HK_HUB_OPTIONS_VERSION);
    ho.endpoint = g_endpoint;
    ho.cache_dir = cache;
    ho.token = "";
    hk_hub *hub = NULL;
    CHECK_RC(hk_hub_new(&hub, &ho), HK_OK);
    return hub;
}

static double nsqrt(double v) { /* Newton: the unit tests do not link libm */
    double r = v > 1 ? v : 1;
    for (int i = 0; i < 200; i++) {
        double n = 0.5 * (r + v / r);
        if (n == r) break;
        r = n;
    }
    return r;
}

static int rms_ok(const hk_kernel *k) {
    enum { R = 3, H = 257 };
    float x[R * H], out[R * H], w[H];
    for (int i = 0; i < R * H; i++) {
        x[i] = (float)((i * 37) % 101) / 25.0f - 2.0f;
        out[i] = NAN;
    }
    for (int i = 0; i < H; i++) w[i] = 0.5f + (float)(i % 7) / 7.0f;
    int64_t s[2] = {R, H}, ws[1] = {H};
    hk_dltensor tx = {x, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, s, NULL, 0};
    hk_dltensor to = {out, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, s, NULL, 0};
    hk_dltensor tw = {w, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_FLOAT, 32, 1}, ws, NULL, 0};
    hk_value a[4] = {hk_value_tensor(&to), hk_value_tensor(&tx), hk_value_tensor(&tw), hk_value_float(1e-6)};
    if (hk_kernel_call(NULL, k, "rms_norm", a, 4) != HK_OK) return 0;
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < H; i++) ss += (double)x[r * H + i] * x[r * H + i];
        double inv = 1.0 / nsqrt(ss / H + 1e-6);
        for (int i = 0; i < H; i++) {
            double want = x[r * H + i] * inv * w[i];
            if (!(fabs(out[r * H + i] - want) <= 1e-5 + 1e-5 * fabs(want))) return 0;
        }
    }
    return 1;
}

static void publish(const char *src, const char *repo, const char *branch, char commit[41]) {
    hk_test_publish(g_store, src, repo, branch, NULL, commit);
}

static int progress_calls;
static int count_progress(void *ud, const hk_progress *p) {
    progress_calls++;
    return ud ? 1 : 0; /* userdata set: cancel */
}

static void test_get_and_call(void) {
    char *cache = cache_dir("c1");
    hk_get_kernel_options o;
    opts(&o, "hubkern/rmsnorm", 1, cache);
    o.hub_options.progress = count_progress;
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (!k) return;
    CHECK_STR(hk_kernel_repo_id(k), "hubkern/rmsnorm");
    CHECK(strlen(hk_kernel_commit(k)) == 40);
    CHECK_STR(hk_kernel_variant(k), "tvm-ffi01-cpu-x86_64-linux");
    CHECK(strstr(hk_kernel_path(k), "/kernels--hubkern--rmsnorm/snapshots/") != NULL);
    CHECK(hk_kernel_get_kind(k) == HK_KERNEL_TVM_FFI);
    CHECK_STR(hk_kernel_get_metadata(k)->name, "rmsnorm");
    CHECK(hk_kernel_num_functions(k) == 2);
    CHECK_STR(hk_kernel_function_name(k, 1), "rms_norm");
    CHECK(progress_calls > 0);
    CHECK(rms_ok(k));
    /* the real kernel's own argument checks come back as specific errors */
    float d[4] = {0};
    int64_t s[1] = {4};
    hk_dltensor t = {d, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_FLOAT, 32, 1}, s, NULL, 0};
    hk_value three[3] = {hk_value_tensor(&t), hk_value_tensor(&t), hk_value_tensor(&t)};
    CHECK_RC(hk_kernel_call(NULL, k, "rms_norm", three, 3), HK_ERR_TYPE);
    hk_value wrong[4] = {hk_value_int(1), hk_value_tensor(&t), hk_value_tensor(&t), hk_value_float(1e-6)};
    CHECK_RC(hk_kernel_call(NULL, k, "rms_norm", wrong, 4), HK_ERR_TYPE);
    hk_dltensor ti = {d, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_INT, 32, 1}, s, NULL, 0};
    hk_value badtype[4] = {hk_value_tensor(&ti), hk_value_tensor(&ti), hk_value_tensor(&ti), hk_value_float(1e-6)};
    int rc = hk_kernel_call(NULL, k, "rms_norm", badtype, 4);
    CHECK(rc == HK_ERR_KERNEL || rc == HK_ERR_TYPE);
    CHECK(strstr(hk_last_error(), "rms_norm") != NULL);
    CHECK(rms_ok(k)); /* still fine after errors */

    /* asking again: the same handle (no second load); offline too, from refs/v1 */
    hk_kernel *k2 = NULL, *k3 = NULL;
    CHECK_RC(hk_get_kernel(&k2, &o), HK_OK);
    CHECK(k2 == k);
    o.hub_options.offline = true;
    o.hub_options.endpoint = "http://127.0.0.1:9"; /* nothing listens: offline must not need it */
    CHECK_RC(hk_get_kernel(&k3, &o), HK_OK);
    CHECK(k3 == k);
    hk_kernel_unref(k3);
    /* by revision (branch name) */
    opts(&o, "hubkern/rmsnorm", HK_VERSION_UNSET, cache);
    o.revision = "v1";
    CHECK_RC(hk_get_kernel(&k3, &o), HK_OK);
    CHECK(k3 == k);
    hk_kernel_unref(k3);
    hk_kernel_unref(k2);

    /* version 2 side by side (another commit, another directory, another library) */
    hk_kernel *v2 = NULL;
    opts(&o, "hubkern/rmsnorm", 2, cache);
    CHECK_RC(hk_get_kernel(&v2, &o), HK_OK);
    CHECK(v2 && v2 != k);
    if (v2) {
        CHECK(strcmp(hk_kernel_commit(v2), hk_kernel_commit(k)) != 0);
        CHECK(strcmp(hk_kernel_library_path(v2), hk_kernel_library_path(k)) != 0);
        CHECK(rms_ok(v2) && rms_ok(k));
    }
    hk_kernel_unref(v2);
    hk_kernel_unref(k);

    /* cancelled by the progress callback (fresh cache, so there is a download to cancel) */
    char *c2 = cache_dir("c-cancel");
    opts(&o, "hubkern/rmsnorm", 1, c2);
    o.hub_options.progress = count_progress;
    o.hub_options.progress_userdata = (void *)1;
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_CANCELLED);
    free(c2);
    free(cache);
}

static void test_has_kernel(void) {
    char *cache = cache_dir("c-has");
    hk_get_kernel_options o;
    opts(&o, "hubkern/rmsnorm", 1, cache);
    int has = false;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(has);
    opts(&o, "hubkern/armonly", 1, cache);
    has = true;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(!has);
    /* "no" is an answer: HK_OK with no error set, the reason in the out-parameters */
    int why = -1;
    char *reason = NULL;
    has = 1;
    CHECK_RC(hk_has_kernel(&has, &why, &reason, &o), HK_OK);
    CHECK(!has && why == HK_ERR_NO_VARIANT);
    CHECK(hk_last_error_code() == HK_OK && hk_last_error()[0] == '\0');
    CHECK(reason && strstr(reason, "tvm-ffi01-cpu-aarch64-linux: CPU (aarch64) does not match"));
    hk_free(reason);
    opts(&o, "hubkern/rmsnorm", 1, cache);
    why = -1;
    reason = (char *)"stale";
    CHECK_RC(hk_has_kernel(&has, &why, &reason, &o), HK_OK);
    CHECK(has && why == HK_OK && reason == NULL && hk_last_error_code() == HK_OK);
    opts(&o, "hubkern/armonly", 1, cache);
    /* has_kernel downloads no build: at most the chosen variant's metadata.json (fetched for the
     * arch check when the machine has a GPU), never a library */
    char *snap = hk__asprintf("%s/kernels--hubkern--rmsnorm", cache);
    char *cmd = hk__asprintf("test \"$(ls -A '%s/blobs' 2>/dev/null | wc -l)\" -le 1 && "
                            "test -z \"$(find '%s/snapshots' -name '*.so' 2>/dev/null)\"", snap, snap);
    CHECK(system(cmd) == 0);
    free(cmd);
    free(snap);
    opts(&o, "hubkern/nope", 1, cache);
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_ERR_REPO_NOT_FOUND);
    free(cache);
}

static void test_bad_input(void) {
    char *cache = cache_dir("c-bad");
    hk_get_kernel_options o;
    hk_kernel *k = (hk_kernel *)1;
    opts(&o, "hubkern/does-not-exist", 1, cache);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_REPO_NOT_FOUND);
    CHECK(k == NULL);
    opts(&o, "hubkern/rmsnorm", 7, cache);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_VERSION_NOT_FOUND);
    opts(&o, "hubkern/rmsnorm", HK_VERSION_UNSET, cache);
    o.revision = "no-such-branch";
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_REVISION_NOT_FOUND);
    opts(&o, "hubkern/rmsnorm", 1, cache);
    o.revision = "v1";
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG); /* both */
    opts(&o, "hubkern/rmsnorm", HK_VERSION_UNSET, cache);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG); /* neither */
    opts(&o, "../etc", 1, cache);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG);
    CHECK_RC(hk_get_kernel(&k, NULL), HK_ERR_INVALID_ARG);
    /* no variant for this machine: the trace names each candidate and its reason */
    opts(&o, "hubkern/armonly", 1, cache);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "tvm-ffi01-cpu-aarch64-linux: CPU (aarch64) does not match") != NULL);
    /* a variant named by the caller: an unknown one lists what exists; a known one loads */
    opts(&o, "hubkern/rmsnorm", 1, cache);
    o.variant = "tvm-ffi01-rocm71-x86_64-linux";
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "tvm-ffi01-rocm71-x86_64-linux") != NULL);
    CHECK(strstr(hk_last_error(), "tvm-ffi01-cpu-x86_64-linux") != NULL);
    int has = true;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(!has);
    o.variant = "tvm-ffi01-cpu-x86_64-linux";
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (k) CHECK_STR(hk_kernel_variant(k), "tvm-ffi01-cpu-x86_64-linux");
    hk_kernel_unref(k);
    /* untrusted publisher, then the opt-out */
    opts(&o, "stranger/rmsnorm", 1, cache);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_UNTRUSTED);
    o.trust_remote_code = true;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    hk_kernel_unref(k);
    /* offline with nothing cached */
    char *empty = cache_dir("c-empty");
    opts(&o, "hubkern/rmsnorm", 1, empty);
    o.hub_options.offline = true;
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_OFFLINE);
    free(empty);

    /* a corrupted cache file: pull "hubkern/corrupt" without loading, damage the library blob */
    char *cc = cache_dir("c-corrupt");
    hk_hub *hub = mirror_hub(cc);
    hk_pull_spec s;
    hk_pull_spec_init(&s, HK_PULL_SPEC_VERSION);
    s.repo_id = "hubkern/corrupt";
    s.kernel_version = 1;
    s.variant = "tvm-ffi01-cpu-x86_64-linux";
    char *dir = NULL, *commit = NULL, *variant = NULL;
    CHECK_RC(hk_hub_fetch_variant(&dir, &commit, &variant, hub, &s), HK_OK);
    hk_hub_free(hub);
    if (dir) {
        char *cmd = hk__asprintf("f=$(ls '%s'/*.so) && b=$(readlink -f \"$f\") && chmod u+w \"$b\" && "
                                "printf 'XXXX' | dd of=\"$b\" bs=1 seek=4096 conv=notrunc 2>/dev/null", dir);
        CHECK(system(cmd) == 0);
        free(cmd);
        opts(&o, "hubkern/corrupt", 1, cc);
        o.hub_options.offline = true; /* offline nothing can be fetched: the damage is reported */
        int rc = hk_get_kernel(&k, &o);
        CHECK(rc == HK_ERR_INTEGRITY || rc == HK_ERR_DIGEST);
        CHECK(k == NULL);
        CHECK(strstr(hk_last_error(), "cache verify --repair") != NULL);
        o.hub_options.offline = -1; /* online the damaged blob is fetched again (issue 24 item 4) */
        CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
        if (k) hk_kernel_unref(k);
        k = NULL;
    }
    hk_free(dir);
    hk_free(commit);
    hk_free(variant);
    free(cc);
    free(cache);
}

static void test_local_kernels(void) {
    hk_get_kernel_options o;
    opts(&o, "hubkern/devbuild", 1, "/nonexistent-cache");
    o.hub_options.endpoint = "http://127.0.0.1:9"; /* no network is used */
    char *spec = hk__asprintf("other/x=/nowhere:hubkern/devbuild=%s", g_hub_src);
    setenv("LOCAL_KERNELS", spec, 1);
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (k) {
        CHECK(hk__str_starts_with(hk_kernel_path(k), g_hub_src) ||
              strstr(hk_kernel_path(k), "/kernels/rmsnorm/hub/build/") != NULL);
        CHECK_STR(hk_kernel_repo_id(k), "hubkern/devbuild");
        CHECK(rms_ok(k));
    }
    hk_kernel_unref(k);
    /* a variant directory itself, and a directory of variants, work as paths too */
    free(spec);
    spec = hk__asprintf("hubkern/devbuild=%s", g_variant);
    setenv("LOCAL_KERNELS", spec, 1);
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    hk_kernel_unref(k);
    /* hk_get_local_kernel on a directory of variants (resolved as on the Hub) */
    char *vdirs = hk__asprintf("%s/build", g_hub_src);
    hk_kernel *k2 = NULL;
    CHECK_RC(hk_get_local_kernel(&k2, vdirs, &o), HK_OK);
    CHECK(k2 && hk_kernel_get_kind(k2) == HK_KERNEL_TVM_FFI);
    if (k2) CHECK_STR(hk_kernel_variant(k2), "tvm-ffi01-cpu-x86_64-linux");
    hk_kernel_unref(k2);
    free(vdirs);
    /* hk_has_kernel answers from LOCAL_KERNELS too (kernels' has_kernel consults it): yes for
     * the listed checkout, no (an answer, not an error) for a listed path without a variant */
    int has = 0, why = HK_OK;
    CHECK_RC(hk_has_kernel(&has, &why, NULL, &o), HK_OK);
    CHECK(has == 1);
    char *novar = hk__asprintf("hubkern/devbuild=%s/build/tvm-ffi01-cpu-x86_64-linux/nowhere:x/y=/a", g_hub_src);
    setenv("LOCAL_KERNELS", novar, 1);
    CHECK_RC(hk_has_kernel(&has, &why, NULL, &o), HK_ERR_NOT_FOUND); /* not a directory */
    free(novar);
    char tmpl[] = "/tmp/hk-novar-XXXXXX"; /* a checkout whose build/ holds no variant */
    char *docs = mkdtemp(tmpl) ? hk__asprintf("%s/build/docs", tmpl) : NULL;
    CHECK(docs && hk__mkdirs(docs, 0755) == HK_OK);
    novar = hk__asprintf("hubkern/devbuild=%s", tmpl);
    setenv("LOCAL_KERNELS", novar, 1);
    CHECK_RC(hk_has_kernel(&has, &why, NULL, &o), HK_OK);
    CHECK(has == 0 && why == HK_ERR_NO_VARIANT);
    free(novar);
    free(docs);
    hk__rmtree(tmpl);
    /* kernels' parsing: the last entry of a repo wins, an empty entry is refused */
    novar = hk__asprintf("hubkern/devbuild=/nowhere:hubkern/devbuild=%s", g_hub_src);
    setenv("LOCAL_KERNELS", novar, 1);
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    hk_kernel_unref(k);
    free(novar);
    novar = hk__asprintf("hubkern/devbuild=%s:", g_hub_src);
    setenv("LOCAL_KERNELS", novar, 1);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG);
    free(novar);
    setenv("LOCAL_KERNELS", spec, 1);
    o.no_local_kernels = true; /* then the (unreachable) Hub is asked */
    CHECK(hk_get_kernel(&k, &o) != HK_OK);
    o.no_local_kernels = false;
    setenv("LOCAL_KERNELS", "hubkern/devbuild", 1);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_INVALID_ARG);
    CHECK(strstr(hk_last_error(), "LOCAL_KERNELS") != NULL);
    unsetenv("LOCAL_KERNELS");
    free(spec);
}

static void test_load_locked(void) {
    char *cache = cache_dir("c-lock");
    hk_get_kernel_options o;
    opts(&o, "hubkern/rmsnorm", 1, cache);
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK); /* fills the cache */
    if (!k) return;
    hk_lockfile *lf = NULL;
    CHECK_RC(hk_lockfile_new(&lf), HK_OK);
    CHECK_RC(hk_lockfile_add(lf, "hubkern/rmsnorm", 1, NULL, hk_kernel_commit(k)), HK_OK);
    char *lock = hk__asprintf("%s/kernels.lock", hk_test_tmpdir());
    CHECK_RC(hk_lockfile_write(lock, lf), HK_OK);
    hk_lockfile_free(lf);
    hk_get_kernel_options lo;
    hk_get_kernel_options_init(&lo, HK_GET_KERNEL_OPTIONS_VERSION);
    lo.hub_options.cache_dir = cache;
    lo.backend = "cpu";
    lo.hub_options.endpoint = "http://127.0.0.1:9";
    hk_kernel *l = NULL;
    CHECK_RC(hk_load_locked(&l, lock, "hubkern/rmsnorm", &lo), HK_OK);
    CHECK(l == k);
    hk_kernel_unref(l);
    CHECK_RC(hk_load_locked(&l, lock, "hubkern/other", &lo), HK_ERR_LOCKFILE);
    char *empty = cache_dir("c-lock-empty");
    lo.hub_options.cache_dir = empty;
    CHECK_RC(hk_load_locked(&l, lock, "hubkern/rmsnorm", &lo), HK_ERR_OFFLINE);
    CHECK(strstr(hk_last_error(), "hubkern download --lock") != NULL);
    hk_kernel_unref(k);
    free(empty);
    free(lock);
    free(cache);
}

/* Bytes of the staged variant that its metadata.json digest covers (every file but metadata.json). */
static uint64_t digest_bytes(void) {
    uint64_t total = 0;
    DIR *d = opendir(g_variant);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "metadata.json") == 0) continue;
        char *p = hk__path_join(g_variant, de->d_name);
        struct stat st;
        if (p && stat(p, &st) == 0 && S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
        free(p);
    }
    if (d) closedir(d);
    return total;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Verification receipts through hk_get_kernel: a warm load whose receipt vouches for every file
 * hashes nothing (hk_kernel_bytes_verified 0, hk_kernel_bytes_trusted = the variant's size), online
 * and offline; a blob whose content changed with its size and mtime restored is caught
 * (HK_ERR_DIGEST) and its receipt deleted. A handle is only re-checked once the last reference is
 * gone (while one is held, hk_get_kernel returns it unchecked). */
static void test_receipts(void) {
    const uint64_t total = digest_bytes();
    CHECK(total > 10000); /* the .so (about 90 kB) dominates */
    char *cache = cache_dir("c-receipt");
    hk_get_kernel_options o;
    opts(&o, "hubkern/rmsnorm", 1, cache);
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK); /* cold: downloaded, hashed while streaming */
    if (!k) {
        free(cache);
        return;
    }
    CHECK(hk_kernel_bytes_verified(k) >= total);
    CHECK(hk_kernel_bytes_trusted(k) == 0);
    char *receipt = hk__asprintf("%s/.locks/kernels--hubkern--rmsnorm/hubkern-receipts/%s/%s.json", cache,
                                hk_kernel_commit(k), hk_kernel_variant(k));
    char *blob = hk__asprintf("%s/__init__.py", hk_kernel_path(k));
    hk_kernel_unref(k);
    /* warm, past the 20 ms racy window: the receipt then vouches for every file */
    sleep_ms(50);
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (k) CHECK(hk_kernel_bytes_verified(k) + hk_kernel_bytes_trusted(k) == total);
    hk_kernel_unref(k);
    CHECK(hk__path_exists(receipt));
    for (int offline = 0; offline < 2; offline++) {
        o.hub_options.offline = offline;
        k = NULL;
        CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
        CHECK(k && hk_kernel_bytes_verified(k) == 0);
        CHECK(k && hk_kernel_bytes_trusted(k) == total);
        CHECK(k && rms_ok(k));
        /* while k is held the same handle comes back, checked at its load only */
        hk_kernel *k2 = NULL;
        CHECK_RC(hk_get_kernel(&k2, &o), HK_OK);
        CHECK(k2 == k && hk_kernel_bytes_trusted(k2) == total);
        hk_kernel_unref(k2);
        hk_kernel_unref(k);
    }
    /* NULL handle: 0 */
    CHECK(hk_kernel_bytes_verified(NULL) == 0 && hk_kernel_bytes_trusted(NULL) == 0);

    /* change one byte of __init__.py's blob and restore its mtime: only ctime tells */
    char real[4096];
    CHECK(realpath(blob, real) != NULL);
    struct stat before, after;
    CHECK(stat(real, &before) == 0);
    sleep_ms(10);
    CHECK(chmod(real, 0644) == 0);
    int fd = open(real, O_RDWR);
    CHECK(fd >= 0);
    if (fd >= 0) {
        char c = 0;
        CHECK(pread(fd, &c, 1, 0) == 1);
        c ^= 0x20;
        CHECK(pwrite(fd, &c, 1, 0) == 1);
        close(fd);
    }
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    CHECK(utimensat(AT_FDCWD, real, times, 0) == 0);
    CHECK(stat(real, &after) == 0);
    CHECK(after.st_ino == before.st_ino && after.st_size == before.st_size);
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    CHECK(after.st_ctim.tv_sec != before.st_ctim.tv_sec || after.st_ctim.tv_nsec != before.st_ctim.tv_nsec);
    o.hub_options.offline = 1;
    k = (hk_kernel *)1;
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_DIGEST);
    CHECK(k == NULL);
    CHECK(strstr(hk_last_error(), "__init__.py") != NULL);
    CHECK(!hk__path_exists(receipt)); /* a failed check deletes the receipt */
    o.hub_options.offline = 0; /* online: the blob is hashed before reuse, found bad and fetched again */
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (k) hk_kernel_unref(k);
    free(blob);
    free(receipt);
    free(cache);
}

/* hubkern/oldnorm's v1 carries kernel-status.toml redirecting to hubkern/newnorm@v1 and only an
 * aarch64 build (nothing that fits here); newnorm has the x86_64 tvm-ffi build. The variant must
 * be chosen at newnorm's commit, and the handle report newnorm and its commit. */
static char g_new_commit[41], g_old_commit[41];

static void test_redirect(void) {
    char *cache = cache_dir("c-redirect");
    hk_get_kernel_options o;
    opts(&o, "hubkern/oldnorm", 1, cache);
    int has = false;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(has);
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    if (k) {
        CHECK_STR(hk_kernel_repo_id(k), "hubkern/newnorm");
        CHECK_STR(hk_kernel_commit(k), g_new_commit);
        CHECK(strcmp(hk_kernel_commit(k), g_old_commit) != 0);
        CHECK_STR(hk_kernel_variant(k), "tvm-ffi01-cpu-x86_64-linux");
        CHECK(strstr(hk_kernel_path(k), "/kernels--hubkern--newnorm/snapshots/") != NULL);
        CHECK(strstr(hk_kernel_path(k), g_new_commit) != NULL);
        CHECK(rms_ok(k));
        /* asked again: the loaded handle (warm path at the destination) */
        hk_kernel *k2 = NULL;
        CHECK_RC(hk_get_kernel(&k2, &o), HK_OK);
        CHECK(k2 == k);
        hk_kernel_unref(k2);
    }
    hk_kernel_unref(k);
    /* a variant named by the caller must exist at the destination, not at the source */
    opts(&o, "hubkern/oldnorm", 1, cache);
    o.variant = "tvm-ffi01-cpu-aarch64-linux";
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "hubkern/newnorm") != NULL);
    CHECK(strstr(hk_last_error(), "redirected from hubkern/oldnorm") != NULL);
    /* no fitting variant at the destination: the full decision trace, naming the destination */
    opts(&o, "hubkern/oldarm", 1, cache);
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "hubkern/armonly@") != NULL);
    CHECK(strstr(hk_last_error(), "tvm-ffi01-cpu-aarch64-linux: CPU (aarch64) does not match") != NULL);
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_OK);
    CHECK(!has);

    /* the client's own choice (no variant named) honours variant_families, after the redirect */
    hk_hub *hub = mirror_hub(cache);
    hk_pull_spec s;
    hk_pull_spec_init(&s, HK_PULL_SPEC_VERSION);
    CHECK(s.variant_families == 0);
    s.repo_id = "hubkern/oldnorm";
    s.kernel_version = 1;
    s.backend = "cpu";
    s.variant_families = HK_FAMILY_BIT(HK_FAMILY_TORCH) | HK_FAMILY_BIT(HK_FAMILY_NOARCH);
    char *dir = NULL, *commit = NULL, *variant = NULL;
    CHECK_RC(hk_hub_fetch_variant(&dir, &commit, &variant, hub, &s), HK_ERR_NO_VARIANT);
    CHECK(strstr(hk_last_error(), "tvm-ffi01-cpu-x86_64-linux fits but is of a family") != NULL);
    s.variant_families = HK_FAMILY_BIT(HK_FAMILY_TVM_FFI);
    CHECK_RC(hk_hub_fetch_variant(&dir, &commit, &variant, hub, &s), HK_OK);
    if (variant) CHECK_STR(variant, "tvm-ffi01-cpu-x86_64-linux");
    if (commit) CHECK_STR(commit, g_new_commit);
    /* hk_hub_resolve_spec tells where the spec leads without pulling */
    char *repo = NULL, *rev = NULL, *c = NULL;
    CHECK_RC(hk_hub_resolve_spec(&repo, &rev, &c, hub, &s), HK_OK);
    if (repo) CHECK_STR(repo, "hubkern/newnorm");
    if (rev) CHECK_STR(rev, "v1");
    CHECK_STR(c, g_new_commit);
    hk_free(repo);
    hk_free(rev);
    hk_free(c);
    hk_free(dir);
    hk_free(commit);
    hk_free(variant);
    hk_hub_free(hub);
    free(cache);
}

/* Publish a repo holding only kernel-status.toml that redirects to dest@rev. */
static void publish_redirect(const char *repo, const char *dest, const char *rev, char commit[41]) {
    char *dir = hk__asprintf("%s/status-%s", hk_test_tmpdir(), strchr(repo, '/') + 1);
    char *file = hk__asprintf("%s/kernel-status.toml", dir);
    char *text = hk__asprintf("kind = \"redirect\"\ndestination = \"%s\"\nrevision = \"%s\"\n", dest, rev);
    hk_test_write(file, text);
    publish(dir, repo, "v1", commit);
    free(text);
    free(file);
    free(dir);
}

static int g_hops; /* "redirected to" warnings seen */
static void count_hops(void *ud, hk_log_level level, const char *msg) {
    (void)ud;
    if (level == HK_LOG_WARN && strstr(msg, "redirected to")) g_hops++;
}

/* Loops: loopa@v1 -> loopb@v1 -> loopa@v1 (the same revision name again) and loopc@v1 -> loopd@v1 ->
 * loopc@<commit of v1> (another name of a visited commit) fail after the two hops that close them,
 * naming the loop; a chain of 5 redirects (chain1 -> ... -> chain5 -> newnorm) is followed, one of
 * 6 (from chain0) fails on the depth limit. */
static char g_loopc_commit[41];

static void test_redirect_loops(void) {
    char *cache = cache_dir("c-loop");
    hk_get_kernel_options o;
    opts(&o, "hubkern/loopa", 1, cache);
    hk_kernel *k = (hk_kernel *)1;
    hk_set_log_callback(count_hops, NULL, HK_LOG_WARN);
    g_hops = 0;
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_PROTOCOL);
    CHECK(k == NULL);
    CHECK(g_hops == 2);
    CHECK(strstr(hk_last_error(), "kernel-status.toml redirects loop: hubkern/loopa@v1 -> hubkern/loopb@v1 -> "
                                  "hubkern/loopa@v1; fix the kernel-status.toml of one of them") != NULL);
    /* hk_has_kernel follows redirects the same way */
    int has = true;
    g_hops = 0;
    CHECK_RC(hk_has_kernel(&has, NULL, NULL, &o), HK_ERR_PROTOCOL);
    CHECK(g_hops == 2);
    CHECK(strstr(hk_last_error(), "redirects loop: hubkern/loopa@v1 -> hubkern/loopb@v1 -> hubkern/loopa@v1") != NULL);
    /* entering the loop from its other end names it from there */
    opts(&o, "hubkern/loopb", HK_VERSION_UNSET, cache);
    o.revision = "v1";
    g_hops = 0;
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_PROTOCOL);
    CHECK(g_hops == 2);
    CHECK(strstr(hk_last_error(), "redirects loop: hubkern/loopb@v1 -> hubkern/loopa@v1 -> hubkern/loopb@v1;") != NULL);
    /* back at a visited commit under another name */
    opts(&o, "hubkern/loopc", 1, cache);
    g_hops = 0;
    CHECK_RC(hk_get_kernel(&k, &o), HK_ERR_PROTOCOL);
    CHECK(g_hops == 2);
    char *want = hk__asprintf("redirects loop: hubkern/loopc@v1 -> hubkern/loopd@v1 -> hubkern/loopc@%s (commit %.12s, "
                             "as hubkern/loopc@v1)",
                             g_loopc_commit, g_loopc_commit);
    CHECK(strstr(hk_last_error(), want) != NULL);
    free(want);

    /* long chains without a loop: 5 redirects are followed, 6 are refused */
    hk_hub *hub = mirror_hub(cache);
    hk_pull_spec s;
    hk_pull_spec_init(&s, HK_PULL_SPEC_VERSION);
    s.repo_id = "hubkern/chain1";
    s.kernel_version = 1;
    char *repo = NULL, *rev = NULL, *c = NULL;
    g_hops = 0;
    CHECK_RC(hk_hub_resolve_spec(&repo, &rev, &c, hub, &s), HK_OK);
    CHECK(g_hops == 5);
    if (repo) CHECK_STR(repo, "hubkern/newnorm");
    CHECK_STR(c, g_new_commit);
    hk_free(repo);
    hk_free(rev);
    hk_free(c);
    s.repo_id = "hubkern/chain0";
    g_hops = 0;
    CHECK_RC(hk_hub_resolve_spec(&repo, &rev, &c, hub, &s), HK_ERR_PROTOCOL);
    CHECK(g_hops == 6);
    CHECK(strstr(hk_last_error(), "kernel-status.toml redirects form a chain longer than 5 from hubkern/chain0") != NULL);
    hk_hub_free(hub);
    hk_set_log_callback(NULL, NULL, HK_LOG_WARN);
    free(cache);
}

int main(void) {
    const char *b = getenv("HK_BUILD_DIR");
    g_hub_src = hk__asprintf("%s/kernels/rmsnorm/hub", b ? b : ".");
    g_variant = hk__asprintf("%s/build/tvm-ffi01-cpu-x86_64-linux", g_hub_src);
    if (!hk__is_dir(g_variant)) {
        fprintf(stderr, "the staged RMSNorm variant %s is missing (build the rmsnorm_hub_variants target)\n", g_variant);
        return 1;
    }
    g_store = hk__asprintf("%s/store", hk_test_tmpdir());
    publish(g_hub_src, "hubkern/rmsnorm", "v1", NULL);
    /* v2: the same build under a new message, so another commit */
    srv_publish_options v2 = {.message = "second major version"};
    hk_test_publish(g_store, g_hub_src, "hubkern/rmsnorm", "v2", &v2, NULL);
    publish(g_hub_src, "hubkern/corrupt", "v1", NULL);
    publish(g_hub_src, "stranger/rmsnorm", "v1", NULL);
    /* a repo whose only build is for another CPU */
    char *arm = hk__asprintf("%s/armsrc/build/tvm-ffi01-cpu-aarch64-linux", hk_test_tmpdir());
    hk__mkdirs(arm, 0777);
    char *cmd = hk__asprintf("cp '%s'/* '%s'/", g_variant, arm);
    CHECK(system(cmd) == 0);
    free(cmd);
    char *armsrc = hk__asprintf("%s/armsrc", hk_test_tmpdir());
    publish(armsrc, "hubkern/armonly", "v1", NULL);
    /* redirects: oldnorm (aarch64 build only) -> newnorm (x86_64); oldarm -> armonly */
    {
        srv_publish_options pn = {.message = "redirect destination"};
        hk_test_publish(g_store, g_hub_src, "hubkern/newnorm", "v1", &pn, g_new_commit);
        char *oldsrc = hk__asprintf("%s/oldsrc", hk_test_tmpdir());
        char *c2 = hk__asprintf("mkdir -p '%s/build' && cp -r '%s' '%s/build/' && "
                               "printf 'kind = \"redirect\"\\ndestination = \"hubkern/newnorm\"\\nrevision = \"v1\"\\n' "
                               "> '%s/kernel-status.toml'", oldsrc, arm, oldsrc, oldsrc);
        CHECK(system(c2) == 0);
        free(c2);
        publish(oldsrc, "hubkern/oldnorm", "v1", g_old_commit);
        c2 = hk__asprintf("sed -i 's#hubkern/newnorm#hubkern/armonly#' '%s/kernel-status.toml'", oldsrc);
        CHECK(system(c2) == 0);
        free(c2);
        publish(oldsrc, "hubkern/oldarm", "v1", NULL);
        free(oldsrc);
    }
    publish_redirect("hubkern/loopa", "hubkern/loopb", "v1", NULL);
    publish_redirect("hubkern/loopb", "hubkern/loopa", "v1", NULL);
    publish_redirect("hubkern/loopc", "hubkern/loopd", "v1", g_loopc_commit);
    publish_redirect("hubkern/loopd", "hubkern/loopc", g_loopc_commit, NULL);
    for (int i = 0; i <= 5; i++) {
        char repo[32], dest[32];
        snprintf(repo, sizeof repo, "hubkern/chain%d", i);
        if (i < 5) snprintf(dest, sizeof dest, "hubkern/chain%d", i + 1);
        else snprintf(dest, sizeof dest, "hubkern/newnorm");
        publish_redirect(repo, dest, "v1", NULL);
    }

    srv_server *srv = hk_test_start_mirror(g_store, "hubkern", g_endpoint, sizeof g_endpoint);
    if (!srv) return hk_test_finish();
    unsetenv("HF_HUB_OFFLINE");
    setenv("HUBKERN_RETRY_BASE_MS", "1", 1); /* the unreachable-endpoint case must not back off for seconds */
    unsetenv("LOCAL_KERNELS");

    test_get_and_call();
    test_has_kernel();
    test_bad_input();
    test_local_kernels();
    test_load_locked();
    test_receipts();
    test_redirect();
    test_redirect_loops();

    srv_stop(srv);
    free(arm);
    free(armsrc);
    free(g_store);
    free(g_hub_src);
    free(g_variant);
    return hk_test_finish();
}
