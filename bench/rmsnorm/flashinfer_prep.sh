#!/usr/bin/env bash
# FlashInfer's norm module for the RMSNorm benchmark: bench/gpu/flashinfer_prep.sh with the module
# `norm` only (the shared tool's build, called, not copied; the other modules take ~20 min more on
# 2 cores and this benchmark needs none of them):
#   bench/rmsnorm/flashinfer_prep.sh WHEEL TVM_FFI_SITE WORKDIR DEST
# writes DEST/flashinfer/ and DEST.tar.xz (about 7.4 MB); on the device, unpack it and pass the dir
# holding flashinfer/ to bench/rmsnorm_sweep.py --flashinfer.
exec "$(cd "$(dirname "$0")/../.." && pwd)/bench/gpu/flashinfer_prep.sh" "$@" norm
