"""How the models run their passes and keep their KV caches: one step object for the draft and
the target alike.

A step object feeds tokens after its cache (``run``: the prefill, the draft's one-token step,
the target alone's plain step), runs a round's verify pass (``verify``: a chain's 1 + K rows, or
a fishbone's rows under its tree mask, the logits of every row), and rolls back to what was kept
(``crop`` for a chain, ``keep`` for a tree's kept path, ``kv``). The draft uses the first and
the rollback; the target all of them.

``EagerStep`` is transformers' own path: a ``DynamicCache`` that grows per token, every pass
dispatched op by op. At batch 1 on a GPU that path costs host-side dispatch per layer, so a
24-layer draft costs nearly what a 28-layer target does (docs/BENCHMARKS.md, "GPU (measured on
an H200)"). ``StaticStep`` keeps the cache in fixed buffers (transformers' ``StaticCache``,
rolled back by moving its length): each pass has fixed shapes per row count, reads the cache's
length as a tensor (a Python int would be frozen by a capture) and builds its mask on the
device, so with ``graph=True`` on CUDA each pass is captured once per row count, on first use,
and replayed, one launch for all its kernels.

Every mode computes the same logits up to rounding: a captured or batched pass may add in
another order (on an H200 graph and eager differed by 2.3% of the largest logit and flipped an
argmax, docs/bench/gpu-smoke-h200.md), so the exactness of what is sampled holds in each mode,
and greedy identity between modes holds only where no near-tie rounds the other way. The mode is
a speed setting, never a change to the rule that samples.

The draft's mode: `step=`, else $SPECDEMO_DRAFT_STEP, else "auto" (whichever of eager and graph
measures faster on CUDA, eager elsewhere). The target's: `step=`, else $SPECDEMO_TARGET_STEP,
else eager (DEFAULT_TARGET_STEP). Measuring "auto" is ``modes``', which builds on this module.
"""

import contextlib
import os
import threading
import time

import torch

from specdemo.runtime.kv import drop_last, keep_rows, sliding
from specdemo.runtime.lm import forward, input_ids, tree_forward, tree_layout

STEPS = ("auto", "eager", "static", "graph")
ENV_DRAFT_STEP = "SPECDEMO_DRAFT_STEP"
ENV_TARGET_STEP = "SPECDEMO_TARGET_STEP"
# Unset, the target runs eager on every device: the captured target's speed is not measured on
# a GPU (docs/BENCHMARKS.md), and each ZeroGPU call, a fresh fork, would pay its captures again
# (``app.page.gpu`` asks for them in its budget), so "auto" and "graph" are asked for, never
# assumed.
DEFAULT_TARGET_STEP = "eager"
# Tokens a static cache holds at first; it doubles (re-prefilled, re-captured) when a context
# would outgrow it. 1,024 tokens of the 0.5B draft's cache are 12.6 MB in bf16.
FIRST_CAPACITY = 1024


def resolve_step(step: str | None, device, env: str, what: str) -> str:
    """The step mode asked for: `step`, else $`env`, else "auto". A graph needs CUDA: asked for
    on another device it runs "static", the same passes without capture; "auto" is "eager"
    there, and on CUDA left for the caller to measure. `what` names the setting in errors."""
    step = step or os.environ.get(env) or "auto"
    if step not in STEPS:
        raise ValueError(f"{what} must be one of {', '.join(STEPS)}; got {step!r}")
    if torch.device(device).type != "cuda" and step in ("graph", "auto"):
        return "static" if step == "graph" else "eager"
    return step


def resolve_draft_step(step: str | None, device) -> str:
    """The draft step mode asked for: `step`, else $SPECDEMO_DRAFT_STEP, else "auto"
    (``resolve_step``); "auto" on CUDA is left for ``modes.draft_step_for`` to measure."""
    return resolve_step(step, device, ENV_DRAFT_STEP, "draft step")


def resolve_target_step(step: str | None, device) -> str:
    """The target step mode asked for: `step`, else $SPECDEMO_TARGET_STEP, else
    DEFAULT_TARGET_STEP (``resolve_step``); "auto" on CUDA is left for
    ``modes.target_step_for`` to measure."""
    step = step or os.environ.get(ENV_TARGET_STEP) or DEFAULT_TARGET_STEP
    return resolve_step(step, device, ENV_TARGET_STEP, "target step")


def make_step(model, mode: str, head=None):
    """The step object for `model` (its output layer replaced by `head` if given) in a resolved
    `mode`: "eager", "static" or "graph"; "auto" on CUDA is ``modes``' to choose."""
    if mode == "auto":
        raise ValueError('"auto" on CUDA is measured: build the step with the modes module')
    if mode == "eager":
        return EagerStep(model, head)
    return StaticStep(model, head, graph=mode == "graph")


def make_draft_step(model, head=None, step: str | None = None):
    """The draft's step object in the mode ``resolve_draft_step`` gives."""
    return make_step(model, resolve_draft_step(step, model.device), head)


def make_target_step(model, step: str | None = None):
    """The target's step object in the mode ``resolve_target_step`` gives. A static cache with
    sliding-window layers is refused: its verify masks assume every row is kept."""
    runner = make_step(model, resolve_target_step(step, model.device))
    if runner.kind != "eager" and sliding(runner.cache):
        raise ValueError("a static target cache needs full attention in every layer")
    return runner


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


def static_cache(model, capacity: int):
    """An empty cache of `capacity` tokens in fixed buffers, allocated on first use."""
    from transformers import StaticCache

    return StaticCache(config=model.config, max_cache_len=capacity)


