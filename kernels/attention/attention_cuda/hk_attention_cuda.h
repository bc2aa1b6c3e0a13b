/* CUDA launchers of hubkern's reference attention. Same semantics and layouts as the CPU
 * implementation (attention_cpu/hk_attention.h); all pointers are device pointers (the
 * hk_attn_kv_cache struct itself lives on the host, its k/v/block_table members on the device).
 * Requirements: head_dim 64 or 128; base pointers 16-byte aligned; strides multiples of 8
 * elements. `stream` is a cudaStream_t (NULL = legacy default stream). Launches are
 * asynchronous; the return code reports argument errors and launch errors only. */
#ifndef HK_ATTENTION_CUDA_H
#define HK_ATTENTION_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "hk_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* max_seqlen_q: the largest cu_seqlens_q[b+1]-cu_seqlens_q[b] (sizes the grid);
 * total_q: cu_seqlens_q[batch] (the LSE row stride); total_k: the number of rows of k and v
 * (at least cu_seqlens_k[batch]; the Hopper kernel's copies never read past it).
 * On a compute capability 9.0 GPU the sm_90a kernel (TMA + wgmma) runs; elsewhere, or in a test
 * build (-DHK_TEST_HOOKS) with HK_ATTN_PREFILL_IMPL=portable in the environment, the mma.sync
 * kernel. */
int hk_attn_prefill_cuda(void *out, float *lse, const void *q, const void *k, const void *v,
                         const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k, int batch,
                         int max_seqlen_q, int total_q, int total_k, int num_heads_q, int num_heads_kv,
                         int head_dim, hk_attn_dtype dtype, int causal, float softmax_scale,
                         void *stream);

/* Which kernel a call would run on the current device, for logs and benchmarks:
 * prefill "sm90a" or "portable"; decode "contiguous", "paged" (cp.async) or "paged-tma",
 * "contiguous-tma" (test builds with HK_ATTN_DECODE_TMA=all). */
const char *hk_attn_prefill_cuda_kernel(void);
const char *hk_attn_decode_cuda_kernel(const hk_attn_kv_cache *kv, int batch, int num_heads_kv,
                                       int head_dim, int max_seqlen_k);

/* Split-KV heuristic: how many splits along the sequence a decode of this shape uses.
 * paged: 0 for a contiguous cache, else the page size in tokens (1 = paged, size unknown: the
 * most splits any paged cache gets, which also sizes a workspace that fits every call). */
int hk_attn_decode_cuda_num_splits(int batch, int q_len, int num_heads_q, int num_heads_kv,
                                   int head_dim, int max_seqlen_k, int paged);
/* Scratch bytes a decode with num_splits > 1 needs (0 for num_splits <= 1). The workspace holds
 * the splits' partial results and per-group arrival counters: it must be ZERO-FILLED before its
 * first use; every completed call leaves the counters at zero again, so one workspace can be
 * reused by later calls on the same stream (not by concurrent calls). */
size_t hk_attn_decode_cuda_workspace_size(int batch, int q_len, int num_heads_q, int head_dim,
                                          int num_splits);
/* max_seqlen_k: an upper bound of seqlens_k (sizes the split grid).
 * num_splits: 0 = heuristic above; 1 = no combine step. With num_splits > 1 and a workspace
 * that holds the balanced plan's partials (the heuristic sizes it so; fewer than 3 (sequence,
 * kv head) pairs per SM), the kernel plans the splits itself from seqlens_k: every CTA gets the
 * same number of key tiles of the whole batch, whatever the lengths (ragged batches); otherwise
 * num_splits equal splits of max_seqlen_k. workspace: device scratch of at least
 * hk_attn_decode_cuda_workspace_size(...) bytes (may be NULL when 1 split). */
int hk_attn_decode_cuda(void *out, float *lse, const void *q, const hk_attn_kv_cache *kv,
                        const int32_t *seqlens_k, int batch, int q_len, int num_heads_q,
                        int num_heads_kv, int head_dim, int max_seqlen_k, hk_attn_dtype dtype,
                        float softmax_scale, int num_splits, void *workspace,
                        size_t workspace_bytes, void *stream);

/* Decode over an FP8 (e4m3fn) cache (hk_attention.h: layout, scales, semantics): the arguments of
 * hk_attn_decode_cuda, with kv an FP8 cache whose k/v, block_table, k_scale and v_scale are device
 * pointers (the struct itself on the host). Strides must be multiples of 16 elements (bytes).
 * The split heuristic and the workspace are those of the 16-bit decode
 * (hk_attn_decode_cuda_num_splits, hk_attn_decode_cuda_workspace_size: the partials are float32
 * either way), and so is the kernel choice (TMA boxes for paged caches on sm_90a). */
int hk_attn_decode_fp8_cuda(void *out, float *lse, const void *q, const hk_attn_kv_cache_fp8 *kv,
                            const int32_t *seqlens_k, int batch, int q_len, int num_heads_q,
                            int num_heads_kv, int head_dim, int max_seqlen_k, hk_attn_dtype dtype,
                            float softmax_scale, int num_splits, void *workspace,
                            size_t workspace_bytes, void *stream);
/* Which kernel hk_attn_decode_fp8_cuda would run: the names of hk_attn_decode_cuda_kernel. */
const char *hk_attn_decode_fp8_cuda_kernel(const hk_attn_kv_cache_fp8 *kv, int batch, int num_heads_kv,
                                           int head_dim, int max_seqlen_k);

#ifdef __cplusplus
}
#endif
#endif
