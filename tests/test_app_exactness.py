"""The live exactness check on the tiny pair: its bars are the target's p, its χ² has power."""

import pytest
import torch

from specdemo.app import exactness
from specdemo.app.config import encode, parse_run

PROMPT = "Write a Python function that checks whether a number is prime."


def test_the_bars_show_the_targets_own_probabilities(pair):
    config = parse_run(PROMPT, temperature=0.8)
    ex = exactness.measure(pair, config, 20_000)
    # p computed here straight from the model's logits, without specdemo's sampling code.
    with torch.no_grad():
        logits = pair.target(torch.tensor([encode(pair, config)])).logits[0, -1].double()
    p = torch.softmax(logits / 0.8, dim=-1)
    top = torch.topk(p, len(ex.tokens))
    assert ex.tokens == top.indices.tolist()
    assert ex.p[:-1] == pytest.approx(top.values.tolist(), abs=1e-5)
    assert ex.p[-1] == pytest.approx(1.0 - top.values.sum().item(), abs=1e-5)
    assert len(ex.labels) == len(ex.tokens) + 1 and ex.labels[-1] == "(other)"


def test_speculative_draws_follow_p(pair):
    config = parse_run(PROMPT, k=4, temperature=1.0)
    ex = exactness.measure(pair, config, 20_000)
    assert ex.tv_speculative < 0.05 and ex.p_value_speculative > 0.001
    assert ex.tv_direct < 0.05 and ex.p_value_direct > 0.001
    # The standard error of a frequency from 20,000 draws is at most 0.0035.
    assert max(abs(a - b) for a, b in zip(ex.speculative, ex.p, strict=True)) < 0.02
    assert 0.0 < ex.first_accept < 1.0


def test_exactness_check_catches_a_wrong_sampler(pair):
    config = parse_run(PROMPT, temperature=1.0)
    ids = encode(pair, config)
    p = exactness.next_token_probs(pair.target, ids, config.sampling).double()
    q = exactness.next_token_probs(pair.draft, ids, config.sampling).double()
    drafts = torch.multinomial(
        q, 20_000, replacement=True, generator=torch.Generator().manual_seed(0)
    )
    counts = torch.bincount(drafts, minlength=len(p)).double()
    assert exactness.chi2_pvalue(counts, p / p.sum()) < 1e-6


def test_chi2_pools_rare_tokens_and_rejects_impossible_ones():
    p = torch.tensor([0.5, 0.5, 0.0], dtype=torch.double)
    assert exactness.chi2_pvalue(torch.tensor([50.0, 50.0, 0.0]), p) == pytest.approx(1.0)
    assert exactness.chi2_pvalue(torch.tensor([50.0, 49.0, 1.0]), p) == 0.0
    assert exactness.chi2_pvalue(torch.tensor([7.0]), torch.tensor([1.0])) == 1.0


def test_greedy_check_finds_the_tiny_pair_identical(pair):
    check = exactness.greedy_check(pair, parse_run(PROMPT, k=4))
    assert check.identical and check.n_tokens > 0
    assert "identical" in exactness.greedy_markdown(check, 4, "fp32")
    parted = exactness.GreedyCheck(False, 10, 3, "a", "b", 0.001)
    assert "part at new token 4" in exactness.greedy_markdown(parted, 4, "4bit")
