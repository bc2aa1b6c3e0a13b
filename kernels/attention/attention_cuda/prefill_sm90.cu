// Hopper prefill (sm_90a): FlashAttention-3's structure, warp-specialised.
//
// One CTA = 64 x NC query rows of one head (NC = 2; or 1 where the grid of 128-row CTAs would not
// fill the GPU once, or, two such CTAs a SM, where every CTA has few key tiles: sm90_cta_for),
// NC + 1 warpgroups:
//   warpgroup 0, the producer: one thread issues TMA copies (Q once, then K and V tiles of 128
//     keys into a ring of shared-memory stages) and gives its registers to the others;
//   warpgroups 1 (and 2), the consumers: 64 query rows each. Per key tile: S = Q K^T with wgmma
//     (both operands from shared memory), mask, online softmax in registers, then O += P V with
//     wgmma taking P from registers (the accumulator layout of S is the A-fragment layout) and V
//     from shared memory as a transposed (MN-major) operand. The two consumers take turns on the
//     tensor cores (ping-pong, see the main loop), so one's softmax hides behind the other's MMAs.
// Stages are tracked with mbarriers, separately for K and V: "full" completes when the TMA bytes
// of a tile have landed, "empty" when all 8 consumer warps are done with it (K after QK^T, V
// after PV). Tiles in shared memory use the TMA's 128-byte swizzle, which is the layout the
// wgmma descriptors describe (sm90_ptx.cuh).
//
// Varlen: the TMA boxes are cut from [total tokens, heads, D] tensors, so a box may run into the
// next sequence (those keys are masked, those query rows are not written) or past the end (the
// TMA fills zeros). Semantics are those of attention_cpu/hk_attention.h (causal aligned
// bottom-right, fully masked rows give 0 and LSE -inf).
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <atomic>
#include <tuple>

#include "attn_device.cuh"
#include "attn_dispatch.h"
#include "attn_knobs.h"
#include "hk_attention_cuda.h"
#include "prefill_sm90.h"
#include "sm90_ptx.cuh"
#include "tensor_map.cuh"

