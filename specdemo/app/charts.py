"""Plotly figures for the app: plain numbers in, a ``go.Figure`` out (picklable, no tensors).

Colours follow ``render.COLORS`` so the charts and the coloured text agree; fonts and markers are
sized to be read from the back of a room.
"""

from collections import defaultdict
from collections.abc import Callable
from statistics import mean

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdemo.records import Round
from specdemo.render import COLORS
from specdemo.theory import expected_speedup

PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]
K_AXIS = list(range(1, 17))


def _layout(fig: go.Figure, title: str, height: int = 380) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        title={"text": title, "x": 0.01},
        font={"size": 15},
        height=height,
        margin={"l": 60, "r": 20, "t": 70, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 1, "xanchor": "right"},
        bargap=0.2,
    )
    return fig


def placeholder(text: str, height: int = 380) -> go.Figure:
    """An empty chart that says what will appear in it."""
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, font={"size": 17, "color": "#6b7280"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, "", height)


def rounds_chart(accepted: list[int], drafted: list[int]) -> go.Figure:
    """This run: drafts proposed and accepted in each round (bars; with auto K the proposed bar
    shows the K chosen) and the running acceptance rate (line)."""
    if not accepted:
        return placeholder("Accepted drafts per round appear here during a run")
    rounds = list(range(1, len(accepted) + 1))
    running, kept, tried = [], 0, 0
    for a, d in zip(accepted, drafted, strict=True):
        kept, tried = kept + a, tried + d
        running.append(kept / tried if tried else None)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Bar(x=rounds, y=drafted, name="drafts proposed", marker_color="#d1d5db"),
        secondary_y=False,
    )
    fig.add_trace(
        go.Bar(x=rounds, y=accepted, name="drafts accepted", marker_color=COLORS["accepted"]),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(
            x=rounds,
            y=running,
            name="running acceptance rate",
            mode="lines",
            line={"color": COLORS["bonus"], "width": 3},
        ),
        secondary_y=True,
    )
    fig.update_xaxes(title_text="round (one target pass)")
    fig.update_yaxes(title_text="drafts", range=[0, max(drafted) + 0.3], secondary_y=False)
    fig.update_yaxes(title_text="α so far", range=[0, 1.05], secondary_y=True, showgrid=False)
    fig = _layout(fig, "This run, round by round")
    fig.update_layout(barmode="overlay")
    return fig


