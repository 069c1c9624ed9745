"""A workshop room against `python app.py` on this machine, through the app's public API.

    python scripts/room_check.py [out.json]

Starts the app (SPECDEMO_PAIR, default the embedded pair) on a free port, waits until it is
ready, then measures: (1) 20 people pressing Generate at once for 16-token answers, each with its
own seed (no replay), until all are served; (2) one person's default sweep (128 tokens a cell)
while another asks for a 16-token run 5 s into it: how long that run waits and how long the
sweep takes; (3) the same request as in (2) asked again: the replay's answer time.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specdemo.bench.machine import machine  # noqa: E402

PROMPT = "Write a Python function that checks whether a number is prime."
PEOPLE = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(log) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    while True:
        log.seek(0)
        if "specdemo: ready in" in log.read():
            urllib.request.urlopen(url, timeout=5)
            return proc, url
        if proc.poll() is not None:
            log.seek(0)
            raise SystemExit(f"app.py exited:\n{log.read()}")
        time.sleep(1)


def generate(url: str, seed: int, tokens: int = 16) -> float:
    start = time.perf_counter()
    Client(url, verbose=False).predict(
        prompt=PROMPT, system="", max_new_tokens=tokens, seed=seed, fresh=True, api_name="/generate"
    )
    return time.perf_counter() - start


def sweep(url: str) -> float:
    client, start = Client(url, verbose=False), time.perf_counter()
    grid = {"ks": "1, 2, 4, auto", "temperatures": "0, 1"}  # the app's default sweep
    outputs = client.predict(prompt=PROMPT, system="", fresh=True, **grid, api_name="/sweep")
    while "Sweep done" not in str(outputs):
        outputs = client.predict(api_name="/sweep_next")
    return time.perf_counter() - start


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "room.json")
    results = {"machine": machine("cpu")}
    with tempfile.TemporaryFile("a+") as log:
        proc, url = start_app(log)
        try:
            generate(url, seed=999)  # one warm request, as an instructor's first click
            start = time.perf_counter()
            with ThreadPoolExecutor(PEOPLE) as pool:
                waits = list(pool.map(lambda seed: generate(url, seed), range(PEOPLE)))
            results["people"] = PEOPLE
            results["all served (s)"] = round(time.perf_counter() - start, 1)
            results["slowest person (s)"] = round(max(waits), 1)
            results["median person (s)"] = round(sorted(waits)[PEOPLE // 2], 1)

            sweep_time = {}
            thread = threading.Thread(target=lambda: sweep_time.setdefault("s", sweep(url)))
            thread.start()
            time.sleep(5)
            results["16-token run during a sweep (s)"] = round(generate(url, seed=4242), 1)
            thread.join()
            results["default sweep (s)"] = round(sweep_time["s"], 1)
            start = time.perf_counter()
            Client(url, verbose=False).predict(
                prompt=PROMPT, system="", max_new_tokens=16, seed=4242, api_name="/generate"
            )
            results["the same run again, replayed (s)"] = round(time.perf_counter() - start, 1)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(results, indent=1))
    out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
