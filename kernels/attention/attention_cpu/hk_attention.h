/* hubkern reference attention: C ABI shared by the CPU (attention_cpu/) and CUDA (attention_cuda/)
 * implementations. All tensors are dense row-major unless a stride says otherwise; 16-bit
 * elements are passed as uint16_t (bf16 or fp16 bit patterns, chosen by `dtype`); every
 * accumulation is in float32.
 *
 * Semantics (identical on every backend, and what the tests check):
 *  - scores = scale * q . k, softmax over the keys a query may see, out = softmax . v.
 *  - GQA/MQA: query head h reads kv head h / (num_heads_q / num_heads_kv).
 *  - Causal masking is aligned to the BOTTOM RIGHT: with Lq queries and Lk keys in a sequence,
 *    query i (0-based) sees key j iff j <= i + (Lk - Lq). With Lq == Lk this is the usual lower
 *    triangle; with Lk > Lq (a chunk appended to a cache) the last query sees every key; with
 *    Lk < Lq the first Lq - Lk queries see no key at all.
 *  - A query row that sees no key (causal with Lk < Lq, or Lk == 0) is FULLY MASKED: its output
 *    is exactly 0 and its log-sum-exp is -inf. No NaN is ever produced for such rows.
 *  - lse (optional, may be NULL) is the natural-log log-sum-exp of the scaled scores of a row,
 *    in float32.
 */
#ifndef HK_ATTENTION_H
#define HK_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { HK_ATTN_BF16 = 0, HK_ATTN_FP16 = 1 } hk_attn_dtype;

/* Return codes. */
#define HK_ATTN_OK 0
#define HK_ATTN_EINVAL (-1)   /* bad argument: a shape, a null pointer, an unsupported head dim */
#define HK_ATTN_ENOMEM (-2)   /* scratch allocation failed (CPU) */
#define HK_ATTN_ECUDA (-3)    /* a CUDA launch or runtime call failed (CUDA backend) */

/* Prefill / varlen forward.
 *   q   [total_q, num_heads_q,  head_dim]   total_q = cu_seqlens_q[batch]
 *   k,v [total_k, num_heads_kv, head_dim]   total_k = cu_seqlens_k[batch]
 *   out [total_q, num_heads_q,  head_dim]
 *   lse [num_heads_q, total_q] float32 (FlashAttention varlen layout), or NULL
 *   cu_seqlens_q/k: batch + 1 non-decreasing int32 offsets starting at 0.
 * A fixed-length batch [B, S, H, D] is the special case cu_seqlens = {0, S, 2S, ...}. */
int hk_attn_prefill_cpu(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                        const uint16_t *v, const int32_t *cu_seqlens_q,
                        const int32_t *cu_seqlens_k, int batch, int num_heads_q,
                        int num_heads_kv, int head_dim, hk_attn_dtype dtype, int causal,
                        float softmax_scale);

/* KV cache of a decode step. Element (token t, kv head h, dim d) of sequence b lives at
 *   contiguous (block_table == NULL): base + b*stride_block + t*stride_token + h*stride_head + d
 *   paged:   base + block_table[b*max_blocks_per_seq + t/block_size]*stride_block
 *                 + (t%block_size)*stride_token + h*stride_head + d
 * K and V share the strides. Strides are in elements. For a [B, S, Hkv, D] cache:
 * stride_block = S*Hkv*D, stride_token = Hkv*D, stride_head = D. For SDPA's [B, Hkv, S, D]:
 * stride_block = Hkv*S*D, stride_token = D, stride_head = S*D. For the paged layout
 * [num_blocks, block_size, Hkv, D] (vLLM / flash-attn kvcache): block_size*Hkv*D, Hkv*D, D. */
typedef struct {
    const uint16_t *k;
    const uint16_t *v;
    int64_t stride_block;
    int64_t stride_token;
    int64_t stride_head;
    const int32_t *block_table; /* NULL: contiguous */
    int block_size;             /* paged only: tokens per block (16..256) */
    int max_blocks_per_seq;     /* paged only: row stride of block_table */
} hk_attn_kv_cache;

