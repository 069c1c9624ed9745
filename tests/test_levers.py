"""scripts/levers.py, checked on the CPU: its passes build every tensor on the model's device
(with the default device set to "meta", a tensor built without one meets the model's CPU tensors
and raises, as a CPU tensor would on a GPU), and each timed pass sits between CUDA syncs."""

import importlib.util
from pathlib import Path

import pytest
import torch

from specdemo.runtime.lm import cut_head

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "levers.py"


@pytest.fixture(scope="module")
def levers():
    spec = importlib.util.spec_from_file_location("levers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_levers_build_every_tensor_on_the_models_device(levers, pair, meta_default):
    context = list(range(3, 35))
    head = cut_head(pair.draft, 64)
    times = [
        levers.step_time(pair.target, context, 5),
        levers.step_time(pair.target, context, 1, static=True),
        levers.step_time(pair.draft, context, 1, head=head),
    ]
    assert all(t > 0 for t in times)
    shares = levers.agreement(pair, [64, len(pair.tokenizer)], n_new=4)
    assert all(0 <= share <= 1 for share in shares.values())


def test_each_timed_pass_sits_between_cuda_syncs(levers, monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    levers.timed(lambda: events.append("pass"), "cuda", repeats=3)
    # The warm-up's work is waited for before the first timed pass starts.
    assert events == ["pass", "sync"] + ["sync", "pass", "sync"] * 3
