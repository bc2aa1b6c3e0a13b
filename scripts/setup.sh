#!/usr/bin/env bash
# Installs everything hubkern needs to build and test, on Debian/Ubuntu. Idempotent: packages
# already present are not reinstalled.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

debs=(build-essential cmake pkg-config libcurl4-openssl-dev libcjson-dev libssl-dev
      libarchive-dev libmicrohttpd-dev python3 python3-pip valgrind
      nginx-light openssl   # nginx + openssl CLI: the TLS/HTTP/2 reverse proxy of test_http2_tls.py
      wrk                   # HTTP load generator: bench/mirror_load.py (mirror vs nginx)
      clang libclang-rt-14-dev)  # libFuzzer + sanitizer runtimes: tests/fuzz (HK_FUZZ)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# libcurl >= 8.14: Debian 12's own 7.88.1 reads freed memory on folded response header lines that a
# hostile server can send (tests/fuzz/findings/hub_json-libcurl-uaf; 8.14.1 runs it clean). On
# Debian 12 the newer one comes from bookworm-backports (a Debian suite).
codename=$( (. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || true)
curl_v=$(dpkg-query -W -f='${Version}' libcurl4-openssl-dev 2>/dev/null || true)
if [ "$codename" = bookworm ] && ! dpkg --compare-versions "${curl_v:-0}" ge 8.14; then
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  list=/etc/apt/sources.list.d/hubkern-bookworm-backports.list
  grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ ||
    echo "deb http://deb.debian.org/debian bookworm-backports main" | $sudo_cmd tee "$list" >/dev/null
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports libcurl4-openssl-dev libcurl4
fi

# Python packages for the compatibility tests (the real clients) and the benchmarks.
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "setup: $py not found" >&2; exit 1; }
if ! "$py" - "$here/requirements.txt" <<'PYEOF' 2>/dev/null
import sys, importlib.metadata as md
for line in open(sys.argv[1]):
    line = line.split('#')[0].strip()
    if not line: continue
    name, _, ver = line.partition('==')
    if md.version(name) != ver: raise SystemExit(1)
PYEOF
then
  "$py" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" ||
    "$py" -m pip install -q --disable-pip-version-check --break-system-packages -r "$here/requirements.txt"
fi
echo "setup: ok"
