// FP8 (e4m3fn) K/V tiles of the decode (decode_kernel.cuh with F8): the shared-memory layout of
// 1-byte tiles and the conversion of e4m3 codes to the query's 16-bit type in registers.
//
// The tiles are read with the 16-bit ldmatrix (1-byte ldmatrix needs sm_100): K non-transposed
// gives a thread 4 consecutive dims of one key, V transposed 2 dims of 2 keys. The MMAs then see
// a permutation of the sum index (K: dims {4c, 4c+2 | 4c+1, 4c+3} as k {2c, 2c+1 | 2c+8, 2c+9},
// matched by the Q fragments) and of the output columns (V: even and odd dims of 16 in two MMAs),
// which the epilogue undoes. Nothing is converted in shared memory.
#ifndef HK_ATTN_DECODE_FP8_CUH
#define HK_ATTN_DECODE_FP8_CUH

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

// Four e4m3 codes x = [c0 c1 c2 c3] (byte 0 first) -> the 16-bit pairs ev = (c0, c2) and
// od = (c1, c3) of the query's type (BF16 or fp16), exactly. A code's sign, exponent and mantissa
// bits are moved into place (the value is then code * 2^-120 for bf16, code * 2^-8 for fp16,
// subnormal codes landing on subnormals) and one fma by 2^120 / 2^8 restores the scale (exact:
// <= 4 significant bits, subnormal inputs are supported by fma.rn.{bf16,f16}x2). NaN codes
// (S.1111.111) become NaN.
template <bool BF16>
__device__ __forceinline__ void e4m3x4_to_16(uint32_t x, uint32_t &ev, uint32_t &od) {
    constexpr int SH = BF16 ? 4 : 1;  // 8 - 4 / 5 - 4 exponent bits
    constexpr uint32_t MAG = BF16 ? 0x07F007F0u : 0x3F803F80u, SGN = 0x80008000u;
    const uint32_t xe = x << 8;  // codes 0 and 2 into the high bytes of the two halves
    od = ((x >> SH) & MAG) | (x & SGN);
    ev = ((xe >> SH) & MAG) | (xe & SGN);
    constexpr uint32_t bias = BF16 ? 0x7B807B80u : 0x5C005C00u;  // 2^120 / 2^8 in both halves
    if constexpr (BF16) {
        asm("fma.rn.bf16x2 %0, %0, %1, %2;\n" : "+r"(ev) : "r"(bias), "r"(SGN));
        asm("fma.rn.bf16x2 %0, %0, %1, %2;\n" : "+r"(od) : "r"(bias), "r"(SGN));
    } else {
        asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(ev) : "r"(bias), "r"(SGN));
        asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(od) : "r"(bias), "r"(SGN));
    }
    // NaN codes: a byte of ~x & 0x7f is zero (the classic zero-byte test; rare, so a branch)
    const uint32_t nx = ~x & 0x7f7f7f7fu;
    if (__builtin_expect(((nx - 0x01010101u) & ~nx & 0x80808080u) != 0, 0)) {
        if ((nx & 0x000000ffu) == 0) ev |= 0x00007fffu;
        if ((nx & 0x0000ff00u) == 0) od |= 0x00007fffu;
        if ((nx & 0x00ff0000u) == 0) ev |= 0x7fff0000u;
        if ((nx & 0xff000000u) == 0) od |= 0x7fff0000u;
    }
}

}  // namespace hk_attn_dev

#endif
