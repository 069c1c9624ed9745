"""Four visitors press Generate at once on `python app.py`, through the app's public API.

    python scripts/room_races.py [--out room-races.json] [--busy N]

Starts the app (SPECDEMO_PAIR, default the embedded pair) as scripts/room_check.py does, then
sends four default races (automatic K, 128 tokens, T 0.7), each with its own seed and "Fresh
run", all at once, as four people in a room would; optionally beside N busy processes of its own
(``specdemo.bench.busy``). For each visitor it records the speedup the page showed (automatic K
against the target alone, both measured in that visitor's race), the mean K and how long the
visitor waited.
"""

import argparse
import json
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from room_check import PROMPT, start_app  # noqa: E402

from specdemo.bench.busy import busy  # noqa: E402
from specdemo.bench.machine import machine  # noqa: E402

VISITORS = 4


def cell(table: str, row: str, column: int = 1) -> str:
    """A cell of the race's comparison table (column 1: speculative, 2: target alone)."""
    line = next(line for line in table.splitlines() if line.startswith(f"| {row} |"))
    return line.split("|")[column + 1].strip()


def race(url: str, seed: int) -> dict:
    start = time.perf_counter()
    outputs = Client(url, verbose=False).predict(
        prompt=PROMPT, system="", seed=seed, fresh=True, api_name="/generate"
    )
    table = outputs[2]
    return {
        "seed": seed,
        "speedup": float(re.sub(r"[*×]", "", cell(table, "Speedup"))),
        "mean K": float(cell(table, "Mean K per round")),
        "auto tok/s": float(cell(table, "Tokens/s")),
        "target alone tok/s": float(cell(table, "Tokens/s", 2)),
        "waited (s)": round(time.perf_counter() - start, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("room-races.json"))
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the races")
    args = parser.parse_args(argv)
    out, n_busy = args.out, args.busy
    results = {"machine": machine("cpu"), "visitors": VISITORS, "busy": n_busy}
    with tempfile.TemporaryFile("a+") as log:
        proc, url = start_app(log)
        try:
            race(url, seed=999)  # one warm race, as an instructor's first click
            with busy(n_busy), ThreadPoolExecutor(VISITORS) as pool:
                results["races"] = list(pool.map(lambda seed: race(url, seed), range(VISITORS)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    speedups = [r["speedup"] for r in results["races"]]
    results["slowest visitor's speedup"] = min(speedups)
    print(json.dumps(results, indent=1))
    out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
