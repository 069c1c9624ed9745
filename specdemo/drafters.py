"""Drafters: who proposes the k tokens the target then verifies.

A drafter has two methods, after transformers' CandidateGenerator: ``propose(context, k)``
returns (draft tokens, q) — q is None for a deterministic proposal — and ``update(n_accepted)``
hears how the round went. The context passed to successive ``propose`` calls only grows (a
new generation gets a new drafter); a model drafter keeps its KV cache in step with it.
"""

from typing import Protocol

import torch

from specdemo.sampling import SamplingConfig, logits_to_probs, sample


class Drafter(Protocol):
    def propose(self, context: list[int], k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(k',) draft tokens with k' <= k, and their (k', vocab) q or None if deterministic."""
        ...

    def update(self, n_accepted: int) -> None: ...


def input_ids(model, tokens: list[int] | torch.Tensor) -> torch.Tensor:
    """Token ids as the (1, n) batch a causal LM takes, on the model's device."""
    if isinstance(tokens, list):
        tokens = torch.tensor(tokens, dtype=torch.long, device=model.device)
    return tokens.view(1, -1)


def forward(model, tokens: list[int] | torch.Tensor, cache, n_logits: int = 1):
    """Feed tokens after what `cache` holds; return (logits (n_logits, vocab), cache)."""
    ids = input_ids(model, tokens)
    out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=n_logits)
    return out.logits[0], out.cache


class ModelDrafter:
    """A small causal LM sharing the target's tokenizer.

    The KV cache holds every context token but the last, plus the draft tokens it fed itself;
    after a rejection it is cropped back to the accepted text, never re-prefilled.
    With ``adaptive=True`` drafting stops early once the draft's top probability falls below
    ``threshold``: the decision uses draft-side information only, so exactness is unaffected.
    """

    def __init__(
        self,
        model,
        sampling: SamplingConfig,
        generator: torch.Generator | None = None,
        adaptive: bool = False,
        threshold: float = 0.4,
        head_rows: int | None = None,
    ):
        self.model, self.sampling, self.generator = model, sampling, generator
        self.adaptive, self.threshold = adaptive, threshold
        self.head = draft_head(model, head_rows) if head_rows else None
        self.cache = None
        self.fed: list[int] = []  # tokens whose keys/values are in the cache
        self.settled = 0  # a prefix of `fed` that later contexts share (contexts only grow)
        self.steps = 0  # forward passes, for the cost ratio c

    def _sync(self, context: list[int]) -> list[int]:
        """Crop the cache to its longest prefix of the context; return the tokens to feed."""
        limit = min(len(self.fed), len(context) - 1)
        keep = min(self.settled, limit)
        while keep < limit and self.fed[keep] == context[keep]:
            keep += 1
        if self.cache is not None and keep < len(self.fed):
            self.cache.crop(keep - len(self.fed))
        self.fed = self.fed[:keep]
        return context[keep:]

    @torch.inference_mode()
    def propose(self, context: list[int], k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        pending = self._sync(context)
        tokens, qs = [], []
        feed: list[int] | torch.Tensor = pending
        for i in range(k):
            logits, self.cache = self._forward(feed)
            self.steps += 1
            if self.sampling.greedy:  # a greedy draft is deterministic: q is one-hot, left implicit
                token = logits[-1:].argmax(-1)
                top = 1.0 if not self.adaptive else torch.softmax(logits[-1].float(), -1).max()
            else:
                q = logits_to_probs(logits[-1:], self.sampling)  # (1, vocab)
                token, top = sample(q, self.generator), q.max()
                qs.append(q)
            tokens.append(token)
            # Adaptive k costs one host sync per draft step; a plain run never syncs here.
            if self.adaptive and i < k - 1 and float(top) < self.threshold:
                break
            feed = token
        if not tokens:
            return torch.empty(0, dtype=torch.long, device=self.model.device), None
        draft = torch.cat(tokens)
        # The last draft token was sampled, not fed: the cache holds context + draft[:-1].
        self.fed = list(context) + draft.tolist()[:-1]
        self.settled = len(context) - 1
        return draft, (torch.cat(qs) if qs else None)

    def _forward(self, feed):
        if self.head is None:
            return forward(self.model, feed, self.cache)
        ids = input_ids(self.model, feed)
        out = self.model.base_model(input_ids=ids, cache=self.cache, use_cache=True)
        return self.head(out.last_hidden_state[0, -1:]), out.cache

    def modules(self) -> list[torch.nn.Module]:
        """The modules a draft step runs besides the draft model itself (for timing hooks)."""
        return [self.head] if self.head is not None else []

    def update(self, n_accepted: int) -> None:
        pass


def draft_head(model, rows: int) -> torch.nn.Linear:
    """The draft's output layer cut to the first `rows` vocabulary rows, sharing its weights.

    The draft then gives q = 0 to every other token. The acceptance rule stays exact (a token
    with q = 0 is never proposed and keeps all its p in the residual); only alpha can drop, when
    the target wants a token outside the subset. Qwen's BPE ids are roughly frequency-ordered,
    so the first 32k rows cover nearly all English and code, at a fifth of the head's cost.
    """
    weight = model.get_output_embeddings().weight[:rows]  # (rows, hidden), a view
    head = torch.nn.Linear(weight.shape[1], rows, bias=False, device="meta")
    head.weight = torch.nn.Parameter(weight, requires_grad=False)
    return head


class LookupDrafter:
    """Prompt lookup: find the latest earlier occurrence of the context's last n-gram and
    propose what followed it. Zero model cost; a deterministic draft (q is one-hot)."""

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, device: str | torch.device = "cpu"):
        self.max_ngram, self.min_ngram, self.device = max_ngram, min_ngram, device

    def propose(self, context: list[int], k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        n_ctx = len(context)
        for n in range(min(self.max_ngram, n_ctx - 1), self.min_ngram - 1, -1):
            tail = context[n_ctx - n :]
            for start in range(n_ctx - n - 1, -1, -1):  # latest match first
                if context[start : start + n] == tail:
                    follow = context[start + n : start + n + k]
                    return torch.tensor(follow, dtype=torch.long, device=self.device), None
        return torch.empty(0, dtype=torch.long, device=self.device), None

    def update(self, n_accepted: int) -> None:
        pass
