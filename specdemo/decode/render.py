"""Rounds to labelled text spans: what happened to each token, for the terminal and the app.

A span is a ``(text, label)`` pair, what the app's token panes draw (app.page.token_pane). Labels:
"accepted" (a draft token the target kept), "resampled" (the target's replacement for the first
rejected draft), "bonus" (the extra token after a fully accepted block), "rejected" (the draft
token that lost, shown struck through), and "target" for a token the target chose with no draft
before it (target-only runs, and rounds where automatic K chose K = 0). Each label has a
colour from a colour-blind-safe palette and a second cue that needs no colour at all.
"""

from specdemo.decode.rounds import Round
from specdemo.text import Detokenizer

# Okabe and Ito's colour-blind-safe colours, chosen so that each pair stays apart painted at half
# opacity (as the page paints them) for normal, red-weak, green-weak and blue-weak vision alike
# (tests/decode/test_render.py); each kind also has a cue without colour (ANSI, style.CSS).
COLORS = {
    "accepted": "#009e73",  # bluish green
    "resampled": "#d55e00",  # vermillion
    "bonus": "#9467bd",  # purple: apart from resampled's vermillion on a projector too
    "rejected": "#000000",  # black: grey at half opacity, struck through
    "target": "#cccccc",  # light grey
}
# The cue without colour, as in the app (style.CSS): accepted plain, resampled underlined, bonus
# boxed (SGR 7, reverse video), rejected struck through (SGR 9).
ANSI = {"accepted": "32", "resampled": "4;31", "bonus": "7;35", "rejected": "9;37", "target": "0"}


def round_spans(r: Round, detok: Detokenizer, show_rejected: bool = True) -> list[tuple[str, str]]:
    """Push a round's emitted tokens through `detok` and label each piece."""
    spans = []
    for i, token in enumerate(r.tokens):
        if i == r.n_accepted and show_rejected and r.rejected is not None:
            spans.append((detok.peek(r.rejected), "rejected"))
        if i < r.kept:  # the chain's kept drafts, then a tree's kept sibling
            label = "accepted"
        else:  # a round with no drafts (automatic K chose K = 0) is a plain target step
            label = "target" if not r.k else "bonus" if r.bonus else "resampled"
        spans.append((detok.push(token), label))
    return [(text, label) for text, label in spans if text]


def ansi(spans: list[tuple[str, str]]) -> str:
    """Spans as ANSI-coloured terminal text, each label with its cue."""
    return "".join(f"\x1b[{ANSI[label]}m{text}\x1b[0m" for text, label in spans)


def legend_ansi() -> str:
    return " ".join(
        ansi([(label, label)]) for label in ("accepted", "resampled", "bonus", "rejected")
    )
