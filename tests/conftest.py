"""Shared test models: fixed-table toy LMs for exactness, tiny random-weight transformers."""

import os
from types import SimpleNamespace

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


class ToyCache:
    """Enough of a KV cache for the engine: a length that crop() shrinks."""

    def __init__(self):
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        assert tokens_to_remove < 0
        self.length += tokens_to_remove
        assert self.length >= 0


class BigramLM(torch.nn.Module):
    """A causal LM whose next-token logits are a fixed table row of the previous token."""

    def __init__(self, table: torch.Tensor, eos: int | None = None):
        super().__init__()
        self.table = table.float()  # (vocab, vocab) logits
        self.generation_config = SimpleNamespace(eos_token_id=eos)

    @property
    def device(self):
        return torch.device("cpu")

    def forward(self, input_ids, cache=None, use_cache=True, logits_to_keep=1):
        cache = cache if cache is not None else ToyCache()
        cache.length += input_ids.shape[1]
        logits = self.table[input_ids[0, -logits_to_keep:]]
        return SimpleNamespace(logits=logits[None], cache=cache)


def toy_tables(vocab: int = 6, closeness: float = 0.3, seed: int = 0):
    """(target, draft) logit tables; the draft is the target plus noise of scale `closeness`."""
    g = torch.Generator().manual_seed(seed)
    target = torch.randn(vocab, vocab, generator=g) * 1.5
    draft = target + closeness * torch.randn(vocab, vocab, generator=g) * 1.5
    return target, draft


def tiny_model(arch: str = "qwen2", seed: int = 0, vocab: int = 256, layers: int = 2):
    """A tiny random-weight causal LM of a real architecture, in float32."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    config_cls, model_cls = {
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        "llama": (LlamaConfig, LlamaForCausalLM),
    }[arch]
    config = config_cls(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=None,
    )
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    # Sharpen the output so greedy text is not a flat coin toss between near-equal logits.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    model.generation_config.eos_token_id = None
    return model


@pytest.fixture(scope="session")
def tiny_qwen():
    return tiny_model("qwen2", seed=0)


@pytest.fixture(scope="session")
def tiny_llama():
    return tiny_model("llama", seed=1)
