"""The figures and the cost model's numbers take run records: the textbook curve and the
one from measured costs, the sentence on why they differ, where the time goes, acceptance by
draft position, and the K chosen per round."""

from dataclasses import replace

import pytest

from specdemo.app import charts
from specdemo.app.generate import costs, session_charts
from specdemo.app.generate.run_record import TIME_PARTS, RunRecord
from specdemo.theory import expected_speedup, expected_tokens_per_pass

# One run: a plain step of 10 ms, a draft step of 4 ms (c = 0.4) and a verify pass that costs 1.2
# target steps at K = 1, rising by 0.1 step per draft; 40 tokens in 2 s against 2.4 s (1.2×).
RUN = RunRecord(drafter="model", adaptive=False, temperature=1.0, k=2, kept_rate=0.5,
                alpha=0.6, c=0.4, predicted_speedup=1.5,
                cost_t_step=0.010, cost_t_draft=0.004,
                cost_t_verify=tuple(0.010 * (1.1 + 0.1 * k) for k in range(1, 9)),
                spec_tokens=40, spec_seconds=2.0, target_tokens=40, target_seconds=2.4,
                prefill_seconds=0.1, draft_seconds=0.5, verify_seconds=1.2,
                position_judged=(10, 6, 3), position_kept=(6, 3, 1))  # fmt: skip


def names(fig) -> list[str]:
    return [trace.name for trace in fig.data]


def trace(fig, name: str):
    [found] = [t for t in fig.data if t.name == name]
    return found


def legend_entries(fig) -> list[str]:
    return [t.name for t in fig.data if t.showlegend is not False]


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
    assert best.y[0] == max(predicted.y) and best.text[0] == f"best K = {best.x[0]}"


def test_a_verify_at_one_step_and_a_free_draft_make_the_two_curves_one():
    free = replace(RUN, cost_t_draft=0.0, cost_t_verify=[0.010] * 8)
    curve = costs.group_curves(free.group, [free])
    assert [curve.predicted[k] for k in range(1, 9)] == pytest.approx(
        [curve.textbook[k] for k in range(1, 9)]
    )
    assert curve.predicted[3] == pytest.approx(expected_tokens_per_pass(0.6, 3))


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


def test_the_note_quotes_the_measured_verify_cost_and_both_peaks():
    runs = [replace(RUN, k=4)]
    curve = costs.group_curves(RUN.group, runs)
    note = costs.cost_note(runs)
    assert "verifying 5 tokens (K = 4) costs 1.50 target steps" in note
    assert "a draft step 0.40 of one" in note
    best, textbook = curve.best_k, curve.textbook_best_k
    assert f"peaks at {curve.predicted[best]:.2f}× (K = {best})" in note
    assert f"peaks at {curve.textbook[textbook]:.2f}× (K = {textbook})" in note
    # Prefill (0.1 s) and the rest (2.0 - 0.1 - 0.5 - 1.2 s) are 15% of the run; 1.2 / 1.5 = 80%.
    assert "15% of their time" in note and "reach 80% of the speedup predicted" in note


def test_a_jump_in_the_verify_cost_is_named_with_the_alpha_it_takes_to_pay():
    """Blocks of 4 rows, as torch's int4 kernel on AVX2: 2-4 tokens cost 1.2-1.4 steps and 5
    tokens 2.8; the sentence quotes both figures and what the predicted curve says of the wider
    K, and a smooth profile gets no such sentence."""
    verify = [0.012, 0.013, 0.014, 0.028, 0.029, 0.030, 0.031, 0.042]  # k = 1..8, step 10 ms
    run = replace(RUN, k=3, cost_t_verify=tuple(verify))
    note = costs.cost_note([run])
    assert "checking 5 tokens costs 2.80 target steps but 4 tokens only 1.40" in note
    alphas = [a / 100 for a in range(101)]
    assert all(run.costs.speedup(a, 4) <= run.costs.speedup(a, 3) for a in alphas)
    assert "so K = 4 never pays more than K = 3" in note
    assert "in a jump" not in costs.cost_note([RUN])


