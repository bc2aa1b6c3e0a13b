#!/usr/bin/env bash
# The next H200 round (prepared in stop 39, whose three calls ran on H100s): the goals' figures for
# what stop 39 screened. Run as `bash bench/gpu/next_round_h200.sh [BUDGET_S]`, carrying .dev/fi and
# .dev/rmsbase (kernels/rmsnorm/rmsnorm_{cuda,cpu} of the commit before v11r: `mkdir -p .dev/rmsbase &&
# git archive 05ccd90 kernels/rmsnorm/rmsnorm_cuda kernels/rmsnorm/rmsnorm_cpu | tar x -C .dev/rmsbase`);
# results go to $OUT/r.tar.xz, packed after each step.
#  1) RMSNorm: v11r (this checkout) beside v10 (.dev/rmsbase) over the 137-shape sweep, plain and
#     PDL launches, 2 rounds alternating, every baseline incl. FlashInfer (the v10 figure to beat:
#     median 1.092x, min 0.877x, 9 of 137 under 0.98x);
#  2) decode: v24 (kernels/attention/prepared/v24-lane-boxes.patch applied to a copy) beside main in
#     the ragged bench, SDPA and FlashInfer beside; v24's GPU checks;
#  3) bench/gpu/stop39_call4.sh's steady-state ncu (16-token pages vs the contiguous cache).
set -uo pipefail
BUDGET=${1:-560}
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
left() { echo $(( BUDGET - ($(date +%s) - t0) - $1 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1; cat $R/env.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || echo "no FlashInfer package" >> $R/env.txt
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
B=/tmp/rb; mkdir -p $B /tmp/v24
P=$(pwd)/kernels/attention/prepared/v24-lane-boxes.patch
cp -r kernels /tmp/v24/ && (cd /tmp/v24 && patch -s -p1 < "$P") || echo "v24 patch FAILED" | tee -a $R/env.txt
F="-O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC"
(cd kernels/rmsnorm/rmsnorm_cuda && nvcc $F -shared -I. rmsnorm.cu -o $B/v11r.so) > $R/build_rms_v11r.txt 2>&1 &
(cd .dev/rmsbase/kernels/rmsnorm/rmsnorm_cuda && nvcc $F -shared -I. rmsnorm.cu -o $B/v10.so) > $R/build_rms_v10.txt 2>&1 &
bench/gpu/build_attention_libs.sh /tmp/ab main=. v24=/tmp/v24 > $R/build_attn.txt 2>&1
wait; lap "builds done"; ls -la $B /tmp/ab/*/libhk_attention_cuda.so >> $R/env.txt
timeout $(left 240) python3 bench/rmsnorm_sweep.py --lib v10=$B/v10.so --lib v11r=$B/v11r.so --pdl --rounds 2 \
  --wide-grid --other-grid quickwide --only-alloc --compile-per-hidden --flashinfer /tmp/fi \
  --triton .dev/fi/anchors/h200_triton_rmsnorm.py --json $R/rms_sweep.json > $R/rms_sweep.txt 2>&1
lap "rms sweep rc=$?"; tail -4 $R/rms_sweep.txt; pack
N=/tmp/ab/main/libhk_attention_cuda.so V=/tmp/ab/v24/libhk_attention_cuda.so
HK_ATTN_LIB=$V timeout 150 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_v24.txt 2>&1
lap "gpu tests v24 rc=$?"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_v24.txt | head -4
HK_ATTN_LIB=$V HK_ATTN_OLD_LIB=$N timeout $(left 50) python3 bench/attention_ragged_bench.py --reps 30 --flashinfer /tmp/fi \
  --json $R/ragged_v24_vs_main.json > $R/ragged_v24_vs_main.txt 2>&1; lap "ragged rc=$?"; pack
export HK_ATTN_LIB=$N
D=kernels/attention/tools/decode_once.py
NC="ncu --clock-control none --cache-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats -k regex:decode_kernel --launch-skip 11 --launch-count 1"
timeout 30 $NC python3 $D --batch 16 --seqlen 8192 --page 16 --launches 16 > $R/ncu_warm_p16_tma.txt 2>&1; lap "ncu p16 rc=$?"
HK_ATTN_DECODE_TMA=all timeout 30 $NC python3 $D --batch 16 --seqlen 8192 --page 0 --launches 16 > $R/ncu_warm_contig_tma.txt 2>&1; lap "ncu contig tma rc=$?"
grep -HE "^ +(Duration|DRAM Throughput|Warp Cycles Per Issued Instruction|No Eligible)" $R/ncu_warm_*.txt; pack
