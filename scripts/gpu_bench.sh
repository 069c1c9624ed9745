#!/usr/bin/env bash
# GPU speed check: random-weight models of the real Qwen2.5-Coder 1.5B / 0.5B architectures in
# 4-bit (real weights cannot travel to the GPU machine). Reports c, the per-round overhead, and the
# speedup of a self-draft (alpha = 1) run beside the random pair. Needs CUDA, bitsandbytes.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 SPECDEMO_CACHE="${SPECDEMO_CACHE:-/tmp/specdemo-gpu-cache}"
out="${1:-bench_out/gpu}"
python scripts/make_random_pair.py /tmp/specdemo-random-pair
common=(--target /tmp/specdemo-random-pair/target --draft /tmp/specdemo-random-pair/draft
        --precision 4bit --device cuda --sets code --temperatures 0 --ks 1 2 4 8 --no-peer)
python -m specdemo bench "${common[@]}" --out "$out/random-pair"
python -m specdemo bench "${common[@]}" --self-draft --out "$out/self-draft"
