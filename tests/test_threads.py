"""threads.py: torch's threads fitted to the cores other processes leave free."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from specdemo import threads
from specdemo.busy import busy


def test_threads_fill_the_cores_other_work_leaves_and_never_fall_below_one():
    assert threads.fitting(0.0, cores=2, most=2) == 2
    assert threads.fitting(0.4, cores=2, most=2) == 2  # a browser idling: both cores
    assert threads.fitting(1.0, cores=2, most=2) == 1  # one busy loop
    assert threads.fitting(2.3, cores=2, most=2) == 1  # two or more: still one thread
    assert threads.fitting(1.0, cores=16, most=4) == 4  # never more than torch started with


def test_other_processes_cpu_is_counted_and_this_ones_own_is_not(monkeypatch):
    """On a fake clock: over a 0.5 s sample the machine used 1.5 CPU-seconds, 0.5 of them this
    process's own (its server threads): others used 1 core's worth."""
    clock = {"wall": 0.0, "cpu": 10.0, "own": 3.0}

    def sleep(seconds):
        clock["wall"] += seconds
        clock["cpu"] += 1.5
        clock["own"] += 0.5

    monkeypatch.setattr(threads, "busy_seconds", lambda: clock["cpu"])
    monkeypatch.setattr(threads.time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(threads.time, "process_time", lambda: clock["own"])
    monkeypatch.setattr(threads.time, "sleep", sleep)
    assert threads.others_busy(0.5) == pytest.approx(2.0)  # 1.0 CPU-s over 0.5 s: 2 cores
    monkeypatch.setattr(threads, "busy_seconds", lambda: None)  # not Linux: no measure
    assert threads.others_busy(0.5) == 0.0


@pytest.mark.skipif(threads.busy_seconds() is None, reason="no /proc/stat")
def test_a_busy_process_beside_this_one_is_seen():
    with busy(1):
        assert threads.others_busy(0.5) >= 0.5  # at least half a core even on a crowded machine


def test_the_block_runs_on_the_fitted_threads_and_the_count_is_restored(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "others_busy", lambda: 5.0)  # every core taken
    with threads.fitted("cpu") as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert threads.choose("cpu") == 1 and torch.get_num_threads() == before  # chosen, not set
    with threads.fitted("cpu", threads=2) as n:
        assert n == 2 and torch.get_num_threads() == 2
    torch.set_num_threads(1)  # a forked worker computing on one thread: never raised
    monkeypatch.setattr(threads, "others_busy", lambda: pytest.fail("measured for nothing"))
    with threads.fitted("cpu") as n:
        assert n == 1
    torch.set_num_threads(before)
    with threads.fitted("cuda:0") as n:  # a GPU's model: the CPU threads are left alone
        assert n == before
    with pytest.raises(ValueError, match=">= 1"), threads.fitted("cpu", threads=0):
        pass
    assert torch.get_num_threads() == before


def test_each_step_of_a_generator_runs_on_the_chosen_threads_whichever_thread_advances_it():
    """A server advances a streamed generator from a different worker thread each time, and
    torch keeps a thread count per thread: every step must still compute on the count chosen,
    and each worker keep its own count afterwards. The control: a count set once, in the thread
    that started the generator, does not reach the other workers."""
    if torch.get_num_threads() < 2:
        pytest.skip("torch runs on one thread here: no count to change")
    x, finished = torch.randn(32, 32), []

    def steps():
        try:
            for _ in range(4):
                x @ x  # a parallel region, as a model's forward pass has
                yield torch.get_num_threads()
        finally:
            finished.append(torch.get_num_threads())

    workers = [ThreadPoolExecutor(1) for _ in range(2)]
    own = [w.submit(lambda: (x @ x, torch.get_num_threads())[1]).result() for w in workers]
    assert own == [torch.get_num_threads()] * 2
    stream = threads.each_step(steps(), 1)
    seen = [workers[i % 2].submit(next, stream).result() for i in range(4)]
    assert seen == [1, 1, 1, 1]
    assert [w.submit(torch.get_num_threads).result() for w in workers] == own
    once = steps()
    with threads.on(1):  # set in this thread only
        seen = [workers[i % 2].submit(next, once).result() for i in range(4)]
    assert seen == own * 2  # the workers kept their own count
    finished.clear()
    closed = threads.each_step(steps(), 1)
    next(closed)
    closed.close()  # Stop: the inner generator is closed too, on the chosen threads
    assert finished == [1] and torch.get_num_threads() == own[0]
    for w in workers:
        w.shutdown()
