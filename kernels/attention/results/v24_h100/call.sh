#!/usr/bin/env bash
# Stop 39's third device call: v24, the decode's TMA boxes issued by warp 0's lanes side by side
# (lane q the q-th box of a tile) instead of one after another by thread 0, beside the commit before
# it (.dev/oldattn: its kernels/attention). GPU tests, the ragged bench (old in the same process,
# SDPA and FlashInfer beside), ncu on B16 uniform 8k 16-token pages, memcheck and synccheck of the
# decode's sanitizer cases, the FP8 bench (quick). Carry .dev/fi and .dev/oldattn.
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1; cat $R/env.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || echo "no FlashInfer package" >> $R/env.txt
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
bench/gpu/build_attention_libs.sh /tmp/ab new=. old=.dev/oldattn > $R/build_attn.txt 2>&1; lap "builds rc=$?"; tail -2 $R/build_attn.txt
N=/tmp/ab/new/libhk_attention_cuda.so O=/tmp/ab/old/libhk_attention_cuda.so
HK_ATTN_LIB=$N timeout 150 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests_new.txt 2>&1
lap "gpu tests new rc=$?"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests_new.txt | head -6; pack
HK_ATTN_LIB=$N HK_ATTN_OLD_LIB=$O timeout 200 python3 bench/attention_ragged_bench.py --reps 30 --flashinfer /tmp/fi \
  --json $R/ragged.json > $R/ragged.txt 2>&1; lap "ragged rc=$?"; grep -E "^\|" $R/ragged.txt | cut -c1-400; pack
D=kernels/attention/tools/decode_once.py
NC="ncu --clock-control none --section SpeedOfLight -k regex:decode_kernel --launch-skip 3 --launch-count 1"
HK_ATTN_LIB=$N timeout 30 $NC python3 $D --batch 16 --seqlen 8192 --page 16 > $R/ncu_p16_new.txt 2>&1; lap "ncu new rc=$?"
HK_ATTN_LIB=$O timeout 30 $NC python3 $D --batch 16 --seqlen 8192 --page 16 > $R/ncu_p16_old.txt 2>&1; lap "ncu old rc=$?"
grep -HE "^ +(Duration|DRAM Throughput)" $R/ncu_p16_*.txt; pack
for tool in memcheck synccheck; do
  HK_ATTN_LIB=$N timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 kernels/attention/tests/sanitize_decode.py \
    > $R/sanitize_decode_$tool.txt 2>&1; lap "sanitize $tool rc=$?"; tail -2 $R/sanitize_decode_$tool.txt; pack
done
HK_ATTN_LIB=$N timeout 60 python3 bench/attention_fp8_bench.py --quick --flashinfer /tmp/fi > $R/fp8_new.txt 2>&1; lap "fp8 new rc=$?"
HK_ATTN_LIB=$O timeout 60 python3 bench/attention_fp8_bench.py --quick > $R/fp8_old.txt 2>&1; lap "fp8 old rc=$?"
grep -E "^\|" $R/fp8_new.txt $R/fp8_old.txt | cut -c1-300; pack
