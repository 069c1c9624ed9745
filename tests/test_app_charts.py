"""The figures take plain numbers; a group of runs with no measured c gets no theory curve."""

from specdemo.app import charts

RUN = {"drafter": "model", "adaptive": False, "temperature": 1.0, "k": 2, "alpha": 0.5,
       "alpha_per_token": 0.6, "speedup": 1.2, "c": 0.4}  # fmt: skip


def names(fig) -> list[str]:
    return [trace.name for trace in fig.data]


def test_session_chart_draws_the_theory_from_the_measured_alpha_and_c():
    fig = charts.session_chart([RUN, {**RUN, "k": 4, "c": 0.5}])
    [theory] = [n for n in names(fig) if "theory" in n]
    assert "α per draft=0.60" in theory and "c=0.45" in theory


def test_runs_without_a_measured_c_get_no_theory_curve():
    fig = charts.session_chart([{**RUN, "c": None}, {**RUN, "temperature": 0.0}])
    assert [n for n in names(fig) if "theory" in n] == ["T=0 theory (α per draft=0.60, c=0.40)"]


def test_empty_charts_say_what_will_appear():
    assert charts.rounds_chart([], []).layout.annotations[0].text.startswith("Accepted")
    assert "Sweep" in charts.session_chart([]).layout.annotations[0].text


def test_session_chart_names_each_drafter_in_the_legend():
    runs = [RUN, {**RUN, "drafter": "lookup"}, {**RUN, "drafter": "hybrid", "adaptive": True}]
    assert {n for n in names(charts.session_chart(runs)) if "theory" not in n} == {
        "T=1",
        "T=1 lookup",
        "T=1 hybrid adaptive",
    }


def test_auto_k_runs_are_stars_at_the_mean_k_they_chose():
    runs = [RUN, {**RUN, "k": "auto", "mean_k": 2.6, "speedup": 1.4}]
    fig = charts.session_chart(runs)
    stars = [t for t in fig.data if t.name == "T=1 auto K (at its mean K)"]
    assert [(list(t.x), list(t.y)) for t in stars] == [([2.6], [0.5]), ([2.6], [1.4])]
    line = next(t for t in fig.data if t.name == "T=1" and t.mode == "lines+markers")
    assert list(line.x) == [2]  # the fixed-K line leaves the auto run out


def test_the_rounds_chart_shows_the_k_each_round_drafted():
    fig = charts.rounds_chart([1, 0, 3], [2, 1, 3])
    proposed = next(t for t in fig.data if t.name == "drafts proposed")
    assert list(proposed.y) == [2, 1, 3] and fig.layout.yaxis.range[1] == 3.3
