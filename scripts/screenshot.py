"""Retake the README's screenshots from the app as it is: `python app.py` on the embedded pair,
one finished race at desktop width (assets/screenshot.png) and its outcome, the comparison table
and the rounds chart, on a phone (assets/screenshot-phone.png).

Usage: python scripts/screenshot.py [--pair qwen-coder] [--out assets] [--no-phone]

Needs Debian's `chromium` on PATH and the Python `playwright` package (never `playwright
install`). The first start on a fresh machine converts the embedded pair (2-3 minutes); the
race itself takes 10-30 s on a laptop CPU. Take it on a quiet machine: the cost note under the
race reports the step costs measured while it ran.
"""

import argparse
import shutil
import sys
import time
from pathlib import Path

from served_app import NotReady, served_app

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
    " && document.querySelectorAll('#speedup-plot .scatterlayer .point').length > 0"
)

# The race's outcome on the page, in page pixels: from the top of its comparison table to the
# bottom of its rounds chart.
OUTCOME = (
    "(() => { const box = id => document.querySelector(id).getBoundingClientRect();"
    " const y = window.scrollY;"
    " return [Math.floor(box('#comparison').top + y), Math.ceil(box('#rounds-plot').bottom + y)];"
    " })()"
)


def settle(page, seconds: float = 2.0) -> None:
    """Wait until nothing is busy and the page's height holds still for `seconds`."""
    page.wait_for_function(SETTLED)
    height = None
    while height != (height := page.evaluate("document.body.scrollHeight")):
        time.sleep(seconds)


def take(url: str, out: Path, timeout: float, phone: bool) -> list[Path]:
    """One race on the page at `url`, shot at desktop width and, with `phone`, on a phone."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=DESKTOP)
        page.set_default_timeout(timeout * 1000)
        page.goto(url)
        page.click("#generate")
        page.wait_for_function(RACE_DONE)
        settle(page)
        shots = [out / "screenshot.png"]
        page.screenshot(path=str(shots[0]), full_page=True)
        if phone:  # the same race's outcome laid out for a phone: its table and rounds chart
            page.set_viewport_size(PHONE)
            settle(page)
            top, bottom = page.evaluate(OUTCOME)
            shots.append(out / "screenshot-phone.png")
            clip = {"x": 0, "y": top, "width": PHONE["width"], "height": bottom - top}
            page.screenshot(path=str(shots[1]), full_page=True, clip=clip)
        browser.close()
    return shots


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", default="qwen-coder", help="SPECDEMO_PAIR (default: embedded)")
    parser.add_argument("--out", type=Path, default=ROOT / "assets")
    parser.add_argument("--no-phone", action="store_true", help="the desktop screenshot only")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for each wait")
    args = parser.parse_args(argv)
    if shutil.which("chromium") is None:
        sys.exit("needs a chromium binary on PATH (apt-get install chromium)")

    args.out.mkdir(parents=True, exist_ok=True)
    try:
        with served_app(args.pair, args.timeout) as url:
            shots = take(url, args.out, args.timeout, phone=not args.no_phone)
    except NotReady as e:
        sys.exit(str(e))
    for shot in shots:
        print(f"{shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}: "
              f"{shot.stat().st_size // 1024} KiB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
