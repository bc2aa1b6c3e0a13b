#!/usr/bin/env bash
# Stop 39's second device call: RMSNorm v11r (now the product source) checked for landing, and the
# decode's paged-vs-contiguous gap split by fetch path. Carry .dev/fi, .dev/vwhl (kernels 0.17.2 +
# tomlkit wheels) and .dev/rmsbase (kernels/rmsnorm/rmsnorm_cuda of the commit before v11r).
#  1) the tvm-ffi and torch Hub variants built from this checkout and checked through kernels
#     0.17.2 (test_cuda.py), cuda_paths (every path, poisoned outputs, float64), memcheck --quick;
#  2) ncu, B16 uniform 8k GQA 32/8 D128: 16-token pages through cp.async (HK_ATTN_DECODE_TMA=0)
#     and the contiguous cache through the TMA (=all), beside the first call's TMA-paged and
#     cp.async-contiguous figures;
#  3) the class boundaries of v11r (H 8192 / 8200 / 14336 / 14344, bf16 and fp16 with fp32
#     weights) against the commit before it and every baseline, 2 rounds alternating.
set -uo pipefail
BUDGET=${1:-420}
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1; cat $R/env.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/apache_tvm_ffi*.whl .dev/vwhl/*.whl > $R/pip.txt 2>&1
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || echo "no FlashInfer package" >> $R/env.txt
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
B=/tmp/rb; mkdir -p $B
F="-O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC"
( python3 kernels/rmsnorm/tvm-ffi-ext/build_tvm_ffi_cuda.py --hub /tmp/hub --work /tmp/w_tvm --archs 90 > $R/rms_build_tvm.txt 2>&1; echo "tvm rc=$?" >> $R/rms_build_tvm.txt ) &
( python3 kernels/rmsnorm/torch-ext/build_torch_variant.py --hub /tmp/hub --work /tmp/w_torch --archs 90 > $R/rms_build_torch.txt 2>&1; echo "torch rc=$?" >> $R/rms_build_torch.txt ) &
(cd kernels/rmsnorm/rmsnorm_cuda && nvcc $F -shared -I. rmsnorm.cu -o $B/main.so) > $R/build_rms_main.txt 2>&1 &
(cd .dev/rmsbase/kernels/rmsnorm/rmsnorm_cuda && nvcc $F -shared -I. rmsnorm.cu -o $B/base.so) > $R/build_rms_base.txt 2>&1 &
(cd kernels/rmsnorm/rmsnorm_cuda && nvcc $F -lineinfo -I. ../tests/cuda_paths.cu rmsnorm.cu -o $B/cuda_paths) > $R/build_paths.txt 2>&1 &
bench/gpu/build_attention_libs.sh /tmp/ab main=. > $R/build_attn.txt 2>&1
wait; lap "builds done"; tail -1 $R/rms_build_*.txt; ls /tmp/hub/build $B >> $R/env.txt
for v in $(ls /tmp/hub/build); do
  timeout 150 python3 kernels/rmsnorm/tests/test_cuda.py --hub /tmp/hub --variant $v > $R/rms_test_$v.txt 2>&1
  lap "rmsnorm test $v rc=$?"; grep -E "FAIL|chains|failures" $R/rms_test_$v.txt | head -8
done; pack
timeout 200 stdbuf -oL $B/cuda_paths > $R/cuda_paths.txt 2>&1; lap "cuda_paths rc=$?"; tail -2 $R/cuda_paths.txt; pack
timeout 90 compute-sanitizer --tool memcheck --print-limit 20 $B/cuda_paths --quick > $R/memcheck_quick.txt 2>&1; lap "memcheck quick rc=$?"; tail -3 $R/memcheck_quick.txt; pack
D=kernels/attention/tools/decode_once.py
export HK_ATTN_LIB=/tmp/ab/main/libhk_attention_cuda.so
N="ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis -k regex:decode_kernel --launch-skip 3 --launch-count 1"
HK_ATTN_DECODE_TMA=0 timeout 30 $N python3 $D --batch 16 --seqlen 8192 --page 16 > $R/ncu_p16_cpasync.txt 2>&1; lap "ncu p16 cp.async rc=$?"
HK_ATTN_DECODE_TMA=0 timeout 30 $N python3 $D --batch 16 --seqlen 8192 --page 16 --in-order > $R/ncu_p16_inorder_cpasync.txt 2>&1; lap "ncu p16 in-order cp.async rc=$?"
HK_ATTN_DECODE_TMA=all timeout 30 $N python3 $D --batch 16 --seqlen 8192 --page 0 > $R/ncu_contig_tma.txt 2>&1; lap "ncu contiguous tma rc=$?"
timeout 30 $N python3 $D --batch 16 --seqlen 8192 --page 16 > $R/ncu_p16_tma.txt 2>&1; lap "ncu p16 tma rc=$?"
grep -HE "decode_kernel<|^ +(Duration|DRAM Throughput)" $R/ncu_*.txt; pack
S="bf16/f32:1x8192,bf16/f32:2048x8192,bf16/f32:8192x8192,bf16/f32:1x8200,bf16/f32:2048x8200,bf16/f32:8192x8200"
S="$S,bf16/f32:2048x14336,bf16/f32:8192x14336,bf16/f32:2048x14344,bf16/f32:8192x14344,bf16/f32:8192x16384"
S="$S,f16/f32:8192x8200,f16/f32:8192x14336,bf16/bf16:8192x8200,bf16/f32:64x12288,bf16/f32:600x10240"
left=$(( BUDGET - ($(date +%s) - t0) ))
timeout $left python3 bench/rmsnorm_sweep.py --lib base=$B/base.so --lib main=$B/main.so --pdl --rounds 2 \
  --flashinfer /tmp/fi --triton .dev/fi/anchors/h200_triton_rmsnorm.py --only-alloc --compile-per-hidden \
  --json $R/rms_bounds.json --shapes "$S" > $R/rms_bounds.txt 2>&1; lap "rms bounds rc=$?"
tail -24 $R/rms_bounds.txt
pack
