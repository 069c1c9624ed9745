"""The live check's χ² (``chi_square.chi2_bins``, ``chi2_pvalue``) raises false alarms at about its
nominal rate on the distributions the app meets.

A first-token p at low temperature is one token at 0.9-0.99, a few runners-up and a tail of
thousands of tokens expected 0.01-0.1 times in all in N = 20,000 draws. Thousands of exact checks
are simulated through the shipped binning: "do not follow p" (p-value < SUSPICIOUS) must come at
most twice as often as SUSPICIOUS. The naive binning, every outcome expected fewer than 5 times in
one bin however small, is the reference that shows the simulation can fail.
"""

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from specdemo.app.exact.chi_square import MIN_EXPECTED, SUSPICIOUS, chi2_bins, chi2_pvalue

N = 20_000  # draws per check, as in the app
CHECKS = 3_000  # simulated exact checks per shape
TAIL = 3_000  # tokens in the thin tail


def peaked(head: float, runners_up: int, zipf: float, tail_expected: float) -> torch.Tensor:
    """p with one head token, `runners_up` tokens sharing 1 - head by a Zipf law (each expected
    at least MIN_EXPECTED times in N draws) and TAIL Zipf-shaped tokens expected `tail_expected`
    times in all."""
    ranks = torch.arange(1, max(runners_up, TAIL) + 1, dtype=torch.double)
    body = ranks[:runners_up] ** -zipf
    body = (1 - head) * body / body.sum()
    assert body.min() * N >= MIN_EXPECTED
    tail = 1.0 / ranks[:TAIL]
    tail = tail_expected / N * tail / tail.sum()
    p = torch.cat([torch.tensor([0.0], dtype=torch.double), body, tail])
    p[0] = 1 - p[1:].sum()
    return p


# T ≈ 0.3: a near-certain head and few runners-up; T = 1: a flatter body of dozens.
SHAPES = [
    peaked(head, runners_up, zipf, tail_expected)
    for head, runners_up, zipf in [(0.98, 4, 1.5), (0.99, 2, 1.0), (0.9, 40, 1.0), (0.94, 12, 1.2)]
    for tail_expected in [0.01, 0.03, 0.1]
]


def pooled_bins(p: torch.Tensor, n: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The naive binning, in chi2_bins' form: an own bin per outcome expected at least
    MIN_EXPECTED times, one bin for all the rest however small its expected count."""
    expected = p / p.sum() * n
    own = expected >= MIN_EXPECTED
    bins = torch.full(p.shape, -1, dtype=torch.long)
    bins[own] = torch.arange(int(own.sum()))
    bins[~own & (expected > 0)] = int(own.sum())
    live = bins >= 0
    sizes = torch.zeros(int(bins.max()) + 1, dtype=torch.double)
    return bins, sizes.index_add_(0, bins[live], expected[live])


def pvalues(counts: torch.Tensor, bins: torch.Tensor, expected: torch.Tensor) -> np.ndarray:
    """χ² p-values of (checks, vocab) token counts over the given bins, all checks at once."""
    live = bins >= 0
    binned = torch.zeros(len(counts), len(expected), dtype=torch.double)
    binned.index_add_(1, bins[live], counts[:, live])  # (checks, bins)
    statistic = ((binned - expected) ** 2 / expected).sum(1)
    return chi2.sf(statistic.numpy(), len(expected) - 1)


def simulate(p: torch.Tensor, rng: np.random.Generator, checks: int = CHECKS) -> torch.Tensor:
    """(checks, vocab) token counts of exact checks of N draws each."""
    return torch.from_numpy(rng.multinomial(N, p.numpy(), size=checks)).double()


def test_false_alarms_stay_near_the_nominal_rate():
    rng = np.random.default_rng(0)
    alarms, naive_alarms = 0, 0
    for p in SHAPES:
        counts = simulate(p, rng)
        alarms += int((pvalues(counts, *chi2_bins(p, N)) < SUSPICIOUS).sum())
        naive_alarms += int((pvalues(counts, *pooled_bins(p, N)) < SUSPICIOUS).sum())
    checks = len(SHAPES) * CHECKS
    rate, naive_rate = alarms / checks, naive_alarms / checks
    assert rate <= 2 * SUSPICIOUS, (rate, naive_rate)
    # Power: on the same draws, pooling the tail alone alarms far more often than that.
    assert naive_rate > 2 * SUSPICIOUS, (rate, naive_rate)


def test_the_simulation_computes_what_chi2_pvalue_returns():
    p = SHAPES[2]
    counts = simulate(p, np.random.default_rng(1), checks=40)
    counts[0, -1] += 1  # a draw deep in the tail
    counts[0, 0] -= 1
    expected = pvalues(counts, *chi2_bins(p, N))
    assert [chi2_pvalue(c, p) for c in counts] == pytest.approx(expected.tolist(), rel=1e-9)


def test_every_bin_is_expected_five_times_and_the_shared_bin_took_the_smallest():
    for p in SHAPES:
        bins, expected = chi2_bins(p, N)
        assert (expected >= MIN_EXPECTED).all() and expected.sum().item() == pytest.approx(N)
        shared = bins == len(expected) - 1
        assert p[shared].max() <= p[~shared].min()
        assert (bins >= 0).all() and len(expected) == len(set(bins.tolist()))


def test_a_single_bin_is_nothing_to_test_and_an_impossible_draw_fails():
    p = torch.tensor([0.9998, 0.0002, 0.0], dtype=torch.double)  # expected 19,996 and 4
    assert len(chi2_bins(p, N)[1]) == 1
    assert chi2_pvalue(torch.tensor([N - 4.0, 4.0, 0.0]), p) == 1.0
    assert chi2_pvalue(torch.tensor([N - 5.0, 4.0, 1.0]), p) == 0.0
