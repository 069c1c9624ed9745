"""The session's figures, one panel each: every run's share of drafts kept and its speedup
against K, the speedup beside two curves (the textbook's and the one predicted from costs
measured on this machine); where each run's time went, beside the target alone's; and how often
each draft position was kept. ``RunRecord``s in, a ``go.Figure`` out (``costs`` does the numbers;
the look follows ``charts``).

In the speedup chart a colour says where a figure comes from: this machine (the runs and the
curve predicted from their measured costs) or the textbook; each line is named in short at its
end, a line's style in full once in grey in the legend (KEYS), and a group of runs (a
temperature, and drafter) by its marker. Elsewhere a colour and a marker are a group, the same
in every figure; a rate shows its counts beside it.
"""

from collections import defaultdict
from collections.abc import Callable
from statistics import mean

import plotly.graph_objects as go

from specdemo.app.charts import FOOT, group_look, layout, placeholder
from specdemo.app.generate import costs, speedup_curves
from specdemo.app.generate.run_record import TIME_PARTS, RunRecord
from specdemo.app.generate.speedup_curves import K_AXIS_RANGE, MEASURED_COLOR, named
from specdemo.app.line_labels import LineLabel, add_line_labels, end_label
from specdemo.decode.render import COLORS

AUTO = "auto K, at the mean K it chose"
IID = "i.i.d. formula: one α per draft"
KEY_COLOR = speedup_curves.GREY
# Each styled trace joins its style's legend group, so its grey entry shows or hides all of them.
KEYS = {
    AUTO: {"mode": "markers", "marker": {"symbol": "star", "size": 18, "color": KEY_COLOR}},
    IID: {"mode": "lines", "line": {"color": KEY_COLOR, "width": 2, "dash": "dot"}},
    **speedup_curves.KEYS,
}
ONE = "#9ca3af"  # the target alone's 1×


def kept_chart(runs: list[RunRecord]) -> go.Figure:
    """The session's drafts kept / drafted against K, one line per group, each point's counts
    (kept/drafted, pooled over its runs) beside it: it falls as K grows even at a constant α,
    since drafts after a rejection are never judged."""
    if not runs:
        return placeholder("Each run adds a point here; the Sweep button fills a grid")
    fig = go.Figure()
    for i, (key, group) in enumerate(costs.groups(runs)):
        color, symbol = group_look(i)
        name = costs.group_name(key)
        _add_runs(fig, name, group, _kept_share, color, symbol, i, _kept_counts)
    fig.update_yaxes(range=[0, 1.05])
    return _against_k(fig, "Drafts kept / drafted (measured)", k_axis(runs))


def _kept_share(runs: list[RunRecord]) -> float:
    drafted = sum(r.drafted for r in runs)
    return sum(r.drafts_kept for r in runs) / drafted if drafted else 0.0


def _kept_counts(runs: list[RunRecord]) -> str:
    return f"{sum(r.drafts_kept for r in runs)}/{sum(r.drafted for r in runs)}"


def _speedup(runs: list[RunRecord]) -> float:
    return mean(r.speedup for r in runs)


def speedup_chart(runs: list[RunRecord]) -> go.Figure:
    """The session's measured speedups against K, one line per group; beside them, two curves at
    the group's measured α per draft (``costs.group_curves``): the textbook's, which charges a
    verify as one target step, and the one predicted from the step costs measured on this
    machine, its best K marked; on CUDA a third, with the draft step replayed from a captured
    CUDA graph, where that step was measured. Each line is named at its end
    (``line_labels``), with its group's name where there are several."""
    if not runs:
        return placeholder("Each run's speedup adds a point here, beside two formulas' curves")
    fig, axis = go.Figure(), k_axis(runs)
    found = costs.groups(runs)
    one = ("target alone = 1×",)  # fits above the line's end on a phone
    labels = [LineLabel(axis[1], 1.0, one, ONE, above=True, xanchor="right")]
    for i, (key, group) in enumerate(found):
        name = costs.group_name(key)
        tag = f"{name} " if len(found) > 1 else ""
        points = _add_runs(fig, name, group, _speedup, MEASURED_COLOR, group_look(i)[1], i)
        measured = named(tag, "measured")
        labels.append(end_label(points, measured, MEASURED_COLOR, axis))
        curve = costs.group_curves(key, group)
        if curve is not None:
            labels += speedup_curves.add_curves(fig, curve, tag, axis)
    fig.add_hline(y=1.0, line={"color": ONE, "dash": "dot"})
    top = 1.15 * max(1.0, *(y for t in fig.data for y in t.y if y is not None))
    add_line_labels(fig, labels, top)
    return _against_k(fig, "Speedup: measured and by formula", axis)


