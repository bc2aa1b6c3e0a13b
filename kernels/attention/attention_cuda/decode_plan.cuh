// The decode's balanced plan (stream-K over the key tiles of a ragged batch): every CTA of a
// fixed grid takes the same share of one line, the units of all (sequence, kv head, row chunk)
// pairs laid end to end, so a batch of mixed lengths keeps every SM busy for the same time
// whatever the lengths. A pair's units are its key tiles after seg_tiles units of fixed cost
// (a segment's setup, pipeline fill and epilogue, which no key tile pays for: without them a CTA
// whose share held many short pairs ran several times longer than the others). A CTA's range
// can cover the end of one pair and the start of the next (segments); a pair cut into several
// segments has them merged through the workspace by the last one to finish; a range that holds
// only a pair's fixed-cost units runs nothing of it. Each CTA computes the plan itself from
// seqlens (one block-wide scan), so the host needs no lengths and there is no planning launch.
#ifndef HK_ATTN_DECODE_PLAN_CUH
#define HK_ATTN_DECODE_PLAN_CUH

#include <stdint.h>

#include "decode.cuh"

// One piece of work of a decode CTA: keys [ks, ke) of (sequence b, kv head hk, row chunk).
struct DecodeSeg {
    int b, hk, chunk, pair;  // pair: its arrival counter
    int seqlen, ks, ke;
    int nseg, sp;            // the pair's segments (1: write the output), this one's index
    int wstride, local_rows; // partial row = wbase + sp * wstride + (local_rows ? row : out row)
    size_t wbase;
};

// The plan's state between segments, in shared memory (registers are scarce in the decode).
struct DecodePlanState {
    long long pos, cur, end, per;  // stream-K: where pair (b, 0) starts, next unit, range end, share
    int b, mode;                   // mode: 0 done, 1 one segment (set up in seg), 2 stream-K
    int ov;                        // a pair's fixed-cost units
    DecodeSeg seg;                 // the segment to run now
};

