#!/usr/bin/env bash
# stop 33 call 1: the prefill epilogue staged through shared memory (n: 16-byte stores; t: TMA stores
# of each warp's rows) beside main (base): GPU tests, each CTA shape forced, ours-only sweeps
# interleaved twice, prefill sanitizers, then the full sweep with cuDNN / flash / FlashInfer for n
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1
bench/gpu/build_attention_libs.sh .dev/ab base=.dev/base n=. t=.dev/t > $R/build.txt 2>&1; lap "build rc=$?"
tail -3 $R/build.txt
L() { echo .dev/ab/$1/libhk_attention_cuda.so; }
HK_ATTN_LIB=$(L n) timeout 120 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_n.txt 2>&1
rc=$?; lap "tests n rc=$rc"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_n.txt | head -4
HK_ATTN_LIB=$(L t) timeout 90 python3 kernels/attention/tests/test_attention_gpu.py --prefill-only > $R/gpu_tests_t.txt 2>&1
rct=$?; lap "tests t rc=$rct"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_t.txt | head -4
pack; [ $rc = 0 ] || exit 1
for b in n t; do for cta in 128 64 64x2; do for per in 0 1; do
  f=$R/cta_${b}_${cta}_p$per.txt
  HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_PREFILL_SM90_CTA=$cta HK_ATTN_LIB=$(L $b) timeout 60 \
    python3 kernels/attention/tests/test_attention_gpu.py --prefill-only > $f 2>&1
  echo "$b cta $cta persist $per rc=$? $(grep -cE '^FAIL' $f) FAIL lines" >> $R/cta_summary.txt
done; done; done; lap "cta tests"; cat $R/cta_summary.txt; pack
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
export PYTHONPATH=/tmp/site; mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi
sw() {  # name lib extra...
  local n=$1 l=$2; shift 2
  HK_ATTN_LIB=$(L $l) timeout ${SW_S:-150} python3 bench/attention_prefill_sweep.py --reps 20 "$@" --json $R/$n.json > $R/$n.txt 2>&1; lap "$n rc=$?"
}
for r in 1 2; do for b in base n t; do sw short_${b}_$r $b --short --no-baselines; done; done
for r in 1 2; do for b in base n t; do sw sweep_${b}_$r $b --no-baselines; done; done
for a in short sweep; do for r in 1 2; do
  python3 kernels/attention/tools/compare_prefill_runs.py $R/${a}_base_$r.json $R/${a}_n_$r.json $R/${a}_t_$r.json > $R/cmp_${a}_$r.txt 2>&1
done; done
grep -H median $R/cmp_*.txt; pack
for b in n t; do for tool in memcheck racecheck synccheck; do
  HK_ATTN_LIB=$(L $b) timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 kernels/attention/tests/sanitize_prefill.py \
    > $R/sanitize_${tool}_$b.txt 2>&1
  lap "sanitize $tool $b rc=$?"; tail -1 $R/sanitize_${tool}_$b.txt
done; done; pack
SW_S=230 sw prefill_sweep_n n --flashinfer /tmp/fi
pack
