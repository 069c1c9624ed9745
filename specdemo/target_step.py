"""How the target model runs its passes and keeps its KV cache.

A target step object runs the target's three passes: ``run`` (the prefill, and the plain
one-token step of the target alone), ``verify`` (a round's rows: the chain's 1 + K, or a
fishbone's rows under its tree mask, the logits of every row), and the rollback to what was
kept (``crop`` for a chain, ``keep`` for a tree's kept path). ``EagerTargetStep`` is
transformers' own path (``lm.forward`` and ``lm.tree_forward`` on a ``DynamicCache``).
``StaticTargetStep`` runs the same passes on fixed buffers, as the draft's static step does
(``draft_step``): each pass has fixed shapes per row count, reads the cache's length as a tensor
(a Python int would be frozen by a capture) and builds its mask on the device, so with
``graph=True`` on CUDA each pass a request uses is captured once per row count, on first use,
and replayed. Every mode computes the same logits up to rounding: a captured or batched pass may
add in another order (on an H200 graph and eager differed by 2.3% of the largest logit and
flipped an argmax, docs/bench/gpu-smoke-h200.md), so the exactness of what is sampled holds in
each mode, and greedy identity between modes holds only where no near-tie rounds the other way.
The mode: `target_step=`, else $SPECDEMO_TARGET_STEP, else eager (DEFAULT_TARGET_STEP); "auto"
is eager off CUDA and measured on CUDA (``target_profile``).
"""

import contextlib
import os
import threading

import torch

from specdemo.draft_step import STEPS, EagerDraftStep, StaticDraftStep, resolve_step
from specdemo.lm import drop_last, forward, input_ids, tree_forward, tree_layout
from specdemo.tree import keep_rows, sliding

TARGET_STEPS = STEPS  # the draft's modes
ENV_TARGET_STEP = "SPECDEMO_TARGET_STEP"
# Unset, the target runs eager on every device: the captured target's speed is not measured on
# a GPU (docs/BENCHMARKS.md), and each ZeroGPU call, a fresh fork, would pay its captures again
# (``app.page.gpu`` asks for them in its budget), so "auto" and "graph" are asked for, never
# assumed.
DEFAULT_TARGET_STEP = "eager"


def resolve_target_step(step: str | None, device) -> str:
    """The target step mode asked for: `step`, else $SPECDEMO_TARGET_STEP, else
    DEFAULT_TARGET_STEP (``draft_step.resolve_step``): "graph" off CUDA runs "static", "auto"
    there runs "eager", and "auto" on CUDA is left for ``target_profile.target_step_for`` to
    measure."""
    step = step or os.environ.get(ENV_TARGET_STEP) or DEFAULT_TARGET_STEP
    return resolve_step(step, device, ENV_TARGET_STEP, "target step")


def make_target_step(model, step: str | None = None):
    """The target step object for `model` in a mode that needs no measuring; "auto" on CUDA is
    ``target_profile.target_step_for``'s to choose."""
    step = resolve_target_step(step, model.device)
    if step == "auto":
        raise ValueError('"auto" on CUDA is measured: build the step with target_step_for')
    if step == "eager":
        return EagerTargetStep(model)
    return StaticTargetStep(model, graph=step == "graph")


_idle_lock = threading.Lock()


@contextlib.contextmanager
def held_step(model, step: str):
    """A target step object in `step` mode (resolved: not "auto") for one request, empty: one
    a request before it gave back where there is one, its static buffers and any CUDA graphs it
    captured kept (a graph is captured once per model, mode and row count in a process, not
    once per request), else a new one. It goes back to the model's idle ones when the block
    ends; requests at once each hold their own."""
    with _idle_lock:
        idle = model.__dict__.setdefault("_specdemo_idle_steps", {}).setdefault(step, [])
        runner = idle.pop() if idle else None
    if runner is None:
        runner = make_target_step(model, step)
    else:
        runner.reset()
    try:
        yield runner
    finally:
        with _idle_lock:
            idle.append(runner)


