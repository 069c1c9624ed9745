"""The race on the tiny pair: greedy agreement, both drafters, the run record (with the numbers
behind the cost model and the charts that explain a speedup), the sweep."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from conftest import PROMPT, ROOT

from specdemo.app.config import encode, parse_run
from specdemo.app.generate import comparison, costs, race
from specdemo.app.generate.run_record import RunRecord
from specdemo.app.page import jobs, replay, work
from specdemo.app.page.session import RESULT_COLUMNS, results_table
from specdemo.cost.policy import SiblingAcceptance
from specdemo.cost.profile import COPY_KS, PROFILE_KS
from specdemo.cost.theory import (
    StepCosts,
    expected_tokens_per_pass,
    expected_tree_tokens_per_pass,
    predicted_speedup,
)
from specdemo.decode.rounds import Stats


def test_greedy_speculative_equals_target_alone(pair):
    config = parse_run(PROMPT, k=3, temperature=0, max_new_tokens=32)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    target = race.last(race.run_target(pair, config, ids))
    assert spec.tokens == target.tokens
    row = RunRecord.of(config, spec, target)
    assert row.greedy_match is True and row.spec_target_passes < len(target.tokens)
    assert "identical" in comparison.comparison_markdown(spec, target, config)
    # While the target alone is still running, its rate so far is no speedup yet.
    partial = race.TargetRun(target.spans[:2], target.tokens[:2], target.step_seconds[:2])
    partial.seconds = sum(partial.step_seconds)
    assert "Speedup | … (when both finish) | 1×" in comparison.comparison_markdown(spec, partial)
    ratio = spec.tokens_per_s / target.tokens_per_s
    assert f"Speedup | **{ratio:.2f}×** | 1×" in comparison.comparison_markdown(
        spec, target, config
    )


def test_runs_grow_in_place_and_time_every_target_step(pair):
    config = parse_run("a\x00b 😀 日本語", max_new_tokens=12)
    ids = encode(pair, config)
    sizes = [len(run.tokens) for run in race.run_speculative(pair, config, ids)]
    assert sizes == sorted(sizes) and sizes[-1] == 12
    target = race.last(race.run_target(pair, config, ids))
    assert len(target.step_seconds) == len(target.tokens) == 12
    assert target.seconds == pytest.approx(sum(target.step_seconds))


def test_the_pair_is_warmed_up_once_before_its_first_timed_run(pair, monkeypatch):
    """The first run warms the models outside the clock. A fork of a warmed process on a CPU
    inherits the warm-up; on CUDA each process (each ZeroGPU worker) starts its own context,
    so a new process warms up again."""
    warmed = []
    monkeypatch.setattr(race.models, "warm_up", warmed.append)
    monkeypatch.setattr(race, "_warmed", race.weakref.WeakKeyDictionary())
    config = parse_run(PROMPT, k=2, max_new_tokens=4)
    ids = encode(pair, config)
    race.last(race.run_target(pair, config, ids))
    race.last(race.run_speculative(pair, config, ids))
    assert warmed == [pair]
    monkeypatch.setattr(race.os, "getpid", lambda: -1)  # a forked worker
    race.last(race.run_speculative(pair, config, ids))
    assert warmed == [pair]  # on the CPU: the parent's warm-up holds

    class OnCuda:  # a target on a GPU, as warm_once sees one
        device = torch.device("cuda", 0)

    on_cuda = SimpleNamespace(target=OnCuda())
    race.warm_once(on_cuda)
    race.warm_once(on_cuda)
    monkeypatch.setattr(race.os, "getpid", lambda: -2)  # another worker
    race.warm_once(on_cuda)
    assert warmed == [pair, on_cuda, on_cuda]


def test_prompt_lookup_drafter_costs_no_draft_steps(pair):
    config = parse_run(PROMPT + " " + PROMPT, k=4, drafter="lookup", max_new_tokens=16)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    assert len(spec.tokens) == 16 and spec.stats.draft_passes == 0
    row = RunRecord.of(config, spec, race.last(race.run_target(pair, config, ids)))
    assert row.c == 0.0


@pytest.mark.parametrize("drafter, source", [("suffix", "copied"), ("model", "drafted")])
def test_each_guess_in_the_race_says_whether_it_was_copied_or_drafted(pair, drafter, source):
    """Every kept or rejected guess of a copying run is marked copied, of a drafting run drafted;
    the run's rounds say which copied, and its record counts the copies as the engine did; the
    race's table sets the copied guesses kept beside the drafted ones where there were copies."""
    config = parse_run(PROMPT + " " + PROMPT, k=4, drafter=drafter, max_new_tokens=24)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    guesses = {mark for _, kind, mark in spec.spans if kind in ("accepted", "rejected")}
    assert guesses == {source}
    assert {mark for _, kind, mark in spec.spans if kind not in ("accepted", "rejected")} == {""}
    copying = drafter == "suffix"
    assert spec.copied == [copying and k > 0 for k in spec.drafted]
    s = spec.stats
    assert (s.copied, s.copied_kept) == ((s.drafted, s.accepted) if copying else (0, 0))
    target = race.last(race.run_target(pair, config, ids))
    row = RunRecord.of(config, spec, target)
    assert (row.copied_rounds, row.copied, row.copied_kept) == (sum(spec.copied), s.copied,
                                                               s.copied_kept)  # fmt: skip
    rounds = zip(spec.drafted, spec.accepted, spec.copied, strict=True)
    copies = [(k, n) for k, n, c in rounds if c]  # the first of the longest copies
    longest = max(copies, key=lambda copy: copy[0], default=(0, 0))
    assert (row.longest_copy, row.longest_copy_kept) == longest
    table = comparison.comparison_markdown(spec, target, config)
    counts = f"| {comparison.COPIED_ROW} | {s.copied_kept} of {s.copied} · 0 of 0 | — |"
    assert (counts in table) == copying and (comparison.COPIED_ROW in table) == copying


