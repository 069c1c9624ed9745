"""Shared test models: fixed-table toy LMs for exactness, tiny random-weight transformers; the
repository's root and the prompt the app's tests send."""

import importlib.util
import os
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Write a Python function that checks whether a number is prime."


class ToyCache:
    """A KV cache that keeps the tokens themselves: crop() drops the last ones."""

    def __init__(self):
        self.tokens: list[int] = []

    def get_seq_length(self) -> int:
        return len(self.tokens)

    def add(self, tokens: list[int]) -> None:
        self.tokens += tokens

    def crop(self, tokens_to_remove: int) -> None:
        assert tokens_to_remove < 0 and len(self.tokens) + tokens_to_remove >= 0
        del self.tokens[tokens_to_remove:]

    def keep_rows(self, rows: list[int]) -> None:
        """After a tree pass: only `rows`, in order (``kv.keep_rows``)."""
        self.tokens = [self.tokens[r] for r in rows]


class ToyStaticCache(ToyCache):
    """The toy's cache in a fixed buffer, as transformers' StaticCache: a crop only moves the
    length, so what lies beyond it is stale and must never be read; overflowing raises."""

    def __init__(self, capacity: int):
        self.buffer, self.length = [-1] * capacity, 0

    @property
    def tokens(self) -> list[int]:
        return self.buffer[: self.length]

    def add(self, tokens: list[int]) -> None:
        if self.length + len(tokens) > len(self.buffer):
            raise IndexError(f"{self.length + len(tokens)} tokens overflow {len(self.buffer)}")
        self.buffer[self.length : self.length + len(tokens)] = tokens
        self.length += len(tokens)

    def crop(self, tokens_to_remove: int) -> None:
        assert tokens_to_remove < 0 and self.length + tokens_to_remove >= 0
        self.length += tokens_to_remove


