// Decode kernels: flash-decoding. One CTA = one (sequence, kv head, split of the context) and ALL
// query rows that read this kv head (group size x q_len, padded to 16-row MMA tiles), so each K/V
// byte is read from DRAM once for the whole group. A multi-stage cp.async pipeline (16-byte
// copies, paged or contiguous addressing; on sm_90a paged caches are fetched instead by one thread
// as TMA boxes of whole pages) keeps enough bytes in flight; the warps (4, or 8 for FP8 caches;
// 16 keys each) split each key tile, merge their softmax states through shared memory, and
// write either the final output (1 split) or a partial (normalised O, LSE); the last CTA of
// each group to finish merges the partials.
//
// FP8 (e4m3fn) caches run the same kernel with F8: tiles of 128 keys of 1-byte codes (the bytes
// of a 64-key 16-bit tile), converted to fp16 in registers, the MMAs then in fp16 whatever the
// query type (decode_fp8.cuh); K's scale folded into the softmax scale, V's applied to the
// normalised output.
//
// Semantics (masking, fully masked rows, LSE) are those of attention_cpu/hk_attention.h.
// The host side (template arguments, shared memory, grid) is decode_launch.cuh.
#ifndef HK_ATTN_DECODE_KERNEL_CUH
#define HK_ATTN_DECODE_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "attn_device.cuh"
#include "decode.cuh"
#include "decode_fp8.cuh"
#include "decode_plan.cuh"
#include "decode_tile.cuh"
#include "hk_attention_cuda.h"
#include "mma_sm80.cuh"
#include "sm90_ptx.cuh"

