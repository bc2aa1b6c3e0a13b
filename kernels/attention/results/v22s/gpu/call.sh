#!/usr/bin/env bash
# stop 34 call 2: (a) the RMSNorm Hub variants with PDL in their bindings, built here and checked
# through kernels 0.17.2 (test_cuda.py: every path, streams, graphs, dependent chains); (b) the
# prefill structure branch (st) beside main (n): GPU tests with each CTA shape x persistence forced,
# an ours-only short sweep of both, twice interleaved
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/apache_tvm_ffi*.whl .dev/vwhl/*.whl > $R/pip.txt 2>&1
export PYTHONPATH=/tmp/site
( python3 kernels/rmsnorm/tvm-ffi-ext/build_tvm_ffi_cuda.py --hub /tmp/hub --work /tmp/w_tvm --archs 90 > $R/rms_build_tvm.txt 2>&1; echo "tvm rc=$?" >> $R/rms_build_tvm.txt ) &
( python3 kernels/rmsnorm/torch-ext/build_torch_variant.py --hub /tmp/hub --work /tmp/w_torch --archs 90 > $R/rms_build_torch.txt 2>&1; echo "torch rc=$?" >> $R/rms_build_torch.txt ) &
bench/gpu/build_attention_libs.sh .dev/ab n=. st=.dev/st > $R/build.txt 2>&1; lap "attention build rc=$?"
wait; lap "rmsnorm builds"; tail -2 $R/rms_build_*.txt; ls /tmp/hub/build
for v in $(ls /tmp/hub/build); do
  timeout 120 python3 kernels/rmsnorm/tests/test_cuda.py --hub /tmp/hub --variant $v > $R/rms_test_$v.txt 2>&1
  lap "rmsnorm test $v rc=$?"; grep -E "FAIL|chains|failures" $R/rms_test_$v.txt | head -8
done; pack
L() { echo .dev/ab/$1/libhk_attention_cuda.so; }
HK_ATTN_LIB=$(L st) timeout 120 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_st.txt 2>&1
lap "tests st rc=$?"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_st.txt | head -4
for cta in 128 64 64x2; do for per in 0 1; do
  f=$R/cta_st_${cta}_p$per.txt
  HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_PREFILL_SM90_CTA=$cta HK_ATTN_LIB=$(L st) timeout 60 \
    python3 kernels/attention/tests/test_attention_gpu.py --prefill-only > $f 2>&1
  echo "st cta $cta persist $per rc=$? $(grep -cE '^FAIL' $f) FAIL lines" >> $R/cta_summary.txt
done; done; lap "cta tests"; cat $R/cta_summary.txt; pack
for r in 1 2; do for b in n st; do
  HK_ATTN_LIB=$(L $b) timeout 100 python3 bench/attention_prefill_sweep.py --reps 20 --short --no-baselines --json $R/short_${b}_$r.json > $R/short_${b}_$r.txt 2>&1; lap "short $b $r rc=$?"
done; done
for r in 1 2; do python3 kernels/attention/tools/compare_prefill_runs.py $R/short_n_$r.json $R/short_st_$r.json > $R/cmp_short_$r.txt 2>&1; done
grep -H median $R/cmp_*.txt; pack
