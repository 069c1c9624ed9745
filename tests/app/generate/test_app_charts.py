"""The figures take run records: the speedup beside the textbook curve and the one from measured
costs, each line named at its end; where the time goes, beside the target alone; the share of
drafts kept, with its counts, against K, by draft position and round by round."""

from dataclasses import replace
from itertools import pairwise

import pytest
from test_costs import RUN

from specdemo.app import charts, line_labels
from specdemo.app.exact import histograms
from specdemo.app.generate import costs, session_charts, speedup_curves
from specdemo.app.generate.run_record import TIME_PARTS
from specdemo.cost.theory import expected_speedup


def names(fig) -> list[str]:
    return [trace.name for trace in fig.data]


def trace(fig, name: str):
    [found] = [t for t in fig.data if t.name == name]
    return found


def legend_entries(fig) -> list[str]:
    return [t.name for t in fig.data if t.showlegend is not False]


def runs_line(fig, name: str):
    """A group's line of runs at fixed K (its auto-K stars are markers only)."""
    return next(t for t in fig.data if t.name == name and "lines" in t.mode)


def labels(fig) -> dict:
    """The figure's notes by their text, its lines joined by spaces."""
    return {a.text.replace("<br>", " "): a for a in fig.layout.annotations}


def test_the_textbook_curve_charges_a_verify_as_one_step_at_the_measured_alpha_and_c():
    fig = session_charts.speedup_chart([RUN, replace(RUN, k=4, cost_t_draft=0.005)])
    textbook = trace(fig, "T=1 textbook theory (verify = 1 step)")
    assert list(textbook.x) == list(range(1, 17))
    assert list(textbook.y) == pytest.approx([expected_speedup(0.6, k, 0.45) for k in range(1, 17)])
    assert "α per draft 0.60, c 0.45" in textbook.hovertemplate


def test_the_predicted_curve_charges_the_measured_verify_and_lies_below_the_textbook():
    fig = session_charts.speedup_chart([RUN])
    predicted = trace(fig, "T=1 predicted from measured costs")
    textbook = trace(fig, "T=1 textbook theory (verify = 1 step)")
    measured = RUN.costs
    assert list(predicted.x) == list(range(1, 9))  # the K with a measured verify pass
    assert list(predicted.y) == pytest.approx([measured.speedup(0.6, k) for k in range(1, 9)])
    assert all(p < t for p, t in zip(predicted.y, textbook.y, strict=False))  # verify > 1 step
    assert list(predicted.customdata) == pytest.approx([1.1 + 0.1 * k for k in range(1, 9)])
    best = trace(fig, "T=1 best K predicted")
    assert best.y[0] == max(predicted.y) and best.marker.symbol == "diamond-open"
    assert best.legendgroup == speedup_curves.BEST  # the legend's grey ◇ names it
    label = labels(fig)["predicted"]
    assert (label.x, label.y) == (predicted.x[-1], predicted.y[-1])  # at the line's end


def test_runs_recorded_without_costs_get_no_curves():
    fig = session_charts.speedup_chart(
        [replace(RUN, cost_t_verify=None), replace(RUN, temperature=0)]
    )
    curves = [n for n in names(fig) if n.startswith("T=") and ("textbook" in n or "predicted" in n)]
    assert curves == [
        "T=0 textbook theory (verify = 1 step)",
        "T=0 predicted from measured costs",
        "T=0 best K predicted",
    ]
    assert "no" in costs.cost_note([replace(RUN, cost_t_verify=None)])


def test_the_time_bar_sums_to_the_runs_time_inside_the_engine():
    split = RUN.time_split
    assert split["other"] == pytest.approx(0.2) and sum(split.values()) == pytest.approx(2.0)
    fig = session_charts.time_chart([RUN, replace(RUN, k=4, spec_seconds=3.0)])
    *parts, alone = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in parts] == list(TIME_PARTS) and alone.name == "target alone"
    for row, (seconds, tokens) in enumerate([(3.0, 40), (2.0, 40)]):  # newest first
        assert sum(t.x[row] for t in parts) * tokens / 1000 == pytest.approx(seconds)
    assert list(parts[0].y) == ["#2 K=4 T=1", "#1 K=2 T=1"]


