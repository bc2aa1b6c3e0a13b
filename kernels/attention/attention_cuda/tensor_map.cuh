// Host side of the TMA: the driver's tensor-map encoder (looked up once through cudart, so nothing
// links libcuda) and the "is this a compute capability 9.0 GPU" check the Hopper paths share.
#ifndef HK_ATTN_TENSOR_MAP_CUH
#define HK_ATTN_TENSOR_MAP_CUH

#include <cuda.h>  // CUtensorMap and its enums (types only)
#include <cuda_runtime.h>

namespace hk_tma {

using EncodeTiled = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                 const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// NULL when the driver has no encoder (older than CUDA 12).
inline EncodeTiled encoder() {
    static const EncodeTiled fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult res;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                             &res) != cudaSuccess ||
            res != cudaDriverEntryPointSuccess)
            return static_cast<EncodeTiled>(nullptr);
        return reinterpret_cast<EncodeTiled>(f);
    }();
    return fn;
}

// A tensor of rank 1 to 5 of `type` elements (dims innermost first, strides in bytes for dims
// 1..rank-1), copied in boxes with the given swizzle. False when the encoder is missing or refuses.
inline bool map_tiled(CUtensorMap *map, CUtensorMapDataType type, const void *ptr, int rank,
                      const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promo) {
    const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
    const EncodeTiled enc = encoder();
    return enc && rank >= 1 && rank <= 5 &&
           enc(map, type, rank, const_cast<void *>(ptr), dims, strides, box, elem_strides,
               CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A 16-bit tensor of rank 3 to 5 (dims innermost first, strides in bytes for dims 1..rank-1),
// copied in boxes whose inner extent is 64 elements = one 128-byte swizzle row. Elements outside
// the dims arrive as zeros. False when the encoder is missing or refuses the layout.
inline bool map_16bit(CUtensorMap *map, const void *ptr, int rank, const cuuint64_t *dims,
                      const cuuint64_t *strides, const cuuint32_t *box,
                      CUtensorMapL2promotion promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B) {
    return map_tiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, ptr, rank, dims, strides, box,
                     CU_TENSOR_MAP_SWIZZLE_128B, promo);
}

inline bool is_sm90_device() {
    int dev = 0, major = 0, minor = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
           major == 9 && minor == 0;
}

}  // namespace hk_tma

#endif
