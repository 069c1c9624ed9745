"""A tree round drawn as a tree: the draft's chain as a spine, each position's siblings hanging
below it in the order they were tried, every node marked kept, rejected or never judged, and the
round's own token where it came from.

Plain numbers in (a ``rounds.Round`` with its ``siblings``), a ``go.Figure`` out. Each state has
a marker shape and a sign in its label as well as a colour, and the kept path is drawn thicker,
so the tree reads without colour. Edges run along the rows and turn down halfway between two
positions, so the space above each node, where its label sits, holds no edge.
"""

from collections.abc import Callable
from dataclasses import dataclass

import plotly.graph_objects as go

from specdemo.app.charts import layout
from specdemo.app.numbers import prob
from specdemo.decode.render import COLORS
from specdemo.decode.rounds import Round

# state -> (legend name, marker symbol, colour, sign before the token)
STATES = {
    "kept": ("kept", "circle", COLORS["accepted"], "✓"),
    "rejected": ("rejected", "x", COLORS["rejected"], "✗"),
    "unjudged": (
        "never judged (after a rejection or a kept sibling)",
        "circle-open",
        "#9ca3af",
        "·",
    ),
    "bonus": ("bonus: from the last kept node's own p", "star", COLORS["bonus"], "★"),
    "resampled": (
        "drawn from what the rejections left of p",
        "diamond",
        COLORS["resampled"],
        "◆",
    ),
}
ROOT = "the text<br>so far"  # in two lines: narrower than a column
TOKEN_CHARS = 10  # a token's text in its label at most, so the label keeps within its column
LABEL_POSITION = "top center"  # above the node: edges enter and leave it along its row
ROW_PX = 70  # the figure's height per row of siblings


@dataclass(frozen=True)
class Node:
    x: int  # depth: 0 the root, 1..K the chain's positions, K + 1 a bonus after a full chain
    y: int  # 0 the spine; -1, -2, ... the siblings at that depth, in the order tried
    token: int | None  # None for the root
    state: str  # a key of STATES, or "root"
    parent: tuple[int, int] | None
    hover: str = ""


def nodes(r: Round) -> list[Node]:
    """The round's nodes, the root first. The spine's node at depth d + 1 hangs from depth d, as
    do its siblings; the round's own token hangs from the last kept node (in that node's row,
    or below its own depth's nodes where one holds that row), or, where every guess at a
    position was rejected, sits below them as their replacement."""
    out = [Node(0, 0, None, "root", None)]
    n, block = r.n_accepted, r.judge == "block"
    for i, token in enumerate(r.draft):
        # Walked leaf to root (a block), every guess below the kept ones was tried and failed.
        state = "kept" if i < n else "rejected" if i == n or block else "unjudged"
        hover = f"q = {prob(r.q_x[i])}, p = {prob(r.p_x[i])}, min(1, p/q) = "
        hover += prob(r.accept_prob[i]) + (f", u = {prob(r.u[i])}" if i <= n else "")
        if block:
            hover = (
                f"q = {prob(r.q_x[i])}, p = {prob(r.p_x[i])}, w = {prob(r.weights[i])}, "
                f"h = {prob(r.stop_chance[i])}, u = {prob(r.u[i])}"
            )
        out.append(Node(i + 1, 0, token, state, (i, 0), hover))
        tried = r.siblings_tried[i] if i < len(r.siblings_tried) else ()
        group = r.siblings[i] if i < len(r.siblings) else ()
        for j, sibling in enumerate(group):
            if j < len(tried):
                t = tried[j]
                state = "kept" if t.kept else "rejected"
                chance = "h" if block else "min(1, p/q)"  # a block tries it with chance h
                hover = (
                    f"q = {prob(t.q_x)} (earlier guesses removed), p = {prob(t.p_x)} "
                    f"(what they left), {chance} = {prob(t.accept_prob)}, "
                    f"u = {prob(t.u)}"
                )
            else:
                state, hover = "unjudged", "never judged"
            out.append(Node(i + 1, -(j + 1), sibling, state, (i, 0), hover))
    if r.sibling is not None:  # a sibling was kept: the bonus comes from its own row
        kept = next(node for node in out if node.state == "kept" and node.y < 0)
        below = min((node.y for node in out if node.x == kept.x + 1), default=kept.y + 1)
        y = min(kept.y, below - 1)  # in the sibling's row, unless a node of that depth is there
        out.append(Node(kept.x + 1, y, r.next_token, "bonus", (kept.x, kept.y)))
    elif r.bonus:  # the whole chain was kept
        out.append(Node(r.k + 1, 0, r.next_token, "bonus", (r.k, 0)))
    else:  # every guess at position n + 1 was rejected
        below = min(node.y for node in out if node.x == n + 1)
        out.append(Node(n + 1, below - 1, r.next_token, "resampled", (n, 0)))
    return out