def test_the_note_speaks_of_the_latest_runs_settings_and_a_free_lookup_draft():
    runs = [RUN, replace(RUN, drafter="lookup", k="auto", cost_t_draft=0.0)]
    note = costs.cost_note(runs)
    best = costs.group_curves(runs[1].group, runs[1:]).best_k
    assert "(T=1 lookup" in note and f"(K = {best}) costs" in note
    assert "costs no model step" in note
    assert costs.cost_note([]) == costs.NOTE_PLACEHOLDER


def test_on_a_gpu_the_note_explains_the_draft_cost_by_layers():
    """From the profile's c and the layer counts: why a 0.5B draft costs nearly a 1.5B target's
    step on a GPU, and the lever that removes it; a CPU run and a graph-captured one say no more
    than is true of them."""
    gpu = replace(RUN, device="cuda:0", target_layers=28, draft_layers=24,
           draft_step="eager", cost_t_draft=0.0086)  # fmt: skip
    note = costs.cost_note([gpu])
    assert "the draft's 24 layers cost 0.86 of the target's 28 (0.86 by layer count)" in note
    assert "SPECDEMO_DRAFT_STEP=graph" in note
    lever = costs.cost_note([replace(gpu, cost_t_draft_captured=0.0011)])
    assert "(SPECDEMO_DRAFT_STEP=graph) launches" in lever
    assert "measured here costs 0.11 of" in lever
    curve = costs.group_curves(gpu.group, [replace(gpu, cost_t_draft_captured=0.0011)])
    assert curve.captured_c == pytest.approx(0.11)
    assert all(curve.captured[k] > curve.predicted[k] for k in curve.predicted)
    assert costs.group_curves(gpu.group, [gpu]).captured is None
    graph = costs.cost_note([replace(gpu, draft_step="graph", cost_t_draft=0.0015)])
    assert "cost 0.15 of the target's 28, its step replayed from one captured" in graph
    assert "per layer" not in costs.cost_note([replace(gpu, device="cpu")])
    assert "per layer" not in costs.cost_note([replace(gpu, cost_t_draft=0.0)])  # lookup


def test_the_time_bar_sums_to_the_runs_time_inside_the_engine():
    split = RUN.time_split
    assert split["other"] == pytest.approx(0.2) and sum(split.values()) == pytest.approx(2.0)
    fig = session_charts.time_chart([RUN, replace(RUN, k=4, spec_seconds=3.0)])
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == list(TIME_PARTS)
    for row, (seconds, tokens) in enumerate([(3.0, 40), (2.0, 40)]):  # newest first
        assert sum(t.x[row] for t in bars) * tokens / 1000 == pytest.approx(seconds)
    assert list(bars[0].y) == ["#2 K=4 T=1", "#1 K=2 T=1"]
    assert list(trace(fig, "target alone").x) == pytest.approx([60.0, 60.0])  # 2.4 s / 40 tokens


