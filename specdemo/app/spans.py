"""An answer's tokens as the app's panes draw them: ``render.round_spans``' ``(text, kind)``
pairs with a third field, where each guess came from. A kept or rejected guess is "copied" (from
earlier in the text, by prompt lookup or the suffix index: no model ran) or "drafted" (by the
draft model); a token the target chose itself (resampled, bonus, target) has "".
"""

from specdemo.decode.render import round_spans
from specdemo.decode.rounds import Round
from specdemo.text import Detokenizer

Span = tuple[str, str, str]  # (text, kind, source)
GUESSES = ("accepted", "rejected")  # the kinds that are guesses, and so have a source
SOURCES = {"lookup": "copied", "model": "drafted"}  # ``Round.source`` as the page says it


def guess_spans(r: Round, detok: Detokenizer, show_rejected: bool = True) -> list[Span]:
    """Round `r`'s spans (``render.round_spans``), each guess marked copied or drafted."""
    source = SOURCES[r.source]
    spans = round_spans(r, detok, show_rejected)
    return [(text, kind, source if kind in GUESSES else "") for text, kind in spans]


def target_span(text: str) -> Span:
    """A token the target chose with no guess before it."""
    return text, "target", ""