def short(text: str) -> str:
    """`text` cut to TOKEN_CHARS, ending in "…" where cut (the node's hover has it whole)."""
    return text if len(text) <= TOKEN_CHARS else text[: TOKEN_CHARS - 1] + "…"


def edge(n: Node) -> list[tuple[float, float]]:
    """The corners of the edge from `n`'s parent to `n`: along the parent's row, down halfway
    to `n`'s position, then along `n`'s row."""
    (px, py), turn = n.parent, n.parent[0] + 0.5
    return [(px, py), (n.x, n.y)] if py == n.y else [(px, py), (turn, py), (turn, n.y), (n.x, n.y)]


def tree_chart(r: Round, labels: Callable[[list[int]], list[str]]) -> go.Figure:
    """The round's tree (``nodes``): edges grey, the kept path thick, one trace per state, each
    node's label above it."""
    found = nodes(r)
    texts = dict(zip(found[1:], labels([n.token for n in found[1:]]), strict=True))
    fig = go.Figure()
    emitted = ("kept", "bonus", "resampled")  # the tokens the round wrote
    kept = {(n.x, n.y) for n in found if n.state in emitted} | {(0, 0)}
    for thick in (False, True):
        xs, ys = [], []
        for n in found:
            if n.parent is None or ((n.x, n.y) in kept and n.parent in kept) != thick:
                continue
            corners = edge(n)
            xs += [x for x, _ in corners] + [None]
            ys += [y for _, y in corners] + [None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                hoverinfo="skip",
                name="kept path" if thick else "tried or drawn",
                line={
                    "color": "#374151" if thick else "#d1d5db",
                    "width": 5 if thick else 2,
                    "dash": "solid" if thick else "dot",
                },
            )
        )
    root = {"symbol": "square", "size": 16, "color": "#6b7280"}
    fig.add_trace(
        go.Scatter(
            x=[0],
            y=[0],
            mode="markers+text",
            text=[ROOT],
            marker=root,
            textposition=LABEL_POSITION,
            showlegend=False,
        )
    )
    for state, (name, symbol, color, sign) in STATES.items():
        shown = [n for n in found if n.state == state]
        if not shown:
            continue
        fig.add_trace(
            go.Scatter(
                x=[n.x for n in shown],
                y=[n.y for n in shown],
                mode="markers+text",
                name=name,
                text=[f"{sign} {short(texts[n])}" for n in shown],
                textposition=LABEL_POSITION,
                customdata=[f"{sign} {texts[n]}<br>{n.hover}" for n in shown],
                hovertemplate="%{customdata}<extra></extra>",
                marker={
                    "symbol": symbol,
                    "size": 18,
                    "color": color,
                    "line": {"width": 2, "color": color},
                },
            )
        )
    depth = max(n.x for n in found)
    fig.update_xaxes(
        range=[-0.6, depth + 0.6],
        tickvals=list(range(depth + 1)),
        ticktext=["root", *(f"position {d}" for d in range(1, depth + 1))],
        showgrid=False,
        zeroline=False,
    )
    low = min(n.y for n in found)
    fig.update_yaxes(range=[low - 0.4, 0.9], showticklabels=False, showgrid=False, zeroline=False)
    title = "The round as a tree: the draft's guesses on top, siblings below in the order tried"
    return layout(fig, title, height=260 + ROW_PX * (-low))
