#!/usr/bin/env bash
# Prepares, on this (GPU-less) machine, everything examples/gpu/h200_proof.sh needs on the H200,
# under DEST (default <repo>/.dev/loader, which the device tool carries):
#   bin/        hubkern, rmsnorm_example, libhubkern.so* (built here; the H200 has no -dev packages)
#   hklibs.tar.xz  the non-glibc shared libraries they need (the proof uses only the ones missing there)
#   whl/        apache-tvm-ffi 0.1.15.post2 for CPython 3.12 (libtvm_ffi + the package env detection finds)
#   cache/      a huggingface_hub cache holding hubkern/rmsnorm v1 (CPU + CUDA tvm-ffi variants),
#               pulled from a loopback mirror with `hubkern pull --all-variants`
#   refuse/     two CUDA variants the H200 must refuse: code objects for sm_100a only (metadata
#               claiming 9.0+PTX), and metadata archs 10.0a/12.0 (code objects fine)
#   rms_src/    kernels/rmsnorm sources (its torch-ext builds the torch variant there)
# usage: examples/gpu/prepare_h200.sh [BUILD_DIR] [DEST]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-h200}
dest=${2:-$root/.dev/loader}
rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/whl" "$dest/refuse"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHK_BUILD_TESTS=OFF -DHK_KERNELS_CUDA=ON >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
cp -P "$build"/libhub/libhubkern.so* "$dest/bin/"
cp "$build/cli/hubkern" "$build/examples/rmsnorm_example" "$dest/bin/"
hub="$build/kernels/rmsnorm/hub"
cuda_variant=$(cd "$hub/build" && ls -d tvm-ffi*-cu*-x86_64-linux | head -1)
[ -n "$cuda_variant" ] || { echo "no CUDA tvm-ffi variant was staged in $hub/build" >&2; exit 1; }

# runtime libraries of the prebuilt binaries, minus glibc and the C++ runtime
libs=$(mktemp -d)
mkdir "$libs/hklibs"
ldd "$build/cli/hubkern" "$build/libhub/libhubkern.so" | awk '/=>/{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libresolv|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  xargs -I{} cp -L {} "$libs/hklibs/"
tar cJf "$dest/hklibs.tar.xz" -C "$libs" hklibs
rm -rf "$libs"

python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 -d "$dest/whl" apache-tvm-ffi==0.1.15.post2

# the cache: publish the staged variants, serve them on loopback, pull every variant
work=$(mktemp -d)
"$build/cli/hubkern" publish "$hub" hubkern/rmsnorm --branch v1 --cache "$work/store" >/dev/null
"$build/cli/hubkern" serve --cache "$work/store" --port 0 --trust hubkern >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/out" && break; sleep 0.05; done
ep=$(sed -n 's/^listening on //p' "$work/out")
"$build/cli/hubkern" pull hubkern/rmsnorm --version 1 --all-variants --endpoint "$ep" --cache "$dest/cache" >/dev/null
kill $pid; wait $pid 2>/dev/null || true
rm -rf "$work"

# refusal 1: the CUDA module rebuilt for sm_100a only, metadata unchanged (claims 8.0, 9.0+PTX)
b100=$build-sm100a
cmake -S "$root" -B "$b100" -DCMAKE_BUILD_TYPE=Release -DHK_BUILD_TESTS=OFF -DHK_BUILD_SERVER=OFF \
  -DHK_KERNELS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=100a-real >/dev/null
cmake --build "$b100" -j "$(nproc)" --target rmsnorm_hub_variants >/dev/null
mkdir -p "$dest/refuse/codeobj"
cp -rL "$b100/kernels/rmsnorm/hub/build/$cuda_variant" "$dest/refuse/codeobj/"
# refusal 2: the good library, metadata listing only Blackwell archs
mkdir -p "$dest/refuse/metadata"
cp -rL "$hub/build/$cuda_variant" "$dest/refuse/metadata/"
python3 - "$dest/refuse/metadata/$cuda_variant/metadata.json" <<'PY'
import json, sys
p = sys.argv[1]
m = json.load(open(p))
m["backend"]["archs"] = ["10.0a", "12.0"]
json.dump(m, open(p, "w"), indent=2)
PY

cp -r "$root/kernels/rmsnorm" "$dest/rms_src"
rm -rf "$dest/rms_src/results" "$dest/rms_src/benchmarks"
du -sh "$dest"
echo "prepared $dest (CUDA variant $cuda_variant)"