// Sets up st (all threads call it): the uniform plan (one segment from the block indices) or
// the balanced one (block-wide scan of the tiles of every sequence).
template <int BN, int NTH, int SEG_TILES>
__device__ __forceinline__ void decode_plan_init(const DecodeParams &p, DecodePlanState &st) {
    __shared__ long long s_part[NTH / 32];
    __shared__ int s_max[NTH / 32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (!p.balanced) {  // the uniform plan: this CTA = split blockIdx.x of (sequence z, group y)
        if (tid == 0) {
            DecodeSeg &sg = st.seg;
            sg.b = blockIdx.z, sg.hk = blockIdx.y / p.nchunks, sg.chunk = blockIdx.y % p.nchunks;
            sg.pair = blockIdx.z * gridDim.y + blockIdx.y;
            sg.seqlen = p.seqlens[sg.b];
            sg.ks = blockIdx.x * p.split_keys, sg.ke = min(sg.ks + p.split_keys, sg.seqlen);
            sg.nseg = p.nsplits, sg.sp = blockIdx.x, sg.wbase = 0;
            sg.wstride = p.batch * p.q_len * p.hq, sg.local_rows = 0;
            st.mode = 1;
        }
        __syncthreads();
        return;
    }
    const int Y = p.hkv * p.nchunks, B = p.batch, ov = p.seg_tiles >= 0 ? p.seg_tiles : SEG_TILES;
    // units of each sequence's pairs (key tiles, at least 1 so that an empty sequence still
    // gets its zeros and -inf written, plus the fixed cost), summed over a contiguous range of
    // sequences per thread, then scanned
    const int per_t = (B + NTH - 1) / NTH, b_lo = min(B, tid * per_t), b_hi = min(B, b_lo + per_t);
    long long mine = 0;
    int mx = 0;
    for (int b = b_lo; b < b_hi; b++) {
        const int t = max(1, (__ldg(p.seqlens + b) + BN - 1) / BN);
        mine += t + ov, mx = max(mx, t);
    }
    long long incl = mine;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const long long v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
        mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    if (lane == 31) s_part[warp] = incl, s_max[warp] = mx;
    __syncthreads();
    long long total = 0;
    int maxt = 0;
#pragma unroll
    for (int w = 0; w < NTH / 32; w++) {
        if (w < warp) incl += s_part[w];
        total += s_part[w], maxt = max(maxt, s_max[w]);
    }
    const long long line = total * Y, G = gridDim.x, per = (line + G - 1) / G;
    const int c = blockIdx.x;
    // Aligned: every pair fits one CTA of this grid and of the uniform plan's wave
    // (ctas_aligned), and the longest pair is about the even share of that wave (in key tiles):
    // one CTA per pair with no merge (a uniform batch then runs exactly as unsplit)
    const long long line_t = (total - (long long)B * ov) * Y, ca = min((long long)p.ctas_aligned, G);
    const long long per_a = (line_t + p.ctas_aligned - 1) / p.ctas_aligned;
    if ((long long)B * Y <= ca && maxt <= per_a + (per_a >> 4) + 1) {
        if (tid == 0) {
            st.mode = c < B * Y ? 1 : 0;
            DecodeSeg &sg = st.seg;
            sg.b = c / Y, sg.hk = (c % Y) / p.nchunks, sg.chunk = (c % Y) % p.nchunks, sg.pair = c;
            sg.seqlen = c < B * Y ? __ldg(p.seqlens + sg.b) : 0, sg.ks = 0, sg.ke = sg.seqlen;
            sg.nseg = 1, sg.sp = 0, sg.wstride = 0, sg.local_rows = 1, sg.wbase = 0;
        }
        __syncthreads();
        return;
    }
    const long long start = c * per, end = min(start + per, line);
    if (tid == 0) st.mode = start < end ? 2 : 0, st.cur = start, st.end = end, st.per = per, st.ov = ov;
    // the sequence holding the first tile: the thread whose range of sequences covers it
    const long long excl = incl - mine;
    if (start < end && mine > 0 && excl * Y <= start && start < incl * Y) {
        long long pos = excl * Y;
        int b = b_lo;
        for (;; b++) {
            const long long len = (long long)(max(1, (__ldg(p.seqlens + b) + BN - 1) / BN) + ov) * Y;
            if (start < pos + len) break;
            pos += len;
        }
        st.b = b, st.pos = pos;
    }
    __syncthreads();
}

// The next segment into st.seg (all threads call it); false when this CTA is done.
template <int BN>
__device__ __forceinline__ bool decode_plan_next(const DecodeParams &p, DecodePlanState &st) {
    __shared__ int s_more;
    __syncthreads();  // everyone has read the last segment (and the state)
    if (threadIdx.x == 0) {
        int more = 0;
        if (st.mode == 1) {
            more = 1, st.mode = 0;
        } else if (st.mode == 2 && st.cur < st.end) {
            const int Y = p.hkv * p.nchunks, b = st.b, ov = st.ov;
            const long long pos = st.pos, cur = st.cur, per = st.per;
            const int L = __ldg(p.seqlens + b), tb = max(1, (L + BN - 1) / BN), tu = tb + ov;
            const int y = (int)((cur - pos) / tu);
            // the pair's units: [pstart, kstart) fixed cost, [kstart, pend) its key tiles
            const long long pstart = pos + (long long)y * tu, kstart = pstart + ov, pend = pstart + tu;
            if (st.end > kstart) {
                const long long from = max(cur, kstart), send = min(st.end, pend);
                DecodeSeg &sg = st.seg;
                sg.b = b, sg.hk = y / p.nchunks, sg.chunk = y % p.nchunks, sg.pair = b * Y + y;
                sg.seqlen = L, sg.ks = (int)(from - kstart) * BN, sg.ke = min(L, (int)(send - kstart) * BN);
                // the pair's segments are those of the CTAs whose ranges hold its key tiles,
                // kstart/per .. (pend-1)/per; segment (CTA c, pair q) owns partial slot c + q
                // (unique: along the line c + q grows with every segment)
                const long long cfirst = kstart / per, clast = (pend - 1) / per;
                sg.nseg = (int)(clast - cfirst + 1), sg.sp = (int)(blockIdx.x - cfirst);
                sg.wstride = p.rows_chunk, sg.local_rows = 1;
                sg.wbase = (size_t)(cfirst + sg.pair) * p.rows_chunk;
                st.cur = send;
                if (send == pos + (long long)Y * tu) st.pos = send, st.b = b + 1;
                more = 1;
            } else {
                st.cur = st.end;  // the range ends in this pair's fixed cost: nothing of it here
            }
        }
        s_more = more;
    }
    __syncthreads();
    return s_more != 0;
}

#endif