/* Decode (incl. speculative widths up to 8).
 *   q   [batch, q_len, num_heads_q, head_dim];  out: same shape
 *   lse [batch, q_len, num_heads_q] float32, or NULL
 *   seqlens_k[b]: number of valid cache tokens of sequence b, INCLUDING the q_len new ones,
 *   which are its last q_len tokens. Query t of sequence b sees keys j <= seqlens_k[b]-q_len+t
 *   (bottom-right causal, as above); rows with no visible key are fully masked (0, -inf). */
int hk_attn_decode_cpu(uint16_t *out, float *lse, const uint16_t *q,
                       const hk_attn_kv_cache *kv, const int32_t *seqlens_k, int batch,
                       int q_len, int num_heads_q, int num_heads_kv, int head_dim,
                       hk_attn_dtype dtype, float softmax_scale);

/* FP8 KV cache (decode only). K and V hold float8 e4m3fn codes (torch.float8_e4m3fn, the format
 * vLLM and FlashInfer store: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no infinity,
 * codes 0x7F/0xFF NaN, largest finite 448), one byte per element, in the layouts and strides of
 * hk_attn_kv_cache above (strides in elements = bytes; contiguous or paged through block_table).
 * Dequantised value = e4m3 value * scale, with float32 scales:
 *   scale_per_head == 0: k_scale[0] / v_scale[0] for every kv head (per-tensor scales);
 *   scale_per_head == 1: k_scale[h] / v_scale[h] for kv head h ([num_heads_kv] each).
 * Queries and the output stay bf16/fp16 (dtype). The result is attention on the dequantised
 * cache, computed without materialising it: every e4m3 code converts exactly to the query's
 * 16-bit type, K's scale is folded into the softmax scale (scores = softmax_scale * k_scale *
 * q . k_code, in float32) and V's scale multiplies the normalised float32 output before its one
 * rounding to dtype (round to nearest even); the LSE is that of the scaled scores.
 * NaN codes decode to NaN and poison every row that sees such a key (as a NaN in a 16-bit cache
 * would); keys past a sequence's length are never read into a result, whatever their bytes.
 * Scales are used as given (0 gives zeros; NaN or inf propagate). The CPU scales are host
 * pointers, the CUDA ones device pointers (read by the kernel, so a CUDA graph may replay with
 * new scale values). */
typedef struct {
    const uint8_t *k;
    const uint8_t *v;
    int64_t stride_block;
    int64_t stride_token;
    int64_t stride_head;
    const int32_t *block_table; /* NULL: contiguous */
    int block_size;             /* paged only: tokens per block */
    int max_blocks_per_seq;     /* paged only: row stride of block_table */
    const float *k_scale;       /* [1] or [num_heads_kv] (scale_per_head) */
    const float *v_scale;
    int scale_per_head;         /* 0: per-tensor scales; 1: one per kv head */
} hk_attn_kv_cache_fp8;

/* Decode over an FP8 cache: the arguments and semantics of hk_attn_decode_cpu, with kv an FP8
 * cache. HK_ATTN_EINVAL also for a null scale pointer or scale_per_head outside {0, 1}. */
int hk_attn_decode_fp8_cpu(uint16_t *out, float *lse, const uint16_t *q,
                           const hk_attn_kv_cache_fp8 *kv, const int32_t *seqlens_k, int batch,
                           int q_len, int num_heads_q, int num_heads_kv, int head_dim,
                           hk_attn_dtype dtype, float softmax_scale);

/* The exact value of an e4m3fn code (NaN for 0x7F and 0xFF). */
float hk_attn_e4m3_to_float(uint8_t code);

/* Scalar conversions used by the CPU path (exposed for tests and tools). Round to nearest even. */
float hk_attn_to_float(uint16_t bits, hk_attn_dtype dtype);
uint16_t hk_attn_from_float(float x, hk_attn_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
