#!/usr/bin/env bash
# GPU smoke check for a bare CUDA machine with no network, in one command (under 8 minutes):
#   scripts/gpu_smoke.sh [--dry-run] [OUT] [--only N [N ...]]
#
# Versions and compute dtype, a bitsandbytes NF4 layer against its dequantised matmul, the tiny
# pair in 4-bit on CUDA, every app handler with its values pickled, the step costs of the real
# architectures (random weights, built by scripts/make_random_pair.py) against the budgets that
# specdemo/app/page/gpu.py derives for that pair, a trimmed scripts/gpu_bench.sh (its summary in
# OUT/bench, default OUT bench_out/gpu-smoke), and that pair loaded as a ZeroGPU Space loads its
# pair (spaces imported first, SPACES_ZERO_GPU=true, no GPU call). Every check runs; one table
# (check | result | figure) ends the output and the exit status is 1 when any check failed. scripts/gpu_smoke.py has the details.
#
# Wheels in wheels/ are installed first, offline, as for scripts/gpu_bench.sh (scripts/gpu_env.sh).
# The random pair goes to $SPECDEMO_RANDOM_PAIR (default /tmp/specdemo-random-pair).
#
# --dry-run runs on the CPU whatever can run there (under 3 minutes on 2 cores) with CUDA hidden
# from torch, and exits 0 when everything that ran passed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh
for arg in "$@"; do
    if [[ "$arg" == "--dry-run" ]]; then
        export CUDA_VISIBLE_DEVICES=""
    fi
done
exec python3 scripts/gpu_smoke.py "$@"
