"""One finished race as a typed record: what was asked, what both runs measured, and the step
costs the cost model charges. ``RunRecord.of(config, spec, target)`` builds it; the session keeps
a list of them, the charts, the cost note and the results table read their fields, and ``row``
is the record as one CSV and JSON row.

Two sets of step costs sit side by side. The run's own (``t_step``, ``t_draft``, ``t_verify``,
``c``) were timed in two phases, the speculative run and the target alone, which a busy machine
can slow apart. The profile's (``cost_*``) were timed in turns under one load, so every ratio
between them holds; the curves and the cost note use those (``costs``).
"""

import statistics
from dataclasses import asdict, dataclass, replace

from specdemo.app.config import RunConfig
from specdemo.app.generate.loads import spec_load, target_load
from specdemo.app.generate.race import SpecRun, TargetRun
from specdemo.cost.policy import Acceptance, SiblingAcceptance
from specdemo.cost.theory import StepCosts, expected_tree_tokens_per_pass, sibling_chance

TIME_PARTS = ("draft steps", "verify passes", "prefill", "other")


@dataclass(frozen=True)
class RunRecord:
    """One race: a speculative run and the target alone, on one prompt and seed."""

    # What was asked (``RunConfig``).
    k: int | str = 1  # a fixed K, or "auto"
    temperature: float = 1.0
    top_p: float | None = None
    top_k: int | None = None
    drafter: str = "model"
    adaptive: bool = False
    tree_width: int = 1  # 1: a chain
    judge: str = "token"  # who judged the guesses: "token" (token by token) or "block"
    seed: int = 0
    max_new_tokens: int = 0
    # Acceptance, measured.
    kept_rate: float = 0.0  # drafts_kept / drafted
    drafts_kept: int = 0
    drafted: int = 0
    alpha: float = 0.0  # drafts kept / judged: the α of the formulas
    tokens_per_pass: float = 0.0
    # The i.i.d. formula at alpha, a tree round's at alpha and the siblings' measured chance
    # (``theory.expected_tree_tokens_per_pass``); None where a sibling rank a tree needs was
    # never tried, so its chance was not measured.
    expected_tokens_per_pass: float | None = None
    mean_k: float = 0.0  # the mean K asked per round
    position_judged: tuple[int, ...] = ()  # per draft position: rounds that judged it
    position_kept: tuple[int, ...] = ()  # ... and that kept it
    rounds: int = 0  # target passes after the prefill
    tree_rounds: int = 0  # of them, passes over a fishbone (width > 1)
    sibling_judged: tuple[int, ...] = ()  # per sibling rank (2nd guess, 3rd): nodes that tried it
    sibling_kept: tuple[int, ...] = ()  # ... and that kept it
    # Drafts the judge kept over what judging token by token keeps of the same drafts with the
    # same uniforms, over the chain rounds (``Stats.judge_gain``; 1 for the token judge).
    judge_gain: float | None = None
    # Guesses copied from the context (prompt lookup or the suffix index): the rounds whose guesses
    # were copied, the guesses copied and kept, and the round that copied most, with its kept.
    copied_rounds: int = 0
    copied: int = 0
    copied_kept: int = 0
    longest_copy: int = 0
    longest_copy_kept: int = 0
    # The two runs, measured (seconds inside the engine; rendering is not counted).
    spec_tokens: int = 0
    spec_seconds: float = 0.0
    spec_target_passes: int = 0  # with the prefill
    target_tokens: int = 0  # one target pass each
    target_seconds: float = 0.0
    prefill_seconds: float | None = None
    draft_seconds: float | None = None
    verify_seconds: float | None = None
    greedy_match: bool | None = None  # at temperature 0: the two runs' tokens agree
    replayed: bool = False  # answered with a run measured earlier
    # The run's own step costs: t_step from the target alone, None when it was too short.
    t_step: float | None = None
    t_draft: float = 0.0
    # The verify pass at the asked K and width (1 + K * width rows), when one ran.
    t_verify: float | None = None
    c: float | None = None  # t_draft / t_step
    verify_cost: float | None = None  # t_verify / t_step
    # theory.StepCosts.speedup on these costs, a tree's at its width and measured sibling chance.
    predicted_speedup: float | None = None
    # The profile's step costs, timed in turns (``profile.costs_for``).
    cost_t_step: float | None = None
    cost_t_draft: float = 0.0  # 0 when copies drafted every token (no draft model ran)
    cost_t_verify: tuple[float, ...] | None = None  # at each K of cost_verify_ks
    # The K of each cost_t_verify entry: the profile times K = 1 to 8 and a few wider passes a
    # long copy may fill (``profile.COPY_KS``); empty for a record whose entries are K = 1, 2, ...
    cost_verify_ks: tuple[int, ...] = ()
    cost_t_draft_captured: float | None = None  # on CUDA: the draft step replayed as a graph
    # Where it ran.
    device: str = ""
    target_layers: int | None = None
    draft_layers: int | None = None
    draft_step: str = ""  # steps.STEPS, "" when no draft model ran
    target_step: str = ""  # how the target's passes ran, both runs alike: "eager", "graph", ...
    threads: int | None = None  # torch threads both runs used, on a CPU
    policy_load: float | None = None  # automatic K's measured load (``AutoK.load``)
    # Each half's target passes as timed over their profiled price (``loads``).
    spec_load: float | None = None
    target_load: float | None = None

    @classmethod
    def of(cls, config: RunConfig, spec: SpecRun, target: TargetRun) -> "RunRecord":
        """The record of a finished race. Its c = t_draft / t_step takes t_step from the
        target-alone run (``TargetRun.t_step``)."""
        s = replace(spec.stats, t_step=target.t_step)  # the run itself stays as measured
        costs = s.costs()
        # The pass a round at the asked k and width holds (its rows - 1 is StepCosts' key), and
        # whether one ran (never for "auto", whose k changes from round to round).
        width = config.tree_width if s.tree_rounds else 1
        key = config.k * width if config.k != "auto" else None
        measured = costs is not None and key in costs.t_verify
        sibling = measured_sibling_chance(spec.siblings, width, s.alpha)
        profile = spec.profile
        expected = expected_per_pass(s.alpha, spec.drafted, spec.widths, spec.siblings)
        acceptance = Acceptance()
        for k, n in zip(spec.drafted, spec.accepted, strict=True):
            acceptance.add(k, n)
        drafts_free = s.draft_passes == 0 and any(spec.drafted)  # copies only
        copied = spec.copied or [False] * len(spec.drafted)  # a run recorded without them
        rounds = zip(spec.drafted, spec.accepted, copied, strict=True)
        copies = [(k, n) for k, n, c in rounds if c]
        longest = max(copies, key=lambda copy: copy[0], default=(0, 0))
        layers = spec.layers or (None, None)
        return cls(
            k=config.k,
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=config.top_k,
            drafter=config.drafter,
            adaptive=config.adaptive,
            tree_width=config.tree_width,
            judge=config.judge,
            seed=config.seed,
            max_new_tokens=config.max_new_tokens,
            kept_rate=s.kept_rate,
            drafts_kept=s.accepted,
            drafted=s.drafted,
            alpha=s.alpha,
            tokens_per_pass=s.tokens_per_pass,
            expected_tokens_per_pass=expected,
            mean_k=spec.mean_k,
            position_judged=tuple(acceptance.judged),
            position_kept=tuple(acceptance.kept),
            rounds=len(spec.widths),
            tree_rounds=sum(w > 1 for w in spec.widths),
            sibling_judged=tuple(spec.siblings.judged),
            sibling_kept=tuple(spec.siblings.kept),
            judge_gain=s.judge_gain,
            copied_rounds=len(copies),
            copied=s.copied,
            copied_kept=s.copied_kept,
            longest_copy=longest[0],
            longest_copy_kept=longest[1],
            spec_tokens=len(spec.tokens),
            spec_seconds=spec.seconds,
            spec_target_passes=s.target_passes,
            target_tokens=len(target.tokens),
            target_seconds=target.seconds,
            prefill_seconds=s.prefill_time,
            draft_seconds=s.draft_time,
            verify_seconds=s.verify_time,
            greedy_match=spec.tokens == target.tokens if config.temperature == 0 else None,
            replayed=spec.measured_at is not None,
            t_step=s.t_step,
            t_draft=s.t_draft,
            t_verify=s.t_verify_rows.get(key + 1) if key is not None else None,
            c=s.c,
            verify_cost=costs.verify_cost(key) if measured else None,
            predicted_speedup=costs.speedup(s.alpha, config.k, width, sibling)
            if measured and sibling is not None
            else None,
            cost_t_step=profile.t_step if profile else None,
            cost_t_draft=0.0 if drafts_free or not profile else profile.t_draft,
            cost_t_verify=tuple(profile.t_verify[k] for k in sorted(profile.t_verify))
            if profile
            else None,
            cost_verify_ks=tuple(sorted(profile.t_verify)) if profile else (),
            cost_t_draft_captured=spec.captured_t_draft,
            device=spec.device,
            target_layers=layers[0],
            draft_layers=layers[1],
            draft_step=spec.draft_step,
            target_step=spec.target_step,
            threads=spec.threads,
            policy_load=spec.load,
            spec_load=spec_load(spec),
            target_load=target_load(target, profile),
        )

    @property
    def spec_tokens_per_s(self) -> float:
        return self.spec_tokens / self.spec_seconds if self.spec_seconds else 0.0

    @property
    def target_tokens_per_s(self) -> float:
        return self.target_tokens / self.target_seconds if self.target_seconds else 0.0

    @property
    def speedup(self) -> float:
        """Measured: speculative tokens per second over the target alone's."""
        target = self.target_tokens_per_s
        return self.spec_tokens_per_s / target if target else 0.0

    @property
    def efficiency(self) -> float | None:
        """Measured speedup over the one predicted from the run's own costs (None without)."""
        return self.speedup / self.predicted_speedup if self.predicted_speedup else None

    @property
    def group(self) -> tuple:
        """The runs one colour and one pair of curves stand for: drafter, adaptive, temperature,
        judge, tree width."""
        return self.drafter, self.adaptive, self.temperature, self.judge, self.tree_width

    @property
    def costs(self) -> StepCosts | None:
        """The step costs as the cost model charges them: the profile's plain step, draft step,
        and verify pass at each K it timed; None for a run recorded without a profile."""
        if not self.cost_t_verify or not self.cost_t_step:
            return None
        ks = self.cost_verify_ks or range(1, len(self.cost_t_verify) + 1)
        t_verify = dict(zip(ks, self.cost_t_verify, strict=True))
        return StepCosts(self.cost_t_step, self.cost_t_draft, t_verify)

    @property
    def time_split(self) -> dict[str, float] | None:
        """Seconds of the speculative run by TIME_PARTS; "other" is the rest of its time inside
        the engine (choosing K, sampling, bookkeeping). None for a run without them."""
        if self.verify_seconds is None:
            return None
        parts = {
            "draft steps": self.draft_seconds,
            "verify passes": self.verify_seconds,
            "prefill": self.prefill_seconds,
        }
        return {**parts, "other": max(self.spec_seconds - sum(parts.values()), 0.0)}

    def row(self) -> dict:
        """The record as one CSV and JSON row: every field, then the derived figures."""
        derived = ("spec_tokens_per_s", "target_tokens_per_s", "speedup", "efficiency")
        return {**asdict(self), **{name: getattr(self, name) for name in derived}}


