#!/usr/bin/env bash
# Sets up the machine, then builds and runs every test twice: a warnings-as-errors build and an
# ASan+UBSan build. Also checks that an installed hubkern is consumable by CMake and pkg-config.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"
jobs=$(nproc 2>/dev/null || echo 2)
# one test more than cores: most integration tests wait on servers, sleeps and child processes
# rather than compute, and ctest's slots set CI's wall time (20-minute budget)
test_jobs=$((jobs + 1))

# CTEST_SELECT (optional): ctest arguments that pick the tests of a stage (-R, -L, -LE).
run_suite() { # name, extra cmake args...
  local dir="$root/build-$1"; shift
  cmake -S "$root" -B "$dir" -DHK_WERROR=ON -DHK_TEST_HOOKS=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
  # shellcheck disable=SC2086
  (cd "$dir" && ctest --output-on-failure -j "$test_jobs" --timeout 600 ${CTEST_SELECT:-})
}
stage_start() { echo "== $1"; stage_t0=$(date +%s); }
stage_end() { echo "   ($(( $(date +%s) - stage_t0 )) s)"; }

# The allocation-failure sweep (label alloc) runs once, in the ASan build, where LeakSanitizer
# checks that every failure path frees what it took.
stage_start "release build + tests"
CTEST_SELECT="-LE alloc" run_suite ci -DCMAKE_BUILD_TYPE=RelWithDebInfo
stage_end
# The later stages build no CUDA kernels (nvcc is slow, the sanitizers do not see device code, and
# the kernels' tests ran in the release stage), and the sanitizer stage leaves out the differential
# tests against the Python kernels package (label parity: Python's time, on parse paths the
# fuzzers and the other integration tests also drive under ASan) and the scale tests (label scale:
# timings over 1k-100k files, whose paths the other tests drive under ASan at smaller sizes). All
# three keep CI under 20 minutes.
stage_start "sanitizer build (ASan + UBSan) + tests, allocation-failure injection included"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 CTEST_SELECT="-LE ^(parity|scale)$" \
  run_suite asan -DCMAKE_BUILD_TYPE=Debug -DHK_SANITIZE=ON -DHK_KERNELS_CUDA=OFF
stage_end
# ThreadSanitizer over the concurrent tests only: the env cache, hk_get_kernel and the mirror from
# many threads (test_threads), the kernel registry (test_kernel), the server (test_server), the
# memo's listings shared by reference across threads (test_client_memo).
stage_start "ThreadSanitizer build + the concurrent tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  BUILD_TARGETS="test_threads test_kernel test_server test_client_memo hk_tvmffi_fixture rmsnorm_hub_variants" \
  CTEST_SELECT="-R ^unit\.test_(threads|kernel|server|client_memo)$" \
  run_suite tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHK_TSAN=ON -DHK_KERNELS_CUDA=OFF
stage_end
# libFuzzer harnesses (tests/fuzz): each runs HK_FUZZ_SMOKE_S seconds (5 here) on its seed corpus;
# the long campaigns are scripts/fuzz.sh runs, recorded in tests/fuzz/README.md.
stage_start "fuzz smoke (libFuzzer + ASan + UBSan, clang)"
CC=clang BUILD_TARGETS="$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/\.c$//' | tr '\n' ' ')" \
  CTEST_SELECT="-L ^fuzz$" run_suite fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHK_FUZZ=ON \
  -DHK_BUILD_SHARED=OFF -DHK_BUILD_KERNELS=OFF -DHK_FUZZ_SMOKE_S="${HK_FUZZ_SMOKE_S:-5}"
stage_end
# The option matrix: each optional part switched off in turn, and a static-only library, each
# built and run with its unit and structure tests (the integration suites ran above, in the full
# configuration; keeping them out here keeps CI under 20 minutes). Tests that need a part that is
# off are reported as skipped (tests/CMakeLists.txt says why). The static-only build is also the
# product configuration: no test hooks compiled in.
# (HK_KERNELS_CUDA=OFF where there are kernels: CMake warns of a variable that nothing reads)
for cfg in "server-off -DHK_BUILD_SERVER=OFF -DHK_KERNELS_CUDA=OFF" "kernels-off -DHK_BUILD_KERNELS=OFF" \
           "static-only -DHK_BUILD_SHARED=OFF -DHK_TEST_HOOKS=OFF -DHK_KERNELS_CUDA=OFF"; do
  set -- $cfg
  stage_start "option matrix: $1 (${*:2})"
  CTEST_SELECT="-L ^(unit|structure)$ -LE alloc" run_suite "$1" -DCMAKE_BUILD_TYPE=Release "${@:2}"
  stage_end
done
if [ -x "$root/tests/consumer/run.sh" ]; then
  echo "== install + consumer project (find_package and pkg-config)"
  "$root/tests/consumer/run.sh" "$root/build-ci"
fi
echo "== all tests passed"
