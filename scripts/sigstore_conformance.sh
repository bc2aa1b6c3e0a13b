#!/usr/bin/env bash
# Run sigstore-conformance's offline bundle-verification cases against hubkern-sigstore-verify.
# Fetches nothing. Usage: scripts/sigstore_conformance.sh CONFORMANCE_CHECKOUT [BUILD_DIR] [pytest args...]
# Needs python3 with pytest, pytest-subtests, cryptography, urllib3, platformdirs,
# sigstore-protobuf-specs (the suite's test/ imports them). Not part of ctest/CI.
set -euo pipefail
sc=${1:?usage: $0 CONFORMANCE_CHECKOUT [BUILD_DIR] [pytest args...]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${2:-$root/build}" && pwd)
shift $(( $# >= 2 ? 2 : 1 ))
tool=$build/tests/hubkern-sigstore-verify
[ -x "$tool" ] || { echo "missing $tool (cmake --build $build --target hubkern-sigstore-verify)" >&2; exit 2; }
export HK_SIGSTORE_VERIFY=$tool
export PYTHONPATH=$root/tests/sigstore${PYTHONPATH:+:$PYTHONPATH}
cd "$sc"
# --skip-signing: no sign-bundle; test_verify_cpython_release_bundles skips itself (GITHUB_WORKSPACE
# unset). Every verification case runs, managed-key and DSSE ones included.
exec "${PYTHON:-python3}" -m pytest test -p conformance_adapter -p no:cacheprovider \
  --entrypoint "$root/tests/sigstore/conformance_adapter.py" --skip-signing -rfEs "$@"
