// The split-KV decode's shared parts: its kernel parameters, how a CTA fetches K/V, and the
// internal entry points between the C API (attention_cuda.cu), the cache's parameters and TMA
// descriptors (decode_cache.cu) and the kernels (decode_kernel.cu).
#ifndef HK_ATTN_DECODE_CUH
#define HK_ATTN_DECODE_CUH

#include <cuda.h>  // CUtensorMap (type only)
#include <cuda_runtime.h>
#include <stdint.h>

#include "hk_attention.h"

struct DecodeParams {
    CUtensorMap tm_k, tm_v;  // the TMA path (sm_90a): the cache as [blocks][tokens][Hkv][D/64][64]
    int box_rows;            // tokens per TMA box: min(block_size, 64)
    int tma_contig;          // TMA over a contiguous cache: "block" = sequence, token = key
    void *out;
    float *lse;
    const void *q;
    const void *kc, *vc;
    int64_t stride_block, stride_token, stride_head;
    const int32_t *block_table;
    int block_size, bs_shift, max_blocks;  // bs_shift = log2(block_size), or -1
    const int32_t *seqlens;
    int batch, q_len, hq, hkv, group, rows, nchunks, split_keys, nsplits;
    float scale, scale_log2;
    float *ws_o, *ws_lse;  // [nsplits][batch][q_len][hq]([D])
    int *counters;         // [batch][hkv][nchunks] arrivals per CTA group (zero between calls)
    // the balanced plan (decode_plan.cuh): grid of ctas CTAs; a uniform batch with at most
    // ctas_aligned pairs runs one CTA per pair; partial slots of rows_chunk rows; seg_tiles: a
    // pair's fixed cost (its setup, pipeline fill and epilogue) in key tiles, -1 for DecodeTile's
    int balanced, ctas, ctas_aligned, rows_chunk, seg_tiles;
    // FP8 caches (kv_fp8 = 1; kc/vc hold e4m3fn codes, strides in bytes): the scales, device
    // pointers, [1] or [hkv] (scale_per_head)
    int kv_fp8, scale_per_head;
    const float *k_scale, *v_scale;
};

// How a decode CTA fetches K/V tiles: cp.async from a contiguous cache, cp.async through the
// block table, or (sm_90a) TMA boxes of whole pages issued by one thread.
enum KvMode { kContiguous = 0, kPaged = 1, kPagedTma = 2 };

// Fills the cache's part of p: pointers, strides, block table, page size and its log2 (-1 when
// not a power of two).
void hk_attn_decode_set_cache(DecodeParams &p, const hk_attn_kv_cache *kv);
// The same for an FP8 cache (kv_fp8 and the scales too).
void hk_attn_decode_set_cache_fp8(DecodeParams &p, const hk_attn_kv_cache_fp8 *kv);
// Whether paged caches with this page size go through the TMA on this device.
bool hk_attn_paged_tma_possible(int block_size);
// Encodes p's TMA descriptors (p.batch, the cache and its strides set) when the TMA path applies
// to this cache here; false means the cp.async path.
bool hk_attn_decode_tma_maps(DecodeParams &p, int hkv, int d, int max_seqlen_k);
// Launches the decode kernel for p (every field set), mt 16-row MMA tiles per CTA (1 or 2), kv
// a KvMode; 16-bit caches (decode_kernel.cu) or, with p.kv_fp8, e4m3 ones (decode_fp8.cu).
// HK_ATTN_OK or HK_ATTN_ECUDA.
int hk_attn_decode_launch(const DecodeParams &p, bool bf16, int d, int mt, int kv, cudaStream_t st);
int hk_attn_decode_fp8_launch(const DecodeParams &p, bool bf16, int d, int mt, int kv, cudaStream_t st);

#endif
