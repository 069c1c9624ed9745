"""theory.py against a Monte Carlo of the acceptance process, and a fishbone's expectation
against its exact enumeration."""

import functools
import itertools
import random
from fractions import Fraction

import numpy as np
import pytest

from specdemo.cost.theory import (
    StepCosts,
    expected_speedup,
    expected_tokens_per_pass,
    expected_tree_tokens_per_pass,
    optimal_k,
    sibling_chance,
)
from specdemo.judge.tree import node_rule


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


def orderings(q: list[Fraction], width: int):
    """A fishbone node's children with their exact probability: the chain's token drawn from q,
    then up to `width` - 1 siblings from q without replacement (capped at q's support)."""
    support = [t for t, v in enumerate(q) if v > 0]
    for children in itertools.permutations(support, min(width, len(support))):
        prob, left = Fraction(1), Fraction(1)
        for c in children:
            prob, left = prob * q[c] / left, left - q[c]
        yield list(children), prob


def outcomes(p, q, children):
    """(the kept child's index or None, its exact probability) over both branches of every
    comparison ``tree.node_rule`` makes."""
    out = []

    def walk(decisions: list[bool], weight: Fraction) -> None:
        seen: list[Fraction] = []

        def passes(i, a, p_x, q_x):
            seen.append(Fraction(a))
            return decisions[i] if i < len(decisions) else False

        kept, _ = node_rule(np.array(p, dtype=object), np.array(q, dtype=object), children, passes)
        if len(seen) > len(decisions):
            a = seen[len(decisions)]
            walk(decisions + [True], weight * a)
            walk(decisions + [False], weight * (1 - a))
        else:
            out.append((kept, weight))

    walk([], Fraction(1))
    return out


def enumerated_tree_tokens(p, q, k: int, width: int) -> Fraction:
    """E[tokens of a fishbone round] with the same p and q at every depth (acceptance i.i.d.
    across depths), enumerated exactly: a kept chain node goes one depth deeper, a kept sibling
    ends the round below it, and the target's own token comes last."""

    @functools.cache  # the rows are the same at every depth: what lies below one is shared
    def kept_from(depth: int) -> Fraction:
        if depth == k:
            return Fraction(0)
        total = Fraction(0)
        for children, prob in orderings(q, width):
            for kept, weight in outcomes(p, q, children):
                if kept is not None:
                    total += prob * weight * (1 + (kept_from(depth + 1) if kept == 0 else 0))
        return total

    return 1 + kept_from(0)


FISHBONE_CASES = [  # p, q: context-free rows, zeros in either, q's support under the width
    ((5, 3, 2, 0), (2, 5, 1, 2)),
    ((9, 4.5, 4.5, 4), (1, 4, 20, 4)),
    ((1, 2, 3), (0, 1, 1)),  # the residual after x = 1 holds only token 0: no sibling is kept
]


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("width", [2, 3])
@pytest.mark.parametrize("p, q", FISHBONE_CASES)
def test_the_fishbone_expectation_is_the_enumerated_one(p, q, width, k):
    """E = (1 - α^(k+1)) / (1 - α) + s (1 - α^k), exactly, where α = Σ min(p, q) is the chain
    node's chance and s the chance a node keeps a sibling once its chain guess was rejected
    (enumerated at one node). A chain formula under the tree's label misses s (1 - α^k), and a
    formula that let a kept sibling go deeper adds more: either differs here by a Fraction."""
    p, q = ([Fraction(v) / sum(Fraction(x) for x in row) for v in row] for row in (p, q))
    alpha = sum(min(a, b) for a, b in zip(p, q, strict=True))
    node = enumerated_tree_tokens(p, q, 1, width) - 1  # P(a node keeps one of its children)
    sibling = (node - alpha) / (1 - alpha)
    want = enumerated_tree_tokens(p, q, k, width)
    assert expected_tree_tokens_per_pass(alpha, k, sibling) == want
    chain = expected_tokens_per_pass(alpha, k)
    assert expected_tree_tokens_per_pass(alpha, k, 0) == chain and (want > chain) == (sibling > 0)


def test_the_sibling_chance_and_a_trees_predicted_speedup():
    """A node keeps one of its siblings unless every rank misses; a fishbone of K = 2 and width
    2 is priced at the measured pass over 1 + 2 * 2 rows (StepCosts' key 4), not the chain's."""
    assert sibling_chance([0.5, 0.5]) == 0.75 and sibling_chance([]) == 0
    costs = StepCosts(t_step=1.0, t_draft=0.1, t_verify={2: 1.2, 4: 1.5})
    tokens = expected_tree_tokens_per_pass(0.5, 2, 0.4)
    assert costs.speedup(0.5, 2, width=2, sibling=0.4) == pytest.approx(tokens / (0.2 + 1.5))
    assert costs.speedup(0.5, 2) == pytest.approx(expected_tokens_per_pass(0.5, 2) / 1.4)
