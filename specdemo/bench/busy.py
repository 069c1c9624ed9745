"""Busy processes beside a run: the load a laptop with a browser open, or a room sharing one
CPU, puts on the machine. ``busy(n)`` starts n processes that spin in a Python loop and stops
them when the block ends, on error too, and on a failed start the ones already started; each
also ends as soon as the process that started it is gone, so none outlives a caller that was
killed. None ends on a timer unless asked (`seconds`): a block that ran partly quiet would be
recorded as busy. ``Busy.held`` says whether every one is still spinning, for the caller to
check at the end of its block and flag a measurement its load did not last through."""

import contextlib
import os
import subprocess
import sys

# Spins until its parent changes (the caller died and it was adopted), or its time is up.
SPIN = """import os, time
parent, seconds = {parent}, {seconds}
end = None if seconds is None else time.monotonic() + seconds
while os.getppid() == parent and (end is None or time.monotonic() < end):
    pass
"""


class Busy(list):
    """The busy processes (a list of ``subprocess.Popen``)."""

    @property
    def held(self) -> bool:
        """Every busy process is still running."""
        return all(proc.poll() is None for proc in self)


@contextlib.contextmanager
def busy(n: int, seconds: float | None = None):
    """Run the block beside `n` busy processes (0: none); yields them as a ``Busy``. `seconds`
    bounds each (None: they run until the block ends)."""
    if n < 0:
        raise ValueError(f"the number of busy processes must be >= 0, got {n}")
    limit = None if seconds is None else float(seconds)
    procs = Busy()
    try:
        for _ in range(n):
            code = SPIN.format(parent=os.getpid(), seconds=limit)
            procs.append(subprocess.Popen([sys.executable, "-c", code]))
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
