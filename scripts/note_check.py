"""The cost note as a workshop attendee sees it: `python app.py` and Chromium on this machine.

    python scripts/note_check.py [out.json] [--runs N]

Starts the app (SPECDEMO_PAIR, default the embedded pair) on a free port, opens the Generate tab
in headless Chromium (Debian's `chromium`), ticks "Fresh run" (measure, never replay) and
presses Generate N times (default 3) on the tab's defaults, reading the cost note after each
run. A note is coherent when every ratio in it is possible: a verify of k + 1 tokens costs at
least NOISE plain steps, and the curve predicted from measured costs does not peak above the
textbook's unless the note says it is level with it. Writes the notes and verdicts as JSON.
"""

import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright
from room_check import start_app

from specdemo.app.generate.costs import NOISE
from specdemo.bench.machine import machine

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
VERIFY = re.compile(r"verifying (\d+) tokens \(K = (\d+)\) costs ([\d.]+) target steps")
PEAKS = re.compile(r"peaks at ([\d.]+)× \(K = \d+\), while the textbook's.*?peaks at ([\d.]+)×")


def coherent(note: str) -> list[str]:
    """What in the note no measurement can support; empty when it is coherent."""
    problems = []
    if "disturbed" in note:
        return problems  # the note declines to draw the curves, and says why
    verify, peaks = VERIFY.search(note), PEAKS.search(note)
    if not verify or not peaks:
        return [f"no verify cost or peaks in: {note[:200]}"]
    if float(verify.group(3)) < NOISE:
        problems.append(f"a verify of {verify.group(1)} tokens costs {verify.group(3)} steps")
    predicted, textbook = float(peaks.group(1)), float(peaks.group(2))
    if predicted > textbook and "level with it" not in note:
        problems.append(f"predicted peak {predicted}× above the textbook's {textbook}×")
    return problems


NOTE = "#cost-note [data-testid='markdown']"
BUSY = "#cost-note [data-testid='status-tracker']"  # Gradio's timer while a run is under way


def settled_note(page, before: str, seconds: float = 600) -> str:
    """The cost note once the run has replaced `before` and Gradio's status tracker on it has
    gone quiet."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        note, busy = page.inner_text(NOTE), page.inner_text(BUSY).strip()
        if note != before and not busy and ("Why the" in note or "disturbed" in note):
            return note
        page.wait_for_timeout(500)
    raise TimeoutError("the cost note did not change after Generate")


@contextlib.contextmanager
def generate_tab():
    """The app started on a free port and its Generate tab open in headless Chromium on the same
    cores, "Fresh run" ticked (measure, never replay); yields the page. ``generated(page)``
    presses Generate and returns the settled cost note."""
    with tempfile.TemporaryFile("w+") as log:
        proc, url = start_app(log)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.set_default_timeout(900_000)
                page.goto(url)
                page.wait_for_selector("#generate")
                page.get_by_role("button", name="More settings").click()
                page.check("#fresh-run input")
                yield page
                browser.close()
        finally:
            proc.terminate()


def generated(page) -> str:
    before = page.inner_text(NOTE)
    page.click("#generate")
    return settled_note(page, before)


def runs_and_out(argv, default: str) -> tuple[int, Path]:
    """--runs N (default 3) and the .json to write (default `default`) from the arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 3
    return runs, Path(next((a for a in args if a.endswith(".json")), default))


def main(argv=None) -> int:
    runs, out = runs_and_out(argv, "bench_out/note-check.json")
    notes = []
    with generate_tab() as page:
        for run in range(runs):
            note = generated(page)
            notes.append({"run": run, "note": note, "problems": coherent(note)})
            print(f"run {run}: {note}\n  problems: {notes[-1]['problems']}", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"machine": machine("cpu"), "runs": notes}
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return int(any(n["problems"] for n in notes))


if __name__ == "__main__":
    sys.exit(main())
