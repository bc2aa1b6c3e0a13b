#!/usr/bin/env bash
# FlashInfer's norm module for the RMSNorm benchmark, built here (no GPU) for sm_90a and packed to carry
# to the H200, where it loads with JIT disabled (unpack DEST.tar.xz there, then
# bench/rmsnorm_sweep.py --flashinfer <the dir holding flashinfer/>):
#   kernels/rmsnorm/benchmarks/flashinfer_prep.sh WHEEL TVM_FFI_SITE WORKDIR DEST
# writes DEST/flashinfer/ (58 MB of Python sources, mostly other ops) and DEST.tar.xz (7.4 MB)
# WHEEL: flashinfer_python-0.7.2.post1-py3-none-any.whl; TVM_FFI_SITE: a dir holding apache-tvm-ffi
# for this machine's python (the build imports it). The module is built by the project's shared tool,
# ../shared/tools/flashinfer/build.py (called, not copied), with the module name `norm` only (its
# prepare.sh builds every module, ~20 min more on 2 cores, none of which this benchmark needs); the
# package is unpacked and pruned the way ../shared/tools/flashinfer/prepare.sh does it.
set -euo pipefail
tool=$(cd "$(dirname "$0")/../../.." && pwd)/../shared/tools/flashinfer
whl=$(realpath "$1"); site=$(realpath "$2"); W=$(mkdir -p "$3" && realpath "$3"); dest=$(realpath -m "$4")
mkdir -p "$W/wheel" && cd "$W/wheel" && unzip -q -o "$whl"
printf '%s\n' '# minimal package init (the wheel'"'"'s own imports every submodule)' \
  'from .version import __version__ as __version__' 'from . import jit as jit' > flashinfer/__init__.py
cd "$W" && FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_WORKSPACE_BASE="$W/fibuild" \
  PYTHONPATH="$tool/standin:$W/wheel:$site" MAX_JOBS=${MAX_JOBS:-2} python3 "$tool/build.py" norm
rm -rf "$dest" && mkdir -p "$dest"
(cd "$W/wheel" && find flashinfer -path flashinfer/data -prune -o -path flashinfer/experimental -prune -o -type f \
   \( -name '*.py' -o -name '*.json' -o -name '*.typed' -o -name '*.yaml' -o -name '*.toml' \) -print |
   while read -r f; do mkdir -p "$dest/$(dirname "$f")"; cp "$f" "$dest/$f"; done)
mkdir -p "$dest/flashinfer/experimental" "$dest/flashinfer/data/csrc" "$dest/flashinfer/data/aot/norm"
cp "$W/wheel/flashinfer/experimental/"*.py "$dest/flashinfer/experimental/"
(cd "$W/wheel/flashinfer/data/csrc" && cp *.jinja norm.cu flashinfer_norm_binding.cu tvm_ffi_utils.h "$dest/flashinfer/data/csrc/")
cp "$W"/fibuild/.cache/flashinfer/*/90a/cached_ops/norm/norm.so "$dest/flashinfer/data/aot/norm/"
tar cf - -C "$dest" flashinfer | xz -2 -T2 > "$dest.tar.xz"
ls -la "$dest.tar.xz"
