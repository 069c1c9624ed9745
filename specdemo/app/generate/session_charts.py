"""The session's figures, one panel each: every run's share of drafts kept and its speedup
against K, the speedup beside two curves (the textbook's and the one predicted from costs
measured on this machine); where each run's time went; and how often each draft position was
kept. ``RunRecord``s in, a ``go.Figure`` out (``costs`` does the numbers; the look follows
``charts``).

A colour is a group of runs (a temperature, and drafter), the same in every figure; a line's style
says what the line is, named once in grey in the legend (KEYS).
"""

from collections import defaultdict
from statistics import mean

import plotly.graph_objects as go

from specdemo.app.charts import FOOT, group_look, layout, placeholder
from specdemo.app.generate import costs
from specdemo.app.generate.run_record import TIME_PARTS, RunRecord
from specdemo.render import COLORS

AUTO = "auto K, at the mean K it chose"
TEXTBOOK = "textbook theory (verify = 1 step)"
PREDICTED = "predicted from measured costs"
CAPTURED = "predicted with the draft step as a CUDA graph (measured)"
IID = "i.i.d. formula: one α per draft"
KEY_COLOR = "#6b7280"
# Each styled trace joins its style's legend group, so its grey entry shows or hides all of them.
KEYS = {
    AUTO: {"mode": "markers", "marker": {"symbol": "star", "size": 18, "color": KEY_COLOR}},
    TEXTBOOK: {"mode": "lines", "line": {"color": KEY_COLOR, "width": 2, "dash": "dot"}},
    PREDICTED: {"mode": "lines", "line": {"color": KEY_COLOR, "width": 3, "dash": "dash"}},
    CAPTURED: {"mode": "lines", "line": {"color": KEY_COLOR, "width": 2, "dash": "dashdot"}},
    IID: {"mode": "lines", "line": {"color": KEY_COLOR, "width": 2, "dash": "dot"}},
}


def kept_chart(runs: list[RunRecord]) -> go.Figure:
    """The session's drafts kept / drafted against K, one line per group: it falls as K grows
    even at a constant α, since drafts after a rejection are never judged."""
    if not runs:
        return placeholder("Each run adds a point here; the Sweep button fills a grid")
    fig = go.Figure()
    for i, (key, group) in enumerate(costs.groups(runs)):
        _add_runs(fig, costs.group_name(key), group, "kept_rate", *group_look(i))
    fig.update_yaxes(range=[0, 1.05])
    return _against_k(fig, "Drafts kept / drafted (measured)")


def speedup_chart(runs: list[RunRecord]) -> go.Figure:
    """The session's measured speedups against K, one line per group; beside them, two curves at
    the group's measured α per draft (``costs.group_curves``): the textbook's, which charges a
    verify as one target step, and the one predicted from the step costs measured on this
    machine, its best K marked; on CUDA a third, with the draft step replayed from a captured
    CUDA graph, where that step was measured."""
    if not runs:
        return placeholder("Each run's speedup adds a point here, beside two formulas' curves")
    fig = go.Figure()
    for i, (key, group) in enumerate(costs.groups(runs)):
        color, symbol = group_look(i)
        _add_runs(fig, costs.group_name(key), group, "speedup", color, symbol)
        curve = costs.group_curves(key, group)
        if curve is not None:
            _add_curves(fig, curve, color)
    fig.add_hline(y=1.0, line={"color": "#9ca3af", "dash": "dot"})
    fig.update_yaxes(rangemode="tozero")
    return _against_k(fig, "Speedup: measured and by formula")


def _against_k(fig: go.Figure, title: str) -> go.Figure:
    # From below 0: an auto-K run that mostly chose K = 0 sits at its mean K, under 1.
    fig.update_xaxes(title_text="K (draft tokens per round)", range=[-0.5, 16.5])
    return _keyed(layout(fig, title, height=480, legend=FOOT))


