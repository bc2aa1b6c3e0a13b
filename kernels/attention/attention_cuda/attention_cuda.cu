// hubkern reference attention for NVIDIA GPUs (sm_80+; tuned on H200 / sm_90).
//
// Prefill: FlashAttention-2 style. One CTA = BM query rows of one head; each warp owns 16*MT rows
// and keeps its Q fragments, softmax state and O accumulator in registers; K/V tiles of BN keys
// stream through shared memory with cp.async double buffering; QK^T and PV use
// mma.sync.m16n8k16 (bf16/fp16 in, fp32 accumulate) fed by ldmatrix from XOR-swizzled shared
// memory; the softmax is online (exp2 with the scale folded in); P stays in registers. On a
// compute capability 9.0 GPU the prefill runs the sm_90a kernel of prefill_sm90.cu instead.
//
// Decode: flash-decoding. One CTA = one (sequence, kv head, split of the context) and ALL query
// rows that read this kv head (group size x q_len, padded to 16-row MMA tiles), so each K/V byte
// is read from DRAM once for the whole group. A multi-stage cp.async pipeline (16-byte copies,
// paged or contiguous addressing; on sm_90a paged caches are fetched instead by one thread as TMA
// boxes of whole pages) keeps enough bytes in flight; the 4 warps split each key tile,
// merge their softmax states through shared memory, and write either the final output (1 split)
// or a partial (normalised O, LSE); the last CTA of each group to finish merges the partials.
//
// Semantics (masking, fully masked rows, LSE) are those of attention_cpu/hk_attention.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_device.cuh"
#include "hk_attention_cuda.h"
#include "prefill_sm90.h"
#include "sm90_ptx.cuh"
#include "tensor_map.cuh"

namespace {

using namespace hk_attn_dev;

// ---------------------------------------------------------------------------------------------
// PTX helpers
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool pred) {
    int n = pred ? 16 : 0;  // 0: zero-fill, nothing read
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Byte offset of 16-byte chunk c of row r in a [rows][D] 16-bit tile, XOR-swizzled so that the
// 8 rows an ldmatrix phase reads hit 8 different bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
    return static_cast<uint32_t>(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

// Online-softmax step for one warp's S tile (MT m-tiles x NT n-tiles, raw dot products, masked
// entries -inf): updates the running max m (raw units) and the thread-partial row sum l,
// rescales O, and leaves exp2((s - m) * scale_log2) in s.
template <int MT, int NT, int DT>
__device__ __forceinline__ void softmax_step(float (&s)[MT][NT][4], float (&m)[MT][2],
                                             float (&l)[MT][2], float (&o)[MT][DT][4],
                                             float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float mx = m[mt][hr];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
            mx = quad_max(mx);
            const float base = (mx == -INFINITY) ? 0.f : mx * scale_log2;
            const float alpha = fast_exp2(m[mt][hr] * scale_log2 - base);  // 0 when m was -inf
            m[mt][hr] = mx;
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float p = fast_exp2(fmaf(s[mt][nt][2 * hr + e], scale_log2, -base));
                    s[mt][nt][2 * hr + e] = p;
                    sum += p;
                }
            l[mt][hr] = l[mt][hr] * alpha + sum;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                o[mt][dt][2 * hr] *= alpha;
                o[mt][dt][2 * hr + 1] *= alpha;
            }
        }
}

// ---------------------------------------------------------------------------------------------
// Prefill
struct PrefillParams {
    void *out;
    float *lse;
    const void *q, *k, *v;
    const int32_t *cu_q, *cu_k;
    int hq, hkv, group, total_q;
    float scale, scale_log2;
};

template <bool BF16, int D, int NW, int MT, int BN, bool QSMEM, bool CAUSAL>
__global__ void __launch_bounds__(NW * 32) prefill_kernel(const PrefillParams p) {
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
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    }
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

// ---------------------------------------------------------------------------------------------
// Decode (split-KV) + combine
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
};

// How a decode CTA fetches K/V tiles: cp.async from a contiguous cache, cp.async through the
// block table, or (sm_90a) TMA boxes of whole pages issued by one thread.
enum KvMode { kContiguous = 0, kPaged = 1, kPagedTma = 2 };

