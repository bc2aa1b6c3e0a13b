/* CPU implementation of hubkern's reference attention (prefill/varlen and decode).
 * Plain C11, float32 accumulation, no global state (thread-safe). It is both the CPU variant and
 * the oracle the CUDA kernels are checked against. Semantics: see hk_attention.h. */
#include "hk_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float hk_attn_to_float(uint16_t h, hk_attn_dtype dtype) {
    if (dtype == HK_ATTN_BF16) {
        uint32_t x = (uint32_t)h << 16;
        float f;
        memcpy(&f, &x, sizeof f);
        return f;
    }
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        float f = ldexpf((float)m, -24); /* zero or subnormal */
        return (h & 0x8000u) ? -f : f;
    }
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13); /* inf / nan */
    else
        x = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

uint16_t hk_attn_from_float(float f, hk_attn_dtype dtype) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if (dtype == HK_ATTN_BF16) {
        if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
        x += 0x7fffu + ((x >> 16) & 1u);
        return (uint16_t)(x >> 16);
    }
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                   /* below 2^-14: subnormal */
        float a;
        memcpy(&a, &ax, sizeof a);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

/* One query row against the first `nkeys` rows of kf/vf (float, [n][d]). */
static void attend_row(uint16_t *o, float *lse, const float *qf, const float *kf, const float *vf,
                       int nkeys, int d, hk_attn_dtype dtype, float scale, float oscale, float *s,
                       float *acc) {
    if (nkeys <= 0) {
        for (int c = 0; c < d; c++) o[c] = 0; /* +0 in both bf16 and fp16 */
        if (lse) *lse = -INFINITY;
        return;
    }
    float mx = -INFINITY;
    for (int j = 0; j < nkeys; j++) {
        const float *kr = kf + (size_t)j * d;
        float dot = 0.f;
        for (int c = 0; c < d; c++) dot += qf[c] * kr[c];
        s[j] = dot * scale;
        if (s[j] > mx) mx = s[j];
    }
    float sum = 0.f;
    for (int c = 0; c < d; c++) acc[c] = 0.f;
    for (int j = 0; j < nkeys; j++) {
        float p = expf(s[j] - mx);
        sum += p;
        const float *vr = vf + (size_t)j * d;
        for (int c = 0; c < d; c++) acc[c] += p * vr[c];
    }
    float inv = 1.f / sum;
    for (int c = 0; c < d; c++) o[c] = hk_attn_from_float(acc[c] * inv * oscale, dtype);
    if (lse) *lse = mx + logf(sum);
}

/* Per-call float scratch: one sequence's keys and values converted once, the query row, the
 * scores and the output accumulator. */
typedef struct attn_scratch {
    float *k, *v, *s, *acc, *q;
} attn_scratch;

static void scratch_free(attn_scratch *w) {
    free(w->k), free(w->v), free(w->s), free(w->acc), free(w->q);
}

static int scratch_alloc(attn_scratch *w, int64_t max_keys, int d) {
    size_t n = (size_t)(max_keys > 0 ? max_keys : 1);
    w->k = malloc(n * (size_t)d * sizeof *w->k);
    w->v = malloc(n * (size_t)d * sizeof *w->v);
    w->s = malloc(n * sizeof *w->s);
    w->acc = malloc((size_t)d * sizeof *w->acc);
    w->q = malloc((size_t)d * sizeof *w->q);
    if (!w->k || !w->v || !w->s || !w->acc || !w->q) {
        scratch_free(w);
        return HK_ATTN_ENOMEM;
    }
    return HK_ATTN_OK;
}

static int check_common(int hq, int hkv, int d, hk_attn_dtype dtype) {
    if (hq <= 0 || hkv <= 0 || hq % hkv != 0) return HK_ATTN_EINVAL;
    if (d <= 0 || d > 512) return HK_ATTN_EINVAL;
    if (dtype != HK_ATTN_BF16 && dtype != HK_ATTN_FP16) return HK_ATTN_EINVAL;
    return HK_ATTN_OK;
}

