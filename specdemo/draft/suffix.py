"""Copying from the context: the longest earlier match of the text's end, and what followed it.

``SuffixIndex`` is a suffix automaton (Blumer et al. 1985) over the prompt and every token
written since, grown one token at a time at amortised constant cost. Its state for the whole
text links to the longest suffix of the text that also ended earlier: the longest match, found
in one read whatever the context's length (prompt lookup's n-gram index looks only at the last
1-3 tokens). The state's transitions are the tokens that followed that match anywhere in the
context, so several continuations are counted too, as SuffixDecoding's suffix tree counts them
(Oliaro et al., NeurIPS 2025, arXiv 2411.04975).

``CopyDrafter`` proposes what followed the match, as far as it is asked (a copy that runs off
the end of the context repeats the match's own period, as LZ77's overlapping copy does), and
says how much the copy deserves trust: the match's length. After an edit (the target writes
what the source lacks: a new name, a type hint), the longest match is short and found anywhere;
the drafter then re-anchors near where the copy left the source, skipping the changed tokens as
speculative edits do: the earlier text around that place whose end matches the text's latest
tokens, else the place the source would have reached had the new tokens replaced as many old
ones. Either way the copy is deterministic (q one-hot), so the exact rule keeps a copied token
with probability p(x) and the output stays the target's.
"""

from dataclasses import dataclass

import torch

from specdemo.draft.proposal import Proposal

# A match at least this long is trusted over the place the last copy left the source.
LONG_MATCH = 6
# How far, in tokens, around the place the last copy left the source a re-anchor looks, and for
# how many written tokens since that place it keeps looking.
ANCHOR_WINDOW = 24
ANCHOR_SPAN = 64
# The most of the text's latest tokens a re-anchor compares with the earlier text.
ANCHOR_COMPARE = 8
# Other tokens that followed a match, verified beside the copy's first token as a tree (one-hot
# q) where the engine's tree width allows: at most this many, the one whose first occurrence
# came last first.
COPY_SIBLINGS = 2


class SuffixIndex:
    """A suffix automaton over the context, kept up to date as the context grows.

    Each state has the length of its longest string, a suffix link, transitions by token and
    the end (exclusive) of its strings' first occurrence. ``match()`` reads the longest suffix
    of the text that also ended earlier, where it first ended, and which tokens followed it. A
    context that does not extend the indexed one (a new generation) is indexed from scratch.
    """

    def __init__(self):
        self._tokens: list[int] = []
        self._length = [0]
        self._link = [-1]
        self._next: list[dict[int, int]] = [{}]
        self._first_end = [0]
        self._last = 0
        self.texts = 0  # texts indexed before this one: a new one starts the index over

    def __len__(self) -> int:
        return len(self._tokens)

    def _extend(self, token: int) -> None:
        """The standard online construction: one new state, at most one clone."""
        length, link, nxt, first = self._length, self._link, self._next, self._first_end
        self._tokens.append(token)
        cur = len(length)
        length.append(length[self._last] + 1)
        link.append(-1)
        nxt.append({})
        first.append(len(self._tokens))
        p = self._last
        while p != -1 and token not in nxt[p]:
            nxt[p][token] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = nxt[p][token]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(length)
                length.append(length[p] + 1)
                link.append(link[q])
                nxt.append(dict(nxt[q]))
                first.append(first[q])
                while p != -1 and nxt[p].get(token) == q:
                    nxt[p][token] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        self._last = cur

    def update(self, context: list[int]) -> None:
        """Index the tokens appended since the last call (all of them for a new text)."""
        seen = len(self._tokens)
        if len(context) < seen or context[:seen] != self._tokens:
            texts = self.texts
            self.__init__()
            self.texts, seen = texts + 1, 0
        for token in context[seen:]:
            self._extend(token)

    def match(self, context: list[int]) -> tuple[int, int, dict[int, int]]:
        """(length, end, followers) of the longest suffix of `context` that also ended earlier:
        `end` is where its first occurrence ended (the copy starts there), `followers` maps each
        token that followed it somewhere to where the copy after that token starts. Length 0
        when the last token never occurred before."""
        self.update(context)
        state = self._link[self._last]
        if state <= 0:
            return 0, 0, {}
        followers = {t: self._first_end[s] for t, s in self._next[state].items()}
        return self._length[state], self._first_end[state], followers


