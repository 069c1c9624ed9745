"""Automatic K: before each round, the K that maximises expected tokens per second.

Expected tokens of a round with k drafts are 1 + sum over j <= k of a_1 * ... * a_j, where a_i is
the chance that draft position i is kept given that the ones before it were: acceptance is not
i.i.d. (a draft that got the first token right tends to get the next one too), so each position
keeps its own running estimate for this request, shrunk towards the pooled rate while it has few
observations (a position never reached takes the pooled rate). A copy from the suffix index
is priced otherwise: by the length of the match it rests on (``evidence``), each length with one
pooled rate for every position, so that its copies may run up to COPY_K_MAX and a long match
is trusted further than a short one. The counts are of the drafts
each round kept, whichever judge kept them: judged as a block (``verify``), position i can be
kept after a test token by token would have failed, and the chance that it is kept still
depends on the prefix only, not on how many drafts follow it, so rounds of every k inform every
position. A round costs
k * t_draft + t_verify(k), with t_verify(0) = t_step: K = 0, a plain target step, wins whenever
drafting is predicted not to pay. K depends only on rounds already finished, so the output
distribution stays exactly the target's.

With trees allowed (``max_width`` > 1: the engine's tree_width="auto"), the policy also prices a
fishbone of each width w (``tree``): K spine nodes and w - 1 siblings at each depth, one target
pass of 1 + K*w rows, priced at the profile's measured pass of that many rows. A sibling is
worth its chance of being kept once the guesses before it at its node were rejected, measured by
rank in this request (shrunk towards SIBLING_PRIOR while few were tried); expected tokens are
then 1 + the sum, over depths reached, of a_d + (1 - a_d) * s_w, where s_w is the chance some
sibling of w - 1 is kept (``expected_tree_tokens``). Width 1, the chain, wins whenever the extra
rows cost more than the siblings bring.

Every option is priced under the conditions this request runs in. The profile was timed once,
perhaps on a quieter (or busier) machine; the target's passes of this request are timed too, and
their ratio to the profile's price for the same rows, ``load``, scales the whole profile: a load
that slows everything alike (a browser beside the app, a room sharing one CPU) changes no choice.
A draft-model round also costs what the profile's one-token step does not show, and what a load
may add to the draft alone: the draft first catches up on the tokens the last round added (a
forward of two or more tokens) right after the target's pass has taken the caches, and a small
model's many short kernels may suffer more from a busy machine than the target's. The policy
measures that extra, beyond the draft's steps at the load-scaled price, on this request's rounds
that follow a drafting round, and adds it to each drafting round it prices, so that a draft
dearer in use than in its profile makes plain steps win, as they should. The first drafting
round after plain steps (a probe, or drafting resumed) catches up on every token added since the
draft last ran: that round is priced with the draft's pass over those tokens on top (at the
profile's cost of so wide a pass, relative to its one-token step). Live measures weigh each
earlier round by LIVE_DECAY, so a load that starts or stops part-way through a request reprices
the rounds after it within a few rounds.
"""

from dataclasses import dataclass, field
from typing import Protocol

from specdemo.cost.theory import StepCosts, sibling_chance


class Round(Protocol):
    """What automatic K reads of a finished round: ``decode.rounds.Round`` has it all. The loop
    hands its rounds down to this concern, which never imports the loop back."""

    k: int  # guesses drafted
    n_accepted: int  # of them kept
    tokens: list[int]  # the tokens the round emitted
    rows: int  # the target pass's rows
    source: str  # "model" or "lookup"
    origin: int | None  # a copy's source position (None: not from the suffix index)
    match: int  # the match a copy rests on, in tokens
    anchored: bool  # a copy re-anchored after an edit
    siblings_tried: tuple  # per node, its siblings' trials after a rejection
    verify_time: float  # seconds of the verify pass with the judge
    pass_time: float | None  # seconds of the target's pass alone (0: captured, None: by hand)
    draft_steps: int
    draft_time: float


