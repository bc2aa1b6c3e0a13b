#!/usr/bin/env bash
# The loader's H200 proof (issue 6). Runs on the device machine from the repository root, with
# .dev/loader prepared by examples/gpu/prepare_h200.sh; writes what it prints to $OUT/h200_proof.txt.
#   1. the CUDA tvm-ffi RMSNorm variant got by the example C program with hk_get_kernel (offline, from
#      the prepared cache) and called on GPU memory (cudaMalloc'd buffers, our own stream);
#   2. two arch refusals on the real device (capability read from the driver): code objects for
#      sm_100a only, and metadata archs that exclude 9.0;
#   3. the torch variant, built here against the installed PyTorch, loaded by a C++ program linked
#      with that libtorch and called through the c10 dispatcher; and refused in a C process.
set -u
D=.dev/loader
exec > >(tee "${OUT:-/tmp}/h200_proof.txt") 2>&1
step() { echo; echo "== $*"; }
t0=$(date +%s)

mkdir -p /tmp/hk && tar xJf $D/hklibs.tar.xz -C /tmp/hk
ldconfig -p | awk 'NR > 1 {print $1}' | sort -u > /tmp/hk/system-libs
for f in /tmp/hk/hklibs/*; do grep -qxF "$(basename "$f")" /tmp/hk/system-libs && rm -f "$f"; done
echo "carried libraries used (missing on this machine): $(ls /tmp/hk/hklibs | tr '\n' ' ')"
export LD_LIBRARY_PATH=$PWD/$D/bin:/tmp/hk/hklibs:/usr/local/cuda/lib64
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $D/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1
HK=$D/bin/hubkern

# the torch variant and the C++ program build in the background meanwhile
TV=/tmp/torchhub
(timeout 140 python3 $D/rms_src/torch-ext/build_torch_variant.py --hub $TV --work /tmp/tb > /tmp/tv.log 2>&1; echo "exit $?" >> /tmp/tv.log) &
pid_tv=$!
TI=$(python3 -c "from torch.utils import cpp_extension as c; print(' '.join('-I'+p for p in c.include_paths()))")
TL=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
(timeout 140 g++ -std=c++17 -O1 -D_GLIBCXX_USE_CXX11_ABI=1 $TI -Ilibhub/include examples/torch/rmsnorm_torch.cpp \
   -o /tmp/rmsnorm_torch -L$TL -Wl,--no-as-needed -ltorch_cuda -lc10_cuda -ltorch_cpu -ltorch -lc10 -Wl,--as-needed \
   -L$D/bin -lhubkern -Wl,-rpath,$TL > /tmp/cxx.log 2>&1; echo "exit $?" >> /tmp/cxx.log) &
pid_cxx=$!

step "device"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
$HK env | sed -n '/^tvm-ffi/,$p'

step "1. CUDA tvm-ffi variant from C on GPU memory (hk_get_kernel, offline cache)"
$HK load hubkern/rmsnorm --version 1 --cache $D/cache --offline
for shape in "1 4096" "4096 4096" "333 5120"; do
  set -- $shape
  $D/bin/rmsnorm_example --repo hubkern/rmsnorm --version 1 --cache $D/cache --offline --device cuda --rows $1 --hidden $2
  echo "exit $?"
done

step "2a. refusal: library embeds sm_100a only (metadata claims 8.0, 9.0+PTX)"
$HK load --local $D/refuse/codeobj; echo "exit $?"
step "2b. refusal: metadata archs 10.0a, 12.0 (library fine)"
$HK load --local $D/refuse/metadata; echo "exit $?"
step "2c. the same with --no-arch-check loads"
$HK load --local $D/refuse/metadata --no-arch-check --call; echo "exit $?"

# wait for these two only: a bare `wait` also waits for the tee of the output (the first run of
# this script hung there until its time limit)
wait $pid_tv $pid_cxx
step "3. torch variant"
tail -3 /tmp/tv.log; tail -5 /tmp/cxx.log
TVAR=$(ls -d $TV/build/torch* 2>/dev/null | head -1)
echo "variant dir: $TVAR"
/tmp/rmsnorm_torch --local $TV; echo "exit $?"
step "3b. the torch variant in a C process without libtorch"
$HK load --local "$TVAR"; echo "exit $?"
echo; echo "total $(($(date +%s)-t0)) s"
