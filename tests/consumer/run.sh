#!/usr/bin/env bash
# Install the build tree $1 into a temporary prefix, then build tests/consumer against it twice:
# with CMake's find_package(hubkern) (shared and static library) and with
# `pkg-config --cflags --libs hubkern`; run every binary. Exit non-zero on any failure.
set -euo pipefail
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null

echo "-- find_package(hubkern)"
cmake -S "$here" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/cmake" >/dev/null
if [ -e "$tmp/cmake/consumer_shared" ]; then "$tmp/cmake/consumer_shared"; else echo "   (static-only build: no shared consumer)"; fi
"$tmp/cmake/consumer_static"

# libarchive (and the libxml2, ICU, nettle ... behind it) is dlopened by bundles, never linked:
# no consumer may load it at start-up. $1: the binary, $2: what it is.
no_heavy_libs() {
  local heavy
  heavy=$(ldd "$1" | grep -E 'libarchive|libxml2|libicu' || true)
  if [ -n "$heavy" ]; then echo "$2 loads libraries only bundles need:" >&2; echo "$heavy" >&2; exit 1; fi
  echo "   $2: $(ldd "$1" | wc -l) libraries (ldd), none of libarchive/libxml2/ICU"
}
[ -e "$tmp/cmake/consumer_shared" ] && no_heavy_libs "$tmp/cmake/consumer_shared" "shared consumer"
no_heavy_libs "$tmp/cmake/consumer_static" "static consumer"

if [ -e "$tmp/cmake/consumer_shared" ]; then
  # A machine with libhubkern but not the -dev packages of libcurl, OpenSSL, cJSON and libarchive:
  # their CMake lookups are switched off and pkg-config sees no .pc file, so find_package(hubkern)
  # must give the shared target without looking for them (and leave the static one out).
  echo "-- find_package(hubkern) with the dependencies' development files hidden: shared only"
  mkdir -p "$tmp/no-pc"
  hide=(-DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON
        -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON)
  PKG_CONFIG_LIBDIR="$tmp/no-pc" cmake -S "$here" -B "$tmp/hidden" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release "${hide[@]}" >"$tmp/hidden.log" 2>&1 || { cat "$tmp/hidden.log" >&2; exit 1; }
  PKG_CONFIG_LIBDIR="$tmp/no-pc" cmake --build "$tmp/hidden" >/dev/null
  [ ! -e "$tmp/hidden/consumer_static" ] || { echo "static target defined without its dependencies" >&2; exit 1; }
  "$tmp/hidden/consumer_shared"
  # asking for the static target there fails, and says what is missing and what to link instead
  if PKG_CONFIG_LIBDIR="$tmp/no-pc" cmake -S "$here" -B "$tmp/hidden-static" -DCMAKE_PREFIX_PATH="$prefix" \
       -DHK_CONSUMER_COMPONENTS=static "${hide[@]}" >"$tmp/hidden-static.log" 2>&1; then
    echo "find_package(hubkern COMPONENTS static) succeeded without the static target's dependencies" >&2; exit 1
  fi
  tr -s ' \n' ' ' <"$tmp/hidden-static.log" | grep -q "development files were not found: libcurl .*OpenSSL .*cJSON" ||
    { cat "$tmp/hidden-static.log" >&2; exit 1; }
  echo "   COMPONENTS static there: refused, naming libcurl, OpenSSL and cJSON"
fi

echo "-- pkg-config --cflags --libs hubkern"
pc=$(find "$prefix" -name hubkern.pc -print -quit)
[ -n "$pc" ] || { echo "hubkern.pc was not installed" >&2; exit 1; }
pcdir=$(dirname "$pc")
libdir=$(cd "$pcdir/.." && pwd)
# the .pc is relocatable (prefix from ${pcfiledir}): it must point at wherever we installed
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs hubkern)
case "$flags" in *"$prefix"*) ;; *) echo "pkg-config flags do not point at the install: $flags" >&2; exit 1;; esac
cc -std=c11 -Wall -Werror "$here/main.c" $flags -o "$tmp/consumer_pc"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/consumer_pc"

echo "-- README's C snippet, examples/rmsnorm_example.c, bench/get_kernel_warm.c: plain -std=c11, installed headers"
# README's build line, as written there (-lm, the rpath), with warnings as errors
src=$(cd "$here/../.." && pwd)
awk '/^```c$/ {on = 1; next} /^```$/ {on = 0} on' "$src/README.md" >"$tmp/readme_app.c"
grep -q 'hk_init()' "$tmp/readme_app.c" || { echo "README has no C snippet calling hk_init" >&2; exit 1; }
for c in "$tmp/readme_app.c" "$src/examples/rmsnorm_example.c" "$src/bench/get_kernel_warm.c"; do
  cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$c" $flags -lm -Wl,-rpath,"$libdir" -o "$tmp/snippet"
  echo "   $(basename "$c"): builds"
done
# hubkern.hpp is installed and the serving example builds against it as its comment says
if command -v c++ >/dev/null; then
  c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror "$src/examples/serving/serving.cpp" $flags -pthread \
    -Wl,-rpath,"$libdir" -o "$tmp/serving"
  echo "   serving.cpp (hubkern.hpp, C++17): builds"
fi

echo "-- pkg-config --static: libhubkern.a and what it needs, no LD_LIBRARY_PATH"
static_libs=$(PKG_CONFIG_PATH="$pcdir" pkg-config --static --libs-only-l hubkern | sed 's/-lhubkern//')
cc -std=c11 -Wall -Werror "$here/main.c" $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags hubkern) \
  "$libdir/libhubkern.a" $static_libs -o "$tmp/consumer_pc_static"
"$tmp/consumer_pc_static"
no_heavy_libs "$tmp/consumer_pc_static" "pkg-config --static consumer"
n_flags=$(echo "$static_libs" | wc -w)
echo "   static link line: $static_libs ($n_flags flags)"
echo "-- consumer project: ok"
