"""drafters.py: prompt lookup and its index, the hybrid, adaptive k, cache rollback and the
reduced draft head."""

import random

import pytest
import torch
from conftest import ToyLM, ToyStaticCache, tiny_model, toy_tables

import specdemo
from specdemo.decode.engine import make_generator, speculative_generate
from specdemo.draft import draft_vocab
from specdemo.draft.drafters import (
    HYBRID_MIN_NGRAM,
    HybridDrafter,
    LookupDrafter,
    ModelDrafter,
    NgramIndex,
    make_drafter,
)
from specdemo.judge.sampling import SamplingConfig
from specdemo.runtime import steps


def reference_lookup(context: list[int], k: int, max_ngram: int, min_ngram: int) -> list[int]:
    """Prompt lookup by a plain scan: longest n first, latest earlier occurrence first."""
    n_ctx = len(context)
    for n in range(min(max_ngram, n_ctx - 1), min_ngram - 1, -1):
        tail = context[n_ctx - n :]
        for start in range(n_ctx - n - 1, -1, -1):
            if context[start : start + n] == tail:
                return context[start + n : start + n + k]
    return []


def test_lookup_proposes_what_followed_the_latest_match():
    drafter = LookupDrafter(max_ngram=2)
    proposal = drafter.propose([5, 6, 7, 8, 1, 5, 6, 9, 4, 5, 6], k=3)
    assert proposal.q is None and proposal.tokens.tolist() == [9, 4, 5]  # latest "5 6": 9 4 5
    assert proposal.draft_steps == 0
    assert drafter.propose([1, 2, 3], k=3).tokens.numel() == 0  # no match, no draft


@pytest.mark.parametrize("max_ngram, min_ngram", [(3, 1), (3, 3), (4, 2), (1, 1)])
def test_lookup_index_matches_a_plain_scan_as_the_context_grows(max_ngram, min_ngram):
    """Random contexts over 1-5 token ids (so repeats and self-overlapping matches abound), grown
    one token or one accepted block at a time, from a single token; one drafter per generation,
    and one reused across generations and shown other texts now and then, which must notice and
    start over."""
    rng = random.Random(max_ngram * 10 + min_ngram)
    reused = LookupDrafter(max_ngram, min_ngram)
    for _ in range(150):
        fresh = LookupDrafter(max_ngram, min_ngram)
        vocab = rng.randint(1, 5)
        context = [rng.randrange(vocab)]
        while len(context) < 40:
            k = rng.randint(0, 6)
            expected = reference_lookup(context, k, max_ngram, min_ngram)
            for drafter in (fresh, reused):
                assert drafter.propose(context, k).tokens.tolist() == expected, context
            if rng.random() < 0.2:  # another text of the same length: the reused one starts over
                other = list(context)
                other[rng.randrange(len(other))] = rng.randrange(vocab + 1)
                expected = reference_lookup(other, k, max_ngram, min_ngram)
                assert reused.propose(other, k).tokens.tolist() == expected, other
            context = context + [rng.randrange(vocab) for _ in range(rng.choice([1, 1, 2, 5]))]


def test_lookup_index_starts_over_on_a_context_that_does_not_extend_it():
    index = NgramIndex(max_ngram=2, min_ngram=2)
    assert index.find([1, 2, 3, 1, 2]) == (2, 2)  # "1 2" ended at 2 before the suffix
    assert index.find([4, 2, 3, 1, 2]) is None  # same length, another text: no stale "1 2"
    assert index.find([9, 9, 9]) == (2, 2)  # shorter: rebuilt
    assert index.find([9, 9, 9, 5, 9, 9]) == (2, 3)  # grown: the latest "9 9" before the suffix


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
    assert proposal.draft_steps == 1