def k_axis(runs: list[RunRecord]) -> tuple[float, float]:
    """The K axis: the K slider's range (K_AXIS_RANGE), wider where an auto-K run's mean K lies
    beyond it (long copies ask for up to 32 tokens a round)."""
    furthest = max((r.mean_k for r in runs if r.k == "auto"), default=0.0)
    return K_AXIS_RANGE[0], max(K_AXIS_RANGE[1], furthest + 0.5)


def _against_k(fig: go.Figure, title: str, axis: tuple[float, float]) -> go.Figure:
    fig.update_xaxes(title_text="K (draft tokens per round)", range=list(axis))
    return _keyed(layout(fig, title, height=480, legend=FOOT))


def _add_runs(
    fig: go.Figure,
    name: str,
    group: list[RunRecord],
    value: Callable[[list[RunRecord]], float],
    color: str,
    symbol: str,
    i: int,
    counts: Callable[[list[RunRecord]], str] | None = None,
) -> dict[float, float]:
    """A group's runs: `value` of the runs at each fixed K (a line named after the group, its
    markers the group's `symbol`), and each auto-K run as a star at the mean K it chose; with
    `counts`, each point's counts beside it, above the points of an even `i`-th group and below
    an odd one's, so two groups' counts stay apart. Returns the line's points (K -> value), or
    the stars' without one."""
    by_k = defaultdict(list)
    for r in group:
        by_k[r.k].append(r)
    ks = sorted(k for k in by_k if k != "auto")
    auto = by_k.get("auto", [])
    marker = {"size": 11, "color": color, "symbol": symbol}
    ys = [value(by_k[k]) for k in ks]
    shown = {"line": {}, "stars": {}}  # counts: beside each point and in its hover
    if counts:
        look = {
            "textposition": ("top", "bottom")[i % 2] + " center",
            "textfont": {"size": 12, "color": color},
        }
        rate = "%{y:.0%} (%{text})<extra></extra>"
        shown["line"] = {
            **look,
            "text": [counts(by_k[k]) for k in ks],
            "hovertemplate": f"{name}, K = %{{x}}: {rate}",
        }
        shown["stars"] = {
            **look,
            "text": [counts([r]) for r in auto],
            "hovertemplate": f"{name} auto K, mean K %{{x:.1f}}: {rate}",
        }
    text = "+text" if counts else ""
    fig.add_trace(
        go.Scatter(
            x=ks or [None],  # a group of auto-K runs alone still names its colour in the legend
            y=ys or [None],
            name=name,
            mode="lines+markers" + text,
            line={"color": color, "width": 3},
            marker=marker,
            legendgroup=name,
            **shown["line"],
        )
    )
    if auto:
        fig.add_trace(
            go.Scatter(
                x=[r.mean_k for r in auto],
                y=[value([r]) for r in auto],
                name=f"{name} auto K (at its mean K)",
                mode="markers" + text,
                marker={**marker, "size": 18, "symbol": "star"},
                legendgroup=AUTO,
                showlegend=False,
                **shown["stars"],
            )
        )
    if ks:
        return dict(zip(ks, ys, strict=True))
    return {r.mean_k: value([r]) for r in auto}


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
ALONE, ALONE_COLOR, ALONE_SHAPE = "target alone", "#111827", "|"  # white stripes on near-black
BREAKDOWN_RUNS = 12  # the newest runs get a bar each


