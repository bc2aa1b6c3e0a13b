// tvm-ffi binding of the attention kernels. Exports (symbols __tvm_ffi_<name>):
//   varlen_fwd(out, lse, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal, scale)
//       q [Tq,Hq,D], k/v [Tk,Hkv,D], out like q, lse float32 [Hq,Tq], cu_seqlens int32 [B+1]
//   decode_fwd(out, lse, q, k_cache, v_cache, seqlens_k, block_table, max_seqlen_k, scale,
//              workspace)
//       q/out [B,q_len,Hq,D], lse float32 [B,q_len,Hq], seqlens_k int32 [B];
//       contiguous cache [B,S,Hkv,D] when block_table has no elements, else paged cache
//       [num_blocks,block_size,Hkv,D] with block_table int32 [B,max_blocks];
//       workspace: uint8, zero-filled once, >= workspace_bytes(...) (CUDA only; may be empty:
//       then one split is used)
//   decode_fp8_fwd(out, lse, q, k_cache, v_cache, k_scale, v_scale, seqlens_k, block_table,
//                  max_seqlen_k, scale, workspace)
//       decode_fwd over an FP8 cache: k/v_cache float8_e4m3fn (or uint8 holding e4m3fn codes, for
//       producers without an FP8 dtype, e.g. numpy), same shapes; k_scale / v_scale float32 on
//       q's device, 1 element (per tensor) or Hkv (per kv head); dequantised = code * scale
//   decode_workspace_bytes(batch, q_len, Hq, Hkv, D, max_seqlen_k) -> int
// Semantics in attention_cpu/hk_attention.h (bottom-right causal, fully masked rows -> 0/-inf).
// Every argument is checked before anything runs; errors raise ValueError/TypeError naming the
// argument. CPU tensors run the C implementation; with ATTN_WITH_CUDA, CUDA tensors run the CUDA
// kernels on the stream TVMFFIEnvGetStream returns for their device.
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../attention_cpu/hk_attention.h"
#ifdef ATTN_WITH_CUDA
#include <cuda_runtime.h>

#include "../attention_cuda/hk_attention_cuda.h"
#endif

