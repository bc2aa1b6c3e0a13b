/* CI test of the CPU attention (the oracle of the CUDA kernels) against an independent float64
 * reference written here. Fresh random inputs on every run (seed printed; HK_ATTN_SEED=<n>
 * replays one), outputs poisoned with NaN first, every output element and every LSE checked.
 * Pass criterion per element: |out - ref| <= 1e-2*|ref| + 1e-3*max|ref of that row|; LSE:
 * |lse - ref| <= 1e-4*max(1,|ref|); fully masked rows: output exactly +0 and LSE exactly -inf. */
#include "hk_attention.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures, checks;
#define CHECK(c)                                                                   \
    do {                                                                           \
        checks++;                                                                  \
        if (!(c)) {                                                                \
            failures++;                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);   \
        }                                                                          \
    } while (0)

static uint64_t rng_state;
static double urand(void) { /* xorshift64*, uniform in [0,1) */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static double nrand(void) { /* Box-Muller */
    double u = urand(), w = urand();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * w);
}
static uint16_t *rand_tensor(size_t n, hk_attn_dtype dt) {
    uint16_t *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = hk_attn_from_float((float)nrand(), dt);
    return p;
}
static double lut[2][65536]; /* 16-bit pattern -> value, filled once from hk_attn_to_float */
static double f(uint16_t x, hk_attn_dtype dt) { return lut[dt][x]; }

/* float64 attention of one row over keys given by pointer arrays. ref_o[d], returns lse. */
static double ref_row(double *ref_o, const uint16_t *qr, const uint16_t **kr, const uint16_t **vr,
                      int n, int d, hk_attn_dtype dt, double scale) {
    if (n == 0) {
        for (int c = 0; c < d; c++) ref_o[c] = 0;
        return -INFINITY;
    }
    double *s = malloc((size_t)n * sizeof *s), mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) {
        double dot = 0;
        for (int c = 0; c < d; c++) dot += f(qr[c], dt) * f(kr[j][c], dt);
        s[j] = dot * scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    for (int c = 0; c < d; c++) ref_o[c] = 0;
    for (int j = 0; j < n; j++) {
        double p = exp(s[j] - mx);
        sum += p;
        for (int c = 0; c < d; c++) ref_o[c] += p * f(vr[j][c], dt);
    }
    for (int c = 0; c < d; c++) ref_o[c] /= sum;
    free(s);
    return mx + log(sum);
}

static double worst_err; /* largest |out-ref| / (|ref| + 0.1*rowmax) seen, for the log */
static int check_row(const uint16_t *o, float lse, const double *ref, double ref_lse, int d,
                     hk_attn_dtype dt, int has_lse) {
    int bad = 0;
    if (isinf(ref_lse)) {
        for (int c = 0; c < d; c++) bad |= o[c] != 0;
        if (has_lse) bad |= !(isinf(lse) && lse < 0);
        return bad;
    }
    double rowmax = 0;
    for (int c = 0; c < d; c++) rowmax = fabs(ref[c]) > rowmax ? fabs(ref[c]) : rowmax;
    for (int c = 0; c < d; c++) {
        double x = f(o[c], dt), e = fabs(x - ref[c]);
        if (!(e <= 1e-2 * fabs(ref[c]) + 1e-3 * rowmax)) bad = 1; /* NaN fails */
        double r = e / (fabs(ref[c]) + 0.1 * rowmax + 1e-30);
        if (r > worst_err) worst_err = r;
    }
    if (has_lse && !(fabs((double)lse - ref_lse) <= 1e-4 * fmax(1.0, fabs(ref_lse)))) bad = 1;
    return bad;
}

static void poison(uint16_t *o, size_t n, float *lse, size_t nl) {
    for (size_t i = 0; i < n; i++) o[i] = 0x7fff; /* NaN in bf16 and fp16 */
    for (size_t i = 0; lse && i < nl; i++) lse[i] = NAN;
}

