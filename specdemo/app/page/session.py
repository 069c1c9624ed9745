"""What one browser session accumulates: its recorded runs, the last answer's spans, its exports,
the sweep it has under way.

A ``Session`` is plain picklable data that lives in a ``gr.State``; ``export`` writes its runs to
CSV and JSON in the session's own temporary folder and ``discard`` removes that folder and lets
go of the runs when Gradio expires the state. ``results_table`` is the runs as the table the app
shows.
"""

import csv
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from specdemo.app.generate.run_record import RunRecord
from specdemo.app.page.replay import SweepPlan
from specdemo.app.settings import DRAFTERS
from specdemo.app.spans import Span

# Measured on this machine unless marked: "expected" and "predicted" are formulas (theory.py) on
# the run's measured α per draft (kept / judged: drafts after a rejection are never judged) and
# costs, and efficiency is measured / predicted speedup.
RESULT_COLUMNS = [
    "run",
    "K",
    "T",
    "speedup",  # the deciding column, among the first, where a phone's narrow table shows it
    "predicted",
    "drafter",
    "kept / drafted",
    "tokens/pass",
    "tokens/pass expected (i.i.d.)",
    "spec tok/s",
    "target tok/s",
    "efficiency",
    "c",
]


@dataclass
class Session:
    """A session's runs (``RunRecord``s), where their exports are written, and the sweep
    under way (``replay.SweepPlan``; its cells run one per queued event)."""

    runs: list[RunRecord] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)  # the last speculative answer
    folder: str | None = None
    sweep: SweepPlan | None = None


def export(session: Session) -> tuple[str, str] | tuple[None, None]:
    """The session's runs as results.csv and results.json in its own temp folder."""
    if not session.runs:
        return None, None
    if session.folder is None or not Path(session.folder).is_dir():
        session.folder = tempfile.mkdtemp(prefix="specdemo-")
    folder = Path(session.folder)
    rows = [{"run": i, **run.row()} for i, run in enumerate(session.runs, 1)]
    with open(folder / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (folder / "results.json").write_text(json.dumps(rows, indent=1))
    return str(folder / "results.csv"), str(folder / "results.json")


def discard(session: Session | None) -> None:
    """Remove a finished session's export folder and let go of its runs (Gradio calls this when
    the state expires)."""
    if session is None:
        return
    if session.folder:
        shutil.rmtree(session.folder, ignore_errors=True)
    session.runs, session.spans, session.folder, session.sweep = [], [], None, None


def results_table(runs: list[RunRecord]) -> list[list]:
    """The session's runs as table rows, newest first (columns: RESULT_COLUMNS). c and the
    predicted speedup (``theory.StepCosts.speedup``) are blank where the target-alone run was
    too short to time a plain step; the expected tokens per pass
    (``theory.expected_tokens_per_pass``) where a run has no rounds."""
    return [
        [
            i,
            f"auto ({r.mean_k:.1f})" if r.k == "auto" else r.k,
            r.temperature,
            round(r.speedup, 2),
            _maybe(r.predicted_speedup, 2),
            DRAFTERS[r.drafter]
            + (f", tree {r.tree_width}" if r.tree_width > 1 else "")
            + (", judged as a block" if r.judge == "block" else ""),
            round(r.kept_rate, 3),
            round(r.tokens_per_pass, 2),
            _maybe(r.expected_tokens_per_pass, 2),
            round(r.spec_tokens_per_s, 1),
            round(r.target_tokens_per_s, 1),
            _maybe(r.efficiency, 2),
            _maybe(r.c, 3),
        ]
        for i, r in reversed(list(enumerate(runs, 1)))
    ]


def _maybe(value: float | None, digits: int) -> float | str:
    return "" if value is None else round(value, digits)
