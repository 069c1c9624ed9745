"""The race: a speculative run and a target-only run on one prompt, timed apart.

``run_speculative`` and ``run_target`` yield the same growing run object after every target pass,
timed inside the engine only (rendering and sending are not counted); ``record`` turns a finished
pair of runs into one results row, and ``comparison_markdown`` into the side-by-side table.
``replay`` answers a run already measured with its record, and sweeps a grid one cell per call.
"""

import os
import statistics
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from specdemo import models
from specdemo.app.config import RunConfig, encode
from specdemo.drafters import make_drafter
from specdemo.engine import (
    autoregressive_generate,
    make_generator,
    profile_of,
    speculative_generate,
)
from specdemo.policy import Acceptance, AutoK
from specdemo.profile import captured_draft_seconds
from specdemo.records import Stats
from specdemo.render import round_spans
from specdemo.text import Detokenizer
from specdemo.theory import StepCosts, expected_tokens_per_pass

SAME_DISTRIBUTION_NOTE = (
    "Both runs use the same seed. With temperature above 0 the two answers are different "
    "*samples*, so their words differ, yet every speculative token is drawn from exactly the "
    "target's distribution: both are samples of one distribution (the **Is it exact?** tab "
    "shows it). With temperature 0 (greedy) the two answers match token for token."
)

# target model -> the process that warmed its pair up. ZeroGPU runs each call in a GPU worker
# process forked from the one that loaded the pair, where nothing has run on the GPU yet.
_warmed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def warm_once(pair) -> None:
    """``models.warm_up`` once per pair and process, before a run starts its clock, so the first
    timed run in a process (the first call in each ZeroGPU worker) does not pay one-time start-up
    work such as CUDA's kernel loading."""
    if _warmed.get(pair.target) != os.getpid():
        models.warm_up(pair)
        _warmed[pair.target] = os.getpid()


@dataclass
class SpecRun:
    """A speculative run so far; ``run_speculative`` yields this same object after each round."""

    stats: Stats = field(default_factory=Stats)
    spans: list[tuple[str, str]] = field(default_factory=list)  # rejected drafts included
    tokens: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)  # per round
    drafted: list[int] = field(default_factory=list)  # per round (k, or fewer)
    asked: list[int] = field(default_factory=list)  # per round: the K chosen (or fixed)
    seconds: float = 0.0  # time inside the engine: rendering and sending are not counted
    profile: StepCosts | None = None  # this machine's step costs for the pair, as auto K uses
    device: str = ""  # where the pair ran: "cpu", "cuda:0"
    layers: tuple[int, int] | None = None  # decoder layers of the target and of the draft model
    draft_step: str = ""  # how the draft model's passes ran (draft_step.DRAFT_STEPS), if it ran
    captured_t_draft: float | None = None  # on CUDA, an eager draft's step replayed as a graph
    measured_at: float | None = None  # set when answered from the record: when it was measured

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0


@dataclass
class TargetRun:
    """A target-only run so far; one target pass per token."""

    spans: list[tuple[str, str]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)  # per token; the first has the prefill
    seconds: float = 0.0
    measured_at: float | None = None  # set when answered from the record: when it was measured

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0

    @property
    def t_step(self) -> float | None:
        """One plain target step: the median token time after the first (which holds the
        prompt's prefill); None before there are two tokens."""
        return statistics.median(self.step_seconds[1:]) if len(self.step_seconds) > 1 else None


def timed(iterator: Iterable) -> Iterator[tuple[object, float]]:
    """Each item with the seconds spent producing it, so the consumer's own time is excluded.

    The engine synchronises the device before it yields, so on CUDA this is the real cost.
    """
    iterator = iter(iterator)
    while True:
        start = time.perf_counter()
        try:
            item = next(iterator)
        except StopIteration:
            return
        yield item, time.perf_counter() - start


