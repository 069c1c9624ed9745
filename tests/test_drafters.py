"""drafters.py: prompt lookup, adaptive k, cache rollback and the reduced draft head."""

import torch
from conftest import tiny_model

import specdemo
from specdemo.drafters import LookupDrafter, ModelDrafter
from specdemo.sampling import SamplingConfig


def test_lookup_proposes_what_followed_the_latest_match():
    drafter = LookupDrafter(max_ngram=2)
    draft, q = drafter.propose([5, 6, 7, 8, 1, 5, 6, 9, 4, 5, 6], k=3)
    assert q is None and draft.tolist() == [9, 4, 5]  # latest "5 6" is followed by 9 4 5
    assert drafter.propose([1, 2, 3], k=3)[0].numel() == 0  # no match, no draft


def test_lookup_copies_a_rewrite_prompt(tiny_qwen):
    """On copy-heavy text the lookup drafter proposes long runs the target accepts."""
    prompt = [7, 8, 9, 10, 11, 12, 13, 14, 7, 8]
    result = specdemo.generate(
        tiny_qwen, None, prompt, k=4, temperature=0, max_new_tokens=12, drafter="lookup"
    )
    assert result.stats.drafted > 0


def test_adaptive_k_drafts_fewer_tokens_when_unsure():
    model = tiny_model("qwen2", seed=3)
    with torch.no_grad():
        model.lm_head.weight.mul_(1 / 8)  # flat draft distributions: top probability is low
    sampling = SamplingConfig(1.0)
    g = torch.Generator().manual_seed(0)
    fixed = ModelDrafter(model, sampling, g)
    adaptive = ModelDrafter(model, sampling, g, adaptive=True, threshold=0.5)
    assert fixed.propose([1, 2, 3], k=6)[0].numel() == 6
    draft, q = adaptive.propose([1, 2, 3], k=6)
    assert draft.numel() == 1 and q.shape[0] == 1  # stops after the first unsure token


def test_model_drafter_rolls_back_its_cache(tiny_qwen):
    drafter = ModelDrafter(tiny_qwen, SamplingConfig(0.0))
    context = [1, 2, 3, 4]
    first, _ = drafter.propose(context, k=4)
    assert drafter.cache.get_seq_length() == len(context) + 3  # the last draft is not fed
    # Pretend the target kept two drafts and replaced the third.
    context = context + first[:2].tolist() + [99]
    again, _ = drafter.propose(context, k=2)
    assert drafter.fed == context + again[:1].tolist()
    fresh, _ = ModelDrafter(tiny_qwen, SamplingConfig(0.0)).propose(context, k=2)
    assert again.tolist() == fresh.tolist()


def test_reduced_draft_head_keeps_greedy_exact(tiny_qwen):
    """A draft head over the first 64 of 256 rows: q is 0 elsewhere, output unchanged."""
    draft = tiny_model("qwen2", seed=0)
    prompt = [1, 2, 3, 4, 5]
    expected = specdemo.generate(
        tiny_qwen, None, prompt, k=0, temperature=0, max_new_tokens=20, drafter="lookup"
    ).tokens
    sampling = SamplingConfig(0.0)
    drafter = ModelDrafter(draft, sampling, head_rows=64)
    draft_tokens, _ = drafter.propose(prompt, k=5)
    assert (draft_tokens < 64).all()
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
    from specdemo.engine import AUTO_HEAD_ROWS, make_drafter

    sampling = SamplingConfig(1.0)
    assert make_drafter("model", tiny_qwen, sampling, None, "cpu").head is None
    big = tiny_model("qwen2", seed=0, vocab=3 * AUTO_HEAD_ROWS, layers=1)
    drafter = make_drafter("model", big, sampling, None, "cpu")
    assert drafter.head.weight.shape[0] == AUTO_HEAD_ROWS
    assert drafter.head.weight.data_ptr() == big.lm_head.weight.data_ptr()  # a view, no copy
    assert make_drafter("model", big, sampling, None, "cpu", head_rows=0).head is None
