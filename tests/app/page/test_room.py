"""A room served by one machine: identical requests replayed from the store, the target alone
measured once across K, a sweep that lets other runs in between its cells, and memory that stays
flat however many sessions come and go."""

import contextlib
import os
import threading
import time

import gradio as gr
import httpx
import pytest
from conftest import PROMPT
from test_app_client import GENERATE, SWEEP, connect, free_port, serve_app

from specdemo.app.page import handlers, replay, ui
from specdemo.app.page.session import Session
from specdemo.app.page.ui import SESSIONS_KEPT

RUN = {"k": 3, "auto_k": False, "temperature": 1.0, "max_new_tokens": 24, "seed": 5}


@pytest.fixture(autouse=True)
def empty_store():
    replay.clear()
    yield
    replay.clear()


@contextlib.contextmanager
def forward_passes(pair):
    """Counts of the target's and the draft's forward passes while inside."""
    counts = {"target": 0, "draft": 0}
    hooks = [
        getattr(pair, name).base_model.register_forward_hook(
            lambda *_, name=name: counts.__setitem__(name, counts[name] + 1)
        )
        for name in counts
    ]
    try:
        yield counts
    finally:
        for hook in hooks:
            hook.remove()


def race(pair, session, **changes) -> tuple[list[dict], dict]:
    """Every update of one Generate click, and the last one by output name."""
    updates = list(handlers.generate(pair, PROMPT, **{**RUN, **changes}, session=session))
    return updates, dict(zip(handlers.GENERATE_OUTPUTS, updates[-1], strict=True))


def test_an_identical_request_is_replayed_without_a_forward_pass(pair):
    session = Session()
    _, first = race(pair, session)
    with forward_passes(pair) as passes:
        updates, again = race(pair, session)
    assert passes == {"target": 0, "draft": 0} and len(updates) == 1
    assert again["spec_pane"] == first["spec_pane"] and again["target_pane"] == first["target_pane"]
    assert "replayed from a run measured at" in again["comparison"].lower()
    measured, replayed = session.runs
    assert not measured.replayed and replayed.replayed
    timings = ("spec_seconds", "target_seconds", "speedup", "t_step", "t_draft")
    assert all(getattr(replayed, t) == getattr(measured, t) for t in timings)  # stored figures
    with forward_passes(pair) as passes:
        _, fresh = race(pair, session, fresh=True)
    assert passes["target"] > 0 and passes["draft"] > 0
    assert fresh["spec_pane"] == first["spec_pane"]  # the seed fixes the tokens
    assert "replayed" not in fresh["comparison"].lower() and not session.runs[-1].replayed


def test_the_target_alone_is_measured_once_across_k(pair):
    session = Session()
    race(pair, session, k=2)
    with forward_passes(pair) as passes:
        _, other = race(pair, session, k=4)
    first, second = session.runs
    assert passes["target"] == second.spec_target_passes  # the speculative run's own passes
    assert second.target_seconds == first.target_seconds and not second.replayed
    assert "Target alone: the run measured at" in other["comparison"]


def test_the_store_keeps_only_the_most_recent_runs():
    store = replay.Store(size=3)
    for key in range(5):
        store.put(key, [key])
    assert len(store) == 3 and store.get(0) is None and store.get(4).value == [4]
    got = store.get(4)
    got.value.append("changed")
    assert store.get(4).value == [4]  # what one caller changes, the next does not see
    assert store.get(4, since=time.time() + 1) is None  # a fresh run ignores older entries


def test_a_sweep_runs_one_cell_per_call_until_its_tick_stops(pair):
    session = Session()
    outputs = handlers.sweep(pair, PROMPT, ks=[1, 2], temperatures=[0.0, 1.0], session=session)
    ticks = [outputs[-1]]
    while not session.sweep.finished:
        outputs = handlers.sweep_next(pair, session)
        ticks.append(outputs[-1])
        assert f"{session.sweep.done} of 4" in outputs[-2]
    assert ticks[:-1] == [(session.sweep.id, done) for done in (1, 2, 3)]
    assert ticks[-1] == gr.skip() and "Sweep done" in outputs[-2]
    # One target-alone run per temperature; nothing is left to run afterwards.
    assert len({r.target_seconds for r in session.runs}) == 2
    assert handlers.sweep_next(pair, session) == [gr.skip()] * len(handlers.SWEEP_OUTPUTS)


# ---------------------------------------------------------------- the served app


@pytest.fixture(scope="module")
def url():
    with serve_app() as url:
        yield url


def test_a_run_asked_for_during_a_sweep_goes_between_its_cells(url, tmp_path):
    sweeper, runner = connect(url, tmp_path / "a"), connect(url, tmp_path / "b")
    sweep = {**SWEEP, "ks": [1, 2, 3, 4], "max_new_tokens": 48, "fresh": True}
    finished, first_cell = {}, threading.Event()

    def run_sweep():
        outputs = sweeper.predict(**sweep, api_name="/sweep")
        first_cell.set()
        while "Sweep done" not in outputs[-1]:
            outputs = sweeper.predict(api_name="/sweep_next")
        finished["sweep"], finished["table"] = time.monotonic(), outputs[5]  # the results

    thread = threading.Thread(target=run_sweep)
    thread.start()
    assert first_cell.wait(120)
    runner.predict(**{**GENERATE, "max_new_tokens": 8, "fresh": True}, api_name="/generate")
    finished["run"] = time.monotonic()
    thread.join(300)
    assert finished["run"] < finished["sweep"]
    assert len(finished["table"]["data"]) == 8
    sweeper.close()
    runner.close()


def test_a_repeated_request_is_answered_from_the_record(url, tmp_path):
    client = connect(url, tmp_path)
    args = {**GENERATE, "seed": 11, "max_new_tokens": 16}
    first = client.predict(**args, api_name="/generate")
    again = client.predict(**args, api_name="/generate")
    assert again[:2] == first[:2] and "Replayed from a run measured at" in again[2]
    fresh = client.predict(**args, fresh=True, api_name="/generate")
    assert fresh[:2] == first[:2] and "Replayed" not in fresh[2]
    client.close()


def resident_mb() -> float:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_memory_stays_flat_over_hundreds_of_sessions(pair):
    """Each /call request is a session of its own; Gradio keeps each session's component values
    (about 0.4 MB here) until SESSIONS_KEPT newer ones push it out."""
    app = ui.build(pair)
    port = free_port()
    app.launch(
        prevent_thread_lock=True,
        server_name="127.0.0.1",
        server_port=port,
        quiet=True,
        state_session_capacity=SESSIONS_KEPT,
    )
    levels = {}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/", timeout=60) as http:
            for session in range(1, 301):
                # A room: the same few example runs again and again, and some of its own.
                seed = session % 100 if session % 3 else 0
                values = {**GENERATE, "max_new_tokens": 8, "seed": seed, "fresh": False,
                          "judge": "token"}  # fmt: skip
                call = http.post("gradio_api/call/generate", json={"data": list(values.values())})
                stream = http.get(f"gradio_api/call/generate/{call.json()['event_id']}").text
                assert "event: complete" in stream, stream[-300:]
                if session in (50, 300):
                    levels[session] = resident_mb()
    finally:
        app.close()
    assert len(replay.RACES) <= replay.KEPT and len(replay.TARGETS) <= replay.KEPT
    assert levels[300] - levels[50] < 60, levels
