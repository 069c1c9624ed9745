"""threads.py: torch's threads fitted to the CPUs and quota this process may use and the share
of them other processes leave free."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from specdemo.bench.busy import busy
from specdemo.runtime import threads


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

    monkeypatch.setattr(threads, "busy_seconds", lambda where: clock["cpu"])
    monkeypatch.setattr(threads.time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(threads.time, "process_time", lambda: clock["own"])
    monkeypatch.setattr(threads.time, "sleep", sleep)
    assert threads.others_busy(0.5) == pytest.approx(2.0)  # 1.0 CPU-s over 0.5 s: 2 cores
    monkeypatch.setattr(threads, "busy_seconds", lambda where: None)  # not Linux: no measure
    assert threads.others_busy(0.5) == 0.0


@pytest.fixture
def ceiling():
    """The module's process-wide ceiling and torch's count, restored after the test."""
    saved, count = threads._ceiling, torch.get_num_threads()
    yield
    threads._ceiling = saved
    torch.set_num_threads(count)


@pytest.mark.skipif(threads.busy_seconds() is None, reason="no /proc/stat")
def test_a_busy_process_beside_this_one_is_seen():
    with busy(1):
        assert threads.others_busy(0.5) >= 0.5  # at least half a core even on a crowded machine


def test_the_block_runs_on_the_fitted_threads_and_the_count_is_restored(monkeypatch, ceiling):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "others_busy", lambda where: 5.0)  # every core taken
    with threads.fitted("cpu") as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    assert threads.choose("cpu") == 1 and torch.get_num_threads() == before  # chosen, not set
    with threads.fitted("cpu", threads=2) as n:
        assert n == 2 and torch.get_num_threads() == 2
    threads.cap(1)  # a forked worker computing on one thread: never raised
    monkeypatch.setattr(threads, "others_busy", lambda where: pytest.fail("measured for nothing"))
    with threads.fitted("cpu") as n:
        assert n == 1
    threads.cap(before)
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


def fake_machine(root, *, host=16, v2=None, v1=None, cpuset=None, path="/app"):
    """A folder standing for `/` on a `host`-CPU Linux machine: /proc/stat's per-CPU lines (CPU
    i busy i seconds at 100 ticks a second), /proc/self/cgroup naming `path`, and either cgroup v2
    files (`v2`: {relative dir: {file: text}}) or v1 controller folders (`v1`: likewise, the first
    part of each dir the controller's mount)."""
    stat = ["cpu  0 0 0 0 0 0 0 0"]
    stat += [f"cpu{i} {i * 100} 0 0 500 0 0 0 0 0 0" for i in range(host)]
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/stat").write_text("\n".join(stat) + "\nintr 0\n")
    cgroup = root / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    if v2 is not None:
        (cgroup / "cgroup.controllers").write_text("cpuset cpu memory\n")
        (root / "proc/self/cgroup").write_text(f"0::{path}\n")
        files = v2
    else:
        lines = ["3:cpuset:" + path, "2:cpu,cpuacct:" + path, "1:memory:/"]
        (root / "proc/self/cgroup").write_text("\n".join(lines) + "\n")
        files = v1 or {}
    for folder, contents in files.items():
        (cgroup / folder).mkdir(parents=True, exist_ok=True)
        for name, text in contents.items():
            (cgroup / folder / name).write_text(text + "\n")
    return root


HOST = set(range(16))
LIMIT = threads.limit


def test_a_cgroup_v2_quota_below_the_hosts_cores_is_the_limit_its_parents_too(tmp_path):
    root = fake_machine(
        tmp_path,
        v2={
            "": {"cpu.max": "max 100000"},
            "app": {"cpu.max": "200000 100000", "cpu.stat": "usage_usec 0"},
        },
    )
    lim = threads.limit(root, affinity=HOST)
    assert (lim.host, lim.quota, lim.cores, len(lim.cpus)) == (16, 2.0, 2, 16)
    assert lim.usage == root / "sys/fs/cgroup/app/cpu.stat"
    assert lim.sentence == "2 of the host's 16 CPUs: a quota of 2 CPUs (cgroup v2 cpu.max)"
    (root / "sys/fs/cgroup/cpu.max").write_text("100000 100000\n")  # the parent's is tighter
    assert threads.limit(root, affinity=HOST).cores == 1
    (root / "sys/fs/cgroup/app/cpu.max").write_text("max 100000\n")
    (root / "sys/fs/cgroup/cpu.max").write_text("max 100000\n")
    lim = threads.limit(root, affinity=HOST)
    assert (lim.quota, lim.cores, lim.sentence) == (None, 16, "16 CPUs, no quota")


def test_a_cgroup_v1_quota_rounds_to_whole_threads_and_minus_one_is_none(tmp_path):
    v1 = {
        "cpu,cpuacct/app": {
            "cpu.cfs_quota_us": "150000",
            "cpu.cfs_period_us": "100000",
            "cpuacct.usage": "0",
        }
    }
    root = fake_machine(tmp_path, v1=v1)
    lim = threads.limit(root, affinity=HOST)
    assert (lim.quota, lim.cores, lim.source) == (1.5, 2, "cgroup v1 cpu.cfs_quota_us")
    assert lim.usage == root / "sys/fs/cgroup/cpu,cpuacct/app/cpuacct.usage"
    (root / "sys/fs/cgroup/cpu,cpuacct/app/cpu.cfs_quota_us").write_text("40000\n")
    assert threads.limit(root, affinity=HOST).cores == 1  # 0.4 of a CPU: still one thread
    (root / "sys/fs/cgroup/cpu,cpuacct/app/cpu.cfs_quota_us").write_text("-1\n")
    assert threads.limit(root, affinity=HOST).quota is None


def test_a_container_that_mounts_its_own_cgroup_as_the_root_is_read_there(tmp_path):
    """Docker without a cgroup namespace of its own names the host's path; the folder is not
    there, and the mount's root is the container's cgroup."""
    v1 = {"cpu,cpuacct": {"cpu.cfs_quota_us": "200000", "cpu.cfs_period_us": "100000"}}
    root = fake_machine(tmp_path, v1=v1, path="/docker/0123abcd")
    assert threads.limit(root, affinity=HOST).cores == 2


def test_the_cpuset_and_the_affinity_set_narrow_the_cpus(tmp_path):
    root = fake_machine(tmp_path / "v2", v2={"app": {"cpuset.cpus.effective": "0-3,8"}})
    lim = threads.limit(root, affinity=HOST)
    assert lim.cpus == (0, 1, 2, 3, 8) and lim.cores == 5 and lim.quota is None
    assert lim.sentence == "5 of the host's 16 CPUs (cpuset or affinity)"
    assert threads.limit(root, affinity={2, 3, 4}).cpus == (2, 3)  # both apply
    root = fake_machine(tmp_path / "v1", v1={"cpuset/app": {"cpuset.cpus": "2,5-6"}})
    assert threads.limit(root, affinity=HOST).cpus == (2, 5, 6)
    root = fake_machine(tmp_path / "none", host=4)  # no cgroup files at all: the affinity set
    assert threads.limit(root, affinity={0, 1, 2, 3}).cores == 4
    assert threads.cpu_list("0-2,7,9-10") == {0, 1, 2, 7, 9, 10}


def test_busy_time_is_read_from_the_cpus_this_process_may_use(tmp_path):
    """Per-CPU lines, not the machine-wide one: CPU i of the fake has been busy i seconds."""
    root = fake_machine(tmp_path, v2={"app": {"cpuset.cpus.effective": "2-3"}})
    lim = threads.limit(root, affinity=HOST)
    ticks = threads.os.sysconf("SC_CLK_TCK")
    assert threads.busy_seconds(lim, root) == pytest.approx(500 / ticks)  # 200 + 300 ticks
    whole = threads.Limit(tuple(range(16)), 16)
    assert threads.busy_seconds(whole, root) == pytest.approx(12000 / ticks)


def test_a_2_cpu_quota_on_16_host_cores_runs_2_threads_and_1_beside_a_busy_process(
    tmp_path, monkeypatch, ceiling
):
    """torch would start 16 threads on a 16-core host; the quota caps them at 2 at start-up,
    and one busy process in the same quota (its CPU time counted in the quota's usage, on a
    fake clock) leaves one."""
    root = fake_machine(
        tmp_path, v2={"app": {"cpu.max": "200000 100000", "cpu.stat": "usage_usec 0"}}
    )
    usage, clock = root / "sys/fs/cgroup/app/cpu.stat", {"wall": 0.0, "own": 0.0, "used": 0}
    others = {"cores": 0.0}

    def sleep(seconds):
        clock["wall"] += seconds
        clock["used"] += round(others["cores"] * seconds * 1e6)
        usage.write_text(f"usage_usec {clock['used']}\nuser_usec 0\n")

    monkeypatch.setattr(threads, "limit", lambda: LIMIT(root, affinity=HOST))
    monkeypatch.setattr(threads.time, "perf_counter", lambda: clock["wall"])
    monkeypatch.setattr(threads.time, "process_time", lambda: clock["own"])
    monkeypatch.setattr(threads.time, "sleep", sleep)
    threads.cap(16)  # torch's default on the host
    assert threads.cap() == 2 and torch.get_num_threads() == 2
    assert threads.choose("cpu") == 2
    others["cores"] = 1.0
    assert threads.choose("cpu") == 1


def test_a_thread_that_first_touches_torch_inside_another_threads_block_can_still_rise(
    monkeypatch, ceiling
):
    """torch hands the last count any thread set to a thread's first touch: a server worker
    started while another runs ``on(1)`` reads 1. The ceiling is the module's, so that worker's
    next request is fitted to the cores as before; the count torch reports there is the control."""
    threads.cap(2)
    monkeypatch.setattr(threads, "others_busy", lambda where: 0.0)
    monkeypatch.setattr(threads, "limit", lambda: threads.Limit((0, 1), 2))
    seen = {}

    def worker():
        seen["torch"] = torch.get_num_threads()
        seen["chosen"] = threads.choose("cpu")

    with threads.on(1):
        fresh = threading.Thread(target=worker)
        fresh.start()
        fresh.join()
    assert seen == {"torch": 1, "chosen": 2}