int hk_attn_prefill_cpu(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                        const uint16_t *v, const int32_t *cu_q, const int32_t *cu_k, int batch,
                        int hq, int hkv, int d, hk_attn_dtype dtype, int causal, float scale) {
    if (!out || !q || !k || !v || !cu_q || !cu_k || batch < 0) return HK_ATTN_EINVAL;
    if (check_common(hq, hkv, d, dtype) != HK_ATTN_OK) return HK_ATTN_EINVAL;
    if (cu_q[0] != 0 || cu_k[0] != 0) return HK_ATTN_EINVAL;
    int max_k = 0;
    for (int b = 0; b < batch; b++) {
        if (cu_q[b + 1] < cu_q[b] || cu_k[b + 1] < cu_k[b]) return HK_ATTN_EINVAL;
        if (cu_k[b + 1] - cu_k[b] > max_k) max_k = cu_k[b + 1] - cu_k[b];
    }
    const int64_t total_q = cu_q[batch];
    const int group = hq / hkv;
    attn_scratch w;
    if (scratch_alloc(&w, max_k, d) != HK_ATTN_OK) return HK_ATTN_ENOMEM;
    float *kf = w.k, *vf = w.v, *s = w.s, *acc = w.acc, *qf = w.q;
    for (int b = 0; b < batch; b++) {
        const int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b];
        for (int hk = 0; hk < hkv; hk++) {
            for (int j = 0; j < lk; j++)
                for (int c = 0; c < d; c++) {
                    size_t src = ((size_t)(cu_k[b] + j) * hkv + hk) * d + c;
                    kf[(size_t)j * d + c] = hk_attn_to_float(k[src], dtype);
                    vf[(size_t)j * d + c] = hk_attn_to_float(v[src], dtype);
                }
            for (int g = 0; g < group; g++) {
                const int h = hk * group + g;
                for (int i = 0; i < lq; i++) {
                    const size_t row = ((size_t)(cu_q[b] + i) * hq + h) * d;
                    for (int c = 0; c < d; c++) qf[c] = hk_attn_to_float(q[row + c], dtype);
                    int nvis = lk;
                    if (causal) {
                        int lim = i + lk - lq + 1; /* bottom-right aligned */
                        nvis = lim < 0 ? 0 : (lim < lk ? lim : lk);
                    }
                    attend_row(out + row, lse ? lse + (size_t)h * total_q + cu_q[b] + i : NULL,
                               qf, kf, vf, nvis, d, dtype, scale, 1.f, s, acc);
                }
            }
        }
    }
    scratch_free(&w);
    return HK_ATTN_OK;
}

float hk_attn_e4m3_to_float(uint8_t code) {
    const int e = (code >> 3) & 0xf, m = code & 7;
    float f;
    if (e == 15 && m == 7) return NAN;  /* e4m3fn: no infinity; S.1111.111 is NaN */
    f = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.f + (float)m / 8.f, e - 7);
    return (code & 0x80) ? -f : f;
}

/* The cache of one decode call: 16-bit (kv16) or FP8 (kv8, with its scales). */
typedef struct decode_cache {
    const hk_attn_kv_cache *kv16;
    const hk_attn_kv_cache_fp8 *kv8;
    const int32_t *block_table;
    int block_size, max_blocks;
    int64_t stride_block, stride_token, stride_head;
} decode_cache;

