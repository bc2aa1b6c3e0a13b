#!/usr/bin/env bash
# What a program linking hubkern carries: the libraries it loads (ldd), the -l flags of the static
# link line, start-up time, and whether find_package(hubkern) works for a shared-only consumer
# without the dependencies' -dev packages. The baseline build and the new build are installed and
# measured side by side in the same run.
#   usage: bench/link_deps.sh BASELINE_BUILD_DIR NEW_BUILD_DIR [RUNS]
# Record the table in bench/link_deps.md.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 BASELINE_BUILD_DIR NEW_BUILD_DIR [RUNS]" >&2; exit 2; fi
base=$(cd "$1" && pwd); new=$(cd "$2" && pwd); runs=${3:-30}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median wall time in ms of running "$@" $runs times
median_ms() {
  local t=()
  for _ in $(seq "$runs"); do
    local s e
    s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N)
    t+=($(( (e - s) / 1000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]/1000}'
}

measure() { # name build_dir
  local name=$1 b=$2 p="$tmp/$1"
  cmake --install "$b" --prefix "$p/prefix" >/dev/null
  local pcdir; pcdir=$(dirname "$(find "$p/prefix" -name hubkern.pc -print -quit)")
  local libdir; libdir=$(cd "$pcdir/.." && pwd)
  export PKG_CONFIG_PATH="$pcdir"
  cc -std=c11 "$src/tests/consumer/main.c" $(pkg-config --cflags --libs hubkern) \
    -Wl,-rpath,"$libdir" -o "$p/shared"
  local static_l; static_l=$(pkg-config --static --libs-only-l hubkern | sed 's/-lhubkern//')
  cc -std=c11 "$src/tests/consumer/main.c" $(pkg-config --cflags hubkern) "$libdir/libhubkern.a" \
    $static_l -o "$p/static"
  unset PKG_CONFIG_PATH
  # a shared-only consumer with libcurl, OpenSSL, cJSON and libarchive's development files hidden
  local hidden=yes
  mkdir -p "$p/nopc"
  PKG_CONFIG_LIBDIR="$p/nopc" cmake -S "$src/tests/consumer" -B "$p/hidden" -DCMAKE_PREFIX_PATH="$p/prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >/dev/null 2>&1 || hidden=no
  local grep_heavy='libarchive|libxml2|libicu'
  printf '%s\n' \
    "$name|$(ldd "$p/shared" | wc -l)|$(ldd "$p/shared" | grep -Ec "$grep_heavy" || true)|$(echo "$static_l" | wc -w)|$(ldd "$p/static" | wc -l)|$(ldd "$p/static" | grep -Ec "$grep_heavy" || true)|$(ldd "$b/cli/hubkern" | wc -l)|$(median_ms "$p/shared")|$(median_ms "$p/static")|$(median_ms "$b/cli/hubkern" -V)|$hidden"
}

echo "| build | shared consumer: ldd libs | of them libarchive/libxml2/ICU | static link line -l flags | static consumer: ldd libs | of them libarchive/libxml2/ICU | hubkern CLI: ldd libs | shared consumer run (ms, median of $runs) | static consumer run (ms) | \`hubkern -V\` (ms) | find_package, shared only, -dev hidden |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for row in "$(measure baseline "$base")" "$(measure new "$new")"; do
  echo "| ${row//|/ | } |"
done
