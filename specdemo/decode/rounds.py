"""What a generation reports: one ``Round`` per target pass, one ``Step`` per target-only token,
running ``Stats``, and the ``Result`` of a whole call.

Plain data, filled in by the engine; the CLI, the app and the bench read them. Times are seconds
measured with ``lm.Stopwatch``; ``c`` always means t_draft / t_step (a draft step over a plain
one-token target step), the c of Leviathan et al. (2023).
"""

import statistics
from dataclasses import dataclass, field

from specdemo.cost.theory import StepCosts


@dataclass(frozen=True)
class Round:
    """One target pass: what was drafted, what survived, what the target added."""

    draft: list[int]  # the k proposed tokens
    n_accepted: int
    next_token: int  # resampled replacement of draft[n_accepted], or the bonus token
    p_x: list[float]
    q_x: list[float]
    accept_prob: list[float]
    u: list[float]
    residual_top: list[tuple[int, float]]  # the distribution next_token came from, top few
    tokens: list[int]  # what this round emits: accepted drafts + next_token, cut at a stop
    draft_time: float
    verify_time: float
    draft_steps: int  # draft model forward passes (0 for prompt lookup)
    finished: bool
    k_asked: int = 0  # the k the engine asked for (a drafter may propose fewer)
    source: str = "model"  # who proposed every draft token of the round: "model" or "lookup"
    # A tree round (engine tree_width > 1): the sibling kept after draft[n_accepted] was
    # rejected, if one was; it is tokens[n_accepted], and the bonus follows it.
    sibling: int | None = None
    # Per chain position, the siblings tried after its token was rejected (``tree.Trial``).
    siblings_tried: tuple[tuple, ...] = ()
    width: int = 1  # guesses per position the round's target pass held (1: a chain)
    # A tree round's siblings at each chain position, as drawn (tried or not), in order.
    siblings: tuple[tuple[int, ...], ...] = ()
    judge: str = "token"  # who judged the drafts: "token" or "block" (``verify.JUDGES``)
    # Judged as a block: each position's running weight w_i and stopping chance h_i (u[i] is
    # compared with h_i; the block keeps up to the last position that passed).
    weights: list[float] = field(default_factory=list)
    stop_chance: list[float] = field(default_factory=list)
    # What judging token by token would have kept of the same drafts with the same uniforms
    # (a chain round; None for a tree judged as a block).
    token_kept: int | None = None
    # Judged as a block: the drafts each judge keeps of these drafts on average over the
    # uniforms, (token by token, the whole block) (``verify.expected_kept``).
    expected_kept: tuple[float, float] | None = None
    # A copied round from the suffix index (``suffix.Match``): the context position its copy
    # started at, how many tokens before it agreed with the text's end, and whether it was
    # re-anchored near where the last copy left the source; None otherwise.
    origin: int | None = None
    match: int = 0
    anchored: bool = False
    # The target's pass alone, within verify_time (which also holds the judge and any re-prefill
    # of a static cache that started over): 0 where the pass captured a CUDA graph (a capture,
    # not a pass); None where it was not timed apart (a round built by hand).
    pass_time: float | None = None

    @classmethod
    def judged(
        cls,
        draft: list[int],
        proposal,
        verdict,
        tokens: list[int],
        finished: bool,
        k_asked: int,
        draft_time: float,
        verify_time: float,
        tree=None,
        pass_time: float | None = None,
    ) -> "Round":
        """The round a drafter's ``Proposal`` (whose tokens are `draft`) and the rule's
        ``verify.Verdict`` on it make, emitting `tokens`; `tree`, the ``tree.Fishbone`` the
        target judged, where the round was a tree."""
        from specdemo.judge.sampling import top_tokens

        return cls(
            draft=draft,
            n_accepted=verdict.n_accepted,
            next_token=verdict.next_token,
            p_x=verdict.p_x,
            q_x=verdict.q_x,
            accept_prob=verdict.accept_prob,
            u=verdict.u,
            residual_top=(
                [(verdict.next_token, 1.0)]
                if verdict.next_dist is None  # greedy: all of it on the target's top choice
                else top_tokens(verdict.next_dist)
            ),
            tokens=tokens,
            draft_time=draft_time,
            verify_time=verify_time,
            pass_time=pass_time,
            draft_steps=proposal.draft_steps,
            finished=finished,
            k_asked=k_asked,
            source=proposal.source,
            sibling=getattr(verdict, "sibling", None),
            siblings_tried=tuple(tuple(d[1:]) for d in getattr(verdict, "trials", ())),
            width=tree.width if tree is not None else 1,
            siblings=tuple(map(tuple, tree.siblings)) if tree is not None else (),
            judge=getattr(verdict, "judge", "token"),
            expected_kept=getattr(verdict, "expected_kept", None),
            weights=list(getattr(verdict, "weights", [])),
            stop_chance=list(getattr(verdict, "stop_chance", [])),
            token_kept=None
            if tree is not None
            else (verdict.n_accepted if verdict.token_kept is None else verdict.token_kept),
            origin=proposal.match.origin if proposal.match is not None else None,
            match=proposal.match.length if proposal.match is not None else 0,
            anchored=proposal.match.anchored if proposal.match is not None else False,
        )

    @property
    def k(self) -> int:
        return len(self.draft)

    @property
    def rows(self) -> int:
        """Rows of the round's target pass: the last emitted token, the k drafts, and a tree's
        siblings (``tree.Fishbone``: 1 + k * width when every depth has its siblings)."""
        return 1 + self.k + sum(map(len, self.siblings))

    @property
    def rejected(self) -> int | None:
        """The first rejected draft token, if any."""
        return self.draft[self.n_accepted] if self.n_accepted < self.k else None

    @property
    def kept(self) -> int:
        """Drafted tokens kept: the chain's, and a sibling's."""
        return self.n_accepted + (self.sibling is not None)

    @property
    def bonus(self) -> bool:
        """Whether next_token came from a kept token's own row of p (not from a residual)."""
        return self.n_accepted == self.k or self.sibling is not None


