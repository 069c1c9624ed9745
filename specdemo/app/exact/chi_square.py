"""The statistics behind the exactness verdict: χ² bins and p-values, the check's power and
the smallest departure it catches, and each acceptance rule's exact first-token distribution.

``chi2_bins`` fixes the bins from p and N alone; ``chi2_pvalue`` tests counts against p over them;
``power`` is the chance the check catches draws from another distribution, ``detectable_tv`` the
smallest departure caught with probability POWER whatever its shape; ``rule_distribution`` is
what a rule really gives, so a mistaken rule's distance from p and the power to see it are
computed, not guessed.
"""

import torch
from scipy.optimize import brentq
from scipy.stats import chi2, chisquare, ncx2

from specdemo.judge.sampling import AcceptanceRule

SUSPICIOUS = 1e-3  # a χ² p-value below this says the draws do not follow p; the exact rule
#   falls below it by chance in 1 check in 1,000


def rule_distribution(p: torch.Tensor, q: torch.Tensor, rule: AcceptanceRule) -> torch.Tensor:
    """The first token's exact distribution under `rule`, with target p and draft q (each (vocab,),
    summing to 1): p for the exact rule; q when every draft is kept; min(p, q) plus the rejected
    mass spread as p when rejections resample from p; the draft's argmax kept with
    min(1, p/q), else the residual, when the draft proposes greedily; p under the block-prefix
    mistake, which is the exact rule for a first token drawn one guess at a time."""
    residual = (p - q).clamp_min(0)
    residual = residual / residual.sum() if residual.sum() > 0 else p
    if rule.accept_all:
        return q
    if rule.greedy_draft:
        x = int(q.argmax())
        keep = min(1.0, float(p[x] / q[x]))
        out = (1 - keep) * (p if rule.resample_from_p else residual)
        out[x] += keep
        return out
    kept = torch.minimum(p, q)
    rejected = 1 - kept.sum()
    return kept + rejected * (p if rule.resample_from_p else residual)


POWER = 0.95  # the probability with which a departure counts as one this N would catch


def _noncentrality(p: torch.Tensor, other: torch.Tensor, n: int) -> tuple[float, int]:
    """(λ, degrees of freedom) of the χ² statistic over ``chi2_bins(p, n)`` when n draws come
    from `other` instead of p: λ = n Σ_bins (other_b − p_b)² / p_b."""
    bins, expected = chi2_bins(p, n)
    live = bins >= 0
    p_b = expected / n
    other_b = torch.zeros_like(p_b).index_add_(0, bins[live], other.double().cpu()[live])
    return float(n * ((other_b - p_b) ** 2 / p_b).sum()), len(expected) - 1


def power(p: torch.Tensor, other: torch.Tensor, n: int) -> float:
    """The probability that the χ² check of n draws from `other` against p (``chi2_pvalue``)
    falls below SUSPICIOUS: the noncentral χ² approximation over the check's own bins, or the
    chance of a draw where p gives 0 (caught at once), whichever is larger. Nothing to test
    (fewer than two bins): 0."""
    p, other = p.double().cpu(), other.double().cpu()
    impossible = 1.0 - (1.0 - float(other[p <= 0].sum())) ** n
    lam, df = _noncentrality(p, other, n)
    if df < 1:
        return impossible
    return max(impossible, float(ncx2.sf(chi2.isf(SUSPICIOUS, df), df, lam)))


def detectable_tv(p: torch.Tensor, n: int) -> float:
    """The smallest total variation (between the χ² bins) that n draws catch with probability
    POWER whatever its shape: a departure d of total variation δ has λ = n Σ d²/p ≥ 4nδ² (by
    Cauchy-Schwarz, equality when d moves mass proportionally between two halves of p), and
    the check's power grows with λ. Over 1 when even the largest departure is not caught."""
    df = len(chi2_bins(p, n)[1]) - 1
    if df < 1:
        return float("inf")
    critical = chi2.isf(SUSPICIOUS, df)
    lam = brentq(lambda lam: ncx2.sf(critical, df, lam) - POWER, 1e-9, 1e6)
    return (lam / (4 * n)) ** 0.5


MIN_EXPECTED = 5.0  # every χ² bin is expected at least this many times (Cochran's rule)


def chi2_bins(p: torch.Tensor, n: float) -> tuple[torch.Tensor, torch.Tensor]:
    """χ² bins for n draws from p, fixed by p and n alone, never by the draws: the (vocab,) bin
    of each outcome (-1 where p is 0) and the (bins,) expected count of each bin.

    An outcome expected at least MIN_EXPECTED times has its own bin. The rest share one, which
    takes in the smallest own bins, smallest first, until it too is expected MIN_EXPECTED times:
    a bin expected e ≪ 1 times adds (1 − e)²/e ≈ 1/e to χ² with a single draw, so a thin tail
    would raise the false-alarm rate at SUSPICIOUS by an order of magnitude
    (tests/app/exact/test_chi2.py)."""
    expected = p.detach().double().cpu()
    expected = expected / expected.sum() * n
    live = (expected > 0).nonzero().view(-1)
    live = live[torch.argsort(expected[live], stable=True)]  # ascending expected count
    pooled = int((expected[live] < MIN_EXPECTED).sum())  # a prefix of `live`
    if pooled:
        enough = (torch.cumsum(expected[live], 0) >= MIN_EXPECTED).nonzero().view(-1)
        pooled = max(pooled, int(enough[0]) + 1) if len(enough) else len(live)
    own = len(live) - pooled
    host = expected.device  # the CPU: binning is bookkeeping, whatever device p came from
    bins = torch.full(expected.shape, -1, dtype=torch.long, device=host)
    bins[live[:pooled]] = own  # the shared bin last
    bins[live[pooled:]] = torch.arange(own, device=host)
    sizes = torch.zeros(own + (pooled > 0), dtype=torch.double, device=host)
    return bins, sizes.index_add_(0, bins[live], expected[live])


def chi2_pvalue(counts: torch.Tensor, p: torch.Tensor) -> float:
    """χ² goodness of fit of counts (per outcome) to the probabilities p, over ``chi2_bins``:
    0 if an outcome p gives probability 0 was drawn, 1 if fewer than two bins (nothing to test)."""
    counts = counts.detach().double().cpu()
    bins, expected = chi2_bins(p, counts.sum().item())
    if counts[bins < 0].sum() > 0:
        return 0.0  # impossible under p
    if len(expected) < 2:
        return 1.0
    live = bins >= 0
    observed = torch.zeros_like(expected).index_add_(0, bins[live], counts[live])
    return float(chisquare(observed.tolist(), expected.tolist()).pvalue)
