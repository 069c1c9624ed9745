"""The step-through's rejection microscope: p and q side by side where a round ended, drawn and
explained.

Input is a ``stepping.Microscope`` (plain numbers, measured from the models); out come two
single-panel figures, shown side by side or stacked on a phone, and one plain-language note. The
shaded overlap min(p, q) sums to the chance that a draft token is kept there, 1 − TV(p, q); what
p has above q, max(0, p − q), renormalised, is the distribution a rejected guess is replaced from
(Leviathan et al., 2023). Judged as a block, p is first weighed by the running weight w the kept
guesses carry: the stack is min(w·p, q) under max(0, w·p − q), the block residual the next token
is drawn from (Sun et al., 2025).
"""

import plotly.graph_objects as go

from specdemo.app.charts import layout, placeholder
from specdemo.app.numbers import prob
from specdemo.app.step.lesson import cannot_propose, span
from specdemo.app.step.stepping import Microscope
from specdemo.decode.render import COLORS
from specdemo.decode.rounds import Round
from specdemo.text import token_text

PLACEHOLDER = "p and q where the round ended appear here"
RESIDUAL_PLACEHOLDER = "The residual a rejected guess is replaced from appears here"
Q_OUTLINE = "#111827"
HEIGHT = 480
MARK = {
    "textposition": "outside",
    "constraintext": "none",
    "cliponaxis": False,
    "textfont": {"size": 16},
}


def figures(m: Microscope) -> tuple[go.Figure, go.Figure]:
    """The two panels, each a figure of its own: p with q drawn over it, and the residual the
    target drew from."""
    return p_and_q_chart(m), residual_chart(m)


def placeholders() -> tuple[go.Figure, go.Figure]:
    """The two panels before the first round."""
    return placeholder(PLACEHOLDER, HEIGHT), placeholder(RESIDUAL_PLACEHOLDER, HEIGHT)


def p_and_q_chart(m: Microscope) -> go.Figure:
    """Rejected: p as stacked bars (min(p, q) shaded, max(0, p − q) on top) with q as an
    outline over them. Bonus, or a plain target step: p alone."""
    if m.kind == "greedy":
        return placeholder("At temperature 0, p and q are one-hot: the note below explains", HEIGHT)
    if m.kind in ("bonus", "plain"):
        fig = go.Figure(
            go.Bar(
                x=m.labels,
                y=m.p,
                name="p: the target",
                marker_color=COLORS["bonus"],
                text=_mark(m, m.drawn, "drawn"),
                **MARK,
            )
        )
        _y_range(fig, m.p)
        title = "Bonus" if m.kind == "bonus" else "A plain target step, no guesses"
        return layout(fig, f"{title}: p at position {m.position + 1}", HEIGHT)
    fig = go.Figure()
    excess = [m.weight * p - o for p, o in zip(m.p, m.overlap, strict=True)]
    names = (
        f"min(p, q): kept-chance, Σ = {prob(m.kept)}",
        f"max(0, p − q): residual, Σ = {prob(m.left)}",
    )
    if m.judge == "block":
        names = (
            f"min(w·p, q), Σ = {prob(m.kept)}",
            f"max(0, w·p − q): block residual, Σ = {prob(m.left)}",
        )
    for name, values, base, color, shape in (
        (names[0], m.overlap, None, COLORS["accepted"], ""),
        (names[1], excess, m.overlap, COLORS["resampled"], "/"),
    ):
        fig.add_trace(
            go.Bar(
                x=m.labels,
                y=values,
                base=base,
                name=name,
                marker_color=color,
                marker_pattern_shape=shape,
            )
        )
    fig.add_trace(
        go.Bar(
            x=m.labels,
            y=m.q,
            name="q: the draft (outline)",
            marker={"color": "rgba(0, 0, 0, 0)", "line": {"color": Q_OUTLINE, "width": 3}},
            text=_mark(m, m.drafted, "guess ✗"),
            **{**MARK, "textfont": {"color": COLORS["rejected"], "size": 16}},
        )
    )
    fig.update_traces(offsetgroup="p")  # the q outline over the p stack
    _y_range(fig, m.p + m.q)
    title = f"Guess {m.position + 1}: p with q drawn over it"
    if m.judge == "block":
        title = f"Guess {m.position + 1}: w·p (w = {prob(m.weight)}) with q drawn over it"
    fig = layout(fig, title, HEIGHT)
    fig.update_layout(barmode="group", bargap=0.25)
    return fig


