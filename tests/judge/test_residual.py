"""The judges' one arithmetic (specdemo.judge.residual): its float64 tensor form and its exact
form on Fractions give the same numbers, and a residual with no mass falls back to p."""

import random
from fractions import Fraction as F

import numpy as np
import pytest
import torch

from specdemo.judge.residual import (
    acceptance,
    excess,
    residual,
    residual_and_mass,
    residual_mass,
    running_weights,
    stop_chance,
)


def row(rng: random.Random, vocab: int) -> np.ndarray:
    """A probability row of small whole weights, zeros included, as exact Fractions."""
    weights = [rng.choice([0, 0, 1, 2, 3, 7]) for _ in range(vocab)]
    weights[rng.randrange(vocab)] += 1
    return np.array([F(v, sum(weights)) for v in weights], dtype=object)


def tensor(values) -> torch.Tensor:
    return torch.tensor([float(v) for v in values], dtype=torch.float64)


def floats(values) -> list[float]:
    return [float(v) for v in values]


CASES = range(200)


@pytest.mark.parametrize("seed", CASES)
def test_the_tensor_and_fraction_forms_agree(seed):
    """On random rows (vocabularies 2 to 6, zeros in p and q, weights in (0, 1]): the excess,
    its mass, the normalised residual, the stopping chance and the acceptance chance of every
    token q can draw, within 1e-12. The rows' denominators are below 50, so a slip in either
    form (a lost clamp, weight or fallback) moves some case by far more than 1e-12."""
    rng = random.Random(seed)
    vocab = rng.randint(2, 6)
    p, q = row(rng, vocab), row(rng, vocab)
    w = F(rng.randint(1, 6), 6)
    p_t, q_t, w_t = tensor(p), tensor(q), torch.tensor(float(w), dtype=torch.float64)
    assert floats(excess(p_t, q_t, w_t)) == pytest.approx(floats(excess(p, q, w)), abs=1e-12)
    dist, mass = residual_and_mass(p, q, w)
    dist_t, mass_t = residual_and_mass(p_t, q_t, w_t)
    assert float(mass_t) == pytest.approx(float(mass), abs=1e-12)
    assert float(residual_mass(p_t, q_t, w_t)) == pytest.approx(float(mass), abs=1e-12)
    assert floats(dist_t) == pytest.approx(floats(dist), abs=1e-12)
    assert floats(residual(p_t, q_t, w_t)) == floats(dist_t)
    assert float(stop_chance(mass_t, 1 - w_t)) == pytest.approx(
        float(stop_chance(mass, 1 - w)), abs=1e-12
    )
    for x in range(vocab):
        if q[x] > 0:
            assert float(acceptance(p_t[x], q_t[x])) == pytest.approx(
                float(acceptance(p[x], q[x])), abs=1e-12
            )


@pytest.mark.parametrize("seed", range(50))
def test_the_running_weight_in_log_space_is_the_product_of_capped_ratios(seed):
    """w_i = min(1, w_(i-1) p(x_i)/q(x_i)): summed in log space on tensors, multiplied out on
    Fractions, the same weights (within 1e-12), a zero p(x) included."""
    rng = random.Random(seed)
    k = rng.randint(1, 6)
    p_x = [F(rng.randint(0, 9), 9) for _ in range(k)]
    q_x = [F(rng.randint(1, 9), 9) for _ in range(k)]
    exact = running_weights(p_x, q_x)
    assert all(0 <= w <= 1 for w in exact)
    logged = running_weights(tensor(p_x), tensor(q_x))
    assert logged.tolist() == pytest.approx(floats(exact), abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_the_residual_of_p_against_itself_is_p(seed):
    """max(w·p − p, 0) has no mass for any w <= 1: the residual falls back to p itself, in both
    forms, exactly."""
    rng = random.Random(seed)
    p = row(rng, rng.randint(2, 6))
    for w in (F(1), F(1, 3)):
        dist, mass = residual_and_mass(p, p, w)
        assert mass == 0 and list(dist) == list(p)
        p_t = tensor(p)
        dist_t, mass_t = residual_and_mass(p_t, p_t.clone(), torch.tensor(float(w)).double())
        assert float(mass_t) == 0.0 and torch.equal(dist_t, p_t)


def test_rows_of_tensors_each_get_their_own_residual():
    """(n, vocab) rows with (n, 1) weights: each row's residual and mass as if alone."""
    rng = random.Random(7)
    ps, qs = [row(rng, 4) for _ in range(3)], [row(rng, 4) for _ in range(3)]
    ws = [F(1), F(1, 2), F(1, 5)]
    p_t, q_t = torch.stack([tensor(r) for r in ps]), torch.stack([tensor(r) for r in qs])
    w_t = torch.tensor([[float(w)] for w in ws], dtype=torch.float64)
    dist_t, mass_t = residual_and_mass(p_t, q_t, w_t)
    for i in range(3):
        dist, mass = residual_and_mass(ps[i], qs[i], ws[i])
        assert float(mass_t[i]) == pytest.approx(float(mass), abs=1e-12)
        assert dist_t[i].tolist() == pytest.approx(floats(dist), abs=1e-12)