static int decode_run(uint16_t *out, float *lse, const uint16_t *q, const decode_cache *kv,
                      const int32_t *seqlens_k, int batch, int q_len, int hq, int hkv, int d,
                      hk_attn_dtype dtype, float scale) {
    if (q_len < 1 || q_len > 8) return HK_ATTN_EINVAL;
    if (check_common(hq, hkv, d, dtype) != HK_ATTN_OK) return HK_ATTN_EINVAL;
    if (kv->block_table && (kv->block_size <= 0 || kv->max_blocks <= 0)) return HK_ATTN_EINVAL;
    int max_k = 0;
    for (int b = 0; b < batch; b++) {
        if (seqlens_k[b] < 0) return HK_ATTN_EINVAL;
        if (kv->block_table && seqlens_k[b] > (int64_t)kv->block_size * kv->max_blocks)
            return HK_ATTN_EINVAL;
        if (seqlens_k[b] > max_k) max_k = seqlens_k[b];
    }
    const int group = hq / hkv;
    attn_scratch w;
    if (scratch_alloc(&w, max_k, d) != HK_ATTN_OK) return HK_ATTN_ENOMEM;
    float *kf = w.k, *vf = w.v, *s = w.s, *acc = w.acc, *qf = w.q;
    const hk_attn_kv_cache_fp8 *k8 = kv->kv8;
    for (int b = 0; b < batch; b++) {
        const int lk = seqlens_k[b];
        for (int hk = 0; hk < hkv; hk++) {
            for (int j = 0; j < lk; j++) {
                int64_t off;
                if (kv->block_table) {
                    int32_t blk = kv->block_table[(size_t)b * kv->max_blocks + j / kv->block_size];
                    off = blk * kv->stride_block + (int64_t)(j % kv->block_size) * kv->stride_token;
                } else {
                    off = (int64_t)b * kv->stride_block + (int64_t)j * kv->stride_token;
                }
                off += (int64_t)hk * kv->stride_head;
                for (int c = 0; c < d; c++) {
                    /* FP8: the codes' values; the scales are applied to scores and output */
                    kf[(size_t)j * d + c] = k8 ? hk_attn_e4m3_to_float(k8->k[off + c])
                                               : hk_attn_to_float(kv->kv16->k[off + c], dtype);
                    vf[(size_t)j * d + c] = k8 ? hk_attn_e4m3_to_float(k8->v[off + c])
                                               : hk_attn_to_float(kv->kv16->v[off + c], dtype);
                }
            }
            const int sh = k8 && k8->scale_per_head ? hk : 0;
            const float ks = k8 ? k8->k_scale[sh] : 1.f, vs = k8 ? k8->v_scale[sh] : 1.f;
            for (int g = 0; g < group; g++) {
                const int h = hk * group + g;
                for (int t = 0; t < q_len; t++) {
                    const size_t row = (((size_t)b * q_len + t) * hq + h) * d;
                    for (int c = 0; c < d; c++) qf[c] = hk_attn_to_float(q[row + c], dtype);
                    int lim = lk - q_len + t + 1;
                    int nvis = lim < 0 ? 0 : (lim < lk ? lim : lk);
                    attend_row(out + row, lse ? lse + ((size_t)b * q_len + t) * hq + h : NULL, qf,
                               kf, vf, nvis, d, dtype, k8 ? scale * ks : scale, vs, s, acc);
                }
            }
        }
    }
    scratch_free(&w);
    return HK_ATTN_OK;
}

int hk_attn_decode_fp8_cpu(uint16_t *out, float *lse, const uint16_t *q,
                           const hk_attn_kv_cache_fp8 *kv, const int32_t *seqlens_k, int batch,
                           int q_len, int hq, int hkv, int d, hk_attn_dtype dtype, float scale) {
    if (!out || !q || !kv || !kv->k || !kv->v || !kv->k_scale || !kv->v_scale || !seqlens_k ||
        batch < 0 || (kv->scale_per_head != 0 && kv->scale_per_head != 1))
        return HK_ATTN_EINVAL;
    const decode_cache c = {NULL, kv, kv->block_table, kv->block_size, kv->max_blocks_per_seq,
                            kv->stride_block, kv->stride_token, kv->stride_head};
    return decode_run(out, lse, q, &c, seqlens_k, batch, q_len, hq, hkv, d, dtype, scale);
}

int hk_attn_decode_cpu(uint16_t *out, float *lse, const uint16_t *q, const hk_attn_kv_cache *kv,
                       const int32_t *seqlens_k, int batch, int q_len, int hq, int hkv, int d,
                       hk_attn_dtype dtype, float scale) {
    if (!out || !q || !kv || !kv->k || !kv->v || !seqlens_k || batch < 0) return HK_ATTN_EINVAL;
    const decode_cache c = {kv, NULL, kv->block_table, kv->block_size, kv->max_blocks_per_seq,
                            kv->stride_block, kv->stride_token, kv->stride_head};
    return decode_run(out, lse, q, &c, seqlens_k, batch, q_len, hq, hkv, d, dtype, scale);
}
