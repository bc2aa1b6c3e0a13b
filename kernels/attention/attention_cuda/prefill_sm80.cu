// Portable prefill (sm_80+; the fallback of prefill_sm90.cu, and every non-Hopper GPU):
// FlashAttention-2 style. One CTA = BM query rows of one head; each warp owns 16*MT rows and keeps
// its Q fragments, softmax state and O accumulator in registers; K/V tiles of BN keys stream
// through shared memory with cp.async double buffering; QK^T and PV use mma.sync.m16n8k16
// (bf16/fp16 in, fp32 accumulate) fed by ldmatrix from XOR-swizzled shared memory; the softmax is
// online (exp2 with the scale folded in); P stays in registers. O leaves through shared memory as
// 16-byte row pieces.
//
// Semantics (masking, fully masked rows, LSE) are those of attention_cpu/hk_attention.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <tuple>

#include "attn_device.cuh"
#include "attn_dispatch.h"
#include "attn_knobs.h"
#include "hk_attention_cuda.h"
#include "mma_sm80.cuh"
#include "prefill_sm80.h"

namespace {

using namespace hk_attn_dev;

// What the kernel reads (its parameter layout; hk_attn_prefill_sm80 fills it from AttnPrefillParams).
struct Sm80Params {
    void *out;
    float *lse;
    const void *q, *k, *v;
    const int32_t *cu_q, *cu_k;
    int hq, hkv, group, total_q;
    float scale, scale_log2;
};

// A CTA's tile: NW warps of 16*MT query rows each, key tiles of BN keys, the Q fragments held in
// registers or (QSMEM) re-read from shared memory at every k-step, which frees 32*MT registers a
// thread so that a warp can own 32 rows at D=128.
template <int NW, int MT, int BN, bool QSMEM> struct Sm80Tile {
    static constexpr int kWarps = NW, kRowTiles = MT, kBN = BN;
    static constexpr bool kQInSmem = QSMEM;
    static constexpr int kBM = 16 * MT * NW, kThreads = 32 * NW;
};

// The tiles; the defaults are the fastest measured on the H200 (NOTES.md v2). D=64: 4 warps x 32
// rows (BM 128), BN 64, Q in registers.
using Sm80TileD64 = Sm80Tile<4, 2, 64, false>;
// D=128, by their HK_ATTN_PREFILL_CFG number (test builds, attn_knobs.h); the default is 1: 4 warps
// x 32 rows (BM 128), BN 64, Q re-read from shared memory.
using Sm80TilesD128 = std::tuple<Sm80Tile<4, 1, 64, false>, Sm80Tile<4, 2, 64, true>, Sm80Tile<4, 2, 32, true>,
                                 Sm80Tile<8, 1, 64, false>>;
constexpr int kSm80TileD128Default = 1;

template <bool BF16, int D, class Tile, bool CAUSAL>
__global__ void __launch_bounds__(Tile::kThreads) prefill_kernel(const Sm80Params p) {
    constexpr int NW = Tile::kWarps, MT = Tile::kRowTiles, BN = Tile::kBN;
    constexpr bool QSMEM = Tile::kQInSmem;
    using T = typename Ty<BF16>::T;
    constexpr int BM = 16 * MT * NW, CH = D / 8, KS = D / 16, NT = BN / 8, DT = D / 8;
    constexpr int NTH = NW * 32;
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *sQ = smem;
    uint8_t *sK = sQ + BM * D * 2;      // [2][BN][D]
    uint8_t *sV = sK + 2 * BN * D * 2;  // [2][BN][D]

    const int mblk = gridDim.x - 1 - blockIdx.x;  // heaviest (causal) tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int q0 = p.cu_q[b], lq = p.cu_q[b + 1] - q0;
    const int k0 = p.cu_k[b], lk = p.cu_k[b + 1] - k0;
    const int m0 = mblk * BM;
    if (m0 >= lq) return;
    const int hk = h / p.group;
    int kend = lk;
    if (CAUSAL) kend = min(lk, max(0, m0 + BM + lk - lq));
    const int ntiles = (kend + BN - 1) / BN;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const T *qg = static_cast<const T *>(p.q) + ((size_t)q0 * p.hq + h) * D;
    const T *kg = static_cast<const T *>(p.k) + ((size_t)k0 * p.hkv + hk) * D;
    const T *vg = static_cast<const T *>(p.v) + ((size_t)k0 * p.hkv + hk) * D;
    const size_t qstride = (size_t)p.hq * D, kstride = (size_t)p.hkv * D;

#pragma unroll
    for (int it = 0; it < BM * CH / NTH; it++) {
        int i = tid + it * NTH, r = i / CH, c = i % CH;
        bool ok = m0 + r < lq;
        cp_async16(smem_u32(sQ) + swz<D>(r, c), ok ? qg + (m0 + r) * qstride + c * 8 : qg, ok);
    }
    auto load_kv = [&](int j, int st) {
#pragma unroll
        for (int it = 0; it < BN * CH / NTH; it++) {
            int i = tid + it * NTH, r = i / CH, c = i % CH;
            int key = j * BN + r;
            bool ok = key < lk;
            size_t off = ok ? key * kstride + c * 8 : 0;
            cp_async16(smem_u32(sK + st * BN * D * 2) + swz<D>(r, c), kg + off, ok);
            cp_async16(smem_u32(sV + st * BN * D * 2) + swz<D>(r, c), vg + off, ok);
        }
    };
    if (ntiles > 0) load_kv(0, 0);
    cp_async_commit();

    // Q fragments: held in registers (QSMEM false) or re-read from shared memory at every k-step
    // (QSMEM true: frees 32*MT registers per thread so a warp can own 32 rows at D=128)
    uint32_t qf[QSMEM ? 1 : MT][QSMEM ? 1 : KS][4];
    float o[MT][DT][4], m[MT][2], l[MT][2];
    softmax_init<MT, DT>(m, l, o);
    const int wrow = warp * 16 * MT;  // first row of this warp within the tile

    for (int j = 0; j < ntiles; j++) {
        const int st = j & 1;
        if (j + 1 < ntiles) load_kv(j + 1, st ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if constexpr (!QSMEM) {
            if (j == 0) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int ks = 0; ks < KS; ks++)
                        ldsm_x4(qf[mt][ks], smem_u32(sQ) + swz<D>(wrow + mt * 16 + (lane & 15), ks * 2 + (lane >> 4)));
            }
        }
        const uint32_t kb = smem_u32(sK + st * BN * D * 2), vb = smem_u32(sV + st * BN * D * 2);
        float s[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            uint32_t qs[QSMEM ? MT : 1][4];
            if constexpr (QSMEM) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    ldsm_x4(qs[mt], smem_u32(sQ) + swz<D>(wrow + mt * 16 + (lane & 15), ks * 2 + (lane >> 4)));
            }
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t kr[4];
                ldsm_x4(kr, kb + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint32_t(&qa)[4] = QSMEM ? qs[QSMEM ? mt : 0] : qf[QSMEM ? 0 : mt][QSMEM ? 0 : ks];
                    Ty<BF16>::mma(s[mt][2 * np], qa, kr[0], kr[1]);
                    Ty<BF16>::mma(s[mt][2 * np + 1], qa, kr[2], kr[3]);
                }
            }
        }
        const bool need_mask = (j + 1) * BN > lk || (CAUSAL && (j + 1) * BN - 1 > m0 + lk - lq);
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int qi = m0 + wrow + mt * 16 + (lane >> 2) + ((e >> 1) << 3);
                        int key = j * BN + nt * 8 + ((lane & 3) << 1) + (e & 1);
                        bool ok = key < lk && (!CAUSAL || key <= qi + lk - lq);
                        if (!ok) s[mt][nt][e] = -INFINITY;
                    }
        }
        softmax_step<MT, NT, DT>(s, m, l, o, p.scale_log2);
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = Ty<BF16>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = Ty<BF16>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = Ty<BF16>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = Ty<BF16>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t vr[4];
                ldsm_x4_t(vr, vb + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4)));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    Ty<BF16>::mma(o[mt][2 * dp], a[mt], vr[0], vr[1]);
                    Ty<BF16>::mma(o[mt][2 * dp + 1], a[mt], vr[2], vr[3]);
                }
            }
        }
        __syncthreads();
    }
    cp_async_wait<0>();

    // O: normalise, stage this warp's rows in its own slice of sQ (Q is no longer read), then
    // copy them out as 16-byte row pieces
    T *og = static_cast<T *>(p.out) + ((size_t)q0 * p.hq + h) * D;
    const uint32_t qs = smem_u32(sQ);
    __syncwarp();
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const float lsum = quad_sum(l[mt][hr]);
            const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
            const int row = wrow + mt * 16 + (lane >> 2) + hr * 8, qi = m0 + row;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                const uint32_t v = Ty<BF16>::pack(o[mt][dt][2 * hr] * inv, o[mt][dt][2 * hr + 1] * inv);
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(qs + swz<D>(row, dt) + (lane & 3) * 4), "r"(v));
            }
            if (qi < lq && p.lse && (lane & 3) == 0)
                p.lse[(size_t)h * p.total_q + q0 + qi] =
                    lsum > 0.f ? m[mt][hr] * p.scale + __logf(lsum) : -INFINITY;
        }
    __syncwarp();
