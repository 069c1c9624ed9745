"""Names written on lines at their ends: after the end where a phone's axis has room, else above
the line and ending there, clear of the line under the text; stacked so that none meets another."""

from itertools import pairwise

import plotly.graph_objects as go
import pytest

from specdemo.app import line_labels
from specdemo.app.line_labels import LineLabel, add_line_labels, end_label

AXIS = (-0.5, 16.5)  # the K axis: 270 px on a phone, about 16 px a unit


def test_a_label_goes_after_its_line_where_a_phone_has_room_else_above_it():
    """ "measured" (8 characters, 74 px: 4.7 units on a phone) fits after K = 8 but not after
    K = 12, where it ends at the line's end instead, above the line."""
    after = end_label({1: 1.0, 8: 1.2}, ("measured",), "blue", AXIS)
    assert (after.x, after.y, after.above, after.xanchor) == (8, 1.2, False, "left")
    above = end_label({1: 1.0, 12: 1.2}, ("measured",), "blue", AXIS)
    assert (above.x, above.above, above.xanchor) == (12, True, "right")
    for label in (after, above):  # inside the axis on a phone
        scale = line_labels.PHONE_AXIS_PX / (AXIS[1] - AXIS[0])
        width = (line_labels.OFF_POINT + line_labels.CHAR_PX * 8) / scale
        start = label.x if label.xanchor == "left" else label.x - width
        assert AXIS[0] <= start and start + width <= AXIS[1]


def test_a_label_above_a_falling_line_clears_the_line_under_its_text():
    """The line falls from 2.0 at K = 10 to 1.0 at K = 16; the text, 17 characters (146 px, 9.2
    units on a phone), starts at K = 6.8, where the line (its first point at 4, 3.0) stands at
    3.0 + (2.0 - 3.0) * 2.8 / 6 = 2.53: the label stands above that."""
    label = end_label({4: 3.0, 10: 2.0, 16: 1.0}, ("(verify = 1 step)",), "orange", AXIS)
    assert label.above and label.x == 16
    assert label.y == pytest.approx(3.0 - 2.8 / 6, abs=0.01)


@pytest.mark.parametrize("count", [4, 6])
def test_stacked_labels_never_meet_and_the_axis_grows_where_that_makes_room(count):
    """Two-line labels (38 px each) at 1.0 on an axis to 1.1 stand 164 px up a 180 px plot:
    four (152 px) fit once the axis grows; six (228 px) never would, so the axis stays and they
    move down together. Their boxes meet nowhere, at that height or taller, and none leaves the
    plot's top."""
    fig = go.Figure()
    labels = [LineLabel(8, 1.0, ("a", "b"), "blue", above=i % 2 == 1) for i in range(count)]
    add_line_labels(fig, labels, top=1.1)
    top = fig.layout.yaxis.range[1]
    assert (top > 1.1) == (count == 4)
    for plot_px in (line_labels.MIN_PLOT_PX, 3 * line_labels.MIN_PLOT_PX):
        boxes = sorted(
            (a.y * plot_px / top + a.yshift - 19, a.y * plot_px / top + a.yshift + 19)
            for a in fig.layout.annotations
        )
        assert all(low[1] <= high[0] + 1e-9 for low, high in pairwise(boxes))
        assert boxes[-1][1] <= plot_px + 1e-9
