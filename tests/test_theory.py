"""theory.py against a Monte Carlo of the acceptance process."""

import random

import pytest

from specdemo.theory import expected_speedup, expected_tokens_per_pass, optimal_k


def simulate_tokens_per_pass(alpha: float, k: int, rounds: int, seed: int = 0) -> float:
    """Each of k drafts survives with probability alpha until the first rejection; a pass
    always adds one target token (the replacement or the bonus)."""
    rng = random.Random(seed)
    total = 0
    for _ in range(rounds):
        n = 0
        while n < k and rng.random() < alpha:
            n += 1
        total += n + 1
    return total / rounds


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_expected_tokens_per_pass_matches_monte_carlo(alpha, k):
    simulated = simulate_tokens_per_pass(alpha, k, 40_000)
    assert expected_tokens_per_pass(alpha, k) == pytest.approx(simulated, rel=0.02)


def test_alpha_one_limit():
    assert expected_tokens_per_pass(1.0, 5) == 6.0
    assert expected_tokens_per_pass(1 - 1e-9, 5) == pytest.approx(6.0, rel=1e-6)
    assert expected_speedup(1.0, 5, 0.0) == 6.0


def test_speedup_formula_and_optimum():
    # Leviathan et al. (2023), Figure 3 regime: alpha 0.8, c 0.05 -> best k is around 6-8.
    assert expected_speedup(0.8, 4, 0.05) == pytest.approx((1 - 0.8**5) / (0.2 * 1.2))
    assert 5 <= optimal_k(0.8, 0.05) <= 9
    assert optimal_k(0.5, 0.6) == 1
    with pytest.raises(ValueError):
        expected_tokens_per_pass(1.2, 3)
