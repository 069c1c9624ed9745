"""How specdemo calls a causal LM: token ids in, next-token logits and the grown KV cache out.

Every part (engine, drafters, app, bench) runs models through ``forward``; a cut output head is
a view of the model's own weights. ``Stopwatch`` is the one timer: it synchronises the device, so
on CUDA a lap is the work done, not the time to launch it.
"""

import time

import torch


def input_ids(model, tokens: list[int] | torch.Tensor) -> torch.Tensor:
    """Token ids as the (1, n) batch a causal LM takes, on the model's device."""
    if isinstance(tokens, list):
        tokens = torch.tensor(tokens, dtype=torch.long, device=model.device)
    return tokens.view(1, -1)


def forward(model, tokens: list[int] | torch.Tensor, cache, n_logits: int = 1, head=None):
    """Feed tokens after what `cache` holds; return (logits (n_logits, vocab), cache).

    With `head` (a cut output layer, see ``cut_head``) the model's base runs without its own
    head and `head` maps the last `n_logits` hidden states to logits.
    """
    ids = input_ids(model, tokens)
    if head is None:
        out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=n_logits)
        return out.logits[0], out.cache
    out = model.base_model(input_ids=ids, cache=cache, use_cache=True)
    return head(out.last_hidden_state[0, -n_logits:]), out.cache


def cut_head(model, rows: int) -> torch.nn.Linear:
    """The model's output layer cut to the first `rows` vocabulary rows, sharing its weights.

    Logits exist for those rows only, so a draft using it gives q = 0 to every other token. The
    acceptance rule stays exact (a token with q = 0 is never proposed and keeps all its p in the
    residual); only alpha can drop, when the target wants a token outside the subset.
    """
    weight = model.get_output_embeddings().weight[:rows]  # (rows, hidden), a view
    head = torch.nn.Linear(weight.shape[1], rows, bias=False, device="meta")
    head.weight = torch.nn.Parameter(weight, requires_grad=False)
    return head


def eos_ids(model) -> set[int]:
    """Every EOS id of the model's generation config (an int or a list there)."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    if eos is None:
        return set()
    return {eos} if isinstance(eos, int) else set(eos)


def drop_last(cache, n: int) -> None:
    """Remove the last `n` tokens' keys and values from a KV cache."""
    if n > 0:
        cache.crop(-n)


class Stopwatch:
    """Lap times on `device`, synchronised so that queued GPU work (CUDA, or Apple's MPS) is
    counted where it ran."""

    def __init__(self, device):
        kind = torch.device(device).type
        self.cuda, self.mps = kind == "cuda", kind == "mps"
        self.device = device
        self.last = self.start = self.now()

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        elif self.mps:
            torch.mps.synchronize()
        return time.perf_counter()

    def lap(self) -> float:
        """Seconds since the previous lap (or the start)."""
        now = self.now()
        elapsed, self.last = now - self.last, now
        return elapsed

    def total(self) -> float:
        """Seconds since the start."""
        return self.now() - self.start
