#!/usr/bin/env bash
# One H200 round for the attention kernels (issue 23), run by the device tool from the repo root with
# .dev/ab (NAME/libhk_attention_cuda.so per build, NAME/tests/ when a build brings its own GPU tests)
# and .dev/fi (pkg.tar.xz from bench/gpu/flashinfer_prep.sh, whl/ with apache-tvm-ffi) carried:
#   bench/gpu/h200_attention_round.sh STAGES BASE [NEW]
# STAGES (comma-separated): tests (NEW's GPU tests, poisoned outputs, float64), testscta (NEW's prefill
# tests with each sm_90a CTA shape forced, one CTA a tile and persistent), prefillcta (the short grid,
# ours only, each CTA shape and persistence forced, BASE beside), sweepours (the full prefill sweep,
# ours only: BASE, then NEW with persistence forced off and on), sanitize (compute-sanitizer memcheck, synccheck
# and racecheck of every sm_90a prefill CTA shape, one CTA a tile and persistent), fp8 (FP8 decode bench,
# BASE and NEW), ragged (ragged/paged/contiguous/q_len decode, NEW with BASE as "old"), prefill (the
# short-sequence prefill sweep, NEW, then NEW with the portable kernel forced at two tile sizes, ours only), sweep
# (the full prefill sweep), profile (Nsight Compute, --set full, of one launch of each line of
# PROFILE_SHAPES, tools/prefill_once.py's arguments; default B64 S128 GQA 4, BASE and NEW). FlashInfer (bench/gpu/flashinfer_attn.py) is measured in every bench.
# Writes under $OUT: env.txt and one .txt/.json per stage and build.
set -uo pipefail
stages=",$1,"; base=$2; new=${3:-$2}
export PYTHONUNBUFFERED=1
lib() { echo ".dev/ab/$1/libhk_attention_cuda.so"; }
{ nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; date -u; } > $OUT/env.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl >> $OUT/env.txt 2>&1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || echo "no FlashInfer package" >> $OUT/env.txt
t0=$(date +%s)
lap() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s"; }
if [[ $stages == *,tests,* ]]; then
  tdir=.dev/ab/$new/tests; [ -d "$tdir" ] || tdir=kernels/attention/tests
  HK_ATTN_LIB=$(lib $new) timeout ${TESTS_S:-240} python3 $tdir/test_attention_gpu.py > $OUT/gpu_tests_$new.txt 2>&1
  lap "tests $new" $?; grep -E "^FAIL|PASS|passed|failed" $OUT/gpu_tests_$new.txt | tail -5
fi
if [[ $stages == *,testscta,* ]]; then  # the prefill checks with each sm_90a CTA shape forced
  tdir=.dev/ab/$new/tests; [ -d "$tdir" ] || tdir=kernels/attention/tests
  for cta in 128 64 64x2; do for per in ${PERSIST_SET:-0 1}; do
    f=$OUT/gpu_tests_prefill_cta${cta}_p${per}_$new.txt
    HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_PREFILL_SM90_CTA=$cta HK_ATTN_LIB=$(lib $new) timeout ${TESTS_S:-240} \
      python3 $tdir/test_attention_gpu.py --prefill-only > $f 2>&1
    lap "prefill tests cta $cta persist $per $new" $?; grep -E "^FAIL|PASS|passed|failed" $f | tail -3
  done; done
fi
if [[ $stages == *,sanitize,* ]]; then
  tdir=.dev/ab/$new/tests; [ -d "$tdir" ] || tdir=kernels/attention/tests
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
    HK_ATTN_LIB=$(lib $new) timeout ${SAN_S:-200} compute-sanitizer --tool $tool --error-exitcode 9 python3 $tdir/sanitize_prefill.py \
      > $OUT/sanitize_${tool}_$new.txt 2>&1
    lap "sanitize $tool $new" $?; tail -2 $OUT/sanitize_${tool}_$new.txt
  done
fi
if [[ $stages == *,prefillcta,* ]]; then  # ours only, each sm_90a CTA shape forced (to place the rule)
  [ "$base" != "$new" ] && { HK_ATTN_LIB=$(lib $base) timeout ${PREFILL_S:-200} python3 bench/attention_prefill_sweep.py \
      --short --no-baselines --reps ${PREFILL_REPS:-10} --json $OUT/prefill_short_$base.json > $OUT/prefill_short_$base.txt 2>&1
    lap "prefill short $base" $?; }
  for cta in ${CTA_SET:-128 64 64x2}; do for per in ${PERSIST_SET:-0 1}; do
    f=$OUT/prefill_short_cta${cta}_p${per}_$new
    HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_PREFILL_SM90_CTA=$cta HK_ATTN_LIB=$(lib $new) timeout ${PREFILL_S:-200} \
      python3 bench/attention_prefill_sweep.py --short --no-baselines --reps ${PREFILL_REPS:-10} --json $f.json > $f.txt 2>&1
    lap "prefill short cta $cta persist $per $new" $?
  done; done
