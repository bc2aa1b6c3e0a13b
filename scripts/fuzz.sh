#!/usr/bin/env bash
# Fuzzing with the libFuzzer harnesses of tests/fuzz (tests/fuzz/README.md).
#
#   scripts/fuzz.sh [SECONDS] [NAME...]   a campaign: build build-fuzz (clang, -DHK_FUZZ=ON) if
#                                         needed, run each harness (all, or the NAMEs) for SECONDS
#                                         (default 600), HK_FUZZ_JOBS at a time (default: nproc;
#                                         HK_FUZZ_NICE: their nice level),
#                                         and print executions, cov and ft of each. New inputs go
#                                         to build-fuzz/fuzz-corpus/<name>, logs and crashes to
#                                         build-fuzz/fuzz-logs/.
#   scripts/fuzz.sh --smoke S BIN SEEDS WORK   one harness for S seconds on its seeds (what ctest
#                                         runs in the HK_FUZZ build; new inputs go to WORK only).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
common=(-timeout=20 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1)

if [ "${1:-}" = "--smoke" ]; then
  secs=$2 bin=$3 seeds=$4 work=$5
  rm -rf "$work"; mkdir -p "$work/corpus"
  exec "$bin" "${common[@]}" -max_total_time="$secs" -artifact_prefix="$work/" "$work/corpus" "$seeds"
fi

secs=${1:-600}; shift || true
build=${HK_FUZZ_BUILD:-$root/build-fuzz}
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHK_FUZZ=ON -DHK_WERROR=ON \
    -DHK_BUILD_KERNELS=OFF -DHK_BUILD_SHARED=OFF -DHK_TEST_HOOKS=ON >/dev/null
fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$root"/tests/fuzz/fuzz_*.c; do names+=("$(basename "$f" .c | sed 's/^fuzz_//')"); done
fi
cmake --build "$build" -j "$(nproc)" --target "${names[@]/#/fuzz_}" >/dev/null
jobs=${HK_FUZZ_JOBS:-$(nproc)}
mkdir -p "$build/fuzz-logs"
run_one() {
  local n=$1 corpus="$build/fuzz-corpus/$1"
  mkdir -p "$corpus" "$build/fuzz-logs/$n"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 nice -n "${HK_FUZZ_NICE:-0}" "$build/tests/fuzz/fuzz_$n" "${common[@]}" \
    -max_total_time="$secs" -artifact_prefix="$build/fuzz-logs/$n/" \
    "$corpus" "$root/tests/fuzz/corpus/$n" >"$build/fuzz-logs/$n.log" 2>&1
  echo "$n rc=$?"
}
export -f run_one; export build root secs
printf '%s\n' "${names[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' || true
fail=0
printf '%-14s %14s %8s %8s %s\n' harness execs cov ft result
for n in "${names[@]}"; do
  log="$build/fuzz-logs/$n.log"
  execs=$(grep -o 'Done [0-9]* runs' "$log" | awk '{print $2}' | tail -1 || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(echo "$last" | grep -o 'cov: [0-9]*' | awk '{print $2}' || true)
  ft=$(echo "$last" | grep -o 'ft: [0-9]*' | awk '{print $2}' || true)
  res=ok
  for f in "$build/fuzz-logs/$n"/{crash,leak,timeout,oom,slow-unit}-*; do
    if [ -e "$f" ]; then res="FINDINGS in $build/fuzz-logs/$n"; fail=1; break; fi
  done
  printf '%-14s %14s %8s %8s %s\n' "$n" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$res"
done
exit $fail
