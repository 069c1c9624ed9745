"""How many threads torch computes with on a CPU, fitted to the cores other work leaves free.

torch starts one thread per core. Beside a busy process (a browser, a video call, a room's other
visitors) a step on every core waits, at each of its parallel regions, for the thread the OS has
set aside, and runs several times slower than on the cores left free (docs/BENCHMARKS.md,
"Beside busy processes"). ``fitted`` measures how many cores' worth of CPU other processes use
over a short sample, runs the block on the cores they leave (at least one, never more than torch
runs with already: a forked worker that computes on one thread stays on one) and then restores
the count. The app's race and the bench run under it, so
the target alone and the speculative run get the same threads.
"""

import contextlib
import os
import time

import torch

SAMPLE_SECONDS = 0.2  # long enough for the kernel's 10 ms CPU accounting to resolve 0.1 core


def busy_seconds() -> float | None:
    """CPU seconds every process has used since boot (Linux's /proc/stat), None elsewhere."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def others_busy(seconds: float = SAMPLE_SECONDS) -> float:
    """Cores' worth of CPU that other processes used over the next `seconds` (0 where the
    machine does not say): every process's CPU time less this one's, over the wall time."""
    start, own, wall = busy_seconds(), time.process_time(), time.perf_counter()
    if start is None:
        return 0.0
    time.sleep(seconds)
    used = busy_seconds() - start - (time.process_time() - own)
    return max(0.0, used / (time.perf_counter() - wall))


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def fitting(others: float, cores: int, most: int) -> int:
    """Threads for the cores that `others` cores' worth of other work leaves: at least 1, at
    most `most`."""
    return max(1, min(most, cores - round(others)))


@contextlib.contextmanager
def fitted(device="cpu", threads: int | str = "auto"):
    """Run the block with `threads` torch threads ("auto": ``fitting`` the load measured now);
    yields the count. Nothing changes for a model on a GPU."""
    before = torch.get_num_threads()
    if torch.device(device).type != "cpu":
        yield before
        return
    n = fitting(others_busy(), cores(), before) if threads == "auto" else int(threads)
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)
