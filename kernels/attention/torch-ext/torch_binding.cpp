// torch-ext binding of the attention kernels (kernel-builder style). Registers, under the namespace
// ATTN_OPS_NAMESPACE (the variant's metadata id, so several builds can live in one process):
//   varlen_fwd(Tensor(a!) out, Tensor(b!) lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q,
//              Tensor cu_seqlens_k, int max_seqlen_q, bool causal, float scale) -> ()
//       q [Tq,Hq,D], k/v [Tk,Hkv,D], out like q, lse float32 [Hq,Tq], cu_seqlens int32 [B+1]
//   decode_fwd(Tensor(a!) out, Tensor(b!) lse, Tensor q, Tensor k_cache, Tensor v_cache,
//              Tensor seqlens_k, Tensor? block_table, int max_seqlen_k, float scale,
//              Tensor(c!) workspace) -> ()
//       q/out [B,q_len<=8,Hq,D], lse float32 [B,q_len,Hq], seqlens_k int32 [B]; cache [B,S,Hkv,D]
//       (any strides with a unit last stride, e.g. SDPA's [B,Hkv,S,D] transposed to [B,S,Hkv,D])
//       or, with block_table int32 [B,max_blocks], paged [num_blocks,block_size,Hkv,D];
//       workspace uint8, zero-filled once, >= decode_workspace_bytes(...) bytes, or empty (then
//       one split is used)
//   decode_fp8_fwd(Tensor(a!) out, Tensor(b!) lse, Tensor q, Tensor k_cache, Tensor v_cache,
//              Tensor k_scale, Tensor v_scale, Tensor seqlens_k, Tensor? block_table,
//              int max_seqlen_k, float scale, Tensor(c!) workspace) -> ()
//       decode_fwd over an FP8 cache: k/v_cache torch.float8_e4m3fn, same shapes and strides;
//       k_scale / v_scale float32 on q's device with 1 (per tensor) or Hkv (per kv head)
//       elements; dequantised value = code * scale
//   decode_workspace_bytes(int batch, int q_len, int num_heads_q, int num_heads_kv, int head_dim,
//              int max_seqlen_k) -> int
// The argument order is the tvm-ffi binding's (tvm-ffi-ext/tvm_ffi_binding.cpp). Semantics in
// attention_cpu/hk_attention.h. CUDA tensors run the CUDA kernels on torch's current stream of
// their device; CPU tensors the C implementation; Meta runs the checks only (torch.compile).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <optional>

#include "../attention_cpu/hk_attention.h"
#include "../attention_cuda/hk_attention_cuda.h"

#ifndef ATTN_OPS_NAMESPACE
#error "define ATTN_OPS_NAMESPACE as the kernel id, e.g. _attention_cuda_abc1234"
#endif

