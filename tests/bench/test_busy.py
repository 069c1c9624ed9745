"""busy.py: the bench's own busy processes, alive for the block and gone after it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from specdemo.bench.busy import busy


def test_busy_processes_spin_through_the_block_and_are_stopped_after_it_even_on_error():
    with pytest.raises(RuntimeError), busy(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
        raise RuntimeError("a run failed part-way")
    assert all(p.poll() is not None for p in procs)
    with busy(0) as none:
        assert none == []


def test_a_busy_process_that_ended_early_is_said_and_a_negative_count_is_refused():
    """Only a bound asked for ends one on its own, and the block can tell: a measurement its
    load did not last through is flagged, not recorded as busy."""
    with busy(1, seconds=0.2) as procs:
        assert procs[0].wait(timeout=30) == 0  # it stopped on its own, without being killed
        assert not procs.held
    with busy(1) as procs:
        time.sleep(0.3)
        assert procs.held  # no timer of its own
    with pytest.raises(ValueError, match=">= 0"), busy(-1):
        time.sleep(0)


def test_a_failed_start_stops_the_busy_processes_already_started(monkeypatch):
    from specdemo.bench import busy as module

    started, real = [], subprocess.Popen

    def popen(*args, **kwargs):
        if started:
            raise OSError("no more processes")
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(module.subprocess, "Popen", popen)
    with pytest.raises(OSError, match="no more"), busy(2):
        pass
    assert started[0].poll() is not None  # the first one was stopped


def test_a_busy_process_ends_when_the_process_that_started_it_is_killed():
    code = "from specdemo.bench.busy import busy\n"
    code += "with busy(1) as (p,):\n    print(p.pid, flush=True)\n"
    code += "    input()\n"
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stdin=subprocess.PIPE, text=True)  # fmt: skip
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)  # no cleanup runs in the parent
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)  # still there (or a zombie not yet reaped by init)
            with open(f"/proc/{child}/stat") as f:
                if f.read().split()[2] == "Z":
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the busy process outlived its killed parent")
