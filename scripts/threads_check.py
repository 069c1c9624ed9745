"""Torch threads beside busy processes: one target step and one draft step of the embedded pair,
on every core's thread and on one, quiet and beside 1 and 2 busy processes, in turns.

    python scripts/threads_check.py [out.json]

Each cell is the median of 24 one-token steps with a warm KV cache (the example prompt's), over
two rounds of the whole grid; the threads ``threads.fitted`` would choose under each load is
recorded beside them (docs/BENCHMARKS.md, "Beside busy processes").
"""

import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specdemo.bench.busy import busy  # noqa: E402
from specdemo.bench.machine import machine  # noqa: E402
from specdemo.models import load_pair, warm_up  # noqa: E402
from specdemo.runtime import threads  # noqa: E402
from specdemo.runtime.lm import forward  # noqa: E402
from specdemo.text import encode_prompt  # noqa: E402

STEPS = 24
PROMPT = json.loads((ROOT / "specdemo" / "data" / "prompts.json").read_text())[0]["prompt"]


@torch.inference_mode()
def step_ms(model, ids: list[int]) -> float:
    """Median milliseconds of one-token steps after `ids`."""
    _, cache = forward(model, ids, None)
    times = []
    for i in range(STEPS):
        start = time.perf_counter()
        forward(model, [ids[i % len(ids)]], cache)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "threads.json")
    pair = load_pair(None)
    warm_up(pair)
    ids = encode_prompt(pair.tokenizer, PROMPT)
    most = torch.get_num_threads()
    cells = {}
    for _ in range(2):
        for n in (0, 1, 2):
            with busy(n):
                time.sleep(0.3)
                fitted = threads.fitting(threads.others_busy(), threads.cores(), most)
                for count in dict.fromkeys((most, 1)):
                    torch.set_num_threads(count)
                    cell = cells.setdefault((n, count), {"target": [], "draft": [], "fitted": []})
                    cell["target"].append(step_ms(pair.target, ids))
                    cell["draft"].append(step_ms(pair.draft, ids))
                    cell["fitted"].append(fitted)
                torch.set_num_threads(most)
    rows = [
        {"busy": n, "threads": count, "target_ms": statistics.median(c["target"]),
         "draft_ms": statistics.median(c["draft"]), "fitted": c["fitted"]}
        for (n, count), c in cells.items()
    ]  # fmt: skip
    result = {"machine": machine("cpu"), "precision": pair.summary.label, "rows": rows}
    print(json.dumps(result, indent=1))
    out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
