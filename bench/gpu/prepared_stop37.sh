#!/usr/bin/env bash
# (Run in stop 39, on an H100: kernels/rmsnorm/results/v11r_h100/ and kernels/attention/results/stop39_layout/;
# v11r then landed in rmsnorm.cu and its patch left prepared/, so this script is the record of that call.)
# The device call prepared in stop 37 and not run (the H200 was refused and the session's device
# time ran out): it needs only this checkout and the FlashInfer package in .dev/fi (carry .dev/fi;
# bench/gpu/flashinfer_prep.sh rebuilds it), and builds everything else on the device. Results go
# to $OUT/r.tar.xz, packed after each step. Run as: bash bench/gpu/prepared_stop37.sh [BUDGET_S]
#  1) attention: B16 uniform 8k decode (GQA 32/8, D128) on 16-token pages, shuffled vs --in-order
#     (the contiguous cache's addresses) vs the contiguous cache, under ncu: does the page gather cost
#     the DRAM throughput that cuDNN's head-major cache has (NOTES v23, "next")?
#  2) rmsnorm v11r (prepared/v11r-bf16-fp32w.patch: v11's 768-thread bound for bf16 rows with an
#     fp32 weight of 1025-1792 vectors only) beside main: cuda_paths, then that class's sweep and
#     controls with every baseline incl. FlashInfer, plain and PDL launches, 2 rounds alternating.
set -uo pipefail
BUDGET=${1:-540}
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1; cat $R/env.txt
# builds, in parallel: the attention library, and main / v11r rmsnorm + v11r's cuda_paths
B=/tmp/rb; mkdir -p $B; cp -r kernels/rmsnorm $B/v11r-src
(cd $B/v11r-src && patch -s -p3 < prepared/v11r-bf16-fp32w.patch) || echo "v11r patch FAILED" | tee -a $R/env.txt
F="-O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC"
(cd kernels/rmsnorm/rmsnorm_cuda && nvcc $F -shared -I. rmsnorm.cu -o $B/main.so) > $R/build_rms_main.txt 2>&1 &
(cd $B/v11r-src/rmsnorm_cuda && nvcc $F -shared -I. rmsnorm.cu -o $B/v11r.so) > $R/build_rms_v11r.txt 2>&1 &
(cd $B/v11r-src/rmsnorm_cuda && nvcc $F -I. ../tests/cuda_paths.cu rmsnorm.cu -o $B/cuda_paths_v11r) > $R/build_paths.txt 2>&1 &
bench/gpu/build_attention_libs.sh /tmp/ab main=. > $R/build_attn.txt 2>&1
wait; lap "builds done"; ls -la $B /tmp/ab/main >> $R/build_attn.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || echo "no FlashInfer package" >> $R/env.txt
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
D=kernels/attention/tools/decode_once.py
export HK_ATTN_LIB=/tmp/ab/main/libhk_attention_cuda.so
N="ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis -k regex:decode_kernel --launch-skip 3 --launch-count 1"
timeout 30 $N python3 $D --batch 16 --seqlen 8192 --page 16 > $R/ncu_p16_shuffled.txt 2>&1; lap "ncu shuffled rc=$?"
timeout 30 $N python3 $D --batch 16 --seqlen 8192 --page 16 --in-order > $R/ncu_p16_inorder.txt 2>&1; lap "ncu in-order rc=$?"
timeout 30 $N python3 $D --batch 16 --seqlen 8192 --page 0 > $R/ncu_contig.txt 2>&1; lap "ncu contiguous rc=$?"
timeout 30 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis -k 'regex:cudnn|fmha|sdpa' \
  --launch-skip 3 --launch-count 1 python3 $D --batch 16 --seqlen 8192 --sdpa > $R/ncu_cudnn.txt 2>&1; lap "ncu cudnn rc=$?"
grep -HE "^ +(Duration|DRAM Throughput)" $R/ncu_*.txt; pack
timeout 60 $B/cuda_paths_v11r > $R/cuda_paths_v11r.txt 2>&1; lap "cuda_paths v11r rc=$?"; tail -1 $R/cuda_paths_v11r.txt; pack
S="bf16/f32:2048x8448,bf16/f32:8192x8448,bf16/f32:32768x8448,bf16/f32:2048x12288,bf16/f32:8192x12288"
S="$S,bf16/f32:32768x12288,bf16/f32:8192x14336,bf16/f32:32768x14336,bf16/bf16:8192x12288,f16/f32:8192x12288"
left=$(( BUDGET - ($(date +%s) - t0) ))
timeout $left python3 bench/rmsnorm_sweep.py --lib main=$B/main.so --lib v11r=$B/v11r.so --pdl --rounds 2 \
  --flashinfer /tmp/fi --triton .dev/fi/anchors/h200_triton_rmsnorm.py --only-alloc --compile-per-hidden \
  --json $R/rms_sweep.json --shapes "$S" > $R/rms_sweep.txt 2>&1; lap "rms sweep rc=$?"
tail -24 $R/rms_sweep.txt
pack