# Before any round: a prior acceptance rate per source and how many observations it is worth,
# tuned in a simulation of whole requests. A copy from the suffix index (``suffix.Match``) is
# priced by its evidence instead: the length of the match it rests on, in powers of two
# ("copy-match8": 8-15 tokens agreed), or, re-anchored after an edit, the tokens that agreed near
# where the last copy left the source ("copy-anchor0": none, the edit's length guessed). Each
# evidence has its own counts, so a 20-token match is trusted further than a 2-token one, and
# its prior rises with the evidence: a long match in a context is rarely a coincidence.
PRIOR = {
    "model": 0.7,
    "lookup": 0.6,
    "copy-match1": 0.3,
    "copy-match2": 0.45,
    "copy-match4": 0.6,
    "copy-match8": 0.8,
    "copy-match16": 0.9,
    "copy-anchor0": 0.3,
    "copy-anchor1": 0.5,
    "copy-anchor2": 0.7,
}
# The most drafts priced: a draft model's (the profile's narrow widths, ``profile.PROFILE_KS``),
# and a copy from the suffix index's, which costs no draft step and may run as far as its match
# deserves (the profile times passes up to 33 rows, ``profile.COPY_KS``).
DRAFT_K_MAX = 8
COPY_K_MAX = 32
PRIOR_WEIGHT = 2.0
POSITION_WEIGHT = 4.0  # observations after which a position's own rate outweighs the pooled one
# After this many plain steps in a row, one round drafts again to re-measure acceptance. A probe
# at k = 1 costs t_draft + t_verify(1) - t_step and still yields 1 + a_1 tokens, so when drafting
# does not pay it loses a few percent of one round. Each probe that changes nothing doubles the
# wait for the next, up to PROBE_MAX: where drafting never pays (a draft step costing nearly a
# target step, as on a launch-bound GPU) probes would otherwise cost 1-2% of the whole request.
PROBE_EVERY = 4
PROBE_MAX = 32
# A plain step is chosen only once this many rounds have judged the first draft position: the
# first tokens of an answer are often the hardest to guess, and a single early rejection should
# not switch drafting off.
MIN_EVIDENCE = 8
# Rounds of no extra cost the measured extra is shrunk towards, while few rounds are measured.
EXTRA_PRIOR = 2.0
# The weight of each earlier round in the live measures (load, extra), per round since: about the
# last ten rounds count, so a load that starts or stops part-way through a request is followed.
LIVE_DECAY = 0.9
# A sibling's chance of being kept once every guess before it at its node was rejected, before
# this request has tried any: the tiny pair's width-3 fishbone kept a sibling in (0.82 - 0.68) /
# (1 - 0.68) = 0.44 of the nodes whose first guess was rejected (the exactness tab); a modest
# prior, so that a tree is tried where its rows are cheap and measured from then on.
SIBLING_PRIOR = 0.3


@dataclass
class Acceptance:
    """Per-position counts for one source: judged[i] rounds reached draft position i + 1,
    kept[i] of them kept it."""

    judged: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)

    def add(self, k: int, n_accepted: int) -> None:
        reached = min(k, n_accepted + 1)  # positions after the first rejection are never judged
        grow = reached - len(self.judged)
        self.judged += [0] * max(0, grow)
        self.kept += [0] * max(0, grow)
        for i in range(reached):
            self.judged[i] += 1
            self.kept[i] += i < n_accepted

    def rates(self, k_max: int, prior: float, by_position: bool = True) -> list[float]:
        """Estimated a_1..a_k_max; without `by_position`, the pooled rate at every position (a
        copy's: whether its next token holds depends on where the text departs from the source,
        not on how far the copy has run, and its match's length is already its evidence)."""
        pooled = (sum(self.kept) + PRIOR_WEIGHT * prior) / (sum(self.judged) + PRIOR_WEIGHT)
        if not by_position:
            return [pooled] * k_max
        rates = []
        for i in range(k_max):
            judged = self.judged[i] if i < len(self.judged) else 0
            kept = self.kept[i] if i < len(self.kept) else 0
            rates.append((kept + POSITION_WEIGHT * pooled) / (judged + POSITION_WEIGHT))
        return rates


@dataclass
class SiblingAcceptance:
    """Per sibling rank, for tree rounds: judged[i] nodes tried their (i + 2)-th guess after the
    guesses before it were rejected, kept[i] of them kept it."""

    judged: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)

    def add(self, r: Round) -> None:
        for tried in r.siblings_tried:  # a node's siblings after its first guess was rejected
            for rank, trial in enumerate(tried):
                self.count(rank, 1, trial.kept)

    def count(self, rank: int, judged: int, kept: int) -> None:
        """`judged` more tries of sibling rank `rank`, `kept` of them kept."""
        if rank == len(self.judged):
            self.judged.append(0)
            self.kept.append(0)
        self.judged[rank] += judged
        self.kept[rank] += kept

    @classmethod
    def pooled(cls, counts) -> "SiblingAcceptance":
        """Several runs' counts by rank, `(judged, kept)` pairs of tuples, summed."""
        pooled = cls()
        for judged, kept in counts:
            for rank, (tried, held) in enumerate(zip(judged, kept, strict=True)):
                pooled.count(rank, tried, held)
        return pooled

    def rates(self, ranks: int, prior: float) -> list[float]:
        """Estimated chances for the first `ranks` sibling ranks, shrunk towards `prior`."""
        counts = list(zip(self.judged, self.kept, strict=True))
        rates = []
        for rank in range(ranks):
            judged, kept = counts[rank] if rank < len(counts) else (0, 0)
            rates.append((kept + PRIOR_WEIGHT * prior) / (judged + PRIOR_WEIGHT))
        return rates


