"""The race's runners: a speculative run and a target-only run on one prompt, timed apart.

``run_speculative`` and ``run_target`` yield the same growing run object after every target pass,
timed inside the engine only (rendering and sending are not counted). ``run_record.RunRecord``
turns a finished pair of runs into the session's record of them; ``comparison`` into words.
"""

import os
import statistics
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from specdemo import models
from specdemo.app.config import RunConfig, encode
from specdemo.app.spans import Span, guess_spans, target_span
from specdemo.cost.policy import AutoK, SiblingAcceptance
from specdemo.cost.profile import captured_draft_seconds
from specdemo.cost.theory import StepCosts
from specdemo.decode.engine import (
    autoregressive_generate,
    make_generator,
    profile_of,
    speculative_generate,
)
from specdemo.decode.rounds import Stats
from specdemo.draft.drafters import make_drafter
from specdemo.runtime.modes import target_step_kind
from specdemo.text import Detokenizer

# target model -> the process that warmed its pair up. ZeroGPU runs each call in a GPU worker
# process forked from the one that loaded the pair, where nothing has run on the GPU yet.
_warmed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def warm_once(pair) -> None:
    """``models.warm_up`` once per pair before a run starts its clock, so the first timed run
    does not pay one-time start-up work such as CUDA's kernel loading: once per process on
    CUDA, where each ZeroGPU call's fork starts its own CUDA context, and once on a CPU, whose
    forks inherit what the warm-up loaded."""
    process = os.getpid() if pair.target.device.type == "cuda" else None
    if _warmed.get(pair.target, "never") != process:
        models.warm_up(pair)
        _warmed[pair.target] = process


@dataclass
class SpecRun:
    """A speculative run so far; ``run_speculative`` yields this same object after each round."""

    stats: Stats = field(default_factory=Stats)
    spans: list[Span] = field(default_factory=list)  # rejected drafts included
    tokens: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)  # per round
    drafted: list[int] = field(default_factory=list)  # per round (k, or fewer)
    copied: list[bool] = field(default_factory=list)  # per round: guesses copied from the text
    asked: list[int] = field(default_factory=list)  # per round: the K chosen (or fixed)
    seconds: float = 0.0  # time inside the engine: rendering and sending are not counted
    profile: StepCosts | None = None  # this machine's step costs for the pair, as auto K uses
    device: str = ""  # where the pair ran: "cpu", "cuda:0"
    layers: tuple[int, int] | None = None  # decoder layers of the target and of the draft model
    draft_step: str = ""  # how the draft model's passes ran (steps.STEPS), if it ran
    target_step: str = ""  # how the target's passes ran, in both runs (target_step)
    captured_t_draft: float | None = None  # on CUDA, an eager draft's step replayed as a graph
    measured_at: float | None = None  # when replayed: when the run was measured
    widths: list[int] = field(default_factory=list)  # per round: 1 a chain, more a fishbone
    siblings: SiblingAcceptance = field(default_factory=SiblingAcceptance)  # by rank, kept or not
    # Automatic K's load: its target passes' time over the profile's price (``AutoK.load``).
    load: float | None = None
    threads: int | None = None  # torch threads the race ran on (``threads.fitted``), on a CPU

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0

    @property
    def mean_k(self) -> float:
        """The mean K asked per round (a fixed K is clipped only near max new tokens)."""
        return sum(self.asked) / len(self.asked) if self.asked else 0.0


@dataclass
class TargetRun:
    """A target-only run so far; one target pass per token."""

    spans: list[Span] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)  # per token; the first has the prefill
    seconds: float = 0.0
    measured_at: float | None = None  # when replayed: when the run was measured

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
    # Automatic K also chooses each round's tree width, up to the one asked (``AutoK``).
    auto = config.k == "auto"
    k = AutoK(run.profile, max_width=config.tree_width) if auto else config.k
    model = drafter.draft_model
    run.device, run.draft_step = str(device), model.step.kind if model else ""
    run.target_step = target_step_kind(pair.target)
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
        tree_width="auto" if auto else config.tree_width,
        verify=config.judge,
    )
    for r, seconds in timed(rounds):
        run.seconds += seconds
        run.tokens += r.tokens
        run.spans += guess_spans(r, detok, show_rejected=True)
        run.accepted.append(r.n_accepted)
        run.drafted.append(r.k)
        run.copied.append(r.source == "lookup" and r.k > 0)
        run.asked.append(r.k_asked)
        run.widths.append(r.width)
        run.siblings.add(r)
        run.load = k.load if auto else None
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
            run.spans.append(target_span(piece))
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
