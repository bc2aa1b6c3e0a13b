/* The Hopper (sm_90a) prefill, used by hk_attn_prefill_cuda when it applies. Internal to the
 * attention kernels: arguments are those of hk_attn_prefill_cuda, already validated. */
#ifndef HK_ATTN_PREFILL_SM90_H
#define HK_ATTN_PREFILL_SM90_H

#include <stdint.h>

#include "hk_attention.h"

/* Returned when the Hopper kernel cannot run here (the current GPU is not compute capability
 * 9.0, or the driver has no tensor-map encoder); the caller then uses the portable kernel. */
#define HK_ATTN_SM90_NOT_APPLICABLE 1

/* 1 when hk_attn_prefill_sm90 would run its kernel on the current device, else 0. */
int hk_attn_prefill_sm90_applicable(void);

int hk_attn_prefill_sm90(void *out, float *lse, const void *q, const void *k, const void *v,
                         const int32_t *cu_seqlens_q, const int32_t *cu_seqlens_k, int batch,
                         int max_seqlen_q, int total_q, int total_k, int num_heads_q,
                         int num_heads_kv, int head_dim, hk_attn_dtype dtype, int causal,
                         float softmax_scale, void *stream);

#endif
