#!/usr/bin/env bash
# Stop 39's fourth device call: where warp 0's time goes in steady state, B16 uniform 8k GQA 32/8
# D128 bf16, on 16-token pages through the TMA against the contiguous cache through the same TMA
# kernel (HK_ATTN_DECODE_TMA=all, 64-row boxes) and cp.async: ncu with warm caches
# (--cache-control none), the 12th launch of 16, warp-state and scheduler statistics beside
# speed of light and the memory workload. Carries nothing.
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $R/env.txt 2>&1; cat $R/env.txt
export PYTHONUNBUFFERED=1
bench/gpu/build_attention_libs.sh /tmp/ab main=. > $R/build_attn.txt 2>&1; lap "build rc=$?"
export HK_ATTN_LIB=/tmp/ab/main/libhk_attention_cuda.so
D=kernels/attention/tools/decode_once.py
N="ncu --clock-control none --cache-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy -k regex:decode_kernel --launch-skip 11 --launch-count 1"
timeout 40 $N python3 $D --batch 16 --seqlen 8192 --page 16 --launches 16 > $R/ncu_warm_p16_tma.txt 2>&1; lap "p16 tma rc=$?"
HK_ATTN_DECODE_TMA=all timeout 40 $N python3 $D --batch 16 --seqlen 8192 --page 0 --launches 16 > $R/ncu_warm_contig_tma.txt 2>&1; lap "contig tma rc=$?"
timeout 40 $N python3 $D --batch 16 --seqlen 8192 --page 0 --launches 16 > $R/ncu_warm_contig_cpasync.txt 2>&1; lap "contig cp.async rc=$?"
grep -HE "^ +(Duration|DRAM Throughput|Warp Cycles Per Issued Instruction|Issued Warp Per Scheduler|No Eligible|Achieved Occupancy)" $R/ncu_warm_*.txt; pack
