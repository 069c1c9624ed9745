"""How many threads torch computes with on a CPU, fitted to the cores this process may use and
the share of them other work leaves free.

The cores a process may use are not the host's. A container or a Space runs under a CPU quota
(cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``) and a cpuset, while
``os.cpu_count()``, ``/proc/stat``'s first line and torch's default thread count all count the
host: a quota of 2 on a 16-core host would run 16 threads on two cores' worth of time, each
parallel region waiting for threads the quota has paused. ``limit`` reads the quota, the cpuset
and the affinity set; ``cap`` lowers torch's count to it once at start-up (the app, the CLI and
the bench call it) and makes that the process-wide ceiling.

torch starts one thread per core. Beside a busy process (a browser, a video call, a room's other
visitors) a step on every core waits, at each of its parallel regions, for the thread the OS has
set aside, and runs several times slower than on the cores left free (docs/BENCHMARKS.md,
"Beside busy processes"). ``fitted`` measures how many cores' worth of CPU other processes use
over a short sample (on the CPUs this process may use, or under a quota the quota's own usage),
runs the block on the cores they leave (at least one, never above the ceiling) and then restores
the count. The app's race and the bench run under it, so the target alone and the speculative
run get the same threads.

The ceiling is the module's, not torch's: torch hands the last count any thread set to every
thread that touches it first, so a server worker started while another ran on one thread would
otherwise read 1 as its most for good.
"""

import contextlib
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

SAMPLE_SECONDS = 0.2  # long enough for the kernel's 10 ms CPU accounting to resolve 0.1 core
CGROUP = Path("sys/fs/cgroup")


@dataclass(frozen=True)
class Limit:
    """The CPUs this process may run on (`cpus`: the affinity set within the cgroup's cpuset),
    the CPU quota in CPUs' worth of time (`quota`, None without one) and the file that set it
    (`source`), the host's CPU count (`host`), and the file that counts the quota's CPU time
    (`usage`, microseconds; None without a quota)."""

    cpus: tuple[int, ...]
    host: int
    quota: float | None = None
    source: str = ""
    usage: Path | None = None

    @property
    def cores(self) -> int:
        """Threads worth running: the CPUs, fewer under a quota (rounded, at least 1)."""
        n = max(1, len(self.cpus))
        return n if self.quota is None else max(1, min(n, math.floor(self.quota + 0.5)))

    @property
    def sentence(self) -> str:
        """Which limit holds, for the page's machine line."""
        if self.quota is not None:
            return (
                f"{self.cores} of the host's {self.host} CPUs: a quota of "
                f"{self.quota:g} CPUs ({self.source})"
            )
        if len(self.cpus) < self.host:
            return f"{len(self.cpus)} of the host's {self.host} CPUs (cpuset or affinity)"
        return f"{self.host} CPUs, no quota"


def cpu_list(text: str) -> set[int]:
    """The CPU ids of a Linux CPU list such as "0-3,8,10-11"."""
    cpus = set()
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cgroup_dirs(root: Path) -> dict[str, list[Path]]:
    """Per controller ("" for cgroup v2), this process's cgroup directories from its own up to
    its mount's root (a container often mounts its own cgroup as the root)."""
    text = _read(root / "proc/self/cgroup") or ""
    dirs: dict[str, list[Path]] = {}
    unified = (root / CGROUP / "cgroup.controllers").exists()
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            if bool(name) == unified:  # v2 on a unified mount, v1 controllers otherwise
                continue
            mount = root / CGROUP if unified else _v1_mount(root, name)
            if mount is None:
                continue
            own = mount / path.lstrip("/")
            chain = [own, *own.parents] if own.is_dir() else [mount]
            dirs[name] = [d for d in chain if d == mount or mount in d.parents]
    return dirs


def _v1_mount(root: Path, controller: str) -> Path | None:
    """Where a cgroup v1 controller is mounted ("cpu" may share "cpu,cpuacct")."""
    base = root / CGROUP
    for name in (controller, "cpu,cpuacct", "cpuacct,cpu"):
        if controller in name.split(",") and (base / name).is_dir():
            return base / name
    return None


def _quota(dirs: dict[str, list[Path]]) -> tuple[float | None, str, Path | None]:
    """(the tightest quota over this process's cgroup and its parents, its file, the usage
    file of this process's own cgroup)."""
    best: tuple[float | None, str, Path | None] = (None, "", None)
    if "" in dirs:  # v2: "max 100000" or "200000 100000"
        for d in dirs[""]:
            quota, _, period = (_read(d / "cpu.max") or "max").partition(" ")
            if (
                quota != "max"
                and period
                and (best[0] is None or int(quota) / int(period) < best[0])
            ):
                best = (int(quota) / int(period), "cgroup v2 cpu.max", dirs[""][0] / "cpu.stat")
    for d in dirs.get("cpu", []):  # v1: a quota of -1 is none
        quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
        if quota and period and int(quota) > 0:
            share = int(quota) / int(period)
            if best[0] is None or share < best[0]:
                acct = dirs.get("cpuacct", dirs["cpu"])[0]
                best = (share, "cgroup v1 cpu.cfs_quota_us", acct / "cpuacct.usage")
    return best


