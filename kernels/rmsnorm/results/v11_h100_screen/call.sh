#!/usr/bin/env bash
# stop 36, the one device call (H200s refused all session; whatever card runs it is named in env.txt):
# attention: the 16-bit decode with 8 warps (n8: 128-key tiles, 3/4 stages; n8s2: 2/3) beside main, GPU
# checks, decode memcheck, the ragged bench with SDPA + FlashInfer, ncu of B16 8k on 16-token pages and
# of cuDNN; rmsnorm: v11 (fp32 weights on 1025-3072-vector rows, 768-thread bound) beside main and r1
# (the same without packed stores), cuda_paths + memcheck, the sweep of that class with every baseline
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1
bench/gpu/build_attention_libs.sh .dev/ab main=. n8=.dev/trees/n8 n8s2=.dev/trees/n8s2 > $R/build.txt 2>&1; lap "build rc=$?"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || echo "no FlashInfer package" >> $R/env.txt
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
lib() { echo .dev/ab/$1/libhk_attention_cuda.so; }
for b in n8 n8s2; do
  HK_ATTN_LIB=$(lib $b) timeout 60 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_$b.txt 2>&1
  lap "tests $b rc=$?"; grep -E "^FAIL|PASSED|FAILED|passed|failed" $R/gpu_tests_$b.txt | tail -2
done
HK_ATTN_LIB=$(lib n8) timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 python3 kernels/attention/tests/sanitize_decode.py > $R/sanitize_decode_memcheck_n8.txt 2>&1
lap "memcheck n8 rc=$?"; tail -1 $R/sanitize_decode_memcheck_n8.txt; pack
for b in n8 n8s2; do
  HK_ATTN_LIB=$(lib $b) HK_ATTN_OLD_LIB=$(lib main) timeout 75 python3 bench/attention_ragged_bench.py --reps 30 --flashinfer /tmp/fi \
    --json $R/ragged_$b.json > $R/ragged_$b.txt 2>&1; lap "ragged $b rc=$?"
done
pack
D=kernels/attention/tools/decode_once.py
for b in main n8; do
  HK_ATTN_LIB=$(lib $b) timeout 40 ncu --clock-control none --set full -k regex:decode_kernel --launch-skip 3 --launch-count 1 \
    python3 $D --batch 16 --seqlen 8192 --page 16 > $R/ncu_p16_$b.txt 2>&1; lap "ncu p16 $b rc=$?"
done
timeout 40 ncu --clock-control none --set full -k 'regex:cudnn|sdpa|fmha|attn|sm90' --launch-skip 3 --launch-count 1 \
  python3 $D --batch 16 --seqlen 8192 --sdpa --names > $R/ncu_cudnn.txt 2>&1; lap "ncu cudnn rc=$?"
pack
# rmsnorm
.dev/rb/cuda_paths_v11 > $R/cuda_paths_v11.txt 2>&1; lap "cuda_paths v11 rc=$?"; tail -1 $R/cuda_paths_v11.txt
timeout 45 compute-sanitizer --tool memcheck --leak-check full .dev/rb/cuda_paths_v11 --quick > $R/cuda_paths_v11_memcheck.txt 2>&1
lap "memcheck v11 rc=$?"; tail -2 $R/cuda_paths_v11_memcheck.txt; pack
left=$(( 585 - ($(date +%s) - t0) ))
timeout $left python3 bench/rmsnorm_sweep.py --lib main=.dev/rb/main.so --lib r1=.dev/rb/r1.so --lib v11=.dev/rb/v11.so \
  --flashinfer /tmp/fi --triton .dev/fi/anchors/h200_triton_rmsnorm.py --only-alloc --compile-per-hidden \
  --json $R/rms_sweep.json --shapes "$(cat .dev/rms_shapes)" > $R/rms_sweep.txt 2>&1; lap "rms sweep rc=$?"
pack
