"""docs/bench/busy.md's blocks: automatic K and fixed K beside busy processes (busy.json), how
much slower than their profile the recorded rounds ran (busy-rounds.json), and one step per
load and thread count (threads.json)."""

import statistics

from docs_writer.cells import span, table
from docs_writer.core import load
from docs_writer.runs import leads
from specdemo.bench import report as bench_report


def busy_bench() -> str:
    """Automatic K and fixed K against the target alone, quiet and beside busy processes."""
    result = load("busy.json")
    lines = [bench_report.busy_markdown(result).strip()]
    threads = {(p["prompt_set"], p["temperature"], p["busy"]): p["threads"]
               for p in result["plain_loop"]}  # fmt: skip
    used = {}
    for (_, _, n), counts in threads.items():
        used.setdefault(n, set()).update(counts)
    each = "; ".join(f"{n} busy: {', '.join(map(str, sorted(c)))}" for n, c in sorted(used.items()))
    lines += ["", f"Torch threads the runs used (`threads.fitted`): {each}."]
    return "\n".join(lines)


def busy_replay() -> str:
    """How much slower than the profile the recorded rounds' passes ran (busy-rounds.json)."""
    recorded = load("busy-rounds.json")
    profile = recorded["profile"]
    verify = {1: profile["t_step"], **{int(k) + 1: v for k, v in profile["t_verify"].items()}}

    def slowed(busy: int) -> tuple[list[float], list[float]]:
        target, draft = [], []
        for run in recorded["runs"]:
            if run["busy"] != busy:
                continue
            rounds = run["rounds"]
            target.append(statistics.median(v / verify[k + 1] for k, _, _, _, v in rounds))
            draft.append(statistics.median(d / s / profile["t_draft"]
                                           for _, _, s, d, _ in rounds if s))  # fmt: skip
        return target, draft

    (two_t, two_d), (one_t, one_d) = slowed(2), slowed(1)
    times = lambda v: span(v, lambda r: f"{r:.1f}")  # noqa: E731
    return (
        f"Beside two busy loops the recorded target passes ran {times(two_t)} times their "
        f"profile and the draft's steps {times(two_d)} times theirs; beside one, on 2 threads, "
        f"the target's {times(one_t)} times and the draft's {times(one_d)} times."
    )


def threads_steps() -> str:
    """One target and one draft step per load and thread count (threads.json)."""
    result = load("threads.json")
    rows = [[r["busy"], r["threads"], f"{r['target_ms']:.0f}", f"{r['draft_ms']:.0f}",
             f"{r['draft_ms'] / r['target_ms']:.2f}", ", ".join(map(str, sorted(set(r["fitted"]))))]
            for r in result["rows"]]  # fmt: skip
    header = ["busy processes", "torch threads", "target step (ms)", "draft step (ms)", "c",
              "`fitted` chose"]  # fmt: skip
    return table(header, rows)


BLOCKS = {
    "busy-bench": busy_bench,
    "busy-replay": busy_replay,
    "threads-steps": threads_steps,
    **leads("threads"),
}