template <int D, int MT, int NW, int STAGES, int KV>
constexpr int decode_smem_bytes() {
    constexpr int pipe = STAGES * (16 * NW) * D * 2 * 2 + (KV == kPagedTma ? 1024 : 0);
    constexpr int comb = NW * 16 * MT * (D + 2) * 4;
    return 16 * MT * D * 2 + (pipe > comb ? pipe : comb);
}

template <bool BF16, int D, int MT, int NW, int STAGES, int KV>
__global__ void __launch_bounds__(NW * 32) decode_kernel(const __grid_constant__ DecodeParams p) {
    using T = typename Ty<BF16>::T;
    constexpr bool PAGED = KV != kContiguous, TMA = KV == kPagedTma;
    constexpr int BN = 16 * NW, CH = D / 8, KS = D / 16, DT = D / 8, NTH = NW * 32, R = 16 * MT;
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (TMA) __trap();  // only launched on sm_90a (the host checks)
#endif
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *sQ = smem;             // [R][D]
    uint8_t *sKV = sQ + R * D * 2;  // [STAGES][K|V][BN][D]; reused for the warp merge
    // TMA tiles are [BN keys][D/64 column blocks][128 B] with the TMA's 128-byte swizzle, whose
    // 8-unit atoms must be 1024-aligned (the dynamic base is not guaranteed to be: 1 KB of slack)
    const uint32_t kv_base = TMA ? (smem_u32(sKV) + 1023u) & ~1023u : smem_u32(sKV);
    __shared__ __align__(8) uint64_t full_bar[TMA ? STAGES : 1];  // TMA: bytes of a tile landed
    (void)full_bar;
    // byte offset of 16-byte chunk c of key row r in a K or V tile
    // (TMA: the swizzle phase is the index of the 128-byte unit, so at D=128 8 consecutive rows
    // see only 4 phases and an ldmatrix phase has 2-way bank conflicts: cheap next to DRAM)
    auto kv_off = [](int r, int c) -> uint32_t {
        if constexpr (TMA)
            return r * (D * 2) + (c >> 3) * 128 + (((c & 7) ^ ((r * (D / 64) + (c >> 3)) & 7)) << 4);
        else return swz<D>(r, c);
    };

    const int split = blockIdx.x, hk = blockIdx.y / p.nchunks, chunk = blockIdx.y % p.nchunks;
    const int b = blockIdx.z, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int r0 = chunk * R, nrows = min(R, p.rows - r0);
    const int seqlen = p.seqlens[b];
    const int ks0 = split * p.split_keys, ke = min(ks0 + p.split_keys, seqlen);
    const int ntiles = ke > ks0 ? (ke - ks0 + BN - 1) / BN : 0;
    const int causal_base = seqlen - p.q_len;  // row of token t sees keys <= causal_base + t

    // Q rows of this CTA: row rr = t*group + g  ->  token t, head hk*group + g
    const T *qg = static_cast<const T *>(p.q);
#pragma unroll
    for (int it = 0; it < (R * CH + NTH - 1) / NTH; it++) {
        int i = tid + it * NTH;
        if (i < R * CH) {
            int r = i / CH, c = i % CH, rr = r0 + r;
            bool ok = r < nrows;
            int t = rr / p.group, g = rr % p.group;
            const T *src = ok ? qg + (((size_t)b * p.q_len + t) * p.hq + hk * p.group + g) * D + c * 8 : qg;
            cp_async16(smem_u32(sQ) + swz<D>(r, c), src, ok);
        }
    }
    const T *kc = static_cast<const T *>(p.kc), *vc = static_cast<const T *>(p.vc);
    const int64_t head_off = (int64_t)hk * p.stride_head;
    // Paged: the physical block of each row a thread copies is fetched one tile ahead, so the
    // block-table read never stalls the issue of the copies.
    constexpr int RPT = BN * CH / NTH;
    int blk[RPT];
    const int32_t *btab = PAGED && p.block_table ? p.block_table + (size_t)b * p.max_blocks : nullptr;
    auto fetch_blocks = [&](int j) {
        if constexpr (PAGED && !TMA) {
#pragma unroll
            for (int it = 0; it < RPT; it++) {
                int key = ks0 + j * BN + (tid + it * NTH) / CH;
                int bi = p.bs_shift >= 0 ? key >> p.bs_shift : key / p.block_size;
                blk[it] = key < ke ? __ldg(btab + bi) : 0;
            }
        }
    };
    fetch_blocks(0);
    auto load_tile = [&](int j) {
        const int st = j % STAGES;
        const uint32_t kdst = kv_base + st * 2 * BN * D * 2, vdst = kdst + BN * D * 2;
#pragma unroll
        for (int it = 0; it < RPT; it++) {
            int i = tid + it * NTH, r = i / CH, c = i % CH;
            int key = ks0 + j * BN + r;
            bool ok = key < ke;
            int64_t off = 0;
            if (ok) {
                if constexpr (PAGED) {
                    int in_blk = p.bs_shift >= 0 ? key & (p.block_size - 1) : key % p.block_size;
                    off = (int64_t)blk[it] * p.stride_block + (int64_t)in_blk * p.stride_token;
                } else {
                    off = (int64_t)b * p.stride_block + (int64_t)key * p.stride_token;
                }
                off += head_off + c * 8;
            }
            cp_async16(kdst + swz<D>(r, c), kc + off, ok);
            cp_async16(vdst + swz<D>(r, c), vc + off, ok);
        }
        fetch_blocks(j + 1);
    };
    // TMA: thread 0 copies whole pages, one box of whole rows per page piece for K and for V.
    // Keys past the split's end re-read the split's first page (rows that exist; masked, and
    // their V rows zeroed before use) instead of trusting the block table past the sequence.
    // The block ids of the next tile to issue are read one tile ahead (at most BN / 16 = 4 pages
    // per tile), so the table read does not stall the issue.
    int tile_blk[4];
    auto read_blocks = [&](int j) {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int key = ks0 + j * BN + q * p.box_rows;
            const int bi = (key < ke ? key : ks0) >> p.bs_shift;
            if (q * p.box_rows < BN) tile_blk[q] = p.tma_contig ? b : __ldg(btab + bi);
        }
    };
    auto load_tile_tma = [&](int j) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        const int st = j % STAGES;
        const uint32_t kdst = kv_base + st * 2 * BN * D * 2, vdst = kdst + BN * D * 2;
        const uint32_t bar = smem_u32(&full_bar[st]);
        hk_sm90::mbar_arrive_expect_tx(bar, 2 * BN * D * 2);
        const int key0 = ks0 + j * BN;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int r = q * p.box_rows;
            if (r >= BN) break;
            // one box = box_rows whole rows (both 64-column halves) of one kv head
            const int tok = p.tma_contig ? key0 + r : (key0 + r) & (p.block_size - 1);
            hk_sm90::tma_load_5d(kdst + r * D * 2, &p.tm_k, bar, 0, 0, hk, tok, tile_blk[q]);
            hk_sm90::tma_load_5d(vdst + r * D * 2, &p.tm_v, bar, 0, 0, hk, tok, tile_blk[q]);
        }
        read_blocks(j + 1);