def evidence(match) -> str | None:
    """The evidence a copy from the suffix index is priced by (``PRIOR``'s "copy-" keys), from
    its ``suffix.Match`` or a Round's (origin, match, anchored); None for anything else."""
    if match is None:
        return None
    if match.anchored:
        return f"copy-anchor{min(match.length, 2)}"
    return f"copy-match{min(1 << (max(match.length, 1).bit_length() - 1), 16)}"


@dataclass(frozen=True)
class _Evidence:
    length: int
    anchored: bool


def round_evidence(r: Round) -> str:
    """What a finished round's drafts are counted under: their evidence for a suffix copy
    (``evidence``), else their source."""
    if r.source == "lookup" and r.origin is not None:
        return evidence(_Evidence(r.match, r.anchored))
    return r.source


def expected_tokens(rates: list[float], k: int) -> float:
    """1 + a_1 + a_1 a_2 + ... + a_1...a_k: the target's own token plus the kept drafts."""
    total, survive = 1.0, 1.0
    for a in rates[:k]:
        survive *= a
        total += survive
    return total


def expected_tree_tokens(rates: list[float], k: int, sibling: float) -> float:
    """Expected tokens of a fishbone round: at each depth reached, the spine's guess is kept
    (rate a_d, and the round goes deeper) or, once it is rejected, a sibling is kept with chance
    `sibling` (and the round ends below it); plus the target's own token. `sibling` = 0 is the
    chain (``expected_tokens``)."""
    total, reach = 1.0, 1.0
    for a in rates[:k]:
        total += reach * (a + (1 - a) * sibling)
        reach *= a
    return total


