/* RMSNorm for the CPU in portable C11 (see rmsnorm_cpu.h for the contract).
 *
 * Each row is processed in chunks of CHUNK elements: a chunk is converted to float32 in a small
 * stack buffer (simple loops the compiler vectorises), squared and summed into 8 independent
 * partial sums (so the sum vectorises without -ffast-math), and the second pass converts again,
 * scales and rounds back. Rows are independent, so threads split them in contiguous ranges. */
#include "rmsnorm_cpu.h"

#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define CHUNK 512
#define LANES 8
/* Below this many elements a tensor is done on one thread (thread start-up costs more). */
#define PARALLEL_MIN_ELEMS (1 << 18)

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(x >> 16);
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / NaN */
    if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in float */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (ax < 0x38800000u) {
        /* below 2^-14: a half subnormal (or zero). Adding 0.5 puts the value where a float's
         * last mantissa bit weighs 2^-24, the half-subnormal step, so the hardware addition
         * rounds it to nearest even; the low mantissa bits are then the half's bits. */
        float a = bits_f32(ax) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(f32_bits(a) - 0x3f000000u));
    }
    uint32_t r = ax - 0x38000000u; /* rebias the exponent from 127 to 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (uint16_t)(r >> 13));
}

float rmsnorm_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }
uint16_t rmsnorm_f32_to_bf16(float f) { return f32_to_bf16(f); }
float rmsnorm_f16_to_f32(uint16_t h) { return f16_to_f32(h); }
uint16_t rmsnorm_f32_to_f16(float f) { return f32_to_f16(f); }

int rmsnorm_dtype_size(rmsnorm_dtype dt) {
    switch (dt) {
    case RMSNORM_F32: return 4;
    case RMSNORM_F16: return 2;
    case RMSNORM_BF16: return 2;
    }
    return 0;
}

/* dst[0..n) = float(src[off .. off+n)) */
static void load_chunk(float *restrict dst, const void *restrict src, rmsnorm_dtype dt,
                       int64_t off, int n) {
    switch (dt) {
    case RMSNORM_F32: {
        const float *s = (const float *)src + off;
        for (int i = 0; i < n; i++) dst[i] = s[i];
        break;
    }
    case RMSNORM_F16: {
        const uint16_t *s = (const uint16_t *)src + off;
        for (int i = 0; i < n; i++) dst[i] = f16_to_f32(s[i]);
        break;
    }
    case RMSNORM_BF16: {
        const uint16_t *s = (const uint16_t *)src + off;
        for (int i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
        break;
    }
    }
}

/* dst[off .. off+n) = round(src[0..n)) */
static void store_chunk(void *restrict dst, const float *restrict src, rmsnorm_dtype dt,
                        int64_t off, int n) {
    switch (dt) {
    case RMSNORM_F32: {
        float *d = (float *)dst + off;
        for (int i = 0; i < n; i++) d[i] = src[i];
        break;
    }
    case RMSNORM_F16: {
        uint16_t *d = (uint16_t *)dst + off;
        for (int i = 0; i < n; i++) d[i] = f32_to_f16(src[i]);
        break;
    }
    case RMSNORM_BF16: {
        uint16_t *d = (uint16_t *)dst + off;
        for (int i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
        break;
    }
    }
}

/* Sum of squares of v[0..n) in float, 8 partial sums. */
static float sum_squares(const float *restrict v, int n) {
    float acc[LANES] = {0};
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += v[i + l] * v[i + l];
    for (; i < n; i++) acc[0] += v[i] * v[i];
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += acc[l];
    return s;
}

static void scale_chunk(float *restrict v, const float *restrict w, float inv_rms, int n) {
    for (int i = 0; i < n; i++) v[i] = v[i] * inv_rms * w[i];
}

static inline int chunk_len(int64_t hidden, int64_t c) {
    int64_t left = hidden - c;
    return left < CHUNK ? (int)left : CHUNK;
}

/* Normalise one row already reduced to `sumsq`: dst = src * inv_rms * w. */
static void write_scaled_row(void *dst, const void *src, const void *weight, rmsnorm_dtype dt,
                             rmsnorm_dtype weight_dt, int64_t row_off, int64_t hidden,
                             float sumsq, float eps) {
    float buf[CHUNK], wbuf[CHUNK];
    float inv_rms = 1.0f / sqrtf(sumsq / (float)hidden + eps);
    for (int64_t c = 0; c < hidden; c += CHUNK) {
        int n = chunk_len(hidden, c);
        load_chunk(buf, src, dt, row_off + c, n);
        load_chunk(wbuf, weight, weight_dt, c, n);
        scale_chunk(buf, wbuf, inv_rms, n);
        store_chunk(dst, buf, dt, row_off + c, n);
    }
}

void rmsnorm_cpu_rms_norm_rows(void *out, const void *x, const void *weight, rmsnorm_dtype dt,
                               rmsnorm_dtype weight_dt, int64_t hidden, int64_t row_begin,
                               int64_t row_end, float eps) {
    float buf[CHUNK];
    for (int64_t r = row_begin; r < row_end; r++) {
        int64_t row_off = r * hidden;
        float sumsq = 0.0f;
        for (int64_t c = 0; c < hidden; c += CHUNK) {
            int n = chunk_len(hidden, c);
            load_chunk(buf, x, dt, row_off + c, n);
            sumsq += sum_squares(buf, n);
        }
        write_scaled_row(out, x, weight, dt, weight_dt, row_off, hidden, sumsq, eps);
    }
}

void rmsnorm_cpu_fused_add_rms_norm_rows(void *x, void *residual, const void *weight,
                                         rmsnorm_dtype dt, rmsnorm_dtype weight_dt, int64_t hidden,
                                         int64_t row_begin, int64_t row_end, float eps) {
    float buf[CHUNK], rbuf[CHUNK];
    for (int64_t r = row_begin; r < row_end; r++) {
        int64_t row_off = r * hidden;
        float sumsq = 0.0f;
        for (int64_t c = 0; c < hidden; c += CHUNK) {
            int n = chunk_len(hidden, c);
            load_chunk(buf, x, dt, row_off + c, n);
            load_chunk(rbuf, residual, dt, row_off + c, n);
            for (int i = 0; i < n; i++) rbuf[i] += buf[i];
            /* the norm is taken of the residual as stored (rounded to the tensor's type) */
            store_chunk(residual, rbuf, dt, row_off + c, n);
            load_chunk(rbuf, residual, dt, row_off + c, n);
            sumsq += sum_squares(rbuf, n);
        }
        write_scaled_row(x, residual, weight, dt, weight_dt, row_off, hidden, sumsq, eps);
    }
}

void rmsnorm_cpu_rms_norm(void *out, const void *x, const void *weight, rmsnorm_dtype dt,
                          rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden, float eps) {
    if (rows <= 0 || hidden <= 0) return;
#ifdef _OPENMP
    if (rows > 1 && rows * hidden >= PARALLEL_MIN_ELEMS) {
#pragma omp parallel
        {
            int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t b = rows * t / nt, e = rows * (t + 1) / nt;
            rmsnorm_cpu_rms_norm_rows(out, x, weight, dt, weight_dt, hidden, b, e, eps);
        }
        return;
    }
#endif
    rmsnorm_cpu_rms_norm_rows(out, x, weight, dt, weight_dt, hidden, 0, rows, eps);
}

void rmsnorm_cpu_fused_add_rms_norm(void *x, void *residual, const void *weight, rmsnorm_dtype dt,
                                    rmsnorm_dtype weight_dt, int64_t rows, int64_t hidden,
                                    float eps) {
    if (rows <= 0 || hidden <= 0) return;
#ifdef _OPENMP
    if (rows > 1 && rows * hidden >= PARALLEL_MIN_ELEMS) {
#pragma omp parallel
        {
            int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t b = rows * t / nt, e = rows * (t + 1) / nt;
            rmsnorm_cpu_fused_add_rms_norm_rows(x, residual, weight, dt, weight_dt, hidden, b, e,
                                                eps);
        }
        return;
    }
#endif
    rmsnorm_cpu_fused_add_rms_norm_rows(x, residual, weight, dt, weight_dt, hidden, 0, rows, eps);
}
