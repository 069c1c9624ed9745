"""Retake the README's screenshots from the app as it is: `python app.py` on the embedded pair,
one finished race at desktop width (assets/screenshot.png) and the same page on a phone
(assets/screenshot-phone.png).

Usage: python scripts/screenshot.py [--pair qwen-coder] [--out assets] [--no-phone]

Needs Debian's `chromium` on PATH and the Python `playwright` package (never `playwright
install`). The first start on a fresh machine converts the embedded pair (2-3 minutes); the
race itself takes 10-30 s on a laptop CPU. Take it on a quiet machine: the cost note under the
race reports the step costs measured while it ran.
"""

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
# The cost note once a run has finished and is recorded (either wording; app/generate/costs.py).
RACE_DONE = (
    "['Why the two curves differ', 'The step profile is disturbed']"
    ".some(s => document.querySelector('#cost-note').innerText.includes(s))"
)
# No output busy, and every Plotly chart drawn with its points.
SETTLED = (
    "!document.querySelector('.progress-level, .eta-bar')"
    " && document.querySelectorAll('#kept-plot .scatterlayer .point').length > 0"
)

# Where the race ends on the page: the bottom of its rounds chart, in page pixels.
RACE_BOTTOM = (
    "(() => { const r = document.querySelector('#rounds-plot').getBoundingClientRect();"
    " return Math.ceil(r.bottom + window.scrollY); })()"
)


@contextlib.contextmanager
def serve(pair: str, timeout: float):
    """`python app.py` on `pair` and a free port until it logs that it is ready; yields the URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, SPECDEMO_PAIR=pair, GRADIO_SERVER_NAME="127.0.0.1")
    env.update(GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1")
    with tempfile.TemporaryFile("a+") as log:
        app = subprocess.Popen(
            [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                log.seek(0)
                output = log.read()
                if "specdemo: ready in" in output:
                    break
                if app.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"app.py did not get ready (exit {app.returncode}):\n{output}")
                time.sleep(1)
            yield f"http://127.0.0.1:{port}/"
        finally:
            app.terminate()
            app.wait(timeout=30)


def settle(page, seconds: float = 2.0) -> None:
    """Wait until nothing is busy and the page's height holds still for `seconds`."""
    page.wait_for_function(SETTLED)
    height = None
    while height != (height := page.evaluate("document.body.scrollHeight")):
        time.sleep(seconds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", default="qwen-coder", help="SPECDEMO_PAIR (default: embedded)")
    parser.add_argument("--out", type=Path, default=ROOT / "assets")
    parser.add_argument("--no-phone", action="store_true", help="the desktop screenshot only")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for each wait")
    args = parser.parse_args(argv)
    if shutil.which("chromium") is None:
        sys.exit("needs a chromium binary on PATH (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with serve(args.pair, args.timeout) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=DESKTOP)
        page.set_default_timeout(args.timeout * 1000)
        page.goto(url)
        page.click("#generate")
        page.wait_for_function(RACE_DONE)
        settle(page)
        shots = [args.out / "screenshot.png"]
        page.screenshot(path=str(shots[0]), full_page=True)
        if not args.no_phone:  # the same finished race laid out for a phone, down to its chart
            page.set_viewport_size(PHONE)
            settle(page)
            bottom = page.evaluate(RACE_BOTTOM)
            shots.append(args.out / "screenshot-phone.png")
            clip = {"x": 0, "y": 0, "width": PHONE["width"], "height": bottom}
            page.screenshot(path=str(shots[1]), full_page=True, clip=clip)
        browser.close()
    for shot in shots:
        print(f"{shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}: "
              f"{shot.stat().st_size // 1024} KiB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
