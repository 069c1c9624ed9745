"""drafters.py: prompt lookup, adaptive k, cache rollback and the reduced draft head."""

import torch
from conftest import ToyLM, tiny_model, toy_tables

import specdemo
from specdemo.drafters import AUTO_HEAD_ROWS, LookupDrafter, ModelDrafter, make_drafter
from specdemo.sampling import SamplingConfig


def test_lookup_proposes_what_followed_the_latest_match():
    drafter = LookupDrafter(max_ngram=2)
    proposal = drafter.propose([5, 6, 7, 8, 1, 5, 6, 9, 4, 5, 6], k=3)
    assert proposal.q is None and proposal.tokens.tolist() == [9, 4, 5]  # latest "5 6": 9 4 5
    assert proposal.steps == 0
    assert drafter.propose([1, 2, 3], k=3).tokens.numel() == 0  # no match, no draft


def test_lookup_copies_a_rewrite_prompt():
    """On copy-heavy text the lookup drafter proposes long runs the target accepts."""
    # A target that copies: after token t it always says t + 1 (mod 16).
    table = torch.full((16, 16), -20.0)
    table[torch.arange(16), (torch.arange(16) + 1) % 16] = 20.0
    prompt = [7, 8, 9, 10, 11, 12, 13, 14, 7, 8]  # "7 8" was followed by "9 10 11 12" before
    result = specdemo.generate(
        ToyLM(table), None, prompt, k=4, temperature=0, max_new_tokens=12, drafter="lookup"
    )
    assert result.tokens == [9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4]
    first = result.rounds[0]
    assert first.draft == [9, 10, 11, 12] and first.n_accepted == 4  # a whole block kept
    assert result.stats.accepted >= 5 and result.stats.draft_passes == 0


def test_adaptive_k_drafts_fewer_tokens_when_unsure():
    model = tiny_model("qwen2", seed=3)
    with torch.no_grad():
        model.lm_head.weight.mul_(1 / 8)  # flat draft distributions: top probability is low
    sampling = SamplingConfig(1.0)
    g = torch.Generator().manual_seed(0)
    fixed = ModelDrafter(model, sampling, g)
    adaptive = ModelDrafter(model, sampling, g, adaptive=True, threshold=0.5)
    assert fixed.propose([1, 2, 3], k=6).tokens.numel() == 6
    proposal = adaptive.propose([1, 2, 3], k=6)
    assert proposal.tokens.numel() == 1 and proposal.q.shape[0] == 1  # stops when unsure
    assert proposal.steps == 1


def test_model_drafter_rolls_back_its_cache():
    """After a rejection the draft's cache is cropped to the accepted text, not re-prefilled:
    the toy's cache holds its tokens, so the test reads exactly what it holds."""
    table, _ = toy_tables(8)
    draft = ToyLM(table)
    drafter = ModelDrafter(draft, SamplingConfig(0.0))
    context = [1, 2, 3, 4]
    first = drafter.propose(context, k=4)
    assert first.steps == 4
    cache = drafter._cache  # read-only peek, to check the rollback
    assert cache.tokens == context + first.tokens[:3].tolist()  # the last draft is not fed
    # Pretend the target kept two drafts and replaced the third.
    context = context + first.tokens[:2].tolist() + [(first.tokens[2].item() + 1) % 8]
    again = drafter.propose(context, k=2)
    assert cache.tokens == context + again.tokens[:1].tolist()
    fresh = ModelDrafter(draft, SamplingConfig(0.0)).propose(context, k=2)
    assert again.tokens.tolist() == fresh.tokens.tolist()


def test_reduced_draft_head_keeps_greedy_exact(tiny_qwen):
    """A draft head over the first 64 of 256 rows: q is 0 elsewhere, output unchanged."""
    draft = tiny_model("qwen2", seed=0)
    prompt = [1, 2, 3, 4, 5]
    expected = specdemo.generate(
        tiny_qwen, None, prompt, k=0, temperature=0, max_new_tokens=20, drafter="lookup"
    ).tokens
    sampling = SamplingConfig(0.0)
    drafter = ModelDrafter(draft, sampling, head_rows=64)
    assert (drafter.propose(prompt, k=5).tokens < 64).all()
    tokens = [
        t
        for r in specdemo.speculative_generate(
            tiny_qwen,
            ModelDrafter(draft, sampling, head_rows=64),
            prompt,
            k=4,
            sampling=sampling,
            max_new_tokens=20,
        )
        for t in r.tokens
    ]
    assert tokens == expected


def test_make_drafter_cuts_only_large_draft_heads(tiny_qwen):
    sampling = SamplingConfig(1.0)
    assert make_drafter("model", tiny_qwen, sampling, None, "cpu").head is None
    big = tiny_model("qwen2", seed=0, vocab=3 * AUTO_HEAD_ROWS, layers=1)
    drafter = make_drafter("model", big, sampling, None, "cpu")
    assert drafter.head.weight.shape[0] == AUTO_HEAD_ROWS
    assert drafter.head.weight.data_ptr() == big.lm_head.weight.data_ptr()  # a view, no copy
    assert make_drafter("model", big, sampling, None, "cpu", head_rows=0).head is None


def test_a_draft_on_another_device_gets_its_own_generator(tiny_qwen):
    """One generator per device: a generator made for the target's device is not handed to a
    draft elsewhere; the drafter gets one on its own device, seeded from it."""
    generator = torch.Generator().manual_seed(5)
    drafter = make_drafter("model", tiny_qwen, SamplingConfig(1.0), generator, "cpu")
    assert drafter.generator is generator  # same device: shared

    class CudaGenerator:  # what a target on a GPU would hold; no GPU needed to check the policy
        device = torch.device("cuda", 0)

        def initial_seed(self):
            return 5

    drafter = make_drafter("model", tiny_qwen, SamplingConfig(1.0), CudaGenerator(), "cuda")
    assert isinstance(drafter.generator, torch.Generator)
    assert drafter.generator.device == tiny_qwen.device and drafter.generator.initial_seed() == 6
