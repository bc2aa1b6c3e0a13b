#!/usr/bin/env bash
# stop 31 call 1: v18d (decoded slot for every persistent launch) and v18e (full attention's
# consumers walk the stride themselves) beside main (v17)
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1
bench/gpu/build_attention_libs.sh .dev/ab base=.dev/base d=.dev/v18d e=.dev/v18e > $R/build.txt 2>&1; lap "build rc=$?"
tail -3 $R/build.txt
ok=""
for c in d e; do
  good=1
  for per in 1 0; do
    HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_LIB=.dev/ab/$c/libhk_attention_cuda.so timeout 90 python3 kernels/attention/tests/test_attention_gpu.py --prefill-only > $R/smoke_${c}_p$per.txt 2>&1
    rc=$?; lap "smoke $c persist $per rc=$rc"; grep -E "^FAIL|PASSED|FAILED" $R/smoke_${c}_p$per.txt | head -3
    [ $rc = 0 ] || { tail -4 $R/smoke_${c}_p$per.txt; good=0; break; }
  done
  [ $good = 1 ] && ok="$ok $c"
done
pack
[ -n "$ok" ] || exit 1
sw() {  # name lib persist reps extra...
  local n=$1 l=$2 per=$3 reps=$4; shift 4
  HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_LIB=.dev/ab/$l/libhk_attention_cuda.so timeout 150 python3 bench/attention_prefill_sweep.py \
     --reps $reps "$@" --json $R/$n.json > $R/$n.txt 2>&1; lap "$n rc=$?"
}
sw short_base base auto 20 --short --no-baselines
for c in $ok; do sw short_${c}_auto $c auto 20 --short --no-baselines; sw short_${c}_p1 $c 1 20 --short --no-baselines; done
sw short_base2 base auto 20 --short --no-baselines
pack
sw sweep_base base auto 20 --no-baselines
for c in $ok; do sw sweep_${c}_auto $c auto 20 --no-baselines; done
for c in $ok; do sw sweep_${c}_p1 $c 1 20 --no-baselines; done
pack
for c in $ok; do
  for a in short sweep; do python3 kernels/attention/tools/compare_prefill_runs.py $R/${a}_base.json $R/${a}_${c}_auto.json $R/${a}_${c}_p1.json > $R/cmp_${a}_$c.txt 2>&1; done
done
python3 kernels/attention/tools/compare_prefill_runs.py $R/short_base.json $R/short_base2.json > $R/cmp_short_base_noise.txt 2>&1
grep -H median $R/cmp_*.txt
pack
for c in $ok; do
  mkdir -p $R/t_$c
  TESTS_S=100 OUT=$R/t_$c bench/gpu/h200_attention_round.sh tests,testscta base $c 2>&1 | grep -v "^$" | tail -9
  lap "tests $c"; pack
done