def test_the_target_alone_is_a_bar_under_each_run_to_hold_against_it():
    """A bar as long as the target alone's ms per new token in the same race (2.4 s for 40
    tokens: 60 ms), on its own row under the run's stacked bar; its pattern is none of the
    parts', so it reads without colour."""
    fig = session_charts.time_chart([RUN, replace(RUN, k=4, target_seconds=3.2)])
    alone = trace(fig, "target alone")
    assert alone.type == "bar" and list(alone.x) == pytest.approx([80.0, 60.0])
    assert list(alone.y) == ["#2 target alone", "#1 target alone"]
    assert list(fig.layout.yaxis.categoryarray) == [
        "#2 K=4 T=1", "#2 target alone", "#1 K=2 T=1", "#1 target alone",
    ]  # fmt: skip
    assert fig.layout.yaxis.autorange == "reversed"  # newest on top
    shapes = [t.marker.pattern.shape or "" for t in fig.data if t.type == "bar"]
    assert len(set(shapes)) == len(shapes) == len(TIME_PARTS) + 1


def test_acceptance_by_position_beside_the_one_alpha_of_the_iid_formula():
    runs = [RUN, replace(RUN, position_judged=[10, 4], position_kept=[8, 3])]
    assert costs.position_counts(runs) == ([20, 10, 3], [14, 6, 1])
    fig = session_charts.positions_chart(runs)
    kept = trace(fig, "T=1")
    assert list(kept.x) == [1, 2, 3] and list(kept.y) == pytest.approx([0.7, 0.6, 1 / 3])
    assert list(kept.customdata) == [20, 10, 3]
    assert list(kept.text) == ["14/20", "6/10", "1/3"] and "%{text}" in kept.hovertemplate
    flat = trace(fig, "T=1 i.i.d. formula: α per draft = 0.64 at every position")
    assert list(flat.y) == pytest.approx([21 / 33, 21 / 33])


def test_empty_charts_say_what_will_appear():
    assert charts.rounds_chart([], []).layout.annotations[0].text.startswith("Accepted")
    assert "Sweep" in session_charts.kept_chart([]).layout.annotations[0].text
    assert "speedup" in session_charts.speedup_chart([]).layout.annotations[0].text
    assert "time goes" in session_charts.time_chart([]).layout.annotations[0].text
    assert "position" in session_charts.positions_chart([]).layout.annotations[0].text


def test_the_session_charts_name_each_drafter_in_the_legend():
    runs = [RUN, replace(RUN, drafter="lookup"), replace(RUN, drafter="hybrid", adaptive=True)]
    for chart in (session_charts.kept_chart, session_charts.speedup_chart):
        assert {t.name for t in chart(runs).data if t.mode.startswith("lines+markers")} == {
            "T=1",
            "T=1 lookup",
            "T=1 hybrid adaptive",
        }


def test_auto_k_runs_are_stars_at_the_mean_k_they_chose():
    runs = [RUN, replace(RUN, k="auto", mean_k=2.6, spec_seconds=2.4 / 1.4)]
    for chart, measured in ((session_charts.kept_chart, 0.5), (session_charts.speedup_chart, 1.4)):
        fig = chart(runs)
        star = trace(fig, "T=1 auto K (at its mean K)")
        assert (list(star.x), list(star.y)) == ([2.6], [measured])
        assert list(runs_line(fig, "T=1").x) == [2]  # the fixed-K line leaves the auto run out


def test_each_share_kept_shows_its_counts_pooled_over_the_runs_at_its_k():
    """Two runs at K = 2 keep 10 of 20 and 5 of 20 drafts: 15/40, not the mean of two rates;
    an auto-K star shows its own run's."""
    runs = [RUN, replace(RUN, drafts_kept=5), replace(RUN, k="auto", drafts_kept=3, drafted=4)]
    fig = session_charts.kept_chart(runs)
    line = runs_line(fig, "T=1")
    assert list(line.y) == [15 / 40] and list(line.text) == ["15/40"]
    assert "%{y:.0%} (%{text})" in line.hovertemplate
    assert list(trace(fig, "T=1 auto K (at its mean K)").text) == ["3/4"]
    other = session_charts.kept_chart([RUN, replace(RUN, temperature=0.0)])
    assert {t.textposition for t in other.data if t.text} == {"top center", "bottom center"}


def test_the_rounds_chart_shows_the_k_each_round_drafted():
    fig = charts.rounds_chart([1, 0, 3], [2, 1, 3])
    proposed = next(t for t in fig.data if t.name == "drafts proposed")
    assert list(proposed.y) == [2, 1, 3] and fig.layout.yaxis.range[1] == 3.3
    running = trace(fig, "kept / drafted so far: 67% (4/6)")  # the run so far, in the legend
    assert (
        list(running.customdata) == ["1/2", "1/3", "4/6"]
        and "%{customdata}" in running.hovertemplate
    )


