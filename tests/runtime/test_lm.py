"""lm.py: how every part calls a causal LM, cuts its head, reads its vocabulary and EOS ids, and
times it."""

from types import SimpleNamespace

import pytest
import torch
from conftest import tiny_model

from specdemo.runtime import kv, lm
from specdemo.runtime.lm import vocab_size


def test_a_cut_head_gives_the_first_rows_of_the_full_logits_and_shares_the_weights():
    model = tiny_model("qwen2", seed=0, vocab=256)
    full, _ = lm.forward(model, [1, 2, 3], None, n_logits=2)
    head = lm.cut_head(model, 64)
    cut, _ = lm.forward(model, [1, 2, 3], None, n_logits=2, head=head)
    assert full.shape == (2, 256) and cut.shape == (2, 64)
    torch.testing.assert_close(cut, full[:, :64], atol=1e-5, rtol=1e-5)
    weight = model.get_output_embeddings().weight
    assert head.weight.data_ptr() == weight.data_ptr()  # a view, not a copy


def test_a_head_over_any_ids_scores_those_ids_and_maps_back_to_them():
    """Row i of a head over chosen ids is the full logit of ids[i]; sampled rows map back to
    token ids (-1, a row with no mass, stays -1) and probabilities spread to the vocabulary."""
    model = tiny_model("qwen2", seed=0, vocab=256)
    full, _ = lm.forward(model, [1, 2, 3], None, n_logits=2)
    ids = torch.tensor([200, 7, 31, 255, 64])
    head = lm.head_over(model, ids)
    assert head.ids.tolist() == [7, 31, 64, 200, 255] and head.rows == 5  # kept ascending
    cut, _ = lm.forward(model, [1, 2, 3], None, n_logits=2, head=head)
    torch.testing.assert_close(cut, full[:, head.ids], atol=1e-5, rtol=1e-5)
    assert head.tokens(torch.tensor([0, 3, -1])).tolist() == [7, 200, -1]
    probs = torch.softmax(cut, -1)
    spread = head.spread(probs)
    assert spread.shape == (2, 256) and spread.device == probs.device
    torch.testing.assert_close(spread[:, head.ids], probs)
    assert spread.sum(-1).tolist() == pytest.approx(probs.sum(-1).tolist())
    assert head.covers(64) and head.covers(255) and not head.covers(8) and not head.covers(0)


def test_forward_continues_a_cache_and_drop_last_forgets_tokens():
    model = tiny_model("qwen2", seed=0)
    whole, _ = lm.forward(model, [5, 6, 7, 8], None)
    _, cache = lm.forward(model, [5, 6, 7, 9, 9], None)
    kv.drop_last(cache, 2)
    assert cache.get_seq_length() == 3
    after, cache = lm.forward(model, [8], cache)
    torch.testing.assert_close(after, whole, atol=1e-5, rtol=1e-5)
    kv.drop_last(cache, 0)
    assert cache.get_seq_length() == 4


def test_vocab_size_and_eos_ids_read_the_model():
    model = tiny_model("qwen2", seed=0, vocab=256)
    assert vocab_size(model) == 256
    model.generation_config = SimpleNamespace(eos_token_id=[3, 7])
    assert lm.eos_ids(model) == {3, 7}
    model.generation_config = SimpleNamespace(eos_token_id=3)
    assert lm.eos_ids(model) == {3}
    model.generation_config = SimpleNamespace(eos_token_id=None)
    assert lm.eos_ids(model) == set()


def test_input_ids_are_a_batch_of_one_on_the_models_device():
    model = tiny_model("qwen2", seed=0)
    ids = lm.input_ids(model, [1, 2, 3])
    assert ids.shape == (1, 3) and ids.device == model.device and ids.dtype == torch.long


def test_stopwatch_laps_add_up_to_its_total():
    clock = lm.Stopwatch("cpu")
    laps = [clock.lap() for _ in range(3)]
    assert all(t >= 0 for t in laps) and sum(laps) <= clock.total()
    assert not clock.cuda


def test_a_stopwatch_on_apple_silicon_waits_for_the_mps_queue(monkeypatch):
    waits = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda: waits.append("mps"))
    clock = lm.Stopwatch("mps")
    clock.lap()
    assert clock.mps and not clock.cuda and waits == ["mps", "mps"]


