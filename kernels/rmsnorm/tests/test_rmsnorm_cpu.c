/* The portable C RMSNorm kernels against a float64 reference: every dtype pair, many shapes
 * (1 row, 1 column, odd sizes, chunk boundaries, 128-wide rows, 65536 rows, one very wide row),
 * base pointers off 16-byte alignment, outputs poisoned, every element checked; the fused op's
 * residual is checked too; and the float16/bfloat16 conversions are checked exhaustively. */
#include "rmsnorm_check.h"
#include "support.h"

#include <stdbool.h>
#include <time.h>

static void *poisoned(size_t bytes) {
    void *p = malloc(bytes);
    if (p) memset(p, 0xff, bytes); /* all-ones bits are NaN in float32, float16 and bfloat16 */
    return p;
}

/* `mis` elements past a 64-byte boundary, so mis != 0 makes every row start misaligned for
 * 16-byte vectors whatever the hidden size. */
static void run_case(int64_t rows, int64_t hidden, rmsnorm_dtype dt, rmsnorm_dtype wdt, int mis,
                     bool fused, double *max_rel) {
    size_t es = (size_t)rmsnorm_dtype_size(dt), n = (size_t)(rows * hidden);
    char *xb = malloc(n * es + 64 + 16), *wb = malloc((size_t)hidden * 4 + 64 + 16);
    char *ob = poisoned(n * es + 64 + 16), *rb = malloc(n * es + 64 + 16);
    char *x0 = malloc(n * es);
    CHECK(xb && wb && ob && rb && x0);
    if (!(xb && wb && ob && rb && x0)) exit(1);
    char *x = xb + 64 - ((uintptr_t)xb % 64) % 64 + (size_t)mis * es;
    char *out = ob + 64 - ((uintptr_t)ob % 64) % 64 + (size_t)mis * es;
    char *res = rb + 64 - ((uintptr_t)rb % 64) % 64 + (size_t)mis * es;
    char *w = wb + 16 + (size_t)mis * (size_t)rmsnorm_dtype_size(wdt);
    rc_fill_normal(x, dt, (int64_t)n, 1.0, 0.0);
    rc_fill_normal(w, wdt, hidden, 0.5, 1.0);
    char what[160];
    snprintf(what, sizeof what, "%s %lldx%lld %s w=%s mis=%d", fused ? "fused_add_rms_norm" : "rms_norm",
             (long long)rows, (long long)hidden, rc_dtype_name(dt), rc_dtype_name(wdt), mis);
    float eps = 1e-6f;
    if (!fused) {
        rmsnorm_cpu_rms_norm(out, x, w, dt, wdt, rows, hidden, eps);
        int64_t bad = rc_check_norm(what, out, x, w, dt, wdt, rows, hidden, eps, max_rel);
        if (bad) fprintf(stderr, "%s: %lld bad elements\n", what, (long long)bad);
        CHECK(bad == 0);
    } else {
        rc_fill_normal(res, dt, (int64_t)n, 1.0, 0.25);
        char *r0 = malloc(n * es);
        CHECK(r0 != NULL);
        if (!r0) exit(1);
        memcpy(r0, res, n * es);
        memcpy(x0, x, n * es);
        rmsnorm_cpu_fused_add_rms_norm(x, res, w, dt, wdt, rows, hidden, eps);
        /* residual = x0 + r0, rounded once to the type */
        int64_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            double want = rc_get(x0, dt, (int64_t)i) + rc_get(r0, dt, (int64_t)i);
            double got = rc_get(res, dt, (int64_t)i);
            double tol = (dt == RMSNORM_F32 ? 1e-6 : 1e-4) + rc_rtol(dt) * fabs(want);
            if (!(fabs(got - want) <= tol)) {
                if (bad < 5) fprintf(stderr, "%s: residual[%zu] = %g, want %g\n", what, i, got, want);
                bad++;
            }
        }
        CHECK(bad == 0);
        /* x = norm(residual as stored) * w */
        bad = rc_check_norm(what, x, res, w, dt, wdt, rows, hidden, eps, max_rel);
        if (bad) fprintf(stderr, "%s: %lld bad elements\n", what, (long long)bad);
        CHECK(bad == 0);
        free(r0);
    }
    free(xb), free(wb), free(ob), free(rb), free(x0);
}

static void test_shapes(void) {
    static const int64_t shapes[][2] = {
        {1, 1},    {1, 7},     {3, 1},   {1, 4096}, {5, 4095}, {7, 513},  {2, 512},
        {33, 128}, {65536, 16}, {4, 3072}, {2, 65537}, {17, 1000}, {1, 8},  {9, 2048},
    };
    const rmsnorm_dtype pairs[][2] = {{RMSNORM_BF16, RMSNORM_BF16}, {RMSNORM_BF16, RMSNORM_F32},
                                      {RMSNORM_F16, RMSNORM_F16},   {RMSNORM_F16, RMSNORM_F32},
                                      {RMSNORM_F32, RMSNORM_F32}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        double max_rel = 0.0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int fused = 0; fused < 2; fused++)
                for (int mis = 0; mis < 2; mis++)
                    run_case(shapes[s][0], shapes[s][1], pairs[p][0], pairs[p][1], mis, fused,
                             &max_rel);
        printf("%-8s weight %-8s max relative error %.3g (limit %g)\n", rc_dtype_name(pairs[p][0]),
               rc_dtype_name(pairs[p][1]), max_rel, rc_rtol(pairs[p][0]));
        CHECK(max_rel < rc_rtol(pairs[p][0]));
    }
}

