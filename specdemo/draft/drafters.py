"""Drafters: who proposes the k tokens the target then verifies.

A drafter has two methods and an attribute: ``sources(context)`` says who can propose after
this context ("model", "lookup" or both, its own preference first, so automatic K can price
each); ``propose(context, k, source=None) -> Proposal`` returns up to k tokens from `source` (or
the preferred one), their draft probabilities q (None for a deterministic proposal, whose q is
one-hot), the draft model steps it took and the source; ``draft_model`` is the part that runs a
draft model (its head and step mode price a round), or None. The context passed to successive
calls only grows (a new generation gets a new drafter); a model
drafter keeps its KV cache in step with it, and nothing outside touches it. Three drafters: the
draft model, prompt lookup (an n-gram index grown with the context) and the hybrid of the two.
"""

from typing import Protocol

import torch

from specdemo.defaults import DRAFTERS
from specdemo.draft import draft_vocab
from specdemo.draft.proposal import Proposal
from specdemo.draft.suffix import CopyDrafter, Match
from specdemo.judge.sampling import (
    EXACT,
    AcceptanceRule,
    SamplingConfig,
    draft_tokens,
    logits_to_probs,
)
from specdemo.runtime.modes import draft_step_for


class Drafter(Protocol):
    # The part that runs a draft model (itself, a hybrid's, or None for prompt lookup): what
    # pricing a round needs (``engine.profile_of``).
    draft_model: "ModelDrafter | None"

    def sources(self, context: list[int]) -> tuple[str, ...]: ...

    def propose(self, context: list[int], k: int, source: str | None = None) -> Proposal: ...


class ModelDrafter:
    """A small causal LM sharing the target's tokenizer.

    The KV cache holds every context token but the last, plus the draft tokens it fed itself;
    after a rejection it is cropped back to the accepted text, never re-prefilled.
    With ``adaptive=True`` drafting stops early once the draft's top probability falls below
    ``threshold``: the decision uses draft-side information only, so exactness is unaffected.
    ``head_rows`` keeps that many rows of the output layer, the token ids the target writes most
    often, and learns the ids of the text as it grows (``draft_vocab``); `head` (a
    ``lm.DraftHead``) replaces that head. q is 0 at every id the head lacks, and ``covers`` says
    which tokens it can propose now; ``step`` is how its forward passes run
    ("eager", "static" or "graph", ``steps``).
    """

    def __init__(
        self,
        model,
        sampling: SamplingConfig,
        generator: torch.Generator | None = None,
        adaptive: bool = False,
        threshold: float = 0.4,
        head_rows: int | None = None,
        rule: AcceptanceRule = EXACT,
        step: str | None = None,
        head=None,
    ):
        self.model, self.sampling, self.generator, self.rule = model, sampling, generator, rule
        self.adaptive, self.threshold = adaptive, threshold
        if head is None:
            head = draft_vocab.context_head(model, head_rows)
        self.head, self.head_rows = head, head.rows if head is not None else None
        self.step = draft_step_for(model, self.head, step)
        self._read = 0  # context tokens the head has learned from
        self._fed: list[int] = []  # tokens whose keys/values are in the cache
        self._settled = 0  # a prefix of `_fed` that later contexts share (contexts only grow)

    @property
    def draft_model(self) -> "ModelDrafter":
        return self

    def sources(self, context: list[int]) -> tuple[str, ...]:
        return ("model",)

    def covers(self, token: int) -> bool:
        """Whether the draft model can propose `token` (its head scores it)."""
        return self.head is None or self.head.covers(token)

    def _sync(self, context: list[int], k: int) -> list[int]:
        """Crop the cache to its longest prefix of the context; return the tokens to feed."""
        if not self.step.fits(len(context) + k):  # a static cache started over, larger
            self._fed, self._settled = [], 0
        limit = min(len(self._fed), len(context) - 1)
        keep = min(self._settled, limit)
        while keep < limit and self._fed[keep] == context[keep]:
            keep += 1
        self.step.crop(len(self._fed) - keep)
        self._fed = self._fed[:keep]
        return context[keep:]

    def _learn(self, context: list[int]) -> None:
        """Give the head's spare rows the ids of the text not read yet, before drafting."""
        if self.head is not None and self.head.spare:
            self.head.learn(context[self._read :])
            self._read = len(context)

    @torch.inference_mode()
    def prefill(self, context: list[int], room: int = 16) -> None:
        """Feed the context but its last token into the cache now, leaving `room` tokens free,
        so that the next proposal after `context` runs only its own steps: a caller that times
        a round apart from the context before it (the step-through) calls this first."""
        self._learn(context)
        feed = list(self._sync(context, room)[:-1])
        if feed:
            self.step.run(feed)
            self._fed += feed
            self._settled = len(self._fed)

    @torch.inference_mode()
    def propose(self, context: list[int], k: int, source: str | None = None) -> Proposal:
        self._learn(context)
        feed: list[int] | torch.Tensor = self._sync(context, k)
        tokens, qs = [], []
        head = self.head  # its rows are token ids head.ids, when it has fewer than the vocabulary
        for i in range(k):
            logits = self.step.run(feed)
            if self.sampling.greedy:  # a greedy draft is deterministic: q is one-hot, left implicit
                row = logits[-1:].argmax(-1)
                top = 1.0 if not self.adaptive else torch.softmax(logits[-1].float(), -1).max()
            else:
                q = logits_to_probs(logits[-1:], self.sampling)  # (1, rows)
                row, top = draft_tokens(q, self.generator, self.rule), q.max()
                qs.append(q if head is None else head.spread(q))  # (1, vocab)
            token = row if head is None else head.tokens(row)
            tokens.append(token)
            # Adaptive k costs one host sync per draft step; a plain run never syncs here.
            if self.adaptive and i < k - 1 and float(top) < self.threshold:
                break
            # A row with no valid mass gave -1: feed a real id; the engine rejects the draft.
            feed = token.clamp_min(0)
        if not tokens:
            return Proposal(torch.empty(0, dtype=torch.long, device=self.model.device), None)
        draft = torch.cat(tokens)
        # The last draft token was sampled, not fed: the cache holds context + draft[:-1].
        self._fed = list(context) + draft.tolist()[:-1]
        self._settled = len(context) - 1
        return Proposal(draft, torch.cat(qs) if qs else None, draft_steps=len(tokens))