def _add_runs(
    fig: go.Figure, name: str, group: list[RunRecord], field: str, color: str, symbol: str
) -> None:
    """A group's runs: `field` averaged at each fixed K (a line named after the group, its
    markers the group's `symbol`), and each auto-K run as a star at the mean K it chose."""
    by_k = defaultdict(list)
    for r in group:
        by_k[r.k].append(r)
    ks = sorted(k for k in by_k if k != "auto")
    marker = {"size": 11, "color": color, "symbol": symbol}
    fig.add_trace(
        go.Scatter(
            x=ks or [None],  # a group of auto-K runs alone still names its colour in the legend
            y=[mean(getattr(r, field) for r in by_k[k]) for k in ks] or [None],
            name=name,
            mode="lines+markers",
            line={"color": color, "width": 3},
            marker=marker,
            legendgroup=name,
        )
    )
    if auto := by_k.get("auto"):
        fig.add_trace(
            go.Scatter(
                x=[r.mean_k for r in auto],
                y=[getattr(r, field) for r in auto],
                name=f"{name} auto K (at its mean K)",
                mode="markers",
                marker={**marker, "size": 18, "symbol": "star"},
                legendgroup=AUTO,
                showlegend=False,
            )
        )


def _add_curves(fig: go.Figure, curve: costs.Curves, color: str) -> None:
    """The textbook's speedup (dotted) and the one predicted from measured costs (dashed, over
    the K with a measured verify pass), its best K marked. Their α is the per-draft acceptance
    probability; kept / drafted (``kept_chart``) is lower, since drafts after a rejection are
    never judged."""
    c, at = curve.costs.c, f"{curve.name}, K = %{{x}}: %{{y:.2f}}×"
    textbook = f"by the textbook formula (α per draft {curve.alpha:.2f}, c {c:.2f} measured, "
    _add_curve(fig, curve.name, TEXTBOOK, curve.textbook, color, f"{at} {textbook}verify = 1 step)")
    verify = [curve.costs.verify_cost(k) for k in curve.predicted]
    predicted = f"predicted (α per draft {curve.alpha:.2f}, c {c:.2f}, verify %{{customdata:.2f}}"
    hover = f"{at} {predicted} steps, all measured)"
    _add_curve(fig, curve.name, PREDICTED, curve.predicted, color, hover, customdata=verify)
    if curve.captured:  # on CUDA: the lever of a draft step replayed from one captured graph
        captured = f"c {curve.captured_c:.2f} measured, against {c:.2f} eager"
        hover = f"{at} if the draft step were captured as a CUDA graph ({captured})"
        _add_curve(fig, curve.name, CAPTURED, curve.captured, color, hover)
    best = curve.best_k
    fig.add_trace(
        go.Scatter(
            x=[best],
            y=[curve.predicted[best]],
            name=f"{curve.name} best K predicted",
            mode="markers+text",
            text=[f"best K = {best}"],
            textposition="top right",
            textfont={"size": 15, "color": color},
            marker={"symbol": "diamond-open", "size": 18, "color": color, "line": {"width": 3}},
            hovertemplate="best K by measured costs: %{x}, %{y:.2f}×<extra></extra>",
            legendgroup=PREDICTED,
            showlegend=False,
        )
    )


def _add_curve(fig, group: str, style: str, points: dict, color: str, hover: str, **extra):
    """One formula's speedup against K for a group: drawn as its style's grey key (KEYS) in the
    group's colour, shown and hidden with that key."""
    fig.add_trace(
        go.Scatter(
            x=list(points),
            y=list(points.values()),
            name=f"{group} {style}",
            line={**KEYS[style]["line"], "color": color},
            mode="lines",
            hovertemplate=hover + "<extra></extra>",
            legendgroup=style,
            showlegend=False,
            **extra,
        )
    )


def _keyed(fig: go.Figure) -> go.Figure:
    """`fig` with a grey legend entry for each style in KEYS that its traces use."""
    for name, style in KEYS.items():
        if any(t.legendgroup == name for t in fig.data):
            fig.add_trace(
                go.Scatter(
                    x=[None], y=[None], name=name, legendgroup=name, hoverinfo="skip", **style
                )
            )
    return fig


TIME_COLORS = dict(zip(TIME_PARTS, ("#9ca3af", "#374151", COLORS["bonus"], "#d6d3d1"), strict=True))
TIME_SHAPES = dict(zip(TIME_PARTS, ("", "/", ".", "x"), strict=True))  # apart without colour
BREAKDOWN_RUNS = 12  # the newest runs get a bar each