def time_chart(runs: list[RunRecord]) -> go.Figure:
    """Where each run's time went, in ms per new token (``RunRecord.time_split``), and under it
    the target alone's ms per new token in that race, as a bar of its own to hold against it."""
    shown = _newest(runs)
    if not shown:
        return placeholder("Where each run's time goes appears here after a run")
    labels = [f"#{i} K={r.k} {costs.group_name(r.group)}" for i, r, _ in shown]
    alone = [f"#{i} target alone" for i, _, _ in shown]
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
        go.Bar(
            y=alone,
            x=[1000 * r.target_seconds / max(r.target_tokens, 1) for _, r, _ in shown],
            customdata=[(r.target_tokens, r.target_seconds) for _, r, _ in shown],
            orientation="h",
            name=ALONE,
            marker_color=ALONE_COLOR,
            marker_pattern_shape=ALONE_SHAPE,
            marker_pattern_fgcolor="white",
            hovertemplate="target alone: %{x:.1f} ms per token (%{customdata[0]} tokens in "
            "%{customdata[1]:.2f} s)<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="ms per new token", rangemode="tozero")
    rows = [row for pair in zip(labels, alone, strict=True) for row in pair]
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=rows)
    fig = layout(fig, "Where the time goes (measured)", _height(len(rows)), FOOT)
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    return fig


def positions_chart(runs: list[RunRecord]) -> go.Figure:
    """Per draft position, the share of judged drafts kept, its counts beside each point, and
    the one α per draft that the i.i.d. formula assumes for every position."""
    fig = go.Figure()
    for j, (key, group) in enumerate(costs.groups(runs)):
        _add_positions(fig, costs.group_name(key), group, j)
    if not fig.data:
        return placeholder(
            "How often each draft position is kept appears here once drafts are judged"
        )
    fig.update_xaxes(title_text="draft position in the round", dtick=1)
    fig.update_yaxes(title_text="kept / judged", range=[0, 1.05])
    return _keyed(layout(fig, "Drafts kept, by position (measured)", 480, FOOT))


def _newest(runs: list[RunRecord]) -> list[tuple[int, RunRecord, dict]]:
    """(number, run, time split) of the newest BREAKDOWN_RUNS runs with a time split, newest
    first."""
    shown = [(i, r, split) for i, r in enumerate(runs, 1) if (split := r.time_split)]
    return shown[::-1][:BREAKDOWN_RUNS]


def _height(rows: int) -> int:
    return max(400, 200 + 26 * rows)


def _add_positions(fig: go.Figure, name: str, group: list[RunRecord], j: int) -> None:
    """The `j`-th group's acceptance rate at each draft position (a line named after the group,
    kept/judged beside each point, above for an even `j` and below for an odd one), and the
    pooled rate (the α per draft of the formulas) as a flat line: where they part, acceptance is
    not i.i.d."""
    judged, kept = costs.position_counts(group)
    positions = [i + 1 for i, n in enumerate(judged) if n]
    if not positions:
        return
    color, symbol = group_look(j)
    fig.add_trace(
        go.Scatter(
            x=positions,
            y=[kept[i - 1] / judged[i - 1] for i in positions],
            customdata=[judged[i - 1] for i in positions],
            text=[f"{kept[i - 1]}/{judged[i - 1]}" for i in positions],
            name=name,
            mode="lines+markers+text",
            textposition=("top", "bottom")[j % 2] + " center",
            textfont={"size": 12, "color": color},
            line={"color": color, "width": 3},
            marker={"size": 11, "color": color, "symbol": symbol},
            hovertemplate=f"{name}, position %{{x}}: %{{y:.0%}} kept (%{{text}} judged)"
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
            hovertemplate=f"{name}: α per draft = {pooled:.2f} ({sum(kept)}/{sum(judged)} "
            "judged kept) at every position, as the i.i.d. formula assumes<extra></extra>",
            legendgroup=IID,
            showlegend=False,
        )
    )
