#!/usr/bin/env bash
# GPU speed check for a bare CUDA machine with no network:
#   scripts/gpu_bench.sh [--dry-run] [--reuse-pair] [OUT [-- BENCH FLAGS...]]
#
# Builds random-weight models of the real Qwen2.5-Coder 1.5B / 0.5B architectures (the real
# weights cannot travel) and benches them in 4-bit on CUDA twice: the random pair (alpha ~ 0),
# for c, the verify cost and the per-round overhead; and the target drafting for itself with its
# full output head (alpha = 1), the best case. Ends with one table: target-only, speculative
# K = 1..8 and assisted-generation tok/s, alpha, c, the verify cost and the overhead (also in
# OUT/summary.md).
#
# Wheels in wheels/ are installed first, offline, into a scratch folder (scripts/gpu_env.sh):
# bitsandbytes, and transformers when the machine's lies outside the range requirements.txt pins.
# plotly is optional (without it the bench writes no HTML chart). The models go to
# $SPECDEMO_RANDOM_PAIR (default /tmp/specdemo-random-pair); OUT (default bench_out/gpu) is
# relative to the repo root. BENCH FLAGS after `--` go at the end of both bench command lines,
# so they replace the defaults below (scripts/gpu_smoke.sh trims the grid with
# `-- --ks 1 3 auto --per-set 1 --max-new-tokens 32`). --reuse-pair benches the models already
# in $SPECDEMO_RANDOM_PAIR instead of building them (the full depth, or 2 layers with --dry-run).
#
# --dry-run imports everything, checks the versions and the bench flags, builds a 2-layer random
# pair on the CPU (every width and the vocabulary as the real ones; the full depth takes minutes
# on a small CPU), loads it there in 4-bit through specdemo's loader, and stops before anything
# touches CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
dry=0
reuse=0
while [[ "${1:-}" == "--dry-run" || "${1:-}" == "--reuse-pair" ]]; do
    [[ "$1" == "--dry-run" ]] && dry=1 || reuse=1
    shift
done
out=bench_out/gpu
if [[ $# -gt 0 && "$1" != "--" ]]; then
    out="$1"
    shift
fi
[[ "${1:-}" == "--" ]] && shift
flags=("$@")
models="${SPECDEMO_RANDOM_PAIR:-/tmp/specdemo-random-pair}"
source scripts/gpu_env.sh

common=(--target "$models/target" --draft "$models/draft" --precision 4bit --device cuda
        --sets code --per-set 2 --temperatures 0 --ks 1 2 3 4 5 6 7 8 --max-new-tokens 64)
random_pair=("${common[@]}" --out "$out/random-pair" "${flags[@]}")
self_draft=("${common[@]}" --self-draft --draft-head-rows 0 --out "$out/self-draft" "${flags[@]}")

# Everything the bench imports, the pinned transformers, and both bench command lines parsed.
python3 - "$dry" "${random_pair[@]}" -- "${self_draft[@]}" <<'EOF'
import re
import sys
from pathlib import Path

import torch
import transformers
from packaging.specifiers import SpecifierSet

import specdemo.bench.grid  # noqa: F401
import specdemo.bench.report  # noqa: F401
from specdemo.cli import build_parser
from specdemo.models import compute_dtype
from specdemo.models.convert import import_bitsandbytes

dry, args = sys.argv[1] == "1", sys.argv[2:]
split = args.index("--")
for line in (args[:split], args[split + 1 :]):
    build_parser().parse_args(["bench", *line])
pin = re.search(r"^transformers(\S+)", Path("requirements.txt").read_text(), re.M).group(1)
if transformers.__version__ not in SpecifierSet(pin):
    sys.exit(f"transformers {transformers.__version__} is outside {pin}: put its wheel in wheels/")
import_bitsandbytes()
import bitsandbytes

print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
      f"bitsandbytes {bitsandbytes.__version__}")
if not dry:
    if not torch.cuda.is_available():
        sys.exit("torch sees no CUDA device")
    capability = torch.cuda.get_device_capability()
    print(f"{torch.cuda.get_device_name()}, compute capability {capability}, "
          f"computing in {compute_dtype('cuda', capability)}")
EOF

if (( dry )); then
    (( reuse )) || python3 scripts/make_random_pair.py "$models" --layers 2
    python3 - "$models" <<'EOF'
import sys

from specdemo.models import load_pair, warm_up

folder = sys.argv[1]
pair = load_pair(target=f"{folder}/target", draft=f"{folder}/draft", precision="4bit", device="cpu")
warm_up(pair)
s = pair.summary
print(f"loaded on the CPU in {s.load_seconds:.1f} s: {s.precision} ({s.dtype}), "
      f"{s.target_params:,} + {s.draft_params:,} params")
EOF
    echo "dry run: stopping before CUDA. The GPU run would go on with:"
    echo "  python3 -m specdemo bench ${random_pair[*]}"
    echo "  python3 -m specdemo bench ${self_draft[*]}"
    echo "  python3 -m specdemo.bench.report $out/random-pair $out/self-draft"
    exit 0
fi
(( reuse )) || python3 scripts/make_random_pair.py "$models"
python3 -m specdemo bench "${random_pair[@]}"
python3 -m specdemo bench "${self_draft[@]}"
python3 -m specdemo.bench.report "$out/random-pair" "$out/self-draft" | tee "$out/summary.md"
