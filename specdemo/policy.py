"""Automatic K: before each round, the K that maximises expected tokens per second.

Expected tokens of a round with k drafts are 1 + sum over j <= k of a_1 * ... * a_j, where a_i is
the chance that draft position i is kept given that the ones before it were: acceptance is not
i.i.d. (a draft that got the first token right tends to get the next one too), so each position
keeps its own running estimate for this request, shrunk towards the pooled rate while it has few
observations (a position never reached takes the pooled rate). A round costs
k * t_draft + t_verify(k), with t_verify(0) = t_step: K = 0, a plain target step, wins whenever
drafting is predicted not to pay. K depends only on rounds already finished, so the output
distribution stays exactly the target's.

A draft-model round also costs what the profile's one-token step does not show: the draft first
catches up on the tokens the last round added (a forward of two or more tokens), right after the
target's pass has taken the caches. The policy measures that extra on this request's rounds that
follow a drafting round (the steady state it prices; a catch-up after plain steps, or the first
round's prefill of the prompt, is paid once) and adds it to each drafting round it prices, so
that a draft dearer in use than in its profile makes plain steps win, as they should.
"""

from dataclasses import dataclass, field

from specdemo.rounds import Round
from specdemo.theory import StepCosts

# Before any round: a prior acceptance rate per source and how many observations it is worth,
# tuned in a simulation of whole requests (docs/bench/auto-k.md).
PRIOR = {"model": 0.7, "lookup": 0.6}
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

    def rates(self, k_max: int, prior: float) -> list[float]:
        """Estimated a_1..a_k_max."""
        pooled = (sum(self.kept) + PRIOR_WEIGHT * prior) / (sum(self.judged) + PRIOR_WEIGHT)
        rates = []
        for i in range(k_max):
            judged = self.judged[i] if i < len(self.judged) else 0
            kept = self.kept[i] if i < len(self.kept) else 0
            rates.append((kept + POSITION_WEIGHT * pooled) / (judged + POSITION_WEIGHT))
        return rates


def expected_tokens(rates: list[float], k: int) -> float:
    """1 + a_1 + a_1 a_2 + ... + a_1...a_k: the target's own token plus the kept drafts."""
    total, survive = 1.0, 1.0
    for a in rates[:k]:
        survive *= a
        total += survive
    return total


class AutoK:
    """Chooses k per round from measured StepCosts and this request's acceptance so far."""

    def __init__(self, costs: StepCosts, k_max: int | None = None):
        self.costs = costs
        self.k_max = min(k_max or max(costs.t_verify), max(costs.t_verify))
        self.acceptance: dict[str, Acceptance] = {}
        self.plain_in_a_row = 0
        self.probe_every = PROBE_EVERY
        self.extra_seconds, self.extra_rounds = 0.0, 0  # measured beyond k profiled steps
        self.drafted_last = False  # the last round was drafted by the model

    @property
    def draft_extra(self) -> float:
        """Seconds a draft-model round spent beyond its steps at the profile's price, mean over
        this request's measured rounds (shrunk towards 0 while they are few), never below 0: a
        round that measured faster than its profiled steps was noise, not a cheaper draft."""
        return max(0.0, self.extra_seconds / (self.extra_rounds + EXTRA_PRIOR))

    def seconds(self, k: int, source: str) -> float:
        """One round's predicted cost: k draft steps (free for lookup) with the measured extra
        of a drafting round, and the verify pass."""
        t_draft = self.costs.t_draft if source == "model" else 0.0
        extra = self.draft_extra if source == "model" and k else 0.0
        return k * t_draft + extra + (self.costs.t_verify[k] if k else self.costs.t_step)

    def tokens_per_second(self, source: str) -> list[float]:
        """Predicted tokens per second for k = 0..k_max."""
        rates = self.acceptance.get(source, Acceptance()).rates(self.k_max, PRIOR[source])
        return [expected_tokens(rates, k) / self.seconds(k, source) for k in range(self.k_max + 1)]

    def choose(self, source: str = "model") -> int:
        """The k for the next round, drafted by `source`."""
        return self.choose_source((source,))[1]

    def choose_source(self, sources: tuple[str, ...]) -> tuple[str, int]:
        """The source and k with the most expected tokens per second for the next round, among
        the sources a drafter can use here (a hybrid with a lookup match can also draft)."""
        best = max((self._best(source) for source in sources), key=lambda option: option[2])
        source, k, _ = best
        if k == 0 and self.plain_in_a_row >= self.probe_every:
            k = 1  # acceptance may have changed; a plain step teaches nothing about it
            self.probe_every = min(2 * self.probe_every, PROBE_MAX)
        elif k:
            self.probe_every = PROBE_EVERY  # drafting pays again: probe soon after it stops
        self.plain_in_a_row = self.plain_in_a_row + 1 if k == 0 else 0
        return source, k

    def _best(self, source: str) -> tuple[str, int, float]:
        speed = self.tokens_per_second(source)
        k = max(range(len(speed)), key=speed.__getitem__)
        judged = self.acceptance.get(source, Acceptance()).judged
        if k == 0 and (not judged or judged[0] < MIN_EVIDENCE):
            k = max(range(1, len(speed)), key=speed.__getitem__)
        return source, k, speed[k]

    def update(self, r: Round) -> None:
        if r.k:
            self.acceptance.setdefault(r.source, Acceptance()).add(r.k, r.n_accepted)
        drafted = r.source == "model" and r.draft_steps > 0
        # Only a round after a drafting round shows the steady state's extra; a round timed at
        # 0 was not measured.
        if drafted and self.drafted_last and r.draft_time > 0:
            self.extra_seconds += r.draft_time - r.draft_steps * self.costs.t_draft
            self.extra_rounds += 1
        self.drafted_last = drafted