namespace {

hk_attn_dtype act_dtype(const char *op, const at::Tensor &q) {
    if (q.scalar_type() == at::kBFloat16) return HK_ATTN_BF16;
    TORCH_CHECK(q.scalar_type() == at::kHalf, op, ": `q` has dtype ", q.scalar_type(),
                "; supported: bfloat16, float16");
    return HK_ATTN_FP16;
}

void want(const char *op, const char *name, const at::Tensor &t, int64_t ndim, const at::Tensor &q,
          at::ScalarType dtype, bool contiguous = true) {
    TORCH_CHECK(t.dim() == ndim, op, ": `", name, "` has shape ", t.sizes(), "; expected ", ndim,
                " dimensions");
    TORCH_CHECK(t.device() == q.device(), op, ": `", name, "` is on ", t.device(), " but `q` is on ",
                q.device(), "; put every tensor on one device");
    TORCH_CHECK(t.scalar_type() == dtype, op, ": `", name, "` has dtype ", t.scalar_type(),
                "; expected ", dtype);
    TORCH_CHECK(!contiguous || t.is_contiguous(), op, ": `", name, "` (shape ", t.sizes(),
                ", strides ", t.strides(), ") is not contiguous; call .contiguous() first");
}

void check_device(const char *op, const at::Tensor &q) {
    TORCH_CHECK(q.is_cuda() || q.is_cpu() || q.is_meta(), op, ": tensors are on ", q.device(),
                "; this kernel takes cuda or cpu tensors");
}

void check_rc(const char *op, int rc) {
    TORCH_CHECK(rc != HK_ATTN_EINVAL, op,
                ": the kernel rejected the arguments (CUDA needs head_dim 64 or 128, 16-byte "
                "aligned tensors and cache strides that are multiples of 8 elements)");
    TORCH_CHECK(rc != HK_ATTN_ENOMEM, op, ": out of memory (CPU scratch)");
    TORCH_CHECK(rc == HK_ATTN_OK, op, ": CUDA launch failed (rc ", rc, ", ",
                cudaGetErrorString(cudaGetLastError()), ")");
}

struct Varlen {
    hk_attn_dtype dt;
    int64_t batch, tq, hq, hkv, d;
};

Varlen check_varlen(const at::Tensor &out, const at::Tensor &lse, const at::Tensor &q,
                    const at::Tensor &k, const at::Tensor &v, const at::Tensor &cu_q,
                    const at::Tensor &cu_k, int64_t max_seqlen_q, double scale) {
    const char *op = "varlen_fwd";
    check_device(op, q);
    Varlen p{};
    p.dt = act_dtype(op, q);
    want(op, "q", q, 3, q, q.scalar_type());
    want(op, "k", k, 3, q, q.scalar_type());
    want(op, "v", v, 3, q, q.scalar_type());
    want(op, "out", out, 3, q, q.scalar_type());
    want(op, "lse", lse, 2, q, at::kFloat);
    want(op, "cu_seqlens_q", cu_q, 1, q, at::kInt);
    want(op, "cu_seqlens_k", cu_k, 1, q, at::kInt);
    p.tq = q.size(0), p.hq = q.size(1), p.d = q.size(2), p.hkv = k.size(1);
    TORCH_CHECK(out.sizes() == q.sizes(), op, ": `out` has shape ", out.sizes(), " but `q` has ",
                q.sizes(), "; they must match");
    TORCH_CHECK(k.size(2) == p.d && v.sizes() == k.sizes(), op, ": `k` ", k.sizes(), " / `v` ",
                v.sizes(), " do not fit `q` ", q.sizes(), " (expected [Tk, Hkv, D] each, D = ", p.d,
                ")");
    TORCH_CHECK(p.hkv > 0 && p.hq % p.hkv == 0, op, ": num_heads_q (", p.hq,
                ") must be a multiple of num_heads_kv (", p.hkv, ")");
    TORCH_CHECK(lse.size(0) == p.hq && lse.size(1) == p.tq, op, ": `lse` has shape ", lse.sizes(),
                "; expected [", p.hq, ", ", p.tq, "] ([Hq, Tq])");
    TORCH_CHECK(cu_q.size(0) >= 1 && cu_k.size(0) == cu_q.size(0), op,
                ": cu_seqlens_q (", cu_q.size(0), " entries) and cu_seqlens_k (", cu_k.size(0),
                ") must both have batch + 1 entries");
    TORCH_CHECK(max_seqlen_q >= 0 && max_seqlen_q <= INT32_MAX && p.tq <= INT32_MAX &&
                    k.size(0) <= INT32_MAX,
                op, ": sequence lengths must fit in int32 (max_seqlen_q = ", max_seqlen_q, ")");
    TORCH_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
    p.batch = cu_q.size(0) - 1;
    return p;
}

void varlen_fwd(at::Tensor &out, at::Tensor &lse, const at::Tensor &q, const at::Tensor &k,
                const at::Tensor &v, const at::Tensor &cu_q, const at::Tensor &cu_k,
                int64_t max_seqlen_q, bool causal, double scale) {
    const char *op = "varlen_fwd";
    const Varlen p = check_varlen(out, lse, q, k, v, cu_q, cu_k, max_seqlen_q, scale);
    if (q.is_cuda()) {
        const c10::cuda::CUDAGuard guard(q.device());
        check_rc(op, hk_attn_prefill_cuda(out.data_ptr(), lse.data_ptr<float>(), q.data_ptr(),
                                          k.data_ptr(), v.data_ptr(), cu_q.data_ptr<int32_t>(),
                                          cu_k.data_ptr<int32_t>(), (int)p.batch, (int)max_seqlen_q,
                                          (int)p.tq, (int)k.size(0), (int)p.hq, (int)p.hkv, (int)p.d, p.dt, causal,
                                          (float)scale,
                                          at::cuda::getCurrentCUDAStream(q.get_device()).stream()));
        return;
    }
    const int32_t *cq = cu_q.data_ptr<int32_t>(), *ck = cu_k.data_ptr<int32_t>();
    TORCH_CHECK(cq[0] == 0 && ck[0] == 0 && cq[p.batch] == p.tq && ck[p.batch] == k.size(0), op,
                ": cu_seqlens_q/k must start at 0 and end at the token counts of q (", p.tq,
                ") / k (", k.size(0), ")");
    for (int64_t b = 0; b < p.batch; b++)
        TORCH_CHECK(cq[b + 1] >= cq[b] && ck[b + 1] >= ck[b] && cq[b + 1] - cq[b] <= max_seqlen_q,
                    op, ": cu_seqlens must be non-decreasing with lengths <= max_seqlen_q (entry ",
                    b, ")");
    check_rc(op, hk_attn_prefill_cpu(static_cast<uint16_t *>(out.data_ptr()), lse.data_ptr<float>(),
                                     static_cast<const uint16_t *>(q.data_ptr()),
                                     static_cast<const uint16_t *>(k.data_ptr()),
                                     static_cast<const uint16_t *>(v.data_ptr()), cq, ck,
                                     (int)p.batch, (int)p.hq, (int)p.hkv, (int)p.d, p.dt, causal,
                                     (float)scale));
}

void varlen_fwd_meta(at::Tensor &out, at::Tensor &lse, const at::Tensor &q, const at::Tensor &k,
                     const at::Tensor &v, const at::Tensor &cu_q, const at::Tensor &cu_k,
                     int64_t max_seqlen_q, bool, double scale) {
    check_varlen(out, lse, q, k, v, cu_q, cu_k, max_seqlen_q, scale);
}

struct Decode {
    hk_attn_dtype dt;
    bool paged;
    int64_t b, ql, hq, hkv, d;
    hk_attn_kv_cache kv;
};

// Elements of a 0-d / 1-d FP8 scale tensor. Under torch.compile's dynamic shapes (fake tensors in
// the Meta kernel) numel() throws on a symbolic size; guard_int specialises the count instead (a
// scale's length is part of the model, not of the batch).
static int64_t scale_count(const at::Tensor &t) { return t.sym_numel().guard_int(__FILE__, __LINE__); }

// ks/vs: the FP8 scales (k/v_cache then float8_e4m3fn), or null for a 16-bit cache.
Decode check_decode(const at::Tensor &out, const at::Tensor &lse, const at::Tensor &q,
                    const at::Tensor &kc, const at::Tensor &vc, const at::Tensor &seqlens,
                    const std::optional<at::Tensor> &block_table, int64_t max_seqlen_k,
                    double scale, const at::Tensor &workspace, const at::Tensor *ks = nullptr,
                    const at::Tensor *vs = nullptr) {
    const char *op = ks ? "decode_fp8_fwd" : "decode_fwd";
    check_device(op, q);
    Decode p{};
    p.dt = act_dtype(op, q);
    want(op, "q", q, 4, q, q.scalar_type());
    want(op, "out", out, 4, q, q.scalar_type());
    want(op, "lse", lse, 3, q, at::kFloat);
    const at::ScalarType cache_type = ks ? at::kFloat8_e4m3fn : q.scalar_type();
    want(op, "k_cache", kc, 4, q, cache_type, false);
    want(op, "v_cache", vc, 4, q, cache_type, false);
    if (ks) {
        TORCH_CHECK(ks->dim() <= 1 && vs->dim() <= 1, op, ": k_scale / v_scale must be 0-d or 1-d, got ",
                    ks->sizes(), " / ", vs->sizes());
        want(op, "k_scale", *ks, ks->dim(), q, at::kFloat);
        want(op, "v_scale", *vs, vs->dim(), q, at::kFloat);
        const int64_t nks = scale_count(*ks), nvs = scale_count(*vs);
        TORCH_CHECK(nks == nvs && (nks == 1 || nks == kc.size(2)), op,
                    ": k_scale (", nks, " elements) and v_scale (", nvs,
                    ") must both have 1 (per tensor) or Hkv = ", kc.size(2), " (per kv head) elements");
    }
    want(op, "seqlens_k", seqlens, 1, q, at::kInt);
    p.paged = block_table.has_value() && block_table->numel() > 0;
    if (p.paged) want(op, "block_table", *block_table, 2, q, at::kInt);
    p.b = q.size(0), p.ql = q.size(1), p.hq = q.size(2), p.d = q.size(3), p.hkv = kc.size(2);
    TORCH_CHECK(out.sizes() == q.sizes(), op, ": `out` has shape ", out.sizes(), " but `q` has ",
                q.sizes(), "; they must match");
    TORCH_CHECK(vc.sizes() == kc.sizes() && vc.strides() == kc.strides(), op, ": `v_cache` (shape ",
                vc.sizes(), ", strides ", vc.strides(), ") must have k_cache's shape ", kc.sizes(),
                " and strides ", kc.strides());
    TORCH_CHECK(kc.size(3) == p.d && kc.stride(3) == 1, op, ": k_cache ", kc.sizes(),
                " must be [*, *, Hkv, D] with D = ", p.d, " and a unit last stride");
    TORCH_CHECK(p.hkv > 0 && p.hq % p.hkv == 0, op, ": num_heads_q (", p.hq,
                ") must be a multiple of num_heads_kv (", p.hkv, ")");
    TORCH_CHECK(lse.size(0) == p.b && lse.size(1) == p.ql && lse.size(2) == p.hq, op,
                ": `lse` has shape ", lse.sizes(), "; expected [", p.b, ", ", p.ql, ", ", p.hq,
                "] ([B, q_len, Hq])");
    TORCH_CHECK(seqlens.size(0) == p.b, op, ": seqlens_k has ", seqlens.size(0),
                " entries; expected batch = ", p.b);
    TORCH_CHECK(p.ql >= 1 && p.ql <= 8, op, ": q_len must be 1..8, got ", p.ql);
    TORCH_CHECK(p.paged || kc.size(0) == p.b, op, ": a contiguous k_cache must be [B, S, Hkv, D] "
                "with B = ", p.b, ", got ", kc.sizes(), " (or pass a block_table)");
    TORCH_CHECK(!p.paged || block_table->size(0) == p.b, op, ": block_table has shape ",
                block_table->sizes(), "; expected [", p.b, ", max_blocks]");
    TORCH_CHECK(max_seqlen_k >= 0 && max_seqlen_k <= INT32_MAX, op,
                ": max_seqlen_k must fit in int32, got ", max_seqlen_k);
    TORCH_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
    TORCH_CHECK(workspace.numel() == 0 ||
                    (workspace.device() == q.device() && workspace.is_contiguous()),
                op, ": `workspace` must be a contiguous tensor on q's device (or empty)");
    p.kv.stride_block = kc.stride(0), p.kv.stride_token = kc.stride(1),
    p.kv.stride_head = kc.stride(2);
    TORCH_CHECK(!ks || ((p.kv.stride_block | p.kv.stride_token | p.kv.stride_head) & 15) == 0 || !q.is_cuda(),
                op, ": FP8 cache strides ", kc.strides(), " must be multiples of 16 elements on CUDA");
    if (p.paged) {
        p.kv.block_size = (int)kc.size(1);
        p.kv.max_blocks_per_seq = (int)block_table->size(1);
    }
    return p;
}

// decode_fwd and decode_fp8_fwd (ks/vs non-null: an FP8 cache and its scales).
void decode_any(at::Tensor &out, at::Tensor &lse, const at::Tensor &q, const at::Tensor &kc,
                const at::Tensor &vc, const at::Tensor *ks, const at::Tensor *vs, const at::Tensor &seqlens,
                const std::optional<at::Tensor> &block_table, int64_t max_seqlen_k, double scale,
                at::Tensor &workspace) {
    Decode p = check_decode(out, lse, q, kc, vc, seqlens, block_table, max_seqlen_k, scale, workspace, ks, vs);
    const char *op = ks ? "decode_fp8_fwd" : "decode_fwd";
    p.kv.k = static_cast<const uint16_t *>(kc.data_ptr());
    p.kv.v = static_cast<const uint16_t *>(vc.data_ptr());
    if (p.paged) p.kv.block_table = block_table->data_ptr<int32_t>();
    hk_attn_kv_cache_fp8 kv8{};
    if (ks) {
        kv8.k = static_cast<const uint8_t *>(kc.data_ptr()), kv8.v = static_cast<const uint8_t *>(vc.data_ptr());
        kv8.stride_block = p.kv.stride_block, kv8.stride_token = p.kv.stride_token, kv8.stride_head = p.kv.stride_head;
        kv8.block_table = p.kv.block_table, kv8.block_size = p.kv.block_size;
        kv8.max_blocks_per_seq = p.kv.max_blocks_per_seq;
        kv8.k_scale = ks->data_ptr<float>(), kv8.v_scale = vs->data_ptr<float>();
        kv8.scale_per_head = scale_count(*ks) > 1 ? 1 : 0;
    }
    if (q.is_cuda()) {
        const c10::cuda::CUDAGuard guard(q.device());
        int splits = hk_attn_decode_cuda_num_splits((int)p.b, (int)p.ql, (int)p.hq, (int)p.hkv,
                                                    (int)p.d, (int)max_seqlen_k,
                                                    p.paged ? p.kv.block_size : 0);
        const size_t need = hk_attn_decode_cuda_workspace_size((int)p.b, (int)p.ql, (int)p.hq,
                                                               (int)p.d, splits);
        const size_t have = (size_t)workspace.numel() * workspace.element_size();
        if (have < need) splits = 1;
        void *ws = splits > 1 ? workspace.data_ptr() : nullptr;
        void *st = at::cuda::getCurrentCUDAStream(q.get_device()).stream();
        check_rc(op, ks ? hk_attn_decode_fp8_cuda(out.data_ptr(), lse.data_ptr<float>(), q.data_ptr(), &kv8,
                                                  seqlens.data_ptr<int32_t>(), (int)p.b, (int)p.ql, (int)p.hq,
                                                  (int)p.hkv, (int)p.d, (int)max_seqlen_k, p.dt, (float)scale,
                                                  splits, ws, have, st)
                        : hk_attn_decode_cuda(out.data_ptr(), lse.data_ptr<float>(), q.data_ptr(), &p.kv,
                                              seqlens.data_ptr<int32_t>(), (int)p.b, (int)p.ql, (int)p.hq,
                                              (int)p.hkv, (int)p.d, (int)max_seqlen_k, p.dt, (float)scale,
                                              splits, ws, have, st));
        return;
    }
    const int32_t *sl = seqlens.data_ptr<int32_t>();
    const int64_t cap = p.paged ? kc.size(1) * block_table->size(1) : kc.size(1);
    for (int64_t i = 0; i < p.b; i++)
        TORCH_CHECK(sl[i] >= 0 && sl[i] <= cap, op, ": seqlens_k[", i, "] = ", sl[i],
                    " is outside [0, ", cap, "] (the cache capacity of a sequence)");
    if (p.paged) {
        const int32_t *bt = p.kv.block_table;
        for (int64_t i = 0; i < block_table->numel(); i++)
            TORCH_CHECK(bt[i] >= 0 && bt[i] < kc.size(0), op, ": block_table entry ", bt[i],
                        " is out of range [0, ", kc.size(0), ")");
    }
    uint16_t *o16 = static_cast<uint16_t *>(out.data_ptr());
    const uint16_t *q16 = static_cast<const uint16_t *>(q.data_ptr());
    check_rc(op, ks ? hk_attn_decode_fp8_cpu(o16, lse.data_ptr<float>(), q16, &kv8, sl, (int)p.b, (int)p.ql,
                                             (int)p.hq, (int)p.hkv, (int)p.d, p.dt, (float)scale)
                    : hk_attn_decode_cpu(o16, lse.data_ptr<float>(), q16, &p.kv, sl, (int)p.b, (int)p.ql,
                                         (int)p.hq, (int)p.hkv, (int)p.d, p.dt, (float)scale));
}

void decode_fwd(at::Tensor &out, at::Tensor &lse, const at::Tensor &q, const at::Tensor &kc,
                const at::Tensor &vc, const at::Tensor &seqlens,
                const std::optional<at::Tensor> &block_table, int64_t max_seqlen_k, double scale,
                at::Tensor &workspace) {
    decode_any(out, lse, q, kc, vc, nullptr, nullptr, seqlens, block_table, max_seqlen_k, scale, workspace);
}

void decode_fp8_fwd(at::Tensor &out, at::Tensor &lse, const at::Tensor &q, const at::Tensor &kc,
                    const at::Tensor &vc, const at::Tensor &ks, const at::Tensor &vs, const at::Tensor &seqlens,
                    const std::optional<at::Tensor> &block_table, int64_t max_seqlen_k, double scale,
                    at::Tensor &workspace) {
    decode_any(out, lse, q, kc, vc, &ks, &vs, seqlens, block_table, max_seqlen_k, scale, workspace);
}

void decode_fwd_meta(at::Tensor &out, at::Tensor &lse, const at::Tensor &q, const at::Tensor &kc,
                     const at::Tensor &vc, const at::Tensor &seqlens,
                     const std::optional<at::Tensor> &block_table, int64_t max_seqlen_k,
                     double scale, at::Tensor &workspace) {
    check_decode(out, lse, q, kc, vc, seqlens, block_table, max_seqlen_k, scale, workspace);
}

void decode_fp8_fwd_meta(at::Tensor &out, at::Tensor &lse, const at::Tensor &q, const at::Tensor &kc,
                         const at::Tensor &vc, const at::Tensor &ks, const at::Tensor &vs,
                         const at::Tensor &seqlens, const std::optional<at::Tensor> &block_table,
                         int64_t max_seqlen_k, double scale, at::Tensor &workspace) {
    check_decode(out, lse, q, kc, vc, seqlens, block_table, max_seqlen_k, scale, workspace, &ks, &vs);
}

int64_t decode_workspace_bytes(int64_t b, int64_t ql, int64_t hq, int64_t hkv, int64_t d,
                               int64_t max_seqlen_k) {
    TORCH_CHECK(b >= 0 && ql >= 1 && ql <= 8 && hq > 0 && hkv > 0 && d > 0 && max_seqlen_k >= 0 &&
                    b <= INT32_MAX && hq <= INT32_MAX && max_seqlen_k <= INT32_MAX,
                "decode_workspace_bytes: arguments out of range (batch ", b, ", q_len ", ql,
                ", heads ", hq, "/", hkv, ", head_dim ", d, ", max_seqlen_k ", max_seqlen_k, ")");
    // the larger of the two heuristics (paged uses more splits), so one workspace fits both
    const int splits = hk_attn_decode_cuda_num_splits((int)b, (int)ql, (int)hq, (int)hkv, (int)d,
                                                      (int)max_seqlen_k, 1);
    return (int64_t)hk_attn_decode_cuda_workspace_size((int)b, (int)ql, (int)hq, (int)d, splits);
}

}  // namespace