def test_c_divides_a_draft_step_by_the_median_plain_step_after_the_prefill():
    config = parse_run(PROMPT)
    spec = race.SpecRun(tokens=[1, 2])
    spec.stats.draft_time, spec.stats.draft_passes = 0.3, 3  # t_draft = 0.1 s
    target = race.TargetRun(tokens=[1, 2, 3, 4], step_seconds=[5.0, 0.1, 0.3, 0.2], seconds=5.6)
    assert target.t_step == 0.2  # the first step holds the prompt's prefill
    assert RunRecord.of(config, spec, target).c == pytest.approx(0.5)
    assert RunRecord.of(config, spec, target).predicted_speedup is None  # no verify at K ran
    short = race.TargetRun(tokens=[1], step_seconds=[5.0], seconds=5.0)
    assert short.t_step is None and RunRecord.of(config, spec, short).c is None


def test_sweep_fills_the_grid_against_one_baseline_per_temperature(pair):
    request = jobs.parse_sweep(pair, PROMPT, ks=[1, 3], temperatures=[0.0, 1.0], max_new_tokens=6)
    plan, cells = replay.SweepPlan(request), []
    while not plan.finished:
        plan, row = replay.sweep_cell(pair, plan, work.tasks(pair).race)
        cells.append((plan.done, row))
    assert [done for done, _ in cells] == [1, 2, 3, 4]
    rows = [row for _, row in cells]
    assert {(r.k, r.temperature) for r in rows} == {(1, 0), (3, 0), (1, 1), (3, 1)}
    assert all(r.speedup > 0 and r.c > 0 for r in rows)
    assert rows[0].target_seconds == rows[1].target_seconds  # one baseline per temperature


def test_comparison_shows_dots_until_a_run_has_tokens():
    table = comparison.comparison_markdown(None, None)
    assert (
        "Speedup | … (when both finish) | 1×" in table
        and table.count("…") == 2 * len(comparison.COMPARISON_ROWS) + 1
    )