def _cpuset(dirs: dict[str, list[Path]]) -> set[int] | None:
    for d in dirs.get("", []):
        text = _read(d / "cpuset.cpus.effective")
        if text:
            return cpu_list(text)
    for d in dirs.get("cpuset", []):
        text = _read(d / "cpuset.cpus")
        if text:
            return cpu_list(text)
    return None


def _host_cpus(root: Path) -> int:
    text = _read(root / "proc/stat") or ""
    n = sum(1 for line in text.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
    return n or os.cpu_count() or 1


def limit(root: str | os.PathLike = "/", affinity: set[int] | None = None) -> Limit:
    """The CPUs and CPU quota this process may use, read from `root`'s /proc and cgroup files
    (a test passes a folder of fakes, and the `affinity` set it stands for)."""
    root = Path(root)
    host = _host_cpus(root)
    if affinity is None:
        getaffinity = getattr(os, "sched_getaffinity", None)
        affinity = set(getaffinity(0)) if getaffinity else set(range(host))
    try:
        dirs = _cgroup_dirs(root)
    except (OSError, ValueError):
        dirs = {}
    cpus = set(affinity) & (_cpuset(dirs) or set(affinity)) or set(affinity)
    quota, source, usage = _quota(dirs)
    return Limit(tuple(sorted(cpus)), host, quota, source, usage)


def busy_seconds(where: Limit | None = None, root: str | os.PathLike = "/") -> float | None:
    """CPU seconds used so far by every process that competes with this one for `where`'s CPUs
    (default: ``limit()``): under a quota, the quota's own cgroup usage; else the busy time of
    those CPUs in /proc/stat. None where the machine does not say."""
    where = where or limit(root)
    if where.quota is not None and where.usage is not None:
        text = _read(where.usage)
        if text is not None:
            if where.usage.name == "cpuacct.usage":
                return int(text) / 1e9  # nanoseconds
            fields = dict(line.split() for line in text.splitlines() if line.count(" ") == 1)
            if "usage_usec" in fields:
                return int(fields["usage_usec"]) / 1e6
    text = _read(Path(root) / "proc/stat")
    if text is None:
        return None
    total, wanted = 0, {f"cpu{i}" for i in where.cpus}
    try:
        for line in text.splitlines():
            name, *fields = line.split()
            if name in wanted:
                ticks = [int(x) for x in fields[:8]]
                total += sum(ticks) - ticks[3] - ticks[4]  # less idle and iowait
    except ValueError:
        return None
    return total / os.sysconf("SC_CLK_TCK")


def others_busy(seconds: float = SAMPLE_SECONDS, where: Limit | None = None) -> float:
    """Cores' worth of CPU that other processes used over the next `seconds` on the CPUs (or
    the quota) this process may use (0 where the machine does not say): their CPU time less
    this process's own, over the wall time."""
    where = where or limit()
    start, own, wall = busy_seconds(where), time.process_time(), time.perf_counter()
    if start is None:
        return 0.0
    time.sleep(seconds)
    used = busy_seconds(where) - start - (time.process_time() - own)
    return max(0.0, used / (time.perf_counter() - wall))


def cores() -> int:
    """The threads worth running here: the CPUs this process may use, under its quota."""
    return limit().cores


_ceiling: int | None = None
_lock = threading.Lock()


def cap(n: int | None = None) -> int:
    """Make `n` (None: torch's count capped at ``cores()``) the most threads any block runs
    on, process-wide, and torch's own count: the app, the CLI and the bench call it at start-up;
    a forked worker that must compute on one thread calls ``cap(1)``. Returns the ceiling."""
    global _ceiling
    with _lock:
        if n is None:
            n = min(torch.get_num_threads() if _ceiling is None else _ceiling, cores())
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"the thread ceiling must be a whole number >= 1, got {n!r}")
        _ceiling = n
        torch.set_num_threads(n)
        return n


def ceiling() -> int:
    """The most threads a block runs on (``cap``; capped on first use when nothing called it)."""
    return cap() if _ceiling is None else _ceiling


def fitting(others: float, cores: int, most: int) -> int:
    """Threads for the cores that `others` cores' worth of other work leaves: at least 1, at
    most `most`."""
    return max(1, min(most, cores - round(others)))


def choose(device="cpu", threads: int | str = "auto") -> int | None:
    """The torch threads for work on `device`: None for a model on a GPU (the CPU's threads are
    left alone); else `threads` as given, or for "auto" ``fitting`` the load measured now on
    the CPUs this process may use, never above the process-wide ``ceiling``."""
    if torch.device(device).type != "cpu":
        return None
    most = ceiling()
    if threads == "auto":  # a ceiling of one (a forked worker): nothing to measure
        where = limit()
        threads = 1 if most == 1 else fitting(others_busy(where=where), where.cores, most)
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