/* ---- prefill ---- */
static void test_prefill(const char *name, int batch, const int *lq, const int *lk, int hq,
                         int hkv, int d, hk_attn_dtype dt, int causal, double scale, int with_lse) {
    int32_t *cq = calloc((size_t)batch + 1, 4), *ck = calloc((size_t)batch + 1, 4);
    for (int b = 0; b < batch; b++) cq[b + 1] = cq[b] + lq[b], ck[b + 1] = ck[b] + lk[b];
    size_t tq = (size_t)cq[batch], tk = (size_t)ck[batch];
    uint16_t *q = rand_tensor(tq * hq * d, dt), *k = rand_tensor(tk * hkv * d, dt),
             *v = rand_tensor(tk * hkv * d, dt), *o = malloc((tq * hq * d + 1) * 2);
    float *lse = with_lse ? malloc((tq * hq + 1) * 4) : NULL;
    poison(o, tq * hq * d, lse, tq * hq);
    CHECK(hk_attn_prefill_cpu(o, lse, q, k, v, cq, ck, batch, hq, hkv, d, dt, causal,
                              (float)scale) == HK_ATTN_OK);
    const uint16_t **kr = malloc((tk + 1) * sizeof *kr), **vr = malloc((tk + 1) * sizeof *vr);
    double *ref = malloc((size_t)d * sizeof *ref);
    int bad_rows = 0, masked = 0;
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < hq; h++) {
            int hk = h / (hq / hkv);
            for (int i = 0; i < lq[b]; i++) {
                int n = 0;
                for (int j = 0; j < lk[b]; j++) {
                    if (causal && j > i + lk[b] - lq[b]) continue; /* bottom-right */
                    size_t off = ((size_t)(ck[b] + j) * hkv + hk) * d;
                    kr[n] = k + off, vr[n] = v + off, n++;
                }
                size_t row = ((size_t)(cq[b] + i) * hq + h) * d;
                double rl = ref_row(ref, q + row, kr, vr, n, d, dt, scale);
                masked += n == 0;
                bad_rows += check_row(o + row, with_lse ? lse[(size_t)h * tq + cq[b] + i] : 0, ref,
                                      rl, d, dt, with_lse);
            }
        }
    CHECK(bad_rows == 0);
    printf("prefill %-28s rows=%zu masked=%d bad=%d\n", name, tq * hq, masked, bad_rows);
    free(cq), free(ck), free(q), free(k), free(v), free(o), free(lse), free(kr), free(vr), free(ref);
}

/* ---- decode ---- */
enum { LAYOUT_BSHD, LAYOUT_BHSD, LAYOUT_PAGED };
static void test_decode(const char *name, int batch, const int *seqlens, int q_len, int hq, int hkv,
                        int d, hk_attn_dtype dt, int layout, int block_size) {
    int smax = 1;
    for (int b = 0; b < batch; b++) smax = seqlens[b] > smax ? seqlens[b] : smax;
    hk_attn_kv_cache kv = {0};
    int32_t *bt = NULL, nblocks_total = 0, mb = 0;
    size_t cache_elems;
    if (layout == LAYOUT_PAGED) {
        mb = (smax + block_size - 1) / block_size;
        nblocks_total = batch * mb + 3; /* spare blocks never referenced */
        bt = malloc((size_t)batch * mb * 4);
        /* a random permutation of physical blocks */
        int32_t *perm = malloc((size_t)nblocks_total * 4);
        for (int i = 0; i < nblocks_total; i++) perm[i] = i;
        for (int i = nblocks_total - 1; i > 0; i--) {
            int j = (int)(urand() * (i + 1));
            int32_t t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (int i = 0; i < batch * mb; i++) bt[i] = perm[i];
        free(perm);
        kv.stride_block = (int64_t)block_size * hkv * d, kv.stride_token = (int64_t)hkv * d;
        kv.stride_head = d, kv.block_table = bt, kv.block_size = block_size;
        kv.max_blocks_per_seq = mb;
        cache_elems = (size_t)nblocks_total * block_size * hkv * d;
    } else if (layout == LAYOUT_BSHD) {
        kv.stride_block = (int64_t)smax * hkv * d, kv.stride_token = (int64_t)hkv * d;
        kv.stride_head = d;
        cache_elems = (size_t)batch * smax * hkv * d;
    } else {
        kv.stride_block = (int64_t)hkv * smax * d, kv.stride_token = d;
        kv.stride_head = (int64_t)smax * d;
        cache_elems = (size_t)batch * smax * hkv * d;
    }
    uint16_t *kc = rand_tensor(cache_elems, dt), *vc = rand_tensor(cache_elems, dt);
    kv.k = kc, kv.v = vc;
    size_t nq = (size_t)batch * q_len * hq;
    uint16_t *q = rand_tensor(nq * d, dt), *o = malloc(nq * d * 2);
    float *lse = malloc(nq * 4);
    poison(o, nq * d, lse, nq);
    double scale = 1.0 / sqrt((double)d);
    CHECK(hk_attn_decode_cpu(o, lse, q, &kv, seqlens, batch, q_len, hq, hkv, d, dt,
                             (float)scale) == HK_ATTN_OK);
    const uint16_t **kr = malloc((size_t)smax * sizeof *kr), **vr = malloc((size_t)smax * sizeof *vr);
    double *ref = malloc((size_t)d * sizeof *ref);
    int bad_rows = 0, masked = 0;
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < q_len; t++)
            for (int h = 0; h < hq; h++) {
                int hk = h / (hq / hkv), n = 0;
                for (int j = 0; j < seqlens[b]; j++) {
                    if (j > seqlens[b] - q_len + t) break;
                    size_t off;
                    if (layout == LAYOUT_PAGED)
                        off = (((size_t)bt[b * mb + j / block_size] * block_size + j % block_size) *
                                   hkv + hk) * d;
                    else if (layout == LAYOUT_BSHD)
                        off = (((size_t)b * smax + j) * hkv + hk) * d;
                    else
                        off = (((size_t)b * hkv + hk) * smax + j) * d;
                    kr[n] = kc + off, vr[n] = vc + off, n++;
                }
                size_t r = ((size_t)b * q_len + t) * hq + h;
                double rl = ref_row(ref, q + r * d, kr, vr, n, d, dt, scale);
                masked += n == 0;
                bad_rows += check_row(o + r * d, lse[r], ref, rl, d, dt, 1);
            }
    CHECK(bad_rows == 0);
    printf("decode  %-28s rows=%zu masked=%d bad=%d\n", name, nq, masked, bad_rows);
    free(bt), free(kc), free(vc), free(q), free(o), free(lse), free(kr), free(vr), free(ref);
}

