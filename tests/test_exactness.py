"""Speculative sampling reproduces target-only sampling exactly: a χ² test on enumerated toys.

Toy bigram LMs over 6 tokens make the exact probability of every 3-token continuation
computable; 50,000 speculative draws must fit it (p > 0.001), and deliberately wrong
acceptance rules must not (the test's power).
"""

import itertools

import pytest
import torch
from conftest import BigramLM, toy_tables
from scipy.stats import chisquare

from specdemo import sampling
from specdemo.drafters import LookupDrafter, ModelDrafter
from specdemo.engine import make_generator, speculative_generate
from specdemo.sampling import SamplingConfig, logits_to_probs

VOCAB, LENGTH = 6, 3


def exact_distribution(table: torch.Tensor, prompt: list[int], config: SamplingConfig) -> dict:
    """P(x1, x2, x3 | prompt) under target-only sampling with the same warping."""
    probs = logits_to_probs(table, config)  # (vocab, vocab): row = previous token
    dist = {}
    for seq in itertools.product(range(VOCAB), repeat=LENGTH):
        prev, prob = prompt[-1], 1.0
        for t in seq:
            prob *= probs[prev, t].item()
            prev = t
        if prob > 0:
            dist[seq] = prob
    return dist


def draw(target, drafter_factory, prompt, k, config, n, seed=0):
    generator = make_generator(seed, "cpu")
    counts = {}
    for _ in range(n):
        drafter = drafter_factory(config, generator)
        seq = tuple(
            t
            for r in speculative_generate(
                target,
                drafter,
                prompt,
                k=k,
                sampling=config,
                max_new_tokens=LENGTH,
                generator=generator,
            )
            for t in r.tokens
        )
        counts[seq] = counts.get(seq, 0) + 1
    return counts


def chi2_pvalue(counts: dict, dist: dict) -> float:
    """χ² goodness of fit; bins expected below 5 draws are pooled into one."""
    n = sum(counts.values())
    assert set(counts) <= set(dist), "drew a continuation the target gives probability 0"
    observed, expected, pool_obs, pool_exp = [], [], 0, 0.0
    for seq, prob in dist.items():
        if prob * n >= 5:
            observed.append(counts.get(seq, 0))
            expected.append(prob * n)
        else:
            pool_obs += counts.get(seq, 0)
            pool_exp += prob * n
    if pool_exp > 0:
        observed.append(pool_obs)
        expected.append(pool_exp)
    total = sum(expected)  # float32 probabilities sum to 1 only up to rounding
    return chisquare(observed, [e * n / total for e in expected]).pvalue


def model_drafter(table, adaptive=False):
    draft = BigramLM(table)
    return lambda config, g: ModelDrafter(draft, config, g, adaptive=adaptive, threshold=0.5)


def lookup_drafter(config, g):
    return LookupDrafter()


TARGET, CLOSE = toy_tables(VOCAB, closeness=0.3, seed=0)
_, FAR = toy_tables(VOCAB, closeness=2.0, seed=1)
# Every K, temperature, warping, drafter and closeness appears at least once.
CASES = {
    "k1-t1-close": (1, SamplingConfig(1.0), model_drafter(CLOSE), [0]),
    "k2-t0.5-topk-far": (2, SamplingConfig(0.5, top_k=3), model_drafter(FAR), [0]),
    "k4-t1.7-topp-close": (4, SamplingConfig(1.7, top_p=0.8), model_drafter(CLOSE), [0]),
    "k1-t1.7-topk-topp-far": (1, SamplingConfig(1.7, top_k=4, top_p=0.9), model_drafter(FAR), [0]),
    "k4-t1-adaptive-close": (4, SamplingConfig(1.0), model_drafter(CLOSE, adaptive=True), [0]),
    # A draft with a smaller vocabulary (like Qwen2.5 0.5B under the 7B): q is zero-padded and
    # token 5 only ever comes from a residual or a bonus.
    "k2-t1-small-vocab": (2, SamplingConfig(1.0), model_drafter(CLOSE[:, :5]), [0]),
    "k2-t1-lookup": (2, SamplingConfig(1.0, top_k=5), lookup_drafter, [0, 1, 2, 0, 1, 3, 0]),
    "k4-t0.5-lookup": (4, SamplingConfig(0.5), lookup_drafter, [2, 4, 2, 4, 5, 2]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_speculative_samples_match_target_distribution(name):
    k, config, factory, prompt = CASES[name]
    counts = draw(BigramLM(TARGET), factory, prompt, k, config, n=50_000)
    assert chi2_pvalue(counts, exact_distribution(TARGET, prompt, config)) > 1e-3


def always_accept(p_x, q_x):
    return torch.ones_like(p_x)


def no_residual(p_row, q_row):
    return p_row


@pytest.mark.parametrize(
    "name, broken, case",
    [
        ("acceptance_probs", always_accept, "k1-t1-close"),  # accept every draft
        ("residual", no_residual, "k2-t1-lookup"),  # resample from p, not max(0, p - q)
    ],
)
def test_wrong_acceptance_rules_fail_the_test(monkeypatch, name, broken, case):
    """The test has power: a plausible but wrong rule is caught with the same draw count."""
    monkeypatch.setattr(sampling, name, broken)
    k, config, factory, prompt = CASES[case]
    counts = draw(BigramLM(TARGET), factory, prompt, k, config, n=50_000)
    assert chi2_pvalue(counts, exact_distribution(TARGET, prompt, config)) < 1e-3
