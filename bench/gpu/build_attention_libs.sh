#!/usr/bin/env bash
# Builds attention libraries side by side, one translation unit per job (on the H200 machine's 16
# cores this takes about a minute for three builds), as kernels/attention/tests/hk_attention_ctypes.py
# builds them (test hooks on, SASS for sm_90a and sm_80):
#   bench/gpu/build_attention_libs.sh OUTDIR NAME=TREE [NAME=TREE ...]
# TREE: a directory holding kernels/attention (this checkout: .); writes OUTDIR/NAME/libhk_attention_cuda.so.
set -uo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd); shift
srcs="attention_cuda prefill_sm80 decode_kernel decode_fp8 decode_cache prefill_sm90"
jobs=()
for pair in "$@"; do
  n=${pair%%=*}; tree=$(cd "${pair#*=}" && pwd)/kernels/attention
  mkdir -p "$out/$n/obj"
  for s in $srcs; do jobs+=("$n $tree $s"); done
done
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -L 1 sh -c 'cd "$1" && nvcc -O3 -std=c++17 \
  -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xcompiler -fPIC -DHK_TEST_HOOKS \
  -Iattention_cpu -Iattention_cuda -c attention_cuda/$2.cu -o '"$out"'/$0/obj/$2.o || echo "FAILED $0 $2"'
rc=0
for pair in "$@"; do
  n=${pair%%=*}
  nvcc -shared -o "$out/$n/libhk_attention_cuda.so" "$out/$n"/obj/*.o && echo "built $n" || { echo "FAILED $n"; rc=1; }
done
exit $rc
