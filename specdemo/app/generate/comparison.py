"""The race told in words: the side-by-side table of a speculative run and the target alone, and
the notes under it (whether the two ran under uneven loads, whether their tokens agree, what the
judge kept beside what token by token would have kept, and which run was replayed from an
earlier measurement).
"""

import time

from specdemo.app.config import RunConfig
from specdemo.app.generate.loads import spec_load, target_load, uneven_loads
from specdemo.app.generate.race import SpecRun, TargetRun
from specdemo.app.spans import Span
from specdemo.decode.rounds import Stats
from specdemo.judge.verify import JUDGES

SAME_DISTRIBUTION_NOTE = (
    "Both runs use the same seed. With temperature above 0 the two answers are different "
    "*samples*, so their words differ, yet every speculative token is drawn from exactly the "
    "target's distribution: both are samples of one distribution (the **Is it exact?** tab "
    "shows it). With temperature 0 (greedy) the two answers match token for token."
)


def visible_spans(spans: list[Span], show_rejected: bool) -> list[Span]:
    return spans if show_rejected else [s for s in spans if s[1] != "rejected"]


COMPARISON_ROWS = [
    "Tokens/s",
    "Wall time",
    "Judge",
    "Drafts kept / drafted",
    "Drafts kept a pass",
    "Mean K per round",
    "Tokens per target pass",
    "Target passes (with prefill)",
    "New tokens",
]


def comparison_markdown(
    spec: SpecRun | None, target: TargetRun | None, finished: RunConfig | None = None
) -> str:
    """The side-by-side numbers, a run still to come showing dots; once both runs have
    `finished` (under that config), the speedup, with the two loads where they are uneven
    (``loads.uneven_loads``), and a note on whether their tokens agree and on any run answered
    from the store (``replay_note``). Until then the speedup waits: a rate
    measured on a run's first tokens is not its rate over the answer."""
    speedup = "… (when both finish)"
    if finished is not None and spec and target and target.tokens_per_s:
        speedup = f"**{spec.tokens_per_s / target.tokens_per_s:.2f}×**"
    rows = list(zip(COMPARISON_ROWS, _column(spec), _column(target), strict=True))
    rows.insert(2, ("Speedup", speedup, "1×"))
    s = spec.stats if spec is not None and spec.tokens else None
    if s is not None and s.copied:  # where the guesses came from, each with what it kept
        kept = [name for name, *_ in rows].index("Drafts kept / drafted")
        rows.insert(kept + 1, (COPIED_ROW, copied_counts(s), "—"))
    if s is not None and s.verify == "block" and s.token_rounds:
        kept = [name for name, *_ in rows].index("Drafts kept a pass")
        same = f"{s.token_kept / s.token_rounds:.2f}"
        if s.token_rounds < s.rounds:  # trees too: set both on the chain passes alone
            same += f" (the block: {s.chain_kept / s.token_rounds:.2f} on those chain passes)"
        rows.insert(kept + 1, ("Token by token, same guesses: drafts kept a pass", same, "—"))
    lines = ["| | Speculative | Target alone |", "|---|---:|---:|"]
    lines += [f"| {name} | {a} | {b} |" for name, a, b in rows]
    if finished is not None:
        uneven = uneven_loads(spec_load(spec), target_load(target, spec.profile))
        lines += ["", uneven] if uneven else []
        lines += ["", same_tokens_note(spec.tokens, target.tokens, finished.temperature == 0)]
        note = judge_note(spec.stats) if spec.tokens else ""
        lines += ["", note] if note else []
        note = replay_note(spec, target)
        lines += ["", note] if note else []
    return "\n".join(lines)


COPIED_ROW = "Guesses kept: copied · drafted"


def copied_counts(s: Stats) -> str:
    """The guesses copied from the context and those the draft model made, each as kept of
    proposed (``Stats.copied``, ``copied_kept``)."""
    drafted, kept = s.drafted - s.copied, s.accepted - s.copied_kept
    return f"{s.copied_kept} of {s.copied} · {kept} of {drafted}"


def judge_note(s: Stats) -> str:
    """Under the block judge: the drafts it kept against what judging token by token keeps of the
    same drafts with the same uniforms (``Stats.judge_gain``), over the chain passes; "" under
    the token judge. The comparison's words are chosen from the two counts."""
    if s.verify != "block":
        return ""
    if not s.token_rounds:
        return (
            "**Judged as a whole block:** every pass here was a tree, walked leaf to root "
            "(traversal verification), which has no token-by-token count to set beside it."
        )
    passes = f"{s.token_rounds} chain pass{'es' * (s.token_rounds != 1)}"
    counts = (
        f"over {passes} the block kept **{s.chain_kept}** drafts, where judging token by token "
        f"would have kept **{s.token_kept}** of the same drafts with the same uniforms"
    )
    if s.chain_kept > s.token_kept:
        gain = f" ({s.judge_gain:.2f}× as many)" if s.token_kept else ""
        words = f"{counts}{gain}: judging the block keeps later guesses that token by token "
        words += "would have thrown away after an earlier rejection."
    elif s.chain_kept == s.token_kept:
        words = f"{counts}: the same. Where q is one-hot (a greedy round, a copied guess) the two "
        words += "judges always agree, and one run can happen to tie."
    else:
        words = f"{counts} ({s.judge_gain:.2f}×): fewer this time. One run can go either way; "
        words += "on average the block keeps at least as many."
    return f"**Judged as a whole block:** {words} Both judges are exact: the answer follows p."


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
        return [*timing, "—", "—", "—", "0", "1", f"{n}", f"{n}"]
    s = run.stats
    return [
        *timing,
        JUDGES[s.verify],
        f"{s.kept_rate:.2f}",
        f"{(s.accepted + s.siblings_kept) / s.rounds:.2f}"
        if s.rounds
        else "0",  # a tree: its sibling too
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