def test_acceptance_by_position_beside_the_one_alpha_of_the_iid_formula():
    runs = [RUN, replace(RUN, position_judged=[10, 4], position_kept=[8, 3])]
    assert costs.position_counts(runs) == ([20, 10, 3], [14, 6, 1])
    fig = session_charts.positions_chart(runs)
    kept = trace(fig, "T=1")
    assert list(kept.x) == [1, 2, 3] and list(kept.y) == pytest.approx([0.7, 0.6, 1 / 3])
    assert list(kept.customdata) == [20, 10, 3]
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
        assert {t.name for t in chart(runs).data if t.mode == "lines+markers"} == {
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
        line = next(t for t in fig.data if t.name == "T=1" and t.mode == "lines+markers")
        assert list(line.x) == [2]  # the fixed-K line leaves the auto run out


def test_the_rounds_chart_shows_the_k_each_round_drafted():
    fig = charts.rounds_chart([1, 0, 3], [2, 1, 3])
    proposed = next(t for t in fig.data if t.name == "drafts proposed")
    assert list(proposed.y) == [2, 1, 3] and fig.layout.yaxis.range[1] == 3.3


def test_the_rounds_chart_marks_the_k_asked_and_labels_each_plain_step():
    fig = charts.rounds_chart([2, 0, 0, 1], [2, 0, 0, 3], asked=[2, 0, 0, 4])
    assert list(trace(fig, "K asked").y) == [2, 0, 0, 4] and fig.layout.yaxis.range[1] == 4.3
    plain = trace(fig, charts.K_ZERO)
    assert list(plain.x) == [2, 3] and all(charts.K_ZERO in text for text in plain.hovertext)
    [note] = fig.layout.annotations
    assert note.text.replace("<br>", " ") == "K = 0 — drafting would not pay here" and note.x == 2
    assert not charts.rounds_chart([1], [2], asked=[2]).layout.annotations


def test_a_profile_that_timed_a_verify_below_a_step_draws_no_curve_claim():
    disturbed = replace(RUN, cost_t_verify=[0.010 * 0.6] * 8)  # 0.6 steps: a load change
    note = costs.cost_note([disturbed])
    assert "profile is disturbed" in note and "0.60 plain steps" in note
    assert "peaks at" not in note


def test_a_verify_within_noise_of_a_step_says_the_curves_are_level():
    level = replace(RUN, cost_t_draft=0.0, cost_t_verify=[0.010 * 0.95] * 8)
    assert "level with it, within timing noise" in costs.cost_note([level])
    assert "level with it" not in costs.cost_note([RUN])


def test_a_run_slower_than_its_profile_says_by_how_much():
    busy = replace(RUN, t_step=0.016, t_draft=0.0041)
    note = costs.cost_note([busy])
    assert "this run's target steps took 1.6× the profiled time" in note
    assert "took 0.5×" in costs.cost_note([replace(RUN, t_step=0.005)])
    assert "load changed" not in costs.cost_note([replace(RUN, t_step=0.011, t_draft=0.004)])
    assert "priced every choice" not in note and "curves use the profile" in note  # a fixed K


def test_a_busy_machine_says_automatic_k_priced_its_load_and_how_many_threads_ran(monkeypatch):
    monkeypatch.setattr(costs, "usable_cores", lambda: 2)
    busy = replace(RUN, k="auto", t_step=0.024, policy_load=2.38, threads=1, device="cpu")
    note = costs.cost_note([busy])
    assert "took 2.4× the profiled time" in note
    assert "Automatic K priced every choice at the load it measured" in note and "(2.4×" in note
    assert "computed on 1 thread of this machine's 2 cores" in note
    assert "computed on" not in costs.cost_note([replace(busy, threads=2)])  # every core
    assert "computed on" not in costs.cost_note([replace(busy, device="cuda:0")])


def test_the_residual_panel_shows_a_small_bins_shift_that_the_bars_hide():
    """A head token at 0.9 flattens the bars; a 1% shift of mass into a 2% bin is a residual of
    about 30 at 20,000 draws (drawn at the cap), while exact noise stays within the ±3 band."""
    p = [0.9, 0.02, 0.03, 0.05]
    exact = [0.9005, 0.0198, 0.0301, 0.0496]
    shifted = [0.89, 0.03, 0.03, 0.05]
    fig = charts.exactness_chart(["a", "b", "c", "other"], p, shifted, exact, 20_000)
    spec, direct = (t for t in fig.data if "(O − E)/√E" in t.name)
    assert max(abs(r) for r in direct.y) < charts.RESIDUAL_BAND
    assert spec.y[1] == charts.RESIDUAL_CAP and spec.y[0] < 0  # pushed into b, pulled from a
    assert charts.residuals([0.0, 1.0], [0.001, 0.999], 1000)[0] == charts.RESIDUAL_CAP


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
        charts.exactness_chart(["a", "b"], [0.5, 0.5], [0.4, 0.6], [0.5, 0.5], 1000),
    ]
    for fig in figures:
        legend = fig.layout.legend
        assert fig.layout.title.text and fig.layout.showlegend
        assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")
        assert len({tuple(axis.domain or (0, 1)) for axis in fig.select_xaxes()}) == 1


def test_a_curve_style_is_named_once_in_grey_and_a_colour_once_per_group():
    runs = [RUN, replace(RUN, temperature=0), replace(RUN, k="auto", mean_k=2.6)]
    fig = session_charts.speedup_chart(runs)
    keys = [session_charts.AUTO, session_charts.TEXTBOOK, session_charts.PREDICTED]
    assert legend_entries(fig) == ["T=0", "T=1", *keys]
    for key in keys[1:]:
        # the grey entry, and each group's curve, which it shows or hides
        assert len([t for t in fig.data if t.legendgroup == key]) >= 3
    positions = session_charts.positions_chart(runs)
    assert legend_entries(positions) == ["T=0", "T=1", session_charts.IID]


