"""The handlers called as plain functions on the tiny pair, as Gradio (or ZeroGPU) would."""

import os
import pickle

import gradio as gr
import pytest
import torch
from conftest import PROMPT
from test_app_config import BAD_INPUT, VALID

from specdemo.app.page import handlers
from specdemo.app.page.session import Session, discard
from specdemo.app.step.stepping import BLOCK_COLUMNS, STEP_COLUMNS
from specdemo.text import MAX_PROMPT_TOKENS

SPEC_LABELS = {"accepted", "resampled", "bonus", "rejected"}


def by_name(names, values) -> dict:
    assert len(values) == len(names)
    return dict(zip(names, values, strict=True))


def plain(value) -> bool:
    """No component and no tensor anywhere inside."""
    if isinstance(value, (gr.components.Component, torch.Tensor)):
        return False
    if isinstance(value, dict):
        return all(plain(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(plain(v) for v in value)
    return True


@pytest.mark.parametrize("changes, message", BAD_INPUT)
def test_bad_input_becomes_a_message_for_the_user(pair, changes, message):
    with pytest.raises(gr.Error, match=message):
        next(handlers.generate(pair, **{**VALID, **changes}))


def test_a_prompt_over_the_cap_is_refused_before_any_model_work(pair):
    words = " ".join(f"w{i}" for i in range(MAX_PROMPT_TOKENS // 2))
    with pytest.raises(gr.Error, match="limit is 4,096"):
        handlers.exactness(pair, words)
    with pytest.raises(gr.Error, match="limit is 4,096"):
        handlers.sweep(pair, words)
    with pytest.raises(gr.Error, match="N must be between"):
        handlers.exactness(pair, PROMPT, n=10)


def test_every_model_handler_yields_plain_picklable_values(pair):
    """ZeroGPU pickles every value a handler returns or yields."""
    outputs = [
        *handlers.generate(pair, PROMPT),
        handlers.sweep(pair, PROMPT),
        handlers.exactness(pair, PROMPT),
        handlers.step(pair, PROMPT),
        handlers.reset_step(),
    ]
    for values in outputs:
        assert isinstance(values, (list, tuple)) and plain(values)
        pickle.dumps(values)


def test_generation_streams_coloured_spans_then_records_the_run(pair):
    session = Session()
    updates = [
        by_name(handlers.GENERATE_OUTPUTS, u)
        for u in handlers.generate(pair, **{**VALID, "max_new_tokens": 40}, session=session)
    ]
    skip = gr.skip()
    spec_spans = [u["spec_pane"] for u in updates if u["spec_pane"] != skip][-1]
    target_spans = [u["target_pane"] for u in updates if u["target_pane"] != skip][-1]
    labels = {label for _, label, _ in spec_spans}
    assert labels <= SPEC_LABELS and "accepted" in labels
    # VALID drafts with the model: each guess says so, and no other token names a source.
    assert {(label in ("accepted", "rejected"), source) for _, label, source in spec_spans} == {
        (True, "drafted"),
        (False, ""),
    }
    assert {label for _, label, _ in target_spans} == {"target"}
    assert all(u["session"] == skip for u in updates[:-1])
    last = updates[-1]
    assert "Speedup" in last["comparison"] and last["session"] is session
    assert len(session.runs) == 1 and session.runs[0].k == 4
    assert open(last["csv_file"]).readline().startswith("run,k,temperature")
    assert last["results"][0][1] == 4
    assert all(label != "rejected" for _, label, _ in handlers.toggle_rejected(False, session))
    assert handlers.toggle_rejected(True, session) == session.spans == spec_spans
    discard(session)
    assert not os.path.exists(last["csv_file"])


def test_a_tree_race_keeps_siblings_and_names_its_width(pair):
    """Tree width 3 at T = 1: some rounds keep a sibling, shown as an accepted draft; the run is
    recorded with its width, and the results and the charts name it."""
    session = Session()
    settings = {**VALID, "temperature": 1.0, "k": 2, "tree_width": 3, "max_new_tokens": 48}
    *_, last = handlers.generate(pair, **settings, session=session)
    last = by_name(handlers.GENERATE_OUTPUTS, last)
    record = session.runs[0]
    assert record.tree_width == 3 and record.group[-1] == 3
    assert "tree 3" in last["results"][0][5]
    discard(session)


def test_a_copying_race_draws_its_copies_and_step_through_shows_where_a_copy_came_from(pair):
    """The suffix index's copies reach the page: the round chart draws them as copies, the
    session's record counts them, and a copied step shows the earlier text it came from."""
    session = Session()
    settings = {**VALID, "drafter": "suffix", "max_new_tokens": 24}
    *_, last = handlers.generate(pair, **settings, session=session)
    last = by_name(handlers.GENERATE_OUTPUTS, last)
    chart = {trace.name: trace for trace in last["rounds_plot"].data}
    assert {"copies proposed", "copies accepted"} <= set(chart)
    assert session.runs[0].copied_rounds == sum(y is not None for y in chart["copies proposed"].y)
    assert session.runs[0].copied_rounds > 0
    discard(session)
    step = by_name(handlers.STEP_OUTPUTS, handlers.step(pair, PROMPT, 3, 1.0, 0, "suffix"))
    assert '<div class="copy-source">' in step["draft"] and "The suffix index" in step["draft"]
    assert step["state"].copies == (step["state"].prompt_len,)  # the first round copied


def test_the_judge_control_reaches_every_tab_and_names_itself(pair):
    """The Judge set to "the whole block" on the Generate tab judges the race's rounds as a block:
    its table names the judge and what token by token would have kept of the same guesses, and
    the session's row says so; on Step through the table gains each guess's w and h; on Is it
    exact? the two-token check is judged as a block."""
    session = Session()
    settings = {**VALID, "k": 4, "max_new_tokens": 32, "judge": "block"}
    *_, last = handlers.generate(pair, **settings, session=session)
    last = by_name(handlers.GENERATE_OUTPUTS, last)
    record = session.runs[0]
    assert record.judge == "block" and record.judge_gain is not None
    assert "| Judge | the whole block | — |" in last["comparison"]
    assert "| Token by token, same guesses: drafts kept a pass |" in last["comparison"]
    assert "**Judged as a whole block:**" in last["comparison"]
    assert "judged as a block" in last["results"][0][5]
    discard(session)
    step = by_name(handlers.STEP_OUTPUTS, handlers.step(pair, PROMPT, 3, 1.0, 0, "model",
                                                        judge="block"))  # fmt: skip
    assert step["table"]["headers"] == BLOCK_COLUMNS and "**last**" in step["accept"]
    details = handlers.exactness(pair, PROMPT, 1.0, 1.0, 2, 200, 0, judge="block")[-1]
    assert details["pairs"]["judge"] == "block" and details["pairs"]["k"] == 2


def test_a_judge_that_does_not_exist_is_refused_before_any_model_work(pair):
    for call in (
        lambda: next(handlers.generate(pair, PROMPT, judge="blocks")),
        lambda: handlers.sweep(pair, PROMPT, judge="blocks"),
        lambda: handlers.exactness(pair, PROMPT, judge="blocks"),
        lambda: handlers.step(pair, PROMPT, judge="blocks"),
    ):
        with pytest.raises(gr.Error, match='Judge must be one of "token"'):
            call()


def test_sweep_records_each_cell_as_it_finishes(pair):
    session = Session()
    updates = [
        handlers.sweep(
            pair, PROMPT, ks=[1, 2], temperatures="0, 1", max_new_tokens=16, session=session
        )
    ]
    while not session.sweep.finished:  # the UI queues each further cell as an event of its own
        updates.append(handlers.sweep_next(pair, session))
    assert [len(by_name(handlers.SWEEP_OUTPUTS, u)["results"]) for u in updates] == [1, 2, 3, 4]
    assert len(session.runs) == 4
    discard(session)


def test_exactness_reports_histograms_and_the_greedy_check(pair):
    plot, joint_plot, summary, greedy, details = handlers.exactness(
        pair, PROMPT, 1.0, 0.9, 4, 2000, 1
    )
    assert "Total-variation" in summary and "identical" in greedy
    # The verdict first, in one marked line; the two-token line names the settings it ran with.
    assert summary.startswith("✓ **No departure from p found** (first token χ² p = ")
    assert "(K = 4, temperature 1, top-p 0.9, seed 1), rounds of K = 2" in summary
    assert details["greedy"]["identical"] is True and details["sampling"]["n"] == 2000
    assert details["pairs"]["n"] == 2000 and "First two tokens" in summary
    assert plot.data[0].name == "exact p" and joint_plot.data[0].name == "exact p"
    assert "·" in joint_plot.data[0].x[0]  # a bar per (first, second) pair


def test_a_mistaken_rule_needs_sampling_and_a_known_name(pair):
    with pytest.raises(gr.Error, match="differ only when sampling"):
        handlers.exactness(pair, PROMPT, temperature=0.0, rule="always-accept")
    with pytest.raises(gr.Error, match="Rule must be one of"):
        handlers.exactness(pair, PROMPT, rule="accept-when-lucky")
    with pytest.raises(gr.Error, match="mistaken rules are chain rules"):
        handlers.exactness(pair, PROMPT, rule="always-accept", tree_width=2)


def test_the_exactness_check_takes_a_tree_width(pair):
    """Trees three guesses wide: the first token's draws follow p, more of them keep a guess
    than the chain's first guess alone, and the summary says so."""
    _, _, summary, greedy, details = handlers.exactness(
        pair, PROMPT, 1.0, 1.0, 2, 20_000, 3, tree_width=3
    )
    sampling = details["sampling"]
    assert sampling["width"] == 3 and sampling["p_value_speculative"] > 1e-3
    assert sampling["kept"] > sampling["first_accept"] + 0.02  # 20,000 draws: s.e. ≤ 0.0035
    assert "trees 3 guesses wide" in summary and "up to 3 of the draft's guesses" in summary
    assert "closed form" in summary and "not the engine's walk" in summary
    assert (
        "chains of one guess a position" in summary
        and "without replacement" in summary
        and "identical" in greedy
    )


def test_step_keeps_its_context_until_reset(pair):
    first = by_name(handlers.STEP_OUTPUTS, handlers.step(pair, PROMPT, 3, 1.0, 0, "model"))
    second = handlers.step(pair, PROMPT, 3, 1.0, 0, "model", first["state"])
    second = by_name(handlers.STEP_OUTPUTS, second)
    assert len(second["state"].context) > len(first["state"].context)
    assert second["text"][: len(first["text"])] == first["text"]
    assert first["draft"].startswith("**1 · Draft.**") and first["table"]["data"][0][0] == 1
    assert first["table"]["headers"] == STEP_COLUMNS  # judged token by token, the default
    # The microscope note names its round, so a viewer can tell one step's note from the last.
    assert first["microscope_note"].startswith("**Round 1:**")
    assert second["microscope_note"].startswith("**Round 2:**")
    reset = by_name(handlers.STEP_OUTPUTS, handlers.reset_step())
    assert reset["state"] is None and reset["text"] == []


def test_step_through_shows_a_trees_siblings(pair):
    """Tree width 3: the table lists the siblings tried after a rejected guess, in order, each
    with q without the earlier children and the p left; a kept sibling is followed by a bonus."""
    state, seen_sibling, kept, all_rejected = None, False, False, False
    for _ in range(12):
        out = handlers.step(pair, PROMPT, 2, 1.0, 0, "model", state, tree_width=3)
        out = by_name(handlers.STEP_OUTPUTS, out)
        state = out["state"]
        assert out["plot"].layout.title.text.startswith("The round as a tree")
        assert "siblings drawn beside them" in out["verify"]
        siblings = [row for row in out["table"]["data"] if "sibling" in str(row[0])]
        seen_sibling |= bool(siblings)
        if not siblings:
            continue
        # The microscope: p as each guess at the node was judged, one set of bars per guess.
        shrinking = out["residual"].data
        assert len(shrinking) >= 2 and shrinking[1].name.startswith("p judging")
        assert "A tree does not stop here" in out["microscope_note"]
        if any(row[1] == "accepted (sibling)" for row in siblings):
            kept = True
            assert out["table"]["data"][-1][1].startswith("bonus")
            assert "was **kept**" in out["accept"] and "**bonus**" in out["accept"]
            assert len(shrinking) == 1 + siblings.index(next(
                row for row in siblings if row[1] == "accepted (sibling)")) + 1  # fmt: skip
        else:
            all_rejected = True
            assert "and so were its siblings" in out["accept"]
            assert shrinking[-1].name.startswith("what is left")
            assert len(shrinking) == len(siblings) + 2  # each guess tried, and what was left
    assert seen_sibling and kept and all_rejected


def test_a_mistaken_rules_failure_shows_in_the_residuals_and_the_exact_rules_does_not(pair):
    from specdemo.app.exact.histograms import RESIDUAL_BAND

    def worst(rule: str) -> float:
        plot = handlers.exactness(pair, PROMPT, 1.0, 1.0, 1, 20_000, 0, rule)[0]
        [spec] = [t for t in plot.data if t.name == "speculative: (O − E)/√E"]
        return max(abs(r) for r in spec.y)

    assert worst("always-accept") > 2 * RESIDUAL_BAND
    assert worst("exact") < 1.5 * RESIDUAL_BAND  # the shown bins of an exact sampler: noise


EDGES = [  # each value the parsers admit at an end of its range, with K chosen per round
    {"k": "auto", "temperature": 0.0},
    {"k": "auto", "temperature": 2.0, "seed": 2**32 - 1},
    {"k": 1, "temperature": 1.0},
    {"k": 16, "temperature": 0.7},
]


@pytest.mark.parametrize("edge", EDGES, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
def test_every_endpoint_takes_every_value_its_parser_admits(pair, edge):
    """Generate, sweep, exactness and step with K = "auto" and at the ends of each range: each
    answers with its outputs, never a traceback; Step through, which shows one round at a K
    chosen for it, answers "auto" with a message saying what to set."""
    k, auto = (5, True) if edge["k"] == "auto" else (edge["k"], False)
    rest = {key: v for key, v in edge.items() if key != "k"}
    *_, last = handlers.generate(pair, PROMPT, k=k, auto_k=auto, max_new_tokens=1, top_k=200,
                                 **rest)  # fmt: skip
    assert len(last) == len(handlers.GENERATE_OUTPUTS)
    outputs = handlers.sweep(pair, PROMPT, ks=[edge["k"]], temperatures=[edge["temperature"]],
                             max_new_tokens=1)  # fmt: skip
    assert len(outputs) == len(handlers.SWEEP_OUTPUTS)
    exact = handlers.exactness(pair, PROMPT, k=edge["k"], n=100, temperature=edge["temperature"],
                               seed=edge.get("seed", 0))  # fmt: skip
    assert "Greedy check" in exact[handlers.EXACTNESS_OUTPUTS.index("greedy")]
    if edge["k"] == "auto":
        with pytest.raises(gr.Error, match="set K from 1 to 16"):
            handlers.step(pair, PROMPT, k="auto", temperature=edge["temperature"])
        return
    step = handlers.step(pair, PROMPT, k=edge["k"], temperature=edge["temperature"])
    assert step[-1].rounds == 1