def test_same_tokens_note_names_where_the_answers_part():
    assert "identical" in comparison.same_tokens_note([1, 2], [1, 2], greedy=True)
    assert "agree for 1 token, then differ" in comparison.same_tokens_note(
        [1, 2], [1, 3], greedy=True
    )
    assert "agree for 2 tokens and then go" in comparison.same_tokens_note([1, 2, 3], [1, 2], False)


def test_the_recorded_prediction_is_the_cost_model_on_the_runs_own_costs(pair):
    config = parse_run(PROMPT, k=3, temperature=1.0, max_new_tokens=24)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    row = RunRecord.of(config, spec, race.last(race.run_target(pair, config, ids)))
    s = spec.stats
    assert row.verify_cost == pytest.approx(s.t_verify_rows[4] / row.t_step)  # K = 3: 4 rows
    expected = predicted_speedup(s.alpha, 3, row.t_step, s.t_draft, s.t_verify_rows[4])
    assert row.predicted_speedup == pytest.approx(expected)


def test_a_tree_run_records_the_trees_own_figures_not_the_chains():
    """A run of K = 2 at width 2: its rounds were fishbones of 1 + 2 * 2 = 5 rows (one fell back
    to a chain of 3). The verify pass recorded is the 5-row one; "expected (i.i.d.)" and
    "predicted" are the fishbone's (α of the chain nodes, and the siblings' own measured
    chance, 1 of 2 kept here), not the chain formula; and where the width needs a sibling rank
    the run never tried, both are blank rather than a chain formula."""
    stats = Stats(accepted=3, rejected=2, tree_rounds=2, draft_time=0.3, draft_passes=6,
                  verify_times={5: [0.5, 0.5], 3: [0.4]})  # fmt: skip
    spec = race.SpecRun(tokens=[1] * 8, accepted=[2, 1, 0], drafted=[2, 2, 2], widths=[2, 2, 1],
                        siblings=SiblingAcceptance([2], [1]), stats=stats)  # fmt: skip
    target = race.TargetRun(tokens=[1] * 3, step_seconds=[1.0, 0.2, 0.2], seconds=1.4)
    row = RunRecord.of(parse_run(PROMPT, k=2, tree_width=2), spec, target)
    alpha, chain = 3 / 5, expected_tokens_per_pass(3 / 5, 2)
    tree = expected_tree_tokens_per_pass(alpha, 2, 0.5)
    assert row.expected_tokens_per_pass == pytest.approx((2 * tree + chain) / 3)
    assert row.t_verify == 0.5 and row.verify_cost == pytest.approx(0.5 / 0.2)
    assert row.predicted_speedup == pytest.approx(tree * 0.2 / (2 * 0.05 + 0.5))
    wider = RunRecord.of(parse_run(PROMPT, k=2, tree_width=3), replace(spec, widths=[3, 3, 1]),
                         target)  # fmt: skip
    assert wider.expected_tokens_per_pass is None and wider.predicted_speedup is None


def test_auto_k_runs_record_the_mean_k_they_chose(pair):
    config = parse_run(PROMPT, auto_k=True, temperature=1.0, max_new_tokens=24)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    row = RunRecord.of(config, spec, race.last(race.run_target(pair, config, ids)))
    assert row.k == "auto" and row.mean_k == pytest.approx(sum(spec.asked) / len(spec.asked))
    assert row.predicted_speedup is None  # one formula needs one k
    assert "Mean K per round" in comparison.comparison_markdown(spec, None)


