"""The app logic and handlers on the tiny pair: validation, runs, sweep, exactness, step-through."""

import math
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr
import pytest
import torch

from specdemo import charts, demo, ui
from specdemo.models import load_pair
from specdemo.text import MAX_PROMPT_TOKENS

PROMPT = "Write a Python function that checks whether a number is prime."
SPEC_LABELS = {"accepted", "resampled", "bonus", "rejected"}


@pytest.fixture(scope="module")
def pair():
    return load_pair("tiny", precision="fp32")


@pytest.fixture(scope="module")
def app(pair):
    return ui.build(pair)


def handler(app, api_name):
    return next(f.fn for f in app.fns.values() if f.api_name == api_name)


def outputs(app, api_name) -> list:
    return next(f.outputs for f in app.fns.values() if f.api_name == api_name)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"prompt": ""}, "prompt is empty"),
        ({"prompt": "  \n\t "}, "prompt is empty"),
        ({"prompt": "\x00\x07\x1b"}, "prompt is empty"),
        ({"prompt": None}, "prompt is empty"),
        ({"prompt": 42}, "must be text"),
        ({"prompt": "x" * (demo.MAX_PROMPT_CHARS + 1)}, "too long"),
        ({"k": 0}, "K must be between 1 and 16"),
        ({"k": 17}, "K must be between 1 and 16"),
        ({"k": 2.5}, "K must be a whole number"),
        ({"k": "many"}, "K must be a number"),
        ({"k": float("nan")}, "K must be a finite number"),
        ({"k": None}, "K must be a number"),
        ({"k": True}, "K must be a number"),
        ({"temperature": -0.1}, "Temperature must be between 0.0 and 2.0"),
        ({"temperature": 2.5}, "Temperature must be between 0.0 and 2.0"),
        ({"temperature": float("nan")}, "Temperature must be a finite number"),
        ({"temperature": "inf"}, "Temperature must be a finite number"),
        ({"top_p": 0.0}, "Top-p must be above 0"),
        ({"top_p": 1.5}, "Top-p must be above 0"),
        ({"top_p": float("nan")}, "Top-p must be a finite number"),
        ({"top_k": -1}, "Top-k must be between 1 and 200"),
        ({"top_k": 500}, "Top-k must be between 1 and 200"),
        ({"top_k": 3.5}, "Top-k must be a whole number"),
        ({"max_new_tokens": 0}, "Max new tokens must be between 1 and 1024"),
        ({"max_new_tokens": 10**6}, "Max new tokens must be between 1 and 1024"),
        ({"max_new_tokens": "lots"}, "Max new tokens must be a number"),
        ({"seed": -1}, "Seed must be between"),
        ({"drafter": "oracle"}, "Drafter must be one of"),
        ({"adaptive": "yes"}, "Adaptive K must be true or false"),
    ],
)
def test_bad_input_gets_a_clear_message(app, changes, message):
    values = {
        "prompt": PROMPT,
        "system": "",
        "k": 4,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_new_tokens": 8,
        "seed": 0,
        "drafter": "model",
        "adaptive": False,
    }
    values.update(changes)
    with pytest.raises(ValueError, match=message):
        demo.parse_run(**values)
    generate = handler(app, "generate")
    with pytest.raises(gr.Error, match=message):
        next(generate(**values, show_rejected=True, session=demo.Session()))