namespace {

using tvm::ffi::TensorView;

std::string shape_str(const TensorView &t) {
    std::ostringstream os;
    os << "[";
    for (int i = 0; i < t.ndim(); i++) os << (i ? ", " : "") << t.size(i);
    os << "]";
    return os.str();
}

void *data_of(const TensorView &t) { return static_cast<char *>(t.data_ptr()) + t.byte_offset(); }

bool is_dtype(const TensorView &t, int code, int bits) {
    return t.dtype().code == code && t.dtype().bits == bits && t.dtype().lanes == 1;
}

bool same_device(const TensorView &a, const TensorView &b) {
    return a.device().device_type == b.device().device_type &&
           a.device().device_id == b.device().device_id;
}

void check_tensor(const char *op, const char *name, const TensorView &t, int ndim) {
    if (t.ndim() != ndim)
        TVM_FFI_THROW(ValueError) << op << ": `" << name << "` has shape " << shape_str(t)
                                  << "; expected " << ndim << " dimensions";
    if (!t.IsContiguous())
        TVM_FFI_THROW(ValueError) << op << ": `" << name << "` (shape " << shape_str(t)
                                  << ") is not contiguous; pass a contiguous tensor";
    if (t.data_ptr() == nullptr && t.numel() != 0)
        TVM_FFI_THROW(ValueError) << op << ": `" << name << "` has no data";
    int dt = t.device().device_type;
    bool ok = dt == kDLCPU;
#ifdef ATTN_WITH_CUDA
    ok = ok || dt == kDLCUDA;
#endif
    if (!ok)
        TVM_FFI_THROW(ValueError) << op << ": `" << name << "` is on device type " << dt
                                  << "; this build takes cpu"
#ifdef ATTN_WITH_CUDA
                                  << " or cuda"
#endif
                                  << " tensors";
}

hk_attn_dtype act_dtype(const char *op, const TensorView &q) {
    if (is_dtype(q, kDLBfloat, 16)) return HK_ATTN_BF16;
    if (is_dtype(q, kDLFloat, 16)) return HK_ATTN_FP16;
    TVM_FFI_THROW(TypeError) << op << ": `q` must be bfloat16 or float16";
    return HK_ATTN_BF16;
}

void same_as(const char *op, const char *name, const TensorView &t, const TensorView &q) {
    if (t.dtype().code != q.dtype().code || t.dtype().bits != q.dtype().bits)
        TVM_FFI_THROW(TypeError) << op << ": `" << name << "` must have q's dtype";
    if (!same_device(t, q))
        TVM_FFI_THROW(ValueError) << op << ": `" << name << "` is not on q's device";
}

void want_int32(const char *op, const char *name, const TensorView &t, const TensorView &q) {
    if (!is_dtype(t, kDLInt, 32)) TVM_FFI_THROW(TypeError) << op << ": `" << name << "` must be int32";
    if (!same_device(t, q))
        TVM_FFI_THROW(ValueError) << op << ": `" << name << "` is not on q's device";
}

void want_float32(const char *op, const char *name, const TensorView &t, const TensorView &q) {
    if (!is_dtype(t, kDLFloat, 32)) TVM_FFI_THROW(TypeError) << op << ": `" << name << "` must be float32";
    if (!same_device(t, q))
        TVM_FFI_THROW(ValueError) << op << ": `" << name << "` is not on q's device";
}

void check_rc(const char *op, int rc) {
    if (rc == HK_ATTN_EINVAL)
        TVM_FFI_THROW(ValueError) << op << ": invalid arguments (head_dim must be 64 or 128 on CUDA, "
                                           "16-byte aligned tensors, num_heads_q a multiple of num_heads_kv)";
    if (rc == HK_ATTN_ENOMEM) TVM_FFI_THROW(RuntimeError) << op << ": out of memory";
    if (rc != HK_ATTN_OK) TVM_FFI_THROW(RuntimeError) << op << ": CUDA launch failed (rc " << rc << ")";
}

void varlen_fwd(TensorView out, TensorView lse, TensorView q, TensorView k, TensorView v,
                TensorView cu_q, TensorView cu_k, int64_t max_seqlen_q, bool causal, double scale) {
    const char *op = "varlen_fwd";
    check_tensor(op, "q", q, 3), check_tensor(op, "k", k, 3), check_tensor(op, "v", v, 3);
    check_tensor(op, "out", out, 3), check_tensor(op, "lse", lse, 2);
    check_tensor(op, "cu_seqlens_q", cu_q, 1), check_tensor(op, "cu_seqlens_k", cu_k, 1);
    const hk_attn_dtype dt = act_dtype(op, q);
    same_as(op, "k", k, q), same_as(op, "v", v, q), same_as(op, "out", out, q);
    want_float32(op, "lse", lse, q), want_int32(op, "cu_seqlens_q", cu_q, q);
    want_int32(op, "cu_seqlens_k", cu_k, q);
    const int64_t tq = q.size(0), hq = q.size(1), d = q.size(2), hkv = k.size(1);
    for (int i = 0; i < 3; i++)
        if (out.size(i) != q.size(i))
            TVM_FFI_THROW(ValueError) << op << ": `out` is " << shape_str(out) << ", q is " << shape_str(q);
    if (k.size(2) != d || v.size(0) != k.size(0) || v.size(1) != hkv || v.size(2) != d)
        TVM_FFI_THROW(ValueError) << op << ": k " << shape_str(k) << " / v " << shape_str(v)
                                  << " do not match q " << shape_str(q) << " ([T, Hkv, D] each)";
    if (hkv <= 0 || hq % hkv)
        TVM_FFI_THROW(ValueError) << op << ": num_heads_q (" << hq << ") must be a multiple of num_heads_kv (" << hkv << ")";
    if (lse.size(0) != hq || lse.size(1) != tq)
        TVM_FFI_THROW(ValueError) << op << ": `lse` is " << shape_str(lse) << "; expected [" << hq << ", " << tq << "]";
    if (cu_q.size(0) < 1 || cu_k.size(0) != cu_q.size(0))
        TVM_FFI_THROW(ValueError) << op << ": cu_seqlens_q/k must both have batch+1 entries";
    if (max_seqlen_q < 0 || max_seqlen_q > INT32_MAX || tq > INT32_MAX || k.size(0) > INT32_MAX)
        TVM_FFI_THROW(ValueError) << op << ": sequence lengths must fit in int32";
    const int batch = (int)cu_q.size(0) - 1;
#ifdef ATTN_WITH_CUDA
    if (q.device().device_type == kDLCUDA) {
        void *stream = TVMFFIEnvGetStream(q.device().device_type, q.device().device_id);
        check_rc(op, hk_attn_prefill_cuda(data_of(out), static_cast<float *>(data_of(lse)), data_of(q),
                                          data_of(k), data_of(v), static_cast<int32_t *>(data_of(cu_q)),
                                          static_cast<int32_t *>(data_of(cu_k)), batch, (int)max_seqlen_q,
                                          (int)tq, (int)k.size(0), (int)hq, (int)hkv, (int)d, dt, causal,
                                          (float)scale, stream));
        return;
    }
#endif
    const int32_t *cq = static_cast<const int32_t *>(data_of(cu_q)), *ck = static_cast<const int32_t *>(data_of(cu_k));
    if (cq[batch] != tq || ck[batch] != k.size(0))
        TVM_FFI_THROW(ValueError) << op << ": cu_seqlens_q[-1] / cu_seqlens_k[-1] must equal the token counts of q / k";
    check_rc(op, hk_attn_prefill_cpu(static_cast<uint16_t *>(data_of(out)), static_cast<float *>(data_of(lse)),
                                     static_cast<const uint16_t *>(data_of(q)), static_cast<const uint16_t *>(data_of(k)),
                                     static_cast<const uint16_t *>(data_of(v)), cq, ck, batch, (int)hq, (int)hkv,
                                     (int)d, dt, causal, (float)scale));
}

// The checks and the call of decode_fwd and decode_fp8_fwd (ks/vs: the FP8 scales, else null).
void decode_any(const char *op, TensorView out, TensorView lse, TensorView q, TensorView kc, TensorView vc,
                const TensorView *ks, const TensorView *vs, TensorView seqlens, TensorView block_table,
                int64_t max_seqlen_k, double scale, TensorView workspace) {
    const bool fp8 = ks != nullptr;
    check_tensor(op, "q", q, 4), check_tensor(op, "out", out, 4), check_tensor(op, "lse", lse, 3);
    check_tensor(op, "k_cache", kc, 4), check_tensor(op, "v_cache", vc, 4);
    check_tensor(op, "seqlens_k", seqlens, 1);
    const bool paged = block_table.numel() > 0;
    if (paged) check_tensor(op, "block_table", block_table, 2);
    const hk_attn_dtype dt = act_dtype(op, q);
    if (fp8) {
        for (const auto &[name, t] : {std::pair<const char *, const TensorView &>{"k_cache", kc}, {"v_cache", vc}}) {
            if (!is_dtype(t, kDLFloat8_e4m3fn, 8) && !is_dtype(t, kDLUInt, 8))
                TVM_FFI_THROW(TypeError) << op << ": `" << name << "` must be float8_e4m3fn (or uint8 e4m3fn codes)";
            if (!same_device(t, q)) TVM_FFI_THROW(ValueError) << op << ": `" << name << "` is not on q's device";
        }
        check_tensor(op, "k_scale", *ks, 1), check_tensor(op, "v_scale", *vs, 1);
        want_float32(op, "k_scale", *ks, q), want_float32(op, "v_scale", *vs, q);
        if (ks->size(0) != vs->size(0) || (ks->size(0) != 1 && ks->size(0) != kc.size(2)))
            TVM_FFI_THROW(ValueError) << op << ": k_scale " << shape_str(*ks) << " / v_scale " << shape_str(*vs)
                                      << " must both have 1 (per tensor) or Hkv = " << kc.size(2) << " (per head) entries";
    } else {
        same_as(op, "k_cache", kc, q), same_as(op, "v_cache", vc, q);
    }
    same_as(op, "out", out, q);
    want_float32(op, "lse", lse, q), want_int32(op, "seqlens_k", seqlens, q);
    if (paged) want_int32(op, "block_table", block_table, q);
    const int64_t b = q.size(0), ql = q.size(1), hq = q.size(2), d = q.size(3);
    const int64_t s_or_bs = kc.size(1), hkv = kc.size(2);
    for (int i = 0; i < 4; i++) {
        if (out.size(i) != q.size(i))
            TVM_FFI_THROW(ValueError) << op << ": `out` is " << shape_str(out) << ", q is " << shape_str(q);
        if (vc.size(i) != kc.size(i))
            TVM_FFI_THROW(ValueError) << op << ": v_cache " << shape_str(vc) << " != k_cache " << shape_str(kc);
    }
    if (kc.size(3) != d || hkv <= 0 || hq % hkv)
        TVM_FFI_THROW(ValueError) << op << ": k_cache " << shape_str(kc) << " does not fit q " << shape_str(q);
    if (lse.size(0) != b || lse.size(1) != ql || lse.size(2) != hq)
        TVM_FFI_THROW(ValueError) << op << ": `lse` is " << shape_str(lse) << "; expected [B, q_len, Hq]";
    if (seqlens.size(0) != b) TVM_FFI_THROW(ValueError) << op << ": seqlens_k must have batch entries";
    if (ql < 1 || ql > 8) TVM_FFI_THROW(ValueError) << op << ": q_len must be 1..8, got " << ql;
    if (!paged && kc.size(0) != b)
        TVM_FFI_THROW(ValueError) << op << ": contiguous k_cache must be [B, S, Hkv, D]";
    if (paged && block_table.size(0) != b)
        TVM_FFI_THROW(ValueError) << op << ": block_table must be [B, max_blocks]";
    if (max_seqlen_k < 0 || max_seqlen_k > INT32_MAX)
        TVM_FFI_THROW(ValueError) << op << ": max_seqlen_k must fit in int32";
    hk_attn_kv_cache kv{};
    kv.k = static_cast<const uint16_t *>(data_of(kc)), kv.v = static_cast<const uint16_t *>(data_of(vc));
    kv.stride_block = s_or_bs * hkv * d, kv.stride_token = hkv * d, kv.stride_head = d;
    if (paged) {
        kv.block_table = static_cast<const int32_t *>(data_of(block_table));
        kv.block_size = (int)s_or_bs, kv.max_blocks_per_seq = (int)block_table.size(1);
    }
    hk_attn_kv_cache_fp8 kv8{};
    if (fp8) {
        kv8.k = static_cast<const uint8_t *>(data_of(kc)), kv8.v = static_cast<const uint8_t *>(data_of(vc));
        kv8.stride_block = kv.stride_block, kv8.stride_token = kv.stride_token, kv8.stride_head = kv.stride_head;
        kv8.block_table = kv.block_table, kv8.block_size = kv.block_size, kv8.max_blocks_per_seq = kv.max_blocks_per_seq;
        kv8.k_scale = static_cast<const float *>(data_of(*ks)), kv8.v_scale = static_cast<const float *>(data_of(*vs));
        kv8.scale_per_head = ks->size(0) > 1 ? 1 : 0;
    }
#ifdef ATTN_WITH_CUDA
    if (q.device().device_type == kDLCUDA) {
        void *stream = TVMFFIEnvGetStream(q.device().device_type, q.device().device_id);
        int splits = hk_attn_decode_cuda_num_splits((int)b, (int)ql, (int)hq, (int)hkv, (int)d, (int)max_seqlen_k,
                                                    paged ? kv.block_size : 0);
        size_t need = hk_attn_decode_cuda_workspace_size((int)b, (int)ql, (int)hq, (int)d, splits);
        size_t have = (size_t)workspace.numel() * (workspace.dtype().bits / 8);
        if (have < need || (have > 0 && !same_device(workspace, q))) splits = 1;
        void *ws = splits > 1 ? data_of(workspace) : nullptr;
        const int32_t *slp = static_cast<const int32_t *>(data_of(seqlens));
        float *lsep = static_cast<float *>(data_of(lse));
        check_rc(op, fp8 ? hk_attn_decode_fp8_cuda(data_of(out), lsep, data_of(q), &kv8, slp, (int)b, (int)ql, (int)hq,
                                                   (int)hkv, (int)d, (int)max_seqlen_k, dt, (float)scale, splits, ws,
                                                   have, stream)
                         : hk_attn_decode_cuda(data_of(out), lsep, data_of(q), &kv, slp, (int)b, (int)ql, (int)hq,
                                               (int)hkv, (int)d, (int)max_seqlen_k, dt, (float)scale, splits, ws,
                                               have, stream));
        return;
    }
#endif
    (void)workspace;  // the CPU path needs no scratch
    const int32_t *sl = static_cast<const int32_t *>(data_of(seqlens));
    for (int64_t i = 0; i < b; i++) {
        if (sl[i] < 0) TVM_FFI_THROW(ValueError) << op << ": seqlens_k[" << i << "] is negative";
        if (!paged && sl[i] > s_or_bs)
            TVM_FFI_THROW(ValueError) << op << ": seqlens_k[" << i << "] = " << sl[i] << " exceeds the cache length " << s_or_bs;
        if (paged && (int64_t)sl[i] > s_or_bs * block_table.size(1))
            TVM_FFI_THROW(ValueError) << op << ": seqlens_k[" << i << "] exceeds block_table capacity";
    }
    if (paged) {
        const int32_t *bt = kv.block_table;
        for (int64_t i = 0; i < block_table.numel(); i++)
            if (bt[i] < 0 || bt[i] >= kc.size(0))
                TVM_FFI_THROW(ValueError) << op << ": block_table entry " << bt[i] << " is out of range [0, " << kc.size(0) << ")";
    }
    uint16_t *outp = static_cast<uint16_t *>(data_of(out));
    const uint16_t *qp = static_cast<const uint16_t *>(data_of(q));
    float *lsep = static_cast<float *>(data_of(lse));
    check_rc(op, fp8 ? hk_attn_decode_fp8_cpu(outp, lsep, qp, &kv8, sl, (int)b, (int)ql, (int)hq, (int)hkv, (int)d, dt,
                                              (float)scale)
                     : hk_attn_decode_cpu(outp, lsep, qp, &kv, sl, (int)b, (int)ql, (int)hq, (int)hkv, (int)d, dt,
                                          (float)scale));
}

void decode_fwd(TensorView out, TensorView lse, TensorView q, TensorView kc, TensorView vc,
                TensorView seqlens, TensorView block_table, int64_t max_seqlen_k, double scale,
                TensorView workspace) {
    decode_any("decode_fwd", out, lse, q, kc, vc, nullptr, nullptr, seqlens, block_table, max_seqlen_k, scale,
               workspace);
}

void decode_fp8_fwd(TensorView out, TensorView lse, TensorView q, TensorView kc, TensorView vc, TensorView k_scale,
                    TensorView v_scale, TensorView seqlens, TensorView block_table, int64_t max_seqlen_k,
                    double scale, TensorView workspace) {
    decode_any("decode_fp8_fwd", out, lse, q, kc, vc, &k_scale, &v_scale, seqlens, block_table, max_seqlen_k,
               scale, workspace);
}

int64_t decode_workspace_bytes(int64_t b, int64_t ql, int64_t hq, int64_t hkv, int64_t d, int64_t max_seqlen_k) {
#ifdef ATTN_WITH_CUDA
    // the larger of the two heuristics (paged uses more splits), so one workspace fits both
    int splits = hk_attn_decode_cuda_num_splits((int)b, (int)ql, (int)hq, (int)hkv, (int)d, (int)max_seqlen_k, 1);
    return (int64_t)hk_attn_decode_cuda_workspace_size((int)b, (int)ql, (int)hq, (int)d, splits);
#else
    (void)b, (void)ql, (void)hq, (void)hkv, (void)d, (void)max_seqlen_k;
    return 0;
#endif
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(varlen_fwd, varlen_fwd);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(decode_fwd, decode_fwd);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(decode_fp8_fwd, decode_fp8_fwd);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(decode_workspace_bytes, decode_workspace_bytes);
