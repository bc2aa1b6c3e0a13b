#!/usr/bin/env bash
# One H200 round for the RMSNorm kernel (issue 23), run by the device tool from the repo root with
# .dev/rb (builds: NAME.so for each --lib, cuda_paths* test programs) and .dev/fi (pkg.tar.xz from
# flashinfer_prep.sh, whl/ apache-tvm-ffi + liger-kernel, anchors/h200_triton_rmsnorm.py) carried:
#   bench/rmsnorm/h200_round.sh "NAME1 NAME2 ..." [sweep args...]
# Writes under $OUT: env.txt, cuda_paths.txt, sanitizer.txt, sweep.txt/.json, ncu.txt.
set -uo pipefail
names=$1; shift
export PYTHONUNBUFFERED=1
{ nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; date -u; } > $OUT/env.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/fi/whl/*.whl >> $OUT/env.txt 2>&1 || exit 3
export PYTHONPATH=/tmp/site
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || exit 3
# 1. every launch path, poisoned outputs, float64 reference; then memcheck and racecheck on it
: > $OUT/cuda_paths.txt; : > $OUT/sanitizer.txt
for t in .dev/rb/cuda_paths*; do
  { echo "## $t"; $t 2>&1; } | tee -a $OUT/cuda_paths.txt | tail -1
  { echo "## compute-sanitizer --tool memcheck $t --quick"
    timeout ${SAN_S:-90} compute-sanitizer --tool memcheck --leak-check full $t --quick 2>&1 | tail -8
    echo "## compute-sanitizer --tool racecheck $t --quick"
    timeout ${SAN_S:-90} compute-sanitizer --tool racecheck $t --quick 2>&1 | tail -8; } >> $OUT/sanitizer.txt 2>&1
done
grep -E "^##|SUMMARY" $OUT/sanitizer.txt
# 2. the sweep: every build beside F.rms_norm, torch.compile, Liger, the Triton anchor, FlashInfer
libs=(); for n in $names; do libs+=(--lib "$n=.dev/rb/$n.so"); done
timeout ${SWEEP_S:-300} python3 bench/rmsnorm_sweep.py "${libs[@]}" --flashinfer /tmp/fi \
  --triton .dev/fi/anchors/h200_triton_rmsnorm.py --json $OUT/sweep.json "$@" 2>&1 | tee $OUT/sweep.txt | grep -v '^|'
# 3. ncu on wide rows, ours (each build) and the Triton anchor
[ "${NCU_S:-60}" = 0 ] && exit 0
plibs=(); for n in $names; do plibs+=(--lib "$n=.dev/rb/$n.so"); done
timeout ${NCU_S:-60} ncu --clock-control none -k 'regex:rms_|rms_fwd' --section SpeedOfLight --section Occupancy \
  --section LaunchStats python3 bench/rmsnorm/profile_wide.py "${plibs[@]}" \
  --triton .dev/fi/anchors/h200_triton_rmsnorm.py > $OUT/ncu.txt 2>&1
echo "ncu rc=$?"; grep -E "rms_|rms_fwd|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Block Limit Registers" $OUT/ncu.txt | head -60
