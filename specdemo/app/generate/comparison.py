"""The race told in words: the side-by-side table of a speculative run and the target alone, and
the notes under it (whether their tokens agree, and which run was replayed from an earlier
measurement).
"""

import time

from specdemo.app.config import RunConfig
from specdemo.app.generate.race import SpecRun, TargetRun

SAME_DISTRIBUTION_NOTE = (
    "Both runs use the same seed. With temperature above 0 the two answers are different "
    "*samples*, so their words differ, yet every speculative token is drawn from exactly the "
    "target's distribution: both are samples of one distribution (the **Is it exact?** tab "
    "shows it). With temperature 0 (greedy) the two answers match token for token."
)


def visible_spans(spans: list[tuple[str, str]], show_rejected: bool) -> list[tuple[str, str]]:
    return spans if show_rejected else [s for s in spans if s[1] != "rejected"]


COMPARISON_ROWS = [
    "Tokens/s",
    "Wall time",
    "Drafts kept / drafted",
    "Mean K per round",
    "Tokens per target pass",
    "Target passes (with prefill)",
    "New tokens",
]


def comparison_markdown(
    spec: SpecRun | None, target: TargetRun | None, finished: RunConfig | None = None
) -> str:
    """The side-by-side numbers, a run still to come showing dots; once both runs have
    `finished` (under that config), the speedup, and a note on whether their tokens agree and
    on any run answered from the store (``replay_note``). Until then the speedup waits: a rate
    measured on a run's first tokens is not its rate over the answer."""
    speedup = "… (when both finish)"
    if finished is not None and spec and target and target.tokens_per_s:
        speedup = f"**{spec.tokens_per_s / target.tokens_per_s:.2f}×**"
    rows = list(zip(COMPARISON_ROWS, _column(spec), _column(target), strict=True))
    rows.insert(2, ("Speedup", speedup, "1×"))
    lines = ["| | Speculative | Target alone |", "|---|---:|---:|"]
    lines += [f"| {name} | {a} | {b} |" for name, a, b in rows]
    if finished is not None:
        lines += ["", same_tokens_note(spec.tokens, target.tokens, finished.temperature == 0)]
        note = replay_note(spec, target)
        lines += ["", note] if note else []
    return "\n".join(lines)


def replay_note(spec: SpecRun, target: TargetRun) -> str:
    """Which runs were answered from the store, and when they were measured."""
    if spec.measured_at is not None:
        return (
            f"*Replayed from a run measured at {clock(spec.measured_at)}: the same pair, prompt, "
            "settings and seed give the same tokens, and every figure above is that run's. "
            "Tick **Fresh run** to measure again.*"
        )
    if target.measured_at is not None:
        return (
            f"*Target alone: the run measured at {clock(target.measured_at)} for the same prompt, "
            "sampling, seed and length (K and the drafter do not change it), with its timings.*"
        )
    return ""


def clock(at: float) -> str:
    """A time.time() as the server's HH:MM."""
    return time.strftime("%H:%M", time.localtime(at))


def _column(run: SpecRun | TargetRun | None) -> list[str]:
    if run is None or not run.tokens:
        return ["…"] * len(COMPARISON_ROWS)
    n, timing = len(run.tokens), [f"{run.tokens_per_s:.1f}", f"{run.seconds:.2f} s"]
    if isinstance(run, TargetRun):
        return [*timing, "—", "0", "1", f"{n}", f"{n}"]
    s = run.stats
    return [
        *timing,
        f"{s.kept_rate:.2f}",
        f"{run.mean_k:.1f}",
        f"{s.tokens_per_pass:.2f}",
        f"{s.target_passes}",
        f"{n}",
    ]


def same_tokens_note(spec: list[int], target: list[int], greedy: bool) -> str:
    if spec == target:
        return "The two answers are identical, token for token."
    n = common_prefix(spec, target)
    tokens = f"{n} token{'' if n == 1 else 's'}"
    if greedy:
        return (
            f"The greedy answers agree for {tokens}, then differ: rounding in the batched verify "
            "pass can flip a near-tie (the **Is it exact?** tab shows where and why)."
        )
    return f"As two samples do, the answers agree for {tokens} and then go their own ways."


def common_prefix(a: list[int], b: list[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
