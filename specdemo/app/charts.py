"""Plotly figures for the app: plain numbers in, a ``go.Figure`` out (picklable, no tensors).

Colours follow ``render.COLORS`` so the charts and the coloured text agree; fonts and markers are
sized to be read from the back of a room.
"""

import textwrap
from collections.abc import Callable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdemo.decode.render import COLORS
from specdemo.decode.rounds import Round

PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]
# Each group of runs also has its own marker, so groups stay apart without their colours.
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x", "triangle-down", "pentagon"]


def group_look(i: int) -> tuple[str, str]:
    """The colour and marker symbol of the i-th group of runs in a chart."""
    return PALETTE[i % len(PALETTE)], SYMBOLS[i % len(SYMBOLS)]


# The legend lies flat at the figure's foot, under the x-axis title. Placed against the container
# rather than the plot, it makes plotly grow the bottom margin to hold it in as many rows as it
# wraps into at the width the browser gives, so it meets neither the title in the top margin nor
# the axes' labels, at any width.
FOOT = {
    "orientation": "h",
    "xref": "container",
    "yref": "container",
    "x": 0,
    "y": 0,
    "xanchor": "left",
    "yanchor": "bottom",
}


def layout(fig: go.Figure, title: str, height: int = 380, legend: dict = FOOT) -> go.Figure:
    """The app's look: `title` at the top left in a margin of its own, axes that make room for
    their labels (the template's automargin), and `legend` at the foot, shown even for one
    entry. Panels side by side are figures of their own in a ``gr.Row``, so that a phone stacks
    them; a figure stacks its panels only vertically."""
    fig.update_layout(
        template="plotly_white",
        title={"text": title, "x": 0.01},
        font={"size": 15},
        height=height,
        margin={"l": 60, "r": 20, "t": 60 if title else 30, "b": 20},
        bargap=0.2,
        legend=legend,
        showlegend=True,
    )
    return fig


# Characters a line: plotly never wraps text, and a phone's plot is about 250 px wide.
PLACEHOLDER_LINE = 28
NOTE_LINE = 14


def wrapped(text: str, width: int) -> str:
    """`text` in lines of at most `width` characters, joined by plotly's line break."""
    return "<br>".join(textwrap.wrap(text, width))


