#!/usr/bin/env bash
# The main job, on a fresh machine: install what is needed, build hubkern, start a loopback mirror
# holding our RMSNorm kernel (its CPU tvm-ffi build variant, published with `hubkern publish`), pull
# it with `hubkern pull` (verified), then run the example C program, which gets it with
# hk_get_kernel, calls rms_norm on random data and checks every value against a float64 reference.
# Prints the variant chosen, the bytes verified and the result checked; stops the mirror.
#
# usage: scripts/demo.sh            (BUILD_DIR=... to pick the build directory, default build-demo)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-demo}

echo "== setup (Debian packages, pinned Python packages)"
"$root/scripts/setup.sh"

echo "== build ($build)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHK_BUILD_TESTS=OFF -DHK_KERNELS_CUDA=OFF >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
hubkern=$build/cli/hubkern
example=$build/examples/rmsnorm_example
variant_src=$build/kernels/rmsnorm/hub
ls -d "$variant_src"/build/tvm-ffi*-cpu-*/ >/dev/null 2>&1 || {
  echo "demo: the RMSNorm CPU tvm-ffi variant was not staged in $variant_src" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hubkern-demo-XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" && wait "$server_pid" 2>/dev/null || true
    echo "== mirror stopped"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== publish the RMSNorm CPU tvm-ffi variant as hubkern/rmsnorm, branch v1"
commit=$("$hubkern" publish "$variant_src" hubkern/rmsnorm --branch v1 --cache "$work/store")
echo "   commit $commit"

echo "== start a loopback mirror (hubkern serve)"
"$hubkern" serve --cache "$work/store" --host 127.0.0.1 --port 0 --trust hubkern \
  >"$work/serve.out" 2>"$work/serve.err" &
server_pid=$!
for _ in $(seq 1 100); do
  grep -q '^listening on ' "$work/serve.out" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.err" >&2; exit 1; }
  sleep 0.05
done
endpoint=$(sed -n 's/^listening on //p' "$work/serve.out")
echo "   $endpoint"

echo "== hubkern pull hubkern/rmsnorm --version 1 (into an empty cache)"
"$hubkern" pull hubkern/rmsnorm --version 1 --backend cpu --endpoint "$endpoint" \
  --cache "$work/cache" --json >"$work/pull.json"
python3 - "$work/pull.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"   variant chosen : {', '.join(v['name'] for v in j['variants'])}")
print(f"   commit         : {j['commit']}")
print(f"   files          : {len(j['files'])} ({j['files_downloaded']} downloaded)")
print(f"   bytes verified : {j['bytes_verified']} of {j['bytes_downloaded']} downloaded (sizes, sha256/git-sha1, metadata digest)")
PY

echo "== example C program: hk_get_kernel + rms_norm on random data, checked against float64"
"$example" --repo hubkern/rmsnorm --version 1 --backend cpu --endpoint "$endpoint" \
  --cache "$work/cache" --rows 64 --hidden 4096 | sed 's/^/   /'
echo "== demo ok"