def test_a_head_learns_the_ids_of_its_text_in_spare_rows_and_only_those():
    """Spare rows score -inf until filled, so q is 0 there; a learned id's row is the model's
    own; the fixed rows are shared with the head they came from, the learned ones are not."""
    model = tiny_model("qwen2", seed=0, vocab=256)
    full, _ = lm.forward(model, [1, 2, 3], None)
    base = lm.head_over(model, torch.tensor([200, 7, 31]))
    head = base.with_context(spare=2)
    before, _ = lm.forward(model, [1, 2, 3], None, head=head)
    assert before.shape == (1, 5) and torch.isinf(before[0, 3:]).all()
    assert torch.softmax(before, -1)[0, 3:].sum() == 0
    head.learn([31, 9, 9, 250, 4])  # 31 is held already; 2 spare rows take 4 and 9
    assert [head.covers(t) for t in (4, 9, 250, 31)] == [True, True, False, True]
    assert not base.covers(4)  # what one head learns stays its own
    after, _ = lm.forward(model, [1, 2, 3], None, head=head)
    torch.testing.assert_close(after[0], full[0, [7, 31, 200, 4, 9]], atol=1e-5, rtol=1e-5)
    assert head.tokens(torch.tensor([3, 4, 0])).tolist() == [4, 9, 7]
    probs = torch.softmax(after, -1)
    torch.testing.assert_close(head.spread(probs)[0, [7, 31, 200, 4, 9]], probs[0])
    assert head.weight.data_ptr() == base.weight.data_ptr()
    head.learn([250])  # no spare row left
    assert not head.covers(250)


def tied_model(seed: int = 0, vocab: int = 256):
    """A tiny Qwen2 whose output layer is its input embedding, as in the Qwen2.5 drafts."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         tie_word_embeddings=True)  # fmt: skip
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config).eval()


@pytest.mark.parametrize("tied", [True, False])
def test_ordering_rows_makes_a_head_over_any_ids_a_view_and_changes_no_output(tied):
    """order_rows moves the rows of the kept ids to the top of the output layer (and the tied
    embedding) in place: the model's logits and greedy text are what they were, a head over the
    kept ids shares the layer's storage and scores them as before, a learned id reads its own
    row, the first ids still score as the first ids, and transformers may tie the weights again."""
    model = tied_model() if tied else tiny_model("qwen2", seed=0, vocab=256)
    weight = model.get_output_embeddings().weight
    assert (model.get_input_embeddings().weight.data_ptr() == weight.data_ptr()) == tied
    text = [1, 200, 3, 250, 7]
    before, _ = lm.forward(model, text, None, n_logits=4)
    greedy = model.generate(torch.tensor([text]), max_new_tokens=8, do_sample=False)
    kept = torch.tensor([200, 7, 31, 255, 64, 0, 1])
    copied = lm.head_over(model, kept)
    assert copied.weight.data_ptr() != weight.data_ptr()  # not yet a view: a copy

    assert lm.order_rows(model, kept, chunk=2)  # swaps in chunks of 2 rows
    assert not lm.order_rows(model, kept)  # once only
    after, _ = lm.forward(model, text, None, n_logits=4)
    torch.testing.assert_close(after, before, atol=0, rtol=0)
    assert torch.equal(model.generate(torch.tensor([text]), max_new_tokens=8, do_sample=False),
                       greedy)  # fmt: skip
    head = lm.head_over(model, kept)
    assert head.weight.data_ptr() == weight.data_ptr() and head.rows == 7  # a view
    assert sorted(head.ids.tolist()) == sorted(kept.tolist())
    cut, _ = lm.forward(model, text, None, n_logits=4, head=head)
    torch.testing.assert_close(cut, before[:, head.ids], atol=1e-5, rtol=1e-5)
    context = head.with_context(4)
    context.learn([2, 200, 5])  # 200 is held already; 2 and 5 gave their rows to kept ids
    learned, _ = lm.forward(model, text, None, n_logits=4, head=context)
    torch.testing.assert_close(learned[:, 7:9], before[:, [2, 5]], atol=1e-5, rtol=1e-5)
    assert context.tokens(torch.tensor([7, 8])).tolist() == [2, 5]
    first = lm.cut_head(model, 16)
    scored, _ = lm.forward(model, text, None, n_logits=4, head=first)
    assert sorted(first.ids.tolist()) == list(range(16))
    torch.testing.assert_close(scored, before[:, first.ids], atol=1e-5, rtol=1e-5)
    model.tie_weights()
    again, _ = lm.forward(model, text, None, n_logits=4)
    torch.testing.assert_close(again, before, atol=0, rtol=0)
