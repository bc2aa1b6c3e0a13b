// A C++ serving binary linked with libtorch gets the RMSNorm kernel's *torch* variant with hubkern
// and calls its op through the c10 dispatcher. No Python in the process.
//
// hubkern loads `<id>.abi3.so` into this process (libtorch is already here, because we link it);
// the library's static initializers register its ops under the namespace `<id>` (metadata id);
// hk_kernel_torch_namespace() gives that namespace and the dispatcher finds `<id>::rms_norm`.
//
// usage: rmsnorm_torch (--local DIR | --repo ORG/NAME --version N [--cache DIR] [--endpoint URL]
//                       [--offline]) [--rows R] [--hidden H]
// Build (see examples/gpu/h200_proof.sh):
//   g++ -std=c++17 $(torch include flags) -I libhub/include rmsnorm_torch.cpp -L<torch lib>
//       -Wl,--no-as-needed -ltorch_cuda -lc10_cuda -ltorch_cpu -ltorch -lc10 -Wl,--as-needed -lhubkern
#include <hubkern.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

static int fail(const char *what) {
    std::fprintf(stderr, "%s failed [%s]: %s\n", what, hk_error_name(hk_last_error_code()), hk_last_error());
    return 1;
}

int main(int argc, char **argv) {
    hk_get_kernel_options o;
    hk_get_kernel_options_init(&o, HK_GET_KERNEL_OPTIONS_VERSION);
    const char *local = nullptr;
    int64_t rows = 256, hidden = 4096;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--offline") { o.hub_options.offline = 1; continue; }
        if (!v) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); return 2; }
        if (a == "--local") local = v;
        else if (a == "--repo") o.repo_id = v;
        else if (a == "--version") o.kernel_version = std::atoi(v);
        else if (a == "--cache") o.hub_options.cache_dir = v;
        else if (a == "--endpoint") o.hub_options.endpoint = v;
        else if (a == "--rows") rows = std::atoll(v);
        else if (a == "--hidden") hidden = std::atoll(v);
        else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
        i++;
    }
    if (!at::hasCUDA()) { std::fprintf(stderr, "libtorch has no CUDA backend in this process\n"); return 1; }

    hk_kernel *k = nullptr;
    int rc = local ? hk_get_local_kernel(&k, local, &o) : hk_get_kernel(&k, &o);
    if (rc != HK_OK) return fail(local ? "hk_get_local_kernel" : "hk_get_kernel");
    const hk_kernel_metadata *md = hk_kernel_get_metadata(k);
    std::printf("variant   %s (%s)\n", hk_kernel_variant(k),
                hk_kernel_get_kind(k) == HK_KERNEL_TORCH ? "torch" : "not torch");
    std::printf("library   %s\n", hk_kernel_library_path(k) ? hk_kernel_library_path(k) : "(none)");
    if (hk_kernel_get_kind(k) != HK_KERNEL_TORCH) {
        std::fprintf(stderr, "expected a torch variant (is libtorch linked into this program?)\n");
        return 1;
    }
    std::string ns = hk_kernel_torch_namespace(k);
    std::printf("namespace %s (metadata id of %s v%d)\n", ns.c_str(), md->name, md->version);

    auto op = c10::Dispatcher::singleton().findSchemaOrThrow((ns + "::rms_norm").c_str(), "");
    std::ostringstream schema;
    schema << op.schema();
    std::printf("schema    %s\n", schema.str().c_str());

    const double eps = 1e-6;
    int status = 0;
    for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        auto opts = at::TensorOptions().device(at::kCUDA, 0).dtype(dtype);
        at::Tensor x = at::randn({rows, hidden}, opts) * 3.0;
        at::Tensor w = at::rand({hidden}, opts) + 0.5;
        at::Tensor out = at::full({rows, hidden}, NAN, opts);
        // boxed call: the stack holds the schema's arguments in order
        std::vector<c10::IValue> stack{out, x, w, eps};
        op.callBoxed(&stack);
        at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
        at::Tensor ref = xd * at::rsqrt(xd.pow(2).mean({-1}, true) + eps) * wd;
        double err = (out.to(at::kDouble) - ref).abs().max().item<double>();
        double scale = ref.abs().max().item<double>();
        double tol = dtype == at::kFloat ? 1e-4 : dtype == at::kHalf ? 1e-2 * scale : 2e-2 * scale;
        bool ok = err <= tol;
        // the same op through the typed (unboxed) path
        at::Tensor out2 = at::empty_like(x);
        bool same = false;
        try {
            op.typed<void(at::Tensor &, const at::Tensor &, const at::Tensor &, double)>().call(out2, x, w, eps);
            same = at::equal(out, out2);
        } catch (const std::exception &e) {
            std::printf("typed call refused: %s\n", e.what());
        }
        std::printf("call      %s::rms_norm on %lldx%lld %s CUDA tensors: max |error| %.3g (tol %.3g) %s; "
                    "typed call identical: %s\n",
                    ns.c_str(), (long long)rows, (long long)hidden, c10::toString(dtype), err, tol,
                    ok ? "ok" : "FAILED", same ? "yes" : "NO");
        if (!ok || !same) status = 1;
    }
    hk_kernel_unref(k);
    return status;
}