def test_the_rounds_chart_draws_copied_rounds_apart_and_reaches_a_copy_of_32():
    """Rounds 2 and 4 copied their guesses (32 and 20, all kept but 2): bars of their own, named
    in the legend, in a pattern no drafted round has; the axis holds the 32 in full. A run that
    copied nothing draws no copy bars."""
    fig = charts.rounds_chart([3, 32, 1, 18], [4, 32, 4, 20], [4, 32, 4, 32],
                              copied=[False, True, False, True])  # fmt: skip
    assert list(trace(fig, "copies proposed").y) == [None, 32, None, 20]
    assert list(trace(fig, "copies accepted").y) == [None, 32, None, 18]
    assert list(trace(fig, "drafts proposed").y) == [4, None, 4, None]
    assert list(trace(fig, "drafts accepted").y) == [3, None, 1, None]
    shapes = {t.name: t.marker.pattern.shape for t in fig.data if t.type == "bar"}
    assert len(set(shapes.values())) == 4  # apart without colour
    assert fig.layout.yaxis.range[1] >= 32 and fig.layout.yaxis.title.text == "guesses"
    only_copies = charts.rounds_chart([5, 2], [8, 8], copied=[True, True])
    assert "drafts proposed" not in names(only_copies)
    assert not {"copies proposed", "copies accepted"} & set(names(charts.rounds_chart([1], [2])))


def test_the_rounds_chart_marks_the_k_asked_and_labels_each_plain_step():
    fig = charts.rounds_chart([2, 0, 0, 1], [2, 0, 0, 3], asked=[2, 0, 0, 4])
    assert list(trace(fig, "K asked").y) == [2, 0, 0, 4] and fig.layout.yaxis.range[1] == 4.3
    plain = trace(fig, charts.K_ZERO)
    assert list(plain.x) == [2, 3] and all(charts.K_ZERO in text for text in plain.hovertext)
    [note] = fig.layout.annotations
    assert note.text.replace("<br>", " ") == "K = 0 — drafting would not pay here" and note.x == 2
    assert not charts.rounds_chart([1], [2], asked=[2]).layout.annotations


def test_each_figure_has_one_column_of_panels_and_its_legend_at_its_foot():
    """Panels side by side would squeeze on a phone: those are figures of their own, in a row
    the browser wraps. The legend sits at the container's foot, where plotly makes room for it
    under the axis title at any width."""
    runs = [RUN, replace(RUN, k="auto", mean_k=2.6)]
    figures = [
        charts.rounds_chart([1, 0, 3], [2, 1, 3], asked=[2, 0, 4]),
        session_charts.kept_chart(runs),
        session_charts.speedup_chart(runs),
        session_charts.time_chart(runs),
        session_charts.positions_chart(runs),
        histograms.exactness_chart(["a", "b"], [0.5, 0.5], [0.4, 0.6], [0.5, 0.5], 1000),
    ]
    for fig in figures:
        legend = fig.layout.legend
        assert fig.layout.title.text and fig.layout.showlegend
        assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")
        assert len({tuple(axis.domain or (0, 1)) for axis in fig.select_xaxes()}) == 1


