"""`python app.py` on the tiny pair, driven through gradio_client like any API user would."""

import contextlib
import importlib.util
import json
import os
import time
from dataclasses import fields
from pathlib import Path

import httpx
import pytest
from conftest import PROMPT, ROOT
from gradio_client import Client
from gradio_client.exceptions import AppError

from specdemo.app.generate import costs
from specdemo.app.generate.run_record import RunRecord

GENERATE = {
    "prompt": PROMPT,
    "system": "",
    "k": 4,
    "auto_k": False,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "max_new_tokens": 24,
    "seed": 0,
    "drafter": "model",
    "adaptive": False,
    "tree_width": 1,
    "show_rejected": True,
}
SWEEP = {
    "prompt": PROMPT,
    "system": "",
    "ks": [1, 3],
    "temperatures": [0.0, 1.0],
    "top_p": 1.0,
    "top_k": 0,
    "max_new_tokens": 6,
    "seed": 0,
    "drafter": "model",
    "adaptive": False,
    "tree_width": 1,
}


_spec = importlib.util.spec_from_file_location("served_app", ROOT / "scripts" / "served_app.py")
served_app = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(served_app)
free_port = served_app.free_port


@contextlib.contextmanager
def serve_app(pair: str = "tiny", timeout: float = 180.0):
    """`python app.py` on `pair` (the tiny one in fp32) until it is ready; yields its URL."""
    precision = "fp32" if pair == "tiny" else os.environ.get("SPECDEMO_PRECISION", "")
    try:
        with served_app.served_app(pair, timeout, SPECDEMO_PRECISION=precision) as url:
            yield url
    except served_app.NotReady as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def url():
    with serve_app() as url:
        yield url


def connect(url, folder) -> Client:
    return Client(url, verbose=False, download_files=folder, analytics_enabled=False)


@pytest.fixture
def client(url, tmp_path):
    """A fresh client: its own session, so its own results and step-through context."""
    client = connect(url, tmp_path)
    yield client
    client.close()


@pytest.fixture(scope="module")
def shared_client(url, tmp_path_factory):
    """For calls whose session does not matter (closing a client takes a second)."""
    client = connect(url, tmp_path_factory.mktemp("downloads"))
    yield client
    client.close()


def as_field(value):
    """A JSON value as the RunRecord field it was written from (tuples come back as lists)."""
    return tuple(value) if isinstance(value, list) else value


def labels(spans: list[list[str]]) -> set[str]:
    """A token pane's kinds: the API gives its spans as [text, kind, source]."""
    return {kind for _, kind, _ in spans}


def test_generate_streams_both_panes_and_records_the_run(client):
    outputs = client.predict(**GENERATE, api_name="/generate")
    spec, target, comparison, _, kept_plot, speedup_plot, cost_note, _, _, *files = outputs
    table, csv_path, json_path = files
    assert labels(spec) <= {"accepted", "resampled", "bonus", "rejected", "target"}
    assert "accepted" in labels(spec) and labels(target) == {"target"}
    assert "Speedup" in comparison and "Target passes" in comparison
    assert kept_plot["type"] == speedup_plot["type"] == "plotly"
    # The note follows the step profile the run recorded: on a machine whose load changed while
    # it was timed the app rightly says the profile is disturbed; either way, the same sentence
    # the cost model writes for that record.
    row = json.loads(Path(json_path).read_text())[0]
    record = RunRecord(**{f.name: as_field(row[f.name]) for f in fields(RunRecord)})
    assert cost_note == costs.cost_note([record])
    assert "Why the two curves differ" in cost_note or "The step profile is disturbed" in cost_note
    assert [row[1] for row in table["data"]] == [4]
    assert table["data"][0][-1] > 0  # c, from the target-alone run's plain steps
    assert Path(csv_path).read_text().startswith("run,k,temperature")
    assert json.loads(Path(json_path).read_text())[0]["k"] == 4


def test_sweep_fills_the_grid(client):
    outputs = client.predict(**SWEEP, api_name="/sweep")  # the first cell
    while "Sweep done" not in outputs[-1]:  # each further cell is a queued call of its own
        outputs = client.predict(api_name="/sweep_next")
    _, plot, _, _, _, table, _, json_path, _ = outputs
    cells = {(row[1], row[2]) for row in table["data"]}
    assert cells == {(1, 0.0), (3, 0.0), (1, 1.0), (3, 1.0)}
    assert len(json.loads(Path(json_path).read_text())) == 4
    assert "theory" in plot["plot"]


EXACT_ARGS = {"prompt": PROMPT, "temperature": 1.0, "top_p": 1.0, "k": 4, "n": 20_000, "seed": 0}


def test_exactness_check(shared_client):
    _, _, summary, greedy, details = shared_client.predict(**EXACT_ARGS, api_name="/exactness")
    assert details["sampling"]["tv_speculative"] < 0.05
    assert details["sampling"]["p_value_speculative"] > 0.001
    assert details["pairs"]["p_value_speculative"] > 0.001
    assert details["greedy"]["identical"] and "identical" in greedy
    assert "Total-variation" in summary and "No departure from p found" in summary
    assert "exactly" not in summary.split("**First token")[1]  # a test that did not reject


def test_the_rule_lab_separates_the_exact_rule_from_broken_ones(shared_client):
    p_values = {}
    for rule in ("exact", "always-accept", "resample-from-p", "greedy-draft"):
        *_, summary, _, details = shared_client.predict(
            **EXACT_ARGS, rule=rule, api_name="/exactness"
        )
        p_values[rule] = (
            details["sampling"]["p_value_speculative"],
            details["pairs"]["p_value_speculative"],
        )
        assert details["sampling"]["rule"] == rule
        assert ("do not follow p" in summary) == (rule != "exact")
    assert min(p_values["exact"]) > 0.001
    assert sum(max(p) < 1e-6 for rule, p in p_values.items() if rule != "exact") >= 2, p_values


