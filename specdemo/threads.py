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


def choose(device="cpu", threads: int | str = "auto") -> int | None:
    """The torch threads for work on `device`: None for a model on a GPU (the CPU's threads are
    left alone); else `threads` as given, or for "auto" ``fitting`` the load measured now, never
    above the count this thread runs with already."""
    if torch.device(device).type != "cpu":
        return None
    most = torch.get_num_threads()
    if threads == "auto":  # on one thread already (a forked worker): nothing to measure
        threads = 1 if most == 1 else fitting(others_busy(), cores(), most)
    n = threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f'threads must be a whole number >= 1 or "auto", got {n!r}')
    return n


@contextlib.contextmanager
def on(n: int | None):
    """Run the block on `n` torch threads (None: as they are), then restore the count. torch
    keeps the count per thread: the block's own thread is the one that changes."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield before if n is None else n
    finally:
        if n is not None:
            torch.set_num_threads(before)


@contextlib.contextmanager
def fitted(device="cpu", threads: int | str = "auto"):
    """Run the block on ``choose``'s threads; yields the count."""
    with on(choose(device, threads)) as n:
        yield n


def each_step(iterator, n: int | None):
    """`iterator`'s items, each produced on `n` torch threads (None: as they are) by whichever
    thread asks for it, that thread's own count restored after each: a server may advance a
    generator from a different worker thread every time, and torch keeps a count per thread."""
    iterator = iter(iterator)
    try:
        while True:
            with on(n):
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item
    finally:  # closed early (Stop): the inner generator's own cleanup runs now
        if hasattr(iterator, "close"):
            with on(n):
                iterator.close()
