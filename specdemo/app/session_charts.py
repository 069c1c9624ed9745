"""The session's figures: every run against K beside two speedup curves, the textbook's and the
one predicted from costs measured on this machine; and where each run's time went, with how often
each draft position was kept. Plain ``race.record`` rows in, a ``go.Figure`` out (``costs`` does
the numbers; the look follows ``charts``).
"""

from collections import defaultdict
from statistics import mean

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdemo.app import costs
from specdemo.app.charts import PALETTE, layout, placeholder
from specdemo.render import COLORS


def session_chart(runs: list[dict]) -> go.Figure:
    """The session's runs against K, one line per temperature (and drafter). Beside the measured
    speedups, two curves at the group's measured α per draft (``costs.group_curves``): the
    textbook's, which charges a verify as one target step, and the one predicted from the step
    costs measured on this machine, its best K marked."""
    if not runs:
        return placeholder("Each run adds a point here; the Sweep button fills a grid")
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "Acceptance rate α (measured)",
            "Speedup: runs measured, curves by formula",
        ),
        horizontal_spacing=0.09,
    )
    for i, (key, group) in enumerate(costs.groups(runs)):
        color, name = PALETTE[i % len(PALETTE)], costs.group_name(key)
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
        for col, field in ((1, "alpha"), (2, "speedup")) if auto else ():
            fig.add_trace(
                go.Scatter(
                    x=[r["mean_k"] for r in auto],
                    y=[r[field] for r in auto],
                    name=f"{name} auto K (at its mean K)",
                    showlegend=col == 1,
                    legendgroup=name,
                    **star,
                ),
                row=1,
                col=col,
            )
        curve = costs.group_curves(key, group)
        if curve is not None:
            _add_curves(fig, curve, color)
    fig.add_hline(y=1.0, line={"color": "#9ca3af", "dash": "dot"}, row=1, col=2)
    fig.update_xaxes(title_text="K (draft tokens per round)", range=[0.5, 16.5], dtick=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig = layout(fig, "The session: every run against K", height=480)
    below = {"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0, "xanchor": "left"}
    fig.update_layout(legend=below, margin={"b": 130})
    return fig


def _add_curves(fig: go.Figure, curve: costs.Curves, color: str) -> None:
    """The textbook's speedup (dotted) and the one predicted from measured costs (dashed, over
    the K with a measured verify pass), its best K marked. Their α is the per-draft acceptance
    probability; accepted/drafted (the left panel) is lower, since drafts after a rejection are
    never judged."""
    c, common = curve.costs.c, {"mode": "lines", "legendgroup": curve.name}
    fig.add_trace(
        go.Scatter(
            x=list(curve.textbook),
            y=list(curve.textbook.values()),
            name=f"{curve.name} textbook theory (verify = 1 step)",
            line={"color": color, "width": 2, "dash": "dot"},
            hovertemplate=f"K = %{{x}}: %{{y:.2f}}× by the textbook formula (α per draft "
            f"{curve.alpha:.2f}, c {c:.2f} measured, verify = 1 step)<extra></extra>",
            **common,
        ),
        row=1,
        col=2,
    )
    ks = list(curve.predicted)
    fig.add_trace(
        go.Scatter(
            x=ks,
            y=list(curve.predicted.values()),
            customdata=[curve.costs.verify_cost(k) for k in ks],
            name=f"{curve.name} predicted from measured costs",
            line={"color": color, "width": 3, "dash": "dash"},
            hovertemplate=f"K = %{{x}}: %{{y:.2f}}× predicted (α per draft {curve.alpha:.2f}, "
            f"c {c:.2f}, verify %{{customdata:.2f}} steps, all measured)<extra></extra>",
            **common,
        ),
        row=1,
        col=2,
    )
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
            showlegend=False,
            legendgroup=curve.name,
            hovertemplate="best K by measured costs: %{x}, %{y:.2f}×<extra></extra>",
        ),
        row=1,
        col=2,
    )


