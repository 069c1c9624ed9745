"""verify.py: one round's judgement: all kept, a rejection, deterministic drafts, vocab padding,
the greedy case, the first token's distribution, float64 uniforms and ratios."""

import pytest
import torch

from specdemo.judge.sampling import sample
from specdemo.judge.verify import chain_first_tokens, verify, verify_greedy


def test_verify_accepts_everything_when_draft_equals_target():
    p = torch.softmax(torch.randn(4, 8), -1)
    draft = torch.tensor([1, 2, 3])
    v = verify(draft, p[:3], p, torch.Generator().manual_seed(0))
    assert v.n_accepted == 3 and v.bonus
    assert v.accept_prob == pytest.approx([1.0, 1.0, 1.0])
    torch.testing.assert_close(v.next_dist, p[3].double())  # the bonus comes from p


def test_verify_rejects_a_token_the_target_never_picks():
    p = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    q = torch.tensor([[1.0, 0.0, 0.0]])
    v = verify(torch.tensor([0]), q, p, torch.Generator().manual_seed(0))
    assert v.n_accepted == 0 and v.next_token == 1
    assert v.accept_prob == [0.0] and v.p_x == [0.0] and v.q_x == [1.0]


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
    for seed in range(20):  # the very draw a plain target step makes with the same generator
        v = verify(torch.empty(0, dtype=torch.long), None, p, torch.Generator().manual_seed(seed))
        assert v.next_token == int(sample(p, torch.Generator().manual_seed(seed)))


def test_chain_first_tokens_follow_p():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    q = torch.tensor([0.1, 0.1, 0.4, 0.4])
    samples = chain_first_tokens(p, q, 200_000, g)
    freq = torch.bincount(samples, minlength=4).float() / samples.numel()
    torch.testing.assert_close(freq, p, atol=0.005, rtol=0)


def test_greedy_verify_refuses_nan_logits():
    logits = torch.tensor([[0.0, float("nan"), 1.0], [1.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="not finite"):
        verify_greedy(torch.tensor([2]), logits)


def test_uniforms_and_acceptance_ratios_are_float64():
    p = torch.softmax(torch.randn(3, 8), -1)
    q = torch.softmax(torch.randn(2, 8), -1)
    v = verify(torch.tensor([1, 2]), q, p, torch.Generator().manual_seed(0))
    # float32 uniforms are multiples of 2^-24; float64 ones are (almost surely) not.
    assert any((x * 2**24) % 1 for x in v.u)
    ratio = min(1.0, p[0, 1].double().item() / q[0, 1].double().item())
    assert v.accept_prob[0] == ratio
