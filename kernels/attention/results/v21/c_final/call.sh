#!/usr/bin/env bash
# stop 33 call 3: v21 with the CTA-shape rule placed again (pairs of 64-row CTAs only at D64, and at
# D128 for full attention on one key tile) — GPU tests, the Hub variants built from these sources
# (tvm-ffi here, torch on the device) checked through kernels 0.17.2, the short grid ours-only twice,
# then the full sweep with cuDNN / flash / FlashInfer
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1
bench/gpu/build_attention_libs.sh .dev/ab n=. > $R/build.txt 2>&1; lap "build rc=$?"
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
export PYTHONPATH=/tmp/site; mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi
for r in 1 2; do
  HK_ATTN_LIB=$N timeout 60 python3 bench/attention_prefill_sweep.py --short --no-baselines --reps 20 --json $R/short_auto_$r.json > $R/short_auto_$r.txt 2>&1
  lap "short auto round $r rc=$?"
done; pack
HK_ATTN_LIB=$N timeout 260 python3 bench/attention_prefill_sweep.py --reps 20 --flashinfer /tmp/fi --json $R/prefill_sweep_n.json > $R/prefill_sweep_n.txt 2>&1
lap "sweep with baselines rc=$?"; pack
