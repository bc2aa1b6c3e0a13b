# Sourced by the device scripts in bench/gpu/ (bash, from the repository root on the device):
#   BUDGET=<seconds> . bench/gpu/prelude.sh
# Gives: $R (results folder, packed into $OUT/r.tar.xz by `pack`), `lap NAME` (seconds since the
# start, into $R/laps.txt), `left MARGIN` (seconds of BUDGET left minus MARGIN, for timeouts), the
# GPU's name and clocks in $R/env.txt, and FlashInfer's package (carried as .dev/fi, made by
# ../shared/tools/flashinfer/) on PYTHONPATH with /tmp/fi as its folder; $NVCC_SM90 holds the
# nvcc flags every kernel build here uses.
set -uo pipefail
BUDGET=${BUDGET:-560}
R=/tmp/res; mkdir -p $R
pack() { tar cf - -C $R . | xz -1 > $OUT/r.tar.xz; }
t0=$(date +%s)
lap() { echo "$1 at $(( $(date +%s) - t0 )) s" | tee -a $R/laps.txt; }
left() { echo $(( BUDGET - ($(date +%s) - t0) - $1 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/env.txt 2>&1
cat $R/env.txt
if [ -d .dev/fi ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/fi/whl/*.whl > $R/pip.txt 2>&1
  mkdir -p /tmp/fi && tar xJf .dev/fi/pkg.tar.xz -C /tmp/fi || echo "no FlashInfer package" >> $R/env.txt
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
NVCC_SM90="-O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC"
