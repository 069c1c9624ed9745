"""The draft's vocabulary: which token ids its output head scores.

A 0.5B draft's output layer over Qwen2.5's 151,936 ids is a large part of its step. A head over
fewer rows is cheaper and stays exact whatever rows it keeps (``lm.DraftHead``): a token outside
has q = 0 and keeps all its p in the residual. Only α drops, each time the target writes a token
the head lacks, so the head keeps the ids the target writes most often (FR-Spec, arXiv
2502.14856; EAGLE-3's draft-to-target map). Qwen's ids are not ordered by frequency: the first
32k ids miss "```", " oceans" and the end-of-turn token.

``data/token_ranks.json`` ranks the ids by how often they occur in the target's own answers to a
varied prompt set and in English word frequencies; ``scripts/rank_tokens.py`` rebuilds it and
says how. It also holds the row count the drafter keeps by default, chosen by measuring the
draft step's cost against the coverage of held-out answers (docs/BENCHMARKS.md, "The draft's
vocabulary"). A vocabulary the file does not rank keeps its full head. Each drafter adds the
ids of its own text to its head as it reads it (``context_head``): the prompt's names and rare
words are the likeliest tokens to come again.
"""

import functools
import itertools
import json
import weakref
from dataclasses import dataclass
from importlib.resources import files

import torch

from specdemo.runtime.lm import DraftHead, head_over, order_rows, vocab_size

RANKS_FILE = files("specdemo") / "data" / "token_ranks.json"
# Spare head rows a drafter fills with the ids of its own text that the ranked rows lack (the
# prompt's names and rare words, which the answer tends to repeat). 1,024 rows of a 0.5B draft
# are 1.8 MB and a small fraction of its head's matmul.
CONTEXT_ROWS = 1024


@dataclass(frozen=True, eq=False)  # hashed by identity: a key of the heads built from it
class Ranking:
    """Token ids of one vocabulary, most frequent first (ids never seen follow in id order, the
    tokenizer's merge order), and the row count a drafter keeps by default."""

    vocab_size: int
    ranked: tuple[int, ...]
    rows: int

    def top(self, rows: int) -> list[int]:
        """The `rows` most frequent ids."""
        if rows <= len(self.ranked):
            return list(self.ranked[:rows])
        seen = set(self.ranked)
        rest = (t for t in range(self.vocab_size) if t not in seen)
        return list(self.ranked) + list(itertools.islice(rest, rows - len(self.ranked)))


@functools.cache
def ranking() -> Ranking:
    """The shipped ranking (``data/token_ranks.json``)."""
    data = json.loads(RANKS_FILE.read_text(encoding="utf-8"))
    return Ranking(data["vocab_size"], tuple(data["ranked"]), data["rows"])


def ranking_for(model) -> Ranking | None:
    """The shipped ranking when it ranks this model's vocabulary, else None."""
    shipped = ranking()
    return shipped if vocab_size(model) == shipped.vocab_size else None


def default_rows(draft) -> int | None:
    """The head rows a drafter keeps by default: the ranking's measured count for a vocabulary
    it ranks, else None (the full head, as for a small vocabulary)."""
    found = ranking_for(draft)
    return found.rows if found and found.rows < found.vocab_size else None


def head_ids(draft, rows: int) -> torch.Tensor:
    """The `rows` token ids a head of that size keeps: the most frequent where the vocabulary is
    ranked, else the first ids. (rows,) long, on the draft's output layer's device."""
    device = draft.get_output_embeddings().weight.device
    found = ranking_for(draft)
    if found is None:
        return torch.arange(rows, device=device)
    return torch.tensor(found.top(rows), dtype=torch.long, device=device)


def rank_rows(draft) -> bool:
    """Move the rows of the draft's default head (its ranking's most frequent ids) to the top of
    its output layer, in place (``lm.order_rows``): that head is then a view of the draft's own
    weights, copying nothing, and the model computes what it did before. ``load_pair`` does it
    for every pair it loads; False where the vocabulary is not ranked or the rows cannot move."""
    rows = default_rows(draft)
    return bool(rows) and order_rows(draft, head_ids(draft, rows))


# draft model -> {(rows, the ranking used): DraftHead}: a head copies its rows (where
# ``rank_rows`` has not moved them to the top) once per process
_heads: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def context_head(draft, rows: int | None) -> DraftHead | None:
    """A drafter's own head: ``draft_head``'s fixed rows, shared, with CONTEXT_ROWS spare rows
    for the ids of its text (``DraftHead.learn``); None for the full head."""
    head = draft_head(draft, rows)
    return head.with_context(CONTEXT_ROWS) if head is not None else None


def draft_head(draft, rows: int | None) -> DraftHead | None:
    """The output layer a drafter with `rows` head rows uses (None or the whole vocabulary: the
    model's own, returned as None), built once per draft and row count."""
    if not rows or rows >= vocab_size(draft):
        return None
    heads, key = _heads.setdefault(draft, {}), (rows, ranking_for(draft))
    if key not in heads:
        heads[key] = head_over(draft, head_ids(draft, rows))
    return heads[key]