class NgramIndex:
    """Where each n-gram (min_ngram <= n <= max_ngram) of the context last ended, kept up to date
    as the context grows: each new token costs one dict update per n, and a lookup is one dict
    read per n, whatever the context's length.

    The n-grams ending at the context's last token are left out of the index until the next token
    arrives, so what a lookup finds is always an earlier occurrence, never the suffix itself. A
    context that does not extend the indexed one (a new generation) is indexed from scratch.
    """

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self._tokens: list[int] = []  # the context indexed so far
        self._ends: dict[tuple[int, ...], int] = {}  # n-gram -> end (exclusive) of its latest

    def update(self, context: list[int]) -> None:
        """Index the tokens appended since the last call."""
        seen = len(self._tokens)
        # One comparison in C (about 10 us at 4,096 tokens) lets a reused index notice a new
        # generation instead of answering from another text.
        if len(context) < seen or context[:seen] != self._tokens:
            self._tokens, self._ends, seen = [], {}, 0
        tokens = self._tokens
        tokens += context[seen:]
        # n-grams ending at `end`, for each end not yet indexed but the last (see the docstring).
        for end in range(max(seen, 1), len(tokens)):
            for n in range(self.min_ngram, min(self.max_ngram, end) + 1):
                self._ends[tuple(tokens[end - n : end])] = end

    def find(self, context: list[int]) -> tuple[int, int] | None:
        """(n, end) for the longest suffix n-gram of the context that occurred earlier, `end`
        being where its latest earlier occurrence ended; None when there is none."""
        self.update(context)
        for n in range(min(self.max_ngram, len(context) - 1), self.min_ngram - 1, -1):
            end = self._ends.get(tuple(context[len(context) - n :]))
            if end is not None:
                return n, end
        return None


class LookupDrafter:
    """Prompt lookup: find the latest earlier occurrence of the context's last n-gram, longest n
    first, and propose what followed it. Zero model cost; a deterministic draft (q is one-hot)."""

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, device: str | torch.device = "cpu"):
        self.max_ngram, self.min_ngram, self.device = max_ngram, min_ngram, device
        self.index = NgramIndex(max_ngram, min_ngram)
        self.draft_model = None

    def sources(self, context: list[int]) -> tuple[str, ...]:
        return ("lookup",)

    def propose(self, context: list[int], k: int, source: str | None = None) -> Proposal:
        match = self.index.find(context)
        follow = context[match[1] : match[1] + k] if match else []
        tokens = torch.tensor(follow, dtype=torch.long, device=self.device)
        return Proposal(tokens, None, source="lookup")


# The hybrid copies only after a match of 3 or more tokens: in a 150k-token vocabulary one or two
# tokens repeat everywhere without predicting what follows, and a copy displaces the draft model's
# guess. A copy saves the draft steps, so a shorter match pays only where those are dear (high c).
HYBRID_MIN_NGRAM = 3
# The suffix hybrid offers a copy from a match of at least this many tokens (or a re-anchoring
# after an edit where a token agrees again): shorter matches recur all over code and prose
# without predicting what follows, and a guess of the draft model's is there to take their
# place; long ones (a file being returned) are where copying pays.
HYBRID_MIN_MATCH = 4


