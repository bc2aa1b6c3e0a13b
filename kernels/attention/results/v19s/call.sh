#!/usr/bin/env bash
# stop 31 call 3: the decode structure (branch dstruct) beside main: GPU tests, the ragged/paged
# decode bench (main as "old" in the same run), the FP8 decode bench, both builds
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
bench/gpu/build_attention_libs.sh .dev/ab base=.dev/base2 s=.dev/dstruct > $R/build.txt 2>&1; lap "build rc=$?"
tail -2 $R/build.txt
HK_ATTN_LIB=.dev/ab/s/libhk_attention_cuda.so timeout 120 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_s.txt 2>&1
rc=$?; lap "tests s rc=$rc"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_s.txt | head -5; pack
[ $rc = 0 ] || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
export PYTHONPATH=/tmp/site; mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi
HK_ATTN_LIB=.dev/ab/s/libhk_attention_cuda.so HK_ATTN_OLD_LIB=.dev/ab/base/libhk_attention_cuda.so timeout 120 \
  python3 bench/attention_ragged_bench.py --reps 30 --no-sdpa --json $R/ragged_s.json > $R/ragged_s.txt 2>&1
lap "ragged rc=$?"; pack
for b in base s; do
  HK_ATTN_LIB=.dev/ab/$b/libhk_attention_cuda.so timeout 90 python3 bench/attention_fp8_bench.py --reps 30 \
    --json $R/fp8_$b.json > $R/fp8_$b.txt 2>&1
  lap "fp8 $b rc=$?"; pack
done
