"""How the app looks: the theme, the CSS (token kinds' colours and second cues, phone layout,
large text) and the tabs' introductions. Plain constants; ``ui`` applies them.
"""

import gradio as gr

from specdemo.decode.render import COLORS
from specdemo.defaults import DEFAULTS

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
    """A token kind's background: its colour at half opacity (tests/decode/test_render.py
    measures the kinds apart painted so)."""
    rgb = ", ".join(str(int(COLORS[kind][i : i + 2], 16)) for i in (1, 3, 5))
    return f".token-pane .tok.{kind} {{ background: rgba({rgb}, 0.5); }}\n"


LARGE_CSS = f":root.large-text, :root.large-text .dark {{ {LARGE_SIZES} }}\n"
# A bonus token is boxed in a dark line, a shape no other kind has.
BONUS_BOX = ".token-pane .tok.bonus { outline: 2px solid #1f2937; outline-offset: -1px; }\n"
CSS = (
    LARGE_CSS
    + "".join(map(_paint, SPEC_KINDS))
    + BONUS_BOX
    + """
/* token_pane: each token a .tok with its kind as a class, in the text and its legend. */
/* The answer in a monospace font, its spaces kept: code keeps its real indentation. */
.token-pane .tok-text {
  font-family: var(--font-mono); font-size: calc(1.1 * var(--text-md)); line-height: 2.1;
  white-space: pre-wrap;
  overflow-wrap: anywhere;  /* a long run of tokens without a space still wraps on a phone */
}
.token-pane .tok { color: black; border-radius: var(--radius-sm); margin: 0 1px; padding: 0 1px; }
/* The key above an answer's panes: each kind as the text draws it, then what it means. */
.token-key .tok-legend { display: flex; flex-wrap: wrap; gap: var(--size-1) var(--size-4);
  align-items: baseline; }
.token-key .key-title { font-weight: 600; }
.token-key .key-entry { white-space: nowrap; }
.token-key .tok { padding: 0 var(--size-1); line-height: 1.8; }
@media (max-width: 640px) { .token-key .key-entry { white-space: normal; } }
.pane-head p { margin: 0; }
/* Each kind's cue without colour (render.ANSI has the terminal's): accepted plain, resampled
   wavy-underlined, bonus boxed (BONUS_BOX), rejected struck through. */
.token-pane .tok.resampled {
  text-decoration: underline wavy; text-decoration-thickness: 2px; text-underline-offset: 0.25em;
}
.token-pane .tok.rejected { text-decoration: line-through; text-decoration-thickness: 2px; }
.token-pane .tok-text .tok.rejected { opacity: 0.75; }
/* A copied guess, kept or rejected, has a dark bar along its top (token_pane); a drafted one
   has none. A shadow, not a line: the kinds' decorations stay as they are. */
.token-pane .tok.copied { box-shadow: inset 0 3px 0 #1f2937; }
/* The target's own tokens are dotted, in every pane alike. */
.token-pane .tok.target {
  text-decoration: underline dotted; text-decoration-thickness: 1.5px; text-underline-offset: 0.2em;
}
/* Step through: the earlier text a copy came from (lesson.copy_block), code kept as written:
   the match in a dashed box, the copied span with a bar above, as copied tokens have. */
.copy-source {
  font-family: var(--font-mono); font-size: var(--text-sm); line-height: 1.9;
  white-space: pre-wrap; overflow-wrap: anywhere;
  margin-top: var(--size-2); padding: var(--size-1) var(--size-2); border-left: 3px solid #9ca3af;
}
.copy-source .copy-match, .copy-source .copy-span {
  color: inherit; box-decoration-break: clone; -webkit-box-decoration-break: clone;
}
.copy-source .copy-match {
  background: rgba(230, 159, 0, 0.3); outline: 2px dashed #1f2937; outline-offset: -1px;
}
.copy-source .copy-span { background: none; box-shadow: inset 0 3px 0 #1f2937; }
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

# The judge that runs by default, as the page's second sentence says it (``verify.JUDGES``).
JUDGE_SENTENCE = {
    "token": "keeps each guess x with probability min(1, p(x)/q(x)), where **p** is the "
    "target's probability of x and **q** the draft's, and replaces the first guess it turns "
    "down with a token drawn from what p has left over",
    "block": "judges the guesses as one block, from **p**, the target's probabilities, and "
    "**q**, the draft's, keeping at least as many as judging each guess on its own would, and "
    "replaces the first guess it turns down with a token drawn from what p has left over",
}
INTRO = (
    "# Speculative decoding, made visible\n"
    "A small **draft** model guesses the next K tokens; the big **target** model checks all K "
    "in one pass. It "
    f"{JUDGE_SENTENCE[DEFAULTS['verify']]}, so the answer follows the target's own "
    "distribution exactly, in fewer target passes."
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
