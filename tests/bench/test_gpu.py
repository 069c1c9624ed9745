"""The GPU path, checked without a GPU: timers that wait for a CUDA device, the GPU bench's
summary table, a dry run of scripts/gpu_bench.sh, and the app with the `spaces` package
installed (ZeroGPU itself: tests/app/page/test_zerogpu.py)."""

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from specdemo.bench import grid as bench
from specdemo.bench import report as bench_report
from specdemo.bench import runs as bench_runs

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Write a Python function that adds two numbers."


# ---------------------------------------------------------------- timing and the GPU bench


def test_forward_timer_waits_for_the_cuda_device(monkeypatch):
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    layer = torch.nn.Linear(4, 4)
    timer = bench_runs.ForwardTimer("cuda", layer)
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
import spaces
from specdemo.app.page import gpu_calls, handlers, ui
from specdemo.models import load_pair
pair = load_pair()  # on the CPU
assert gpu_calls.spaces is spaces
app = ui.build(pair)  # wraps the GPU functions in spaces.GPU, as on a Space
assert "/step" in app.get_api_info()["named_endpoints"]
outputs = handlers.step(pair, "Write a function that adds two numbers.")
assert outputs[-1].rounds == 1
print("served")
"""
    env = {**os.environ, "SPECDEMO_PAIR": "tiny", "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("SPACES_ZERO_GPU", None)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and "served" in done.stdout, done.stderr[-2000:]
