"""The race as a learner's browser streams it: both halves' loads beside the speedup it shows.

    python scripts/race_loads.py [out.json] [--runs N]

Starts the app (SPECDEMO_PAIR, default the embedded pair) on a free port, opens the Generate tab
in headless Chromium (Debian's `chromium`) on the same cores, ticks "Fresh run" (measure, never
replay) and presses Generate N times (default 3) on the tab's defaults. After the runs it
downloads the session's JSON and records, for each run, the speedup the page showed and the load
each half ran under (its target passes as timed over their profiled price,
``app.generate.loads``), and whether the page said they differ beside the speedup. The halves
are fair when their loads are within ``loads.LOAD_GAP`` of each other, or the page says they
are not.
"""

import json
import sys
from pathlib import Path

from note_check import generate_tab, generated, runs_and_out

from specdemo.app.generate.loads import LOAD_GAP
from specdemo.bench.machine import machine

UNEVEN = "Uneven loads"


def main(argv=None) -> int:
    runs, out = runs_and_out(argv, "bench_out/race-loads.json")
    said = []
    with generate_tab() as page:
        for _ in range(runs):
            note = generated(page)
            said.append(UNEVEN in note or UNEVEN in page.inner_text("body"))
        with page.expect_download() as download:
            page.click("#download-json")
        records = json.loads(Path(download.value.path()).read_text())
    rows = []
    for record, uneven in zip(records[-runs:], said, strict=True):
        spec, target = record["spec_load"], record["target_load"]
        gap = max(spec, target) / min(spec, target) if spec and target else None
        fair = gap is not None and (gap <= LOAD_GAP or uneven)
        rows.append(
            {"speedup": record["speedup"], "spec_load": spec, "target_load": target, "gap": gap,
             "said": uneven, "fair": fair}
        )  # fmt: skip
        print(rows[-1], flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    about = (
        "The default race in headless Chromium beside the app on the same cores "
        "(python scripts/race_loads.py): each half's load and whether the page said they differ."
    )
    record = {"about": about, "machine": machine("cpu"), "load_gap": LOAD_GAP, "runs": rows}
    out.write_text(json.dumps(record, indent=1) + "\n")
    return int(not all(r["fair"] for r in rows))


if __name__ == "__main__":
    sys.exit(main())
