"""The histograms of Is it exact?: residuals that show a small bin's shift, and labels that
never meet, whatever the tokens and however narrow the phone."""

import pytest

from specdemo.app.exact import histograms
from specdemo.app.exact.histograms import TICK_CHARS, exactness_chart

MOST_BARS = 13  # the check shows its 12 likeliest tokens or pairs, then "(other)"


def chart(labels: list[str]):
    even = [1 / len(labels)] * len(labels)
    return exactness_chart(labels, even, even, even, 20_000)


def test_the_residual_panel_shows_a_small_bins_shift_that_the_bars_hide():
    """A head token at 0.9 flattens the bars; a 1% shift of mass into a 2% bin is a residual of
    about 30 at 20,000 draws (drawn at the cap), while exact noise stays within the ±3 band."""
    p = [0.9, 0.02, 0.03, 0.05]
    exact = [0.9005, 0.0198, 0.0301, 0.0496]
    shifted = [0.89, 0.03, 0.03, 0.05]
    fig = exactness_chart(["a", "b", "c", "other"], p, shifted, exact, 20_000)
    spec, direct = (t for t in fig.data if "(O − E)/√E" in t.name)
    assert max(abs(r) for r in direct.y) < histograms.RESIDUAL_BAND
    assert spec.y[1] == histograms.RESIDUAL_CAP and spec.y[0] < 0  # pushed into b, pulled from a
    cap = histograms.residuals([0.0, 1.0], [0.001, 0.999], 1000)[0]
    assert cap == histograms.RESIDUAL_CAP


def test_a_long_label_is_cut_kept_apart_from_its_neighbours_and_whole_in_the_hover():
    labels = ["def is_prime(number):", "def is_prime(numbers):", "Apple·<|im_end|>", "7", "(other)"]
    fig = chart(labels)
    for bars in fig.data:
        assert all(len(x) <= TICK_CHARS for x in bars.x) and len(set(bars.x)) == len(labels)
        assert list(bars.customdata) == labels and "%{customdata}" in bars.hovertemplate
    assert list(fig.data[0].x) == ["def is_prime(n…1", "def is_prime(n…2", "Apple·<|im_end|>",
                                   "7", "(other)"]  # fmt: skip


def test_tokens_that_look_like_numbers_stay_bars_of_their_own():
    """Plotly would read "4", "5", "3" as numbers and drop "(other)" from a numeric axis."""
    fig = chart(["4", "5", "3", "10", "(other)"])
    assert {axis.type for axis in fig.select_xaxes()} == {"category"}


@pytest.mark.parametrize("count", [MOST_BARS, 40])
def test_no_two_tick_labels_meet_even_on_a_phone(count):
    """Plotly turns the labels flat, or on end where flat ones would overlap (never slanted,
    where a label's box reaches over its neighbours): on end each label is one line of text
    wide, and the labels shown fit side by side in a phone's plot, every bar's label when the
    check shows its most bars."""
    labels = [f"token number {i}" for i in range(count - 1)] + ["(other)"]
    for axis in chart(labels).select_xaxes():
        assert axis.type == "category" and axis.tickangle is None  # automatic
        assert list(axis.autotickangles) == [0, 90] and axis.tickfont.size == histograms.TICK_FONT
        assert all(len(text) <= TICK_CHARS for text in axis.ticktext)
        assert len(axis.tickvals) * histograms.TICK_LINE_PX <= histograms.PHONE_PLOT_PX
        assert len(axis.tickvals) == count or count > MOST_BARS
        assert axis.automargin


def test_each_y_title_fits_its_own_row_on_a_phone():
    """Titles centred on rows that stand one above the other meet if one is longer than its
    row. The plot is at least the figure's height less the title's margin, the tick labels
    on end and a legend wrapped into three rows; a title's characters average 0.6 em."""
    fig = chart([f"token number {i}" for i in range(12)] + ["(other)"])
    font = fig.layout.font.size
    plot = fig.layout.height - fig.layout.margin.t - 0.6 * TICK_CHARS * histograms.TICK_FONT
    plot -= 3 * 1.5 * font
    for axis in fig.select_yaxes():
        low, high = axis.domain
        assert 0.6 * font * len(axis.title.text) <= (high - low) * plot, axis.title.text
