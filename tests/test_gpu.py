"""The GPU path, checked without a GPU: ZeroGPU's per-request seconds and sweep cap, the wiring
that hands them to spaces.GPU, timers that wait for a CUDA device, the GPU bench's summary table
and a dry run of scripts/gpu_bench.sh."""

import dataclasses
import functools
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import gradio as gr
import pytest
import torch

from specdemo import bench, bench_report
from specdemo.app import gpu, handlers, ui
from specdemo.app.config import SWEEP_DEFAULTS, parse_run

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Write a Python function that adds two numbers."


# ---------------------------------------------------------------- ZeroGPU's seconds


def test_generation_asks_for_more_time_with_more_tokens_and_a_larger_k():
    fixed = functools.partial(gpu.generate_seconds, PROMPT, auto_k=False)
    short = fixed(k=2, max_new_tokens=32)
    assert short < fixed(k=2, max_new_tokens=256)
    assert short < fixed(k=8, max_new_tokens=32)


def test_prompt_lookup_is_charged_no_draft_steps():
    fixed = functools.partial(gpu.generate_seconds, PROMPT, auto_k=False, k=8, max_new_tokens=512)
    assert fixed(drafter="lookup") < fixed(drafter="model")


def test_automatic_k_is_charged_as_the_largest_k_it_may_choose():
    assert gpu.speculative_seconds(128, "auto") == gpu.speculative_seconds(128, 8)


def test_no_request_asks_for_more_than_an_anonymous_visitor_may():
    longest = gpu.generate_seconds(PROMPT, auto_k=False, k=16, max_new_tokens=1024)
    assert longest == gpu.MAX_SECONDS == 120


def test_step_through_and_the_exactness_check_ask_for_little():
    assert gpu.step_seconds(PROMPT, k=16) <= 15
    assert gpu.exactness_seconds(PROMPT, k=16, n=100_000) <= 45
    assert gpu.step_seconds(PROMPT) < gpu.exactness_seconds(PROMPT) < gpu.generate_seconds(PROMPT)


def test_a_sweep_asks_for_one_cell_per_event():
    """The first event runs the first cell (the smallest K); each later one asks for its own."""
    first = gpu.sweep_seconds(PROMPT, ks=[8, 1])
    assert gpu.sweep_seconds(PROMPT, ks=[8, 1], max_new_tokens=16) < first < gpu.MAX_SECONDS
    plan = types.SimpleNamespace(finished=False, next_config=lambda: parse_run(PROMPT, k=1))
    session = types.SimpleNamespace(sweep=plan)
    assert gpu.sweep_next_seconds(session=session) == first
    plan.finished = True
    assert gpu.sweep_next_seconds(session=session) < first


def test_a_sweep_beyond_the_zero_gpu_cap_is_refused():
    default_cells = len(SWEEP_DEFAULTS["ks"]) * len(SWEEP_DEFAULTS["temperatures"])
    assert default_cells <= gpu.ZERO_GPU_SWEEP_CELLS
    with pytest.raises(ValueError, match=f"at most {gpu.ZERO_GPU_SWEEP_CELLS} cells"):
        gpu.sweep_seconds(PROMPT, ks=[1, 2, 3], temperatures=[0.0, 0.5, 1.0])


def test_bad_input_is_refused_with_the_handlers_message():
    with pytest.raises(ValueError, match="Max new tokens"):
        gpu.generate_seconds(PROMPT, max_new_tokens="many")
    with pytest.raises(ValueError, match="prompt is empty"):
        gpu.step_seconds("  ")


def test_every_model_handler_has_an_estimate_taking_its_arguments():
    for name, estimate in gpu.SECONDS.items():
        handler = getattr(handlers, name)
        fn = functools.partial(handler, None)
        positional = [PROMPT]  # Gradio passes the widget values in the handler's order
        assert 1 <= gpu.per_request(fn, estimate)(*positional) <= gpu.MAX_SECONDS


def test_estimates_bind_positional_arguments_as_gradio_sends_them():
    fn = functools.partial(handlers.generate, None)
    seconds = gpu.per_request(fn, gpu.generate_seconds)
    # prompt, system, k, auto_k, temperature, top_p, top_k, max_new_tokens
    args = [PROMPT, "", 3, False, 0.7, 1.0, 0, 512]
    assert seconds(*args) == gpu.generate_seconds(PROMPT, auto_k=False, k=3, max_new_tokens=512)


# ---------------------------------------------------------------- the wiring


class FakeSpaces:
    """spaces.GPU as ZeroGPU runs it: the duration callable is asked first, then the task."""

    def __init__(self):
        self.asked = []

    def GPU(self, duration):  # noqa: N802 (the spaces API)
        def decorate(fn):
            def run(*args, **kwargs):
                self.asked.append(duration(*args, **kwargs) if callable(duration) else duration)
                return fn(*args, **kwargs)

            return run

        return decorate


def test_on_gpu_leaves_handlers_alone_without_a_gpu(monkeypatch):
    monkeypatch.setattr(ui, "spaces", FakeSpaces())
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    fn = functools.partial(handlers.step, None)
    assert ui.on_gpu(fn, gpu.per_request(fn, gpu.step_seconds)) is fn


