/* Allocation-failure injection (alloc_fail.h): for every N, the Nth allocation of hk_env_detect,
 * hk_resolve_variants, a pull from the in-process loopback mirror, hk_get_kernel and hk_cache_verify of
 * the pulled cache fails. Each
 * must return HK_ERR_NOMEM with a message, or recover and return HK_OK with the same result as a
 * run without failures (no field silently dropped); never crash, never another error, never leak
 * (the ASan build's LeakSanitizer checks at exit). The sweep ends at the first N the call no
 * longer reaches. */
#include "alloc_fail.h"
#include "support.h"

#include "hubkern/cache.h"
#include "hubkern/env.h"
#include "hubkern/hub.h"
#include "hubkern.h"
#include "hubkern/variant.h"
#include "internal.h"
#include "mirror.h"
#include "util/toml.h"

#include <stdlib.h>
#include <time.h>

/* An operation: returns its code and, on HK_OK, a fingerprint of its result (malloc'd) in *fp,
 * built with counting paused so that the bookkeeping never fails. */
typedef int (*op_fn)(void *ctx, char **fp);

static char *fingerprint(const char *s) {
    hk_alloc_fail_pause(1);
    char *f = hk__strdup(s ? s : "(null)");
    hk_alloc_fail_pause(0);
    return f;
}

static char g_endpoint[128];

