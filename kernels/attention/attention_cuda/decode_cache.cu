// The cache's part of the decode parameters: pointers, strides and page size, and, for the TMA
// path (sm_90a), the tensor-map descriptors of K and V.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "attn_knobs.h"
#include "decode.cuh"
#include "tensor_map.cuh"

void hk_attn_decode_set_cache(DecodeParams &p, const hk_attn_kv_cache *kv) {
    p.kc = kv->k, p.vc = kv->v;
    p.stride_block = kv->stride_block, p.stride_token = kv->stride_token, p.stride_head = kv->stride_head;
    p.block_table = kv->block_table, p.block_size = kv->block_size, p.max_blocks = kv->max_blocks_per_seq;
    p.bs_shift = -1;
    for (int sh = 0; sh < 31; sh++)
        if (kv->block_size == (1 << sh)) p.bs_shift = sh;
    p.kv_fp8 = 0;
}

void hk_attn_decode_set_cache_fp8(DecodeParams &p, const hk_attn_kv_cache_fp8 *kv) {
    hk_attn_kv_cache c{};
    c.stride_block = kv->stride_block, c.stride_token = kv->stride_token, c.stride_head = kv->stride_head;
    c.block_table = kv->block_table, c.block_size = kv->block_size, c.max_blocks_per_seq = kv->max_blocks_per_seq;
    hk_attn_decode_set_cache(p, &c);
    p.kc = kv->k, p.vc = kv->v;
    p.kv_fp8 = 1, p.scale_per_head = kv->scale_per_head, p.k_scale = kv->k_scale, p.v_scale = kv->v_scale;
}

// Paged caches go through the TMA on sm_90a when the pages are powers of two from 16 to 256
// tokens and the encoder accepts the layout; test builds keep them on cp.async with
// HK_ATTN_DECODE_TMA=0, or send contiguous caches through the TMA too with
// HK_ATTN_DECODE_TMA=all (attn_knobs.h).
bool hk_attn_paged_tma_possible(int block_size) {
    return hk_attn_knob_decode_tma() >= 1 && block_size >= 16 && block_size <= 256 &&
           (block_size & (block_size - 1)) == 0 && hk_tma::is_sm90_device();
}

bool hk_attn_decode_tma_maps(DecodeParams &p, int hkv, int d, int max_seqlen_k) {
    const bool paged = p.block_table != nullptr;
    if (paged ? !hk_attn_paged_tma_possible(p.block_size) : hk_attn_knob_decode_tma() < 2 || !hk_tma::is_sm90_device())
        return false;
    // paged: [blocks][block_size][Hkv][D] by the cache's own strides (the block count is not
    // known here: the outer extent is the most blocks a 47-bit address space can hold, at most
    // the largest id an int32 table holds); contiguous: [batch][max_seqlen_k][Hkv][D], likewise
    const cuuint64_t tokens = paged ? p.block_size : (max_seqlen_k > 0 ? max_seqlen_k : 1);
    const cuuint64_t eb = p.kv_fp8 ? 1 : 2;  // bytes per element
    const cuuint64_t max_blocks = (1ull << 47) / ((cuuint64_t)p.stride_block * eb + 1);
    const cuuint64_t outer = !paged ? (cuuint64_t)p.batch : max_blocks < INT32_MAX ? max_blocks : INT32_MAX;
    p.box_rows = paged && p.block_size < 64 ? p.block_size : 64;
    p.tma_contig = !paged;
    if (p.kv_fp8) {
        // e4m3 rows of D bytes, one box of whole rows under the 128-byte (D = 128) or 64-byte
        // (D = 64) swizzle, whose pattern the cp.async path reproduces (decode_fp8.cuh)
        const cuuint64_t dims[5] = {(cuuint64_t)d, 1, (cuuint64_t)hkv, tokens, outer};
        const cuuint64_t strides[4] = {(cuuint64_t)d, (cuuint64_t)p.stride_head, (cuuint64_t)p.stride_token,
                                       (cuuint64_t)p.stride_block};
        const cuuint32_t box[5] = {(cuuint32_t)d, 1, 1, (cuuint32_t)p.box_rows, 1};
        const CUtensorMapSwizzle sw = d == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
        return hk_tma::map_tiled(&p.tm_k, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.kc, 5, dims, strides, box, sw,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_128B) &&
               hk_tma::map_tiled(&p.tm_v, CU_TENSOR_MAP_DATA_TYPE_UINT8, p.vc, 5, dims, strides, box, sw,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    }
    // a row's D elements as [D/64][64] so that one box carries whole 256-byte rows under the
    // 128-byte swizzle (boxes of 128-byte half rows ran ~8% slower, NOTES.md v7)
    const cuuint64_t dims[5] = {64, (cuuint64_t)d / 64, (cuuint64_t)hkv, tokens, outer};
    const cuuint64_t strides[4] = {128, (cuuint64_t)p.stride_head * 2, (cuuint64_t)p.stride_token * 2,
                                   (cuuint64_t)p.stride_block * 2};
    const cuuint32_t box[5] = {64, (cuuint32_t)d / 64, 1, (cuuint32_t)p.box_rows, 1};
    // L2 promotion 128 B, not 256: with 256 the L2 served ~17% more sectors than the data
    // (ncu: 117 M vs 101 M for the same 2.1 GB read from DRAM) and the kernel ran 7-9% slower
    // (NOTES.md v10)
    return hk_tma::map_16bit(&p.tm_k, p.kc, 5, dims, strides, box, CU_TENSOR_MAP_L2_PROMOTION_L2_128B) &&
           hk_tma::map_16bit(&p.tm_v, p.vc, 5, dims, strides, box, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
}

