/* The Hopper (sm_90a) prefill, used by hk_attn_prefill_cuda when it applies. Internal to the
 * attention kernels: p is built and its arguments checked by hk_attn_prefill_cuda. */
#ifndef HK_ATTN_PREFILL_SM90_H
#define HK_ATTN_PREFILL_SM90_H

#include "prefill_params.h"

/* Returned when the Hopper kernel cannot run here (the current GPU is not compute capability
 * 9.0, or the driver has no tensor-map encoder); the caller then uses the portable kernel. */
#define HK_ATTN_SM90_NOT_APPLICABLE 1

/* 1 when hk_attn_prefill_sm90 would run its kernel on the current device, else 0. */
int hk_attn_prefill_sm90_applicable(void);

int hk_attn_prefill_sm90(const AttnPrefillParams &p, void *stream);

#endif
