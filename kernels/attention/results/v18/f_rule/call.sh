#!/usr/bin/env bash
# stop 31 call 2: v18f (also the Hub variants built from it checked) (v18d + the rule: persistent past one wave; unequal sequences on the counter)
set -uo pipefail
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s); lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1
bench/gpu/build_attention_libs.sh .dev/ab base=.dev/base f=.dev/v18f > $R/build.txt 2>&1; lap "build rc=$?"
tail -2 $R/build.txt
for per in 1 0; do
  HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_LIB=.dev/ab/f/libhk_attention_cuda.so timeout 90 python3 kernels/attention/tests/test_attention_gpu.py --prefill-only > $R/smoke_f_p$per.txt 2>&1
  rc=$?; lap "smoke f persist $per rc=$rc"; grep -E "^FAIL|PASSED|FAILED" $R/smoke_f_p$per.txt | head -3
  [ $rc = 0 ] || { tail -4 $R/smoke_f_p$per.txt; pack; exit 1; }
done
sw() {  # name lib persist reps extra...
  local n=$1 l=$2 per=$3 reps=$4; shift 4
  HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_LIB=.dev/ab/$l/libhk_attention_cuda.so timeout 200 python3 bench/attention_prefill_sweep.py \
     --reps $reps "$@" --json $R/$n.json > $R/$n.txt 2>&1; lap "$n rc=$?"
}
sw short_base base auto 20 --short --no-baselines
sw short_f_auto f auto 20 --short --no-baselines
sw short_f_p1 f 1 20 --short --no-baselines
sw short_base2 base auto 20 --short --no-baselines
sw sweep_base base auto 20 --no-baselines
sw sweep_f_auto f auto 20 --no-baselines
sw sweep_f_p1 f 1 20 --no-baselines
for a in short sweep; do python3 kernels/attention/tools/compare_prefill_runs.py $R/${a}_base.json $R/${a}_f_auto.json $R/${a}_f_p1.json > $R/cmp_${a}_f.txt 2>&1; done
grep -H median $R/cmp_*.txt
pack
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl .dev/vwhl/*.whl > $R/pip2.txt 2>&1
(timeout 240 python3 kernels/attention/torch-ext/build_torch_variant.py --hub /tmp/ahub --work /tmp/tb > $R/torch_build.txt 2>&1; echo "exit $?" >> $R/torch_build.txt) &
mkdir -p $R/t_f
TESTS_S=100 SAN_S=150 OUT=$R/t_f bench/gpu/h200_attention_round.sh tests,testscta,sanitize base f 2>&1 | grep -v "^$" | tail -16
lap "tests f"; pack
mkdir -p /tmp/vh && tar xJf .dev/hub.tar.xz -C /tmp/vh
PYTHONPATH=/tmp/site timeout 150 python3 kernels/attention/tests/test_variant_cuda.py /tmp/vh/hub > $R/hub_variant_cuda.txt 2>&1; lap "tvm-ffi variant rc=$?"; tail -2 $R/hub_variant_cuda.txt
wait; tail -2 $R/torch_build.txt
PYTHONPATH=/tmp/site timeout 150 python3 kernels/attention/tests/test_torch_variant.py /tmp/ahub > $R/torch_variant.txt 2>&1; lap "torch variant rc=$?"; tail -2 $R/torch_variant.txt
pack
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi; export PYTHONPATH=/tmp/site
sw prefill_sweep_f f auto 20 --flashinfer /tmp/fi
sw prefill_short_f f auto 20 --short --flashinfer /tmp/fi
pack
