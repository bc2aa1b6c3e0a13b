#!/usr/bin/env bash
# Stop 40's landing call for v24 (now in decode_kernel.cuh): the checks issue 23 asks of a landed
# kernel change, and the FP8 and ragged benches beside the commit before.
#  1) GPU checks of the product library; compute-sanitizer memcheck, synccheck and racecheck of
#     sanitize_decode.py;
#  2) the tvm-ffi CUDA Hub variant (built here from this checkout, carried as .dev/hub.tar.xz) and
#     the torch one (built on the device) checked through kernels 0.17.2;
#  3) the FP8 bench, every case, FlashInfer beside, main and the commit before (.dev/oldattn:
#     kernels/attention/attention_{cuda,cpu} of 28103ec) one after the other; the ragged bench with
#     the old library in the same process.
# Carry .dev/fi .dev/vwhl .dev/oldattn .dev/hub.tar.xz; run as `bash bench/gpu/stop40_v24_land.sh 540`.
BUDGET=${1:-540}; . bench/gpu/prelude.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/vwhl/*.whl >> $R/pip.txt 2>&1
(timeout 300 python3 kernels/attention/torch-ext/build_torch_variant.py --hub /tmp/ahub --work /tmp/tb > $R/torch_build.txt 2>&1; echo "exit $?" >> $R/torch_build.txt) &
bench/gpu/build_attention_libs.sh /tmp/ab main=. old=.dev/oldattn > $R/build_attn.txt 2>&1; lap "libs rc=$?"
N=/tmp/ab/main/libhk_attention_cuda.so O=/tmp/ab/old/libhk_attention_cuda.so
HK_ATTN_LIB=$N timeout 120 python3 kernels/attention/tests/test_attention_gpu.py > $R/gpu_tests.txt 2>&1
lap "gpu tests rc=$?"; grep -E "^FAIL|PASSED|FAILED" $R/gpu_tests.txt | head -4; pack
mkdir -p /tmp/vh && tar xJf .dev/hub.tar.xz -C /tmp/vh
timeout 150 python3 kernels/attention/tests/test_variant_cuda.py /tmp/vh/hub > $R/hub_variant_cuda.txt 2>&1; lap "tvm-ffi variant rc=$?"; tail -2 $R/hub_variant_cuda.txt; pack
for tool in memcheck synccheck; do
  HK_ATTN_LIB=$N timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 python3 kernels/attention/tests/sanitize_decode.py \
    > $R/sanitize_decode_$tool.txt 2>&1; lap "sanitize $tool rc=$?"; tail -2 $R/sanitize_decode_$tool.txt; pack
done
wait; tail -2 $R/torch_build.txt
timeout 150 python3 kernels/attention/tests/test_torch_variant.py /tmp/ahub > $R/torch_variant.txt 2>&1; lap "torch variant rc=$?"; tail -2 $R/torch_variant.txt; pack
for n in main old; do
  L=$N; [ $n = old ] && L=$O
  HK_ATTN_LIB=$L timeout 120 python3 bench/attention_fp8_bench.py --reps 30 --flashinfer /tmp/fi --json $R/fp8_$n.json > $R/fp8_$n.txt 2>&1
  lap "fp8 $n rc=$?"; pack
done
HK_ATTN_LIB=$N HK_ATTN_OLD_LIB=$O timeout 90 python3 bench/attention_ragged_bench.py --reps 30 --flashinfer /tmp/fi \
  --json $R/ragged.json > $R/ragged.txt 2>&1; lap "ragged rc=$?"; pack
HK_ATTN_LIB=$N timeout $(left 15) compute-sanitizer --tool racecheck --error-exitcode 9 python3 kernels/attention/tests/sanitize_decode.py \
  > $R/sanitize_decode_racecheck.txt 2>&1; lap "sanitize racecheck rc=$?"; tail -2 $R/sanitize_decode_racecheck.txt; pack