class _OneHotBase(torch.nn.Module):
    """The toy's body: position j's hidden state is [one_hot(x_j), one_hot(x_(j-1))], the
    previous token read from the cache, so what the cache holds changes the output."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab

    def forward(self, input_ids, cache=None, use_cache=True, attention_mask=None):
        cache = cache if cache is not None else ToyCache()
        before = cache.tokens[-1:] or [None]
        new = input_ids[0].tolist()
        cache.add(new)
        previous = (before + new)[: len(new)]
        if attention_mask is not None:  # a tree (lm.tree_forward): the previous token is the
            seen = attention_mask[0, 0] == 0  # last one the row sees before itself
            every, past = cache.tokens, len(cache.tokens) - len(new)
            for j in range(len(new)):
                earlier = seen[j, : past + j].nonzero()
                previous[j] = every[int(earlier[-1])] if len(earlier) else None
        hidden = torch.zeros(len(new), 2 * self.vocab)
        for j, (x, prev) in enumerate(zip(new, previous, strict=True)):
            hidden[j, x] = 1.0
            if prev is not None:
                hidden[j, self.vocab + prev] = 1.0
        return SimpleNamespace(last_hidden_state=hidden[None], cache=cache)


class ToyLM(torch.nn.Module):
    """A causal LM with fixed logit tables: next-token logits = table[x] + mix[previous token].

    With `mix` None it is a bigram model (the cache's contents do not matter); with a `mix`
    table the token two back counts, so a cache left holding a rejected draft changes p.
    The output layer is a real Linear over [one_hot(x), one_hot(prev)], so a cut head works.
    """

    def __init__(self, table: torch.Tensor, mix: torch.Tensor | None = None, eos=None):
        super().__init__()
        vocab, out = table.shape
        mix = torch.zeros(vocab, out) if mix is None else mix
        self.model = _OneHotBase(vocab)
        self.lm_head = torch.nn.Linear(2 * vocab, out, bias=False)
        with torch.no_grad():
            self.lm_head.weight.copy_(torch.cat([table, mix]).float().T)  # (out, 2 * vocab)
        self.generation_config = SimpleNamespace(eos_token_id=eos)

    @property
    def device(self):
        return torch.device("cpu")

    @property
    def base_model(self):
        return self.model

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids, cache=None, use_cache=True, logits_to_keep=1,
                attention_mask=None, position_ids=None):  # fmt: skip
        out = self.model(input_ids, cache, attention_mask=attention_mask)
        logits = self.lm_head(out.last_hidden_state[0, -logits_to_keep:])
        return SimpleNamespace(logits=logits[None], cache=out.cache)


BigramLM = ToyLM


def toy_tables(vocab: int = 6, closeness: float = 0.3, seed: int = 0):
    """(target, draft) logit tables; the draft is the target plus noise of scale `closeness`."""
    g = torch.Generator().manual_seed(seed)
    target = torch.randn(vocab, vocab, generator=g) * 1.5
    draft = target + closeness * torch.randn(vocab, vocab, generator=g) * 1.5
    return target, draft


def tiny_model(arch: str = "qwen2", seed: int = 0, vocab: int = 256, layers: int = 2, **config):
    """A tiny random-weight causal LM of a real architecture, in float32; `config` sets more of
    its config (a sliding window, say)."""
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
        **config,
    )
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    # Sharpen the output so greedy text is not a flat coin toss between near-equal logits.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    model.generation_config.eos_token_id = None
    return model


@pytest.fixture
def clean_model_env(monkeypatch):
    """No setting that chooses a pair, its precision, device or cache, and no ZeroGPU: what the
    machine running the tests has set must not choose for them."""
    for name in ("SPECDEMO_PAIR", "SPECDEMO_TARGET", "SPECDEMO_DRAFT", "SPECDEMO_PRECISION",
                 "SPECDEMO_DEVICE", "SPECDEMO_CACHE", "SPACES_ZERO_GPU"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def meta_default():
    """The default device set to "meta": a tensor built without a device lands there and meets
    the models' CPU tensors, as a CPU tensor meets CUDA tensors on a GPU, so it raises."""
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


@pytest.fixture(scope="session")
def pair():
    """The tiny local pair (random weights, toy tokenizer) in float32, loaded once per run."""
    from specdemo.models import load_pair

    return load_pair("tiny", precision="fp32")


@pytest.fixture(scope="session")
def tiny_qwen():
    return tiny_model("qwen2", seed=0)


@pytest.fixture(scope="session")
def tiny_llama():
    return tiny_model("llama", seed=1)


def load_script(name: str):
    """scripts/<name>.py as a module, for tests of its functions."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def traceable(model):
    """bitsandbytes' 4-bit weights are a Parameter subclass (``Params4bit``) that make_fx's
    tracer does not handle: its 4-bit op would fail to dispatch. For the trace they pass as plain
    Parameters, the same tensors with the same quantisation state, so the op is recorded like
    any other; their class is restored after."""
    swapped = [p for p in model.parameters() if type(p).__name__ == "Params4bit"]
    classes = [type(p) for p in swapped]
    try:
        for p in swapped:
            p.__class__ = torch.nn.Parameter
        yield
    finally:
        for p, cls in zip(swapped, classes, strict=True):
            p.__class__ = cls


@torch.no_grad()
def replay_against_eager(model, head=None, context=None, steps: int = 32, frozen=False):
    """A draft's one-token step over a static cache, traced once by ``make_fx`` and replayed
    `steps` times, against eager steps on a DynamicCache: (the largest logit difference over
    the largest logit, the largest difference in the caches' keys over the largest key). A trace
    freezes every Python value the step computes, as a CUDA graph's capture does, and reads and
    writes the cache's own buffers in place, as a replay does; so a position kept as a Python
    int would be replayed at the slot it had when traced. `frozen` passes such a position (the
    length as an int) to show that this check sees it."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from specdemo.runtime.lm import forward
    from specdemo.runtime.steps import EagerStep, StaticStep

    context = list(context or range(3, 15))
    static = StaticStep(model, head, capacity=len(context) + steps + 8)
    eager = EagerStep(model, head)
    static.run(context)
    eager.run(context)
    ids = torch.zeros((1, 1), dtype=torch.long, device=model.device)

    def step(ids):
        if not frozen:
            return forward(model, ids, static.cache, head=head)[0]
        position = torch.tensor([[static.length]], device=model.device)  # a Python int, frozen
        out = model.base_model(input_ids=ids, cache=static.cache, position_ids=position)
        hidden = out.last_hidden_state[0, -1:]
        return head(hidden) if head is not None else model.lm_head(hidden)

    with traceable(model):
        replay = make_fx(step)(ids)  # tracing runs the step once: its cache slot is undone
    static.cache.crop(-1)
    worst_logit = 0.0
    for token in [(7 * i + 5) % 200 + 3 for i in range(steps)]:
        ids.fill_(token)
        replayed, expected = replay(ids).float(), eager.run([token]).float()
        held = torch.isfinite(expected)  # a head's unfilled spare rows score -inf in both
        difference = (replayed - expected)[held].abs().max() / expected[held].abs().max()
        worst_logit = max(worst_logit, float(difference))
    n = len(context) + steps
    worst_key = max(
        float((s.keys[:, :, :n].float() - e.keys.float()).abs().max() / e.keys.abs().max())
        for s, e in zip(static.cache.layers, eager.cache.layers, strict=True)
    )
    return worst_logit, worst_key


class HostReads(TorchDispatchMode):
    """Counts the ops that read a tensor's value back to the host (``.item()``, ``nonzero``):
    inside a CUDA graph capture each would fail or freeze a value."""

    READS = ("aten._local_scalar_dense", "aten.nonzero", "aten.item")

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func).startswith(self.READS):
            self.reads.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def one_thread():
    """Tiny tensors: intra-op threads only add wake-up latency (10x slower on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