namespace {

using namespace hk_attn_dev;

constexpr int kBN = 128;  // keys per tile
// NC consumer warpgroups of 64 query rows each, plus the producer warpgroup; MINB CTAs resident
// on an SM. Two CTAs of one consumer warpgroup share an SM where each CTA has few key tiles, so
// that one CTA's loads and epilogue overlap the other's MMAs; their registers (half an SM's each)
// are rebalanced to the consumers with setmaxnreg.
template <int NC, int MINB> struct CtaShape {
    static_assert(NC == 1 || NC == 2, "one or two consumer warpgroups");
    static_assert(MINB == 1 || (MINB == 2 && NC == 1), "two CTAs a SM only with one consumer warpgroup");
    static constexpr int kConsumers = NC, kCtasPerSm = MINB;
    static constexpr int kBM = 64 * kConsumers;
    static constexpr int kThreads = 128 * (kConsumers + 1);
    // setmaxnreg moves registers between a CTA's warpgroups only: the consumers' increase must be
    // paid for by the producer's decrease out of what the CTA got at launch (kLaunchRegs a thread,
    // which ptxas takes whole where setmaxnreg is used); an increase nobody pays for blocks forever.
    // The producer's persistent tile loop spills 16-24 bytes in 24 registers and none in 32; two
    // consumer warpgroups need 72 a thread more than the launch's 168, which leaves it only 24, and
    // two CTAs a SM keep v17's 24 / 232 (at 224 their consumers were the suspect of c_counter_causal's
    // 0.90-0.93x at B64 S128, NOTES.md v18).
    static constexpr int kLaunchRegs = (65536 / (kThreads * MINB)) / 8 * 8;
    static constexpr int kProducerRegs = NC == 1 && MINB == 1 ? 32 : 24;
    static constexpr int kConsumerRegs = MINB == 1 ? 240 : 232;
    static_assert(kLaunchRegs - kProducerRegs >= NC * (kConsumerRegs - kLaunchRegs), "consumers' registers unpaid");
    static_assert(128 * (kProducerRegs + NC * kConsumerRegs) * MINB <= 65536, "registers of an SM exceeded");
};
[[maybe_unused]] constexpr int kRowBytes = 128;  // one swizzled row: 64 16-bit elements

// Build-time switches kept for comparisons (NOTES.md v6, v9): the intra-warpgroup overlap of
// softmax and PV, and the number of K/V stages at D=128 (3 measured no faster than 2).
#ifndef HK_SM90_OVERLAP
#define HK_SM90_OVERLAP 1
#endif
#ifndef HK_SM90_STAGES_D128
#define HK_SM90_STAGES_D128 2
#endif

template <int D, class Cta, bool PERSIST>
struct Layout {
    // two CTAs a SM: as many stages as fit in half of the SM's 227 KB
    static constexpr int kStages = Cta::kCtasPerSm == 2 ? (D == 128 ? 1 : 2) : D == 128 ? HK_SM90_STAGES_D128 : 3;
    // a persistent CTA loads the next tile's Q while the consumers still work on this one's
    static constexpr int kQBufs = PERSIST ? 2 : 1;
    static constexpr int kQBytes = Cta::kBM * D * 2;
    static constexpr int kTileBytes = kBN * D * 2;
    static constexpr int kOffK = kQBufs * kQBytes;
    static constexpr int kOffV = kOffK + kStages * kTileBytes;
    static constexpr int kOffBar = kOffV + kStages * kTileBytes;
    // q_full[], q_empty[], k_full[], v_full[], k_empty[], v_empty[]
    static constexpr int kBars = 2 * kQBufs + 4 * kStages;
    // persistent: the tile the producer took for each Q buffer, decoded (the consumers read it there)
    static constexpr int kOffSched = (kOffBar + kBars * 8 + 15) / 16 * 16;
    static constexpr int kSmem = kOffSched + kQBufs * 32 + 1024;  // + slack to align the base
    static_assert(kSmem * Cta::kCtasPerSm <= 232448, "shared memory of an SM exceeded");
};

// What the kernel reads: its parameter layout (hk_attn_prefill_sm90 fills it from AttnPrefillParams).
struct Sm90Params {
    void *out;
    float *lse;
    const int32_t *cu_q, *cu_k;
    int hq, group, total_q;
    int batch, mblocks;  // the tile grid: mblocks x hq x batch
    float scale, scale_log2;
    unsigned sched_slot;  // persistent, counted: which counter of g_tiles_taken this launch takes tiles from
    int counted;          // persistent full attention: tiles from the counter (sequences of unequal length)
};

// Persistent CTAs of a causal launch, or of sequences of unequal length, take tiles from a counter
// in device memory (a dynamic scheduler): a CTA whose tiles are cheap takes more of them, so tiles of
// unequal cost no longer leave CTAs idle behind a static share. Equal full-attention tiles cost the
// same, and there the grid's stride is cheaper (the counter's round trip cost 2-5 % on short tiles:
// NOTES.md v18). A launch's CTAs take tiles + gridDim.x numbers in all (each CTA's last number is past
// the end), so the CTA that takes the last one knows every other CTA is done with the counter and sets
// it back to 0 for the next launch (atomicInc's wrap): no memset launch per call. Launches take slots
// in turn, so that up to kSchedSlots persistent launches may run at once (on different streams).
constexpr unsigned kSchedSlots = 256;
// (used only where the kernel has a body, sm_90a)
[[maybe_unused]] __device__ unsigned g_tiles_taken[kSchedSlots];  // zero at module load

// One tile of work: kBM query rows (from m0) of head h of sequence b, and the key tiles they see.
struct Tile {
    int h, m0, q0, lq, k0, lk, ntiles;
};

// The tile (mblk, h, b); false when it has no query rows (past a short sequence's end).
template <bool CAUSAL, int kBM>
__device__ __forceinline__ bool tile_at(Tile &x, const Sm90Params &p, int mblk, int h, int b) {
    x.h = h;
    x.q0 = p.cu_q[b];
    x.lq = p.cu_q[b + 1] - x.q0;
    x.k0 = p.cu_k[b];
    x.lk = p.cu_k[b + 1] - x.k0;
    x.m0 = mblk * kBM;
    if (x.m0 >= x.lq) return false;
    int kend = x.lk;
    if (CAUSAL) kend = min(x.lk, max(0, x.m0 + kBM + x.lk - x.lq));
    x.ntiles = (kend + kBN - 1) / kBN;
    return true;
}

// Tile number t of a persistent launch, in an order where the tiles that read the same K/V are
// neighbours, so that the ones running at once share them in L2: sequence slowest, then its K/V
// head, then the m-blocks (causal: the longest rows first, which the counter hands out first) with
// the heads of the K/V head's group fastest. (Heads fastest across groups, v17's first order, left
// each wave's MHA tiles with K/V of their own: 0.58-0.8x at 1-16k tokens, NOTES.md v17.)
template <bool CAUSAL, int kBM>
__device__ __forceinline__ bool tile_number(Tile &x, const Sm90Params &p, unsigned t) {
    const unsigned per_kv = (unsigned)p.mblocks * p.group, per_seq = per_kv * (unsigned)(p.hq / p.group);
    const int b = (int)(t / per_seq), r = (int)(t % per_seq);
    const int hk = r / (int)per_kv, mi = (r % (int)per_kv) / p.group, g = r % p.group;
    return tile_at<CAUSAL, kBM>(x, p, CAUSAL ? p.mblocks - 1 - mi : mi, hk * p.group + g, b);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The slot of a Q buffer holds the tile decoded (its fields; h < 0: no more tiles), so that the
// consumers load nothing from global memory once its Q has landed (c_counter_causal handed them the
// tile's number, and their cu_q/cu_k loads after Q's arrival cost 4-10 % on one-key-tile tiles).
__device__ __forceinline__ void st_shared_tile(uint32_t a, const Tile &x) {
    asm volatile("st.shared.v4.s32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(x.h), "r"(x.m0), "r"(x.q0), "r"(x.lq)
                 : "memory");
    asm volatile("st.shared.v4.s32 [%0+16], {%1, %2, %3, %4};\n" ::"r"(a), "r"(x.k0), "r"(x.lk), "r"(x.ntiles),
                 "r"(0)
                 : "memory");
}
// lane 0 reads the slot for its warp and shuffles it (and arrives on the buffer's "empty" barrier
// later: the read and the release are one thread's, which is the order racecheck can see)
__device__ __forceinline__ Tile ld_shared_tile_warp(uint32_t a, int lane) {
    int v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (lane == 0) {
        asm volatile("ld.shared.v4.s32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                     : "r"(a)
                     : "memory");
        asm volatile("ld.shared.v4.s32 {%0, %1, %2, %3}, [%4+16];\n"
                     : "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7])
                     : "r"(a)
                     : "memory");
    }
    Tile x;
    x.h = __shfl_sync(0xffffffffu, v[0], 0);
    x.m0 = __shfl_sync(0xffffffffu, v[1], 0);
    x.q0 = __shfl_sync(0xffffffffu, v[2], 0);
    x.lq = __shfl_sync(0xffffffffu, v[3], 0);
    x.k0 = __shfl_sync(0xffffffffu, v[4], 0);
    x.lk = __shfl_sync(0xffffffffu, v[5], 0);
    x.ntiles = __shfl_sync(0xffffffffu, v[6], 0);
    return x;
}
#endif

template <bool BF16, int D, bool CAUSAL, class Cta, bool PERSIST>
__global__ void __launch_bounds__(Cta::kThreads, Cta::kCtasPerSm)
    prefill_sm90_kernel(const __grid_constant__ CUtensorMap tm_q,
                        const __grid_constant__ CUtensorMap tm_k,
                        const __grid_constant__ CUtensorMap tm_v, const Sm90Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace hk_sm90;
    using L = Layout<D, Cta, PERSIST>;
    constexpr int kBM = Cta::kBM, NC = Cta::kConsumers;
    using T = typename Ty<BF16>::T;
    constexpr int ST = L::kStages, QB = L::kQBufs, HALVES = D / 64;
    extern __shared__ uint8_t smem_raw[];
    // swizzle atoms must start 1024-aligned: the descriptors and the TMA assume it
    const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const uint32_t sK = base + L::kOffK, sV = base + L::kOffV;
    const uint32_t bars = base + L::kOffBar;
    auto sQ = [&](int qb) { return base + qb * L::kQBytes; };
    auto bar_q = [&](int qb) { return bars + 8u * qb; };
    auto bar_q_empty = [&](int qb) { return bars + 8u * (QB + qb); };
    auto bar_k = [&](int s) { return bars + 8u * (2 * QB + s); };
    auto bar_v = [&](int s) { return bars + 8u * (2 * QB + ST + s); };
    auto bar_k_empty = [&](int s) { return bars + 8u * (2 * QB + 2 * ST + s); };
    auto bar_v_empty = [&](int s) { return bars + 8u * (2 * QB + 3 * ST + s); };
    auto sched = [&](int qb) { return base + L::kOffSched + 32u * qb; };
    const int tid = threadIdx.x, wg = tid >> 7;
    // (from the kernel parameters where needed: one register less held through the main loop)
    auto n_tiles = [&] { return (unsigned)p.mblocks * p.hq * p.batch; };

    if (tid == 0) {
        for (int qb = 0; qb < QB; qb++) {
            mbar_init(bar_q(qb), 1);
            mbar_init(bar_q_empty(qb), 4 * NC);  // one arrival per consumer warp
        }
        for (int s = 0; s < ST; s++) {
            mbar_init(bar_k(s), 1);
            mbar_init(bar_v(s), 1);
            mbar_init(bar_k_empty(s), 4 * NC);
            mbar_init(bar_v_empty(s), 4 * NC);
        }
        mbar_init_fence();
    }
    __syncthreads();

    // Both sides walk the same tiles and count the same rings: `kv` key tiles so far (stage
    // kv % ST, phase kv / ST); persistent, `qn` tiles taken so far (Q buffer qn % QB, phase qn / QB).
    // One CTA a tile: the launch grid's (m-block, head, sequence), long causal rows first. Persistent:
    // the producer takes tile numbers (causal: from the launch's counter; full: the grid's stride) and
    // hands each tile with rows, decoded, to the consumers in the slot of its Q buffer, completing the
    // buffer's "full" barrier even where it loads nothing (a tile without keys, or the end: h < 0).
    if (wg == 0) {
        // ---- producer ----
        regs_dealloc<Cta::kProducerRegs>();
        if (tid != 0) return;
        tma_prefetch_desc(&tm_q);
        tma_prefetch_desc(&tm_k);
        tma_prefetch_desc(&tm_v);
        int kv = 0, qn = 0;
        for (int n = 0;; n++) {
            Tile x;
            int qb = 0;
            if constexpr (PERSIST) {
                // causal: the next number from the counter (atomicInc wraps it to 0 after the launch's
                // last number, ready for the next launch); full attention: the grid's stride
                const unsigned t = CAUSAL || p.counted
                                       ? atomicInc(&g_tiles_taken[p.sched_slot], n_tiles() + gridDim.x - 1)
                                       : blockIdx.x + (unsigned)n * gridDim.x;
                const bool stop = t >= n_tiles();
                if (stop) x = Tile{-1, 0, 0, 0, 0, 0, 0};
                else if (!tile_number<CAUSAL, kBM>(x, p, t)) continue;  // no rows: nothing to hand out
                qb = qn % QB;
                mbar_wait(bar_q_empty(qb), ((qn / QB) & 1) ^ 1);
                st_shared_tile(sched(qb), x);
                qn++;
                if (stop || x.ntiles == 0) {  // no Q to load: the barrier completes on this arrival
                    mbar_arrive(bar_q(qb));
                    if (stop) break;
                    continue;
                }
            } else {
                const int mblk = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
                if (n > 0 || !tile_at<CAUSAL, kBM>(x, p, mblk, blockIdx.y, blockIdx.z) || x.ntiles == 0) break;
            }
            const int hk = x.h / p.group;
            mbar_arrive_expect_tx(bar_q(qb), L::kQBytes);
            for (int c = 0; c < HALVES; c++)
                tma_load_3d(sQ(qb) + c * kBM * kRowBytes, &tm_q, bar_q(qb), c * 64, x.h, x.q0 + x.m0);
            for (int i = 0; i < x.ntiles; i++, kv++) {
                const int s = kv % ST;
                const uint32_t free_parity = ((kv / ST) & 1) ^ 1;
                const uint32_t kdst = sK + s * L::kTileBytes, vdst = sV + s * L::kTileBytes;
                mbar_wait(bar_k_empty(s), free_parity);
                mbar_arrive_expect_tx(bar_k(s), L::kTileBytes);
                for (int c = 0; c < HALVES; c++)
                    tma_load_3d(kdst + c * kBN * kRowBytes, &tm_k, bar_k(s), c * 64, hk, x.k0 + i * kBN);
                mbar_wait(bar_v_empty(s), free_parity);
                mbar_arrive_expect_tx(bar_v(s), L::kTileBytes);
                for (int c = 0; c < HALVES; c++)
                    tma_load_3d(vdst + c * kBN * kRowBytes, &tm_v, bar_v(s), c * 64, hk, x.k0 + i * kBN);
            }
        }
        return;
    }

    // ---- consumers ----
    regs_alloc<Cta::kConsumerRegs>();
    const int cw = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    auto release = [&](uint32_t bar) {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
    };
    // Ping-pong: the two consumer warpgroups take turns issuing their MMAs (named barriers 1 and
    // 2), so that one warpgroup's softmax runs while the other's MMAs occupy the tensor cores.
    // Turns: S_0; then S_i with PV_(i-1) back to back; then PV_last: ntiles + 1 per warpgroup.
    // Within a warpgroup, S_i and PV_(i-1) are two commit groups: the softmax of S_i starts as
    // soon as S_i is done, while PV_(i-1) still runs (FA3's intra-warpgroup overlap).
    // (The MMAs are issued outside any data-dependent branch: ptxas serialises wgmma otherwise.)
    // With one consumer warpgroup there is nobody to take turns with. The turns run on across a
    // persistent CTA's tiles: warpgroup 1 passes once first, then each passes after every turn, so
    // one warpgroup's next tile starts on the tensor cores while the other's epilogue runs (v16 and
    // v17 balanced the turns in every tile, which held warpgroup 0's next tile behind warpgroup 1's
    // epilogue).
    auto my_turn = [&] {
        if constexpr (NC == 2) named_bar_sync<256>(1 + cw);
    };
    auto pass_turn = [&] {
        if constexpr (NC == 2) named_bar_arrive<256>(2 - cw);
    };

    int kv = 0, qn = 0;
    if (NC == 2 && cw == 1) pass_turn();  // warpgroup 1 lets warpgroup 0 go first
    for (int n = 0;; n++) {
        Tile x;
        int qb = 0;
        if constexpr (PERSIST) {
            qb = qn % QB;
            mbar_wait(bar_q(qb), (qn / QB) & 1);
            x = ld_shared_tile_warp(sched(qb), lane);
            qn++;
            if (x.h < 0) break;
        } else {
            const int mblk = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
            if (n > 0 || !tile_at<CAUSAL, kBM>(x, p, mblk, blockIdx.y, blockIdx.z)) break;
        }
        const int m0 = x.m0, lq = x.lq, lk = x.lk, ntiles = x.ntiles;
        const int row_in_seq = m0 + cw * 64 + warp * 16 + g;  // +8 for the thread's second row
        const uint32_t sQw = sQ(qb) + cw * 64 * kRowBytes;    // this warpgroup's 64 rows of Q

        float o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
        for (int i = 0; i < D / 2; i++) o[i] = 0.f;

        uint32_t pa[kBN / 16][4];  // P of the previous tile as wgmma A fragments
        float sc[kBN / 2];
        // S = Q K_i^T: D/16 k-steps; a k-step moves 32 B inside a 64-wide column block
        auto issue_s = [&](int s) {
            const uint32_t kt = sK + s * L::kTileBytes;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                const uint32_t step = (kk >> 2) * kRowBytes, col = (kk & 3) * 32;
                wgmma_ss_n128<BF16>(sc, smem_desc_sw128(sQw + step * kBM + col, 16, 1024),
                                    smem_desc_sw128(kt + step * kBN + col, 16, 1024), kk > 0);
            }
        };
        // O += P V_i: the V tile [keys][D] is B in MN-major form; a k-step = 16 keys = 2048 B
        auto issue_pv = [&](int s) {
            const uint32_t vt = sV + s * L::kTileBytes;
#pragma unroll
            for (int kk = 0; kk < kBN / 16; kk++) {
                const uint64_t dv = smem_desc_sw128(vt + kk * 16 * kRowBytes, kBN * kRowBytes, 1024);
                if constexpr (D == 128) wgmma_rs_n128<BF16>(o, pa[kk], dv, 1);
                else wgmma_rs_n64<BF16>(o, pa[kk], dv, 1);
            }
        };
        // mask and online softmax of S_i: new running max, P_i (unnormalised, in `sc`), row sums;
        // the factor O must be rescaled by comes back in alpha (O itself may still be in an MMA)
        auto softmax = [&](int i, float (&alpha)[2]) {
            // keys past the sequence, and (causal) keys after the query's diagonal
            const bool need_mask = (i + 1) * kBN > lk || (CAUSAL && (i + 1) * kBN - 1 > m0 + lk - lq);
            if (need_mask) {
#pragma unroll
                for (int j = 0; j < kBN / 8; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = i * kBN + j * 8 + 2 * t + (e & 1);
                        const int qi = row_in_seq + 8 * (e >> 1);
                        if (key >= lk || (CAUSAL && key > qi + lk - lq)) sc[4 * j + e] = -INFINITY;
                    }
            }
            // the thread's two rows (the 4 threads of a quad share a row)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < kBN / 8; j++) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * r], sc[4 * j + 2 * r + 1]));
                mx = quad_max(mx);
                const float m_new = fmaxf(m[r], mx);
                const float ms = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;
                alpha[r] = fast_exp2(m[r] * p.scale_log2 - ms);
                m[r] = m_new;
                float rs = 0.f;
#pragma unroll
                for (int j = 0; j < kBN / 8; j++)
#pragma unroll
                    for (int e = 2 * r; e < 2 * r + 2; e++) {
                        const float v = fast_exp2(fmaf(sc[4 * j + e], p.scale_log2, -ms));
                        sc[4 * j + e] = v;
                        rs += v;
                    }
                l[r] = l[r] * alpha[r] + rs;
            }
        };
        // once P_(i-1) V_(i-1) has landed in O: rescale O to the new max, and P_i into `pa` (which
        // that MMA was reading)
        auto rescale_and_pack = [&](const float (&alpha)[2]) {
#pragma unroll
            for (int j = 0; j < D / 8; j++) {
                o[4 * j] *= alpha[0];
                o[4 * j + 1] *= alpha[0];
                o[4 * j + 2] *= alpha[1];
                o[4 * j + 3] *= alpha[1];
            }
            // P as wgmma A fragments: k-step kk covers keys 16kk..16kk+15 = S columns 8(2kk), 8(2kk+1)
#pragma unroll
            for (int kk = 0; kk < kBN / 16; kk++) {
                pa[kk][0] = Ty<BF16>::pack(sc[8 * kk + 0], sc[8 * kk + 1]);
                pa[kk][1] = Ty<BF16>::pack(sc[8 * kk + 2], sc[8 * kk + 3]);
                pa[kk][2] = Ty<BF16>::pack(sc[8 * kk + 4], sc[8 * kk + 5]);
                pa[kk][3] = Ty<BF16>::pack(sc[8 * kk + 6], sc[8 * kk + 7]);
            }
        };

        if (ntiles > 0) {
            if (!PERSIST) mbar_wait(bar_q(qb), 0);
            mbar_wait(bar_k(kv % ST), (kv / ST) & 1);
            my_turn();
            wgmma_fence();
            issue_s(kv % ST);
            wgmma_commit();
            pass_turn();
            wgmma_wait<0>();
            fence_regs(sc);
            release(bar_k_empty(kv % ST));
            float alpha[2];
            softmax(0, alpha);
            rescale_and_pack(alpha);
            for (int i = 1; i < ntiles; i++) {
                const int s = (kv + i) % ST, sp = (kv + i - 1) % ST;
                mbar_wait(bar_k(s), ((kv + i) / ST) & 1);
                mbar_wait(bar_v(sp), ((kv + i - 1) / ST) & 1);
                my_turn();
                wgmma_fence();
                issue_s(s);
#if HK_SM90_OVERLAP
                wgmma_commit();
#endif
                issue_pv(sp);
                wgmma_commit();
                pass_turn();
#if HK_SM90_OVERLAP
                wgmma_wait<1>();  // S_i done; PV_(i-1) may still run
                fence_regs(sc);
                release(bar_k_empty(s));
                softmax(i, alpha);
                wgmma_wait<0>();
                fence_regs(o);
                release(bar_v_empty(sp));
#else
                wgmma_wait<0>();
                fence_regs(sc);
                fence_regs(o);
                release(bar_k_empty(s));
                release(bar_v_empty(sp));
                softmax(i, alpha);
#endif
                rescale_and_pack(alpha);
            }
            const int last = kv + ntiles - 1;
            mbar_wait(bar_v(last % ST), (last / ST) & 1);
            my_turn();
            wgmma_fence();
            issue_pv(last % ST);
            wgmma_commit();
            pass_turn();  // the other warpgroup's next turn may start while this one's epilogue runs
            wgmma_wait<0>();
            fence_regs(o);
            release(bar_v_empty(last % ST));
            kv += ntiles;
        }

        // epilogue: O normalised into this warpgroup's rows of the Q buffer (every S MMA, its only
        // reader, is done), then stored a row at a time with 16-byte stores (the fragments' own 4-byte
        // stores used 16 of each sector's 32 bytes: NOTES.md v20's profile). Each warp stages and
        // stores its own 16 rows, so a __syncwarp orders them; rows past the sequence are not stored
        // (a varlen box runs into the next sequence). A persistent CTA's producer meanwhile loads the
        // next tile, and the tile after next may take this Q buffer once every warp is through here.
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float lsum = quad_sum(l[r]);
            inv[r] = lsum > 0.f ? 1.f / lsum : 0.f;
            const int qi = row_in_seq + 8 * r;
            if (p.lse && t == 0 && qi < lq)
                p.lse[(size_t)x.h * p.total_q + x.q0 + qi] = lsum > 0.f ? m[r] * p.scale + __logf(lsum) : -INFINITY;
        }
        // row `row` (of the warpgroup's 64), 16-byte chunk `c`, in Q's own 128-byte swizzle: the 8
        // rows of an 8x8 matrix, and a row's chunks, fall in distinct banks
        auto staged = [&](int row, int c) {
            return sQw + (c >> 3) * (kBM * kRowBytes) + row * kRowBytes + (((c & 7) ^ (row & 7)) << 4);
        };
        const int wrow = warp * 16;
        {
            const int mat = lane >> 3, srow = wrow + (lane & 7) + 8 * (mat & 1);
#pragma unroll
            for (int u = 0; u < D / 16; u++) {  // columns 16u..16u+15: four 8x8 matrices
                const int j0 = 2 * u, j1 = 2 * u + 1;
                stmatrix_x4(staged(srow, 2 * u + (mat >> 1)),
                            Ty<BF16>::pack(o[4 * j0] * inv[0], o[4 * j0 + 1] * inv[0]),
                            Ty<BF16>::pack(o[4 * j0 + 2] * inv[1], o[4 * j0 + 3] * inv[1]),
                            Ty<BF16>::pack(o[4 * j1] * inv[0], o[4 * j1 + 1] * inv[0]),
                            Ty<BF16>::pack(o[4 * j1 + 2] * inv[1], o[4 * j1 + 3] * inv[1]));
            }
        }
        __syncwarp();
        {
            constexpr int kChunks = D / 8, kRowsPerStep = 32 / kChunks;  // a row is D/8 16-byte chunks
            const int c = lane % kChunks;
#pragma unroll
            for (int i = 0; i < 16 / kRowsPerStep; i++) {
                const int row = wrow + i * kRowsPerStep + lane / kChunks;
                uint4 v;
                asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                             : "r"(staged(row, c))
                             : "memory");
                const int qi = m0 + cw * 64 + row;
                if (qi < lq)
                    *reinterpret_cast<uint4 *>(static_cast<T *>(p.out) + ((size_t)(x.q0 + qi) * p.hq + x.h) * D +
                                               8 * c) = v;
            }
        }
        if constexpr (PERSIST) {
            fence_proxy_async_smem();  // the staging's accesses before the next TMA load into the buffer
            release(bar_q_empty(qb));
        }
    }
    // warpgroup 1 passed once more than warpgroup 0 waited (its first pass): take it, so that the
    // named barrier ends balanced
    if (NC == 2 && cw == 0) my_turn();
