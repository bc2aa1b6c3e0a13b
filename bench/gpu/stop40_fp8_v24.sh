#!/usr/bin/env bash
# Stop 40's attention call: v24 (kernels/attention/prepared/v24-lane-boxes.patch, warp 0's lanes
# issue a tile's TMA boxes side by side) on the FP8 cache's 16-token pages, where a 128-key tile is
# 8 boxes (the 16-bit tiles that stop 39 and 40 measured neutral are 4). The FP8 bench on the
# 16-token-page cases and three controls (64- and 256-token pages, contiguous), main and v24 built
# side by side and run in the order main, v24, v24, main.
# Carry .dev/fi; run as `bash bench/gpu/stop40_fp8_v24.sh 400` (a record of its call: the patch was deleted when
# v24 landed in d2b44e5; `git show b00ce35:kernels/attention/prepared/v24-lane-boxes.patch`).
BUDGET=${1:-400}; . bench/gpu/prelude.sh
mkdir -p /tmp/v24
P=$(pwd)/kernels/attention/prepared/v24-lane-boxes.patch
cp -r kernels /tmp/v24/ && (cd /tmp/v24 && patch -s -p1 < "$P") || echo "v24 patch FAILED" | tee -a $R/env.txt
bench/gpu/build_attention_libs.sh /tmp/ab main=. v24=/tmp/v24 > $R/build_attn.txt 2>&1; lap "builds rc=$?"
PICK=6,7,12,14,18,8,10,1
for n in main v24 v24 main; do
  k=$(ls $R/fp8_${n}_*.txt 2>/dev/null | wc -l)
  HK_ATTN_LIB=/tmp/ab/$n/libhk_attention_cuda.so timeout $(left 20) python3 bench/attention_fp8_bench.py --reps 30 --pick $PICK \
    --json $R/fp8_${n}_$k.json > $R/fp8_${n}_$k.txt 2>&1
  lap "fp8 $n $k rc=$?"; pack
done
grep -h "^| B" $R/fp8_*_0.txt | cut -d'|' -f2-7