// One more macro level so that ATTN_OPS_NAMESPACE is expanded before TORCH_LIBRARY pastes it.
#define ATTN_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define ATTN_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

ATTN_LIBRARY(ATTN_OPS_NAMESPACE, m) {
    m.def("varlen_fwd(Tensor(a!) out, Tensor(b!) lse, Tensor q, Tensor k, Tensor v, "
          "Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, bool causal, float scale) -> ()");
    m.def("decode_fwd(Tensor(a!) out, Tensor(b!) lse, Tensor q, Tensor k_cache, Tensor v_cache, "
          "Tensor seqlens_k, Tensor? block_table, int max_seqlen_k, float scale, "
          "Tensor(c!) workspace) -> ()");
    m.def("decode_fp8_fwd(Tensor(a!) out, Tensor(b!) lse, Tensor q, Tensor k_cache, Tensor v_cache, "
          "Tensor k_scale, Tensor v_scale, Tensor seqlens_k, Tensor? block_table, int max_seqlen_k, "
          "float scale, Tensor(c!) workspace) -> ()");
    m.def("decode_workspace_bytes(int batch, int q_len, int num_heads_q, int num_heads_kv, "
          "int head_dim, int max_seqlen_k) -> int",
          &decode_workspace_bytes);
}

ATTN_LIBRARY_IMPL(ATTN_OPS_NAMESPACE, CUDA, m) {
    m.impl("varlen_fwd", &varlen_fwd);
    m.impl("decode_fwd", &decode_fwd);
    m.impl("decode_fp8_fwd", &decode_fp8_fwd);
}

