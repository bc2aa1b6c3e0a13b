#!/usr/bin/env bash
# Sets up the machine, then builds and runs every test twice: a warnings-as-errors build and an
# ASan+UBSan build. Also checks that an installed hubkern is consumable by CMake and pkg-config.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"
jobs=$(nproc 2>/dev/null || echo 2)

run_suite() { # name, extra cmake args...
  local dir="$root/build-$1"; shift
  cmake -S "$root" -B "$dir" -DHK_WERROR=ON -DHK_TEST_HOOKS=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600)
}

echo "== release build + tests"
run_suite ci -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== sanitizer build (ASan + UBSan) + tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite asan -DCMAKE_BUILD_TYPE=Debug -DHK_SANITIZE=ON
# The option matrix: each optional part switched off in turn, and a static-only library. Tests
# that need a part that is off are reported as skipped (tests/CMakeLists.txt says why). The
# static-only build is also the product configuration: no test hooks compiled in.
for cfg in "server-off -DHK_BUILD_SERVER=OFF" "kernels-off -DHK_BUILD_KERNELS=OFF" \
           "static-only -DHK_BUILD_SHARED=OFF -DHK_TEST_HOOKS=OFF"; do
  set -- $cfg
  echo "== option matrix: $1 (${*:2})"
  run_suite "$1" -DCMAKE_BUILD_TYPE=Release "${@:2}"
done
if [ -x "$root/tests/consumer/run.sh" ]; then
  echo "== install + consumer project (find_package and pkg-config)"
  "$root/tests/consumer/run.sh" "$root/build-ci"
fi
echo "== all tests passed"
