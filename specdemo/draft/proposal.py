"""What a drafter proposes for one round (``drafters``, ``suffix``): the record below both."""

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Proposal:
    """One round's draft: (k',) tokens with k' <= k, their (k', vocab) q or None."""

    tokens: torch.Tensor
    q: torch.Tensor | None
    draft_steps: int = 0  # draft model forward passes spent on it
    source: str = "model"  # "model" (q from the draft model) or "lookup" (copied, q one-hot)
    # Where a copy from the suffix index came from and how long a match it rests on
    # (``suffix.Match``); None for the model and for prompt lookup's n-gram copies.
    match: Any = None  # a ``suffix.Match``, which sits above this module
    # A copy's siblings at each depth, fixed (other tokens that followed its match in the
    # context), verified in the same pass as a tree with one-hot q; () for a chain.
    siblings: tuple[tuple[int, ...], ...] = ()