/* Run op with the Nth allocation failing, for N = 1, 2, ... until op makes fewer than N. */
static void sweep(const char *name, op_fn op, void (*reset)(void *), void *ctx) {
    size_t nomem = 0, recovered = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *base = NULL;
    if (reset) reset(ctx);
    CHECK_RC(op(ctx, &base), HK_OK); /* the result without failures */
    for (size_t n = 1;; n++) {
        if (reset) reset(ctx);
        hk_clear_error();
        char *fp = NULL;
        hk_alloc_fail_arm(n);
        int rc = op(ctx, &fp);
        hk_alloc_fail_disarm();
        hk_test_checks++;
        if (!hk_alloc_fail_fired()) {
            CHECK_RC(rc, HK_OK);
            free(fp);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            fprintf(stderr, "%s: %zu allocations, %zu answered HK_ERR_NOMEM, %zu recovered (%.1f s)\n", name,
                    n - 1, nomem, recovered,
                    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
            break;
        }
        if (rc == HK_OK) {
            recovered++;
            if (!fp || !base || strcmp(fp, base) != 0) {
                hk_test_failures++;
                /* the first line that differs */
                const char *a = fp ? fp : "(null)", *b = base ? base : "(null)", *la = a, *lb = b;
                while (*a && *a == *b) {
                    if (*a == '\n') la = a + 1, lb = b + 1;
                    a++, b++;
                }
                fprintf(stderr, "%s: allocation %zu failed and the call returned HK_OK with another result: "
                        "'%.*s' instead of '%.*s'\n", name, n, (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
            }
        } else if (rc == HK_ERR_NOMEM) {
            nomem++;
            if (!*hk_last_error()) {
                hk_test_failures++;
                fprintf(stderr, "%s: allocation %zu: HK_ERR_NOMEM without a message\n", name, n);
            }
        } else {
            hk_test_failures++;
            fprintf(stderr, "%s: allocation %zu failed: got %s (%s), expected HK_ERR_NOMEM or HK_OK\n", name, n,
                    hk_error_name(rc), hk_last_error());
        }
        free(fp);
    }
    free(base);
}

/* ---- the operations ------------------------------------------------------------------------- */
static int op_env_detect(void *ctx, char **fp) {
    const hk_env_options *o = ctx;
    hk_env *env = NULL;
    int rc = hk_env_detect(&env, o);
    if (rc == HK_OK) {
        char *j = hk_env_to_json(env);
        if (!j) rc = hk__fail(HK_ERR_NOMEM, "hk_env_to_json: out of memory");
        else *fp = fingerprint(j);
        hk_free(j);
    }
    hk_env_free(env);
    return rc;
}

static const char *const g_names[] = {
    "torch29-cxx11-cu128-x86_64-linux", "torch-stable-abi28-cu126-x86_64-linux", "torch29-cxx11-cpu-x86_64-linux",
    "tvm-ffi01-cpu-x86_64-linux", "torch-universal", "torch-cpu", "torch25-cxx98-rocm63-aarch64-linux",
    "not a variant", "torch29-cxx11-cpu-x86_64-linux"};

static int op_resolve(void *ctx, char **fp) {
    const hk_env *env = ctx;
    hk_resolution *r = NULL;
    int rc = hk_resolve_variants(&r, env, g_names, HK_ARRAY_LEN(g_names), NULL);
    if (rc == HK_OK) {
        char *j = hk_resolution_to_json(r), *t = hk_resolution_to_text(r);
        if (!j || !t) rc = hk__fail(HK_ERR_NOMEM, "resolution text: out of memory");
        else *fp = fingerprint(j);
        hk_free(j);
        hk_free(t);
    }
    hk_resolution_free(r);
    return rc;
}

/* A TOML document whose tables outgrow the linear scan (the key index is built and grown) and
 * whose keys are dotted, quoted, headers and inline tables. */
static int op_toml(void *ctx, char **fp) {
    const char *doc = ctx;
    hk_toml *t = NULL;
    int rc = hk__toml_parse(&t, doc, strlen(doc), "alloc.toml");
    if (rc == HK_OK) {
        const hk_toml *big = hk__toml_get(t, "big");
        const hk_toml *last = hk__toml_get(big, "k19");
        hk_alloc_fail_pause(1);
        *fp = hk__asprintf("%zu %zu %lld", t->n, big ? big->n : 0, last ? (long long)last->i : -1);
        hk_alloc_fail_pause(0);
    }
    hk__toml_free(t);
    return rc;
}

typedef struct pull_ctx {
    char *cache;
    const hk_env *env;
} pull_ctx;

static void reset_cache(void *ctx) {
    pull_ctx *p = ctx;
    hk__rmtree(p->cache);
}

static int op_pull(void *ctx, char **fp) {
    pull_ctx *p = ctx;
    hk_hub_options ho = HK_HUB_OPTIONS_INIT;
    ho.endpoint = g_endpoint;
    ho.cache_dir = p->cache;
    ho.token = "";
    ho.offline = 0;
    hk_hub *hub = NULL;
    int rc = hk_hub_new(&hub, &ho);
    if (rc) return rc;
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = "hubkern/small";
    s.kernel_version = 1;
    s.env = p->env;
    s.backend = "cpu";
    hk_pull_result *r = NULL;
    rc = hk_hub_pull(&r, hub, &s);
    if (rc == HK_OK) {
        hk_alloc_fail_pause(1);
        char *f = hk__asprintf("%s %s %s files=%zu verified=%llu", hk_pull_result_commit(r),
                               hk_pull_result_variant(r, 0), hk_pull_result_revision(r), hk_pull_result_file_count(r),
                               (unsigned long long)hk_pull_result_bytes_verified(r));
        hk_alloc_fail_pause(0);
        *fp = f;
    }
    hk_pull_result_free(r);
    hk_hub_free(hub);
    return rc;
}

static int op_get_kernel(void *ctx, char **fp) {
    pull_ctx *p = ctx;
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.repo_id = "hubkern/rmsnorm";
    o.kernel_version = 1;
    o.hub_options.endpoint = g_endpoint;
    o.hub_options.cache_dir = p->cache;
    o.backend = "cpu";
    o.hub_options.token = "";
    hk_kernel *k = NULL;
    int rc = hk_get_kernel(&k, &o);
    if (rc == HK_OK) {
        hk_alloc_fail_pause(1);
        *fp = hk__asprintf("%s %s %zu", hk_kernel_variant(k), hk_kernel_commit(k), hk_kernel_num_functions(k));
        hk_alloc_fail_pause(0);
    }
    hk_kernel_unref(k);
    return rc;
}

/* hk_cache_verify of the cache the pulls left (metadata.json digest, links, refs): every failed
 * allocation is HK_ERR_NOMEM or the same report, never a made-up finding. */
static int op_verify(void *ctx, char **fp) {
    pull_ctx *p = ctx;
    hk_cache_options o = HK_CACHE_OPTIONS_INIT;
    o.cache_dir = p->cache;
    hk_cache_report *rep = NULL;
    int rc = hk_cache_verify(&rep, &o);
    if (rc == HK_OK) {
        hk_alloc_fail_pause(1);
        *fp = hk__asprintf("repos=%zu snapshots=%zu blobs=%zu refs=%zu bytes=%llu problems=%zu",
                           hk_cache_report_repos(rep), hk_cache_report_snapshots(rep), hk_cache_report_blobs(rep),
                           hk_cache_report_refs(rep), (unsigned long long)hk_cache_report_bytes(rep),
                           hk_cache_report_problems(rep));
        hk_alloc_fail_pause(0);
    }
    hk_cache_report_free(rep);
    return rc;
}

int main(void) {
    CHECK_RC(hk_init(), HK_OK);
    unsetenv("HF_HUB_OFFLINE");
    /* every run of a sweep takes the whole network path: no answer memoised by the run before
     * (client/memo.c; its failures only cost a request) */
    setenv("HUBKERN_FRESHNESS_S", "0", 1);
    /* detection without an interpreter (every N), then with one (the Python probe's parsing) */
    hk_env_options eo = HK_ENV_OPTIONS_INIT;
    eo.no_python = 1;
    sweep("hk_env_detect(no_python)", op_env_detect, NULL, &eo);
    hk_env_options ep = HK_ENV_OPTIONS_INIT;
    sweep("hk_env_detect", op_env_detect, NULL, &ep);

    hk_env *env = NULL;
    CHECK_RC(hk_env_new(&env), HK_OK);
    hk_env_set(env, "os", "linux");
    hk_env_set(env, "cpu", "x86_64");
    hk_env_set(env, "python_version", "3.12.1");
    hk_env_set(env, "torch_version", "2.9");
    hk_env_set(env, "torch_cuda_version", "12.8");
    hk_env_set(env, "torch_cxx11_abi", "1");
    sweep("hk_resolve_variants", op_resolve, NULL, env);

    hk_strbuf doc;
    hk__sb_init(&doc);
    hk__sb_printf(&doc, "a.b.c = 1\n\"q.k\" = { x = 1, y.z = [1, 2] }\n[big]\n");
    for (int i = 0; i < 20; i++) hk__sb_printf(&doc, "k%d = %d\n", i, i);
    for (int i = 0; i < 12; i++) hk__sb_printf(&doc, "[t%d.s]\nv = 'x'\n[[arr]]\nn = %d\n", i, i);
    CHECK(!doc.oom);
    if (!doc.oom) sweep("hk__toml_parse", op_toml, NULL, doc.data);
    hk__sb_free(&doc);

    /* a loopback mirror with a small repo (and the RMSNorm kernel when it was built) */
    char *store = hk__asprintf("%s/store", hk_test_tmpdir());
    char *small = hk__asprintf("%s/small", hk_test_tmpdir());
    char *f = hk__asprintf("%s/build/torch-universal/small/__init__.py", small);
    hk_test_write(f, "x = 1\n");
    free(f);
    f = hk__asprintf("%s/build/torch-universal/metadata.json", small);
    hk_test_write(f, "{\"name\": \"small\", \"version\": 1}\n");
    free(f);
    hk_test_publish(store, small, "hubkern/small", "v1", NULL, NULL);
    const char *b = getenv("HK_BUILD_DIR");
    char *rms = hk__asprintf("%s/kernels/rmsnorm/hub", b ? b : ".");
    char *variant = hk__asprintf("%s/build/tvm-ffi01-cpu-x86_64-linux", rms);
    bool have_kernel = hk__is_dir(variant);
    if (have_kernel) hk_test_publish(store, rms, "hubkern/rmsnorm", "v1", NULL, NULL);
    srv_server *srv = hk_test_start_mirror(store, "hubkern", g_endpoint, sizeof g_endpoint);
    if (srv) {
        pull_ctx p = {hk__asprintf("%s/cache", hk_test_tmpdir()), env};
        sweep("hk_hub_pull", op_pull, reset_cache, &p);
        if (have_kernel) sweep("hk_get_kernel", op_get_kernel, reset_cache, &p);
        else fprintf(stderr, "hk_get_kernel skipped: no staged RMSNorm variant %s\n", variant);
        char *pulled = NULL; /* the cache verify sweeps over: one pull of the small repo */
        reset_cache(&p);
        CHECK_RC(op_pull(&p, &pulled), HK_OK);
        hk_alloc_fail_disarm(); /* the op's pause(0) arms the counter */
        free(pulled);
        sweep("hk_cache_verify", op_verify, NULL, &p);
        free(p.cache);
        srv_stop(srv);
    }
    hk_env_free(env);
    free(variant);
    free(rms);
    free(small);
    free(store);
    hk_shutdown();
    return hk_test_finish();
}
