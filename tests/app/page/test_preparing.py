"""The page comes first: a Preparation's stages, its message to early requests, and `python app.py`
serving its preparation panel and refusing API calls clearly until the pair is ready."""

import io
import os
import subprocess
import sys
import threading
import time
import urllib.request
from types import SimpleNamespace

import gradio as gr
import pytest
from conftest import PROMPT, ROOT
from gradio_client.exceptions import AppError
from test_app_client import connect, free_port

from specdemo import models
from specdemo.app.page import handlers, preparing, ui

STEP = {"prompt": PROMPT, "k": 3, "temperature": 1.0, "seed": 0, "drafter": "model"}


def held(stages=(), pair=None):
    """A Preparation whose load reports `stages`, waits for `release.set()` and returns `pair`."""
    release = threading.Event()
    pair = pair or SimpleNamespace(target="t", draft="d", tokenizer="tok", summary=None)

    def load(progress):
        for stage in stages:
            progress(*stage)
        release.wait(10)
        return pair

    return preparing.Preparation(load).start(), release, pair


def wait_until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_an_early_request_is_told_the_stage_under_way():
    preparation, release, pair = held([("convert tiny-target (float)", 0, 1)])
    wait_until(lambda: "| convert tiny-target" in preparation.markdown())
    with pytest.raises(gr.Error, match=r"Still preparing the models \(convert tiny-target"):
        preparation.tokenizer  # noqa: B018
    release.set()
    wait_until(lambda: preparation.ready)
    assert preparation.tokenizer == "tok" and preparation.pair is pair
    with pytest.raises(AttributeError):
        preparation.not_a_pair_field  # noqa: B018


def test_a_byte_stage_inside_another_shows_its_share_done():
    preparation, release, _ = held([("convert m (4bit)", 0, 1), ("assemble m.gguf", 4e8, 1e9)])
    wait_until(lambda: "assemble" in preparation.markdown())
    assert "| convert m (4bit) | running |" in preparation.markdown()
    assert "| ↳ assemble m.gguf | 0.40 of 1.00 GB (40%) |" in preparation.markdown()
    assert "(assemble m.gguf, 40%)" in preparation.waiting_message()  # the innermost stage
    release.set()


def test_the_message_stays_readable_through_the_handlers_error_wrapper():
    preparation, release, _ = held()
    with pytest.raises(gr.Error) as caught, handlers.user_errors():
        preparation.target  # noqa: B018
    assert caught.value.message.startswith("Still preparing the models (")
    release.set()


def test_a_failed_load_is_shown_in_the_panel_and_the_log():
    def load(progress):
        progress("assemble model.gguf", 0, 10**9)
        raise ValueError("the installed chunks hold 12 bytes")

    log = io.StringIO()
    preparation = preparing.Preparation(load, console=models.ProgressBars(log))
    preparation.run()
    assert preparation.failed and not preparation.ready
    assert "could not be loaded" in preparation.markdown()
    assert "the installed chunks hold 12 bytes" in preparation.markdown()
    with pytest.raises(gr.Error, match="could not be loaded.*12 bytes"):
        preparation.draft  # noqa: B018
    assert "Traceback" in log.getvalue() and "could not be loaded (ValueError" in log.getvalue()


def test_the_log_gets_each_stage_the_warm_up_and_ready_in(monkeypatch):
    monkeypatch.setenv("SPECDEMO_PAIR", "tiny")
    monkeypatch.setenv("SPECDEMO_PRECISION", "fp32")
    log = io.StringIO()
    preparation = preparing.Preparation(console=models.ProgressBars(log))
    preparation.run()
    lines = log.getvalue().splitlines()
    assert "warm up ..." in lines and any(line.startswith("warm up: done in") for line in lines)
    assert any(line.startswith("load tiny-target: done in") for line in lines)
    assert lines[-1].startswith("specdemo: ready in ")
    assert "| warm up | done |" in preparation.markdown()


def components(app) -> dict:
    """The page's components by elem_id, as the browser receives them."""
    return {c["props"]["elem_id"]: c for c in app.config["components"] if c["props"].get("elem_id")}


def test_the_page_shows_the_panel_then_the_tabs(pair):
    preparation, release, _ = held(pair=pair)
    page = components(ui.build(preparation))
    assert page["tabs"]["props"]["visible"] is False and "preparing" in page
    model_info, details, panel, shown, timer = ui.poll(preparation)
    assert "Preparing the models" in panel and not isinstance(shown, gr.Column)
    release.set()
    wait_until(lambda: preparation.ready)
    model_info, details, panel, shown, timer = ui.poll(preparation)
    assert "tiny-target" in model_info and "loaded in" in details and not panel.visible
    assert shown.visible and not timer.active


def test_a_ready_preparation_builds_the_plain_app(pair):
    preparation = preparing.Preparation(lambda progress: pair)
    preparation.run()
    page = components(ui.build(preparation))
    assert page["tabs"]["props"]["visible"] is True and "preparing" not in page
    assert "tiny-target" in page["model-info"]["props"]["value"]


def test_app_py_serves_the_page_first_and_the_models_after(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {
        **os.environ,
        "SPECDEMO_PAIR": "tiny",
        "SPECDEMO_PRECISION": "fp32",
        "SPECDEMO_CACHE": str(tmp_path / "cache"),  # empty: the tiny pair is built
        "SPECDEMO_PREPARE_DELAY": "6",
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
    }
    log = tmp_path / "app.log"  # read through its own handle: the app's writes keep their offset
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "app.py"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            try:
                with urllib.request.urlopen(url, timeout=2) as page:
                    assert page.status == 200
                break
            except OSError:
                time.sleep(0.2)
        with urllib.request.urlopen(url + "config", timeout=5) as config:
            assert '"preparing"' in config.read().decode()
        client = connect(url, tmp_path)
        try:
            assert "ready in" not in log.read_text()
            with pytest.raises(AppError, match="Still preparing the models"):
                client.predict(**STEP, api_name="/step")
            deadline = time.monotonic() + 120
            while "ready in" not in log.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            text, *_ = client.predict(**STEP, api_name="/step")
            assert text
        finally:
            client.close()
    finally:
        proc.kill()
        proc.wait(timeout=15)
