// FP8 (e4m3fn) K/V tiles of the decode (decode_kernel.cuh with F8): the shared-memory layout of
// 1-byte tiles and the conversion of e4m3 codes to fp16 in registers. The MMAs of an FP8 decode
// run in fp16 whatever the query type: every e4m3 code is an fp16 value (one cvt per 2 codes on
// sm_89+), where bf16 needs a detour through float32 (3x the instructions, and the conversions
// bound the kernel: NOTES.md v13); bf16 queries become fp16 with one power-of-two scale.
//
// The tiles are read with the 16-bit ldmatrix (1-byte ldmatrix needs sm_100): K non-transposed
// gives a thread 4 consecutive dims of one key, V transposed 2 dims of 2 keys. The MMAs then see
// a permutation of the sum index (K: dims {4c, 4c+2 | 4c+1, 4c+3} as k {2c, 2c+1 | 2c+8, 2c+9},
// matched by the Q fragments) and of the output columns (V: even and odd dims of 16 in two MMAs),
// which the epilogue undoes. Nothing is converted in shared memory.
#ifndef HK_ATTN_DECODE_FP8_CUH
#define HK_ATTN_DECODE_FP8_CUH

#include <cuda_fp16.h>
#include <stdint.h>

namespace hk_attn_dev {

// Byte offset of 16-byte chunk c (16 codes) of key row r in a [rows][D] e4m3 tile: the TMA's
// 128-byte swizzle for D = 128 and its 64-byte one for D = 64 (the cp.async path writes the same
// layout); an ldmatrix phase (8 rows, one chunk) then hits 8 different bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz8(int r, int c) {
    if constexpr (D == 128) return static_cast<uint32_t>(r * 128 + ((c ^ (r & 7)) << 4));
    else return static_cast<uint32_t>(r * 64 + ((c ^ ((r >> 1) & 3)) << 4));
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// How the codes become fp16 values (HK_ATTN_FP8_CVT, measured in NOTES.md v13):
//   0: bit moves + one fma by 2^8 (any sm_80+), NaN codes found by a zero-byte test;
//   1: the hardware's e4m3x2 -> f16x2 conversion (sm_89+), NaN exact by construction; sm_80
//      code always uses 0;
//   2: as 0 without the NaN test (NaN codes read as +-480: measurement only, not shipped).
#ifndef HK_ATTN_FP8_CVT
#define HK_ATTN_FP8_CVT 1
#endif
// Warps per CTA of the FP8 decode (8: tiles of 128 keys; 4: of 64 keys, as the 16-bit decode)
#ifndef HK_ATTN_FP8_NW
#define HK_ATTN_FP8_NW 8
#endif

// Four e4m3 codes x = [c0 c1 c2 c3] (byte 0 first) -> the fp16 pairs ev = (c0, c2) and
// od = (c1, c3), exactly; NaN codes become NaN.
__device__ __forceinline__ void e4m3x4_to_f16(uint32_t x, uint32_t &ev, uint32_t &od) {
#if HK_ATTN_FP8_CVT == 1 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const uint32_t y = prmt(x, 0, 0x3120u);  // [c0 c2 c1 c3]
    asm("{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n cvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
        : "=r"(ev), "=r"(od) : "r"(y));
#else
    // sign, exponent and mantissa bits moved into place: the value is then code * 2^-8, subnormal
    // codes on subnormals; one fma by 2^8 restores it (exact: <= 4 significant bits;
    // fma.rn.f16x2 keeps subnormal inputs)
    constexpr uint32_t MAG = 0x3F803F80u, SGN = 0x80008000u;
    const uint32_t xe = x << 8;  // codes 0 and 2 into the high bytes of the two halves
    od = ((x >> 1) & MAG) | (x & SGN);
    ev = ((xe >> 1) & MAG) | (xe & SGN);
#if HK_ATTN_FP8_CVT != 2
    // NaN codes (S.1111.111): bit 7 of each byte of z says "NaN" (v = ~x & 0x7f7f7f7f has a zero
    // byte there: v + 0x7f stays below 0x80 only for 0, no carries); prmt replicates that bit
    // over the byte's half, and an all-ones half stays NaN through the fma
    const uint32_t z = ~((~x & 0x7f7f7f7fu) + 0x7f7f7f7fu) & 0x80808080u;
    ev |= prmt(z, 0, 0xAA88u);
    od |= prmt(z, 0, 0xBB99u);
#endif
    constexpr uint32_t bias = 0x5C005C00u;  // 2^8 in both halves
    asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(ev) : "r"(bias), "r"(SGN));
    asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(od) : "r"(bias), "r"(SGN));
#endif
}

// The CTA's bf16 query tile in shared memory (W words of 2 values) -> fp16 in place, for the FP8
// decode's fp16 MMAs, scaled by one power of two 2^e per CTA that puts the largest finite |q| in
// [2^14, 2^15): every bf16 value within 28 binades of it is then exact in fp16 (fp16 has 3 more
// significand bits than bf16). Returns 2^-e, for the softmax scale. Infinite / NaN queries stay
// so (they do not set the scale). Done in shared memory, before the fragments are read: in
// registers it made the MMA=2 kernels spill. red: NTH / 32 words of shared memory. Every thread
// of the CTA calls it, after the tile is visible; the tile is visible converted on return.
template <int W, int NTH>
__device__ __forceinline__ float bf16_tile_to_f16(uint32_t *q, uint32_t *red) {
    const int tid = threadIdx.x;
    uint32_t amax = 0;  // bits of the largest finite |q| (the order of non-negative floats)
    for (int i = tid; i < W; i += NTH) {
        const uint32_t lo = (q[i] << 16) & 0x7fffffffu, hi = q[i] & 0x7fff0000u;
        amax = lo < 0x7f800000u && lo > amax ? lo : amax;  // < 0x7f800000: finite
        amax = hi < 0x7f800000u && hi > amax ? hi : amax;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if ((tid & 31) == 0) red[tid >> 5] = amax;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < NTH / 32; w++) amax = max(amax, red[w]);
    // biased exponent b: amax in [2^(b-127), 2^(b-126)), so e = 141 - b; clamped so that 2^e and
    // 2^-e are normal floats (subnormal and zero amax take the largest e)
    const int e = amax ? min(max(141 - (int)(amax >> 23), -100), 64) : 0;
    const float f = __uint_as_float((uint32_t)(127 + e) << 23);
    for (int i = tid; i < W; i += NTH) {
        __half2 h = __floats2half2_rn(__uint_as_float(q[i] << 16) * f, __uint_as_float(q[i] & 0xffff0000u) * f);
        q[i] = *reinterpret_cast<uint32_t *>(&h);
    }
    __syncthreads();
    return __uint_as_float((uint32_t)(127 - e) << 23);
}

}  // namespace hk_attn_dev

#endif
