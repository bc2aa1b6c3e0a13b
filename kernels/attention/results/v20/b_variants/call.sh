#!/usr/bin/env bash
# session 32 call 2: the decode plan (v20, committed) — Hub variants built from it (tvm-ffi here, torch
# on the device) checked through kernels 0.17.2, decode racecheck with room to finish, and the ragged
# bench on other lengths (SEED 7) beside main
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
bench/gpu/build_attention_libs.sh .dev/ab base=.dev/base n=. > $R/build.txt 2>&1; lap "build rc=$?"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl .dev/vwhl/*.whl > $R/pip.txt 2>&1
(timeout 300 python3 kernels/attention/torch-ext/build_torch_variant.py --hub /tmp/ahub --work /tmp/tb > $R/torch_build.txt 2>&1; echo "exit $?" >> $R/torch_build.txt) &
HK_ATTN_LIB=.dev/ab/n/libhk_attention_cuda.so timeout 330 compute-sanitizer --tool racecheck --error-exitcode 9 python3 kernels/attention/tests/sanitize_decode.py \
  > $R/sanitize_decode_racecheck.txt 2>&1
lap "racecheck rc=$?"; tail -2 $R/sanitize_decode_racecheck.txt; pack
mkdir -p /tmp/vh && tar xJf .dev/hub.tar.xz -C /tmp/vh
PYTHONPATH=/tmp/site timeout 150 python3 kernels/attention/tests/test_variant_cuda.py /tmp/vh/hub > $R/hub_variant_cuda.txt 2>&1; lap "tvm-ffi variant rc=$?"; tail -2 $R/hub_variant_cuda.txt
wait; tail -2 $R/torch_build.txt
PYTHONPATH=/tmp/site timeout 150 python3 kernels/attention/tests/test_torch_variant.py /tmp/ahub > $R/torch_variant.txt 2>&1; lap "torch variant rc=$?"; tail -2 $R/torch_variant.txt
pack
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi; export PYTHONPATH=/tmp/site
SEED=7 HK_ATTN_LIB=.dev/ab/n/libhk_attention_cuda.so HK_ATTN_OLD_LIB=.dev/ab/base/libhk_attention_cuda.so timeout 200 \
  python3 bench/attention_ragged_bench.py --reps 30 --flashinfer /tmp/fi --json $R/ragged_seed7.json > $R/ragged_seed7.txt 2>&1
lap "ragged seed 7 rc=$?"; pack
