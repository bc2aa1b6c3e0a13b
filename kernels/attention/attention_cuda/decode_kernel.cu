// The split-KV decode over 16-bit (bf16/fp16) caches: the instantiations of decode_kernel.cuh.
#include "decode_launch.cuh"

int hk_attn_decode_launch(const DecodeParams &p, bool bf16, int d, int mt, int kv, cudaStream_t st) {
    return hk_attn_decode::decode_launch<false>(p, bf16, d, mt, kv, st);
}
