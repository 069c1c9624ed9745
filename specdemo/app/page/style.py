"""How the app looks: the theme, the CSS (token kinds' colours and second cues, phone layout,
large text) and the tabs' introductions. Plain constants; ``ui`` applies them.
"""

import gradio as gr

from specdemo.defaults import DEFAULTS
from specdemo.render import COLORS

# The speculative panes' token kinds, in their legend's order.
SPEC_KINDS = ("accepted", "resampled", "bonus", "rejected", "target")

THEME = gr.themes.Soft(text_size=gr.themes.sizes.text_lg)
LARGE_TEXT = 1.25  # the "Large text" switch scales each of THEME's text sizes by this
LARGE_SIZES = " ".join(
    f"--text-{size}: {float(getattr(THEME, f'text_{size}').removesuffix('px')) * LARGE_TEXT:g}px;"
    for size in ("xxs", "xs", "sm", "md", "lg", "xl", "xxl")
)
# In the browser, without a server round trip: the class on <html> switches to LARGE_SIZES.
LARGE_TEXT_JS = "(large) => { document.documentElement.classList.toggle('large-text', large); }"


def _paint(kind: str) -> str:
    """A token kind's background: its colour at half opacity (tests/test_render.py measures the
    kinds apart painted so)."""
    rgb = ", ".join(str(int(COLORS[kind][i : i + 2], 16)) for i in (1, 3, 5))
    return f".token-pane .tok.{kind} {{ background: rgba({rgb}, 0.5); }}\n"


LARGE_CSS = f":root.large-text, :root.large-text .dark {{ {LARGE_SIZES} }}\n"
BONUS_BOX = (
    f".token-pane .tok.bonus {{ outline: 2px solid {COLORS['bonus']}; outline-offset: -2px; }}\n"
)
CSS = (
    LARGE_CSS
    + "".join(map(_paint, SPEC_KINDS))
    + BONUS_BOX
    + """
/* token_pane: each token a .tok with its kind as a class, in the text and its legend. */
.token-pane .tok-text {
  font-size: calc(1.2 * var(--text-md)); line-height: 2.1; white-space: pre-wrap;
  overflow-wrap: anywhere;  /* a long run of tokens without a space still wraps on a phone */
}
.token-pane .tok { color: black; border-radius: var(--radius-sm); margin: 0 1px; padding: 0 1px; }
.token-pane .tok-legend { margin-bottom: var(--size-2); }
.token-pane .tok-legend .tok { padding: 0 var(--size-1); white-space: nowrap; }
/* Each kind's cue without colour (render.ANSI has the terminal's): accepted plain, resampled
   wavy-underlined, bonus boxed (BONUS_BOX), rejected struck through. */
.token-pane .tok.resampled {
  text-decoration: underline wavy; text-decoration-thickness: 2px; text-underline-offset: 0.25em;
}
.token-pane .tok.rejected { text-decoration: line-through; text-decoration-thickness: 2px; }
.token-pane .tok-text .tok.rejected { opacity: 0.75; }
/* Beside drafted tokens, a token the target chose alone (automatic K chose K = 0) is dotted. */
:is(#spec-pane, #step-pane) .tok.target {
  text-decoration: underline dotted; text-decoration-thickness: 2px;
}
/* Read by screen readers, not shown, not copied with the answer. */
.sr-only {
  position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%);
  white-space: nowrap; user-select: none;
}
.phase { font-size: calc(1.05 * var(--text-md)); }
/* The "Large text" switch, small and to the right. */
.form:has(> #large-text) { width: fit-content; margin-left: auto; }
/* Phones: narrower page margins, and a row's children stack instead of sharing the width. */
.gradio-container .main.app { padding-inline: min(var(--size-8), 4vw); }
@media (max-width: 640px) {
  .row { flex-direction: column; align-items: stretch; }
  #comparison th, #comparison td { padding: var(--size-1-5) var(--size-2); }
}
/* The race's table: a number never breaks across lines. */
#comparison table { width: 100%; }
#comparison th, #comparison td { overflow-wrap: normal; word-break: normal; }
#comparison td[align="right"] { white-space: nowrap; }
"""
)

JUDGE_SENTENCE = {
    "token": "judges each guess on its own, keeping it with probability min(1, p/q) until the "
    "first it rejects (Judge: token by token; the whole block keeps as many or more)",
    "block": "judges the guesses as one block, which keeps at least as many as judging each "
    "on its own with min(1, p/q) would (Judge: the whole block)",
}
INTRO = (
    "# Speculative decoding, made visible\n"
    "A small **draft** model guesses K tokens; the big **target** model checks all of them in "
    f"one pass and {JUDGE_SENTENCE[DEFAULTS['verify']]}. The answer follows the target "
    "model exactly — it just arrives in fewer target passes."
)
EXACT_INTRO = (
    "Draw the next token N times through the speculative accept/resample path and N times "
    "straight from the target, and compare both with the target's exact probabilities; then the "
    "same for the first two tokens together. Pick a mistaken acceptance rule to watch the test "
    "catch it. Below, the greedy check runs both ways at temperature 0 and compares the token ids."
)
STEP_INTRO = (
    "Run speculative decoding one round at a time: what the draft guessed, what the target "
    "thought of each guess, and the coin flips that decided. Change the prompt to start over."
)