def test_auto_k_chooses_each_rounds_tree_width_up_to_the_one_asked(pair, monkeypatch):
    """With Auto K the Tree width is the widest tree the policy may choose: on a profile whose
    rows cost almost nothing it chooses trees, and the record counts them and the siblings
    tried by rank; with a fixed K every sampled round is a tree of the width asked."""
    cheap = StepCosts(0.01, 0.001, {k: 0.01 * (1 + 0.001 * k) for k in PROFILE_KS})
    monkeypatch.setattr(race, "profile_of", lambda *_: cheap)
    config = parse_run(PROMPT, auto_k=True, temperature=1.0, max_new_tokens=24, tree_width=3)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    row = RunRecord.of(config, spec, race.last(race.run_target(pair, config, ids)))
    assert set(spec.widths) <= {1, 2, 3} and max(spec.widths) > 1
    assert row.rounds == len(spec.widths) and row.tree_rounds == sum(w > 1 for w in spec.widths)
    assert row.sibling_judged == tuple(spec.siblings.judged) and sum(row.sibling_judged) > 0
    assert "automatic K chose a tree in" in costs.tree_sentence(row)
    fixed = race.last(race.run_speculative(pair, replace(config, k=2), ids))
    assert fixed.widths.count(3) >= len(fixed.widths) - 1  # the last may have no room to draft


def test_each_draft_position_counts_the_rounds_that_judged_and_kept_it():
    # Rounds (k, kept): (3, 2) judges positions 1-3 and keeps 1-2; (2, 0) judges only position 1;
    # (3, 3) keeps all three; a plain step (0, 0) judges nothing.
    spec = race.SpecRun(tokens=[1] * 9, accepted=[2, 0, 3, 0], drafted=[3, 2, 3, 0],
                        widths=[1] * 4)  # fmt: skip
    target = race.TargetRun(tokens=[1] * 9, step_seconds=[0.1] * 9, seconds=0.9)
    row = RunRecord.of(parse_run(PROMPT, k=3), spec, target)
    assert row.position_judged == (3, 2, 2) and row.position_kept == (2, 2, 1)


def test_the_record_holds_the_cost_model_and_where_the_time_went(pair):
    config = parse_run(PROMPT, k=3, temperature=1.0, max_new_tokens=24)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    target = race.last(race.run_target(pair, config, ids))
    row = RunRecord.of(config, spec, target)
    json.loads(json.dumps(row.row()))  # the session exports it as it stands
    s, profile = spec.stats, spec.profile
    # The cost model's costs are the profile's, timed in turns; the run's own beside them.
    assert (row.cost_t_step, row.cost_t_draft) == (profile.t_step, profile.t_draft)
    assert (row.t_step, row.t_draft) == (target.t_step, s.t_draft)
    # Every K the profile timed, K = 1 to 8 and the wider passes a long copy may fill, each
    # under its own K: the record's costs are the profile's, K for K.
    assert row.cost_verify_ks == tuple(sorted(profile.t_verify)) == (*PROFILE_KS, *COPY_KS)
    assert row.costs.t_verify == profile.t_verify
    assert row.costs.verify_cost(COPY_KS[-1]) == pytest.approx(profile.verify_cost(COPY_KS[-1]))
    split = row.time_split
    assert split["verify passes"] == s.verify_time and split["prefill"] == s.prefill_time
    assert sum(split.values()) == pytest.approx(spec.seconds)
    expected = [expected_tokens_per_pass(s.alpha, k) for k in spec.drafted]
    assert row.expected_tokens_per_pass == pytest.approx(sum(expected) / len(expected))
    assert sum(row.position_judged) == s.accepted + s.rejected  # alpha's judged


def test_without_a_timed_plain_step_the_cost_model_takes_the_profiles():
    profile = StepCosts(t_step=0.02, t_draft=0.01, t_verify={1: 0.025, 2: 0.03})
    spec = race.SpecRun(tokens=[1, 2], profile=profile)
    short = race.TargetRun(tokens=[1], step_seconds=[5.0], seconds=5.0)
    row = RunRecord.of(parse_run(PROMPT), spec, short)
    assert row.c is None and row.cost_t_step == 0.02 and row.cost_t_verify == (0.025, 0.03)
    assert row.cost_t_draft == 0.01  # a run that judged no draft is charged the model's
    looked_up = race.SpecRun(tokens=[1, 2], drafted=[2], accepted=[1], widths=[1],
                             profile=profile)  # fmt: skip
    row = RunRecord.of(parse_run(PROMPT, drafter="lookup"), looked_up, short)
    assert row.cost_t_draft == 0.0  # drafts copied from the context cost no model step


