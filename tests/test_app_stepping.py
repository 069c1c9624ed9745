"""The step-through on the tiny pair: a growing context, and every kind of round explained."""

import pytest

from specdemo.app import charts, stepping
from specdemo.app.config import parse_run
from specdemo.records import Round
from specdemo.text import token_labels

PROMPT = "Write a Python function that checks whether a number is prime."


def test_step_through_advances_the_context(pair):
    config = parse_run(PROMPT, k=3, temperature=1.0)
    state, r = stepping.step(pair, config, None)
    assert len(state.context) - state.prompt_len == len(r.tokens) == r.n_accepted + 1
    state2, r2 = stepping.step(pair, config, state)
    assert state2.context[: len(state.context)] == state.context and state2.steps == 2
    rows = stepping.step_rows(r2, pair.tokenizer)
    assert len(rows) == r2.k + 1 and rows[-1][-1].startswith(("bonus", "resampled"))
    draft, verify, accept = stepping.step_markdown(r2, pair.tokenizer, config)
    assert "Draft" in draft and "one" in verify and ("rejected" in accept or "bonus" in accept)
    restarted, _ = stepping.step(pair, parse_run("Another prompt", k=3), state2)
    assert restarted.steps == 1


def test_the_same_seed_replays_the_same_round(pair):
    config = parse_run(PROMPT, k=3, temperature=1.0, seed=5)
    first, _ = stepping.step(pair, config, None)
    again, _ = stepping.step(pair, config, None)
    assert first == again


def test_a_finished_answer_or_a_full_context_asks_for_reset(pair):
    config = parse_run(PROMPT, k=3)
    state, _ = stepping.step(pair, config, None)
    with pytest.raises(ValueError, match="The answer is finished"):
        stepping.step(pair, config, stepping.StepState(**{**state.__dict__, "finished": True}))
    full = state.context + (0,) * stepping.STEP_LIMIT
    with pytest.raises(ValueError, match="stops after 512 new tokens"):
        stepping.step(pair, config, stepping.StepState(**{**state.__dict__, "context": full}))


@pytest.mark.parametrize(
    "drafter, temperature", [("lookup", 1.0), ("model", 0.0), ("lookup", 0.0), ("hybrid", 1.0)]
)
def test_step_through_explains_every_kind_of_round(pair, drafter, temperature):
    config = parse_run(PROMPT + " " + PROMPT, k=4, temperature=temperature, drafter=drafter)
    state = None
    for _ in range(3):
        state, r = stepping.step(pair, config, state)
        draft, verify, accept = stepping.step_markdown(r, pair.tokenizer, config)
        assert draft.startswith("**1 · Draft.**") and accept.startswith("**3 · Accept")
        assert len(stepping.step_rows(r, pair.tokenizer)) == r.k + 1
        charts.step_chart(r, lambda ids: token_labels(pair.tokenizer, ids))


def test_a_hybrid_rounds_draft_note_names_the_drafter_that_ran(pair):
    """Each round of a hybrid run says whether it copied or asked the draft model, and why."""
    config = parse_run(PROMPT, k=2, temperature=1.0, drafter="hybrid")
    common = dict(n_accepted=1, next_token=7, p_x=[0.5, 0.2], q_x=[1.0, 1.0],
                  accept_prob=[0.5, 0.2], u=[0.1, 0.9], residual_top=[(7, 0.6)], tokens=[5, 7],
                  draft_time=0.0, verify_time=0.01, finished=False, k_asked=2)  # fmt: skip
    copied = Round(draft=[5, 6], draft_steps=0, source="lookup", **common)
    guessed = Round(draft=[5, 6], draft_steps=2, source="model", **common)
    draft, _, _ = stepping.step_markdown(copied, pair.tokenizer, config)
    assert "hybrid drafter found the last 3 tokens earlier" in draft and "q(x) = 1" in draft
    draft, _, _ = stepping.step_markdown(guessed, pair.tokenizer, config)
    assert "hybrid drafter found no earlier copy" in draft and "draft model guessed 2" in draft
