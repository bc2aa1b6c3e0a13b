/* The portable (sm_80+) prefill: FlashAttention-2 style with mma.sync, used by hk_attn_prefill_cuda
 * where the Hopper kernel does not apply. Internal to the attention kernels: p is built and its
 * arguments checked by hk_attn_prefill_cuda (batch and max_seqlen_q > 0). */
#ifndef HK_ATTN_PREFILL_SM80_H
#define HK_ATTN_PREFILL_SM80_H

#include "prefill_params.h"

int hk_attn_prefill_sm80(const AttnPrefillParams &p, void *stream);

#endif
