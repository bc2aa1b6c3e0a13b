#!/usr/bin/env bash
# stop 33 call 2: v21 as committed (the prefill epilogue staged through shared memory) — GPU tests,
# the short grid with each sm_90a CTA shape and persistence forced (to place the shape rule again
# with this epilogue), the Hub variants built from these sources (tvm-ffi here, torch on the device)
# checked through kernels 0.17.2, ncu of B16 S256 (the weakest short rows); then an experiment: the
# 16-bit decode with 6 stages at D128 (8 at D64) instead of 3 (4), one CTA an SM forced and not, beside n
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1
bench/gpu/build_attention_libs.sh .dev/ab n=. s6=.dev/s6 > $R/build.txt 2>&1; lap "build rc=$?"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl .dev/vwhl/*.whl > $R/pip.txt 2>&1
(timeout 300 python3 kernels/attention/torch-ext/build_torch_variant.py --hub /tmp/ahub --work /tmp/tb > $R/torch_build.txt 2>&1; echo "exit $?" >> $R/torch_build.txt) &
N=.dev/ab/n/libhk_attention_cuda.so
HK_ATTN_LIB=$N timeout 120 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_n.txt 2>&1
lap "tests rc=$?"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_n.txt | head -4; pack
mkdir -p /tmp/vh && tar xJf .dev/hub.tar.xz -C /tmp/vh
PYTHONPATH=/tmp/site timeout 150 python3 kernels/attention/tests/test_variant_cuda.py /tmp/vh/hub > $R/hub_variant_cuda.txt 2>&1; lap "tvm-ffi variant rc=$?"; tail -2 $R/hub_variant_cuda.txt
wait; tail -2 $R/torch_build.txt
PYTHONPATH=/tmp/site timeout 150 python3 kernels/attention/tests/test_torch_variant.py /tmp/ahub > $R/torch_variant.txt 2>&1; lap "torch variant rc=$?"; tail -2 $R/torch_variant.txt
pack
export PYTHONPATH=/tmp/site
for r in 1 2; do for cta in 128 64 64x2; do for per in 0 1; do
  f=$R/short_cta${cta}_p${per}_$r
  HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_PREFILL_SM90_CTA=$cta HK_ATTN_LIB=$N timeout 60 \
    python3 bench/attention_prefill_sweep.py --short --no-baselines --reps 20 --json $f.json > $f.txt 2>&1
  lap "short cta $cta persist $per round $r rc=$?"
done; done
HK_ATTN_LIB=$N timeout 60 python3 bench/attention_prefill_sweep.py --short --no-baselines --reps 20 --json $R/short_auto_$r.json > $R/short_auto_$r.txt 2>&1
lap "short auto round $r rc=$?"; done; pack
HK_ATTN_LIB=$N timeout 90 ncu --clock-control none --set full -k regex:prefill_sm90 --launch-skip 3 --launch-count 1 \
  python3 kernels/attention/tools/prefill_once.py --batch 16 --seqlen 256 --hkv 8 > $R/profile_b16s256.txt 2>&1
lap "profile rc=$?"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Block Size|Grid Size|L2 Hit|excessive|uncoalesced|sectors" $R/profile_b16s256.txt | head -30 > $R/profile_b16s256_summary.txt
pack
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi
S6=.dev/ab/s6/libhk_attention_cuda.so
HK_ATTN_DECODE_CPS=1 HK_ATTN_LIB=$S6 timeout 90 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_s6.txt 2>&1
lap "tests s6 rc=$?"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_s6.txt | head -3
for cps in 1 0; do
  HK_ATTN_DECODE_CPS=$cps HK_ATTN_LIB=$S6 HK_ATTN_OLD_LIB=$N timeout 120 python3 bench/attention_ragged_bench.py --reps 30 --no-sdpa \
    --json $R/ragged_s6_cps$cps.json > $R/ragged_s6_cps$cps.txt 2>&1
  lap "ragged s6 cps $cps rc=$?"
done; pack
