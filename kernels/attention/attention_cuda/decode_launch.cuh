// The decode's host side: run-time values (element types, head dim, MMA tiles, how K/V are
// fetched) to the kernel's template arguments through attn_dispatch.h's switches, then its shared
// memory and grid. Included by the two units that instantiate the kernel: decode_kernel.cu
// (16-bit caches) and decode_fp8.cu (FP8 caches), which compile in parallel.
#ifndef HK_ATTN_DECODE_LAUNCH_CUH
#define HK_ATTN_DECODE_LAUNCH_CUH

#include <cuda_runtime.h>

#include "attn_dispatch.h"
#include "decode.cuh"
#include "decode_kernel.cuh"
#include "decode_tile.cuh"
#include "hk_attention_cuda.h"

// NAME = the KvMode KV as a constant; a value outside the enum takes kContiguous.
#define HK_KV_MODE_SWITCH(KV, NAME, ...)                                     \
    [&] {                                                                    \
        if ((KV) == kPagedTma) {                             \
            constexpr static int NAME = kPagedTma;           \
            return __VA_ARGS__();                                            \
        } else if ((KV) == kPaged) {                         \
            constexpr static int NAME = kPaged;              \
            return __VA_ARGS__();                                            \
        } else {                                                             \
            constexpr static int NAME = kContiguous;         \
            return __VA_ARGS__();                                            \
        }                                                                    \
    }()

namespace hk_attn_decode {

// One instantiation: its warps and stages from DecodeConfig, the grid from the plan in p.
template <bool BF16, bool F8, int D, int MT, int KV>
int decode_dispatch(const DecodeParams &p, cudaStream_t st) {
    constexpr int NW = DecodeConfig<F8, D>::NW, STAGES = DecodeConfig<F8, D>::STAGES;
    constexpr int smem = DecodeTile<F8, D, MT, NW, STAGES, KV>::SMEM;
    auto kern = decode_kernel<BF16, F8, D, MT, NW, STAGES, KV>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return HK_ATTN_ECUDA;
    dim3 grid = p.balanced ? dim3(p.ctas, 1, 1) : dim3(p.nsplits, p.hkv * p.nchunks, p.batch);
    kern<<<grid, NW * 32, smem, st>>>(p);
    return cudaGetLastError() == cudaSuccess ? HK_ATTN_OK : HK_ATTN_ECUDA;
}

// Every instantiation of one cache element type (F8 or not): bf16 / fp16 queries, head dim 128
// or 64, 1 or 2 MMA tiles of 16 query rows, the KvMode kv.
template <bool F8>
int decode_launch(const DecodeParams &p, bool bf16, int d, int mt, int kv, cudaStream_t st) {
    return HK_BOOL_SWITCH(bf16, BF16, [&] {
        return HK_HEAD_DIM_SWITCH(d, D, [&] {
            return HK_BOOL_SWITCH(mt == 1, ONE_TILE, [&] {
                return HK_KV_MODE_SWITCH(kv, KV, [&] { return decode_dispatch<BF16, F8, D, ONE_TILE ? 1 : 2, KV>(p, st); });
            });
        });
    });
}

}  // namespace hk_attn_decode

#endif