class AutoK:
    """Chooses k (and, with `max_width` > 1, a tree width) per round from measured StepCosts and
    this request's acceptance so far."""

    def __init__(self, costs: StepCosts, k_max: int | None = None, max_width: int = 1):
        self.costs = costs
        self.k_max = min(k_max or DRAFT_K_MAX, max(costs.t_verify))
        self.copy_k_max = min(max(k_max or COPY_K_MAX, self.k_max), max(costs.t_verify))
        self.max_width = max_width
        self.width = 1  # the width chosen with the last k
        self.siblings = SiblingAcceptance()
        self.acceptance: dict[str, Acceptance] = {}
        self.plain_in_a_row = 0
        self.probe_every = PROBE_EVERY
        # Live measures, each earlier round weighed LIVE_DECAY per round since: the target's
        # passes as timed and at the profile's price, and drafting rounds after a drafting round:
        # their proposals' seconds, draft steps and count.
        self.pass_seconds = self.pass_profiled = 0.0
        self.extra_seconds = self.extra_steps = self.extra_rounds = 0.0
        self.drafted_last = False  # the last round was drafted by the model
        self.behind = 0  # tokens the draft model has yet to feed (a catch-up's width)
        self.copy_siblings = 0  # rows a copy's siblings add to its pass (``choose_source``)

    @property
    def load(self) -> float:
        """This request's target passes as timed over the same passes at the profile's price:
        how much busier (above 1) or quieter the machine is than when the profile was timed.
        1 before any pass is timed. Every option is priced at the profile times this."""
        return self.pass_seconds / self.pass_profiled if self.pass_profiled else 1.0

    @property
    def draft_extra(self) -> float:
        """Seconds a draft-model round spends beyond its steps at the load-scaled profile price,
        mean over this request's measured rounds (shrunk towards 0 while they are few), never
        below 0: a round that measured faster than its priced steps was noise, not a cheaper
        draft."""
        beyond = self.extra_seconds - self.load * self.costs.t_draft * self.extra_steps
        return max(0.0, beyond / (self.extra_rounds + EXTRA_PRIOR))

    def catch_up(self) -> float:
        """What the next draft-model round pays, beyond a steady round, to feed the draft every
        token added since it last ran: nothing right after a drafting round (its feed of one or
        two tokens is in the measured extra), else the draft's pass over those tokens less a
        two-token one, priced as the target's passes of as many rows are, relative to its step."""
        if self.drafted_last or self.behind <= 2:
            return 0.0
        costs = self.costs
        wider = (costs.pass_seconds(self.behind) - costs.pass_seconds(2)) / costs.t_step
        return self.load * costs.t_draft * max(0.0, wider)

    def seconds(self, k: int, source: str, width: int = 1) -> float:
        """One round's predicted cost under this request's load: k draft steps (free for
        lookup) with the measured extra of a drafting round and any catch-up, and the target's
        pass over 1 + k * width rows."""
        if source != "model" or not k:
            extra = self.copy_siblings if source == "lookup" and k else 0
            return self.load * self.costs.pass_seconds(1 + k * width + extra)
        steps = k * self.costs.t_draft + self.costs.pass_seconds(1 + k * width)
        return self.load * steps + self.draft_extra + self.catch_up()

    def sibling_chance(self, width: int) -> float:
        """The chance one of a node's `width` - 1 siblings is kept after its first guess was
        rejected (``theory.sibling_chance`` at this request's rates by rank)."""
        return sibling_chance(self.siblings.rates(width - 1, SIBLING_PRIOR))

    def tokens_per_second(self, source: str, width: int = 1, key: str | None = None) -> list[float]:
        """Predicted tokens per second for k = 0..k_max, with trees of `width`; a copy priced by
        its evidence `key` (``evidence``) up to copy_k_max."""
        key = key or source
        copy = key.startswith("copy-")
        k_max = self.copy_k_max if copy else self.k_max
        rates = self.acceptance.get(key, Acceptance()).rates(k_max, PRIOR[key], not copy)
        sibling = self.sibling_chance(width)
        return [
            expected_tree_tokens(rates, k, sibling) / self.seconds(k, source, width)
            for k in range(k_max + 1)
        ]

    def choose(self, source: str = "model") -> int:
        """The k for the next round, drafted by `source`."""
        return self.choose_source((source,))[1]

    def choose_source(self, sources: tuple[str, ...], match=None) -> tuple[str, int]:
        """The source and k with the most expected tokens per second for the next round, among
        the sources a drafter can use here (a hybrid with a lookup match can also draft), and
        ``width``, the tree width that goes with them (1 for a copied guess: its q is one-hot).
        `match`: the ``suffix.Match`` a copy would rest on, whose evidence prices it."""
        copy = evidence(match)
        # A copy's siblings (other continuations of its match) add their rows to its pass where
        # trees are allowed.
        siblings = len(match.alternatives) if match is not None else 0
        self.copy_siblings = min(siblings, self.max_width - 1)
        options = [
            self._best(source, key=copy if source == "lookup" else None) for source in sources
        ]
        if self.max_width > 1 and "model" in sources:
            options += [self._best("model", w) for w in range(2, self.max_width + 1)]
        source, k, _, self.width = max(options, key=lambda option: option[2])
        if k == 0 and self.plain_in_a_row >= self.probe_every:
            k = 1  # acceptance may have changed; a plain step teaches nothing about it
            self.probe_every = min(2 * self.probe_every, PROBE_MAX)
        elif k:
            self.probe_every = PROBE_EVERY  # drafting pays again: probe soon after it stops
        self.plain_in_a_row = self.plain_in_a_row + 1 if k == 0 else 0
        return source, k

    def _best(
        self, source: str, width: int = 1, key: str | None = None
    ) -> tuple[str, int, float, int]:
        speed = self.tokens_per_second(source, width, key)
        k = max(range(len(speed)), key=speed.__getitem__)
        judged = self.acceptance.get(key or source, Acceptance()).judged
        if k == 0 and (not judged or judged[0] < MIN_EVIDENCE):
            k = max(range(1, len(speed)), key=speed.__getitem__)
        return source, k, speed[k], width if k else 1

    def update(self, r: Round) -> None:
        if r.k:
            self.acceptance.setdefault(round_evidence(r), Acceptance()).add(r.k, r.n_accepted)
        if r.source == "model":  # a copy's siblings are fixed, not drawn from q: not counted
            self.siblings.add(r)
        # The target's pass alone, as the profile timed it (no judge, no re-prefill, no
        # capture); a round built by hand gives its verify time. 0 was not measured.
        seconds = r.verify_time if r.pass_time is None else r.pass_time
        if seconds > 0:
            self.pass_seconds = LIVE_DECAY * self.pass_seconds + seconds
            self.pass_profiled = LIVE_DECAY * self.pass_profiled + self.costs.pass_seconds(r.rows)
        drafted = r.source == "model" and r.draft_steps > 0
        # Only a round after a drafting round shows the steady state's extra.
        if drafted and self.drafted_last and r.draft_time > 0:
            self.extra_seconds = LIVE_DECAY * self.extra_seconds + r.draft_time
            self.extra_steps = LIVE_DECAY * self.extra_steps + r.draft_steps
            self.extra_rounds = LIVE_DECAY * self.extra_rounds + 1
        self.drafted_last = drafted
        # The draft's cache holds the context and its own guesses but the last: what it must feed
        # next is the target's token, and the last guess too where every guess was kept.
        self.behind = 1 + (r.n_accepted == r.k) if drafted else self.behind + len(r.tokens)