#endif
}

// ---------------------------------------------------------------------------------------------
// Host side
// [tokens][heads][D] 16-bit tensor, boxes of 64 elements x 1 head x `rows` tokens.
bool make_map(CUtensorMap *map, const void *ptr, int d, int heads, int tokens, int rows) {
    const cuuint64_t dims[3] = {(cuuint64_t)d, (cuuint64_t)heads, (cuuint64_t)(tokens > 0 ? tokens : 1)};
    const cuuint64_t strides[2] = {(cuuint64_t)d * 2, (cuuint64_t)heads * d * 2};
    const cuuint32_t box[3] = {64, 1, (cuuint32_t)rows};
    return hk_tma::map_16bit(map, ptr, 3, dims, strides, box);
}

// The current device and its SM count, read once per device (the attribute query costs more than
// the rest of a short launch's host work).
int current_device() {
    int dev = 0;
    return cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < 64 ? dev : 0;
}

int sm_count() {
    static std::atomic<int> known[64];
    const int dev = current_device();
    int v = known[dev].load(std::memory_order_relaxed);
    if (v > 0) return v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v <= 0) return 1;
    known[dev].store(v, std::memory_order_relaxed);
    return v;
}

template <bool BF16, int D, bool CAUSAL, class Cta, bool PERSIST>
int launch_cta(const AttnPrefillParams &p, const CUtensorMap &tk, const CUtensorMap &tv, Sm90Params kp,
               cudaStream_t st) {
    using L = Layout<D, Cta, PERSIST>;
    CUtensorMap tq;
    if (!make_map(&tq, p.q, p.d, p.hq, p.total_q, Cta::kBM)) return HK_ATTN_ECUDA;
    auto kern = prefill_sm90_kernel<BF16, D, CAUSAL, Cta, PERSIST>;
    // the kernel's attributes, set once per device (a bit each in `set`)
    static std::atomic<uint64_t> set{0};
    const uint64_t bit = 1ull << current_device();
    if (!(set.load(std::memory_order_acquire) & bit)) {
        if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kSmem) != cudaSuccess)
            return HK_ATTN_ECUDA;
        // two CTAs a SM need the largest shared-memory carveout
        if (Cta::kCtasPerSm > 1 && cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                         cudaSharedmemCarveoutMaxShared) != cudaSuccess)
            return HK_ATTN_ECUDA;
        set.fetch_or(bit, std::memory_order_release);
    }
    dim3 grid(kp.mblocks, kp.hq, kp.batch);
    if (PERSIST) {  // one wave of CTAs (causal ones take tiles from the slot's counter, g_tiles_taken)
        static std::atomic<unsigned> next_slot{0};
        const long tiles = (long)kp.mblocks * kp.hq * kp.batch;
        grid = dim3((unsigned)std::min<long>(tiles, (long)sm_count() * Cta::kCtasPerSm), 1, 1);
        kp.sched_slot = next_slot.fetch_add(1, std::memory_order_relaxed) % kSchedSlots;
    }
    kern<<<grid, Cta::kThreads, L::kSmem, st>>>(tq, tk, tv, kp);
    return cudaGetLastError() == cudaSuccess ? HK_ATTN_OK : HK_ATTN_ECUDA;
}