def measured_sibling_chance(siblings: SiblingAcceptance, width: int, alpha: float) -> float | None:
    """The chance one of a node's `width` - 1 siblings is kept once its chain guess was rejected
    (``theory.sibling_chance``), from the run's own counts by rank: 0 for a chain, or where no
    guess was ever rejected (alpha = 1, the siblings then weigh nothing); None where a rank the
    width needs was never tried."""
    ranks = list(zip(siblings.judged, siblings.kept, strict=True))[: width - 1]
    if width == 1 or alpha >= 1:
        return 0.0
    if len(ranks) < width - 1 or not all(judged for judged, _ in ranks):
        return None
    return sibling_chance([kept / judged for judged, kept in ranks])


def expected_per_pass(alpha: float, drafted, widths, siblings: SiblingAcceptance) -> float | None:
    """The mean over the rounds of E[tokens per pass] at each round's k and width under i.i.d.
    acceptance (``theory.expected_tree_tokens_per_pass``; a chain round's is the chain formula);
    None without rounds, or where a tree round's sibling chance was not measured."""
    chances = {w: measured_sibling_chance(siblings, w, alpha) for w in set(widths)}
    if not drafted or None in chances.values():
        return None
    rounds = zip(drafted, widths, strict=True)
    return statistics.fmean(expected_tree_tokens_per_pass(alpha, k, chances[w]) for k, w in rounds)