@pytest.mark.parametrize("step", ["eager", "static"])
def test_model_drafter_rolls_back_its_cache(step, monkeypatch):
    """After a rejection the draft's cache is cropped to the accepted text, not re-prefilled:
    the toy's cache holds its tokens, so the test reads exactly what it holds. A static cache
    (a fixed buffer whose crop only moves its length) starts over, larger, when a context
    outgrows it: 10 slots hold the first round, not the second."""
    monkeypatch.setattr(steps, "static_cache", lambda _, capacity: ToyStaticCache(capacity))
    monkeypatch.setattr(steps, "FIRST_CAPACITY", 10)
    table, _ = toy_tables(8)
    draft = ToyLM(table)
    drafter = ModelDrafter(draft, SamplingConfig(0.0), step=step)
    context = [1, 2, 3, 4]
    first = drafter.propose(context, k=4)
    assert first.draft_steps == 4
    assert drafter.step.cache.tokens == context + first.tokens[:3].tolist()  # last one not fed
    # Pretend the target kept two drafts and replaced the third.
    context = context + first.tokens[:2].tolist() + [(first.tokens[2].item() + 1) % 8]
    again = drafter.propose(context, k=4)
    assert drafter.step.cache.tokens == context + again.tokens[:3].tolist()
    assert drafter.step.length == len(context) + 3
    fresh = ModelDrafter(draft, SamplingConfig(0.0)).propose(context, k=4)
    assert again.tokens.tolist() == fresh.tokens.tolist()
    if step == "static":
        assert drafter.step.capacity == 20


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


def test_make_drafter_cuts_a_ranked_vocabulary_to_its_most_frequent_ids(tiny_qwen, monkeypatch):
    """The default head keeps the ranking's rows, its most frequent ids (a copy of those rows,
    shared by every drafter), and learns the ids of its own text; a vocabulary the ranking does
    not rank keeps its full head."""
    sampling = SamplingConfig(1.0)
    assert make_drafter("model", tiny_qwen, sampling, None, "cpu").head is None
    big = tiny_model("qwen2", seed=0, vocab=600, layers=1)
    assert make_drafter("model", big, sampling, None, "cpu").head is None  # not ranked
    ranked = tuple(range(599, 0, -3))  # 200 ids, none of them among the first rows
    ranking = draft_vocab.Ranking(600, ranked, 150)
    monkeypatch.setattr(draft_vocab, "ranking", lambda: ranking)
    drafter = make_drafter("model", big, sampling, torch.Generator().manual_seed(0), "cpu")
    assert drafter.head_rows == 150 and set(drafter.head.ids.tolist()) == set(ranked[:150])
    weight = big.lm_head.weight
    torch.testing.assert_close(drafter.head.weight, weight[drafter.head.ids])
    context = [1, 2, 3, 1, 599]  # 1, 2 and 3 lie outside the ranked rows
    assert drafter.covers(599) and not drafter.covers(1) and not drafter.covers(ranked[150])
    proposals = [drafter.propose(context, 6)]
    assert drafter.covers(1) and drafter.covers(3) and not drafter.covers(ranked[150])
    held = set(ranked[:150]) | {1, 2, 3}
    outside = torch.ones(600, dtype=torch.bool)
    outside[list(held)] = False
    for _ in range(30):
        proposals.append(drafter.propose(context, 6))
    drafted = {t for proposal in proposals for t in proposal.tokens.tolist()}
    assert drafted <= held and drafted & {1, 2, 3}  # the text's own ids get proposed too
    for proposal in proposals:
        assert proposal.q.shape == (6, 600)  # spread onto the vocabulary, 0 where it holds none
        assert proposal.q[:, outside].abs().sum() == 0
        assert proposal.q.sum(-1).sub(1).abs().max() < 1e-5
        for x, row in zip(proposal.tokens.tolist(), proposal.q, strict=True):
            assert row[x] > 0  # q of each drafted token is where it was drawn
    assert make_drafter("model", big, sampling, None, "cpu", head_rows=0).head is None
    other = make_drafter("model", big, sampling, None, "cpu").head
    assert other.weight.data_ptr() == drafter.head.weight.data_ptr()  # one copy per process
    assert not other.covers(1)  # what a drafter learns stays its own


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