class EagerTargetStep(EagerDraftStep):
    """transformers' dynamic cache, every pass dispatched op by op."""

    def __init__(self, model):
        super().__init__(model)
        self.past = 0  # tokens in the cache before the last verify pass

    def verify(self, tokens: list[int] | torch.Tensor, parents: list[int] | None = None):
        """Feed a round's rows after the cache in one pass: a chain (`parents` None) or a tree
        (``lm.tree_forward``); the (rows, vocab) logits of every row. The cache holds every row
        until ``crop`` or ``keep`` drops the rejected ones."""
        self.past = self.length
        if parents is None:
            logits, self.cache = forward(self.model, tokens, self.cache, n_logits=len(tokens))
        else:
            logits, self.cache = tree_forward(self.model, tokens, parents, self.cache)
        self.length += len(tokens)
        return logits

    def crop(self, n: int) -> None:
        """Forget the last `n` tokens (a chain's rejected drafts)."""
        drop_last(self.cache, n)
        self.length -= max(n, 0)

    def keep(self, rows: list[int]) -> None:
        """Keep the prefix and the last pass's `rows` (ascending, the root first), as if those
        tokens had been fed one after another (``tree.keep_rows``, in place, on a dynamic or a
        static cache)."""
        keep_rows(self.cache, [*range(self.past), *(self.past + r for r in rows)])
        self.length = self.past + len(rows)


class StaticTargetStep(StaticDraftStep):
    """The target's cache in fixed buffers; with `graph` (CUDA only) every pass is a CUDA graph,
    one per row count (a chain's, and a tree's with its layout as an input), captured on first
    use. Each pass of several rows is fed its mask (``static_mask``), a chain's causal one too.

    A chain's rollback moves the length; a tree's moves the kept rows down in place (``keep``,
    ``tree.keep_rows``), so the buffers keep their addresses. The key of a pass (``replayed``):
    its row count for a chain (one row is the plain step's graph), ("tree", rows) for a tree.
    """

    def __init__(self, model, graph: bool = False, capacity: int | None = None):
        super().__init__(model, None, graph, capacity)
        self.past = 0
        if sliding(self.cache):
            raise ValueError("a static target cache needs full attention in every layer")

    def verify(self, tokens: list[int] | torch.Tensor, parents: list[int] | None = None):
        n = len(tokens)
        self.check_room(n)
        self.past = self.length
        ids = input_ids(self.model, tokens)
        if parents is not None:  # the tree's layout is built on the host: one copy each
            key, fn = ("tree", n), self.tree_pass
            inputs = (ids, *(t.to(ids.device) for t in tree_layout(parents, "cpu")))
        else:
            key, fn, inputs = n, self.one_token if n == 1 else self.chain_pass, (ids,)
        logits = self.replayed(key, fn, inputs)
        if logits is None:
            logits = fn(*inputs)
        self.length += n
        return logits

    def chain_pass(self, ids: torch.Tensor) -> torch.Tensor:
        """A chain's verify pass as captured: the (n, vocab) logits of `ids` (1, n), under a
        causal mask made here (transformers' own would read the length back to the host)."""
        n = ids.shape[-1]
        seen = torch.ones((n, n), dtype=torch.bool, device=ids.device).tril()
        return self.tree_pass(ids, seen, torch.arange(n, device=ids.device))

    def tree_pass(self, ids: torch.Tensor, seen: torch.Tensor, depth: torch.Tensor):
        """A tree's verify pass as captured: the (n, vocab) logits of `ids` (1, n), row r at
        position length + depth[r], seeing the prefix and the rows `seen` (n, n) gives it."""
        dtype = next(self.model.parameters()).dtype
        length = self.cache.get_seq_length()  # a tensor once the buffers exist
        mask, positions = static_mask(seen, depth, length, self.capacity, dtype)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, cache=self.cache,
            use_cache=True, logits_to_keep=ids.shape[-1],
        )  # fmt: skip
        return out.logits[0]

    keep = EagerTargetStep.keep  # ``tree.keep_rows`` writes in place: the buffers stay put


def static_mask(seen: torch.Tensor, depth: torch.Tensor, length, capacity: int, dtype):
    """A pass's additive mask over a static cache's every slot, and its positions, computed
    on the device from the cache's `length` (a tensor: no value is read back to the host):
    ((1, 1, n, capacity) mask, (1, n) positions). Row r sees the slots before `length` and the
    slots length + j of the rows j that `seen` (n, n) gives it; stale slots beyond are masked."""
    n = seen.shape[0]
    row = torch.arange(capacity, device=seen.device) - length  # (capacity,) the row a slot holds
    in_pass = (row >= 0) & (row < n)
    visible = (row < 0)[None] | (seen.index_select(1, row.clamp(0, n - 1)) & in_pass[None])
    mask = torch.zeros(visible.shape, dtype=dtype, device=seen.device)
    mask = mask.masked_fill(~visible, torch.finfo(dtype).min)[None, None]  # (1, 1, n, capacity)
    return mask, (depth + length)[None]
