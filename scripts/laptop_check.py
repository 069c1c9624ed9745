"""The default Generate race on the default pair, through the app's own handler, as a person meets
it on this CPU: which 4-bit kernel runs and why, the start-up, each race's seconds and speedup.

    python scripts/laptop_check.py [out.json]
    scripts/as_laptop.sh python scripts/laptop_check.py docs/bench/laptop-avx2.json

Every example of the Generate tab runs with its drafter and the default settings (automatic K,
128 new tokens, T = 0.7, seed 0): the speculative run and the target alone, as the race runs
them.
"""

import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdemo.app.generate import race
from specdemo.app.page import handlers
from specdemo.app.page.session import Session  # noqa: E402
from specdemo.app.settings import load_examples  # noqa: E402
from specdemo.bench.machine import machine  # noqa: E402
from specdemo.cost.profile import costs_for  # noqa: E402
from specdemo.models import load_pair  # noqa: E402


def bookkeeping(run) -> float:
    """A race's share of its speculative seconds spent outside model work: choosing K, cutting
    at stops, recording rounds (the engine's seconds exclude rendering and sending)."""
    model = run.prefill_seconds + run.draft_seconds + run.verify_seconds
    return max(0.0, run.spec_seconds - model) / run.spec_seconds


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "laptop.json")
    start = time.perf_counter()
    pair = load_pair()
    loaded = time.perf_counter()
    race.rehearse(pair)  # the app's warm-up: kernels, and the step-cost profile
    ready = time.perf_counter()
    s, session, rows = pair.summary, Session(), []
    print(f"{s.label}: {s.kernel_note or s.note}")
    print(f"ready in {ready - start:.0f} s (load {loaded - start:.0f} s)", flush=True)
    for example in load_examples():
        began = time.perf_counter()
        for _ in handlers.generate(
            pair, example["prompt"], drafter=example["drafter"], session=session
        ):
            pass
        run = session.runs[-1]
        rows.append(
            {
                "example": example["label"],
                "race seconds": round(time.perf_counter() - began, 1),
                "speedup": round(run.speedup, 3),
                "mean K": round(run.mean_k, 2),
                "alpha": round(run.alpha, 3),
                "tokens": run.spec_tokens,
                # The engine's seconds outside the prefill, proposals and verify passes.
                "bookkeeping": round(bookkeeping(run), 4),
            }
        )
        print(rows[-1], flush=True)
    profile = costs_for(pair.target, None)
    result = {
        "cpu": torch.backends.cpu.get_cpu_capability(),
        "machine": machine("cpu"),
        "threads": torch.get_num_threads(),
        "precision": s.precision,
        "kernel note": s.kernel_note,
        "ready seconds": round(ready - start, 1),
        "target step ms": round(profile.t_step * 1000, 1),
        "verify cost (steps) by K": {
            k: round(profile.verify_cost(k), 2) for k in sorted(profile.t_verify)
        },
        "median race seconds": statistics.median(r["race seconds"] for r in rows),
        "median speedup": statistics.median(r["speedup"] for r in rows),
        "median bookkeeping": statistics.median(r["bookkeeping"] for r in rows),
        "races": rows,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "races"}, indent=1))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