def time_chart(runs: list[RunRecord]) -> go.Figure:
    """Where each run's time went, in ms per new token (``RunRecord.time_split``), with the target
    alone's pace marked."""
    shown = _newest(runs)
    if not shown:
        return placeholder("Where each run's time goes appears here after a run")
    labels = [f"#{i} K={r.k} {costs.group_name(r.group)}" for i, r, _ in shown]
    fig = go.Figure()
    for part, color in TIME_COLORS.items():
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[1000 * split[part] / max(r.spec_tokens, 1) for _, r, split in shown],
                customdata=[split[part] / (r.spec_seconds or 1) for _, r, split in shown],
                orientation="h",
                name=part,
                marker_color=color,
                marker_pattern_shape=TIME_SHAPES[part],
                hovertemplate=f"{part}: %{{x:.1f}} ms per token, %{{customdata:.0%}} of the run"
                "<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=[1000 * r.target_seconds / max(r.target_tokens, 1) for _, r, _ in shown],
            name="target alone",
            mode="markers",
            marker={"symbol": "line-ns-open", "size": 26, "color": "#111827", "line": {"width": 4}},
            hovertemplate="target alone: %{x:.1f} ms per token<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="ms per new token", rangemode="tozero")
    fig.update_yaxes(autorange="reversed")
    fig = layout(fig, "Where the time goes (measured)", _height(shown), FOOT)
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    return fig


def positions_chart(runs: list[RunRecord]) -> go.Figure:
    """Per draft position, the share of judged drafts kept, beside the one α per draft that the
    i.i.d. formula assumes for every position; as tall as ``time_chart``, which it sits beside."""
    fig = go.Figure()
    for j, (key, group) in enumerate(costs.groups(runs)):
        _add_positions(fig, costs.group_name(key), group, *group_look(j))
    if not fig.data:
        return placeholder(
            "How often each draft position is kept appears here once drafts are judged"
        )
    fig.update_xaxes(title_text="draft position in the round", dtick=1)
    fig.update_yaxes(title_text="kept / judged", range=[0, 1.05])
    return _keyed(layout(fig, "Drafts kept, by position (measured)", _height(_newest(runs)), FOOT))


def _newest(runs: list[RunRecord]) -> list[tuple[int, RunRecord, dict]]:
    """(number, run, time split) of the newest BREAKDOWN_RUNS runs with a time split, newest
    first."""
    shown = [(i, r, split) for i, r in enumerate(runs, 1) if (split := r.time_split)]
    return shown[::-1][:BREAKDOWN_RUNS]


def _height(shown: list) -> int:
    return max(400, 200 + 34 * len(shown))


def _add_positions(
    fig: go.Figure, name: str, group: list[RunRecord], color: str, symbol: str
) -> None:
    """A group's acceptance rate at each draft position (a line named after the group), and the
    pooled rate (the α per draft of the formulas) as a flat line: where they part, acceptance is
    not i.i.d."""
    judged, kept = costs.position_counts(group)
    positions = [i + 1 for i, n in enumerate(judged) if n]
    if not positions:
        return
    fig.add_trace(
        go.Scatter(
            x=positions,
            y=[kept[i - 1] / judged[i - 1] for i in positions],
            customdata=[judged[i - 1] for i in positions],
            name=name,
            mode="lines+markers",
            line={"color": color, "width": 3},
            marker={"size": 11, "color": color, "symbol": symbol},
            hovertemplate=f"{name}, position %{{x}}: %{{y:.0%}} of %{{customdata}} judged kept"
            "<extra></extra>",
        )
    )
    pooled = sum(kept) / sum(judged)
    fig.add_trace(
        go.Scatter(
            x=[positions[0] - 0.3, positions[-1] + 0.3],
            y=[pooled, pooled],
            name=f"{name} i.i.d. formula: α per draft = {pooled:.2f} at every position",
            mode="lines",
            line={"color": color, "width": 2, "dash": "dot"},
            hovertemplate=f"{name}: α per draft = {pooled:.2f} at every position, as the i.i.d. "
            "formula assumes<extra></extra>",
            legendgroup=IID,
            showlegend=False,
        )
    )
