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

// How the codes become 16-bit values (HK_ATTN_FP8_CVT, measured in NOTES.md v13):
//   0: bit moves + one fma by 2^120 / 2^8 (any sm_80+), NaN codes found by a zero-byte test;
//   1: the hardware's e4m3x2 -> f16x2 conversion (sm_89+; bf16 through float32), NaN exact by
//      construction; sm_80 code always uses 0;
//   2: as 0 without the NaN test (NaN codes read as +-480: measurement only, not shipped).
#ifndef HK_ATTN_FP8_CVT
#define HK_ATTN_FP8_CVT 1
#endif
// Warps per CTA of the FP8 decode (8: tiles of 128 keys; 4: of 64 keys, as the 16-bit decode)
#ifndef HK_ATTN_FP8_NW
#define HK_ATTN_FP8_NW 8
#endif

// Four e4m3 codes x = [c0 c1 c2 c3] (byte 0 first) -> the 16-bit pairs ev = (c0, c2) and
// od = (c1, c3) of the query's type (BF16 or fp16), exactly; NaN codes become NaN.
template <bool BF16>
__device__ __forceinline__ void e4m3x4_to_16(uint32_t x, uint32_t &ev, uint32_t &od) {
#if HK_ATTN_FP8_CVT == 1 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const uint32_t y = prmt(x, 0, 0x3120u);  // [c0 c2 c1 c3]
    uint32_t h0, h1;
    asm("{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n cvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
        : "=r"(h0), "=r"(h1) : "r"(y));
    if constexpr (BF16) {
        asm("{ .reg .f16 a, b, c, d;\n .reg .f32 fa, fb, fc, fd;\n mov.b32 {a, b}, %2;\n mov.b32 {c, d}, %3;\n"
            " cvt.f32.f16 fa, a;\n cvt.f32.f16 fb, b;\n cvt.f32.f16 fc, c;\n cvt.f32.f16 fd, d;\n"
            " cvt.rn.bf16x2.f32 %0, fb, fa;\n cvt.rn.bf16x2.f32 %1, fd, fc;\n}\n"
            : "=r"(ev), "=r"(od) : "r"(h0), "r"(h1));
    } else {
        ev = h0, od = h1;
    }
#else
    // sign, exponent and mantissa bits moved into place: the value is then code * 2^-120 (bf16)
    // or code * 2^-8 (fp16), subnormal codes on subnormals; one fma by 2^120 / 2^8 restores it
    // (exact: <= 4 significant bits; fma.rn.{bf16,f16}x2 keeps subnormal inputs)
    constexpr int SH = BF16 ? 4 : 1;  // 8 - 4 / 5 - 4 exponent bits
    constexpr uint32_t MAG = BF16 ? 0x07F007F0u : 0x3F803F80u, SGN = 0x80008000u;
    const uint32_t xe = x << 8;  // codes 0 and 2 into the high bytes of the two halves
    od = ((x >> SH) & MAG) | (x & SGN);
    ev = ((xe >> SH) & MAG) | (xe & SGN);
#if HK_ATTN_FP8_CVT != 2
    // NaN codes (S.1111.111): bit 7 of each byte of z says "NaN" (v = ~x & 0x7f7f7f7f has a zero
    // byte there: v + 0x7f stays below 0x80 only for 0, no carries); prmt replicates that bit
    // over the byte's half, and an all-ones half stays NaN through the fma
    const uint32_t z = ~((~x & 0x7f7f7f7fu) + 0x7f7f7f7fu) & 0x80808080u;
    ev |= prmt(z, 0, 0xAA88u);
    od |= prmt(z, 0, 0xBB99u);
#endif
    constexpr uint32_t bias = BF16 ? 0x7B807B80u : 0x5C005C00u;  // 2^120 / 2^8 in both halves
    if constexpr (BF16) {
        asm("fma.rn.bf16x2 %0, %0, %1, %2;\n" : "+r"(ev) : "r"(bias), "r"(SGN));
        asm("fma.rn.bf16x2 %0, %0, %1, %2;\n" : "+r"(od) : "r"(bias), "r"(SGN));
    } else {
        asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(ev) : "r"(bias), "r"(SGN));
        asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(od) : "r"(bias), "r"(SGN));
    }
#endif
}

}  // namespace hk_attn_dev

#endif