def test_a_run_timed_on_a_busier_machine_still_gets_a_coherent_note(pair, monkeypatch):
    """The target alone timed by a clock that moves half a second at every reading (a machine
    far busier than when the profile was measured): the note's verify cost and curves stay the
    profile's, and it says how much slower than profiled the run's steps were, instead of a
    verify cheaper than a step. The clock is fake, so the outcome does not depend on load."""
    import itertools

    config = parse_run(PROMPT, k=3, temperature=1.0, max_new_tokens=16)
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    readings = itertools.count()
    monkeypatch.setattr(race.time, "perf_counter", lambda: 0.5 * next(readings))
    target = race.last(race.run_target(pair, config, ids))
    monkeypatch.undo()
    row = RunRecord.of(config, spec, target)
    assert target.t_step >= 0.5 > costs.BUSY * row.cost_t_step  # the slow clock reached the run
    note = costs.cost_note([row])
    # Either the profile's own verify cost, or no curve claim at all; never the run's slowed step.
    verify = spec.profile.verify_cost(3)
    assert f"costs {verify:.2f} target steps" in note or "profile is disturbed" in note
    assert f"this run's target steps took {row.target_load:.2f}× the profiled time" in note
    curve = costs.group_curves(row.group, [row])
    if min(curve.costs.verify_cost(k) for k in curve.costs.t_verify) >= 1:
        assert curve.predicted[curve.best_k] <= curve.textbook[curve.textbook_best_k]


def test_the_results_table_shows_expected_tokens_per_pass_and_efficiency():
    row = RunRecord(k=2, temperature=1.0, drafter="model", kept_rate=0.5, tokens_per_pass=2.1,
                    expected_tokens_per_pass=1.96, spec_tokens=30, spec_seconds=1.0, c=0.4,
                    target_tokens=25, target_seconds=1.0, predicted_speedup=1.5)  # fmt: skip
    [cells] = results_table([row])
    table = dict(zip(RESULT_COLUMNS, cells, strict=True))
    assert table["tokens/pass expected (i.i.d.)"] == 1.96 and table["efficiency"] == 0.8
    [cells] = results_table([replace(row, predicted_speedup=None)])
    assert dict(zip(RESULT_COLUMNS, cells, strict=True))["efficiency"] == ""


def test_the_sweep_check_script_runs_the_apps_sweep_cell_by_cell(tmp_path):
    """scripts/sweep_check.py (the cost model against the app's default sweep) on the tiny pair."""
    root = ROOT
    out = tmp_path / "sweep.json"
    env = {**os.environ, "SPECDEMO_PAIR": "tiny", "SPECDEMO_PRECISION": "fp32"}
    subprocess.run(
        [sys.executable, "scripts/sweep_check.py", PROMPT, str(out)], cwd=root, env=env, check=True
    )
    record = json.loads(out.read_text())
    assert record["machine"]["cpu_capability"] and record["machine"]["date"]
    rows = record["cells"]
    assert [(row["T"], row["k"]) for row in rows] == [
        (t, k) for t in (0.0, 1.0) for k in (1, 2, 4, "auto")
    ]
    fixed = [row for row in rows if row["k"] != "auto"]
    assert all(row["curve"] > 0 and row["measured / curve"] > 0 for row in fixed)