enum class Sm90Cta { kRows128, kRows64, kRows64Pair };
// The CtaShape of each Sm90Cta, in its order.
using Sm90CtaShapes = std::tuple<CtaShape<2, 1>, CtaShape<1, 1>, CtaShape<1, 2>>;

// Keys a sequence may have for two 64-row CTAs a SM to beat one 128-row CTA (measured on the H200
// with every shape forced, NOTES.md v16 and v21): at D=64 (two stages each) at every length
// measured, to 2560 keys; at D=128 (one stage each) only for full attention on one key tile. Since
// the epilogue is staged through shared memory (v21) the 128-row CTA's two stages win from two key
// tiles (B8-B16 S256 1.08-1.25x) and on every causal row (B64 S128 to B1 S1024 1.02-1.13x).
int pair_max_keys(int d, bool causal) { return d == 64 ? 2560 : causal ? 0 : 128; }

// 64-row CTAs where 128-row ones would leave half the SMs idle (short sequences, few heads): twice
// the CTAs, each with half the rows, shortens a grid that is all latency. Where the grid is fuller
// and every CTA has few key tiles, two 64-row CTAs a SM.
// (The entry point is not told the longest key sequence; the keys a sequence has on average, or
// its queries if more, stand for it: a speed choice only, every shape is computed right.)
Sm90Cta sm90_cta_for(const AttnPrefillParams &p) {
    switch (hk_attn_knob_prefill_sm90_cta()) {
    case 1: return Sm90Cta::kRows128;
    case 2: return Sm90Cta::kRows64;
    case 3: return Sm90Cta::kRows64Pair;
    default: break;
    }
    // 64-row CTAs only while they still fit in one wave: at 128 CTAs of 128 rows for 132 SMs
    // (B1 S512, 32 heads) twice as many 64-row ones took two waves and lost 18 % (NOTES v16)
    const long ctas128 = (long)((p.max_seqlen_q + 127) / 128) * p.hq * p.batch;
    if (2 * ctas128 <= sm_count()) return Sm90Cta::kRows64;
    const long keys = std::max<long>(p.max_seqlen_q, p.total_k / std::max(p.batch, 1));
    return keys <= pair_max_keys(p.d, p.causal) ? Sm90Cta::kRows64Pair : Sm90Cta::kRows128;
}