@dataclass(frozen=True)
class Match:
    """Where a copy comes from: it starts at context[origin]; `length` tokens before it agree with
    the text's end (the evidence); `anchored` when found near where the last copy left the
    source rather than as the longest match; `continuations`, the distinct tokens that followed
    the match in the context (1 for an anchored match); `alternatives`, up to COPY_SIBLINGS of
    them other than context[origin], the one whose first occurrence came last first: the copy's
    siblings, verified beside it where the tree width allows."""

    origin: int
    length: int
    anchored: bool = False
    continuations: int = 1
    alternatives: tuple[int, ...] = ()


def copy_from(context: list[int], origin: int, k: int) -> list[int]:
    """k tokens from context[origin]: past the end, the copy goes on from its own start (an
    overlapping copy), so a match that runs off the end repeats its period."""
    if not 0 <= origin < len(context):
        raise ValueError(f"a copy starts inside the context (0..{len(context) - 1}), got {origin}")
    out: list[int] = []
    for i in range(k):
        at = origin + i
        out.append(context[at] if at < len(context) else out[at - len(context)])
    return out


def common_suffix(context: list[int], end: int, limit: int) -> int:
    """How many tokens before `end` agree with the context's last ones (at most `limit`)."""
    n, r = len(context), 0
    while r < limit and end - r - 1 >= 0 and context[end - r - 1] == context[n - r - 1]:
        r += 1
    return r


class CopyDrafter:
    """Copies from the context (``SuffixIndex``): the longest earlier match's continuation, or
    after an edit the source re-anchored. Zero model cost; q one-hot. Its proposals carry their
    ``Match`` (``Proposal.match``), which automatic K prices: a long match is trusted far."""

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = device
        self.index = SuffixIndex()
        self.draft_model = None
        self._anchor: tuple[int, int] | None = None  # (source position, context length then)
        self._found: tuple[tuple, Match | None] | None = None  # (the context's key, its match)

    def sources(self, context: list[int]) -> tuple[str, ...]:
        return ("lookup",)

    def match(self, context: list[int]) -> Match | None:
        """The match the next copy rests on (``find``): what automatic K prices."""
        return self.find(context)

    def find(self, context: list[int]) -> Match | None:
        """The match a copy after `context` would come from, or None."""
        if not context:
            raise ValueError("a copy needs a context of at least one token")
        key = (len(context), tuple(context[-ANCHOR_COMPARE:]))
        if self._found is not None and self._found[0] == key:
            return self._found[1]
        texts = self.index.texts
        length, end, followers = self.index.match(context)
        if self.index.texts != texts:  # a new text: where the last copy left it means nothing
            self._anchor = None
        longest = None
        if length:
            others = sorted((t for t in followers if t != context[end]), key=followers.get)
            alternatives = tuple(reversed(others))[:COPY_SIBLINGS]
            longest = Match(end, length, continuations=len(followers), alternatives=alternatives)
        found = longest if length >= LONG_MATCH else self._reanchor(context) or longest
        self._found = (key, found)
        return found

    def _reanchor(self, context: list[int]) -> Match | None:
        """Near where the last copy left the source: the earlier position whose preceding tokens
        agree longest with the text's end (the changed tokens skipped), closest to where the
        source would be had the new tokens replaced as many old ones; else that place itself."""
        if self._anchor is None:
            return None
        source, then = self._anchor
        written = len(context) - then
        if written > ANCHOR_SPAN:
            self._anchor = None
            return None
        expected = source + written  # the new tokens replaced as many old ones
        last = len(context) - 1  # a copy must start inside the context, before its end
        best = (0, 0, 0)  # (tokens agreed, -distance from `expected`, position)
        for end in range(max(1, source - ANCHOR_WINDOW), min(last, expected + ANCHOR_WINDOW) + 1):
            agreed = common_suffix(context, end, ANCHOR_COMPARE)
            best = max(best, (agreed, -abs(end - expected), end)) if agreed else best
        if best[0]:
            return Match(best[2], best[0], anchored=True)
        if expected <= last:
            return Match(expected, 0, anchored=True)
        return None

    def propose(self, context: list[int], k: int, source: str | None = None):
        match = self.find(context)
        tokens = copy_from(context, match.origin, k) if match is not None and k else []
        siblings = ()
        if match is not None and k:
            # Where the source is after this round, had the round's tokens followed it.
            self._anchor = (match.origin, len(context))
            if match.alternatives:
                siblings = (match.alternatives, *([()] * (k - 1)))
        return Proposal(
            torch.tensor(tokens, dtype=torch.long, device=self.device),
            None,
            source="lookup",
            match=match,
            siblings=siblings,
        )