def test_a_race_on_a_busy_machine_computes_on_the_fitted_threads_whichever_thread_runs_it(
    pair, monkeypatch
):
    """Other processes hold every core: both runs compute every pass on one torch thread, even
    as Gradio's worker threads take turns advancing the race, and the record says so with the
    load automatic K measured (the cost note reads both)."""
    from concurrent.futures import ThreadPoolExecutor

    from specdemo.runtime import threads

    monkeypatch.setattr(threads, "others_busy", lambda **_: 8.0)
    counts = []
    hook = pair.target.register_forward_pre_hook(lambda *_: counts.append(torch.get_num_threads()))
    request = jobs.parse_race(pair, PROMPT, k="auto", auto_k=True, max_new_tokens=12, seed=3)
    workers = [ThreadPoolExecutor(1) for _ in range(2)]
    for w in workers:  # each worker has computed before, on torch's own count
        w.submit(torch.mm, torch.ones(64, 64), torch.ones(64, 64)).result()
    runs, step = work.run_race(pair, request), 0
    try:
        items = []
        while (item := workers[step % 2].submit(next, runs, None).result()) is not None:
            items.append(item)
            step += 1
    finally:
        hook.remove()
        for w in workers:
            w.shutdown()
    kinds = {kind: run for kind, run, _ in items}
    assert counts and set(counts) == {1}, counts
    assert step > 2 and kinds["spec"].threads == 1 and kinds["spec"].load > 0
    row = RunRecord.of(request.config, kinds["spec"], kinds["target"])
    assert (row.threads, row.policy_load) == (1, kinds["spec"].load)


def test_the_judge_reaches_the_engine_and_the_race_table_names_it(pair, monkeypatch):
    """The Judge's "block" reaches the engine: every round of the race that drafted is judged as
    a block, and the race's table names the judge, gives the drafts it kept a pass, and beside
    them what token by token keeps of the same guesses with the same uniforms (the run's own
    counts). Under "token" the table names that judge and has neither of the block's lines."""
    seen = []
    engine = race.speculative_generate

    def recorded(*args, **kwargs):
        for r in engine(*args, **kwargs):
            seen.append(r)
            yield r

    monkeypatch.setattr(race, "speculative_generate", recorded)
    config = parse_run(PROMPT, k=4, temperature=1.0, max_new_tokens=48, judge="block")
    ids = encode(pair, config)
    spec = race.last(race.run_speculative(pair, config, ids))
    target = race.last(race.run_target(pair, config, ids))
    drafted = [r for r in seen if r.k]
    assert drafted and all(r.judge == "block" and len(r.stop_chance) == r.k for r in drafted)
    s = spec.stats
    assert s.verify == "block" and s.token_rounds == len(seen)
    assert s.token_kept == sum(r.token_kept for r in seen)
    table = comparison.comparison_markdown(spec, target, config)
    assert "| Judge | the whole block | — |" in table
    assert f"| Drafts kept a pass | {s.accepted / s.rounds:.2f} | — |" in table
    same = f"{s.token_kept / s.token_rounds:.2f}"
    assert f"| Token by token, same guesses: drafts kept a pass | {same} | — |" in table
    assert f"the block kept **{s.chain_kept}** drafts" in table
    assert f"would have kept **{s.token_kept}**" in table
    record = RunRecord.of(config, spec, target)
    assert record.judge == "block" and record.judge_gain == s.judge_gain
    assert costs.group_name(record.group) == "T=1 block"  # its own curves in the charts
    token = replace(config, judge="token")
    spec = race.last(race.run_speculative(pair, token, ids))
    table = comparison.comparison_markdown(spec, target, token)
    assert "| Judge | token by token | — |" in table and spec.stats.judge_gain == 1.0
    assert "Token by token, same guesses" not in table and "Judged as a whole block" not in table


@pytest.mark.parametrize(
    "chain_kept, says", [(12, "(1.50× as many)"), (8, ": the same."), (6, "fewer this time")]
)
def test_the_block_judges_note_chooses_its_words_from_its_counts(chain_kept, says):
    s = Stats(verify="block", token_rounds=10, token_kept=8, chain_kept=chain_kept)
    note = comparison.judge_note(s)
    assert says in note and f"the block kept **{chain_kept}** drafts" in note
    assert "would have kept **8** of the same drafts" in note and "over 10 chain passes" in note
    assert comparison.judge_note(Stats()) == ""  # token by token: nothing to set beside it