def test_on_zero_gpu_each_request_asks_for_its_own_seconds(monkeypatch):
    fake = FakeSpaces()
    monkeypatch.setattr(ui, "spaces", fake)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    fn = functools.partial(lambda pair, prompt, k=4, max_new_tokens=128: "ran", None)
    wrapped = ui.on_gpu(fn, gpu.per_request(fn, gpu.generate_seconds))
    assert wrapped(PROMPT, 2, 64) == "ran"
    assert fake.asked == [gpu.generate_seconds(PROMPT, k=2, max_new_tokens=64)]


def test_on_zero_gpu_a_too_big_sweep_is_refused_before_the_gpu_is_asked(monkeypatch):
    fake = FakeSpaces()
    monkeypatch.setattr(ui, "spaces", fake)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    ran = []
    fn = functools.partial(
        lambda pair, prompt, system="", ks=(), temperatures=(): ran.append(1), None
    )
    wrapped = ui.on_gpu(fn, gpu.per_request(fn, gpu.sweep_seconds))
    with pytest.raises(gr.Error, match="at most"):
        wrapped(PROMPT, "", [1, 2, 3, 4, 6, 8, 12, 16, "auto"], [0.0, 1.0])
    assert not ran and not fake.asked


# ---------------------------------------------------------------- timing and the GPU bench


def test_forward_timer_waits_for_the_cuda_device(monkeypatch):
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    layer = torch.nn.Linear(4, 4)
    timer = bench.ForwardTimer("cuda", layer)
    synced.clear()
    layer(torch.zeros(1, 4))
    timer.remove()
    assert len(synced) == 2 and timer.total > 0  # before and after the forward pass


def bench_result(device: str, rows: list[dict]) -> dict:
    return {
        "machine": {"torch": "2.13.0", "gpu": "NVIDIA H200 (compute capability 9.0)"},
        "models": {"device": device, "precision": "4bit", "dtype": "bfloat16"},
        "step_costs": {"t_step": 0.02, "t_draft": 0.015, "t_verify": {"1": 0.021}},
        "rows": rows,
    }


def test_gpu_summary_has_a_row_per_run_and_fixed_k():
    row = dict.fromkeys(f.name for f in dataclasses.fields(bench.Row))
    rows = [
        {**row, "k": 1, "baseline_tok_s": 40.0, "ours_tok_s": 30.0, "c": 0.75, "verify_cost": 1.05},
        {**row, "k": "auto", "baseline_tok_s": 40.0, "ours_tok_s": 35.0},
    ]
    text = bench_report.summary(
        {"random-pair": bench_result("cuda", rows), "self-draft": bench_result("cuda", rows[:1])}
    )
    lines = text.splitlines()
    assert lines[0].startswith("- random-pair: NVIDIA H200") and "bfloat16" in lines[0]
    table = [line for line in lines if line.startswith("| ")]
    assert table[0].startswith("| run | K | target-only tok/s | speculative tok/s")
    assert [line.split(" | ")[:2] for line in table[1:]] == [
        ["| random-pair", "1"],
        ["| self-draft", "1"],
    ]
    assert "| 0.75 | 1.05 |" in table[1]


@pytest.mark.slow
def test_gpu_bench_dry_run_builds_the_random_pair_and_stops_before_cuda(tmp_path):
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_bench.sh"), "--dry-run", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=180,
        env={
            **os.environ,
            "SPECDEMO_RANDOM_PAIR": str(tmp_path / "pair"),
            "SPECDEMO_CACHE": str(tmp_path / "cache"),
        },
    )
    assert done.returncode == 0, done.stderr
    assert "loaded on the CPU" in done.stdout and "stopping before CUDA" in done.stdout
    assert "--self-draft --draft-head-rows 0" in done.stdout
    for name in ("target", "draft"):
        assert (tmp_path / "pair" / name / "config.json").exists()
    assert not (tmp_path / "out").exists()
    assert time.perf_counter() - start < 90


def test_with_the_spaces_package_the_app_serves_on_a_cpu():
    """With Hugging Face's `spaces` package installed and its decorator applied (as on a GPU
    Space), the app still builds and a handler runs on the CPU: spaces.GPU leaves a function
    as it is off ZeroGPU. In a subprocess, so importing `spaces` touches no other test."""
    pytest.importorskip("spaces")
    code = """
import functools, spaces, torch
from specdemo.app import handlers, ui
from specdemo.models import load_pair
pair = load_pair()  # on the CPU
torch.cuda.is_available = lambda: True  # what ui.on_gpu sees on a GPU Space; not ZeroGPU
assert ui.spaces is spaces
app = ui.build(pair)
fn = next(f.fn for f in app.fns.values() if f.api_name == "step")
assert isinstance(fn, functools.partial) and fn.func is handlers.step
outputs = fn("Write a function that adds two numbers.")
assert outputs[-1].steps == 1
print("served")
"""
    env = {**os.environ, "SPECDEMO_PAIR": "tiny", "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("SPACES_ZERO_GPU", None)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and "served" in done.stdout, done.stderr[-2000:]
