"""Progress reporting for long loads: the `Progress` callback type and one renderer of it.

Library code calls `progress(stage, done, total)`, where done == total ends a stage, and never
prints. `ProgressBars` is the renderer for callers that draw on stderr: one tqdm bar per stage on a
terminal, one plain line per stage start and end elsewhere (e.g. a Space's log).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

Progress = Callable[[str, float, float], None]  # (stage, done, total); done == total ends a stage


def report(progress: Progress | None, stage: str, done: float, total: float) -> None:
    if progress:
        progress(stage, done, total)


class ProgressBars:
    """A `Progress` callback for stderr (or `file`): tqdm bars on a terminal, else plain lines.

    The plain form prints "<stage> ..." when a stage starts and "<stage>: done in <s> s" when it
    ends, so a log that is not a terminal stays one line per event instead of carriage returns.
    `write` adds a line of the caller's own between them.
    """

    def __init__(self, file: TextIO | None = None):
        self.file = file or sys.stderr
        self.plain = not self.file.isatty()
        self.bars: dict[str, tqdm] = {}
        self.started: dict[str, float] = {}

    def __call__(self, stage: str, done: float, total: float) -> None:
        if self.plain:
            self._line(stage, done, total)
        else:
            self._bar(stage, done, total)

    def write(self, line: str) -> None:
        """One line of text, printed above any bar being drawn."""
        if self.plain:
            print(line, file=self.file, flush=True)
        else:
            tqdm.write(line, file=self.file)

    def _line(self, stage: str, done: float, total: float) -> None:
        if stage not in self.started:
            self.started[stage] = time.perf_counter()
            print(f"{stage} ...", file=self.file, flush=True)
        if done >= total:
            elapsed = time.perf_counter() - self.started.pop(stage)
            print(f"{stage}: done in {elapsed:.1f} s", file=self.file, flush=True)

    def _bar(self, stage: str, done: float, total: float) -> None:
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(
                total=total,
                desc=stage,
                unit="B" if total > 1e5 else "it",
                unit_scale=True,
                file=self.file,
                leave=False,
            )
        bar.update(done - bar.n)
        if done >= total:
            self.bars.pop(stage).close()