#endif
    };
    // prologue: Q and the first STAGES-1 tiles, one commit group each (Q rides with tile 0)
    if constexpr (TMA) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        cp_async_commit();  // Q
        if (tid == 0) {
            for (int s = 0; s < STAGES; s++) hk_sm90::mbar_init(smem_u32(&full_bar[s]), 1);
            hk_sm90::mbar_init_fence();
            read_blocks(0);
            for (int j = 0; j < STAGES - 1 && j < ntiles; j++) load_tile_tma(j);
        }
#endif
    } else {
#pragma unroll
        for (int j = 0; j < STAGES - 1; j++) {
            if (j < ntiles) load_tile(j);
            cp_async_commit();
        }
    }

    uint32_t qf[MT][KS][4];
    float o[MT][DT][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    }

    for (int j = 0; j < ntiles; j++) {
        if constexpr (TMA) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            if (j == 0) cp_async_wait<0>();  // Q
            __syncthreads();  // Q visible; stage (j-1)%STAGES free (and the barriers initialised)
            if (tid == 0 && j + STAGES - 1 < ntiles) load_tile_tma(j + STAGES - 1);
            hk_sm90::mbar_wait(smem_u32(&full_bar[j % STAGES]), (j / STAGES) & 1);
            const int key0 = ks0 + j * BN;
            if (key0 + BN > ke) {
                // V rows of keys past the end hold whatever the page held: zero this warp's
                // (P is 0 there, but 0 * NaN is not); the fence orders these generic writes
                // before the TMA's next write to the stage
                const uint32_t vz = kv_base + (j % STAGES) * 2 * BN * D * 2 + BN * D * 2;
                for (int i = lane; i < 16 * CH; i += 32) {
                    const int r = warp * 16 + i / CH, c = i % CH;
                    if (key0 + r >= ke)
                        asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(vz + kv_off(r, c)), "r"(0));
                }
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                __syncwarp();
            }
