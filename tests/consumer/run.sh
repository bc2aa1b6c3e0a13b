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

echo "-- pkg-config --static: libhubkern.a and what it needs, no LD_LIBRARY_PATH"
static_libs=$(PKG_CONFIG_PATH="$pcdir" pkg-config --static --libs-only-l hubkern | sed 's/-lhubkern//')
cc -std=c11 -Wall -Werror "$here/main.c" $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags hubkern) \
  "$libdir/libhubkern.a" $static_libs -o "$tmp/consumer_pc_static"
"$tmp/consumer_pc_static"
echo "-- consumer project: ok"