/* ---- decode over an FP8 (e4m3fn) cache: float64 reference on the dequantised values ---- */
static uint8_t rand_e4m3(void) { /* mostly |x| in [2^-4, 2^3), some subnormals and zeros */
    const uint8_t sign = urand() < 0.5 ? 0x80 : 0, m = (uint8_t)(urand() * 8);
    if (urand() < 0.06) return (uint8_t)(sign | m); /* e = 0: zero or subnormal */
    return (uint8_t)(sign | ((3 + (int)(urand() * 7)) << 3) | m);
}
static void test_decode_fp8(const char *name, int batch, const int *seqlens, int q_len, int hq,
                            int hkv, int d, hk_attn_dtype dt, int layout, int block_size,
                            int per_head) {
    int smax = 1;
    for (int b = 0; b < batch; b++) smax = seqlens[b] > smax ? seqlens[b] : smax;
    hk_attn_kv_cache_fp8 kv = {0};
    int32_t *bt = NULL, mb = 0;
    size_t cache_elems = (size_t)batch * smax * hkv * d;
    if (layout == LAYOUT_PAGED) {
        mb = (smax + block_size - 1) / block_size;
        const int nblk = batch * mb + 2;
        bt = malloc((size_t)batch * mb * 4);
        for (int i = 0; i < batch * mb; i++) bt[i] = nblk - 1 - i; /* reversed: not the identity */
        kv.stride_block = (int64_t)block_size * hkv * d, kv.stride_token = (int64_t)hkv * d;
        kv.stride_head = d, kv.block_table = bt, kv.block_size = block_size, kv.max_blocks_per_seq = mb;
        cache_elems = (size_t)nblk * block_size * hkv * d;
    } else if (layout == LAYOUT_BSHD) {
        kv.stride_block = (int64_t)smax * hkv * d, kv.stride_token = (int64_t)hkv * d, kv.stride_head = d;
    } else {
        kv.stride_block = (int64_t)hkv * smax * d, kv.stride_token = d, kv.stride_head = (int64_t)smax * d;
    }
    uint8_t *kc = malloc(cache_elems), *vc = malloc(cache_elems);
    for (size_t i = 0; i < cache_elems; i++) kc[i] = rand_e4m3(), vc[i] = rand_e4m3();
    float ks[16], vs[16];
    for (int h = 0; h < 16; h++) ks[h] = (float)(0.02 + 0.2 * urand()), vs[h] = (float)(0.5 + 2 * urand());
    kv.k = kc, kv.v = vc, kv.k_scale = ks, kv.v_scale = vs, kv.scale_per_head = per_head;
    size_t nq = (size_t)batch * q_len * hq;
    uint16_t *q = rand_tensor(nq * d, dt), *o = malloc(nq * d * 2);
    float *lse = malloc(nq * 4);
    poison(o, nq * d, lse, nq);
    const double scale = 1.0 / sqrt((double)d);
    CHECK(hk_attn_decode_fp8_cpu(o, lse, q, &kv, seqlens, batch, q_len, hq, hkv, d, dt, (float)scale) ==
          HK_ATTN_OK);
    double *kd = malloc((size_t)smax * d * sizeof *kd), *vd = malloc((size_t)smax * d * sizeof *vd);
    double *ref = malloc((size_t)d * sizeof *ref), *sc = malloc((size_t)smax * sizeof *sc);
    int bad_rows = 0, masked = 0;
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < q_len; t++)
            for (int h = 0; h < hq; h++) {
                const int hk = h / (hq / hkv), n0 = seqlens[b] - q_len + t + 1;
                const int n = n0 < 0 ? 0 : n0;
                const double kscale = ks[per_head ? hk : 0], vscale = vs[per_head ? hk : 0];
                for (int j = 0; j < n; j++) {
                    size_t off;
                    if (layout == LAYOUT_PAGED)
                        off = (((size_t)bt[b * mb + j / block_size] * block_size + j % block_size) * hkv + hk) * d;
                    else if (layout == LAYOUT_BSHD)
                        off = (((size_t)b * smax + j) * hkv + hk) * d;
                    else
                        off = (((size_t)b * hkv + hk) * smax + j) * d;
                    for (int c = 0; c < d; c++) { /* dequantised, float64 */
                        kd[(size_t)j * d + c] = (double)hk_attn_e4m3_to_float(kc[off + c]) * kscale;
                        vd[(size_t)j * d + c] = (double)hk_attn_e4m3_to_float(vc[off + c]) * vscale;
                    }
                }
                const size_t r = ((size_t)b * q_len + t) * hq + h;
                double mx = -INFINITY, sum = 0, rl = -INFINITY;
                for (int j = 0; j < n; j++) {
                    double dot = 0;
                    for (int c = 0; c < d; c++) dot += f(q[r * d + c], dt) * kd[(size_t)j * d + c];
                    sc[j] = dot * scale, mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int c = 0; c < d; c++) ref[c] = 0;
                for (int j = 0; j < n; j++) {
                    const double p = exp(sc[j] - mx);
                    sum += p;
                    for (int c = 0; c < d; c++) ref[c] += p * vd[(size_t)j * d + c];
                }
                if (n > 0) {
                    for (int c = 0; c < d; c++) ref[c] /= sum;
                    rl = mx + log(sum);
                }
                masked += n == 0;
                bad_rows += check_row(o + r * d, lse[r], ref, rl, d, dt, 1);
            }
    CHECK(bad_rows == 0);
    printf("decode fp8 %-25s rows=%zu masked=%d bad=%d\n", name, nq, masked, bad_rows);
    free(bt), free(kc), free(vc), free(q), free(o), free(lse), free(kd), free(vd), free(ref), free(sc);
}

