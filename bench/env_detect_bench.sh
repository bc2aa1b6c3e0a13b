#!/usr/bin/env bash
# Cost of environment detection on a warm, offline `hubkern pull --backend cpu` (issue 24 item 3):
# the RMSNorm CPU variant is published into a loopback mirror, pulled once, then pulled N times
# offline with the remembered Python answer off (HUBKERN_PYTHON_CACHE=0: one interpreter run per
# pull, as before) and on. python3 is whatever PATH finds (a pyenv shim on the dev box).
#   bench/env_detect_bench.sh [BUILD_DIR] [N]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
n=${2:-20}
hk="$build/cli/hubkern"
variant=$(ls -d "$build"/kernels/rmsnorm/hub/build/tvm-ffi01-cpu-* | head -1)
tmp=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/build"
cp -r "$variant" "$tmp/src/build/"
"$hk" publish "$tmp/src" bench/rmsnorm --branch v1 --cache "$tmp/store" >/dev/null 2>&1
"$hk" serve --cache "$tmp/store" --host 127.0.0.1 --port 0 > "$tmp/serve.out" 2>/dev/null &
srv=$!
for _ in $(seq 50); do grep -q listening "$tmp/serve.out" && break; sleep 0.1; done
url=$(awk '{print $3}' "$tmp/serve.out")
export HF_HUB_CACHE="$tmp/cache" XDG_CACHE_HOME="$tmp/xdg"
"$hk" pull bench/rmsnorm --version 1 --backend cpu --signature off --trust-remote-code -q >/dev/null --endpoint "$url"
kill $srv
echo "python3: $(command -v python3)  ($(python3 --version 2>&1))"
for mode in 0 1; do
  t0=$(date +%s.%N)
  for _ in $(seq "$n"); do
    HUBKERN_PYTHON_CACHE=$mode HF_HUB_OFFLINE=1 "$hk" pull bench/rmsnorm --version 1 --backend cpu --signature off --trust-remote-code -q >/dev/null
  done
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v n="$n" -v m="$mode" \
    'BEGIN { printf "HUBKERN_PYTHON_CACHE=%s  %d warm offline pulls: %.1f ms each\n", m, n, (b - a) * 1000 / n }'
done
