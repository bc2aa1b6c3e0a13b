#!/usr/bin/env bash
# session 32 call 1: the decode plan with pairs' fixed cost and 2 CTAs/SM from more pairs than SMs
# (working tree "n") beside main ("base"): GPU tests, decode sanitizers, ragged bench (with SDPA and
# FlashInfer) at the default cost and costs 0/6/12, FP8 bench both builds; then ncu of the prefill
# where cuDNN leads most (B16 S256, B1 S640) and a long full row (B1 S8192)
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
bench/gpu/build_attention_libs.sh .dev/ab base=.dev/base n=. > $R/build.txt 2>&1; lap "build rc=$?"
tail -2 $R/build.txt
HK_ATTN_LIB=.dev/ab/n/libhk_attention_cuda.so timeout 180 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_n.txt 2>&1
rc=$?; lap "tests n rc=$rc"; grep -E "^FAIL|PASSED|FAILED|^  " $R/gpu_tests_n.txt | head -8; pack
[ $rc = 0 ] || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
export PYTHONPATH=/tmp/site; mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi
N=.dev/ab/n/libhk_attention_cuda.so B=.dev/ab/base/libhk_attention_cuda.so
HK_ATTN_LIB=$N HK_ATTN_OLD_LIB=$B timeout 200 python3 bench/attention_ragged_bench.py --reps 30 --flashinfer /tmp/fi \
  --json $R/ragged_n.json > $R/ragged_n.txt 2>&1
lap "ragged default rc=$?"; pack
for c in 0 6 12; do
  HK_ATTN_DECODE_SEG_COST=$c HK_ATTN_LIB=$N HK_ATTN_OLD_LIB=$B timeout 120 python3 bench/attention_ragged_bench.py --reps 30 --no-sdpa \
    --json $R/ragged_c$c.json > $R/ragged_c$c.txt 2>&1
  lap "ragged cost $c rc=$?"
done; pack
for b in base n; do
  HK_ATTN_LIB=.dev/ab/$b/libhk_attention_cuda.so timeout 120 python3 bench/attention_fp8_bench.py --reps 30 --flashinfer /tmp/fi \
    --json $R/fp8_$b.json > $R/fp8_$b.txt 2>&1
  lap "fp8 $b rc=$?"
done; pack
for tool in memcheck racecheck synccheck; do
  HK_ATTN_LIB=$N timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 kernels/attention/tests/sanitize_decode.py \
    > $R/sanitize_decode_$tool.txt 2>&1
  lap "sanitize decode $tool rc=$?"; tail -2 $R/sanitize_decode_$tool.txt
done; pack
PROFILE_S=80 PROFILE_SHAPES="--batch 16 --seqlen 256 --hkv 8
--batch 1 --seqlen 640 --hkv 8
--batch 1 --seqlen 8192 --hkv 8" OUT=$R bench/gpu/h200_attention_round.sh profile n n 2>&1 | tail -4
for f in $R/profile*_n.txt; do grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Block Size|Grid Size" $f | head -14 > ${f%.txt}_summary.txt; done
lap "profile done"; pack
