"""The histograms of Is it exact?: each bar's exact p beside the speculative and the direct
draws' frequencies, and under them each bar's standardised residual.

No two labels meet: the x axis is categorical whatever the tokens look like, a bar's label is
at most TICK_CHARS long (its hover has it whole), and no more labels are shown than a phone's
plot holds stood on end, plotly's last automatic angle; the legend lies at the foot and the
title in a margin of its own (``charts.layout``).
"""

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdemo.app.charts import layout
from specdemo.decode.render import COLORS

RESIDUAL_BAND = 3.0  # |(O − E)/√E| an exact sampler's bin stays within, nearly always
RESIDUAL_CAP = 10.0  # larger residuals (a draw where p is 0 among them) are drawn at the cap
TICK_CHARS = 16  # a bar's label at most ("Apple·<|im_end|>"): a longer one ends in "…"
TICK_FONT = 13
TICK_LINE_PX = 1.3 * TICK_FONT  # a label's height, and so its width stood on end
PHONE_PLOT_PX = 250  # a phone's plot width (``charts.PLACEHOLDER_LINE``)
# Plotly turns the labels to the first of these angles at which none overlap: flat, or on end,
# where a label's box is its text's own (a slanted label's box would reach over its neighbours).
AUTO_ANGLES = [0, 90]
HEIGHT = 560
ROWS = [0.62, 0.38]  # the bars, then the residuals
Y_TITLES = ["p / frequency", "(O − E)/√E"]  # short enough for their rows on a phone


def residuals(p: list[float], frequency: list[float], n: int) -> list[float]:
    """Each bin's standardised residual (O − E)/√E of n draws against p: about N(0, 1) for an
    exact sampler, so a 1% shift in a small bin stands out as clearly as one in a large bin.
    Capped at ±RESIDUAL_CAP; a draw in a bin p gives 0 counts at the cap."""
    out = []
    for expected, observed in zip((x * n for x in p), (f * n for f in frequency), strict=True):
        if expected > 0:
            r = (observed - expected) / expected**0.5
        else:
            r = RESIDUAL_CAP if observed > 0.5 else 0.0
        out.append(max(-RESIDUAL_CAP, min(RESIDUAL_CAP, r)))
    return out


def tick_labels(labels: list[str]) -> list[str]:
    """Each label at most TICK_CHARS long, cut ones ending in "…"; two cut alike end in "…" and
    the bar's number instead, so that no two bars share a category."""
    cut = [x if len(x) <= TICK_CHARS else x[: TICK_CHARS - 1] + "…" for x in labels]
    return [
        x if cut.count(x) == 1 else f"{label[: TICK_CHARS - 1 - len(str(i))]}…{i}"
        for i, (x, label) in enumerate(zip(cut, labels, strict=True), start=1)
    ]


def x_axis(shown: list[str]) -> dict:
    """Categorical, labels tilted as far as they need (AUTO_ANGLES), and at most one label per
    TICK_LINE_PX of a phone's plot: stood on end, they cannot meet there or anywhere wider."""
    every = math.ceil(len(shown) * TICK_LINE_PX / PHONE_PLOT_PX)
    return {
        "type": "category",
        "tickmode": "array",
        "tickvals": shown[::every],
        "ticktext": shown[::every],
        "autotickangles": AUTO_ANGLES,  # tickangle left unset: automatic
        "tickfont": {"size": TICK_FONT},
        "automargin": True,
    }


def exactness_chart(
    labels: list[str],
    p: list[float],
    spec: list[float],
    direct: list[float],
    n: int,
    title: str = "The next token: three ways",
) -> go.Figure:
    """Histograms: speculative draws and direct draws beside the exact p; below them, each
    bin's standardised residual, where an exact sampler shows noise within ±RESIDUAL_BAND and
    a mistaken rule shows the bins it pushes and pulls."""
    shown = tick_labels(labels)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=ROWS, vertical_spacing=0.06)
    for name, values, color, shape in (
        ("exact p", p, "#374151", ""),
        (f"speculative ({n:,} draws)", spec, COLORS["accepted"], "/"),
        (f"direct from p ({n:,} draws)", direct, COLORS["bonus"], "."),
    ):
        fig.add_trace(
            go.Bar(
                x=shown,
                y=values,
                name=name,
                marker_color=color,
                marker_pattern_shape=shape,
                customdata=labels,
                hovertemplate=f"%{{customdata}}: %{{y:.4f}}<extra>{name}</extra>",
            ),
            row=1,
            col=1,
        )
    for name, values, color, shape in (
        ("speculative", spec, COLORS["accepted"], "/"),
        ("direct", direct, COLORS["bonus"], "."),
    ):
        fig.add_trace(
            go.Bar(
                x=shown,
                y=residuals(p, values, n),
                name=f"{name}: (O − E)/√E",
                marker_color=color,
                marker_pattern_shape=shape,
                showlegend=False,
                customdata=labels,
                hovertemplate=f"%{{customdata}}: %{{y:.1f}}<extra>{name}</extra>",
            ),
            row=2,
            col=1,
        )
    for y in (-RESIDUAL_BAND, RESIDUAL_BAND):
        fig.add_hline(y=y, line_dash="dot", line_color="#9ca3af", row=2, col=1)
    fig.update_layout(barmode="group")
    fig.update_xaxes(**x_axis(shown))
    for row, y_title in enumerate(Y_TITLES, start=1):
        fig.update_yaxes(title_text=y_title, row=row, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    return layout(fig, title, height=HEIGHT)
