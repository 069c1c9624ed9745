"""`python app.py` on a free local port, until it says its pair is ready: for
scripts/screenshot.py and the tests that drive the app over HTTP
(tests/app/page/test_app_client.py)."""

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY = "specdemo: ready in"  # app.py's line once the pair is loaded
FAILED = "specdemo: the models could not be loaded"


class NotReady(RuntimeError):
    """app.py exited, failed to load its pair, or was not ready in time; the message holds its
    output."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served_app(pair: str, timeout: float, times: dict | None = None, poll: float = 0.5, **env: str):
    """`python app.py` on `pair` (SPECDEMO_PAIR) with `env` added, offline, on a free port;
    yields its URL once the page answers and the pair is ready, and stops it afterwards.
    `times`, when given, gets the seconds from the start until the page answered ("page served
    (s)") and until the pair was ready ("ready (s)"), to within `poll` seconds."""
    port = free_port()
    env = {
        **os.environ,
        "SPECDEMO_PAIR": pair,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
        **env,
    }
    url = f"http://127.0.0.1:{port}/"
    # "a+": the app's writes go to the end while this side seeks back to read
    with tempfile.TemporaryFile("a+") as log:
        start = time.monotonic()
        app = subprocess.Popen(
            [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        times = {} if times is None else times
        try:
            deadline = start + timeout
            while True:
                log.seek(0)
                output = log.read()
                if FAILED in output or app.poll() is not None or time.monotonic() > deadline:
                    raise NotReady(f"app.py did not get ready (exit {app.returncode}):\n{output}")
                try:  # the page answers first; the pair is ready after READY
                    urllib.request.urlopen(url, timeout=2)
                    times.setdefault("page served (s)", time.monotonic() - start)
                    if READY in output:
                        times["ready (s)"] = time.monotonic() - start
                        break
                except OSError:
                    pass
                time.sleep(poll)
            yield url
        finally:
            app.terminate()
            try:
                app.wait(timeout=15)
            except subprocess.TimeoutExpired:
                app.kill()
