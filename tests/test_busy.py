"""busy.py: the bench's own busy processes, alive for the block and gone after it."""

import time

import pytest

from specdemo.busy import busy


def test_busy_processes_spin_through_the_block_and_are_stopped_after_it_even_on_error():
    with pytest.raises(RuntimeError), busy(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
        raise RuntimeError("a run failed part-way")
    assert all(p.poll() is not None for p in procs)
    with busy(0) as none:
        assert none == []


def test_a_busy_process_ends_itself_after_its_time_and_a_negative_count_is_refused():
    with busy(1, seconds=0.2) as (proc,):
        assert proc.wait(timeout=30) == 0  # it stopped on its own, without being killed
    with pytest.raises(ValueError, match=">= 0"), busy(-1):
        time.sleep(0)
