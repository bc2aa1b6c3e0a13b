// The prefill's parameters (host side): built once by hk_attn_prefill_cuda (attention_cuda.cu)
// from its arguments, after their checks, and handed to the launcher that applies, the Hopper
// one (prefill_sm90.cu) or else the portable one (prefill_sm80.cu). Each launcher copies what its
// kernel reads into that kernel's own parameter struct (Sm90Params, Sm80Params), whose layout is
// the kernel's ABI: growing this struct moves no kernel-parameter offset.
#ifndef HK_ATTN_PREFILL_PARAMS_H
#define HK_ATTN_PREFILL_PARAMS_H

#include <stdint.h>

#include "hk_attention.h"

struct AttnPrefillParams {
    void *out;
    float *lse;  // NULL: no LSE
    const void *q, *k, *v;
    const int32_t *cu_q, *cu_k;  // cu_seqlens_q / cu_seqlens_k, [batch + 1]
    int batch, max_seqlen_q, total_q, total_k;
    int hq, hkv, group;  // group = hq / hkv
    int d;               // head dim: 64 or 128
    hk_attn_dtype dtype;
    bool causal;
    float scale, scale_log2;  // softmax scale, and times log2(e) for exp2
};

#endif