TIME_COLORS = dict(
    zip(costs.TIME_PARTS, ("#9ca3af", "#374151", COLORS["bonus"], "#d6d3d1"), strict=True)
)
BREAKDOWN_RUNS = 12  # the newest runs get a bar each


def breakdown_chart(runs: list[dict]) -> go.Figure:
    """Where each run's time went, in ms per new token (``costs.time_split``), with the target
    alone's pace marked; and per draft position, the share of judged drafts kept, beside the one
    α per draft that the i.i.d. formula assumes for every position."""
    shown = [(i, r, split) for i, r in enumerate(runs, 1) if (split := costs.time_split(r))]
    if not shown:
        return placeholder("Where each run's time goes appears here after a run")
    shown = shown[::-1][:BREAKDOWN_RUNS]  # newest first, at the top
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.56, 0.44],
        horizontal_spacing=0.16,
        subplot_titles=("Where the time goes (measured)", "Drafts kept, by position (measured)"),
    )
    labels = [f"#{i} K={r['k']} {costs.group_name(costs.group_key(r))}" for i, r, _ in shown]
    for part, color in TIME_COLORS.items():
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[1000 * split[part] / max(r["spec_tokens"], 1) for _, r, split in shown],
                customdata=[split[part] / (r["spec_seconds"] or 1) for _, r, split in shown],
                orientation="h",
                name=part,
                marker_color=color,
                hovertemplate=f"{part}: %{{x:.1f}} ms per token, %{{customdata:.0%}} of the run"
                "<extra></extra>",
            ),
            row=1,
            col=1,
        )
    fig.add_trace(
        go.Scatter(
            y=labels,
            x=[1000 * r["target_seconds"] / max(r["target_tokens"], 1) for _, r, _ in shown],
            name="target alone",
            mode="markers",
            marker={"symbol": "line-ns-open", "size": 26, "color": "#111827", "line": {"width": 4}},
            hovertemplate="target alone: %{x:.1f} ms per token<extra></extra>",
        ),
        row=1,
        col=1,
    )
    for j, (key, group) in enumerate(costs.groups(runs)):
        _add_positions(fig, costs.group_name(key), group, PALETTE[j % len(PALETTE)])
    fig.update_xaxes(title_text="ms per new token", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="draft position in the round", dtick=1, row=1, col=2)
    fig.update_yaxes(title_text="kept / judged", range=[0, 1.05], row=1, col=2)
    fig = layout(fig, "", height=max(380, 170 + 34 * len(shown)))
    below = {"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0, "xanchor": "left"}
    fig.update_layout(barmode="stack", legend={**below, "traceorder": "normal"}, margin={"b": 120})
    return fig


def _add_positions(fig: go.Figure, name: str, group: list[dict], color: str) -> None:
    """A group's acceptance rate at each draft position, and the pooled rate (the α per draft
    of the formulas) as a flat line: where they part, acceptance is not i.i.d."""
    judged, kept = costs.position_counts(group)
    positions = [i + 1 for i, n in enumerate(judged) if n]
    if not positions:
        return
    fig.add_trace(
        go.Scatter(
            x=positions,
            y=[kept[i - 1] / judged[i - 1] for i in positions],
            customdata=[judged[i - 1] for i in positions],
            name=f"{name} kept at each position",
            mode="lines+markers",
            line={"color": color, "width": 3},
            marker={"size": 11, "color": color},
            hovertemplate="position %{x}: %{y:.0%} of %{customdata} judged<extra></extra>",
        ),
        row=1,
        col=2,
    )
    pooled = sum(kept) / sum(judged)
    fig.add_trace(
        go.Scatter(
            x=[positions[0] - 0.3, positions[-1] + 0.3],
            y=[pooled, pooled],
            name=f"{name} i.i.d. formula: α per draft = {pooled:.2f} at every position",
            mode="lines",
            line={"color": color, "width": 2, "dash": "dot"},
            hoverinfo="skip",
        ),
        row=1,
        col=2,
    )
