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
    printf("worst normalised error %.3g; %d checks, %d failures\n", worst_err, checks, failures);
    return failures ? 1 : 0;
}
