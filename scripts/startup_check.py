"""Start-up and memory of the embedded pair on this machine, written to docs/bench/startup.json.

    python scripts/startup_check.py [--out docs/bench/startup.json] [--repeats 2]

Each step runs in a fresh process, timed from the process's start by /usr/bin/time (wall
seconds, peak RSS):
1. a cold start: ``load_pair()`` then ``warm_up()`` with an empty conversion cache (a
   temporary SPECDEMO_CACHE), so the GGUF chunks are assembled, checked and converted;
2. warm starts, `repeats` times, from the cache step 1 filled: ``load_pair()``'s own seconds
   and the resident memory after ``warm_up()`` printed from inside;
3. ``python app.py`` on that cache, `repeats` times: seconds until the page answers and until
   it says its pair is ready (loaded, warmed up, step costs profiled).
Nothing downloads; run it on a quiet machine.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from served_app import served_app  # noqa: E402

from specdemo.models.pairs import DEFAULT_PAIR  # noqa: E402

TARGETS = {"cold start (s)": 180, "warm start (s)": 10, "memory (GB)": 3}
LOAD = """
import time
start = time.perf_counter()
from specdemo.models import load_pair, warm_up
pair = load_pair()
loaded = time.perf_counter() - start
warm_up(pair)
rss = int(open('/proc/self/statm').read().split()[1]) * 4096
print('LOAD', loaded, rss / 1e9, pair.summary.precision)
"""


def timed(code: str, env: dict) -> dict:
    """One fresh process running `code`, under /usr/bin/time: wall seconds, peak RSS, what the
    code printed after LOAD."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "TIME %e %M", sys.executable, "-c", code],
        env=env, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall, peak = re.search(r"TIME ([\d.]+) (\d+)", out.stderr).groups()
    _, loaded, resident, precision = next(
        line for line in out.stdout.splitlines() if line.startswith("LOAD")
    ).split()
    return {
        "wall (s)": float(wall),
        "peak RSS (GB)": int(peak) * 1024 / 1e9,
        "load_pair (s)": float(loaded),
        "resident after warm-up (GB)": float(resident),
        "precision": precision,
    }


def app_start(cache: str, timeout: float = 600) -> dict:
    """Seconds from `python app.py`'s start until its page answers and until it is ready."""
    times = {}
    with served_app(DEFAULT_PAIR, timeout, times, poll=0.1, SPECDEMO_CACHE=cache):
        return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench" / "startup.json"))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    from specdemo.bench.machine import machine

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "SPECDEMO_CACHE": cache, "HF_HUB_OFFLINE": "1"}
        env.pop("SPECDEMO_PAIR", None)
        cold = timed(LOAD, env)
        print("cold", cold, flush=True)
        warm = [timed(LOAD, env) for _ in range(args.repeats)]
        print("warm", warm, flush=True)
        app = [app_start(cache) for _ in range(args.repeats)]
        print("app", app, flush=True)
    result = {
        "machine": machine("cpu"),
        "precision": cold["precision"],
        "how": "python scripts/startup_check.py: fresh processes under /usr/bin/time; a cold "
        "start from an empty conversion cache, then warm starts and python app.py from it",
        "targets": TARGETS,
        "cold start": cold,
        "warm starts": warm,
        "python app.py": app,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
