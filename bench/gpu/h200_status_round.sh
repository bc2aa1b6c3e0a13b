#!/usr/bin/env bash
# One call that measures where main stands against every goal of issue 23, on the card it gets
# (meant for an H200; prepared in stop 40, whose four calls all ran on H100s):
#  1) RMSNorm: the 137-shape sweep with each shape's own ceiling (--copy-lib), 2 rounds, PDL,
#     every baseline (F.rms_norm, torch.compile per hidden size, Liger, the Triton anchor, FlashInfer);
#  2) decode: the ragged bench (bf16; SDPA and FlashInfer beside) and the FP8 bench (all 20 cases,
#     FlashInfer's FP8 and bf16 decode beside: needs dec_fp8 / pp_fp8 in .dev/fi's package, made by
#     bench/gpu/flashinfer_prep.sh);
#  3) prefill: the full sweep against cuDNN, flash and FlashInfer.
# Carry .dev/fi; run as `bash bench/gpu/h200_status_round.sh 560`. Results in $OUT/r.tar.xz.
BUDGET=${1:-560}; . bench/gpu/prelude.sh
B=/tmp/rb; mkdir -p $B
(cd kernels/rmsnorm/rmsnorm_cuda && nvcc $NVCC_SM90 -shared -I. rmsnorm.cu -o $B/main.so) > $R/build_rms.txt 2>&1 &
nvcc $NVCC_SM90 -shared bench/rmsnorm/copy_kernel.cu -o $B/copy.so > $R/build_copy.txt 2>&1 &
bench/gpu/build_attention_libs.sh /tmp/ab main=. > $R/build_attn.txt 2>&1
wait; lap "builds done"; ls -la $B /tmp/ab/main >> $R/env.txt
export HK_ATTN_LIB=/tmp/ab/main/libhk_attention_cuda.so
timeout 60 python3 bench/attention_ragged_bench.py --reps 30 --flashinfer /tmp/fi --json $R/ragged.json > $R/ragged.txt 2>&1
lap "ragged rc=$?"; pack
timeout 90 python3 bench/attention_fp8_bench.py --reps 30 --flashinfer /tmp/fi --json $R/fp8.json > $R/fp8.txt 2>&1
lap "fp8 rc=$?"; grep -c MissingJITCache $R/fp8.txt; pack
timeout 180 python3 bench/rmsnorm_sweep.py --lib main=$B/main.so --rounds 2 --wide-grid --other-grid quickwide --pdl \
  --only-alloc --compile-per-hidden --flashinfer /tmp/fi --triton .dev/fi/anchors/h200_triton_rmsnorm.py \
  --copy-lib $B/copy.so --json $R/rms_sweep.json > $R/rms_sweep.txt 2>&1
lap "rms sweep rc=$?"; tail -3 $R/rms_sweep.txt; pack
timeout $(left 10) python3 bench/attention_prefill_sweep.py --reps 20 --flashinfer /tmp/fi --json $R/prefill_sweep.json \
  > $R/prefill_sweep.txt 2>&1
lap "prefill sweep rc=$?"; tail -3 $R/prefill_sweep.txt; pack
