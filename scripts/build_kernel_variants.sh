#!/usr/bin/env bash
# Builds the reference kernels and stages their Hub variant directories, ready for
# `hubkern publish` (or the Python `kernels` package via LOCAL_KERNELS / get_local_kernel):
#
#   <out>/rmsnorm/build/tvm-ffi01-cpu-x86_64-linux/     always (C compiler + apache-tvm-ffi)
#   <out>/rmsnorm/build/tvm-ffi01-cu130-x86_64-linux/   when nvcc is on PATH
#   <out>/rmsnorm/build/torch211-cxx11-cu130-x86_64-linux/  with --torch (needs torch + nvcc)
#
# usage: scripts/build_kernel_variants.sh [--out DIR] [--build-dir DIR] [--torch] [--no-cuda]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/out/kernels"
build="$root/build-variants"
torch=0
cuda=AUTO
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --torch) torch=1; shift ;;
    --no-cuda) cuda=OFF; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "build_kernel_variants: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
py=${PYTHON:-python3}

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHK_BUILD_TESTS=OFF \
  -DHK_BUILD_SERVER=OFF -DHK_KERNELS_CUDA="$cuda" >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target rmsnorm_hub_variants

mkdir -p "$out/rmsnorm/build"
for v in "$build"/kernels/rmsnorm/hub/build/*/; do
  name=$(basename "$v")
  rm -rf "$out/rmsnorm/build/$name"
  cp -r "$v" "$out/rmsnorm/build/$name"
  echo "staged $out/rmsnorm/build/$name"
done

if [ "$torch" = 1 ]; then
  "$py" "$root/kernels/rmsnorm/torch-ext/build_torch_variant.py" --hub "$out/rmsnorm" \
    --work "$build/kernels/rmsnorm/torch"
fi
