"""Names written on a chart's lines at their ends, so that a line is read without matching it
to a legend: ``end_label`` places one, after its line's end where it fits and above the line,
ending there, where it does not;
``add_line_labels`` writes them into a figure. No two labels meet in a plot MIN_PLOT_PX tall or
taller, and none leaves a plot as narrow as a phone's (PHONE_AXIS_PX).
"""

import textwrap
from dataclasses import dataclass

import plotly.graph_objects as go

LABEL_FONT = 14
LABEL_CHARS = 18  # characters a line of a label
CHAR_PX = 8  # a character at LABEL_FONT, rounded up
LINE_PX = 19  # a line at LABEL_FONT (1.3 em), with its box's padding
OFF_POINT = 10  # px from a line's end to the label after it: past an 11 px marker's edge
CLEAR = 8  # px from a line to the foot of the label above it
MIN_PLOT_PX = 180  # the shortest plot area: a 480 px figure on a phone, its legend in 6 rows
PHONE_AXIS_PX = 270  # the narrowest x axis: a 390 px phone's, less the margins
GROW_STEP, GROW_STEPS = 1.15, 8  # the y axis grows to make room, up to 1.15 ** 8 (3.1) times
HALO = ", ".join(f"{x}px {y}px 2px white" for x in (-1, 1) for y in (-1, 1))  # CSS text-shadow


@dataclass(frozen=True)
class LineLabel:
    """A line's name in `lines`, written at (`x`, `y`): after that point, or `above` it,
    starting (`xanchor` "left") or ending ("right") there."""

    x: float
    y: float
    lines: tuple[str, ...]
    color: str
    above: bool = False
    xanchor: str = "left"

    @property
    def height(self) -> float:
        return LINE_PX * len(self.lines)

    @property
    def lift(self) -> float:
        """px from (x, y) up to the label's middle."""
        return CLEAR + self.height / 2 if self.above else 0.0


def label_lines(text: str) -> tuple[str, ...]:
    return tuple(textwrap.wrap(text, LABEL_CHARS))


def end_label(
    points: dict[float, float], lines: tuple[str, ...], color: str, axis: tuple[float, float]
) -> LineLabel:
    """The label of the line through `points` (x -> y) on an x axis from axis[0] to axis[1]:
    after the line's end where it fits inside the axis on a phone; else ending there and above
    the line's highest point under the text there, so that the line does not cross it."""
    scale = PHONE_AXIS_PX / (axis[1] - axis[0])  # px per unit of x, on a phone
    width = (OFF_POINT + CHAR_PX * max(map(len, lines))) / scale
    x = max(points)
    if x + width <= axis[1]:
        return LineLabel(x, points[x], lines, color)
    start = x - width
    under = [y for k, y in points.items() if k >= start]
    before = [k for k in points if k < start]
    if before:  # the line where the text starts, between two of its points
        a, b = max(before), min(k for k in points if k >= start)
        under.append(points[a] + (points[b] - points[a]) * (start - a) / (b - a))
    return LineLabel(x, max(under), lines, color, above=True, xanchor="right")


def add_line_labels(fig: go.Figure, labels: list[LineLabel], top: float) -> None:
    """Each label as an annotation, and the y axis from 0 to `top` or higher. Taken from the
    lowest up, a label that meets the one below it moves up; while the highest then leaves the
    plot, the axis grows (GROW_STEPS) if the stack can fit, and beyond that all move down
    together, apart still. In a taller plot the labels' points spread further and their shifts
    in px stay, so they only move further apart."""
    ordered = sorted(labels, key=lambda label: (label.y, label.above))
    # Growing the axis lowers the labels' points; it cannot fit a stack taller than the plot.
    steps = GROW_STEPS if sum(label.height for label in labels) <= MIN_PLOT_PX else 0
    for step in range(steps + 1):
        raised, highest = _stack(ordered, MIN_PLOT_PX / top)
        if highest <= MIN_PLOT_PX or step == steps:
            break
        top *= GROW_STEP
    down = max(0.0, highest - MIN_PLOT_PX)
    fig.update_yaxes(range=[0, top])
    for label, up in zip(ordered, raised, strict=True):
        fig.add_annotation(
            x=label.x,
            y=label.y,
            text="<br>".join(label.lines),
            showarrow=False,
            xanchor=label.xanchor,
            xshift=0 if label.above else OFF_POINT * (1 if label.xanchor == "left" else -1),
            yanchor="middle",
            yshift=label.lift + up - down,
            # A halo in the background's colour keeps a label legible across a line; a filled
            # box would hide the points under it.
            font={"size": LABEL_FONT, "color": label.color, "shadow": HALO},
        )


def _stack(ordered: list[LineLabel], scale: float) -> tuple[list[float], float]:
    """The px each label (lowest first) moves up so that it clears the one below it, at `scale`
    px per unit of y; and the highest label's top."""
    raised: list[float] = []
    top = float("-inf")  # the lowest label stays where it is
    for label in ordered:
        middle = label.y * scale + label.lift
        at = max(middle, top + label.height / 2)
        raised.append(at - middle)
        top = at + label.height / 2
    return raised, top
