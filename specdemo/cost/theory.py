"""The cost model: expected tokens per target pass and the speedup they buy, from measured costs.

Closed forms from Leviathan et al. (2023), section 3, for i.i.d. acceptance with rate alpha: a
round of k drafts yields (1 - alpha^(k+1)) / (1 - alpha) tokens per target pass. The paper's
speedup charges a round c*k + 1 target steps (c = t_draft / t_step, verify as cheap as one step);
``StepCosts`` charges the verify pass at its measured cost instead, which is what a CPU needs.
A token tree (``tree``'s fishbone) has its own expectation, ``expected_tree_tokens_per_pass``.
"""

from dataclasses import dataclass


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """E[tokens per target pass] = (1 - alpha^(k+1)) / (1 - alpha); k + 1 when alpha = 1."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if alpha == 1.0:
        return k + 1.0
    return (1 - alpha ** (k + 1)) / (1 - alpha)  # arithmetic only: a Fraction stays exact


def expected_tree_tokens_per_pass(alpha: float, k: int, sibling: float) -> float:
    """E[tokens per target pass] of a fishbone of k chain nodes, under i.i.d. acceptance: each
    chain node is kept with `alpha`; at a node whose chain guess was rejected, one of its
    siblings is kept with `sibling` (``sibling_chance``), and the round ends below it. Depth d
    is reached with alpha^(d-1) and keeps a node there with alpha + (1 - alpha) * sibling, so
    E = 1 + sum over d of alpha^(d-1) (alpha + (1 - alpha) sibling)
      = (1 - alpha^(k+1)) / (1 - alpha) + sibling * (1 - alpha^k):
    the chain's, and what the siblings add. `sibling` = 0 is the chain."""
    if not 0.0 <= sibling <= 1.0:
        raise ValueError(f"sibling must be in [0, 1], got {sibling}")
    return expected_tokens_per_pass(alpha, k) + sibling * (1 - alpha**k)


def sibling_chance(rates: list[float]) -> float:
    """The chance one of a node's siblings is kept once its chain guess was rejected, where the
    sibling of each rank is kept with rates[rank] once those before it were rejected:
    1 - prod(1 - b)."""
    missed = 1.0
    for b in rates:
        missed *= 1 - b
    return 1 - missed


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """The paper's speedup over target-only decoding: E[tokens per pass] / (c*k + 1)."""
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    return expected_tokens_per_pass(alpha, k) / (c * k + 1.0)


def predicted_speedup(
    alpha: float, k: int, t_step: float, t_draft: float, t_verify: float
) -> float:
    """Speedup from measured times: E[tokens per pass] * t_step / (k * t_draft + t_verify).

    Unlike the paper's form, this charges the (k+1)-token verify pass at its measured cost
    rather than assuming it costs one target step.
    """
    return expected_tokens_per_pass(alpha, k) * t_step / (k * t_draft + t_verify)


def optimal_k(alpha: float, c: float, k_max: int = 16) -> int:
    """The k in 1..k_max that maximises the paper's expected speedup."""
    return max(range(1, k_max + 1), key=lambda k: expected_speedup(alpha, k, c))


@dataclass(frozen=True)
class StepCosts:
    """Seconds measured on the running machine: one plain target step, one draft step, and a
    verify pass over n + 1 rows under key n, for each n measured: a chain of k drafts at k, a
    fishbone of k chain nodes and width w (1 + k*w rows) at k*w."""

    t_step: float
    t_draft: float
    t_verify: dict[int, float]

    @property
    def c(self) -> float:
        """c = t_draft / t_step."""
        return self.t_draft / self.t_step

    def pass_seconds(self, rows: int) -> float:
        """A target pass over `rows` tokens: a plain step for 1, the measured verify pass where
        one of that width was timed, a straight line between the two nearest widths timed
        around it (a long copy's pass: the profile times a few widths up to 33 rows), else the
        widest one timed plus the last measured rise per row (a token tree's pass, whose rows
        may outnumber every chain's)."""
        if rows <= 1:
            return self.t_step
        if rows - 1 in self.t_verify:
            return self.t_verify[rows - 1]
        timed = {0: self.t_step, **self.t_verify}  # key: rows - 1
        ks = sorted(timed)
        n = rows - 1
        above = next((k for k in ks if k > n), None)
        if above is not None:
            below = max(k for k in ks if k < n)
            share = (n - below) / (above - below)
            return timed[below] + share * (timed[above] - timed[below])
        last, before = ks[-1], ks[-2]
        per_row = max(0.0, (timed[last] - timed[before]) / (last - before))
        return timed[last] + per_row * (n - last)

    def verify_cost(self, k: int) -> float:
        """A (k+1)-token verify pass in target steps (1 in the paper's model)."""
        return self.t_verify[k] / self.t_step

    def speedup(self, alpha: float, k: int, width: int = 1, sibling: float = 0.0) -> float:
        """Predicted speedup at per-draft acceptance `alpha` (``predicted_speedup``); with
        `width` > 1, a fishbone's: ``expected_tree_tokens_per_pass`` at sibling chance
        `sibling`, its pass over 1 + k * width rows at ``pass_seconds`` (measured where a pass
        of those rows was timed)."""
        if width == 1:
            return predicted_speedup(alpha, k, self.t_step, self.t_draft, self.t_verify[k])
        tokens = expected_tree_tokens_per_pass(alpha, k, sibling)
        return tokens * self.t_step / (k * self.t_draft + self.pass_seconds(1 + k * width))

    def speedup_at(self, tokens_per_pass: float, k: int) -> float:
        """The speedup that a measured tokens-per-pass buys at these costs: what a loop with no
        overhead would reach."""
        return tokens_per_pass * self.t_step / (k * self.t_draft + self.t_verify[k])
