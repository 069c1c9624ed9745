"""The app's default sweep on the embedded pair, through its own handler; each cell's measured
speedup against the session chart's curve predicted from measured costs, and the chart's sentence.

    python scripts/sweep_check.py ["prompt"] [out.json]
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specdemo.app.generate import costs, race
from specdemo.app.page import handlers
from specdemo.app.page.session import Session  # noqa: E402
from specdemo.bench.machine import machine  # noqa: E402
from specdemo.models import load_pair  # noqa: E402

PROMPT = "Write a Python function that checks whether a number is prime."


def main() -> int:
    prompt = sys.argv[1] if len(sys.argv) > 1 else PROMPT
    out = Path(sys.argv[2] if len(sys.argv) > 2 else "app-sweep.json")
    pair = load_pair()
    race.rehearse(pair)
    start, session, quiet = time.perf_counter(), Session(), lambda *a, **k: None
    # The first cell, then one call per further cell, as the page queues them.
    handlers.sweep(pair, prompt, session=session, progress=quiet)
    while not session.sweep.finished:
        handlers.sweep_next(pair, session, progress=quiet)
    print(f"sweep: {time.perf_counter() - start:.0f} s")
    rows = []
    for key, group in costs.groups(session.runs):
        curve = costs.group_curves(key, group)
        for r in group:
            predicted = curve.predicted.get(r.k) if r.k != "auto" else None
            rows.append(
                {
                    "T": r.temperature,
                    "k": r.k,
                    "mean_k": round(r.mean_k, 2),
                    "alpha": round(r.alpha, 3),
                    "measured": round(r.speedup, 3),
                    "curve": predicted and round(predicted, 3),
                    "measured / curve": predicted and round(r.speedup / predicted, 3),
                }
            )
            print(rows[-1], flush=True)
        print(costs.cost_note(group))
    record = {"machine": machine(pair.target.device), "cells": rows}
    out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