namespace hk_attn_decode {

using namespace hk_attn_dev;

// What one segment (keys [ks0, ke) of one (sequence, kv head, row chunk)) needs across its steps.
struct SegCtx {
    int hk, b, r0, nrows, ks0, ke, causal_base, tid, warp, lane;
    const int32_t *btab;  // paged: this sequence's block table
};

// Q rows of this CTA into shared memory: row rr = t*group + g  ->  token t, head hk*group + g
template <class TL, class T>
__device__ __forceinline__ void load_q(const DecodeParams &p, uint8_t *sQ, const SegCtx &c) {
    constexpr int CH = TL::CH, R = TL::R, NTH = TL::NTH, D = TL::D;
    const T *qg = static_cast<const T *>(p.q);
#pragma unroll
    for (int it = 0; it < (R * CH + NTH - 1) / NTH; it++) {
        int i = c.tid + it * NTH;
        if (i < R * CH) {
            int r = i / CH, ch = i % CH, rr = c.r0 + r;
            bool ok = r < c.nrows;
            int t = rr / p.group, g = rr % p.group;
            const T *src = ok ? qg + (((size_t)c.b * p.q_len + t) * p.hq + c.hk * p.group + g) * D + ch * 8 : qg;
            cp_async16(smem_u32(sQ) + swz<D>(r, ch), src, ok);
        }
    }
}

// Paged: the physical block of each row a thread copies is fetched one tile ahead, so the
// block-table read never stalls the issue of the copies.
template <class TL>
__device__ __forceinline__ void fetch_blocks(const DecodeParams &p, const SegCtx &c, int (&blk)[TL::RPT], int j) {
    if constexpr (TL::PAGED && !TL::TMA) {
#pragma unroll
        for (int it = 0; it < TL::RPT; it++) {
            int key = c.ks0 + j * TL::BN + (c.tid + it * TL::NTH) / TL::KCH;
            int bi = p.bs_shift >= 0 ? key >> p.bs_shift : key / p.block_size;
            blk[it] = key < c.ke ? __ldg(c.btab + bi) : 0;
        }
    }
}

// Key tile j into pipeline stage st (cp.async, 16 bytes a copy), then the next tile's blocks.
template <class TL>
__device__ __forceinline__ void load_tile(const DecodeParams &p, const SegCtx &c, int (&blk)[TL::RPT],
                                          uint32_t kv_base, int st, int j) {
    constexpr int EB = TL::EB, KCH = TL::KCH;
    const char *kc = static_cast<const char *>(p.kc), *vc = static_cast<const char *>(p.vc);
    const int64_t head_off = (int64_t)c.hk * p.stride_head;
    const uint32_t kdst = kv_base + st * 2 * TL::TB, vdst = kdst + TL::TB;
#pragma unroll
    for (int it = 0; it < TL::RPT; it++) {
        int i = c.tid + it * TL::NTH, r = i / KCH, ch = i % KCH;
        int key = c.ks0 + j * TL::BN + r;
        bool ok = key < c.ke;
        int64_t off = 0;
        if (ok) {
            if constexpr (TL::PAGED) {
                int in_blk = p.bs_shift >= 0 ? key & (p.block_size - 1) : key % p.block_size;
                off = (int64_t)blk[it] * p.stride_block + (int64_t)in_blk * p.stride_token;
            } else {
                off = (int64_t)c.b * p.stride_block + (int64_t)key * p.stride_token;
            }
            off += head_off + ch * (16 / EB);
        }
        cp_async16(kdst + TL::kv_off(r, ch), kc + off * EB, ok);
        cp_async16(vdst + TL::kv_off(r, ch), vc + off * EB, ok);
    }
    fetch_blocks<TL>(p, c, blk, j + 1);
}

// TMA: the block id of this lane's page of tile j (lane q < NBOX: the q-th box of box_rows keys),
// read one tile ahead of its issue. Keys past the split's end re-read the split's first page
// (rows that exist; masked, and their V rows zeroed before use) instead of trusting the block
// table past the sequence.
template <class TL>
__device__ __forceinline__ void read_block(const DecodeParams &p, const SegCtx &c, int &lane_blk, int j) {
    const int q = c.lane;
    if (q < TL::NBOX && q * p.box_rows < TL::BN) {
        const int key = c.ks0 + j * TL::BN + q * p.box_rows;
        const int bi = (key < c.ke ? key : c.ks0) >> p.bs_shift;
        lane_blk = p.tma_contig ? c.b : __ldg(c.btab + bi);
    }
}

// TMA: warp 0 copies whole pages, lane q the q-th box of whole rows for K and for V (on 16-token
// pages 4 boxes each: issued side by side, not one after another by one thread); lane 0 arms the
// stage's barrier with the tile's bytes first.
template <class TL>
__device__ __forceinline__ void load_tile_tma(const DecodeParams &p, const SegCtx &c, int &lane_blk,
                                              uint32_t kv_base, uint64_t *full_bar, int st, int j) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int D = TL::D, EB = TL::EB, TB = TL::TB;
    const uint32_t kdst = kv_base + st * 2 * TB, vdst = kdst + TB;
    const uint32_t bar = smem_u32(&full_bar[st]);
    if (c.lane == 0) hk_sm90::mbar_arrive_expect_tx(bar, 2 * TB);
    __syncwarp();
    const int q = c.lane, r = q * p.box_rows;
    if (q < TL::NBOX && r < TL::BN) {
        // one box = box_rows whole rows (both 64-column halves) of one kv head
        const int key0 = c.ks0 + j * TL::BN;
        const int tok = p.tma_contig ? key0 + r : (key0 + r) & (p.block_size - 1);
        hk_sm90::tma_load_5d(kdst + r * D * EB, &p.tm_k, bar, 0, 0, c.hk, tok, lane_blk);
        hk_sm90::tma_load_5d(vdst + r * D * EB, &p.tm_v, bar, 0, 0, c.hk, tok, lane_blk);
    }
    read_block<TL>(p, c, lane_blk, j + 1);
#endif
}

// TMA: V rows of keys past the end hold whatever the page held: zero this warp's (P is 0
// there, but 0 * NaN is not); the fence orders these generic writes before the TMA's next
// write to the stage
template <class TL>
__device__ __forceinline__ void zero_v_tail(const SegCtx &c, uint32_t vz, int key0) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int KCH = TL::KCH;
    for (int i = c.lane; i < 16 * KCH; i += 32) {
        const int r = c.warp * 16 + i / KCH, ch = i % KCH;
        if (key0 + r >= c.ke)
            asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(vz + TL::kv_off(r, ch)), "r"(0));
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncwarp();
#endif
}

