"""The cost model's numbers from run records: the two curves, and the note on why they differ,
its one sentence shown and the rest under "More on the costs"."""

from dataclasses import replace

import pytest

from specdemo.app.generate import costs
from specdemo.app.generate.run_record import RunRecord
from specdemo.cost.theory import expected_tokens_per_pass

# One run: a plain step of 10 ms, a draft step of 4 ms (c = 0.4) and a verify pass that costs 1.2
# target steps at K = 1, rising by 0.1 step per draft; 40 tokens in 2 s against 2.4 s (1.2×);
# 10 of 20 drafts kept.
RUN = RunRecord(drafter="suffix-hybrid", adaptive=False, temperature=1.0, k=2, kept_rate=0.5,
                drafts_kept=10, drafted=20,
                alpha=0.6, c=0.4, predicted_speedup=1.5,
                cost_t_step=0.010, cost_t_draft=0.004,
                cost_t_verify=tuple(0.010 * (1.1 + 0.1 * k) for k in range(1, 9)),
                spec_tokens=40, spec_seconds=2.0, target_tokens=40, target_seconds=2.4,
                prefill_seconds=0.1, draft_seconds=0.5, verify_seconds=1.2,
                position_judged=(10, 6, 3), position_kept=(6, 3, 1))  # fmt: skip


def test_a_verify_at_one_step_and_a_free_draft_make_the_two_curves_one():
    free = replace(RUN, cost_t_draft=0.0, cost_t_verify=[0.010] * 8)
    curve = costs.group_curves(free.group, [free])
    assert [curve.predicted[k] for k in range(1, 9)] == pytest.approx(
        [curve.textbook[k] for k in range(1, 9)]
    )
    assert curve.predicted[3] == pytest.approx(expected_tokens_per_pass(0.6, 3))


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
    # Which target the speedup is against: eager unless both runs' passes were captured.
    assert "against an eager target alone" in note and "captured target alone" not in note
    both = costs.cost_note([replace(gpu, draft_step="graph", target_step="graph")])
    assert "against a captured target alone" in both and "eager target" not in both
    assert "target alone" not in costs.cost_note([replace(gpu, device="cpu", target_step="eager")])


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
    busy = replace(RUN, target_load=1.6, t_draft=0.0041)
    note = costs.cost_note([busy])
    assert "this run's target steps took 1.60× the profiled time" in note
    assert "took 0.50×" in costs.cost_note([replace(RUN, target_load=0.5)])
    assert "load changed" not in costs.cost_note([replace(RUN, target_load=1.1, t_draft=0.004)])
    assert "priced every choice" not in note and "curves use the profile" in note  # a fixed K


def test_a_busy_machine_says_automatic_k_priced_its_load_and_how_many_threads_ran(monkeypatch):
    monkeypatch.setattr(costs, "usable_cores", lambda: 2)
    busy = replace(RUN, k="auto", target_load=2.4, policy_load=2.38, threads=1, device="cpu")
    note = costs.cost_note([busy])
    assert "took 2.40× the profiled time" in note
    assert "Automatic K priced every choice at the load it measured" in note and "(2.4×" in note
    assert "computed on 1 thread of this machine's 2 cores" in note
    assert "computed on" not in costs.cost_note([replace(busy, threads=2)])  # every core
    assert "computed on" not in costs.cost_note([replace(busy, device="cuda:0")])


def test_the_note_prices_a_tree_against_the_chain_from_the_profile_and_the_siblings_kept():
    """RUN's profile charges each row after the first 0.1 of a step, so at K = 2 a width-3
    fishbone (7 rows) costs 1.70 steps against the chain's 1.30; the note quotes both, the
    siblings this run kept, the speedups the policy's own pricing gives, and its verdict. Cheap
    rows and siblings always kept make a tree pay."""
    from specdemo.cost.policy import expected_tree_tokens

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


def test_the_note_shows_one_sentence_and_opens_the_rest_on_demand():
    """The sentence on why the two curves differ stands alone; the verify cost's jump, the
    share the formulas leave out and the change of load sit under it in a closed <details>,
    which CommonMark (as gr.Markdown, whose sanitizer keeps <details> and <summary>) renders
    with their Markdown intact. A note with nothing more to say has no block."""
    verify = [0.012, 0.013, 0.014, 0.028, 0.029, 0.030, 0.031, 0.042]  # a jump after 4 tokens
    note = costs.cost_note([replace(RUN, k=3, cost_t_verify=tuple(verify), target_load=1.6)])
    shown, rest = note.split("\n\n<details>")
    assert shown.startswith("**Why the two curves differ**") and shown.endswith(".")
    assert ". " not in shown  # one sentence
    assert "target steps on this machine" in shown and "textbook" in shown
    assert rest.startswith(f"<summary>{costs.MORE}</summary>") and rest.endswith("</details>")
    markdown_it = pytest.importorskip("markdown_it")
    html = markdown_it.MarkdownIt("commonmark").render(note)
    opened = html[html.index("<details>") : html.index("</details>")]
    assert f"<summary>{costs.MORE}</summary>" in opened
    assert "<p>On this machine checking 5 tokens" in opened  # the jump
    assert "<p>The measured runs also spend" in opened  # the overhead
    assert "<p><em>The machine's load changed" in opened  # the load
    quiet = replace(RUN, verify_seconds=None)  # no time split, no jump, no load change
    assert "<details>" not in costs.cost_note([quiet])