/* e4m3fn decoding (independent of the table: the format's definition) and NaN codes: rows that
 * see a NaN key are NaN, the others are not touched by it, and a bad scale kind is rejected */
static void test_fp8_codes(void) {
    CHECK(hk_attn_e4m3_to_float(0x7e) == 448.f && hk_attn_e4m3_to_float(0xfe) == -448.f);
    CHECK(hk_attn_e4m3_to_float(0x38) == 1.f && hk_attn_e4m3_to_float(0x01) == 0x1p-9f);
    CHECK(hk_attn_e4m3_to_float(0x08) == 0x1p-6f && hk_attn_e4m3_to_float(0x07) == 7 * 0x1p-9f);
    CHECK(isnan(hk_attn_e4m3_to_float(0x7f)) && isnan(hk_attn_e4m3_to_float(0xff)));
    CHECK(hk_attn_e4m3_to_float(0x80) == 0.f && signbit(hk_attn_e4m3_to_float(0x80)));
    int mono = 1;
    for (int c = 1; c < 0x7f; c++) mono &= hk_attn_e4m3_to_float((uint8_t)c) > hk_attn_e4m3_to_float((uint8_t)(c - 1));
    CHECK(mono);
    enum { D = 64, S = 6 };
    uint8_t kc[2 * S * D], vc[2 * S * D]; /* [B=2][S][Hkv=1][D] */
    for (int i = 0; i < 2 * S * D; i++) kc[i] = rand_e4m3(), vc[i] = rand_e4m3();
    kc[2 * D + 5] = 0x7f; /* sequence 0, key 2 */
    vc[S * D + 4 * D + 1] = 0xff; /* sequence 1, key 4: seen by query 1 only (q_len 2, length 5) */
    const float one = 1.f;
    hk_attn_kv_cache_fp8 kv = {kc, vc, S * D, D, D, NULL, 0, 0, &one, &one, 0};
    const int32_t sl[2] = {S, 5};
    uint16_t q[2 * 2 * D], o[2 * 2 * D];
    for (int i = 0; i < 2 * 2 * D; i++) q[i] = hk_attn_from_float((float)nrand(), HK_ATTN_BF16);
    CHECK(hk_attn_decode_fp8_cpu(o, NULL, q, &kv, sl, 2, 2, 1, 1, D, HK_ATTN_BF16, 0.125f) == HK_ATTN_OK);
    int nan_rows = 0, finite_rows = 0;
    for (int r = 0; r < 4; r++) {
        int all_nan = 1, all_fin = 1;
        for (int c = 0; c < D; c++) {
            const float x = hk_attn_to_float(o[r * D + c], HK_ATTN_BF16);
            all_nan &= isnan(x) != 0, all_fin &= isfinite(x) != 0;
        }
        nan_rows += all_nan, finite_rows += all_fin;
    }
    CHECK(nan_rows == 2 && finite_rows == 1); /* seq 0 both rows NaN; seq 1 row 0 finite */
    kv.scale_per_head = 2;
    CHECK(hk_attn_decode_fp8_cpu(o, NULL, q, &kv, sl, 2, 2, 1, 1, D, HK_ATTN_BF16, 0.125f) == HK_ATTN_EINVAL);
    kv.scale_per_head = 0, kv.v_scale = NULL;
    CHECK(hk_attn_decode_fp8_cpu(o, NULL, q, &kv, sl, 2, 2, 1, 1, D, HK_ATTN_BF16, 0.125f) == HK_ATTN_EINVAL);
}