// Q's MMA A fragments from shared memory (once a segment)
template <class TL>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[TL::MT][TL::KS][4], const uint8_t *sQ, int lane) {
    constexpr int D = TL::D;
#pragma unroll
    for (int mt = 0; mt < TL::MT; mt++)
#pragma unroll
        for (int ks = 0; ks < TL::KS; ks++) {
            if constexpr (TL::EB == 1) {
                // the K fragments' order of the sum index: dims (4c, 4c+2) as k (2c, 2c+1),
                // (4c+1, 4c+3) as (2c+8, 2c+9) (decode_fp8.cuh)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int c = lane & 3;
                    uint32_t lo, hi;
                    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(lo), "=r"(hi)
                                 : "r"(smem_u32(sQ) + swz<D>(mt * 16 + (lane >> 2) + hr * 8, ks * 2 + (c >> 1)) + (c & 1) * 8));
                    qf[mt][ks][hr] = prmt(lo, hi, 0x5410u);
                    qf[mt][ks][2 + hr] = prmt(lo, hi, 0x7632u);
                }
            } else {
                ldsm_x4(qf[mt][ks], smem_u32(sQ) + swz<D>(mt * 16 + (lane & 15), ks * 2 + (lane >> 4)));
            }
        }
}

// S = Q K^T for this warp's 16 keys (wkey..) of the tile at kb
template <class TL, class MMA>
__device__ __forceinline__ void qk_mma(float (&s)[TL::MT][2][4], const uint32_t (&qf)[TL::MT][TL::KS][4],
                                       uint32_t kb, int wkey, int lane) {
    constexpr int MT = TL::MT, KS = TL::KS;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
    if constexpr (TL::EB == 1) {
        // one 8x8 b16 matrix = 8 keys x 16 dims: matrix i = (keys (i & 1) * 8.., chunk ks + (i >> 1))
#pragma unroll
        for (int ks = 0; ks < KS; ks += 2) {
            uint32_t kr[4];
            ldsm_x4(kr, kb + TL::kv_off(wkey + ((lane >> 3) & 1) * 8 + (lane & 7), ks + (lane >> 4)));
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t b0, b1;
                e4m3x4_to_f16(kr[i], b0, b1);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) MMA::mma(s[mt][i & 1], qf[mt][ks + (i >> 1)], b0, b1);
            }
        }
    } else {
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            uint32_t kr[4];
            ldsm_x4(kr, kb + TL::kv_off(wkey + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                MMA::mma(s[mt][0], qf[mt][ks], kr[0], kr[1]);
                MMA::mma(s[mt][1], qf[mt][ks], kr[2], kr[3]);
            }
        }
    }
}

// Keys past the split's end or the row's causal limit -> -inf (only on tiles that reach them)
template <class TL>
__device__ __forceinline__ void mask_scores(float (&s)[TL::MT][2][4], const DecodeParams &p, const SegCtx &c,
                                            int tile_key0, int wkey) {
    if (tile_key0 + TL::BN > min(c.ke, c.causal_base + 1)) {
#pragma unroll
        for (int mt = 0; mt < TL::MT; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int rr = c.r0 + mt * 16 + (c.lane >> 2) + ((e >> 1) << 3);
                    int t = rr / p.group;
                    int key = tile_key0 + wkey + nt * 8 + ((c.lane & 3) << 1) + (e & 1);
                    if (!(key < c.ke && key <= c.causal_base + t)) s[mt][nt][e] = -INFINITY;
                }
    }
}