class EagerStep:
    """transformers' dynamic cache, every pass dispatched op by op."""

    kind = "eager"

    def __init__(self, model, head=None):
        self.model, self.head = model, head
        self.cache = None
        self.length = 0  # tokens in the cache
        self.past = 0  # tokens in the cache before the last verify pass

    def fits(self, n_tokens: int) -> bool:
        """Whether the cache can hold `n_tokens` without starting over (a dynamic one always)."""
        return True

    def run(self, tokens: list[int] | torch.Tensor) -> torch.Tensor:
        """Feed tokens after the cache; the (1, vocab) logits of the last one."""
        logits, self.cache = forward(self.model, tokens, self.cache, head=self.head)
        self.length += len(tokens)
        return logits

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
        tokens had been fed one after another (``kv.keep_rows``, in place, on a dynamic or a
        static cache: a static one's buffers stay put)."""
        keep_rows(self.cache, [*range(self.past), *(self.past + r for r in rows)])
        self.length = self.past + len(rows)

    def reset(self) -> None:
        """Forget every token, for a new request: the cache starts afresh."""
        self.cache, self.length, self.past = None, 0, 0


class StaticStep(EagerStep):
    """A cache in fixed buffers; with `graph` (CUDA only) every pass is a CUDA graph, one per
    row count (the one-token step, a chain's verify pass, a tree's with its layout as an input),
    captured on first use.

    A chain's rollback only moves the cache's length: stale keys beyond it are masked and
    overwritten. A tree's moves the kept rows down in place (``keep``), so the buffers keep their
    addresses. A context that outgrows the buffers starts over in buffers twice as large
    (``fits``). ``capture_seconds`` is what capturing cost (0 before any capture), ``problem``
    why a capture failed (the step then runs uncaptured, same logits). The key of a pass
    (``replayed``): its row count for a chain (one row is the plain step's graph), ("tree",
    rows) for a tree. Each pass of several rows is fed its mask (``static_mask``), a chain's
    causal one too.
    """

    kind = "static"

    def __init__(self, model, head=None, graph: bool = False, capacity: int | None = None):
        super().__init__(model, head)
        if graph and model.device.type != "cuda":
            raise ValueError("a CUDA graph needs the model on a CUDA device")
        self.graph = graph
        self.kind = "graph" if graph else "static"
        self.capacity = capacity or FIRST_CAPACITY
        self.capture_seconds = 0.0
        self.problem = ""
        self._new_cache()

    def _new_cache(self) -> None:
        self.cache = static_cache(self.model, self.capacity)
        self.length = 0
        self.graphs = {}  # a pass's key -> (its CUDA graph, its input buffers, its output)

    def fits(self, n_tokens: int) -> bool:
        """False (and an empty cache, twice as large or more) when `n_tokens` do not fit."""
        if n_tokens <= self.capacity:
            return True
        while self.capacity < n_tokens:
            self.capacity *= 2
        self._new_cache()
        return False

    @torch.inference_mode()  # the buffers were made under it: moved under it too
    def reset(self) -> None:
        """Forget every token, for a new request: the buffers (and any graphs captured on
        them) stay, the length moves to 0."""
        self.crop(self.length)
        self.past = 0

    def check_room(self, n: int) -> None:
        if self.length + n > self.capacity:
            raise ValueError(f"{self.length + n} tokens do not fit a cache of {self.capacity}")

    def run(self, tokens: list[int] | torch.Tensor) -> torch.Tensor:
        self.check_room(len(tokens))
        if len(tokens) == 1:
            logits = self.replayed(1, self.one_token, (input_ids(self.model, tokens),))
            if logits is not None:
                self.length += 1
                return logits
        return super().run(tokens)

    def one_token(self, ids: torch.Tensor) -> torch.Tensor:
        """The one-token step as captured: the (1, vocab) logits of `ids` (1, 1)."""
        return forward(self.model, ids, self.cache, head=self.head)[0]

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
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=ids.shape[-1],
        )
        return out.logits[0]

    def replayed(self, key, fn, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor | None:
        """fn(*inputs) replayed from the CUDA graph recorded for `key` (on first use), or None
        where it is not replayed: no graph asked for, a failed capture, or an empty cache (its
        buffers are allocated by the first pass). The caller moves the length."""
        if not self.graph or self.problem or not self.length:
            return None
        if key not in self.graphs:
            self.capture(key, fn, inputs)
            if key not in self.graphs:
                return None
        graph, held, out = self.graphs[key]
        for buffer, x in zip(held, inputs, strict=True):
            buffer.copy_(x)
        graph.replay()
        return out.clone()  # the next replay overwrites the output

    def capture(self, key, fn, inputs: tuple[torch.Tensor, ...]) -> None:
        """Record fn over copies of `inputs` once, after a warm-up on a side stream (lazy kernels
        and workspaces are set up outside the capture, as torch.cuda.graphs asks)."""
        start = time.perf_counter()
        device = self.model.device
        held = tuple(x.clone() for x in inputs)
        n = held[0].shape[-1]  # the tokens the pass writes
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        try:
            with torch.cuda.stream(side):
                for _ in range(2):  # each warm-up writes n slots past the length: undone
                    fn(*held)
                    self.cache.crop(-n)
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):  # recorded, not run: the cache's length is unchanged
                out = fn(*held)
        except Exception as e:  # e.g. a kernel that reads back to the host while recording
            self.problem = f"{type(e).__name__}: {e}".splitlines()[0][:200]
            torch.cuda.synchronize(device)
            return
        torch.cuda.synchronize(device)
        self.graphs[key] = (graph, held, out)
        self.capture_seconds += time.perf_counter() - start


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
