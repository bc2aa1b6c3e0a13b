// hubkern reference attention for NVIDIA GPUs (sm_80+; tuned on H200 / sm_90): the C API of
// hk_attention_cuda.h. Checks the arguments, picks the kernel and plans the decode's splits; the
// kernels live in prefill_sm90.cu (Hopper prefill), prefill_sm80.cu (portable prefill),
// decode_kernel.cuh (split-KV decode with a fused combine; instantiated for 16-bit caches in
// decode_kernel.cu and for FP8 ones in decode_fp8.cu) and decode_cache.cu (the cache's
// parameters and TMA descriptors). The prefill's parameters are built once, here, into one
// AttnPrefillParams (prefill_params.h) for whichever launcher runs. Test builds (-DHK_TEST_HOOKS)
// read the tuning knobs of attn_knobs.h from the environment; the shipped build reads none.
#include <atomic>

#include <cuda_runtime.h>
#include <stdint.h>

#include "attn_device.cuh"
#include "attn_knobs.h"
#include "decode.cuh"
#include "hk_attention_cuda.h"
#include "prefill_sm80.h"
#include "prefill_sm90.h"

namespace {

bool aligned16(const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// 16 query rows per MMA tile; 2 tiles at most per CTA (more would spill the O accumulator):
// larger groups x q_len are split into several row chunks, each re-reading the kv head.
int decode_mt_for(int rows) { return rows <= 16 ? 1 : 2; }

// The current device's multiprocessor count, queried once per device (the split heuristic runs
// on every decode call). When the query fails there is no usable device and the launch that
// follows fails as well; 1 then plans a single split, which needs no workspace.
int sm_count_cached() {
    constexpr int kMaxDevices = 64;
    static std::atomic<int> cache[kMaxDevices];  // 0: not queried yet
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 1;
    if (dev >= 0 && dev < kMaxDevices && (n = cache[dev].load(std::memory_order_relaxed)) > 0) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) return 1;
    if (dev >= 0 && dev < kMaxDevices) cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

// The workspace: the arrival counters first (at the same place in both plans, so that calls
// with either plan can share one workspace), then the partial O rows, then their LSEs.
size_t counter_bytes(int batch, int q_len, int hq) { return (((size_t)batch * q_len * hq * 4) + 15) & ~(size_t)15; }

// The balanced plan's grid (decode_plan.cuh): one CTA per SM while the batch has at most one
// pair per SM, two from more pairs on. Two CTAs an SM hide one CTA's segment change behind the
// other's streaming: with more pairs than SMs every CTA of a one-per-SM grid changes segment at
// least once (results/v12c_ragged.txt, v19s/ragged_s.txt: +7-13 points of copy on those rows);
// with fewer, a grid of one per SM gives each pair about one CTA and no change, and two per SM
// only cut pairs in more segments (uniform 8k on 16-token pages: 81 vs 88 % of copy). The
// workspace is sized for two (HK_ATTN_DECODE_CPS=1|2 in test builds forces either).
constexpr int kBalancedCtasPerSmMax = 2;
int balanced_ctas_per_sm(long pairs, int sms) { return pairs > sms ? 2 : 1; }
// From this many pairs per SM on, one CTA per pair in hardware-scheduled waves (the uniform plan
// with one split) measured better than the balanced plan (B64 x 8 heads: 0.94-1.0x, B128 x 8:
// 0.93x; results/v12b_ragged.txt).
constexpr int kBalancedMaxPairsPerSm = 3;

// Row chunks of a kv head, and the rows of a chunk's partial slot.
int decode_nchunks(int rows) { return (rows + 16 * decode_mt_for(rows) - 1) / (16 * decode_mt_for(rows)); }
int decode_rows_chunk(int rows) { return rows < 16 * decode_mt_for(rows) ? rows : 16 * decode_mt_for(rows); }

// Partial rows the balanced plan needs with g CTAs: one slot per segment, at most g + pairs.
size_t balanced_rows(int batch, int hkv, int rows, int g) {
    return ((size_t)g + (size_t)batch * hkv * decode_nchunks(rows)) * decode_rows_chunk(rows);
}

}  // namespace

extern "C" int hk_attn_prefill_cuda(void *out, float *lse, const void *q, const void *k,
                                    const void *v, const int32_t *cu_q, const int32_t *cu_k,
                                    int batch, int max_seqlen_q, int total_q, int total_k,
                                    int hq, int hkv, int d, hk_attn_dtype dtype, int causal,
                                    float scale, void *stream) {
    if (!out || !q || !k || !v || !cu_q || !cu_k || batch < 0 || max_seqlen_q < 0 || total_q < 0 ||
        total_k < 0)
        return HK_ATTN_EINVAL;
    if (hq <= 0 || hkv <= 0 || hq % hkv || (d != 64 && d != 128)) return HK_ATTN_EINVAL;
    if (dtype != HK_ATTN_BF16 && dtype != HK_ATTN_FP16) return HK_ATTN_EINVAL;
    if (!aligned16(out) || !aligned16(q) || !aligned16(k) || !aligned16(v)) return HK_ATTN_EINVAL;
    if (batch == 0 || max_seqlen_q == 0) return HK_ATTN_OK;
    AttnPrefillParams p{};
    p.out = out, p.lse = lse, p.q = q, p.k = k, p.v = v, p.cu_q = cu_q, p.cu_k = cu_k;
    p.batch = batch, p.max_seqlen_q = max_seqlen_q, p.total_q = total_q, p.total_k = total_k;
    p.hq = hq, p.hkv = hkv, p.group = hq / hkv, p.d = d, p.dtype = dtype, p.causal = causal != 0;
    p.scale = scale, p.scale_log2 = scale * hk_attn_dev::kLog2e;
    const int rc = hk_attn_prefill_sm90(p, stream);
    if (rc != HK_ATTN_SM90_NOT_APPLICABLE) return rc;
    return hk_attn_prefill_sm80(p, stream);
}

extern "C" const char *hk_attn_prefill_cuda_kernel(void) {
    return hk_attn_prefill_sm90_applicable() ? "sm90a" : "portable";
}

extern "C" const char *hk_attn_decode_cuda_kernel(const hk_attn_kv_cache *kv, int batch, int hkv,
                                                  int d, int max_seqlen_k) {
    if (!kv) return "invalid";
    DecodeParams p{};
    hk_attn_decode_set_cache(p, kv);
    p.batch = batch;
    if (hk_attn_decode_tma_maps(p, hkv, d, max_seqlen_k)) return kv->block_table ? "paged-tma" : "contiguous-tma";
    return kv->block_table ? "paged" : "contiguous";
}

extern "C" int hk_attn_decode_cuda_num_splits(int batch, int q_len, int hq, int hkv, int d,
                                              int max_seqlen_k, int paged) {
    if (batch <= 0 || hkv <= 0 || q_len <= 0 || max_seqlen_k <= 0) return 1;
    const int rows = (hq / hkv) * q_len;
    const long base = (long)batch * hkv * decode_nchunks(rows);
    const int bn = 64, tiles = (max_seqlen_k + bn - 1) / bn;
    // One wave. Contiguous caches, and paged ones read through the TMA, stream well with one CTA
    // per SM; paged caches on the cp.async path (a head's rows 2 KB apart, addresses computed by
    // every thread) need both resident CTA slots of an SM busy. Measured on the H200 (NOTES.md
    // v2/v3/v10): more waves or splits cost more than they gain. At least 4 key tiles (256
    // keys) per split.
    const bool paged_cp_async = paged && !(paged > 1 && hk_attn_paged_tma_possible(paged));
    long splits = ((paged_cp_async ? 2L : 1L) * sm_count_cached()) / base;
    if (splits < 1) splits = 1;
    if (splits > tiles / 4) splits = tiles / 4 > 0 ? tiles / 4 : 1;
    if (splits > 256) splits = 256;
    // The balanced plan (any batch with more than one key tile) needs room for a partial per
    // segment: at most (its grid + pairs) slots; num_splits sizes the workspace in rows of
    // batch * q_len * hq (ragged batches cannot be told from max_seqlen_k alone)
    if (tiles >= 2 && base < (long)kBalancedMaxPairsPerSm * sm_count_cached()) {
        const size_t need = balanced_rows(batch, hkv, rows, kBalancedCtasPerSmMax * sm_count_cached());
        const size_t per = (size_t)batch * q_len * hq;
        const long bal = (long)((need + per - 1) / per);
        if (bal > splits) splits = bal;
    }
    return (int)splits;
}

extern "C" size_t hk_attn_decode_cuda_workspace_size(int batch, int q_len, int hq, int d,
                                                     int num_splits) {
    if (num_splits <= 1) return 0;
    const size_t rows = (size_t)num_splits * batch * q_len * hq;
    return counter_bytes(batch, q_len, hq) + rows * (size_t)d * 4 + rows * 4;  // counters, O, LSE
}

namespace {

// The checks and the launch shared by the 16-bit and FP8 decodes; p holds the cache's part.
int decode_run(DecodeParams &p, void *out, float *lse, const void *q, const int32_t *seqlens_k,
               int batch, int q_len, int hq, int hkv, int d, int max_seqlen_k, hk_attn_dtype dtype,
               float scale, int num_splits, void *workspace, size_t workspace_bytes, void *stream) {
    if (!out || !q || !p.kc || !p.vc || !seqlens_k || batch < 0 || max_seqlen_k < 0)
        return HK_ATTN_EINVAL;
    if (q_len < 1 || q_len > 8 || hq <= 0 || hkv <= 0 || hq % hkv || (d != 64 && d != 128))
        return HK_ATTN_EINVAL;
    if (dtype != HK_ATTN_BF16 && dtype != HK_ATTN_FP16) return HK_ATTN_EINVAL;
    if (!aligned16(out) || !aligned16(q) || !aligned16(p.kc) || !aligned16(p.vc))
        return HK_ATTN_EINVAL;
    // 16-byte copies: strides of 8 16-bit elements, or 16 FP8 ones
    if ((p.stride_block | p.stride_token | p.stride_head) & (p.kv_fp8 ? 15 : 7)) return HK_ATTN_EINVAL;
    if (p.block_table && (p.block_size <= 0 || p.max_blocks <= 0)) return HK_ATTN_EINVAL;
    if (batch == 0) return HK_ATTN_OK;
    if (num_splits <= 0)
        num_splits = hk_attn_decode_cuda_num_splits(batch, q_len, hq, hkv, d, max_seqlen_k,
                                                    p.block_table ? p.block_size : 0);
    const int bn = 64, tiles = (max_seqlen_k + bn - 1) / bn;
    const int group = hq / hkv, rows = group * q_len, mt = decode_mt_for(rows);
    p.batch = batch;
    const int mode = hk_attn_decode_tma_maps(p, hkv, d, max_seqlen_k) ? kPagedTma : p.block_table ? kPaged : kContiguous;
    // The balanced plan when splits are allowed and the workspace holds its partials; else
    // uniform splits of max_seqlen_k
    const int sms = sm_count_cached(), cps = hk_attn_knob_decode_cps();
    const long pairs = (long)batch * hkv * decode_nchunks(rows);
    const int ctas = sms * (cps ? cps : balanced_ctas_per_sm(pairs, sms));
    const size_t cbytes = counter_bytes(batch, q_len, hq);
    const size_t bal_rows = balanced_rows(batch, hkv, rows, ctas);
    p.balanced = num_splits > 1 && tiles >= 1 && hk_attn_knob_decode_balanced() && workspace &&
                 (pairs < (long)kBalancedMaxPairsPerSm * sms || cps) &&
                 aligned16(workspace) && workspace_bytes >= cbytes + bal_rows * (size_t)(d + 1) * 4;
    if (p.balanced) {
        // a uniform batch that fits one CTA per pair in the one wave the uniform plan gives it
        // (NOTES.md v3/v10: one per SM for contiguous and TMA caches, two for cp.async pages)
        p.ctas = ctas, p.ctas_aligned = sms * (mode == kPaged ? 2 : 1);
        p.rows_chunk = decode_rows_chunk(rows);
        p.seg_tiles = hk_attn_knob_decode_seg_cost();  // -1: the tile's default (decode_tile.cuh)
    }
    if (num_splits > tiles) num_splits = tiles > 0 ? tiles : 1;
    const int split_keys = ((tiles + num_splits - 1) / num_splits) * bn;
    num_splits = tiles > 0 ? (tiles * bn + split_keys - 1) / split_keys : 1;
    if (!p.balanced && num_splits > 1 &&
        (!workspace || workspace_bytes < hk_attn_decode_cuda_workspace_size(batch, q_len, hq, d, num_splits) ||
         !aligned16(workspace)))
        return HK_ATTN_EINVAL;
    p.out = out, p.lse = lse, p.q = q;
    p.seqlens = seqlens_k, p.batch = batch, p.q_len = q_len, p.hq = hq, p.hkv = hkv, p.group = group;
    p.rows = rows, p.nchunks = (rows + 16 * mt - 1) / (16 * mt);
    p.split_keys = split_keys, p.nsplits = num_splits, p.scale = scale, p.scale_log2 = scale * hk_attn_dev::kLog2e;
    const size_t nr = p.balanced ? bal_rows : (size_t)num_splits * batch * q_len * hq;
    p.counters = static_cast<int *>(workspace);
    p.ws_o = workspace ? reinterpret_cast<float *>(static_cast<char *>(workspace) + cbytes) : nullptr;
    p.ws_lse = workspace ? p.ws_o + nr * d : nullptr;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    return p.kv_fp8 ? hk_attn_decode_fp8_launch(p, dtype == HK_ATTN_BF16, d, mt, mode, st)
                    : hk_attn_decode_launch(p, dtype == HK_ATTN_BF16, d, mt, mode, st);
}

}  // namespace

extern "C" int hk_attn_decode_cuda(void *out, float *lse, const void *q, const hk_attn_kv_cache *kv,
                                   const int32_t *seqlens_k, int batch, int q_len, int hq, int hkv,
                                   int d, int max_seqlen_k, hk_attn_dtype dtype, float scale,
                                   int num_splits, void *workspace, size_t workspace_bytes,
                                   void *stream) {
    if (!kv) return HK_ATTN_EINVAL;
    DecodeParams p{};
    hk_attn_decode_set_cache(p, kv);
    return decode_run(p, out, lse, q, seqlens_k, batch, q_len, hq, hkv, d, max_seqlen_k, dtype, scale,
                      num_splits, workspace, workspace_bytes, stream);
}

extern "C" int hk_attn_decode_fp8_cuda(void *out, float *lse, const void *q,
                                       const hk_attn_kv_cache_fp8 *kv, const int32_t *seqlens_k,
                                       int batch, int q_len, int hq, int hkv, int d, int max_seqlen_k,
                                       hk_attn_dtype dtype, float scale, int num_splits,
                                       void *workspace, size_t workspace_bytes, void *stream) {
    if (!kv || !kv->k_scale || !kv->v_scale || (kv->scale_per_head != 0 && kv->scale_per_head != 1))
        return HK_ATTN_EINVAL;
    DecodeParams p{};
    hk_attn_decode_set_cache_fp8(p, kv);
    return decode_run(p, out, lse, q, seqlens_k, batch, q_len, hq, hkv, d, max_seqlen_k, dtype, scale,
                      num_splits, workspace, workspace_bytes, stream);
}

extern "C" const char *hk_attn_decode_fp8_cuda_kernel(const hk_attn_kv_cache_fp8 *kv, int batch, int hkv,
                                                      int d, int max_seqlen_k) {
    if (!kv) return "invalid";
    DecodeParams p{};
    hk_attn_decode_set_cache_fp8(p, kv);
    p.batch = batch;
    if (hk_attn_decode_tma_maps(p, hkv, d, max_seqlen_k)) return kv->block_table ? "paged-tma" : "contiguous-tma";
    return kv->block_table ? "paged" : "contiguous";
}