// O += P V: P (the softmax-updated scores) packed into A fragments, V from the tile at vb
template <class TL, class MMA>
__device__ __forceinline__ void pv_mma(float (&o)[TL::MT][TL::DT][4], const float (&s)[TL::MT][2][4], uint32_t vb,
                                       int wkey, int lane) {
    constexpr int MT = TL::MT, D = TL::D;
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        a[mt][0] = MMA::pack(s[mt][0][0], s[mt][0][1]);
        a[mt][1] = MMA::pack(s[mt][0][2], s[mt][0][3]);
        a[mt][2] = MMA::pack(s[mt][1][0], s[mt][1][1]);
        a[mt][3] = MMA::pack(s[mt][1][2], s[mt][1][3]);
    }
    if constexpr (TL::EB == 1) {
        // transposed: a thread gets dims (2g, 2g+1) of keys (2c, 2c+1); matrix i = (keys
        // (i & 1) * 8.., chunk jp + (i >> 1)); o[2j] accumulates the even dims of chunk j, o[2j+1]
        // the odd ones
#pragma unroll
        for (int jp = 0; jp < D / 16; jp += 2) {
            uint32_t vr[4];
            ldsm_x4_t(vr, vb + TL::kv_off(wkey + ((lane >> 3) & 1) * 8 + (lane & 7), jp + (lane >> 4)));
#pragma unroll
            for (int jj = 0; jj < 2; jj++) {
                uint32_t e0, o0, e1, o1;
                e4m3x4_to_f16(vr[2 * jj], e0, o0);
                e4m3x4_to_f16(vr[2 * jj + 1], e1, o1);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    MMA::mma(o[mt][2 * (jp + jj)], a[mt], e0, e1);
                    MMA::mma(o[mt][2 * (jp + jj) + 1], a[mt], o0, o1);
                }
            }
        }
    } else {
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t vr[4];
            ldsm_x4_t(vr, vb + TL::kv_off(wkey + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4)));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                MMA::mma(o[mt][2 * dp], a[mt], vr[0], vr[1]);
                MMA::mma(o[mt][2 * dp + 1], a[mt], vr[2], vr[3]);
            }
        }
    }
}

// Per-warp state -> shared: sO[warp][row][D], sM/sL[warp][row]
template <class TL>
__device__ __forceinline__ void warp_state_to_smem(float *sO, float *sM, float *sL, const float (&o)[TL::MT][TL::DT][4],
                                                   const float (&m)[TL::MT][2], const float (&l)[TL::MT][2],
                                                   int warp, int lane) {
    constexpr int D = TL::D, R = TL::R;
#pragma unroll
    for (int mt = 0; mt < TL::MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = mt * 16 + (lane >> 2) + hr * 8;
            const float lsum = quad_sum(l[mt][hr]);
            float *orow = sO + ((size_t)warp * R + row) * D;
            if constexpr (TL::EB == 1) {  // dims 16j + 4c + {0, 1, 2, 3} (decode_fp8.cuh)
#pragma unroll
                for (int jd = 0; jd < D / 16; jd++)
                    *reinterpret_cast<float4 *>(orow + jd * 16 + ((lane & 3) << 2)) =
                        make_float4(o[mt][2 * jd][2 * hr], o[mt][2 * jd + 1][2 * hr], o[mt][2 * jd][2 * hr + 1],
                                    o[mt][2 * jd + 1][2 * hr + 1]);
            } else {
#pragma unroll
                for (int dt = 0; dt < TL::DT; dt++)
                    *reinterpret_cast<float2 *>(orow + dt * 8 + ((lane & 3) << 1)) =
                        make_float2(o[mt][dt][2 * hr], o[mt][dt][2 * hr + 1]);
            }
            if ((lane & 3) == 0) sM[warp * R + row] = m[mt][hr], sL[warp * R + row] = lsum;
        }
}