def test_a_disturbed_profile_says_so_and_what_to_do_in_one_sentence():
    disturbed = replace(RUN, cost_t_verify=[0.010 * 0.6] * 8, target_load=1.6)
    shown, rest = costs.cost_note([disturbed]).split("\n\n<details>")
    assert shown.startswith("*The step profile is disturbed") and ". " not in shown
    assert "restart the app on a quieter machine" in shown
    assert "load changed since the profile" in rest


def test_a_tree_groups_curves_are_the_trees_never_the_chains():
    """Width 2 at K = 2: each pass holds 1 + 2 * 2 rows, and a node whose chain guess was
    rejected kept its sibling 3 times in 4; the curves use the fishbone's E[tokens per pass] at
    the chance automatic K estimates from those counts over the 5-row pass (K * width = 4), and
    the note quotes that pass. A tree whose siblings were never judged is priced at the policy's
    prior, as automatic K prices it."""
    from specdemo.cost.policy import SIBLING_PRIOR, AutoK, SiblingAcceptance
    from specdemo.cost.theory import expected_tree_tokens_per_pass, sibling_chance

    tree = replace(RUN, tree_width=2, sibling_judged=(4,), sibling_kept=(3,))
    curve = costs.group_curves(tree.group, [tree])
    assert curve.width == 2
    policy = AutoK(tree.costs, max_width=2)
    policy.siblings = SiblingAcceptance([4], [3])
    tokens = expected_tree_tokens_per_pass(0.6, 2, policy.sibling_chance(2))
    assert curve.predicted[2] == pytest.approx(tokens * 0.010 / (2 * 0.004 + 0.010 * 1.5))
    assert curve.textbook[2] == pytest.approx(tokens / (0.4 * 2 + 1))
    chain = costs.group_curves(RUN.group, [RUN])
    assert curve.predicted[2] != pytest.approx(chain.predicted[2])
    note = costs.cost_note([tree])
    assert "verifying 5 tokens (K = 2, tree width 2) costs 1.50 target steps" in note
    unjudged = replace(tree, sibling_judged=(), sibling_kept=())
    prior = costs.group_curves(unjudged.group, [unjudged])
    tokens = expected_tree_tokens_per_pass(0.6, 2, sibling_chance([SIBLING_PRIOR]))
    assert prior.textbook[2] == pytest.approx(tokens / (0.4 * 2 + 1))


# RUN's profile with the wider passes a long copy may fill, timed as the profile times them.
WIDE = {**dict(enumerate(RUN.cost_t_verify, 1)), 12: 0.0220, 16: 0.0270, 24: 0.0370, 32: 0.0470}
COPIES = replace(RUN, drafter="suffix-hybrid", k="auto", rounds=10, copied_rounds=4, copied=80,
                 copied_kept=74, longest_copy=32, longest_copy_kept=30,
                 cost_t_verify=tuple(WIDE.values()), cost_verify_ks=tuple(WIDE))  # fmt: skip


def test_copied_rounds_are_priced_by_their_rows_alone_and_said_only_where_a_run_copied():
    """A 32-token copy is one pass over 33 rows, 4.70 target steps in the profile; the model
    would have drafted those 32 tokens in 32 draft steps of 0.4 (12.80 steps). Said after the
    headline, in one sentence; a run that copied nothing says nothing of copies."""
    note = costs.cost_note([COPIES])
    shown = note.split("\n\n<details>")[0]
    sentence = shown[shown.index("**Copied rounds**") :]
    assert sentence.startswith("**Copied rounds** (4 of 10 rounds; 74 of 80 copied guesses kept)")
    assert "run no draft step, only the target's pass over their rows" in sentence
    assert "the longest, 32 copied tokens, kept 30 of them in one pass over 33 rows at 4.70" in (
        sentence
    )
    assert "would have added 32 draft steps (12.80 target steps)" in sentence
    assert "by the length of the match it rests on" in sentence and ". " not in sentence
    assert "Copied rounds" not in costs.cost_note([RUN])
    # A copy between the widths timed is priced between them, and says so; a copy-only run
    # (no draft model ran: c = 0) has no draft steps to set beside it.
    between = costs.cost_note([replace(COPIES, longest_copy=20, cost_t_draft=0.0)])
    assert "one pass over 21 rows at 3.20 target steps (between the widths the profile" in between
    assert "would have added" not in between
    lookup = costs.cost_note([replace(COPIES, drafter="lookup", k=4, longest_copy=4)])
    assert "with K fixed at 4 each copy asked for 4 tokens" in lookup
    assert "by how many of the earlier copies were kept" in lookup


def test_a_profile_timed_past_k_8_keeps_each_pass_under_its_own_k():
    """K = 1 to 8, then 12, 16, 24 and 32: each pass keeps its K (not the 9th to 12th), and the
    curves stop at the K slider's 16."""
    assert COPIES.costs.t_verify == WIDE
    assert COPIES.costs.verify_cost(32) == pytest.approx(4.7)
    curve = costs.group_curves(COPIES.group, [COPIES])
    assert list(curve.predicted) == [*range(1, 9), 12, 16]
    assert curve.predicted[16] == pytest.approx(COPIES.costs.speedup(COPIES.alpha, 16))