class HybridDrafter:
    """A copy when the context repeats itself, else the draft model: prompt lookup when the
    context's last n-gram occurred before ("hybrid"), or the suffix index's longest match
    (``suffix.CopyDrafter``, "suffix-hybrid"), whose copies automatic K prices by the match's
    length and may choose over the model's guess or a plain step.

    A copied round leaves the draft model untouched: its next round feeds it whatever of the
    context it has not seen (``ModelDrafter._sync``), so its KV cache stays in step.
    """

    def __init__(self, model_drafter: ModelDrafter, lookup: "LookupDrafter | CopyDrafter"):
        self.model_drafter, self.lookup = model_drafter, lookup
        self.draft_model = model_drafter

    def sources(self, context: list[int]) -> tuple[str, ...]:
        """A copy when there is a match (the model can still draft instead), else the model. A
        suffix copy is offered only on evidence the draft model lacks: a match of at least
        HYBRID_MIN_MATCH tokens, or a re-anchoring where a token agrees again."""
        if isinstance(self.lookup, CopyDrafter):
            return ("lookup", "model") if self.match(context) is not None else ("model",)
        return ("lookup", "model") if self.lookup.index.find(context) else ("model",)

    def match(self, context: list[int]) -> Match | None:
        """The match a copy would rest on (``CopyDrafter.find``) where it is offered at all
        (``sources``); None for n-gram lookup."""
        if not isinstance(self.lookup, CopyDrafter):
            return None
        match = self.lookup.find(context)
        if match is None or match.length < (1 if match.anchored else HYBRID_MIN_MATCH):
            return None
        return match

    def propose(self, context: list[int], k: int, source: str | None = None) -> Proposal:
        if (source or self.sources(context)[0]) == "lookup":
            return self.lookup.propose(context, k)
        return self.model_drafter.propose(context, k)


def auto_head_rows(draft) -> int | None:
    """The head rows a drafter keeps by default (``draft_vocab.default_rows``): the most frequent
    ids of a ranked vocabulary, else None, the full head."""
    return draft_vocab.default_rows(draft)


def drafter_head(draft, context: list[int] = ()):
    """The output layer a drafter made by default uses after reading `context`
    (``draft_vocab.context_head``), or None for the model's own."""
    head = draft_vocab.context_head(draft, auto_head_rows(draft))
    if head is not None:
        head.learn(list(context))
    return head


def make_drafter(
    kind: str,
    draft,
    sampling: SamplingConfig,
    generator,
    device,
    adaptive=False,
    head_rows="auto",
    rule: AcceptanceRule = EXACT,
    step: str | None = None,
):
    """A drafter by name (``DRAFTERS``): "model", "lookup" (n-gram prompt lookup), "hybrid"
    (lookup, else the model; `HybridDrafter`), "suffix" (copies from the suffix index,
    ``suffix.CopyDrafter``) or "suffix-hybrid" (a suffix copy, else the model).
    `generator` draws the draft's samples; on a draft that sits on another device than the
    generator, a generator there seeded from it. head_rows: "auto" (``auto_head_rows``), a row
    count (the most frequent ids, ``draft_vocab``), or None / 0 for the full head. `rule`: how
    the draft model picks its tokens (``sampling.draft_tokens``; only the greedy-draft mistake
    differs). `step`: how the draft
    model's passes run (``steps.resolve_draft_step``; None: $SPECDEMO_DRAFT_STEP or eager)."""
    if kind not in DRAFTERS:
        raise ValueError(f"drafter must be one of {', '.join(map(repr, DRAFTERS))}, got {kind!r}")
    if kind == "lookup":
        return LookupDrafter(device=device)
    if kind == "suffix":
        return CopyDrafter(device=device)
    if draft is None:
        raise ValueError(f'drafter="{kind}" needs a draft model')
    if head_rows == "auto":
        head_rows = auto_head_rows(draft)
    if generator is not None and torch.device(generator.device) != draft.device:
        # One generator per device: draws on the draft's device need a generator there.
        seed = generator.initial_seed() + 1
        generator = torch.Generator(device=draft.device).manual_seed(seed)
    model = ModelDrafter(
        draft,
        sampling,
        generator,
        adaptive=adaptive,
        head_rows=head_rows or None,
        rule=rule,
        step=step,
    )
    if kind == "model":
        return model
    if kind == "suffix-hybrid":
        return HybridDrafter(model, CopyDrafter(device=device))
    return HybridDrafter(model, LookupDrafter(min_ngram=HYBRID_MIN_NGRAM, device=device))