def test_model_work_runs_one_call_at_a_time(client, shared_client):
    """A step asked for while a long race runs waits for it: every model endpoint shares one
    queue slot, so each run is timed alone."""
    # Settings no other test asks for: this race is stored, and would be replayed to them.
    long = {**GENERATE, "k": 2, "temperature": 0.0, "max_new_tokens": 1000, "fresh": True}
    race = client.submit(**long, api_name="/generate")
    deadline = time.monotonic() + 60
    while not race.outputs() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert race.outputs() and not race.done(), "the long race did not start streaming"
    args = {"prompt": PROMPT, "k": 2, "temperature": 1.0, "seed": 0, "drafter": "model"}
    shared_client.predict(**args, api_name="/step")
    answered = time.monotonic()
    while not race.done() and time.monotonic() < answered + 0.5:  # its last message in flight
        time.sleep(0.02)
    assert race.done()  # the step ran only once the race had finished


def test_step_through_keeps_its_context_per_session(client):
    args = {"prompt": PROMPT, "k": 3, "temperature": 1.0, "seed": 0, "drafter": "model"}
    first = client.predict(**args, api_name="/step")
    second = client.predict(**args, api_name="/step")
    assert len(second[0]) > len(first[0]) and second[0][: len(first[0])] == first[0]
    assert "Draft" in first[1] and "Verify" in first[2] and "Accept" in first[3]
    assert client.predict(api_name="/reset_step")[0] == []
    assert client.predict(**args, api_name="/step")[0] == first[0]  # same seed, same round


@pytest.mark.parametrize(
    "endpoint, changes, message",
    [
        ("/generate", {"prompt": "   "}, "prompt is empty"),
        ("/generate", {"prompt": "\x00\x01"}, "prompt is empty"),
        ("/generate", {"prompt": " ".join(f"w{i}" for i in range(2048))}, "limit is 4,096"),
        ("/generate", {"k": 40}, "K must be between 1 and 16"),
        ("/generate", {"k": "five"}, "K must be a number"),
        ("/generate", {"temperature": 9}, "Temperature must be between"),
        ("/generate", {"top_p": 0}, "Top-p must be above 0"),
        ("/generate", {"top_k": -5}, "Top-k must be between"),
        ("/generate", {"max_new_tokens": 100_000}, "Max new tokens must be between"),
        ("/generate", {"max_new_tokens": 1.5}, "Max new tokens must be a whole number"),
        ("/sweep", {"ks": []}, "at least one K"),
        ("/sweep", {"temperatures": [5.0]}, "Temperature must be between"),
    ],
)
def test_bad_input_comes_back_as_a_clear_error(shared_client, endpoint, changes, message):
    values = {**(GENERATE if endpoint == "/generate" else SWEEP), **changes}
    with pytest.raises(AppError, match=message):
        shared_client.predict(**values, api_name=endpoint)


def test_bad_exactness_input_comes_back_as_a_clear_error(shared_client):
    with pytest.raises(AppError, match="N must be between"):
        shared_client.predict(**{**EXACT_ARGS, "n": 10}, api_name="/exactness")
    with pytest.raises(AppError, match="Rule must be one of"):
        shared_client.predict(**EXACT_ARGS, rule="sometimes", api_name="/exactness")


def test_nan_is_refused_with_a_message(url):
    """gradio_client cannot send NaN (strict JSON), but a raw HTTP caller can."""
    values = [PROMPT, "", 4, False, float("nan"), 1.0, 0, 8, 0, "model", False, 1, True, False,
              "token"]  # fmt: skip
    body = json.dumps({"data": values})  # Python writes the NaN literal
    with httpx.Client(base_url=url, timeout=30) as http:
        event = http.post(
            "gradio_api/call/generate", content=body, headers={"content-type": "application/json"}
        ).json()["event_id"]
        stream = http.get(f"gradio_api/call/generate/{event}").text
    assert "event: error" in stream and "Temperature must be a finite number" in stream


def test_stop_cancels_a_run_before_it_is_recorded(client):
    long = {**GENERATE, "k": 1, "temperature": 0.0, "max_new_tokens": 1024}
    job = client.submit(**long, api_name="/generate")
    deadline = time.monotonic() + 60
    while not job.outputs() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert job.outputs(), "no streamed output from the long run"
    job.cancel()
    table = client.predict(**GENERATE, api_name="/generate")[9]
    assert len(table["data"]) == 1  # only the short run reached the session's results


def test_a_client_that_disconnects_frees_the_worker(url, shared_client):
    """A 64-cell sweep would hold the model slot for many seconds; dropping its stream ends it."""
    sweep = {**SWEEP, "ks": list(range(1, 17)), "temperatures": [0.0, 0.5, 1.0, 1.5]}
    sweep["max_new_tokens"], sweep["fresh"], sweep["judge"] = 64, False, "token"
    with httpx.Client(base_url=url, timeout=30) as http:
        event = http.post("gradio_api/call/sweep", json={"data": list(sweep.values())})
        with http.stream("GET", f"gradio_api/call/sweep/{event.json()['event_id']}") as stream:
            for line in stream.iter_lines():
                if line.startswith("event: generating"):  # the first cell is done
                    break
    start = time.monotonic()
    shared_client.predict(**{**GENERATE, "max_new_tokens": 8}, api_name="/generate")
    assert time.monotonic() - start < 8.0