// Merge the NW warps (thread -> (row, 4 dims)); write the final output (1 split) or this
// split's partial (normalised O, LSE)
template <class TL, bool BF16>
__device__ __forceinline__ void merge_warps_store(const DecodeParams &p, const DecodeSeg &sg, const SegCtx &c,
                                                  const float *sO, const float *sM, const float *sL, float sc,
                                                  float sc_log2, float osc) {
    constexpr int D = TL::D, R = TL::R, NW = TL::NW;
    using T = typename Ty<BF16>::T;
    T *outp = static_cast<T *>(p.out);
    for (int i = c.tid; i < R * (D / 4); i += TL::NTH) {
        const int row = i / (D / 4), d4 = (i % (D / 4)) * 4;
        if (row >= c.nrows) continue;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++) mx = fmaxf(mx, sM[w * R + row]);
        const float base = mx == -INFINITY ? 0.f : mx * sc_log2;
        float lsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float f = exp2f(sM[w * R + row] * sc_log2 - base);
            lsum += f * sL[w * R + row];
            const float4 ov = *reinterpret_cast<const float4 *>(sO + ((size_t)w * R + row) * D + d4);
            acc[0] += f * ov.x, acc[1] += f * ov.y, acc[2] += f * ov.z, acc[3] += f * ov.w;
        }
        // osc: V's scale (1 for 16-bit caches); lsum is 0 only when no key was seen, NaN when a
        // NaN reached the scores (then the output and the LSE are NaN, also through the combine)
        const float inv = lsum != 0.f ? osc / lsum : 0.f;
        const float lse = lsum != 0.f ? mx * sc + __logf(lsum) : -INFINITY;
        const int rr = c.r0 + row, t = rr / p.group, h = c.hk * p.group + rr % p.group;
        const size_t orow = ((size_t)c.b * p.q_len + t) * p.hq + h;
        if (sg.nseg == 1) {
            uint2 pk;
            pk.x = Ty<BF16>::pack(acc[0] * inv, acc[1] * inv);
            pk.y = Ty<BF16>::pack(acc[2] * inv, acc[3] * inv);
            *reinterpret_cast<uint2 *>(outp + orow * D + d4) = pk;
            if (p.lse && d4 == 0) p.lse[orow] = lse;
        } else {
            const size_t wrow = sg.wbase + (size_t)sg.sp * sg.wstride + (sg.local_rows ? row : orow);
            *reinterpret_cast<float4 *>(p.ws_o + wrow * D + d4) =
                make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
            if (d4 == 0) p.ws_lse[wrow] = lse;
        }
    }
}

// Split-KV combine, fused: the last CTA of this (sequence, kv head, row chunk) to finish merges
// every split's (normalised O, LSE) for its rows. No second launch, no launch gap.
// (the pair's segments count themselves on its counter; the last one merges their partials)
template <class TL, bool BF16>
__device__ __forceinline__ void combine_splits(const DecodeParams &p, const DecodeSeg &sg, const SegCtx &c,
                                               int &s_last) {
    constexpr int D = TL::D;
    using T = typename Ty<BF16>::T;
    T *outp = static_cast<T *>(p.out);
    __threadfence();  // this CTA's partials are visible device-wide before it counts itself
    __syncthreads();
    int *cnt = p.counters + sg.pair;
    if (c.tid == 0) s_last = atomicAdd(cnt, 1) == sg.nseg - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int i = c.tid; i < c.nrows * (D / 4); i += TL::NTH) {
        const int row = i / (D / 4), d4 = (i % (D / 4)) * 4;
        const int rr = c.r0 + row, t = rr / p.group, h = c.hk * p.group + rr % p.group;
        const size_t orow = ((size_t)c.b * p.q_len + t) * p.hq + h;
        const size_t w0 = sg.wbase + (sg.local_rows ? row : orow);
        float mx = -INFINITY;
        bool nan = false;  // a split with a NaN LSE (NaN scores) poisons the row
        for (int sp = 0; sp < sg.nseg; sp++) {
            const float ls = __ldcg(p.ws_lse + w0 + (size_t)sp * sg.wstride);
            mx = fmaxf(mx, ls), nan |= ls != ls;
        }
        float wsum = nan ? NAN : 0.f, acc[4] = {wsum, wsum, wsum, wsum};
        if (mx != -INFINITY) {
            for (int sp = 0; sp < sg.nseg; sp++) {
                const size_t wr = w0 + (size_t)sp * sg.wstride;
                const float ls = __ldcg(p.ws_lse + wr);
                if (ls == -INFINITY) continue;  // split saw no key: its O is not needed
                const float w = __expf(ls - mx);
                const float4 v = __ldcg(reinterpret_cast<const float4 *>(p.ws_o + wr * D + d4));
                wsum += w, acc[0] += w * v.x, acc[1] += w * v.y, acc[2] += w * v.z, acc[3] += w * v.w;
            }
        }
        const float inv = wsum != 0.f ? 1.f / wsum : 0.f;
        uint2 pk;
        pk.x = Ty<BF16>::pack(acc[0] * inv, acc[1] * inv);
        pk.y = Ty<BF16>::pack(acc[2] * inv, acc[3] * inv);
        *reinterpret_cast<uint2 *>(outp + orow * D + d4) = pk;
        if (p.lse && d4 == 0) p.lse[orow] = wsum != 0.f ? mx + __logf(wsum) : -INFINITY;
    }
    if (c.tid == 0) *cnt = 0;  // leave the workspace ready for the next call
}