def test_hybrid_copies_after_a_long_enough_match_else_asks_the_model():
    draft = ToyLM(toy_tables(8)[1])
    drafter = make_drafter("hybrid", draft, SamplingConfig(1.0), torch.Generator(), "cpu")
    assert isinstance(drafter, HybridDrafter) and HYBRID_MIN_NGRAM == 3
    assert drafter.lookup.index.min_ngram == HYBRID_MIN_NGRAM
    repeats = [1, 2, 3, 4, 5, 1, 2, 3]  # "1 2 3" occurred before: copy what followed
    assert drafter.sources(repeats) == ("lookup", "model")
    copied = drafter.propose(repeats, k=3)
    assert (copied.tokens.tolist(), copied.q, copied.draft_steps, copied.source) == (
        [4, 5, 1], None, 0, "lookup",
    )  # fmt: skip
    only_two = [1, 2, 3, 4, 5, 6, 2, 3]  # "2 3" repeats, but a 2-token match does not count
    assert drafter.sources(only_two) == ("model",)
    guessed = drafter.propose(only_two, k=3)
    assert guessed.source == "model" and guessed.draft_steps == 3 and guessed.q.shape == (3, 8)
    with pytest.raises(ValueError, match="needs a draft model"):
        make_drafter("hybrid", None, SamplingConfig(1.0), None, "cpu")


class Spy:
    """Passes a drafter's proposals on, keeping each with the context and generator state that
    produced it."""

    def __init__(self, drafter, generator):
        self.drafter, self.generator, self.seen = drafter, generator, []

    def sources(self, context):
        return self.drafter.sources(context)

    def propose(self, context, k, source=None):
        state = self.generator.get_state()
        proposal = self.drafter.propose(context, k, source)
        self.seen.append((list(context), k, state, proposal))
        return proposal


def test_hybrid_keeps_the_draft_cache_in_step_through_lookup_rounds():
    """After rounds whose copied tokens the draft model never saw, its proposal is the one a fresh
    draft model makes on the same context with the same random state, and its cache holds
    exactly that context: the draft is history-dependent, so a stale cache would show."""
    target_table, draft_table = toy_tables(4, seed=3)
    mix, draft_mix = toy_tables(4, seed=4)
    target, draft = ToyLM(target_table, mix=2.5 * mix), ToyLM(draft_table, mix=2.5 * draft_mix)
    sampling = SamplingConfig(1.0)
    g = make_generator(0, "cpu")
    spy = Spy(make_drafter("hybrid", draft, sampling, g, "cpu"), g)
    prompt = [0, 1, 2, 3, 0, 2, 1, 3]
    rounds = list(speculative_generate(target, spy, prompt, k=3, sampling=sampling,
                                       max_new_tokens=120, generator=g))  # fmt: skip
    sources = [r.source for r in rounds]
    assert [p.source for *_, p in spy.seen] == sources
    model_after_lookup = 0
    for i, (context, k, state, proposal) in enumerate(spy.seen):
        if proposal.source == "lookup":
            assert proposal.q is None and proposal.draft_steps == 0
            continue
        fresh = ModelDrafter(draft, sampling, torch.Generator().set_state(state))
        expected = fresh.propose(context, k)
        assert proposal.tokens.tolist() == expected.tokens.tolist()
        assert torch.equal(proposal.q, expected.q)
        model_after_lookup += i > 0 and sources[i - 1] == "lookup"
        last_model = context + proposal.tokens[:-1].tolist()
    # Lookup rounds never touch the draft's cache: it holds what the last model round left.
    assert spy.drafter.model_drafter.step.cache.tokens == last_model
    assert model_after_lookup >= 3, sources


def test_a_prefilled_drafter_proposes_with_its_own_steps_only_and_the_same_draft(pair):
    """``ModelDrafter.prefill`` feeds the context but its last token ahead of the round: the
    proposal then runs one step per draft token, and drafts what a drafter that fed the whole
    context in its first step drafts, with the same q."""
    context = list(range(3, 40))
    fresh = ModelDrafter(pair.draft, SamplingConfig(1.0), make_generator(7, "cpu"))
    primed = ModelDrafter(pair.draft, SamplingConfig(1.0), make_generator(7, "cpu"))
    fed = []
    run = primed.step.run
    primed.step.run = lambda tokens: fed.append(len(tokens)) or run(tokens)
    primed.prefill(context)
    assert fed == [len(context) - 1]
    fed.clear()
    a, b = fresh.propose(context, 3), primed.propose(context, 3)
    assert fed == [1, 1, 1]
    assert a.tokens.tolist() == b.tokens.tolist()
    torch.testing.assert_close(a.q, b.q)
