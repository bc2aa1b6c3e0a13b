/* A tvm-ffi dependent calling its dependency, from C: kernels/scaled_rmsnorm (kernel-depends:
 * hubkern/rmsnorm v1) and the RMSNorm CPU variant staged by kernels/rmsnorm are published on an
 * in-process loopback mirror; hk_get_kernel loads the dependent (its dependency first, once per
 * process), and scaled_rms_norm is called with the dependency's rms_norm passed as a tvm-ffi
 * Function (hk_value_function), checked against a float64 reference. */
#include "support.h"

#include "hubkern.h"
#include "internal.h"
#include "mirror.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double nsqrt(double v) { /* Newton: the unit tests do not link libm */
    double r = v > 1 ? v : 1;
    for (int i = 0; i < 200; i++) r = 0.5 * (r + v / r);
    return r;
}

enum { R = 4, H = 300 };
static float x[R * H], out[R * H], w[H];
static int64_t shp[2] = {R, H}, wshp[1] = {H};

static int call_scaled(const hk_kernel *k, hk_value fn_arg, double scale) {
    hk_dltensor tx = {x, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, shp, NULL, 0};
    hk_dltensor to = {out, {HK_DEVICE_CPU, 0}, 2, {HK_DTYPE_FLOAT, 32, 1}, shp, NULL, 0};
    hk_dltensor tw = {w, {HK_DEVICE_CPU, 0}, 1, {HK_DTYPE_FLOAT, 32, 1}, wshp, NULL, 0};
    hk_value a[6] = {hk_value_tensor(&to), hk_value_tensor(&tx), hk_value_tensor(&tw), hk_value_float(scale),
                     hk_value_float(1e-6), fn_arg};
    return hk_kernel_call(NULL, k, "scaled_rms_norm", a, 6);
}

static int matches(double scale) {
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < H; i++) ss += (double)x[r * H + i] * x[r * H + i];
        double inv = 1.0 / nsqrt(ss / H + 1e-6);
        for (int i = 0; i < H; i++) {
            double want = x[r * H + i] * inv * w[i] * scale;
            if (!(fabs(out[r * H + i] - want) <= 1e-5 + 1e-5 * fabs(want))) return 0;
        }
    }
    return 1;
}

int main(void) {
    const char *b = getenv("HK_BUILD_DIR");
    char *rms = hk__asprintf("%s/kernels/rmsnorm/hub", b ? b : ".");
    char *scaled = hk__asprintf("%s/kernels/scaled_rmsnorm/hub", b ? b : ".");
    char *sv = hk__asprintf("%s/build/tvm-ffi01-cpu-x86_64-linux", scaled);
    if (!hk__is_dir(sv)) {
        fprintf(stderr, "the staged scaled RMSNorm variant %s is missing (build scaled_rmsnorm_hub_variants)\n", sv);
        return 1;
    }
    char *store = hk__asprintf("%s/store", hk_test_tmpdir()), *cache = hk__asprintf("%s/cache", hk_test_tmpdir());
    hk_test_publish(store, rms, "hubkern/rmsnorm", "v1", NULL, NULL);
    hk_test_publish(store, scaled, "hubkern/scaled-rmsnorm", "v1", NULL, NULL);
    char endpoint[128];
    srv_server *srv = hk_test_start_mirror(store, "hubkern", endpoint, sizeof endpoint);
    CHECK(srv != NULL);

    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    o.repo_id = "hubkern/scaled-rmsnorm";
    o.kernel_version = 1;
    o.hub_options.endpoint = endpoint;
    o.hub_options.cache_dir = cache;
    o.backend = "cpu";
    o.hub_options.token = "";
    hk_kernel *k = NULL;
    CHECK_RC(hk_get_kernel(&k, &o), HK_OK);
    CHECK(k != NULL);
    if (k) {
        CHECK(hk_kernel_dependency_count(k) == 1);
        hk_kernel *dep = hk_kernel_dependency(k, "hubkern/rmsnorm");
        CHECK(dep != NULL && dep == hk_kernel_dependency_at(k, 0));
        CHECK_STR(hk_kernel_get_metadata(dep)->name, "rmsnorm");
        /* the dependency was loaded once: getting it directly returns the same handle */
        hk_get_kernel_options od = o;
        od.repo_id = "hubkern/rmsnorm";
        hk_kernel *again = NULL;
        CHECK_RC(hk_get_kernel(&again, &od), HK_OK);
        CHECK(again == dep);
        hk_kernel_unref(again);

        for (int i = 0; i < R * H; i++) x[i] = (float)((i * 53) % 97) / 19.0f - 2.5f;
        for (int i = 0; i < H; i++) w[i] = 0.25f + (float)(i % 11) / 11.0f;
        const hk_function *rms_norm = NULL;
        CHECK_RC(hk_kernel_function(&rms_norm, dep, "rms_norm"), HK_OK);
        for (int i = 0; i < R * H; i++) out[i] = NAN;
        CHECK_RC(call_scaled(k, hk_value_function(rms_norm), 2.5), HK_OK);
        CHECK(matches(2.5));
        for (int i = 0; i < R * H; i++) out[i] = NAN;
        CHECK_RC(call_scaled(k, hk_value_function(rms_norm), -0.5), HK_OK); /* repeated calls */
        CHECK(matches(-0.5));
        /* not a function where the dependency goes: the dependent's typed signature says so */
        CHECK_RC(call_scaled(k, hk_value_int(3), 1.0), HK_ERR_TYPE);
        CHECK(strstr(hk_last_error(), "scaled_rms_norm") != NULL);
        /* the dependency's own argument check comes back through the dependent */
        wshp[0] = H - 1;
        CHECK_RC(call_scaled(k, hk_value_function(rms_norm), 1.0), HK_ERR_KERNEL);
        CHECK(strstr(hk_last_error(), "weight") != NULL);
        wshp[0] = H;
        CHECK_RC(call_scaled(k, hk_value_function(NULL), 1.0), HK_ERR_INVALID_ARG);
        hk_kernel_unref(k);
    }
    srv_stop(srv);
    free(rms);
    free(scaled);
    free(sv);
    free(store);
    free(cache);
    return hk_test_finish();
}