// One segment: keys [sg.ks, sg.ke) of one (sequence, kv head, row chunk). gt: key tiles this CTA
// has consumed in earlier segments (TMA stage and phase).
template <class TL, bool BF16>
__device__ __forceinline__ void decode_segment(const DecodeParams &p, const DecodeSeg &sg, uint8_t *smem,
                                               uint32_t kv_base, uint64_t *full_bar, uint32_t *s_red, int &s_last,
                                               int &gt) {
    using T = typename Ty<BF16>::T;
    constexpr bool F8 = TL::EB == 1, TMA = TL::TMA, PAGED = TL::PAGED;
    using MMA = Ty<BF16 && !F8>;  // the MMAs' type: fp16 for FP8 caches (decode_fp8.cuh)
    constexpr int BN = TL::BN, STAGES = TL::STAGES, MT = TL::MT, KS = TL::KS, DT = TL::DT, R = TL::R,
                  D = TL::D, NW = TL::NW, TB = TL::TB;
    (void)s_red;
    __syncthreads();  // the previous segment's shared memory (and the barrier init) is done with
    uint8_t *sQ = smem;             // [R][D]
    uint8_t *sKV = sQ + R * D * 2;  // [STAGES][K|V][BN][D] (EB bytes each); reused for the warp merge
    SegCtx c;
    c.tid = threadIdx.x, c.warp = c.tid >> 5, c.lane = c.tid & 31;
    c.hk = sg.hk, c.b = sg.b;
    c.r0 = sg.chunk * R, c.nrows = min(R, p.rows - c.r0);
    c.ks0 = sg.ks, c.ke = sg.ke;
    c.causal_base = sg.seqlen - p.q_len;  // row of token t sees keys <= causal_base + t
    const int ntiles = c.ke > c.ks0 ? (c.ke - c.ks0 + BN - 1) / BN : 0;
    // FP8: K's scale folded into the softmax scale, V's onto the normalised output
    float sc = p.scale, sc_log2 = p.scale_log2, osc = 1.f;
    if constexpr (F8) {
        const int sh = p.scale_per_head ? c.hk : 0;
        const float ks = __ldg(p.k_scale + sh);
        sc *= ks, sc_log2 *= ks, osc = __ldg(p.v_scale + sh);
    }

    load_q<TL, T>(p, sQ, c);
    int blk[TL::RPT];
    c.btab = PAGED && p.block_table ? p.block_table + (size_t)c.b * p.max_blocks : nullptr;
    fetch_blocks<TL>(p, c, blk, 0);
    [[maybe_unused]] int lane_blk = 0;  // the TMA path's: warp 0's lanes' next pages (unused in an sm_80 pass)
    // prologue: Q and the first STAGES-1 tiles, one commit group each (Q rides with tile 0)
    if constexpr (TMA) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        cp_async_commit();  // Q
        if (c.warp == 0) {
            read_block<TL>(p, c, lane_blk, 0);
            for (int j = 0; j < STAGES - 1 && j < ntiles; j++)
                load_tile_tma<TL>(p, c, lane_blk, kv_base, full_bar, (gt + j) % STAGES, j);
        }
#endif
    } else {
#pragma unroll
        for (int j = 0; j < STAGES - 1; j++) {
            if (j < ntiles) load_tile<TL>(p, c, blk, kv_base, (gt + j) % STAGES, j);
            cp_async_commit();
        }
    }

    uint32_t qf[MT][KS][4];
    float o[MT][DT][4], m[MT][2], l[MT][2];
    softmax_init<MT, DT>(m, l, o);

    for (int j = 0; j < ntiles; j++) {
        if constexpr (TMA) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            if (j == 0) cp_async_wait<0>();  // Q
            __syncthreads();  // Q visible; stage (j-1)%STAGES free (and the barriers initialised)
            if (c.warp == 0 && j + STAGES - 1 < ntiles)  // warp-uniform: load_tile_tma syncs the warp
                load_tile_tma<TL>(p, c, lane_blk, kv_base, full_bar, (gt + j + STAGES - 1) % STAGES, j + STAGES - 1);
            hk_sm90::mbar_wait(smem_u32(&full_bar[(gt + j) % STAGES]), ((gt + j) / STAGES) & 1);
            const int key0 = c.ks0 + j * BN;
            if (key0 + BN > c.ke) zero_v_tail<TL>(c, kv_base + ((gt + j) % STAGES) * 2 * TB + TB, key0);
#endif
        } else {
            cp_async_wait<STAGES - 2>();
            __syncthreads();  // tile j visible to all; stage (j-1)%STAGES free
            if (j + STAGES - 1 < ntiles) load_tile<TL>(p, c, blk, kv_base, (gt + j + STAGES - 1) % STAGES, j + STAGES - 1);
            cp_async_commit();
        }
        if (j == 0) {
            if constexpr (F8 && BF16) {  // fp16 MMAs: the queries scaled into fp16 (decode_fp8.cuh)
                const float undo = bf16_tile_to_f16<R * D / 2, TL::NTH>(reinterpret_cast<uint32_t *>(sQ), s_red);
                sc *= undo, sc_log2 *= undo;
            }
            load_q_frags<TL>(qf, sQ, c.lane);
        }
        const int st = (gt + j) % STAGES;
        const uint32_t kb = kv_base + st * 2 * TB, vb = kb + TB;
        const int wkey = c.warp * 16;  // this warp's 16 keys of the tile
        float s[MT][2][4];
        qk_mma<TL, MMA>(s, qf, kb, wkey, c.lane);
        mask_scores<TL>(s, p, c, c.ks0 + j * BN, wkey);
        softmax_step<MT, 2, DT>(s, m, l, o, sc_log2);
        pv_mma<TL, MMA>(o, s, vb, wkey, c.lane);
    }
    cp_async_wait<0>();
    gt += ntiles;
    __syncthreads();  // pipeline drained: reuse its shared memory

    float *sO = reinterpret_cast<float *>(sKV);
    float *sM = sO + NW * R * D, *sL = sM + NW * R;
    warp_state_to_smem<TL>(sO, sM, sL, o, m, l, c.warp, c.lane);
    __syncthreads();
    merge_warps_store<TL, BF16>(p, sg, c, sO, sM, sL, sc, sc_log2, osc);
    if (sg.nseg == 1) return;
    combine_splits<TL, BF16>(p, sg, c, s_last);
}