/* A row of identical values v normalises to exactly sign(v)*w (up to rounding): checks eps use. */
static void test_eps(void) {
    float x[4] = {3.0f, 3.0f, 3.0f, 3.0f}, w[4] = {1.0f, 2.0f, -1.0f, 0.5f}, out[4];
    rmsnorm_cpu_rms_norm(out, x, w, RMSNORM_F32, RMSNORM_F32, 1, 4, 0.0f);
    for (int i = 0; i < 4; i++) CHECK(fabsf(out[i] - w[i]) < 1e-6f);
    rmsnorm_cpu_rms_norm(out, x, w, RMSNORM_F32, RMSNORM_F32, 1, 4, 7.0f); /* rsqrt(9+7) = 1/4 */
    for (int i = 0; i < 4; i++) CHECK(fabsf(out[i] - 0.75f * w[i]) < 1e-6f);
    float z[4] = {0}, oz[4];
    rmsnorm_cpu_rms_norm(oz, z, w, RMSNORM_F32, RMSNORM_F32, 1, 4, 1e-6f); /* all zero: 0, no NaN */
    for (int i = 0; i < 4; i++) CHECK(oz[i] == 0.0f);
}

/* Value of a half's bit pattern, exact, in double. */
static double half_value(uint16_t h) { return (double)rmsnorm_f16_to_f32(h); }

static void test_conversions(void) {
    /* float16 -> float32 against the definition, for every pattern */
    int64_t bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double s = (h & 0x8000) ? -1.0 : 1.0, want;
        float got = rmsnorm_f16_to_f32((uint16_t)h);
        if (e == 31) {
            if (m ? !isnan(got) : !(isinf(got) && (got < 0) == (s < 0))) bad++;
            continue;
        }
        want = e ? s * ldexp(1024 + m, e - 25) : s * ldexp(m, -24);
        if ((double)got != want) bad++;
        /* round trip is the identity for every non-NaN half */
        if (rmsnorm_f32_to_f16(got) != h) bad++;
    }
    CHECK(bad == 0);
    /* ties: the midpoint between two adjacent positive halves rounds to the even one, and a
     * hair above it rounds up (exhaustive over finite halves, both signs) */
    bad = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double mid = 0.5 * (half_value((uint16_t)h) + half_value((uint16_t)(h + 1)));
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (rmsnorm_f32_to_f16((float)mid) != even) bad++;
        if (rmsnorm_f32_to_f16((float)-mid) != (uint16_t)(even | 0x8000)) bad++;
        float above = nextafterf((float)mid, INFINITY);
        if (rmsnorm_f32_to_f16(above) != (uint16_t)(h + 1)) bad++;
    }
    CHECK(bad == 0);
    CHECK(rmsnorm_f32_to_f16(65519.0f) == 0x7bff);
    CHECK(rmsnorm_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(rmsnorm_f32_to_f16(-1e9f) == 0xfc00);
    CHECK(isnan(rmsnorm_f16_to_f32(rmsnorm_f32_to_f16(NAN))));
    CHECK(rmsnorm_f32_to_f16(1e-9f) == 0x0000); /* below half the smallest subnormal */
    /* bfloat16: every pattern widens exactly and round-trips; midpoints go to even */
    bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = rmsnorm_bf16_to_f32((uint16_t)h);
        if (isnan(f)) {
            if (!isnan(rmsnorm_bf16_to_f32(rmsnorm_f32_to_bf16(f)))) bad++;
            continue;
        }
        if (rmsnorm_f32_to_bf16(f) != h) bad++;
        if ((h & 0x7fff) < 0x7f7f) { /* finite, next pattern finite too */
            double mid = 0.5 * ((double)f + (double)rmsnorm_bf16_to_f32((uint16_t)(h + 1)));
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            if (rmsnorm_f32_to_bf16((float)mid) != even) bad++;
        }
    }
    CHECK(bad == 0);
    CHECK(rmsnorm_f32_to_bf16(3.0e38f) == 0x7f62);
    CHECK(rmsnorm_f32_to_bf16(3.4e38f) == 0x7f80); /* rounds past the largest finite: inf */
}

int main(void) {
    rc_seed(0x5eed0000u ^ (uint64_t)time(NULL));
    test_conversions();
    test_eps();
    test_shapes();
    return hk_test_finish();
}
