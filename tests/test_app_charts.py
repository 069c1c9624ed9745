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
    assert charts.rounds_chart([], [], 4).layout.annotations[0].text.startswith("Accepted")
    assert "Sweep" in charts.session_chart([]).layout.annotations[0].text
