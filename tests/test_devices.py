"""Device discipline, checked on the CPU: every tensor the engine and the model handlers build
names its device. With the default device set to "meta", a tensor built without a device lands
there and meets the models' CPU tensors, exactly as a CPU tensor meets CUDA tensors on a GPU, so
any such tensor raises here as it would on a GPU Space."""

import pytest
import torch
from conftest import PROMPT

from specdemo import generate
from specdemo.app.page import handlers


def test_the_emulation_catches_a_tensor_built_without_a_device(pair, meta_default):
    """The check has power: a tensor without a device meets a model's tensor and fails."""
    on_model = torch.zeros(2, device=pair.target.device)
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.cat([on_model, torch.tensor([1.0])]).tolist()


@pytest.mark.parametrize("drafter", ["model", "lookup", "hybrid"])
@pytest.mark.parametrize("k", [3, "auto"])
def test_the_engine_builds_every_tensor_on_the_models_device(pair, meta_default, k, drafter):
    ids = pair.tokenizer(PROMPT)["input_ids"]
    out = generate(
        pair.target, pair.draft, ids, k=k, temperature=0.8, max_new_tokens=12, seed=1,
        drafter=drafter,
    )  # fmt: skip
    assert len(out.tokens) == 12


def test_every_model_handler_builds_every_tensor_on_the_models_device(pair, meta_default):
    outputs = [
        *handlers.generate(pair, PROMPT, max_new_tokens=12, fresh=True),
        handlers.sweep(pair, PROMPT, ks=[2], temperatures=[1.0], max_new_tokens=8),
        handlers.exactness(pair, PROMPT, n=2_000),
        handlers.exactness(pair, PROMPT, temperature=0.0, n=2_000),
        handlers.step(pair, PROMPT),
    ]
    assert all(isinstance(values, list) for values in outputs)