static void test_conversions(void) {
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        for (int dt = 0; dt < 2; dt++) {
            float x = hk_attn_to_float(h, (hk_attn_dtype)dt);
            if (isnan(x)) continue;
            bad += hk_attn_from_float(x, (hk_attn_dtype)dt) != h;
        }
    }
    CHECK(bad == 0);
    /* rounding: halfway cases go to even, overflow to inf */
    CHECK(hk_attn_from_float(1.0f + 1.0f / 2048, HK_ATTN_FP16) == 0x3c00);
    CHECK(hk_attn_from_float(1.0f + 3.0f / 2048, HK_ATTN_FP16) == 0x3c02);
    CHECK(hk_attn_from_float(65520.f, HK_ATTN_FP16) == 0x7c00);
    CHECK(hk_attn_from_float(1.0f + 1.0f / 256, HK_ATTN_BF16) == 0x3f80);
    CHECK(hk_attn_from_float(1.0f + 3.0f / 256, HK_ATTN_BF16) == 0x3f82);
    CHECK(hk_attn_from_float(3e-6f, HK_ATTN_FP16) == 0x0032); /* subnormal: 3e-6 * 2^24 = 50.3 */
}

static void test_bad_args(void) {
    uint16_t x[8] = {0};
    int32_t cu[2] = {0, 1};
    CHECK(hk_attn_prefill_cpu(x, NULL, x, x, x, cu, cu, 1, 3, 2, 1, HK_ATTN_BF16, 0, 1.f) ==
          HK_ATTN_EINVAL); /* 3 % 2 != 0 */
    CHECK(hk_attn_prefill_cpu(NULL, NULL, x, x, x, cu, cu, 1, 1, 1, 1, HK_ATTN_BF16, 0, 1.f) ==
          HK_ATTN_EINVAL);
    int32_t bad_cu[2] = {1, 0};
    CHECK(hk_attn_prefill_cpu(x, NULL, x, x, x, bad_cu, cu, 1, 1, 1, 1, HK_ATTN_BF16, 0, 1.f) ==
          HK_ATTN_EINVAL);
    hk_attn_kv_cache kv = {x, x, 1, 1, 1, NULL, 0, 0};
    int32_t sl[1] = {1};
    CHECK(hk_attn_decode_cpu(x, NULL, x, &kv, sl, 1, 9, 1, 1, 1, HK_ATTN_BF16, 1.f) ==
          HK_ATTN_EINVAL); /* q_len > 8 */
    CHECK(hk_attn_decode_cpu(x, NULL, x, &kv, sl, 1, 1, 1, 1, 1, HK_ATTN_BF16, 1.f) == HK_ATTN_OK);
}

