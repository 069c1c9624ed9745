"""lm.py: how every part calls a causal LM, cuts its head, reads its vocabulary and EOS ids, and
times it."""

from types import SimpleNamespace

import torch
from conftest import tiny_model

from specdemo import lm
from specdemo.vocab import vocab_size


def test_a_cut_head_gives_the_first_rows_of_the_full_logits_and_shares_the_weights():
    model = tiny_model("qwen2", seed=0, vocab=256)
    full, _ = lm.forward(model, [1, 2, 3], None, n_logits=2)
    head = lm.cut_head(model, 64)
    cut, _ = lm.forward(model, [1, 2, 3], None, n_logits=2, head=head)
    assert full.shape == (2, 256) and cut.shape == (2, 64)
    torch.testing.assert_close(cut, full[:, :64], atol=1e-5, rtol=1e-5)
    weight = model.get_output_embeddings().weight
    assert head.weight.data_ptr() == weight.data_ptr()  # a view, not a copy


def test_forward_continues_a_cache_and_drop_last_forgets_tokens():
    model = tiny_model("qwen2", seed=0)
    whole, _ = lm.forward(model, [5, 6, 7, 8], None)
    _, cache = lm.forward(model, [5, 6, 7, 9, 9], None)
    lm.drop_last(cache, 2)
    assert cache.get_seq_length() == 3
    after, cache = lm.forward(model, [8], cache)
    torch.testing.assert_close(after, whole, atol=1e-5, rtol=1e-5)
    lm.drop_last(cache, 0)
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
