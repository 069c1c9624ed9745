"""sampling.py: warping, the exact sampler, the residual, rows that are not distributions."""

import pytest
import torch
from transformers import GenerationConfig

from specdemo.judge.sampling import SamplingConfig, logits_to_probs, residual, sample
from specdemo.judge.verify import chain_first_tokens, verify


@pytest.mark.parametrize(
    "config",
    [SamplingConfig(0.7, top_k=10, top_p=0.8), SamplingConfig(1.3, top_p=0.5), SamplingConfig(1.0)],
)
def test_warping_matches_the_processors_transformers_generate_builds(config, tiny_qwen):
    """p is softmax over exactly the warpers `generate(do_sample=True, ...)` would apply."""
    logits = torch.randn(3, 256, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    generation_config = GenerationConfig(
        do_sample=True,
        temperature=config.temperature,
        top_k=config.top_k or 0,
        top_p=config.top_p or 1.0,
    )
    processors = tiny_qwen._get_logits_processor(
        generation_config=generation_config, input_ids_seq_length=1, device="cpu"
    )
    expected = torch.softmax(processors(torch.zeros(3, 1, dtype=torch.long), logits.float()), -1)
    probs = logits_to_probs(logits, config)
    assert probs.dtype == torch.float32
    torch.testing.assert_close(probs, expected)
    if config.top_k:
        assert ((probs > 0).sum(-1) <= config.top_k).all()


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


def test_residual_with_no_mass_falls_back_to_p():
    p = torch.tensor([0.2, 0.3, 0.5])
    torch.testing.assert_close(residual(p, p.clone()), p.double())
    r = residual(p, torch.tensor([0.5, 0.3, 0.2]))
    torch.testing.assert_close(r, torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    assert not torch.isnan(residual(torch.zeros(3), torch.zeros(3))).any()


# ---------------------------------------------------------------- sample(), directly


def sample_with_u(probs: torch.Tensor, u: float, monkeypatch) -> int:
    """sample() with its uniform draw forced to `u`."""
    monkeypatch.setattr(
        torch, "rand", lambda shape, **kw: torch.full(shape, u, dtype=torch.float64)
    )
    return sample(probs[None], None).item()


@pytest.mark.parametrize("u", [0.0, 1e-300, 0.5, 1 - 2**-53])
def test_sample_never_draws_a_zero_probability_token(u, monkeypatch):
    """Masked rows (leading, inner and trailing zeros), at both ends of the uniform's range."""
    probs = torch.tensor([0.0, 0.0, 0.3, 0.0, 0.7, 0.0, 0.0])
    token = sample_with_u(probs, u, monkeypatch)
    assert probs[token] > 0
    # u = 0 picks the first allowed token, u just below 1 the last one.
    if u == 0.0:
        assert token == 2
    if u == 1 - 2**-53:
        assert token == 4


def test_sample_at_the_top_of_an_unnormalised_row_stays_on_the_last_allowed_token(monkeypatch):
    """u * total rounds up to total for some totals; the draw must still not pass the CDF's end."""
    for total in (0.1, 0.3, 0.7, 1.0 + 1e-7, 3.0):
        probs = torch.tensor([total / 3, 0.0, 2 * total / 3, 0.0, 0.0], dtype=torch.float64)
        assert sample_with_u(probs, 1 - 2**-53, monkeypatch) == 2


def test_sample_splits_ties_evenly_and_a_single_token_row_always_wins():
    g = torch.Generator().manual_seed(0)
    tied = torch.tensor([[0.0, 0.25, 0.25, 0.25, 0.25, 0.0]])
    draws = sample(tied, g, n=80_000)[0]
    freq = torch.bincount(draws, minlength=6).double() / draws.numel()
    torch.testing.assert_close(freq, tied[0].double(), atol=0.006, rtol=0)
    one = torch.zeros(1, 1000)
    one[0, 617] = 1e-30  # a single allowed token, however small its unnormalised mass
    assert set(sample(one, g, n=1000)[0].tolist()) == {617}


@pytest.mark.parametrize(
    "row", [[0.0, 0.0, 0.0], [0.2, float("nan"), 0.8], [0.5, float("inf"), 0.5]]
)
def test_a_row_that_is_not_a_distribution_raises_instead_of_emitting_a_token(row):
    probs = torch.tensor([row])
    assert sample(probs, torch.Generator().manual_seed(0)).item() == -1
    p = torch.tensor([row, [0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match="not finite"):
        verify(torch.tensor([1]), None, p, torch.Generator().manual_seed(0))
    q = torch.tensor([row])
    with pytest.raises(ValueError, match="not finite"):
        verify(torch.tensor([1]), q, torch.softmax(torch.randn(2, 3), -1))
    with pytest.raises(ValueError):
        chain_first_tokens(torch.tensor(row), None, 10)


def test_residual_mass_below_the_old_cutoff_is_still_the_residual():
    """A residual of mass 1e-9 is real probability: it is normalised, not replaced by p."""
    p = torch.tensor([0.5, 0.5 - 1e-9, 1e-9], dtype=torch.float64)
    q = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    torch.testing.assert_close(residual(p, q), torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
