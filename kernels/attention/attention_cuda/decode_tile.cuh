// The decode kernel's tile shapes and tuning choices, apart from the kernel's source (issue 23):
// DecodeConfig picks warps and pipeline stages per (cache element type, head dim); DecodeTile
// derives every shape the kernel and its shared-memory size use from them.
#ifndef HK_ATTN_DECODE_TILE_CUH
#define HK_ATTN_DECODE_TILE_CUH

#include <stdint.h>

#include "attn_device.cuh"
#include "decode.cuh"
#include "decode_fp8.cuh"  // HK_ATTN_FP8_NW, swz8
#include "mma_sm80.cuh"    // swz

namespace hk_attn_decode {

// FP8: 8 warps of 16 keys (tiles of 128 keys, the bytes of a 16-bit tile of 64; two warps per
// scheduler hide the conversions' latency), or 4 with twice the stages
template <bool F8, int D>
struct DecodeConfig {
    static constexpr int NW = F8 ? HK_ATTN_FP8_NW : 4;
    static constexpr int STAGES = ((D == 128) ? 3 : 4) * (F8 && NW == 4 ? 2 : 1);
};

template <bool F8, int D_, int MT_, int NW_, int STAGES_, int KV_>
struct DecodeTile {
    static constexpr int D = D_, MT = MT_, NW = NW_, STAGES = STAGES_, KV = KV_;
    static constexpr bool PAGED = KV != kContiguous, TMA = KV == kPagedTma;
    // keys per tile, 16-byte chunks of a 16-bit row, 16-dim MMA steps, 8-dim output tiles,
    // threads, query rows
    static constexpr int BN = 16 * NW, CH = D / 8, KS = D / 16, DT = D / 8, NTH = NW * 32, R = 16 * MT;
    // K/V: bytes per element, per tile (one of K or V), 16-byte chunks per key row
    static constexpr int EB = F8 ? 1 : 2, TB = BN * D * EB, KCH = D * EB / 16;
    // copies per thread per tile; TMA boxes per tile (at most one per 16 keys, the smallest page)
    static constexpr int RPT = BN * KCH / NTH, NBOX = BN / 16;
    // shared memory: Q, then the pipeline (TMA: 1 KB of slack for the swizzle's alignment),
    // reused for the warp merge
    static constexpr int PIPE = STAGES * BN * D * EB * 2 + (TMA ? 1024 : 0);
    static constexpr int COMB = NW * 16 * MT * (D + 2) * 4;
    static constexpr int SMEM = 16 * MT * D * 2 + (PIPE > COMB ? PIPE : COMB);
    // the balanced plan's fixed cost of a pair (decode_plan.cuh), in key tiles: a segment's
    // setup, pipeline fill and epilogue (warp merge, partial store, fence, counter, the last
    // one's merge) take a few microseconds, in which one CTA per SM streams about SEG_BYTES
    static constexpr int SEG_BYTES = 96 << 10, SEG_TILES = (SEG_BYTES + 2 * TB - 1) / (2 * TB);

    // byte offset of 16-byte chunk c of key row r in a K or V tile
    // (TMA: the swizzle phase is the index of the 128-byte unit, so at D=128 8 consecutive rows
    // see only 4 phases and an ldmatrix phase has 2-way bank conflicts: cheap next to DRAM)
    static __device__ __forceinline__ uint32_t kv_off(int r, int c) {
        if constexpr (F8) return hk_attn_dev::swz8<D>(r, c);  // the same for the TMA and cp.async
        else if constexpr (TMA)
            return r * (D * 2) + (c >> 3) * 128 + (((c & 7) ^ ((r * (D / 64) + (c >> 3)) & 7)) << 4);
        else return hk_attn_dev::swz<D>(r, c);
    }
};

}  // namespace hk_attn_decode

#endif