def test_the_speedup_chart_names_each_line_at_its_end_in_two_colours():
    """Two groups: each line named in short at its end, the group's name first; the legend has
    the groups' markers, and each style once in full in grey. One colour for what this machine
    measured (runs, and the curve from their costs), one for the textbook, grey for the target
    alone's 1×."""
    runs = [RUN, replace(RUN, temperature=0), replace(RUN, k="auto", mean_k=2.6)]
    fig = session_charts.speedup_chart(runs)
    keys = [speedup_curves.TEXTBOOK, speedup_curves.PREDICTED, speedup_curves.BEST]
    assert legend_entries(fig) == ["T=0", "T=1", session_charts.AUTO, *keys]
    for key in keys:  # the grey entry, and each group's curve, which it shows or hides
        assert len([t for t in fig.data if t.legendgroup == key]) == 3
    found = labels(fig)
    for group in ("T=0", "T=1"):
        for line in ("measured", "predicted", "textbook"):
            assert f"{group} {line}" in found
    textbook = trace(fig, "T=1 textbook theory (verify = 1 step)")
    label = found["T=1 textbook"]
    assert label.x == textbook.x[-1] and label.y >= textbook.y[-1]  # at its end, above it
    assert "target alone = 1×" in found
    measured, book = speedup_curves.MEASURED_COLOR, speedup_curves.TEXTBOOK_COLOR
    colors = {c for t in fig.data for c in (t.line.color, t.marker.color) if isinstance(c, str)}
    assert colors - {session_charts.KEY_COLOR} == {measured, book}  # grey: the legend's keys
    assert {a.font.color for a in fig.layout.annotations} == {measured, book, session_charts.ONE}
    assert (
        textbook.line.dash == "dot"
        and trace(fig, "T=1 predicted from measured costs").line.dash == "dash"
    )
    positions = session_charts.positions_chart(runs)
    assert legend_entries(positions) == ["T=0", "T=1", session_charts.IID]


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_line_labels_never_meet_and_sit_off_their_lines(groups):
    """Groups of identical costs draw identical curves, so their labels start at one height:
    no two labels' boxes meet in the shortest plot the chart gets, nor in a taller one. Each
    sits off its line's end while the plot, its axis grown, holds them all: two groups' 7 labels,
    not four groups' 13."""
    runs = [replace(RUN, temperature=t / 10) for t in range(groups)]
    runs += [replace(r, k=16) for r in runs]  # lines ending at the axis' right end too
    fig = session_charts.speedup_chart(runs)
    notes = fig.layout.annotations
    assert len(notes) == 1 + 3 * groups  # the 1×; each group's runs and two curves
    assert line_labels.LINE_PX >= 1.3 * line_labels.LABEL_FONT
    top = fig.layout.yaxis.range[1]
    for plot_px in (line_labels.MIN_PLOT_PX, 2 * line_labels.MIN_PLOT_PX):
        boxes = sorted(
            (middle - half, middle + half)
            for a in notes
            for middle, half in [(a.y * plot_px / top + a.yshift, tall(a) / 2)]
        )
        assert all(low[1] <= high[0] + 1e-9 for low, high in pairwise(boxes))
    if groups > 2:
        return
    for a in notes:  # after its end, or above it
        if a.xshift == 0:
            assert a.yshift >= line_labels.CLEAR + tall(a) / 2 - 1e-9, a.text
        else:
            assert abs(a.xshift) >= line_labels.OFF_POINT, a.text


def tall(note) -> float:
    return line_labels.LINE_PX * (note.text.count("<br>") + 1)


def test_on_cuda_the_speedup_chart_draws_the_captured_draft_step_as_a_third_curve():
    gpu = replace(RUN, device="cuda:0", cost_t_draft=0.0086, cost_t_draft_captured=0.0011)
    fig = session_charts.speedup_chart([gpu])
    captured = trace(fig, f"T=1 {speedup_curves.CAPTURED}")
    curve = costs.group_curves(gpu.group, [gpu])
    assert list(captured.y) == pytest.approx(list(curve.captured.values()))
    assert "CUDA graph" in labels(fig) and speedup_curves.CAPTURED in legend_entries(fig)
    cpu = session_charts.speedup_chart([RUN])
    assert not any(speedup_curves.CAPTURED in n for n in names(cpu))
    assert "CUDA graph" not in labels(cpu)


def test_every_series_differs_by_more_than_its_colour():
    """Groups of runs differ by marker symbol as well as colour; bars of one chart by pattern;
    the speedup chart's lines by dash and by the name at their end."""
    looks = [charts.group_look(i) for i in range(len(charts.PALETTE))]
    assert len({color for color, _ in looks}) == len({symbol for _, symbol in looks}) == len(looks)
    fig = histograms.exactness_chart(["a", "(other)"], [0.5, 0.5], [0.4, 0.6], [0.5, 0.5], 100)
    shapes = [t.marker.pattern.shape or "" for t in fig.data if t.showlegend is not False]
    assert len(set(shapes)) == len(shapes) == 3
    other = replace(RUN, temperature=0.0)  # another group
    fig = session_charts.speedup_chart([RUN, other])
    symbols = {t.marker.symbol for t in fig.data if t.mode == "lines+markers"}
    assert len(symbols) == 2
    dashes = {t.line.dash for t in fig.data if t.mode == "lines" and t.x[0] is not None}
    assert dashes == {"dot", "dash"}