// Persistent CTAs (one wave; causal ones and those of unequal sequences take tiles from the launch's
// counter, full attention on equal sequences walks the grid's stride): the producer loads the next
// tile's Q, K and V while the consumers finish this one, so a CTA's start-up and epilogue no longer
// stall the SM. Measured on the H200 with every cell forced on and off (NOTES.md v17, v18), with the
// tile handed to the consumers decoded (v18d) persistence pays wherever there is more than one wave
// of tiles (B1 S640 1.02-1.09x; B64 S128 1.02-1.06x, causal 1.06-1.13x; varlen causal 1.01-1.12x),
// except on causal rows past 8k keys, where a tile's start-up is hidden anyway (0.98-1.0x).
// With one wave or less it loses 3-12 % (B1 S128 to S512): nothing to overlap, and the counter or
// the producer's extra steps cost.
// Test builds force it with HK_ATTN_PREFILL_SM90_PERSIST=0|1.
bool sm90_persist_for(long tiles, int ctas_per_sm, long keys, bool causal) {
    const int k = hk_attn_knob_prefill_sm90_persist();
    if (k >= 0) return k == 1;
    if (tiles <= (long)sm_count() * ctas_per_sm) return false;
    return !causal || keys <= 8192;
}

template <bool BF16, int D, bool CAUSAL, class Cta>
int launch_shape(const AttnPrefillParams &p, const CUtensorMap &tk, const CUtensorMap &tv, cudaStream_t st) {
    const int mblocks = (p.max_seqlen_q + Cta::kBM - 1) / Cta::kBM;
    // every sequence as long as the longest (the queries; the keys are not known here, so their
    // mean, or the queries if more, stands for a sequence's keys as in sm90_cta_for)
    const bool equal = (long)p.max_seqlen_q * p.batch == p.total_q;
    const long keys = std::max<long>(p.max_seqlen_q, p.total_k / std::max(p.batch, 1));
    const bool persist = sm90_persist_for((long)mblocks * p.hq * p.batch, Cta::kCtasPerSm, keys, CAUSAL);
    // persistent on unequal tiles: from the counter, since a static share leaves CTAs idle
    const Sm90Params kp{p.out,   p.lse,        p.cu_q, p.cu_k, p.hq, p.group, p.total_q, p.batch, mblocks,
                        p.scale, p.scale_log2, 0,      persist && !equal};
    return HK_BOOL_SWITCH(persist, PERSIST, [&] { return launch_cta<BF16, D, CAUSAL, Cta, PERSIST>(p, tk, tv, kp, st); });
}

}  // namespace

