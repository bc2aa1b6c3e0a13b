// Tuning knobs of the attention launchers. The shipped build (no HK_TEST_HOOKS) has each knob at
// its measured default and reads no environment variable; a build with -DHK_TEST_HOOKS (the GPU
// tests and the benchmarks, through tests/hk_attention_ctypes.py) reads them once per process:
//   HK_ATTN_PREFILL_CFG=<n>       portable D=128 prefill tile configuration (prefill_sm80.cu)
//   HK_ATTN_PREFILL_IMPL=portable the mma.sync prefill also on sm_90 (the fallback's tests)
//   HK_ATTN_PREFILL_SM90_CTA=128|64|64x2  the sm_90a prefill's CTA shape (default: picked)
//   HK_ATTN_PREFILL_SM90_PERSIST=0|1      the sm_90a prefill's CTAs one a tile or persistent (default: picked)
//   HK_ATTN_DECODE_TMA=0|all      paged decode on cp.async / contiguous caches through the TMA too
//   HK_ATTN_DECODE_PLAN=uniform   decode splits of max_seqlen_k instead of the balanced plan
//   HK_ATTN_DECODE_CPS=1|2        CTAs per SM of the balanced plan's grid
//   HK_ATTN_DECODE_SEG_COST=<n>   the balanced plan's fixed cost of a pair, in key tiles
#ifndef HK_ATTN_KNOBS_H
#define HK_ATTN_KNOBS_H

#ifdef HK_TEST_HOOKS
#include <stdlib.h>
#include <string.h>
#endif

// -1: the default tile configuration of each head dim.
inline int hk_attn_knob_prefill_cfg() {
#ifdef HK_TEST_HOOKS
    static const int cfg = [] {
        const char *e = getenv("HK_ATTN_PREFILL_CFG");
        return e ? atoi(e) : -1;
    }();
    return cfg;
#else
    return -1;
#endif
}

// 1: the sm_90a prefill runs where it can; 0: the portable kernel everywhere.
inline int hk_attn_knob_prefill_sm90() {
#ifdef HK_TEST_HOOKS
    static const int on = [] {
        const char *e = getenv("HK_ATTN_PREFILL_IMPL");
        return e && strcmp(e, "portable") == 0 ? 0 : 1;
    }();
    return on;
#else
    return 1;
#endif
}

// The sm_90a prefill's CTA shape: 0 picks (prefill_sm90.cu, sm90_cta_for); test builds force one
// with HK_ATTN_PREFILL_SM90_CTA=128 (two consumer warpgroups), 64 (one, one CTA a SM) or 64x2 (one,
// two CTAs a SM). Read at every call.
inline int hk_attn_knob_prefill_sm90_cta() {
#ifdef HK_TEST_HOOKS
    const char *e = getenv("HK_ATTN_PREFILL_SM90_CTA");
    if (!e) return 0;
    return strcmp(e, "128") == 0 ? 1 : strcmp(e, "64") == 0 ? 2 : strcmp(e, "64x2") == 0 ? 3 : 0;
#else
    return 0;
#endif
}

// -1: picked (prefill_sm90.cu, sm90_persist_for); test builds force one CTA a tile with
// HK_ATTN_PREFILL_SM90_PERSIST=0 or persistent CTAs with =1. Read at every call.
inline int hk_attn_knob_prefill_sm90_persist() {
#ifdef HK_TEST_HOOKS
    const char *e = getenv("HK_ATTN_PREFILL_SM90_PERSIST");
    return e && (e[0] == '0' || e[0] == '1') && !e[1] ? e[0] - '0' : -1;
#else
    return -1;
#endif
}

// 0: no TMA in the decode; 1: paged caches through the TMA (the default); 2: contiguous too.
inline int hk_attn_knob_decode_tma() {
#ifdef HK_TEST_HOOKS
    static const int v = [] {
        const char *e = getenv("HK_ATTN_DECODE_TMA");
        return e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "all") == 0 ? 2 : 1;
    }();
    return v;
#else
    return 1;
#endif
}

// 1: the decode's balanced plan (decode_plan.cuh) where the workspace allows it; 0: uniform
// splits of max_seqlen_k (HK_ATTN_DECODE_PLAN=uniform). Read at every call in test builds, so a
// benchmark can compare both plans in one process.
inline int hk_attn_knob_decode_balanced() {
#ifdef HK_TEST_HOOKS
    const char *e = getenv("HK_ATTN_DECODE_PLAN");
    return e && strcmp(e, "uniform") == 0 ? 0 : 1;
#else
    return 1;
#endif
}

// CTAs per SM of the balanced plan's grid (HK_ATTN_DECODE_CPS=1|2); 0: the default (picked from
// the batch's pairs per SM). Read at every call in test builds.
inline int hk_attn_knob_decode_cps() {
#ifdef HK_TEST_HOOKS
    const char *e = getenv("HK_ATTN_DECODE_CPS");
    const int v = e ? atoi(e) : 0;
    return v >= 1 && v <= 2 ? v : 0;
#else
    return 0;
#endif
}

// The balanced plan's fixed cost of a (sequence, kv head) pair in key tiles
// (HK_ATTN_DECODE_SEG_COST=0..64); -1: the default. Read at every call in test builds.
inline int hk_attn_knob_decode_seg_cost() {
#ifdef HK_TEST_HOOKS
    const char *e = getenv("HK_ATTN_DECODE_SEG_COST");
    const int v = e && *e ? atoi(e) : -1;
    return v >= 0 && v <= 64 ? v : -1;
#else
    return -1;
#endif
}

#endif