@dataclass(frozen=True)
class Step:
    """One target-only token and the time it took."""

    token: int
    time: float
    finished: bool


@dataclass
class Stats:
    """Counts and timings of one speculative generation."""

    k: int = 0
    verify: str = "token"  # the judge of every round: "token" or "block"
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    # Rounds whose chain met a rejection: α's denominator. A tree round that then kept a sibling
    # counts here too, though it earned a bonus from the sibling's row (`siblings_kept`).
    rejected: int = 0
    siblings_kept: int = 0  # tree rounds that kept a sibling after the chain's token was rejected
    # Chain drafts that judging token by token would have kept with the same drafts and
    # uniforms, summed over the rounds that can tell (every chain round); `token_rounds` counts
    # them, so accepted over token_kept on the same rounds is the block judge's own gain.
    token_kept: int = 0
    token_rounds: int = 0
    chain_kept: int = 0  # drafts kept in those same rounds
    # Rounds judged as a block, and the drafts each judge keeps of their drafts on average
    # (``Round.expected_kept``): the judges compared on the same drafts, without sampling noise.
    expected_rounds: int = 0
    expected_token: float = 0.0
    expected_block: float = 0.0
    tree_rounds: int = 0  # rounds verified as a tree (width > 1)
    copied: int = 0  # drafts copied from the context (prompt lookup or the suffix index)
    copied_kept: int = 0  # of them kept
    # Rows of every verify pass, and those that were neither kept nor the pass's first row (the
    # last emitted token): the rows a round paid for and threw away.
    rows_verified: int = 0
    rows_wasted: int = 0
    new_tokens: int = 0
    target_passes: int = 0  # including the prefill
    draft_passes: int = 0
    # accepted_hist[n] = rounds that kept n drafted tokens (a tree's kept sibling counted)
    accepted_hist: list[int] = field(default_factory=list)
    prefill_time: float = 0.0
    draft_time: float = 0.0
    verify_time: float = 0.0
    wall_time: float = 0.0
    # rows of the pass (``Round.rows``: a tree's pass has more than k + 1) -> each verify pass
    verify_times: dict[int, list[float]] = field(default_factory=dict)
    # rows of the pass -> the target's pass alone (``Round.pass_time``), where it was timed
    pass_times: dict[int, list[float]] = field(default_factory=dict)
    # One plain target step, measured by whoever timed the target alone (the engine never runs
    # one, except as a round with k = 0).
    t_step: float | None = None

    @property
    def kept_rate(self) -> float:
        """Drafts kept / drafted: lower than α when k > 1, since drafts after a rejection are
        never judged."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def alpha(self) -> float:
        """α: the per-draft acceptance probability, accepted / (accepted + rejected), the α of
        the theory formulas (Leviathan et al., 2023)."""
        judged = self.accepted + self.rejected
        return self.accepted / judged if judged else 0.0

    @property
    def judge_gain(self) -> float | None:
        """Drafts the judge kept over what judging token by token keeps of the same drafts with
        the same uniforms, over the chain rounds (1 for the token judge); None before any."""
        return pooled_judge_gain([self])

    @property
    def expected_gain(self) -> float | None:
        """Tokens a pass the block judge gives over what token by token gives on the same
        drafts, both on average over the uniforms: (rounds + block's expected kept) over
        (rounds + token by token's), over the rounds judged as a block; None before any."""
        return pooled_expected_gain([self])

    @property
    def tokens_per_pass(self) -> float:
        """Mean tokens emitted per target verify pass."""
        return self.new_tokens / self.rounds if self.rounds else 0.0

    @property
    def wasted_share(self) -> float:
        """Verified rows not kept over all rows verified (0 before any pass)."""
        return self.rows_wasted / self.rows_verified if self.rows_verified else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_time if self.wall_time else 0.0

    @property
    def bookkeeping_time(self) -> float:
        """Seconds of the wall time outside the prefill, the drafter's proposals and the verify
        passes (each pass with its acceptance rule): choosing k, cutting at stops, recording
        rounds, and whatever the caller did between rounds."""
        return max(0.0, self.wall_time - self.prefill_time - self.draft_time - self.verify_time)

    @property
    def bookkeeping_share(self) -> float:
        """``bookkeeping_time`` as a share of the wall time."""
        return self.bookkeeping_time / self.wall_time if self.wall_time else 0.0

    @property
    def t_draft(self) -> float:
        """Mean seconds of one draft step (0 when nothing ran a draft model)."""
        return self.draft_time / self.draft_passes if self.draft_passes else 0.0

    @property
    def t_verify_rows(self) -> dict[int, float]:
        """Median seconds of a verify pass over n rows, for each n seen: k + 1 for a chain of k
        drafts, 1 + k * w for a fishbone of width w (1 for a k = 0 round, a plain step)."""
        times = sorted(self.verify_times.items())
        return {rows: statistics.median(seconds) for rows, seconds in times}

    def costs(self) -> StepCosts | None:
        """The measured step costs, once a plain target step is known (`t_step`, or a k = 0
        round); None before. A pass over n rows is ``StepCosts``' verify at n - 1."""
        passes = self.t_verify_rows
        t_step = self.t_step or passes.get(1)
        t_verify = {rows - 1: t for rows, t in passes.items() if rows > 1}
        return StepCosts(t_step, self.t_draft, t_verify) if t_step else None

    @property
    def c(self) -> float | None:
        """Cost ratio c = t_draft / t_step; None while t_step is unknown."""
        costs = self.costs()
        return costs.c if costs else None

    def add(self, r: Round) -> None:
        self.rounds += 1
        self.drafted += r.k
        self.accepted += r.n_accepted
        self.rejected += r.n_accepted < r.k
        self.siblings_kept += r.sibling is not None
        if r.expected_kept is not None:
            self.expected_rounds += 1
            self.expected_token += r.expected_kept[0]
            self.expected_block += r.expected_kept[1]
        if r.token_kept is not None:
            self.token_kept += r.token_kept
            self.token_rounds += 1
            self.chain_kept += r.n_accepted
        self.tree_rounds += r.width > 1
        if r.source == "lookup":
            self.copied += r.k
            self.copied_kept += r.n_accepted
        self.rows_verified += r.rows
        self.rows_wasted += r.rows - 1 - r.kept
        self.new_tokens += len(r.tokens)
        self.target_passes += 1
        self.draft_passes += r.draft_steps
        self.draft_time += r.draft_time
        self.verify_time += r.verify_time
        self.verify_times.setdefault(r.rows, []).append(r.verify_time)
        if r.pass_time:  # 0 or None: a capture, or not timed apart
            self.pass_times.setdefault(r.rows, []).append(r.pass_time)
        self.accepted_hist += [0] * (r.kept + 1 - len(self.accepted_hist))
        self.accepted_hist[r.kept] += 1

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("verify_times", "pass_times")}
        d.update(
            kept_rate=self.kept_rate,
            wasted_share=self.wasted_share,
            alpha=self.alpha,
            tokens_per_pass=self.tokens_per_pass,
            tokens_per_s=self.tokens_per_s,
            bookkeeping_share=self.bookkeeping_share,
            t_draft=self.t_draft,
            t_verify_rows=self.t_verify_rows,
            c=self.c,
            judge_gain=self.judge_gain,
            expected_gain=self.expected_gain,
        )
        return d


def pooled_judge_gain(stats: list[Stats]) -> float | None:
    """``Stats.judge_gain`` over several runs' chain rounds pooled; None without any."""
    token = sum(s.token_kept for s in stats)
    return sum(s.chain_kept for s in stats) / token if token else None


def pooled_expected_gain(stats: list[Stats]) -> float | None:
    """``Stats.expected_gain`` over several runs' block rounds pooled; None without any."""
    rounds = sum(s.expected_rounds for s in stats)
    if not rounds:
        return None
    block, token = (sum(getattr(s, f"expected_{j}") for s in stats) for j in ("block", "token"))
    return (rounds + block) / (rounds + token)


@dataclass(frozen=True)
class Result:
    tokens: list[int]
    stats: Stats
    rounds: list[Round]