def test_on_cuda_the_speedup_chart_draws_the_captured_draft_step_as_a_third_curve():
    gpu = replace(RUN, device="cuda:0", cost_t_draft=0.0086, cost_t_draft_captured=0.0011)
    fig = session_charts.speedup_chart([gpu])
    captured = trace(fig, f"T=1 {session_charts.CAPTURED}")
    curve = costs.group_curves(gpu.group, [gpu])
    assert list(captured.y) == pytest.approx(list(curve.captured.values()))
    assert session_charts.CAPTURED in names(fig)  # its grey legend entry
    assert not any(session_charts.CAPTURED in n for n in names(session_charts.speedup_chart([RUN])))


def test_every_series_differs_by_more_than_its_colour():
    """Groups of runs differ by marker symbol as well as colour; bars of one chart by pattern."""
    from specdemo.app import charts

    looks = [charts.group_look(i) for i in range(len(charts.PALETTE))]
    assert len({color for color, _ in looks}) == len({symbol for _, symbol in looks}) == len(looks)
    fig = charts.exactness_chart(["a", "(other)"], [0.5, 0.5], [0.4, 0.6], [0.5, 0.5], 100)
    shapes = [t.marker.pattern.shape or "" for t in fig.data if t.showlegend is not False]
    assert len(set(shapes)) == len(shapes) == 3
    other = replace(RUN, temperature=0.0)  # another group
    fig = session_charts.speedup_chart([RUN, other])
    symbols = {t.marker.symbol for t in fig.data if t.mode == "lines+markers"}
    assert len(symbols) == 2


def test_the_note_prices_a_tree_against_the_chain_from_the_profile_and_the_siblings_kept():
    """RUN's profile charges each row after the first 0.1 of a step, so at K = 2 a width-3
    fishbone (7 rows) costs 1.70 steps against the chain's 1.30; the note quotes both, the
    siblings this run kept, the speedups the policy's own pricing gives, and its verdict. Cheap
    rows and siblings always kept make a tree pay."""
    from specdemo.policy import expected_tree_tokens

    tree = replace(RUN, tree_width=3, k="auto", mean_k=2.2, rounds=20, tree_rounds=0,
                   sibling_judged=(4, 3), sibling_kept=(1, 0))  # fmt: skip
    note = costs.cost_note([tree])
    assert "at K = 2 a fishbone of width 3 is one pass over 7 rows, 1.70 target steps" in note
    assert "against 1.30 for the chain's 3 rows" in note
    assert "a sibling was kept at 1 of the 4 nodes whose first guess was rejected" in note
    # The chain: 1 + 0.6 + 0.36 tokens over 2 draft steps (0.8) and 1.3 steps.
    chain = expected_tree_tokens([0.6, 0.6], 2, 0.0) / (0.8 + 1.3)
    assert f"and {chain:.2f}× for the chain" in note and "does not pay" in note
    assert "automatic K chose a tree in 0 of 20 rounds" in note
    cheap = replace(tree, cost_t_verify=tuple(0.010 * (1.0 + 0.001 * k) for k in range(1, 9)),
                    sibling_judged=(9,), sibling_kept=(9,))  # fmt: skip
    assert "a tree pays on this machine" in costs.cost_note([cheap])
    assert "Trees" not in costs.cost_note([RUN])  # a chain
    greedy = costs.cost_note([replace(tree, temperature=0.0)])
    assert "keeps what the chain keeps: every round ran as a chain" in greedy
    fixed = costs.cost_note([replace(tree, k=2, tree_rounds=20)])
    assert "20 of 20 rounds were trees (K is fixed, so the width is too" in fixed
    wide = costs.cost_note([replace(tree, k=4)])  # 13 rows: past the widest pass timed (9)
    assert "over 13 rows, 2.30 target steps here (extended from the widest pass timed)" in wide
