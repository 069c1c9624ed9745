#!/usr/bin/env bash
# Run a command as on a laptop CPU with AVX2 and no AVX512-BF16 (Intel Core, Ryzen before Zen 4):
#   scripts/as_laptop.sh python -m specdemo generate "def fib(n):"
# The libraries are held back, not specdemo: torch, oneDNN and MKL use AVX2 code only, and
# bitsandbytes registers no fused 4-bit CPU kernel (scripts/laptop/sitecustomize.py). It
# understates a real AVX2 laptop: bitsandbytes' own C library still dequantises with the vector
# code this CPU has (docs/INSTALL.md, "Which laptop").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
export PYTHONPATH="$here/laptop${PYTHONPATH:+:$PYTHONPATH}"
exec "$@"
