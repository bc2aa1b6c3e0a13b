/* The portable (sm_80+) prefill: FlashAttention-2 style with mma.sync, used by hk_attn_prefill_cuda
 * where the Hopper kernel does not apply. Internal to the attention kernels: arguments are those
 * of hk_attn_prefill_cuda, already validated (batch and max_seqlen_q > 0). */
#ifndef HK_ATTN_PREFILL_SM80_H
#define HK_ATTN_PREFILL_SM80_H

#include <stdint.h>

#include "hk_attention.h"

int hk_attn_prefill_sm80(void *out, float *lse, const void *q, const void *k, const void *v,
                         const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k, int batch,
                         int max_seqlen_q, int total_q, int num_heads_q, int num_heads_kv,
                         int head_dim, hk_attn_dtype dtype, int causal, float softmax_scale,
                         void *stream);

#endif