def residual_chart(m: Microscope) -> go.Figure:
    """Rejected: the normalised residual max(0, p − q) / Σ, with the token drawn from it."""
    if m.kind == "greedy":
        return placeholder("At temperature 0 the residual is p itself: its top choice", HEIGHT)
    if m.kind == "bonus":
        return placeholder("Every guess was kept: no residual to draw from", HEIGHT)
    if m.kind == "plain":
        return placeholder("No guesses this round: no residual to draw from", HEIGHT)
    if m.stages:
        return stages_chart(m)
    fig = go.Figure(
        go.Bar(
            x=m.labels,
            y=m.residual,
            name=m.drawn_from,
            marker_color=COLORS["resampled"],
            text=_mark(m, m.drawn, "drawn"),
            **MARK,
        )
    )
    _y_range(fig, m.residual)
    drawn = m.labels[m.tokens.index(m.drawn)]
    return layout(fig, f"Where {drawn} came from", HEIGHT)


STAGE_SHAPES = ["", "/", ".", "x", "-", "|"]
STAGE_COLORS = ["#374151", "#6b7280", "#9ca3af", "#d55e00", "#e69f00", "#009e73"]


def stages_chart(m: Microscope) -> go.Figure:
    """A tree's node: p as each guess there was judged, shrinking by what q gave each rejected
    one, and what was left to draw from when all were rejected; the kept sibling or the drawn
    token marked on the bars of the stage that decided it."""
    fig, last = go.Figure(), len(m.stages) - 1
    kept = m.kept_sibling is not None
    mark = _mark(m, m.kept_sibling if kept else m.drawn, "kept" if kept else "drawn")
    for j, (label, values) in enumerate(m.stages):
        look = {
            "marker_color": STAGE_COLORS[j % len(STAGE_COLORS)],
            "marker_pattern_shape": STAGE_SHAPES[j % len(STAGE_SHAPES)],
        }
        text = mark if j == last else None
        fig.add_trace(go.Bar(x=m.labels, y=values, name=label, text=text, **look, **MARK))
    fig.update_layout(barmode="group")
    _y_range(fig, [v for _, values in m.stages for v in values])
    return layout(fig, f"How p shrinks at position {m.position + 1}, guess by guess", HEIGHT)


def _y_range(fig: go.Figure, values: list[float]) -> None:
    # Headroom for the bar texts above the tallest bar, and half a bar's slot beside the end
    # ones, so that a text wider than its bar stays off the axes' numbers.
    fig.update_yaxes(title_text="probability", range=[0, max(values) * 1.18 + 0.02])
    n = len(fig.data[0].x)
    fig.update_xaxes(range=[-1, n])


def _mark(m: Microscope, token: int, text: str) -> list[str]:
    """Bar texts: `text` over `token`'s bar, nothing over the others."""
    return [text if t == token else "" for t in m.tokens] + [""] * (len(m.labels) - len(m.tokens))


def markdown(m: Microscope, r: Round, tokenizer) -> str:
    """One short plain-language note under the chart; where the target's token is one the draft
    cannot propose, a sentence that says so."""
    note = _note(m, r, tokenizer)
    if m.outside:
        note += " " + cannot_propose(f"`{token_text(tokenizer, m.drawn)}`", m.head_rows)
    return note


def _note(m: Microscope, r: Round, tokenizer) -> str:
    def tok(token: int) -> str:
        return f"`{token_text(tokenizer, token)}`"

    i, drawn = m.position, tok(m.drawn)
    if m.kind == "greedy" and r.bonus:
        return (
            "At temperature 0, p and q are one-hot: all of each on its model's top choice, so "
            "Σ min(p, q) is 1 where the two agree and 0 where they differ. Every guess was the "
            f"target's top choice, and the bonus token {drawn} is its top choice at the next "
            "position."
        )
    if m.kind == "greedy":
        return (
            "At temperature 0, p and q are one-hot: all of each on its model's top choice, so "
            "Σ min(p, q) is 1 where the two agree and 0 where they differ. Here the draft's "
            f"{tok(m.drafted)} was not the target's top choice: overlap 0, the guess is rejected, "
            f"and the residual max(0, p − q) is p itself, the target's top choice {drawn}."
        )
    if m.kind == "plain":
        return f"No guesses this round: the target's token {drawn} came straight from its own p."
    if m.kind == "bonus":
        return (
            f"Every guess was kept, so there was nothing to correct: the bonus token {drawn} was "
            f"drawn straight from the target's p at position {i + 1} (the bars \u201cp: the "
            "target\u201d). The draft never guessed this position, so there is no q to compare."
        )
    if m.judge == "block":
        return _block_note(m, r, tok)
    copied = " (a copied guess: all of q on it)" if m.source == "lookup" else ""
    return (
        f"**Σ min(p, q) = {prob(m.kept)}: the chance a draft token is kept here**, averaged over "
        "what the draft might propose — the overlap of p and q (the bars \u201cmin(p, q)\u201d), "
        f"one minus their total-variation distance. The guess {tok(m.drafted)} had "
        f"q = {prob(m.q_x)}{copied} but p = {prob(m.p_x)}: its outline stands above its bar, so "
        "it was kept only with chance "
        f"p/q = {prob(r.accept_prob[i])}, and u = {prob(r.u[i])} said no. The part stacked on top, "
        f"max(0, p − q) (Σ = {prob(m.left)}), is what p has above q: what the draft under-"
        + (
            f"proposed. Renormalised (the second chart), it is where {drawn} was drawn from, so "
            "that kept guesses and replacements together follow p exactly."
            if not m.stages
            else "proposed. " + _tree_note(m, r, tok)
        )
    )