#pragma unroll
    for (int i = lane; i < 16 * MT * CH; i += 32) {
        const int row = wrow + i / CH, c = i % CH, qi = m0 + row;
        uint4 v;
        asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(qs + swz<D>(row, c)));
        if (qi < lq) *reinterpret_cast<uint4 *>(og + qi * qstride + c * 8) = v;
    }
}

template <bool BF16, int D, class Tile, bool CAUSAL>
int prefill_launch(const AttnPrefillParams &p, cudaStream_t st) {
    constexpr int smem = Tile::kBM * D * 2 + 4 * Tile::kBN * D * 2;
    auto kern = prefill_kernel<BF16, D, Tile, CAUSAL>;
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return HK_ATTN_ECUDA;
    const Sm80Params kp{p.out, p.lse, p.q, p.k, p.v, p.cu_q, p.cu_k, p.hq, p.hkv, p.group, p.total_q,
                        p.scale, p.scale_log2};
    dim3 grid((p.max_seqlen_q + Tile::kBM - 1) / Tile::kBM, p.hq, p.batch);
    kern<<<grid, Tile::kThreads, smem, st>>>(kp);
    return cudaGetLastError() == cudaSuccess ? HK_ATTN_OK : HK_ATTN_ECUDA;
}

template <bool BF16, int D, bool CAUSAL>
int prefill_for_tile(const AttnPrefillParams &p, cudaStream_t st) {
    if constexpr (D == 64) {
        return prefill_launch<BF16, D, Sm80TileD64, CAUSAL>(p, st);
    } else {
        const int cfg = hk_attn_knob_prefill_cfg();  // -1: the default
        const int tile = cfg >= 0 && cfg < (int)std::tuple_size_v<Sm80TilesD128> ? cfg : kSm80TileD128Default;
        return HK_TILE_SWITCH(tile, Sm80TilesD128, Tile, [&] { return prefill_launch<BF16, D, Tile, CAUSAL>(p, st); });
    }
}

}  // namespace

int hk_attn_prefill_sm80(const AttnPrefillParams &p, void *stream) {
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    return HK_DTYPE_SWITCH(p.dtype, BF16, [&] {
        return HK_HEAD_DIM_SWITCH(p.d, D, [&] {
            return HK_BOOL_SWITCH(p.causal, CAUSAL, [&] { return prefill_for_tile<BF16, D, CAUSAL>(p, st); });
        });
    });
}
