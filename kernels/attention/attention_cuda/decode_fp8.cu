// The split-KV decode over FP8 (e4m3fn) caches: the instantiations of decode_kernel.cuh with F8
// (1-byte tiles converted in registers, decode_fp8.cuh).
#include "decode_launch.cuh"

int hk_attn_decode_fp8_launch(const DecodeParams &p, bool bf16, int d, int mt, int kv, cudaStream_t st) {
    return hk_attn_decode::decode_launch<true>(p, bf16, d, mt, kv, st);
}