fi
if [[ $stages == *,sweepours,* ]]; then  # the full sweep, ours only: BASE, NEW one CTA a tile, NEW persistent
  HK_ATTN_LIB=$(lib $base) timeout ${SWEEP_S:-400} python3 bench/attention_prefill_sweep.py --no-baselines \
    --reps ${SWEEP_REPS:-10} --json $OUT/sweep_ours_$base.json > $OUT/sweep_ours_$base.txt 2>&1
  lap "sweep ours $base" $?
  for per in 0 1; do
    HK_ATTN_PREFILL_SM90_PERSIST=$per HK_ATTN_LIB=$(lib $new) timeout ${SWEEP_S:-400} python3 bench/attention_prefill_sweep.py \
      --no-baselines --reps ${SWEEP_REPS:-10} --json $OUT/sweep_ours_p${per}_$new.json > $OUT/sweep_ours_p${per}_$new.txt 2>&1
    lap "sweep ours persist $per $new" $?
  done
fi
if [[ $stages == *,profile,* ]]; then
  for b in $(echo "$base $new" | tr ' ' '\n' | awk '!s[$0]++'); do
    i=0
    while read -r shape; do
      [ -n "$shape" ] || continue
      i=$((i + 1))
      HK_ATTN_LIB=$(lib $b) timeout ${PROFILE_S:-180} ncu --clock-control none --set full -k regex:prefill_sm90 \
        --launch-skip 3 --launch-count 1 python3 kernels/attention/tools/prefill_once.py $shape > $OUT/profile${i}_$b.txt 2>&1
      lap "profile $i ($shape) $b" $?
    done <<< "${PROFILE_SHAPES:-"--batch 64 --seqlen 128 --hkv 8"}"
  done
fi
if [[ $stages == *,fp8,* ]]; then
  for b in $(echo "$base $new" | tr ' ' '\n' | awk '!s[$0]++'); do
    HK_ATTN_LIB=$(lib $b) timeout ${FP8_S:-240} python3 bench/attention_fp8_bench.py --reps 30 --flashinfer /tmp/fi \
      --json $OUT/fp8_$b.json > $OUT/fp8_$b.txt 2>&1
    lap "fp8 $b" $?
  done
fi
if [[ $stages == *,ragged,* ]]; then
  old=$(lib $base); [ "$base" = "$new" ] && old=
  HK_ATTN_LIB=$(lib $new) HK_ATTN_OLD_LIB=$old timeout ${RAGGED_S:-240} python3 bench/attention_ragged_bench.py \
    --reps 30 --flashinfer /tmp/fi --json $OUT/ragged_$new.json > $OUT/ragged_$new.txt 2>&1
  lap "ragged $new" $?
fi
if [[ $stages == *,prefill,* ]]; then
  HK_ATTN_LIB=$(lib $new) timeout ${PREFILL_S:-200} python3 bench/attention_prefill_sweep.py --short --reps ${PREFILL_REPS:-10} --flashinfer /tmp/fi \
    --json $OUT/prefill_short_$new.json > $OUT/prefill_short_$new.txt 2>&1
  lap "prefill short $new" $?
  [ "${PORTABLE:-1}" = 1 ] && for cfg in -1 0; do  # the portable kernel's default tiles (BM 128) and cfg 0 (BM 64: twice the CTAs)
    HK_ATTN_PREFILL_CFG=$cfg HK_ATTN_PREFILL_IMPL=portable HK_ATTN_LIB=$(lib $new) timeout ${PREFILL_S:-200} \
      python3 bench/attention_prefill_sweep.py --short --no-baselines --json $OUT/prefill_short_portable${cfg}_$new.json \
      > $OUT/prefill_short_portable${cfg}_$new.txt 2>&1
    lap "prefill short portable cfg $cfg $new" $?
  done
fi
if [[ $stages == *,sweep,* ]]; then
  HK_ATTN_LIB=$(lib $new) timeout ${SWEEP_S:-400} python3 bench/attention_prefill_sweep.py --flashinfer /tmp/fi \
    --json $OUT/prefill_sweep_$new.json > $OUT/prefill_sweep_$new.txt 2>&1
  lap "prefill sweep $new" $?
fi
