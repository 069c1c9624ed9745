"""sampling.py: warping, the verify step's edge cases, vocab padding, deterministic drafts."""

import pytest
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from specdemo.sampling import (
    SamplingConfig,
    first_token_samples,
    logits_to_probs,
    residual,
    verify,
    verify_greedy,
)


def test_warping_matches_transformers_generate_order():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    config = SamplingConfig(0.7, top_k=10, top_p=0.8)
    expected = LogitsProcessorList(
        [TemperatureLogitsWarper(0.7), TopKLogitsWarper(10), TopPLogitsWarper(0.8)]
    )(None, logits.float())
    probs = logits_to_probs(logits, config)
    assert probs.dtype == torch.float32
    torch.testing.assert_close(probs, torch.softmax(expected, -1))
    assert ((probs > 0).sum(-1) <= 10).all()


def test_temperature_zero_is_one_hot_argmax():
    logits = torch.tensor([[0.1, 3.0, 2.9], [5.0, -1.0, 0.0]])
    probs = logits_to_probs(logits, SamplingConfig(0.0))
    assert probs.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(temperature=-1),
        dict(temperature=float("nan")),
        dict(top_k=0),
        dict(top_p=0.0),
        dict(top_p=1.5),
    ],
)
def test_bad_sampling_config_is_rejected(kwargs):
    with pytest.raises(ValueError):
        SamplingConfig(**kwargs)


def test_verify_accepts_everything_when_draft_equals_target():
    p = torch.softmax(torch.randn(4, 8), -1)
    draft = torch.tensor([1, 2, 3])
    v = verify(draft, p[:3], p, torch.Generator().manual_seed(0))
    assert v.n_accepted == 3 and v.bonus
    assert v.accept_prob == pytest.approx([1.0, 1.0, 1.0])
    torch.testing.assert_close(v.next_dist, p[3])  # the bonus comes from p


def test_verify_rejects_a_token_the_target_never_picks():
    p = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    q = torch.tensor([[1.0, 0.0, 0.0]])
    v = verify(torch.tensor([0]), q, p, torch.Generator().manual_seed(0))
    assert v.n_accepted == 0 and v.next_token == 1
    assert v.accept_prob == [0.0] and v.p_x == [0.0] and v.q_x == [1.0]


def test_residual_with_no_mass_falls_back_to_p():
    p = torch.tensor([0.2, 0.3, 0.5])
    torch.testing.assert_close(residual(p, p.clone()), p)
    r = residual(p, torch.tensor([0.5, 0.3, 0.2]))
    torch.testing.assert_close(r, torch.tensor([0.0, 0.0, 1.0]))
    assert not torch.isnan(residual(torch.zeros(3), torch.zeros(3))).any()


def test_deterministic_draft_accepts_with_probability_p():
    """q one-hot (prompt lookup): accept x with probability p(x); the residual drops x."""
    p = torch.tensor([[0.3, 0.7, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    g = torch.Generator().manual_seed(1)
    n, accepted, replacements = 20_000, 0, torch.zeros(3)
    for _ in range(n):
        v = verify(torch.tensor([1]), None, p, g)
        accepted += v.n_accepted
        if not v.n_accepted:
            replacements[v.next_token] += 1
    assert accepted / n == pytest.approx(0.7, abs=0.015)
    assert replacements[1] == 0 and replacements[2] == 0  # p with x removed is all on token 0


def test_vocab_mismatch_pads_q():
    """A target with more rows than the draft (Qwen2.5 7B vs 0.5B): q is zero-padded."""
    p = torch.softmax(torch.randn(2, 10), -1)
    q = torch.softmax(torch.randn(1, 8), -1)
    v = verify(torch.tensor([3]), q, p, torch.Generator().manual_seed(0))
    assert v.next_dist.shape == (10,)
    assert v.q_x[0] == pytest.approx(q[0, 3].item())


def test_verify_greedy_emits_argmax_at_first_mismatch():
    logits = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [5.0, 0.0, 0.0], [0.0, 5.0, 0.0]])
    v = verify_greedy(torch.tensor([1, 2, 1]), logits)
    assert (v.n_accepted, v.next_token) == (2, 0)
    v = verify_greedy(torch.tensor([1, 2, 0]), logits)
    assert (v.n_accepted, v.next_token, v.bonus) == (3, 1, True)


def test_empty_draft_is_a_plain_target_step():
    p = torch.softmax(torch.randn(1, 5), -1)
    v = verify(torch.empty(0, dtype=torch.long), None, p, torch.Generator().manual_seed(0))
    assert v.n_accepted == 0 and v.bonus and v.k == 0
    torch.testing.assert_close(v.next_dist, p[0])


def test_first_token_samples_follow_p():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q = torch.tensor([0.1, 0.1, 0.4, 0.4])
    samples = first_token_samples(p, q, 200_000, g)
    freq = torch.bincount(samples, minlength=4).float() / samples.numel()
    torch.testing.assert_close(freq, p, atol=0.005, rtol=0)