ATTN_LIBRARY_IMPL(ATTN_OPS_NAMESPACE, CPU, m) {
    m.impl("varlen_fwd", &varlen_fwd);
    m.impl("decode_fwd", &decode_fwd);
    m.impl("decode_fp8_fwd", &decode_fp8_fwd);
}

ATTN_LIBRARY_IMPL(ATTN_OPS_NAMESPACE, Meta, m) {
    m.impl("varlen_fwd", &varlen_fwd_meta);
    m.impl("decode_fwd", &decode_fwd_meta);
    m.impl("decode_fp8_fwd", &decode_fp8_fwd_meta);
}

#ifdef ATTN_PYINIT
// An empty module, so that `from . import <id>` works too (the abi3 convention of torch variants).
#define Py_LIMITED_API 0x03090000
#include <Python.h>
#define ATTN_CAT_(a, b) a##b
#define ATTN_CAT(a, b) ATTN_CAT_(a, b)
#define ATTN_STR_(a) #a
#define ATTN_STR(a) ATTN_STR_(a)
extern "C" __attribute__((visibility("default"))) PyObject *ATTN_CAT(PyInit_, ATTN_OPS_NAMESPACE)(void) {
    static PyModuleDef def = {PyModuleDef_HEAD_INIT, ATTN_STR(ATTN_OPS_NAMESPACE), nullptr, 0,
                              nullptr, nullptr, nullptr, nullptr, nullptr};
    return PyModule_Create(&def);
}
#endif
