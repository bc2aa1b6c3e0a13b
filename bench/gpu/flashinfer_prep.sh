#!/usr/bin/env bash
# FlashInfer 0.7.2 modules for the GPU benchmarks, built here (no GPU) for sm_90a and packed to carry to
# the H200, where they load as AOT artifacts with JIT disabled (unpack DEST.tar.xz there and put the
# dir holding flashinfer/ on PYTHONPATH, or pass it to a benchmark's --flashinfer):
#   bench/gpu/flashinfer_prep.sh WHEEL TVM_FFI_SITE WORKDIR DEST [MODULES...]
# MODULES: names of ../shared/tools/flashinfer/build.py (default: norm dec_bf16 dec_fp8 pp_bf16 pp_fp8
# — the norm, the decode wrapper's CUDA-core paths, and the FA2 primary prefill modules, which both the
# decode wrapper's tensor-core path and the ragged prefill wrapper load: flashinfer/prefill.py's
# get_batch_prefill_module takes _gen_batch_prefill_primary_module for backend fa2. pf_bf16, the
# runtime-stride module, is loaded by neither; building only it left v17's prefill runs without FlashInfer).
# The modules are built by that shared tool (called, not copied); the package is unpacked and pruned
# the way its prepare.sh does. WORKDIR keeps the build cache, so a re-run builds only what is new.
set -euo pipefail
tool=$(cd "$(dirname "$0")/../.." && pwd)/../shared/tools/flashinfer
whl=$(realpath "$1"); site=$(realpath "$2"); W=$(mkdir -p "$3" && realpath "$3"); dest=$(realpath -m "$4")
shift 4
mods=("$@"); [ ${#mods[@]} -gt 0 ] || mods=(norm dec_bf16 dec_fp8 pp_bf16 pp_fp8)
mkdir -p "$W/wheel" && cd "$W/wheel" && unzip -q -o "$whl"
printf '%s\n' '# minimal package init (the wheel'"'"'s own imports every submodule)' \
  'from .version import __version__ as __version__' 'from . import jit as jit' > flashinfer/__init__.py
cd "$W" && FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_WORKSPACE_BASE="$W/fibuild" \
  PYTHONPATH="$tool/standin:$W/wheel:$site" MAX_JOBS=${MAX_JOBS:-2} python3 "$tool/build.py" "${mods[@]}"
rm -rf "$dest" && mkdir -p "$dest"
(cd "$W/wheel" && find flashinfer -path flashinfer/data -prune -o -path flashinfer/experimental -prune -o -type f \
   \( -name '*.py' -o -name '*.json' -o -name '*.typed' -o -name '*.yaml' -o -name '*.toml' \) -print |
   while read -r f; do mkdir -p "$dest/$(dirname "$f")"; cp "$f" "$dest/$f"; done)
mkdir -p "$dest/flashinfer/experimental" "$dest/flashinfer/data/csrc" "$dest/flashinfer/data/aot"
cp "$W/wheel/flashinfer/experimental/"*.py "$dest/flashinfer/experimental/"
(cd "$W/wheel/flashinfer/data/csrc" && cp *.jinja batch_decode* batch_prefill* norm.cu flashinfer_norm_binding.cu \
   tvm_ffi_utils.h "$dest/flashinfer/data/csrc/")
for d in "$W"/fibuild/.cache/flashinfer/*/90a/cached_ops/*/; do
  n=$(basename "$d"); [ -f "$d/$n.so" ] || continue
  mkdir -p "$dest/flashinfer/data/aot/$n" && cp "$d/$n.so" "$dest/flashinfer/data/aot/$n/"
done
tar cf - -C "$dest" flashinfer | xz -2 -T2 > "$dest.tar.xz"
ls -la "$dest.tar.xz"