int hk_attn_prefill_sm90_applicable(void) {
    // test builds force the portable kernel with HK_ATTN_PREFILL_IMPL=portable (attn_knobs.h)
    return hk_attn_knob_prefill_sm90() && hk_tma::is_sm90_device() && hk_tma::encoder() != nullptr;
}

int hk_attn_prefill_sm90(const AttnPrefillParams &p, void *stream) {
    if (!hk_attn_prefill_sm90_applicable()) return HK_ATTN_SM90_NOT_APPLICABLE;
    CUtensorMap tk, tv;
    if (!make_map(&tk, p.k, p.d, p.hkv, p.total_k, kBN) || !make_map(&tv, p.v, p.d, p.hkv, p.total_k, kBN))
        return HK_ATTN_ECUDA;
    const Sm90Cta cta = sm90_cta_for(p);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    return HK_DTYPE_SWITCH(p.dtype, BF16, [&] {
        return HK_HEAD_DIM_SWITCH(p.d, D, [&] {
            return HK_BOOL_SWITCH(p.causal, CAUSAL, [&] {
                return HK_TILE_SWITCH(static_cast<int>(cta), Sm90CtaShapes, Cta,
                                      [&] { return launch_shape<BF16, D, CAUSAL, Cta>(p, tk, tv, st); });
            });
        });
    });
}