#endif
        } else {
            cp_async_wait<STAGES - 2>();
            __syncthreads();  // tile j visible to all; stage (j-1)%STAGES free
            if (j + STAGES - 1 < ntiles) load_tile(j + STAGES - 1);
            cp_async_commit();
        }
        if (j == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int ks = 0; ks < KS; ks++)
                    ldsm_x4(qf[mt][ks], smem_u32(sQ) + swz<D>(mt * 16 + (lane & 15), ks * 2 + (lane >> 4)));
        }
        const int st = j % STAGES;
        const uint32_t kb = kv_base + st * 2 * BN * D * 2, vb = kb + BN * D * 2;
        const int wkey = warp * 16;  // this warp's 16 keys of the tile
        float s[MT][2][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            uint32_t kr[4];
            ldsm_x4(kr, kb + kv_off(wkey + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                Ty<BF16>::mma(s[mt][0], qf[mt][ks], kr[0], kr[1]);
                Ty<BF16>::mma(s[mt][1], qf[mt][ks], kr[2], kr[3]);
            }
        }
        const int tile_key0 = ks0 + j * BN;
        if (tile_key0 + BN > min(ke, causal_base + 1)) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < 2; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int rr = r0 + mt * 16 + (lane >> 2) + ((e >> 1) << 3);
                        int t = rr / p.group;
                        int key = tile_key0 + wkey + nt * 8 + ((lane & 3) << 1) + (e & 1);
                        if (!(key < ke && key <= causal_base + t)) s[mt][nt][e] = -INFINITY;
                    }
        }
        softmax_step<MT, 2, DT>(s, m, l, o, p.scale_log2);
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            a[mt][0] = Ty<BF16>::pack(s[mt][0][0], s[mt][0][1]);
            a[mt][1] = Ty<BF16>::pack(s[mt][0][2], s[mt][0][3]);
            a[mt][2] = Ty<BF16>::pack(s[mt][1][0], s[mt][1][1]);
            a[mt][3] = Ty<BF16>::pack(s[mt][1][2], s[mt][1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
            uint32_t vr[4];
            ldsm_x4_t(vr, vb + kv_off(wkey + (lane & 7) + (((lane >> 3) & 1) << 3), dp * 2 + (lane >> 4)));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                Ty<BF16>::mma(o[mt][2 * dp], a[mt], vr[0], vr[1]);
                Ty<BF16>::mma(o[mt][2 * dp + 1], a[mt], vr[2], vr[3]);
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads();  // pipeline drained: reuse its shared memory

    // per-warp state -> shared: sO[warp][row][D], sM/sL[warp][row]
    float *sO = reinterpret_cast<float *>(sKV);
    float *sM = sO + NW * R * D, *sL = sM + NW * R;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = mt * 16 + (lane >> 2) + hr * 8;
            const float lsum = quad_sum(l[mt][hr]);
            float *orow = sO + ((size_t)warp * R + row) * D;
#pragma unroll
            for (int dt = 0; dt < DT; dt++)
                *reinterpret_cast<float2 *>(orow + dt * 8 + ((lane & 3) << 1)) =
                    make_float2(o[mt][dt][2 * hr], o[mt][dt][2 * hr + 1]);
            if ((lane & 3) == 0) sM[warp * R + row] = m[mt][hr], sL[warp * R + row] = lsum;
        }
    __syncthreads();

    // merge the NW warps; thread -> (row, 4 dims)
    T *outp = static_cast<T *>(p.out);
    for (int i = tid; i < R * (D / 4); i += NTH) {
        const int row = i / (D / 4), d4 = (i % (D / 4)) * 4;
        if (row >= nrows) continue;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; w++) mx = fmaxf(mx, sM[w * R + row]);
        const float base = mx == -INFINITY ? 0.f : mx * p.scale_log2;
        float lsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < NW; w++) {
            const float f = exp2f(sM[w * R + row] * p.scale_log2 - base);
            lsum += f * sL[w * R + row];
            const float4 ov = *reinterpret_cast<const float4 *>(sO + ((size_t)w * R + row) * D + d4);
            acc[0] += f * ov.x, acc[1] += f * ov.y, acc[2] += f * ov.z, acc[3] += f * ov.w;
        }
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        const float lse = lsum > 0.f ? mx * p.scale + __logf(lsum) : -INFINITY;
        const int rr = r0 + row, t = rr / p.group, h = hk * p.group + rr % p.group;
        const size_t orow = ((size_t)b * p.q_len + t) * p.hq + h;
        if (p.nsplits == 1) {
            uint2 pk;
            pk.x = Ty<BF16>::pack(acc[0] * inv, acc[1] * inv);
            pk.y = Ty<BF16>::pack(acc[2] * inv, acc[3] * inv);
            *reinterpret_cast<uint2 *>(outp + orow * D + d4) = pk;
            if (p.lse && d4 == 0) p.lse[orow] = lse;
        } else {
            const size_t wrow = (size_t)split * p.batch * p.q_len * p.hq + orow;
            *reinterpret_cast<float4 *>(p.ws_o + wrow * D + d4) =
                make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
            if (d4 == 0) p.ws_lse[wrow] = lse;
        }
    }
    if (p.nsplits == 1) return;

    // Split-KV combine, fused: the last CTA of this (sequence, kv head, row chunk) to finish
    // merges every split's (normalised O, LSE) for its rows. No second launch, no launch gap.
    __shared__ int s_last;
    __threadfence();  // this CTA's partials are visible device-wide before it counts itself
    __syncthreads();
    int *cnt = p.counters + (size_t)blockIdx.z * gridDim.y + blockIdx.y;
    if (tid == 0) s_last = atomicAdd(cnt, 1) == p.nsplits - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const size_t sstride = (size_t)p.batch * p.q_len * p.hq;
    for (int i = tid; i < nrows * (D / 4); i += NTH) {
        const int row = i / (D / 4), d4 = (i % (D / 4)) * 4;
        const int rr = r0 + row, t = rr / p.group, h = hk * p.group + rr % p.group;
        const size_t orow = ((size_t)b * p.q_len + t) * p.hq + h;
        float mx = -INFINITY;
        for (int sp = 0; sp < p.nsplits; sp++) mx = fmaxf(mx, __ldcg(p.ws_lse + sp * sstride + orow));
        float wsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
        if (mx != -INFINITY) {
            for (int sp = 0; sp < p.nsplits; sp++) {
                const float ls = __ldcg(p.ws_lse + sp * sstride + orow);
                if (ls == -INFINITY) continue;  // split saw no key: its O is not needed
                const float w = __expf(ls - mx);
                const float4 v = __ldcg(reinterpret_cast<const float4 *>(p.ws_o + (sp * sstride + orow) * D + d4));
                wsum += w, acc[0] += w * v.x, acc[1] += w * v.y, acc[2] += w * v.z, acc[3] += w * v.w;
            }
        }
        const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
        uint2 pk;
        pk.x = Ty<BF16>::pack(acc[0] * inv, acc[1] * inv);
        pk.y = Ty<BF16>::pack(acc[2] * inv, acc[3] * inv);
        *reinterpret_cast<uint2 *>(outp + orow * D + d4) = pk;
        if (p.lse && d4 == 0) p.lse[orow] = wsum > 0.f ? mx + __logf(wsum) : -INFINITY;
    }
    if (tid == 0) *cnt = 0;  // leave the workspace ready for the next call
}

