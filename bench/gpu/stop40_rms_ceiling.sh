#!/usr/bin/env bash
# Stop 40's RMSNorm call: each shape's own ceiling (a plain SM copy of the same bytes, the fastest
# of bench/rmsnorm/copy_kernel.cu's configurations, timed like the kernels) over the 137-shape
# sweep, then two dispatch candidates for the shapes under 95 % of the 1 GiB copy:
#   n4  (.dev/rms_n4):  rows of <= 64 vectors take twice the rows a lane group (16x1x4, 32x1x8, 32x2x4)
#   f64 (.dev/rms_f64): rows of 513-1024 vectors take row-sized blocks only from 64 rows an SM
#                       (4096x5120: fixed 256-thread blocks instead of 160-thread ones)
# Carry .dev/fi .dev/rms_n4 .dev/rms_f64; run as `bash bench/gpu/stop40_rms_ceiling.sh 500`.
BUDGET=${1:-500}; . bench/gpu/prelude.sh
B=/tmp/rb; mkdir -p $B
(cd kernels/rmsnorm/rmsnorm_cuda && nvcc $NVCC_SM90 -shared -I. rmsnorm.cu -o $B/main.so) > $R/build_main.txt 2>&1 &
(cd .dev/rms_n4/rmsnorm_cuda && nvcc $NVCC_SM90 -shared -I. rmsnorm.cu -o $B/n4.so) > $R/build_n4.txt 2>&1 &
(cd .dev/rms_f64/rmsnorm_cuda && nvcc $NVCC_SM90 -shared -I. rmsnorm.cu -o $B/f64.so) > $R/build_f64.txt 2>&1 &
nvcc $NVCC_SM90 -shared bench/rmsnorm/copy_kernel.cu -o $B/copy.so > $R/build_copy.txt 2>&1
wait; lap "builds done"; ls -la $B >> $R/env.txt
BASE="--pdl --only-alloc --compile-per-hidden --flashinfer /tmp/fi --triton .dev/fi/anchors/h200_triton_rmsnorm.py --copy-lib $B/copy.so"
timeout $(left 200) python3 bench/rmsnorm_sweep.py --lib main=$B/main.so --rounds 2 --wide-grid --other-grid quickwide \
  $BASE --json $R/sweep_ceiling.json > $R/sweep_ceiling.txt 2>&1
lap "ceiling sweep rc=$?"; tail -3 $R/sweep_ceiling.txt; pack
S=""
for xw in bf16/bf16 bf16/f32 f16/f16 f16/f32; do
  for rh in 65536x128 262144x128 16384x512 65536x512 262144x512 8192x1024 65536x1024; do S="$S,$xw:$rh"; done
done
for rh in 2048x5120 4096x5120 8192x5120 16384x5120 4096x4608 4096x6144 8192x2560 8192x2048 1024x16384; do S="$S,bf16/bf16:$rh"; done
timeout $(left 20) python3 bench/rmsnorm_sweep.py --lib main=$B/main.so --lib n4=$B/n4.so --lib f64=$B/f64.so --rounds 3 \
  --shapes ${S#,} $BASE --json $R/sweep_candidates.json > $R/sweep_candidates.txt 2>&1
lap "candidates rc=$?"; tail -3 $R/sweep_candidates.txt; pack