def _block_note(m: Microscope, r: Round, tok) -> str:
    """Where a round judged as a block stopped: the weight w its kept guesses carry there, p
    weighed by it against q, and the block residual max(0, w·p − q) the next token came from;
    a tree's walk leaf to root (``traversal.traverse``) in words."""
    i, drawn, w = m.position, tok(m.drawn), prob(m.weight)
    carry = (
        f"The kept guesses carry weight **w = {w}** here, the share of the target's mass the "
        "kept text still holds (w = min(1, w before · p/q), guess by guess)."
    )
    if r.sibling is not None:
        kept = f"{span(1, i)} and a sibling after them" if i else "a sibling of guess 1"
        stop = f"**Judged as a block, the round kept {kept}.** {carry}"
    elif i:
        stop = (
            f"**Judged as a block, the round kept {span(1, i)}**: guess {i} was the last "
            f"whose u fell below its h. {carry}"
        )
    else:
        stop = (
            "**Judged as a block, the round kept no guess**: no u fell below its h. Before any "
            "kept guess the weight is **w = 1**."
        )
    rest = (
        f"The bars stack p weighed by w: min(w·p, q) (Σ = {prob(m.kept)}), and on top "
        f"max(0, w·p − q) (Σ = {prob(m.left)}), what the weighed p has above q; q is the "
        f"outline. The guess at this position, {tok(m.drafted)}, had q = {prob(m.q_x)} and "
        f"p = {prob(m.p_x)}."
    )
    tried = r.siblings_tried[i] if i < len(r.siblings_tried) else ()
    if tried or r.sibling is not None:
        end = (
            f"{tok(r.sibling)} was kept, so {drawn} came from the target's p at that sibling's "
            "own row (the second chart)"
            if r.sibling is not None
            else f"none was kept, so {drawn} came from what those removals left of p (the second "
            "chart)"
        )
        return (
            f"{stop} {rest} Walked leaf to root, the tree then tried this guess's siblings in "
            f"the order drawn, each against what the removals before it left: {end}. "
            "Traversal verification keeps every token distributed exactly as p."
        )
    same = " With w = 1 it is token by token's residual max(0, p − q)." if m.weight == 1 else ""
    return (
        f"{stop} {rest} Renormalised, that block residual (the second chart) is where {drawn} was "
        f"drawn from, so that the kept block and its next token together follow p exactly.{same}"
    )


def _tree_note(m: Microscope, r: Round, tok) -> str:
    """At a tree's node: the siblings tried after the first guess, each against what the
    rejections before it left of p (the second chart's bars, one set per guess)."""
    tried = r.siblings_tried[m.position]
    end = (
        f"{tok(m.kept_sibling)} was kept, so the round ends below it: the next token, "
        f"{tok(m.drawn)}, comes from the target's p at that sibling's own row of the tree pass."
        if m.kept_sibling is not None
        else f"all {len(tried)} were rejected too, so the target drew {tok(m.drawn)} from what "
        "the last rejection left (the last set of bars)."
    )
    return (
        f"A tree does not stop here: it tries the {len(tried)} sibling(s) drawn with this "
        "guess, in order, each with q renormalised without the guesses before it and judged "
        "against what is left of p, max(0, p − q) renormalised (the second chart: p shrinking "
        f"guess by guess). Here {end} Recursive rejection sampling without replacement keeps "
        "every token distributed exactly as p."
    )