def session_chart(runs: list[dict]) -> go.Figure:
    """The session's runs against K, one line per temperature (and drafter); beside the
    measured speedup, the theory's (1 - α^(K+1)) / ((1 - α)(cK + 1)) from the measured α, c."""
    if not runs:
        return placeholder("Each run adds a point here; the Sweep button fills a grid")
    groups = defaultdict(list)
    for r in runs:
        groups[(r["drafter"], r["adaptive"], r["temperature"])].append(r)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Acceptance rate α", "Speedup over the target alone"),
        horizontal_spacing=0.09,
    )
    for i, ((drafter, adaptive, temperature), group) in enumerate(sorted(groups.items())):
        color = PALETTE[i % len(PALETTE)]
        name = f"T={temperature:g}" + ("" if drafter == "model" else f" {drafter}")
        name += " adaptive" if adaptive else ""
        by_k = defaultdict(list)
        for r in group:
            by_k[r["k"]].append(r)
        ks = sorted(k for k in by_k if k != "auto")
        alphas = [mean(r["alpha"] for r in by_k[k]) for k in ks]
        speedups = [mean(r["speedup"] for r in by_k[k]) for k in ks]
        line = {"color": color, "width": 3}
        marker = {"size": 11, "color": color}
        common = {"mode": "lines+markers", "line": line, "marker": marker, "legendgroup": name}
        fig.add_trace(go.Scatter(x=ks, y=alphas, name=name, **common), row=1, col=1)
        fig.add_trace(
            go.Scatter(x=ks, y=speedups, name=name, showlegend=False, **common), row=1, col=2
        )
        # Auto-K runs sit at the mean K they chose, as stars.
        auto = by_k.get("auto", [])
        star = {"mode": "markers", "marker": {**marker, "size": 18, "symbol": "star"}}
        for col, key in ((1, "alpha"), (2, "speedup")) if auto else ():
            fig.add_trace(
                go.Scatter(
                    x=[r["mean_k"] for r in auto],
                    y=[r[key] for r in auto],
                    name=f"{name} auto K (at its mean K)",
                    showlegend=col == 1,
                    legendgroup=name,
                    **star,
                ),
                row=1,
                col=col,
            )
        # The formula's α is the per-draft acceptance probability; accepted/drafted (plotted on
        # the left) is lower, since drafts after a rejection are never judged. c is None for a
        # run whose target-alone baseline was too short to time a plain step.
        timed = [r for r in group if r["c"] is not None]
        if not timed:
            continue
        alpha = mean(r["alpha_per_token"] for r in timed)
        c = mean(r["c"] for r in timed)
        fig.add_trace(
            go.Scatter(
                x=K_AXIS,
                y=[expected_speedup(min(alpha, 1.0), k, c) for k in K_AXIS],
                name=f"{name} theory (α per draft={alpha:.2f}, c={c:.2f})",
                mode="lines",
                line={"color": color, "width": 2, "dash": "dash"},
                legendgroup=name,
            ),
            row=1,
            col=2,
        )
    fig.add_hline(y=1.0, line={"color": "#9ca3af", "dash": "dot"}, row=1, col=2)
    fig.update_xaxes(title_text="K (draft tokens per round)", range=[0.5, 16.5], dtick=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig = _layout(fig, "The session: every run against K", height=460)
    below = {"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0, "xanchor": "left"}
    fig.update_layout(legend=below, margin={"b": 110})
    return fig


def exactness_chart(
    labels: list[str], p: list[float], spec: list[float], direct: list[float], n: int
) -> go.Figure:
    """Next-token histograms: speculative draws and direct draws beside the exact p."""
    fig = go.Figure()
    for name, values, color in (
        ("exact p", p, "#374151"),
        (f"speculative ({n:,} draws)", spec, COLORS["accepted"]),
        (f"direct from p ({n:,} draws)", direct, COLORS["bonus"]),
    ):
        fig.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=color))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="probability / frequency", rangemode="tozero")
    return _layout(fig, "The next token: three ways", height=420)


def step_chart(r: Round, labels: Callable[[list[int]], list[str]]) -> go.Figure:
    """One round: q(x), p(x), min(1, p/q) and u per draft position; then the distribution the
    target's own token came from (the residual after a rejection, p after a full accept)."""
    right = "Bonus: p at the next position" if r.bonus else "Residual max(0, p − q), normalised"
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        subplot_titles=("Each guess: q(x), p(x), keep-chance and u", right),
    )
    # Position numbers keep repeated tokens apart on a categorical axis.
    drafts = [f"{i + 1}: {text}" for i, text in enumerate(labels(r.draft))]
    checked = min(r.n_accepted + 1, r.k)
    for name, values, color in (
        ("q(x) draft", r.q_x, "#9ca3af"),
        ("p(x) target", r.p_x, "#374151"),
        ("min(1, p/q)", r.accept_prob, COLORS["accepted"]),
    ):
        fig.add_trace(go.Bar(x=drafts, y=values, name=name, marker_color=color), 1, 1)
    fig.add_trace(
        go.Scatter(
            x=drafts[:checked],
            y=r.u[:checked],
            name="u (uniform draw)",
            mode="markers",
            marker={"symbol": "diamond", "size": 16, "color": COLORS["resampled"]},
        ),
        1,
        1,
    )
    fig.add_trace(
        go.Bar(
            x=labels([t for t, _ in r.residual_top]),
            y=[prob for _, prob in r.residual_top],
            name="where the target's token came from",
            marker_color=COLORS["bonus"] if r.bonus else COLORS["resampled"],
        ),
        1,
        2,
    )
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig = _layout(fig, "", height=440)
    below = {"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0, "xanchor": "left"}
    fig.update_layout(barmode="group", legend=below, margin={"t": 40, "b": 90})
    return fig
