"""Busy processes beside a run: the load a laptop with a browser open, or a room sharing one
CPU, puts on the machine. ``busy(n)`` starts n processes that spin in a Python loop and stops
them when the block ends, on error too; each also ends itself after `seconds` at most, or as soon
as the process that started it is gone, so none outlives a caller that was killed."""

import contextlib
import os
import subprocess
import sys

# Spins until its time is up or its parent changes (the caller died and it was adopted).
SPIN = """import os, time
parent, end = {parent}, time.monotonic() + {seconds}
while time.monotonic() < end and os.getppid() == parent:
    pass
"""


@contextlib.contextmanager
def busy(n: int, seconds: float = 600.0):
    """Run the block beside `n` busy processes (0: none), each bounded to `seconds`."""
    if n < 0:
        raise ValueError(f"the number of busy processes must be >= 0, got {n}")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SPIN.format(parent=os.getpid(), seconds=float(seconds))]
        )
        for _ in range(n)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
