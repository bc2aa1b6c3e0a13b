#!/usr/bin/env bash
# stop 33 call 4: ncu of the weakest prefill rows left by v21 (B64 S128 D128 full, B4 S4096 D64 full,
# B2 S8192 D128 full), for the next round
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
mkdir -p .dev/ab/n/obj && cd kernels/attention && for s in attention_cuda prefill_sm80 decode_kernel decode_fp8 decode_cache prefill_sm90; do
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -DHK_TEST_HOOKS -Iattention_cpu -Iattention_cuda \
    -c attention_cuda/$s.cu -o ../../.dev/ab/n/obj/$s.o & done; wait; cd ../..
nvcc -shared -o .dev/ab/n/libhk_attention_cuda.so .dev/ab/n/obj/*.o; lap "build rc=$?"
i=0
while read -r shape; do
  i=$((i + 1))
  HK_ATTN_LIB=.dev/ab/n/libhk_attention_cuda.so timeout 60 ncu --clock-control none --set full -k regex:prefill_sm90 \
    --launch-skip 3 --launch-count 1 python3 kernels/attention/tools/prefill_once.py $shape > $R/profile$i.txt 2>&1
  lap "profile $i ($shape) rc=$?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Block Size|Grid Size|Dynamic Shared|Stall|excessive|sectors" $R/profile$i.txt | head -40 > $R/profile${i}_summary.txt
  pack
done <<< "--batch 64 --seqlen 128 --hkv 8
--batch 4 --seqlen 4096 --hkv 8 --d 64
--batch 2 --seqlen 8192 --hkv 8"
