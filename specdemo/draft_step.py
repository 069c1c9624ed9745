"""How a draft model runs its forward passes and keeps its KV cache.

``EagerDraftStep`` is transformers' own path: a ``DynamicCache`` that grows per token. At batch 1
on a GPU that path costs host-side dispatch per layer, so a 24-layer draft costs nearly what a
28-layer target does (docs/BENCHMARKS.md, "GPU (measured on an H200)"). ``StaticDraftStep``
keeps the cache in fixed buffers (transformers' ``StaticCache``, rolled back by moving its
length), so the one-token step has fixed shapes and addresses and reads nothing back to the
host; with ``graph=True`` on CUDA that step is captured once as a CUDA graph and replayed, one
launch for all its kernels. Both compute the same logits up to rounding (a captured kernel may
add in another order); the mode is a speed setting, never a change to the rule that samples.
"auto", the default, runs whichever of eager and graph measures faster on CUDA, and eager
elsewhere: measuring is ``profile``'s (``profile.draft_step_for``), which builds on this module.
The target's passes run on the same machinery (``target_step``).
"""

import os
import time

import torch

from specdemo.lm import forward, input_ids

STEPS = ("auto", "eager", "static", "graph")
DRAFT_STEPS = STEPS
ENV_DRAFT_STEP = "SPECDEMO_DRAFT_STEP"
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
    (``resolve_step``); "auto" on CUDA is left for ``profile.draft_step_for`` to measure."""
    return resolve_step(step, device, ENV_DRAFT_STEP, "draft step")


def make_draft_step(model, head=None, step: str | None = None):
    """The draft step object for `model` (its output layer replaced by `head` if given) in a
    mode that needs no measuring; "auto" on CUDA is ``profile.draft_step_for``'s to choose."""
    step = resolve_draft_step(step, model.device)
    if step == "auto":
        raise ValueError('"auto" on CUDA is measured: build the step with profile.draft_step_for')
    if step == "eager":
        return EagerDraftStep(model, head)
    return StaticDraftStep(model, head, graph=step == "graph")


def static_cache(model, capacity: int):
    """An empty cache of `capacity` tokens in fixed buffers, allocated on first use."""
    from transformers import StaticCache

    return StaticCache(config=model.config, max_cache_len=capacity)


class EagerDraftStep:
    """transformers' dynamic cache, every step dispatched op by op."""

    kind = "eager"

    def __init__(self, model, head=None):
        self.model, self.head = model, head
        self.cache = None
        self.length = 0  # tokens in the cache

    def fits(self, n_tokens: int) -> bool:
        """Whether the cache can hold `n_tokens` without starting over (a dynamic one always)."""
        return True

    def run(self, tokens: list[int] | torch.Tensor) -> torch.Tensor:
        """Feed tokens after the cache; the (1, vocab) logits of the last one."""
        logits, self.cache = forward(self.model, tokens, self.cache, head=self.head)
        self.length += len(tokens)
        return logits

    def crop(self, n: int) -> None:
        """Forget the last `n` tokens."""
        if n > 0:
            self.cache.crop(-n)
            self.length -= n

    def reset(self) -> None:
        """Forget every token, for a new request: the cache starts afresh."""
        self.cache, self.length, self.past = None, 0, 0


class StaticDraftStep(EagerDraftStep):
    """A cache in fixed buffers; with `graph` (CUDA only) the one-token step is a CUDA graph.

    A rollback only moves the cache's length: stale keys beyond it are masked and overwritten.
    A context that outgrows the buffers starts over in buffers twice as large (``fits``).
    ``capture_seconds`` is what capturing cost (0 before any capture), ``problem`` why a capture
    failed (the step then runs uncaptured, same logits). A pass is captured per shape of its
    inputs (``replayed``): the one-token step here, the target's verify passes per row count
    (``target_step``).
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