// ---------------------------------------------------------------------------------------------
// Host side
bool aligned16(const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

template <bool BF16, int D, int NW, int MT, int BN, bool QSMEM, bool CAUSAL>
int prefill_launch(const PrefillParams &p, int batch, int max_seqlen_q, cudaStream_t st) {
    constexpr int BM = 16 * MT * NW;
    constexpr int smem = BM * D * 2 + 4 * BN * D * 2;
    auto kern = prefill_kernel<BF16, D, NW, MT, BN, QSMEM, CAUSAL>;
    if (smem > 48 * 1024 &&
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return HK_ATTN_ECUDA;
    dim3 grid((max_seqlen_q + BM - 1) / BM, p.hq, batch);
    kern<<<grid, NW * 32, smem, st>>>(p);
    return cudaGetLastError() == cudaSuccess ? HK_ATTN_OK : HK_ATTN_ECUDA;
}

// Tile configurations. The default per head dim is the fastest measured on the H200
// (NOTES.md); HK_ATTN_PREFILL_CFG=<n> selects another one for experiments.
int prefill_cfg() {
    static int cfg = -2;
    if (cfg == -2) {
        const char *e = getenv("HK_ATTN_PREFILL_CFG");
        cfg = e ? atoi(e) : -1;
    }
    return cfg;
}

template <bool BF16, int D, bool CAUSAL>
int prefill_dispatch(const PrefillParams &p, int batch, int max_seqlen_q, cudaStream_t st) {
    int cfg = prefill_cfg();
    if constexpr (D == 64) {
        // 4 warps x 32 rows (BM 128), BN 64, Q in registers
        return prefill_launch<BF16, D, 4, 2, 64, false, CAUSAL>(p, batch, max_seqlen_q, st);
    }
    else {
        // default (cfg 1): 4 warps x 32 rows (BM 128), BN 64, Q re-read from shared memory
        if (cfg < 0) cfg = 1;
        switch (cfg) {
        case 0: return prefill_launch<BF16, D, 4, 1, 64, false, CAUSAL>(p, batch, max_seqlen_q, st);
        case 2: return prefill_launch<BF16, D, 4, 2, 32, true, CAUSAL>(p, batch, max_seqlen_q, st);
        case 3: return prefill_launch<BF16, D, 8, 1, 64, false, CAUSAL>(p, batch, max_seqlen_q, st);
        default: return prefill_launch<BF16, D, 4, 2, 64, true, CAUSAL>(p, batch, max_seqlen_q, st);
        }
    }
}

template <bool BF16, int D, int MT, int KV>
int decode_dispatch(const DecodeParams &p, cudaStream_t st) {
    constexpr int NW = 4, STAGES = (D == 128) ? 3 : 4;
    constexpr int smem = decode_smem_bytes<D, MT, NW, STAGES, KV>();
    auto kern = decode_kernel<BF16, D, MT, NW, STAGES, KV>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return HK_ATTN_ECUDA;
    dim3 grid(p.nsplits, p.hkv * p.nchunks, p.batch);
    kern<<<grid, NW * 32, smem, st>>>(p);
    return cudaGetLastError() == cudaSuccess ? HK_ATTN_OK : HK_ATTN_ECUDA;
}

template <bool BF16, int D, int MT>
int decode_kv(const DecodeParams &p, int kv, cudaStream_t st) {
    if (kv == kPagedTma) return decode_dispatch<BF16, D, MT, kPagedTma>(p, st);
    if (kv == kPaged) return decode_dispatch<BF16, D, MT, kPaged>(p, st);
    return decode_dispatch<BF16, D, MT, kContiguous>(p, st);
}
template <bool BF16, int D>
int decode_mt(const DecodeParams &p, int mt, int kv, cudaStream_t st) {
    return mt == 1 ? decode_kv<BF16, D, 1>(p, kv, st) : decode_kv<BF16, D, 2>(p, kv, st);
}

// Paged caches go through the TMA on sm_90a when the pages are powers of two from 16 to 256
// tokens and the encoder accepts the layout; HK_ATTN_DECODE_TMA=0 keeps them on cp.async,
// HK_ATTN_DECODE_TMA=all sends contiguous caches through the TMA as well (experiments).
int decode_tma_setting() {
    static const int v = [] {
        const char *e = getenv("HK_ATTN_DECODE_TMA");
        return e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "all") == 0 ? 2 : 1;
    }();
    return v;
}
// Whether paged caches with this page size go through the TMA here.
bool paged_tma_possible(int block_size) {
    return decode_tma_setting() >= 1 && block_size >= 16 && block_size <= 256 &&
           (block_size & (block_size - 1)) == 0 && hk_tma::is_sm90_device();
}
bool decode_tma_maps(DecodeParams &p, int hkv, int d, int max_seqlen_k) {
    const bool paged = p.block_table != nullptr;
    if (paged ? !paged_tma_possible(p.block_size) : decode_tma_setting() < 2 || !hk_tma::is_sm90_device())
        return false;
    // paged: [blocks][block_size][Hkv][D] by the cache's own strides (the block count is not
    // known here: the outer extent is the most blocks a 47-bit address space can hold, at most
    // the largest id an int32 table holds); contiguous: [batch][max_seqlen_k][Hkv][D], likewise
    const cuuint64_t tokens = paged ? p.block_size : (max_seqlen_k > 0 ? max_seqlen_k : 1);
    const cuuint64_t max_blocks = (1ull << 47) / ((cuuint64_t)p.stride_block * 2 + 1);
    const cuuint64_t outer = !paged ? (cuuint64_t)p.batch : max_blocks < INT32_MAX ? max_blocks : INT32_MAX;
    p.box_rows = paged && p.block_size < 64 ? p.block_size : 64;
    p.tma_contig = !paged;
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

// The cache's part of the decode parameters: pointers, strides, block table, page size and its
// log2 (-1 when not a power of two).
void set_cache(DecodeParams &p, const hk_attn_kv_cache *kv) {
    p.kc = kv->k, p.vc = kv->v;
    p.stride_block = kv->stride_block, p.stride_token = kv->stride_token, p.stride_head = kv->stride_head;
    p.block_table = kv->block_table, p.block_size = kv->block_size, p.max_blocks = kv->max_blocks_per_seq;
    p.bs_shift = -1;
    for (int sh = 0; sh < 31; sh++)
        if (kv->block_size == (1 << sh)) p.bs_shift = sh;
}

// 16 query rows per MMA tile; 2 tiles at most per CTA (more would spill the O accumulator):
// larger groups x q_len are split into several row chunks, each re-reading the kv head.
int decode_mt_for(int rows) { return rows <= 16 ? 1 : 2; }
int sm_count() {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
        return 132;
    return n;
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
    const int rc = hk_attn_prefill_sm90(out, lse, q, k, v, cu_q, cu_k, batch, max_seqlen_q, total_q,
                                        total_k, hq, hkv, d, dtype, causal, scale, stream);
    if (rc != HK_ATTN_SM90_NOT_APPLICABLE) return rc;
    PrefillParams p{out, lse, q, k, v, cu_q, cu_k, hq, hkv, hq / hkv, total_q, scale, scale * kLog2e};
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    const bool bf = dtype == HK_ATTN_BF16;
#define HK_PF(BF, DD, C) return prefill_dispatch<BF, DD, C>(p, batch, max_seqlen_q, st)
    if (bf) {
        if (d == 128) { if (causal) HK_PF(true, 128, true); HK_PF(true, 128, false); }
        if (causal) HK_PF(true, 64, true);
        HK_PF(true, 64, false);
    }
    if (d == 128) { if (causal) HK_PF(false, 128, true); HK_PF(false, 128, false); }
    if (causal) HK_PF(false, 64, true);
    HK_PF(false, 64, false);
#undef HK_PF
}

extern "C" const char *hk_attn_prefill_cuda_kernel(void) {
    return hk_attn_prefill_sm90_applicable() ? "sm90a" : "portable";
}

extern "C" const char *hk_attn_decode_cuda_kernel(const hk_attn_kv_cache *kv, int batch, int hkv,
                                                  int d, int max_seqlen_k) {
    if (!kv) return "invalid";
    DecodeParams p{};
    set_cache(p, kv);
    p.batch = batch;
    if (decode_tma_maps(p, hkv, d, max_seqlen_k)) return kv->block_table ? "paged-tma" : "contiguous-tma";
    return kv->block_table ? "paged" : "contiguous";
}

extern "C" int hk_attn_decode_cuda_num_splits(int batch, int q_len, int hq, int hkv, int d,
                                              int max_seqlen_k, int paged) {
    if (batch <= 0 || hkv <= 0 || q_len <= 0 || max_seqlen_k <= 0) return 1;
    const int rows = (hq / hkv) * q_len, mt = decode_mt_for(rows);
    const int nchunks = (rows + 16 * mt - 1) / (16 * mt);
    const long base = (long)batch * hkv * nchunks;
    const int bn = 64, tiles = (max_seqlen_k + bn - 1) / bn;
    // One wave. Contiguous caches, and paged ones read through the TMA, stream well with one CTA
    // per SM; paged caches on the cp.async path (a head's rows 2 KB apart, addresses computed by
    // every thread) need both resident CTA slots of an SM busy. Measured on the H200 (NOTES.md
    // v2/v3/v10): more waves or splits cost more than they gain. At least 4 key tiles (256
    // keys) per split.
    const bool paged_cp_async = paged && !(paged > 1 && paged_tma_possible(paged));
    long splits = ((paged_cp_async ? 2L : 1L) * sm_count()) / base;
    if (splits < 1) splits = 1;
    if (splits > tiles / 4) splits = tiles / 4 > 0 ? tiles / 4 : 1;
    if (splits > 256) splits = 256;
    return (int)splits;
}

extern "C" size_t hk_attn_decode_cuda_workspace_size(int batch, int q_len, int hq, int d,
                                                     int num_splits) {
    if (num_splits <= 1) return 0;
    const size_t rows = (size_t)num_splits * batch * q_len * hq;
    return rows * (size_t)d * 4 + rows * 4 + (size_t)batch * q_len * hq * 4;  // O, LSE, counters
}

extern "C" int hk_attn_decode_cuda(void *out, float *lse, const void *q, const hk_attn_kv_cache *kv,
                                   const int32_t *seqlens_k, int batch, int q_len, int hq, int hkv,
                                   int d, int max_seqlen_k, hk_attn_dtype dtype, float scale,
                                   int num_splits, void *workspace, size_t workspace_bytes,
                                   void *stream) {
    if (!out || !q || !kv || !kv->k || !kv->v || !seqlens_k || batch < 0 || max_seqlen_k < 0)
        return HK_ATTN_EINVAL;
    if (q_len < 1 || q_len > 8 || hq <= 0 || hkv <= 0 || hq % hkv || (d != 64 && d != 128))
        return HK_ATTN_EINVAL;
    if (dtype != HK_ATTN_BF16 && dtype != HK_ATTN_FP16) return HK_ATTN_EINVAL;
    if (!aligned16(out) || !aligned16(q) || !aligned16(kv->k) || !aligned16(kv->v))
        return HK_ATTN_EINVAL;
    if ((kv->stride_block | kv->stride_token | kv->stride_head) & 7) return HK_ATTN_EINVAL;
    if (kv->block_table && (kv->block_size <= 0 || kv->max_blocks_per_seq <= 0)) return HK_ATTN_EINVAL;
    if (batch == 0) return HK_ATTN_OK;
    if (num_splits <= 0)
        num_splits = hk_attn_decode_cuda_num_splits(batch, q_len, hq, hkv, d, max_seqlen_k,
                                                    kv->block_table ? kv->block_size : 0);
    const int bn = 64, tiles = (max_seqlen_k + bn - 1) / bn;
    if (num_splits > tiles) num_splits = tiles > 0 ? tiles : 1;
    const int split_keys = ((tiles + num_splits - 1) / num_splits) * bn;
    num_splits = tiles > 0 ? (tiles * bn + split_keys - 1) / split_keys : 1;
    if (num_splits > 1 &&
        (!workspace || workspace_bytes < hk_attn_decode_cuda_workspace_size(batch, q_len, hq, d, num_splits) ||
         !aligned16(workspace)))
        return HK_ATTN_EINVAL;
    const int group = hq / hkv, rows = group * q_len, mt = decode_mt_for(rows);
    DecodeParams p{};
    set_cache(p, kv);
    p.out = out, p.lse = lse, p.q = q;
    p.seqlens = seqlens_k, p.batch = batch, p.q_len = q_len, p.hq = hq, p.hkv = hkv, p.group = group;
    p.rows = rows, p.nchunks = (rows + 16 * mt - 1) / (16 * mt);
    p.split_keys = split_keys, p.nsplits = num_splits, p.scale = scale, p.scale_log2 = scale * kLog2e;
    const size_t nr = (size_t)num_splits * batch * q_len * hq;
    p.ws_o = static_cast<float *>(workspace);
    p.ws_lse = workspace ? p.ws_o + nr * d : nullptr;
    p.counters = workspace ? reinterpret_cast<int *>(p.ws_lse + nr) : nullptr;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    const int mode = decode_tma_maps(p, hkv, d, max_seqlen_k) ? kPagedTma : p.block_table ? kPaged : kContiguous;
    if (dtype == HK_ATTN_BF16)
        return d == 128 ? decode_mt<true, 128>(p, mt, mode, st) : decode_mt<true, 64>(p, mt, mode, st);
    return d == 128 ? decode_mt<false, 128>(p, mt, mode, st) : decode_mt<false, 64>(p, mt, mode, st);
}