def placeholder(text: str, height: int = 380) -> go.Figure:
    """An empty chart that says what will appear in it, in lines short enough for a phone."""
    fig = go.Figure()
    text = wrapped(text, PLACEHOLDER_LINE)
    fig.add_annotation(text=text, showarrow=False, font={"size": 17, "color": "#6b7280"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return layout(fig, "", height)


K_ZERO = "K = 0 — drafting would not pay here"


# A copied round's bars (``rounds_chart``): their own colour and pattern, apart without colour.
COPIED_LOOK = {"proposed": ("#cbd5e1", "."), "accepted": ("#0072b2", "x")}  # Okabe-Ito blue


def rounds_chart(
    accepted: list[int], drafted: list[int], asked: list[int] = (), copied: list[bool] = ()
) -> go.Figure:
    """This run: drafts proposed and accepted in each round (bars), the K asked for (marks: the
    one automatic K chose, which a drafter may cut short) and drafts kept / drafted so far (line,
    its counts in the hover and, for the run so far, in the legend). A round asked for K = 0 is
    a plain target step, marked and labelled. A round whose guesses were `copied` from the
    context has bars of its own (COPIED_LOOK, named in the legend): a long copy reads as one.
    The axis reaches the longest round, so copies of 32 tokens stand in full."""
    if not accepted:
        return placeholder("Accepted drafts per round appear here during a run")
    rounds = list(range(1, len(accepted) + 1))
    copied = list(copied) or [False] * len(rounds)
    running, counts, kept, tried = [], [], 0, 0
    for a, d in zip(accepted, drafted, strict=True):
        kept, tried = kept + a, tried + d
        running.append(kept / tried if tried else None)
        counts.append(f"{kept}/{tried}")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    model = {
        "proposed": ("drafts proposed", "#d1d5db", ""),
        "accepted": ("drafts accepted", COLORS["accepted"], "/"),
    }
    copy = {part: (f"copies {part}", *look) for part, look in COPIED_LOOK.items()}
    kinds = [(model, False)] if not all(copied) else []  # each kind of round the run had
    kinds += [(copy, True)] if any(copied) else []
    for looks, mine in kinds:
        for part, values in (("proposed", drafted), ("accepted", accepted)):
            name, color, shape = looks[part]
            y = [v if c == mine else None for v, c in zip(values, copied, strict=True)]
            fig.add_trace(
                go.Bar(x=rounds, y=y, name=name, marker_color=color, marker_pattern_shape=shape),
                secondary_y=False,
            )
    fig.add_trace(
        go.Scatter(
            x=rounds,
            y=running,
            name=f"kept / drafted so far{_so_far(running[-1], counts[-1])}",
            mode="lines",
            line={"color": COLORS["bonus"], "width": 3},
            customdata=counts,
            hovertemplate="round %{x}: %{y:.0%} kept so far (%{customdata})<extra></extra>",
        ),
        secondary_y=True,
    )
    if asked:
        _add_asked(fig, rounds, asked)
    top = max([*drafted, *asked, 1]) + 0.3
    # A fixed range: autorange pads for the wide "K asked" marks, which on a phone's narrow axis
    # would widen it far past the rounds.
    fig.update_xaxes(title_text="round (one target pass)", range=[0.5, len(rounds) + 0.5])
    guesses = "guesses" if any(copied) else "drafts"  # the legend names copies and drafts
    fig.update_yaxes(title_text=guesses, range=[0, top], secondary_y=False)
    fig.update_yaxes(
        title_text="kept / drafted so far",
        range=[0, 1.05],
        secondary_y=True,
        showgrid=False,
        tickvals=[0, 0.25, 0.5, 0.75, 1],
        tickformat=".0%",
    )
    fig = layout(fig, "This run, round by round", height=420)
    fig.update_layout(barmode="overlay")
    return fig


def _so_far(rate: float | None, count: str) -> str:
    return "" if rate is None else f": {rate:.0%} ({count})"


def _add_asked(fig: go.Figure, rounds: list[int], asked: list[int]) -> None:
    mark = {"symbol": "line-ew-open", "size": 36, "color": "#111827", "line": {"width": 3}}
    fig.add_trace(
        go.Scatter(x=rounds, y=asked, name="K asked", mode="markers", marker=mark),
        secondary_y=False,
    )
    plain = [i for i, k in zip(rounds, asked, strict=True) if k == 0]
    if not plain:
        return
    fig.add_trace(
        go.Scatter(
            x=plain,
            y=[0] * len(plain),
            name=K_ZERO,
            mode="markers",
            marker={"symbol": "x", "size": 14, "color": COLORS["resampled"]},
            hovertext=[f"round {i}: {K_ZERO} (a plain target step)" for i in plain],
            hoverinfo="text",
        ),
        secondary_y=False,
    )
    # The note runs from its arrow towards the middle of the plot, in lines narrower than half
    # a phone's plot, so that it stays inside the plot wherever the arrow points.
    side = "left" if plain[0] <= len(rounds) / 2 else "right"
    fig.add_annotation(
        x=plain[0],
        y=0,
        text=wrapped(K_ZERO, NOTE_LINE),
        ay=-45,
        xanchor=side,
        align=side,
        bgcolor="rgba(255, 255, 255, 0.85)",
        font={"size": 15},
        arrowhead=2,
    )


def step_chart(r: Round, labels: Callable[[list[int]], list[str]]) -> go.Figure:
    """One round: q(x), p(x), min(1, p/q) and u per draft position (``microscope`` zooms in on
    the position where the round ended). Judged as a block, the running weight w and the
    stopping chance h that u is compared with instead of min(1, p/q), and every guess's u."""
    if not r.k:
        return placeholder("No guesses this round: the target's token came from p", 300)
    # Position numbers keep repeated tokens apart on a categorical axis.
    drafts = [f"{i + 1}: {text}" for i, text in enumerate(labels(r.draft))]
    block = r.judge == "block"
    checked = r.k if block else min(r.n_accepted + 1, r.k)  # a block draws and reads every u
    bars = [("q(x) draft", r.q_x, "#9ca3af", "."), ("p(x) target", r.p_x, "#374151", "")]
    if block:
        bars += [
            ("w: running weight", r.weights, "#6b7280", "x"),
            ("h: chance to stop here", r.stop_chance, COLORS["accepted"], "/"),
        ]
    else:
        bars += [("min(1, p/q)", r.accept_prob, COLORS["accepted"], "/")]
    fig = go.Figure()
    for name, values, color, shape in bars:
        fig.add_trace(
            go.Bar(x=drafts, y=values, name=name, marker_color=color, marker_pattern_shape=shape)
        )
    fig.add_trace(
        go.Scatter(
            x=drafts[:checked],
            y=r.u[:checked],
            name="u (uniform draw)",
            mode="markers",
            marker={"symbol": "diamond", "size": 16, "color": COLORS["resampled"]},
        )
    )
    fig.update_yaxes(range=[0, 1.05])
    title = (
        "Each guess: q, p, weight w, stop chance h and u"
        if block
        else ("Each guess: q, p, keep-chance and u")
    )
    fig = layout(fig, title, height=400)
    fig.update_layout(barmode="group")
    return fig