def run_speculative(pair, config: RunConfig, ids: list[int]) -> Iterator[SpecRun]:
    """Speculative generation, yielding the growing run after every target pass."""
    warm_once(pair)
    device = pair.target.device
    generator = make_generator(config.seed, device)
    drafter = make_drafter(
        config.drafter, pair.draft, config.sampling, generator, device, config.adaptive
    )
    run, detok = SpecRun(), Detokenizer(pair.tokenizer)
    # Measured once per pair (the app's warm-up does it), before the engine's clock starts.
    run.profile = profile_of(pair.target, drafter)
    k = AutoK(run.profile) if config.k == "auto" else config.k
    model = drafter.draft_model
    run.device, run.draft_step = str(device), model.step.kind if model else ""
    run.layers = (pair.target.config.num_hidden_layers, pair.draft.config.num_hidden_layers)
    if model is not None and model.step.kind == "eager":  # the lever the cost model shows
        run.captured_t_draft = captured_draft_seconds(pair.target, model.model, model.head_rows)
    rounds = speculative_generate(
        pair.target,
        drafter,
        ids,
        k=k,
        sampling=config.sampling,
        max_new_tokens=config.max_new_tokens,
        generator=generator,
        stats=run.stats,
    )
    for r, seconds in timed(rounds):
        run.seconds += seconds
        run.tokens += r.tokens
        run.spans += round_spans(r, detok, show_rejected=True)
        run.accepted.append(r.n_accepted)
        run.drafted.append(r.k)
        run.asked.append(r.k_asked)
        yield run


def run_target(pair, config: RunConfig, ids: list[int]) -> Iterator[TargetRun]:
    """The baseline with the same seed and sampling, yielding the growing run after each token."""
    warm_once(pair)
    run, detok = TargetRun(), Detokenizer(pair.tokenizer)
    steps = autoregressive_generate(
        pair.target,
        ids,
        sampling=config.sampling,
        max_new_tokens=config.max_new_tokens,
        generator=make_generator(config.seed, pair.target.device),
    )
    for step, seconds in timed(steps):
        run.seconds += seconds
        run.step_seconds.append(seconds)
        run.tokens.append(step.token)
        piece = detok.push(step.token)
        if piece:
            run.spans.append((piece, "target"))
        yield run


def rehearse(pair) -> None:
    """One short race of each kind, after ``warm_once``'s one-token kernel warm-up, so the
    first timed run in the app does not pay one-time start-up costs; with K = "auto" the race
    also measures the step-cost profile that automatic K uses from then on."""
    config = RunConfig("Hello", k="auto", temperature=1.0, max_new_tokens=8)
    ids = encode(pair, config)
    last(run_speculative(pair, config, ids))
    last(run_target(pair, config, ids))


def last(iterator: Iterable):
    """The final item (None when there is none)."""
    tail = deque(iterator, maxlen=1)
    return tail[0] if tail else None


def visible_spans(spans: list[tuple[str, str]], show_rejected: bool) -> list[tuple[str, str]]:
    return spans if show_rejected else [s for s in spans if s[1] != "rejected"]


def record(config: RunConfig, spec: SpecRun, target: TargetRun) -> dict:
    """One row of the session's results: plain numbers and lists (CSV and JSON export them).
    The speculative run's c = t_draft / t_step takes its t_step from the target-alone run
    (``TargetRun.t_step``); it is None when that is unknown. The cost model's numbers
    (``costs.run_costs``) are the profile's, timed together (``explaining``)."""
    s = replace(spec.stats, t_step=target.t_step)  # the run itself stays as measured
    greedy_match = spec.tokens == target.tokens if config.temperature == 0 else None
    costs = s.costs()
    # A verify at the asked k ran (never for "auto", whose k changes from round to round).
    measured = costs is not None and config.k in costs.t_verify
    return {
        "k": config.k,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "top_k": config.top_k,
        "drafter": config.drafter,
        "adaptive": config.adaptive,
        "seed": config.seed,
        "max_new_tokens": config.max_new_tokens,
        "alpha": s.alpha,
        "alpha_per_token": s.alpha_per_token,
        "tokens_per_pass": s.tokens_per_pass,
        "mean_k": mean_k(spec),
        "c": s.c,
        "t_step": s.t_step,
        "t_draft": s.t_draft,
        "t_verify": s.t_verify.get(config.k),
        "verify_cost": costs.verify_cost(config.k) if measured else None,
        # The bench's prediction (theory.StepCosts), from this run's own measured costs.
        "predicted_speedup": costs.speedup(s.alpha_per_token, config.k) if measured else None,
        "spec_tokens": len(spec.tokens),
        "spec_seconds": spec.seconds,
        "spec_tokens_per_s": spec.tokens_per_s,
        "spec_target_passes": s.target_passes,
        "target_tokens": len(target.tokens),
        "target_seconds": target.seconds,
        "target_tokens_per_s": target.tokens_per_s,
        "target_passes": len(target.tokens),
        "speedup": spec.tokens_per_s / target.tokens_per_s if target.tokens_per_s else 0.0,
        "greedy_match": greedy_match,
        "replayed": spec.measured_at is not None,  # answered from the record, measured earlier
        **explaining(spec, target),
    }