def test_prompt_over_the_context_cap_is_refused(pair, app):
    words = " ".join(f"w{i}" for i in range(MAX_PROMPT_TOKENS // 2))
    config = demo.parse_run(words)
    with pytest.raises(ValueError, match="limit is 4,096"):
        demo.encode(pair, config)
    with pytest.raises(gr.Error, match="limit is 4,096"):
        handler(app, "exactness")(words, 1.0, 1.0, 4, 1000, 0)


def test_control_characters_are_dropped_and_unicode_kept(pair):
    config = demo.parse_run("a\x00b\x1b[31mc\r\n\td\u200b 😀 日本語 é\ud800\x7f")
    assert config.prompt == "ab[31mc\n\td\u200b 😀 日本語 é"
    spec = demo.last(demo.run_speculative(pair, config, demo.encode(pair, config)))
    assert spec.tokens


def test_off_values_and_numeric_strings_are_accepted():
    config = demo.parse_run(PROMPT, k="3", temperature="0.5", top_p=1.0, top_k=0.0, seed=7.0)
    assert (config.k, config.temperature, config.top_p, config.top_k, config.seed) == (
        3,
        0.5,
        None,
        None,
        7,
    )


def test_sweep_grid_is_checked():
    assert demo.parse_grid([4, "2", 2], "0, 1.0") == ([2, 4], [0.0, 1.0])
    with pytest.raises(ValueError, match="at least one K"):
        demo.parse_grid([], [1.0])
    with pytest.raises(ValueError, match="K must be between"):
        demo.parse_grid([0], [1.0])
    with pytest.raises(ValueError, match="Temperature must be a finite"):
        demo.parse_grid([1], [math.nan])


# ---------------------------------------------------------------- the app


def test_ui_builds_with_named_endpoints(app):
    names = {f.api_name for f in app.fns.values()}
    assert {"generate", "sweep", "exactness", "step", "reset_step"} <= names
    model_work = [f for f in app.fns.values() if f.api_name in {"generate", "sweep", "step"}]
    assert {f.concurrency_id for f in model_work} == {"model"}
    assert all(f.concurrency_limit == 1 for f in model_work)
    assert app._queue.max_size == ui.QUEUE_SIZE


def test_generation_streams_coloured_spans_then_records_the_run(app):
    session = demo.Session()
    updates = list(
        handler(app, "generate")(PROMPT, "", 4, 1.0, 1.0, 0, 40, 0, "model", False, True, session)
    )
    spec_pane, target_pane, comparison = outputs(app, "generate")[:3]
    spec_spans = [u[spec_pane] for u in updates if spec_pane in u][-1]
    target_spans = [u[target_pane] for u in updates if target_pane in u][-1]
    labels = {label for _, label in spec_spans}
    assert labels <= SPEC_LABELS and "accepted" in labels
    assert {label for _, label in target_spans} == {"target"}
    assert "Speedup" in updates[-1][comparison]
    assert len(session.runs) == 1 and session.runs[0]["k"] == 4
    csv_path, json_path = demo.export(session)
    assert open(csv_path).readline().startswith("run,k,temperature")
    toggle = next(
        f.fn for f in app.fns.values() if getattr(f.fn, "__name__", "") == "toggle_rejected"
    )
    assert all(label != "rejected" for _, label in toggle(False, session))
    assert toggle(True, session) == session.spans
    demo.discard(session)
    assert not os.path.exists(csv_path)


def test_greedy_speculative_equals_target_alone(pair):
    config = demo.parse_run(PROMPT, k=3, temperature=0, max_new_tokens=32)
    ids = demo.encode(pair, config)
    spec = demo.last(demo.run_speculative(pair, config, ids))
    target = demo.last(demo.run_target(pair, config, ids))
    assert spec.tokens == target.tokens
    record = demo.record(config, spec, target)
    assert record["greedy_match"] is True and record["spec_target_passes"] < len(target.tokens)
    assert "identical" in demo.comparison_markdown(spec, target, config)


def test_prompt_lookup_drafter_runs(pair):
    config = demo.parse_run(PROMPT + " " + PROMPT, k=4, drafter="lookup", max_new_tokens=16)
    spec = demo.last(demo.run_speculative(pair, config, demo.encode(pair, config)))
    assert len(spec.tokens) == 16 and spec.stats.c == 0.0


def test_sweep_fills_the_grid(pair):
    config = demo.parse_run(PROMPT, max_new_tokens=6)
    cells = list(demo.sweep(pair, config, [1, 3], [0.0, 1.0]))
    assert [done for done, _, _ in cells] == [1, 2, 3, 4]
    assert {(r["k"], r["temperature"]) for _, _, r in cells} == {(1, 0), (3, 0), (1, 1), (3, 1)}
    assert all(r["speedup"] > 0 for _, _, r in cells)


def test_exactness_histograms_match_the_target(pair, app):
    config = demo.parse_run(PROMPT, k=4, temperature=1.0)
    ex = demo.exactness(pair, config, 20_000)
    assert ex.tv_speculative < 0.05 and ex.p_value_speculative > 0.001
    assert ex.tv_direct < 0.05
    assert sum(ex.p) == pytest.approx(1.0) and sum(ex.speculative) == pytest.approx(1.0)
    plot, summary, greedy, details = handler(app, "exactness")(PROMPT, 1.0, 0.9, 4, 2000, 1)
    assert "Total-variation" in summary and "identical" in greedy
    assert details["greedy"]["identical"] is True


def test_exactness_check_catches_a_wrong_sampler(pair):
    config = demo.parse_run(PROMPT, temperature=1.0)
    ids = demo.encode(pair, config)
    p = demo.next_token_probs(pair.target, ids, config.sampling).double()
    q = demo.next_token_probs(pair.draft, ids, config.sampling).double()
    drafts = torch.multinomial(
        q, 20_000, replacement=True, generator=torch.Generator().manual_seed(0)
    )
    assert demo.chi2_pvalue(torch.bincount(drafts, minlength=len(p)).double(), p / p.sum()) < 1e-6


def test_step_through_advances_the_context(pair, app):
    config = demo.parse_run(PROMPT, k=3, temperature=1.0)
    state, r = demo.step(pair, config, None)
    assert len(state.context) - state.prompt_len == len(r.tokens) == r.n_accepted + 1
    state2, r2 = demo.step(pair, config, state)
    assert state2.context[: len(state.context)] == state.context and state2.steps == 2
    rows = demo.step_rows(r2, pair.tokenizer)
    assert len(rows) == r2.k + 1 and rows[-1][-1].startswith(("bonus", "resampled"))
    draft, verify, accept = demo.step_markdown(r2, pair.tokenizer, config)
    assert "Draft" in draft and "one" in verify and ("rejected" in accept or "bonus" in accept)
    restarted, _ = demo.step(pair, demo.parse_run("Another prompt", k=3), state2)
    assert restarted.steps == 1

    step = handler(app, "step")
    text, *_, table, chart, st = step(PROMPT, 3, 1.0, 0, "model", None)
    text2, *_, st2 = step(PROMPT, 3, 1.0, 0, "model", st)
    assert len(st2.context) > len(st.context) and len(text2) >= len(text)
    assert handler(app, "reset_step")()[-1] is None


@pytest.mark.parametrize("drafter, temperature", [("lookup", 1.0), ("model", 0.0), ("lookup", 0.0)])
def test_step_through_explains_every_kind_of_round(pair, drafter, temperature):
    config = demo.parse_run(PROMPT + " " + PROMPT, k=4, temperature=temperature, drafter=drafter)
    state = None
    for _ in range(3):
        state, r = demo.step(pair, config, state)
        draft, verify, accept = demo.step_markdown(r, pair.tokenizer, config)
        assert draft.startswith("**1 · Draft.**") and accept.startswith("**3 · Accept")
        assert len(demo.step_rows(r, pair.tokenizer)) == r.k + 1
        charts.step_chart(r, lambda ids: demo.token_labels(pair.tokenizer, ids))


def test_chart_labels_keep_tokens_with_the_same_text_apart(pair):
    labels = demo.token_labels(pair.tokenizer, [5, 5, 7])
    assert len(set(labels)) == 2 and labels[0] != labels[2]
    byte_tokens = [t for t in range(300) if demo.token_text(pair.tokenizer, t) == "\ufffd"][:2]
    assert len(set(demo.token_labels(pair.tokenizer, byte_tokens))) == len(byte_tokens)


def test_gpu_work_runs_under_spaces_gpu_only_on_a_gpu_space(monkeypatch):
    wrapped = []

    def gpu(duration):
        return lambda fn: wrapped.append((fn, duration)) or fn

    def handler():
        pass

    monkeypatch.setattr(ui, "spaces", None)
    assert ui.on_gpu(handler) is handler and not wrapped
    monkeypatch.setattr(ui, "spaces", type("Spaces", (), {"GPU": staticmethod(gpu)}))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    ui.on_gpu(handler)
    assert not wrapped  # a CPU Space: runs locally, unchanged
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    ui.on_gpu(handler, duration=300)
    assert wrapped == [(handler, 300)]