int main(void) {
    const char *env = getenv("HK_ATTN_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) * 2654435761u + 1;
    rng_state = seed ? seed : 1;
    printf("seed %llu (replay with HK_ATTN_SEED=%llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    test_conversions();
    for (uint32_t i = 0; i < 65536; i++)
        for (int dt = 0; dt < 2; dt++) lut[dt][i] = (double)hk_attn_to_float((uint16_t)i, (hk_attn_dtype)dt);
    test_bad_args();
    const hk_attn_dtype B = HK_ATTN_BF16, H = HK_ATTN_FP16;
    double s128 = 1.0 / sqrt(128.0), s64 = 0.125;
    int odd[3] = {1, 7, 129};
    for (int c = 0; c < 2; c++) {
        test_prefill(c ? "odd lengths bf16 causal" : "odd lengths bf16", 3, odd, odd, 4, 1, 128, B,
                     c, s128, 1);
        test_prefill(c ? "odd lengths fp16 d64 causal" : "odd lengths fp16 d64", 3, odd, odd, 4, 2,
                     64, H, c, s64, 1);
    }
    int l1000[1] = {1000};
    test_prefill("L=1000 bf16 d64 causal", 1, l1000, l1000, 1, 1, 64, B, 1, s64, 1);
    test_prefill("L=1000 fp16 d128", 1, l1000, l1000, 1, 1, 128, H, 0, s128, 0);
    /* mixed varlen, unequal q/k lengths: lk > lq (chunked prefill), lk < lq (masked rows),
     * an empty query and an empty key sequence */
    int vq[6] = {1, 7, 129, 40, 0, 3}, vk[6] = {1, 20, 129, 10, 5, 0};
    test_prefill("varlen GQA 8/2 bf16 causal", 6, vq, vk, 8, 2, 64, B, 1, 0.3, 1);
    test_prefill("varlen GQA 8/2 fp16", 6, vq, vk, 8, 2, 128, H, 0, 0.3, 1);
    test_prefill("varlen MQA 4/1 fp16 causal", 6, vq, vk, 4, 1, 128, H, 1, s128, 1);

    int sl[4] = {1, 7, 129, 1000};
    test_decode("bshd q1 GQA 8/2 bf16", 4, sl, 1, 8, 2, 128, B, LAYOUT_BSHD, 0);
    test_decode("bhsd q1 GQA 8/2 fp16", 4, sl, 1, 8, 2, 128, H, LAYOUT_BHSD, 0);
    int sl2[5] = {3, 0, 129, 1000, 8};
    test_decode("paged16 q4 bf16", 5, sl2, 4, 8, 2, 128, B, LAYOUT_PAGED, 16);
    test_decode("paged128 q8 fp16 d64", 5, sl2, 8, 4, 1, 64, H, LAYOUT_PAGED, 128);
    test_decode("paged256 q1 bf16 MQA", 5, sl2, 1, 4, 1, 128, B, LAYOUT_PAGED, 256);
    test_fp8_codes();
    test_decode_fp8("bshd q1 GQA 8/2 bf16 tensor", 4, sl, 1, 8, 2, 128, B, LAYOUT_BSHD, 0, 0);
    test_decode_fp8("bhsd q4 GQA 8/2 fp16 head", 4, sl, 4, 8, 2, 128, H, LAYOUT_BHSD, 0, 1);
    test_decode_fp8("paged16 q8 GQA 8/1 bf16 head", 5, sl2, 8, 8, 1, 128, B, LAYOUT_PAGED, 16, 1);
    test_decode_fp8("paged64 q2 fp16 d64 tensor", 5, sl2, 2, 4, 4, 64, H, LAYOUT_PAGED, 64, 0);
    test_decode_fp8("paged256 q1 MQA bf16 head", 5, sl2, 1, 4, 1, 64, B, LAYOUT_PAGED, 256, 1);
    printf("worst normalised error %.3g; %d checks, %d failures\n", worst_err, checks, failures);
    return failures ? 1 : 0;
}