def explaining(spec: SpecRun, target: TargetRun) -> dict:
    """The record's numbers behind the charts that explain a speedup (``costs``): the i.i.d.
    formula's tokens per pass at the run's α per draft and each round's k; the cost model's
    seconds of a plain step, a draft step and the verify pass over k = 1, 2, ... drafts, all the
    profile's, which times them in turns so that every ratio between them holds under one load
    (the run's own step and draft step, ``t_step`` and ``t_draft``, are timed in two phases a
    busy machine can slow apart, and are compared with the profile's by ``costs.load_note``);
    where the time went; and per draft position, how many rounds judged it and kept it."""
    s, profile = spec.stats, spec.profile
    expected = [expected_tokens_per_pass(s.alpha_per_token, k) for k in spec.drafted]
    t_verify = [profile.t_verify[k] for k in sorted(profile.t_verify)] if profile else None
    drafts_free = s.draft_passes == 0 and any(spec.drafted)  # prompt lookup only
    acceptance = Acceptance()
    for k, n in zip(spec.drafted, spec.accepted, strict=True):
        acceptance.add(k, n)
    return {
        "expected_tokens_per_pass": statistics.fmean(expected) if expected else None,
        "cost_t_step": profile.t_step if profile else None,
        "cost_t_draft": 0.0 if drafts_free or not profile else profile.t_draft,
        "cost_t_verify": t_verify,
        "prefill_seconds": s.prefill_time,
        "draft_seconds": s.draft_time,
        "verify_seconds": s.verify_time,
        "position_judged": acceptance.judged,
        "position_kept": acceptance.kept,
        "device": spec.device,
        "target_layers": spec.layers[0] if spec.layers else None,
        "draft_layers": spec.layers[1] if spec.layers else None,
        "draft_step": spec.draft_step,
        "cost_t_draft_captured": spec.captured_t_draft,
    }


COMPARISON_ROWS = [
    "Tokens/s",
    "Wall time",
    "α: drafts kept / drafted",
    "Mean K per round",
    "Tokens per target pass",
    "Target passes (with prefill)",
    "New tokens",
]


def comparison_markdown(
    spec: SpecRun | None, target: TargetRun | None, finished: RunConfig | None = None
) -> str:
    """The side-by-side numbers, a run still to come showing dots; once both runs have
    `finished` (under that config), a note on whether their tokens agree, and on any run
    answered from the record (``replay_note``)."""
    speedup = "…"
    if spec and target and target.tokens_per_s:
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
    """Which runs were answered from the record, and when they were measured."""
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
        f"{s.alpha:.2f}",
        f"{mean_k(run):.1f}",
        f"{s.tokens_per_pass:.2f}",
        f"{s.target_passes}",
        f"{n}",
    ]


def mean_k(run: SpecRun) -> float:
    """The mean K asked per round (a fixed K is clipped only near max new tokens)."""
    return sum(run.asked) / len(run.asked) if run.asked else 0.0


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