template <bool BF16, bool F8, int D, int MT, int NW, int STAGES, int KV>
__global__ void __launch_bounds__(NW * 32) decode_kernel(const __grid_constant__ DecodeParams p) {
    using TL = DecodeTile<F8, D, MT, NW, STAGES, KV>;
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (TL::TMA) __trap();  // only launched on sm_90a (the host checks)
#endif
    extern __shared__ __align__(128) uint8_t smem[];
    // TMA tiles are [BN keys][D/64 column blocks][128 B] with the TMA's 128-byte swizzle, whose
    // 8-unit atoms must be 1024-aligned (the dynamic base is not guaranteed to be: 1 KB of slack)
    uint8_t *sKV = smem + TL::R * D * 2;
    const uint32_t kv_base = TL::TMA ? (smem_u32(sKV) + 1023u) & ~1023u : smem_u32(sKV);
    __shared__ __align__(8) uint64_t full_bar[TL::TMA ? STAGES : 1];  // TMA: bytes of a tile landed
    (void)full_bar;
    __shared__ int s_last;
    __shared__ uint32_t s_red[F8 && BF16 ? NW : 1];  // the FP8 decode's query scale (decode_fp8.cuh)
    int gt = 0;  // key tiles this CTA has consumed in earlier segments (TMA stage and phase)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (TL::TMA) {
        if (threadIdx.x == 0) {
            for (int s = 0; s < STAGES; s++) hk_sm90::mbar_init(smem_u32(&full_bar[s]), 1);
            hk_sm90::mbar_init_fence();
        }
    }
#endif
    __shared__ DecodePlanState plan;
    decode_plan_init<TL::BN, TL::NTH, TL::SEG_TILES>(p, plan);
    while (decode_plan_next<TL::BN>(p, plan))
        decode_segment<TL, BF16>(p, plan.seg, smem, kv_base, full_bar, s_red, s_last, gt);
}

}  // namespace hk_attn_decode

#endif
