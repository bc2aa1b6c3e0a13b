/* Shared helpers of the RMSNorm C tests: random inputs, a float64 reference, and an
 * every-element comparison. Header-only (static functions) so each test stays one file. */
#ifndef RMSNORM_CHECK_H
#define RMSNORM_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../rmsnorm_cpu/rmsnorm_cpu.h"

static uint64_t rc_state = 0x9e3779b97f4a7c15ull;

static void rc_seed(uint64_t s) { rc_state = s ? s : 1; }

static uint64_t rc_next(void) { /* xorshift64* */
    rc_state ^= rc_state >> 12;
    rc_state ^= rc_state << 25;
    rc_state ^= rc_state >> 27;
    return rc_state * 2685821657736338717ull;
}

static double rc_uniform(void) { return ((double)(rc_next() >> 11) + 0.5) / 9007199254740992.0; }

static double rc_normal(void) {
    double u = rc_uniform(), v = rc_uniform();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double rc_get(const void *p, rmsnorm_dtype dt, int64_t i) {
    switch (dt) {
    case RMSNORM_F32: return ((const float *)p)[i];
    case RMSNORM_F16: return rmsnorm_f16_to_f32(((const uint16_t *)p)[i]);
    case RMSNORM_BF16: return rmsnorm_bf16_to_f32(((const uint16_t *)p)[i]);
    }
    return NAN;
}

static void rc_set(void *p, rmsnorm_dtype dt, int64_t i, double v) {
    switch (dt) {
    case RMSNORM_F32: ((float *)p)[i] = (float)v; break;
    case RMSNORM_F16: ((uint16_t *)p)[i] = rmsnorm_f32_to_f16((float)v); break;
    case RMSNORM_BF16: ((uint16_t *)p)[i] = rmsnorm_f32_to_bf16((float)v); break;
    }
}

static void rc_fill_normal(void *p, rmsnorm_dtype dt, int64_t n, double scale, double shift) {
    for (int64_t i = 0; i < n; i++) rc_set(p, dt, i, shift + scale * rc_normal());
}

static const char *rc_dtype_name(rmsnorm_dtype dt) {
    return dt == RMSNORM_F32 ? "float32" : dt == RMSNORM_F16 ? "float16" : "bfloat16";
}

/* Relative tolerance the issue asks for: 1e-2 for 16-bit types, 1e-5 for float32. */
static double rc_rtol(rmsnorm_dtype dt) { return dt == RMSNORM_F32 ? 1e-5 : 1e-2; }

/* Compare got[rows, hidden] with the float64 RMSNorm of src (optionally written to ref by the
 * caller). Every element must satisfy |got - ref| <= atol + rtol*|ref|; NaN never passes.
 * Returns the number of bad elements (prints the first few) and the max relative error. */
static int64_t rc_check_norm(const char *what, const void *got, const void *src, const void *w,
                             rmsnorm_dtype dt, rmsnorm_dtype wdt, int64_t rows, int64_t hidden,
                             double eps, double *max_rel) {
    double rtol = rc_rtol(dt), atol = dt == RMSNORM_F32 ? 1e-6 : 1e-4;
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int64_t c = 0; c < hidden; c++) {
            double v = rc_get(src, dt, r * hidden + c);
            ss += v * v;
        }
        double inv = 1.0 / sqrt(ss / (double)hidden + eps);
        for (int64_t c = 0; c < hidden; c++) {
            double ref = rc_get(src, dt, r * hidden + c) * inv * rc_get(w, wdt, c);
            double g = rc_get(got, dt, r * hidden + c);
            double err = fabs(g - ref);
            if (fabs(ref) > 1e-3 && err / fabs(ref) > *max_rel) *max_rel = err / fabs(ref);
            if (!(err <= atol + rtol * fabs(ref))) {
                if (bad < 5)
                    fprintf(stderr, "%s: row %lld col %lld: got %.8g want %.8g\n", what,
                            (long long)r, (long long)c, g, ref);
                bad++;
            }
        }
    }
    return bad;
}

#endif
