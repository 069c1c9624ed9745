"""The formulas' curves in the session's speedup chart (``session_charts.speedup_chart``), for
one group of runs (``costs.Curves``): the textbook's, the one predicted from the step costs
measured on this machine, and on CUDA the one with a draft step replayed from a captured CUDA
graph. Each is drawn in its style, named in full once in the legend (KEYS) and in short at its
end (``line_labels``).
"""

import plotly.graph_objects as go

from specdemo.app.charts import PALETTE
from specdemo.app.generate import costs
from specdemo.app.line_labels import LineLabel, end_label, label_lines

TEXTBOOK = "textbook theory (verify = 1 step)"
PREDICTED = "predicted from measured costs"
CAPTURED = "predicted with the draft step as a CUDA graph (measured)"
MEASURED_COLOR, TEXTBOOK_COLOR = PALETTE[0], PALETTE[4]  # this machine's figures; the textbook's
LINES = {
    TEXTBOOK: {"color": TEXTBOOK_COLOR, "width": 3, "dash": "dot"},
    PREDICTED: {"color": MEASURED_COLOR, "width": 3, "dash": "dash"},
    CAPTURED: {"color": MEASURED_COLOR, "width": 2, "dash": "dashdot"},
}
SHORT = {TEXTBOOK: "textbook", PREDICTED: "predicted", CAPTURED: "CUDA graph"}  # at its end
BEST = "best K predicted from measured costs"
GREY = "#6b7280"
# Each curve's style named once, in grey, in the legend; its grey entry shows or hides them all.
KEYS = {
    **{style: {"mode": "lines", "line": {**line, "color": GREY}} for style, line in LINES.items()},
    BEST: {
        "mode": "markers",
        "marker": {"symbol": "diamond-open", "size": 14, "color": GREY, "line_width": 3},
    },
}
K_AXIS_RANGE = (-0.5, 16.5)  # from below 0: an auto-K run that mostly chose K = 0 sits under 1


def named(tag: str, name: str) -> tuple[str, ...]:
    """A line's label: its `name` after its group's `tag`, wrapped to the labels' width."""
    return label_lines(tag + name)


def add_curves(
    fig: go.Figure, curve: costs.Curves, tag: str, axis: tuple[float, float] = K_AXIS_RANGE
) -> list[LineLabel]:
    """The textbook's speedup (dotted) and the one predicted from measured costs (dashed, over
    the K with a measured verify pass), its best K marked ◇ (BEST in the legend); their labels,
    placed on the K `axis`.
    Their α is the per-draft acceptance probability; kept / drafted
    (``session_charts.kept_chart``) is lower, since drafts after a rejection are never judged."""
    c, at = curve.costs.c, f"{curve.name}, K = %{{x}}: %{{y:.2f}}×"
    textbook = f"by the textbook formula (α per draft {curve.alpha:.2f}, c {c:.2f} measured, "
    labels = [
        _add_curve(
            fig, curve.name, tag, TEXTBOOK, curve.textbook, f"{at} {textbook}verify = 1 step)", axis
        )
    ]
    verify = [curve.costs.verify_cost(k) for k in curve.predicted]
    predicted = f"predicted (α per draft {curve.alpha:.2f}, c {c:.2f}, verify %{{customdata:.2f}}"
    hover = f"{at} {predicted} steps, all measured)"
    labels.append(
        _add_curve(fig, curve.name, tag, PREDICTED, curve.predicted, hover, axis, customdata=verify)
    )
    if curve.captured:  # on CUDA: the lever of a draft step replayed from one captured graph
        captured = f"c {curve.captured_c:.2f} measured, against {c:.2f} eager"
        hover = f"{at} if the draft step were captured as a CUDA graph ({captured})"
        labels.append(_add_curve(fig, curve.name, tag, CAPTURED, curve.captured, hover, axis))
    best = curve.best_k
    fig.add_trace(
        go.Scatter(
            x=[best],
            y=[curve.predicted[best]],
            name=f"{curve.name} best K predicted",
            mode="markers",
            marker={"symbol": "diamond-open", "size": 18, "color": MEASURED_COLOR, "line_width": 3},
            hovertemplate="best K by measured costs: %{x}, %{y:.2f}×<extra></extra>",
            legendgroup=BEST,
            showlegend=False,
        )
    )
    return labels


def _add_curve(fig, group: str, tag: str, style: str, points: dict, hover: str, axis, **extra):
    """One formula's speedup against K for a group, drawn in its style's line; its label."""
    line = LINES[style]
    fig.add_trace(
        go.Scatter(
            x=list(points),
            y=list(points.values()),
            name=f"{group} {style}",
            line=line,
            mode="lines",
            hovertemplate=hover + "<extra></extra>",
            legendgroup=style,
            showlegend=False,
            **extra,
        )
    )
    return end_label(points, named(tag, SHORT[style]), line["color"], axis)
