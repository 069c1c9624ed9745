"""specdemo.bench.grid, checked on the CPU with a CUDA device faked: transformers' runs (target
alone and assisted) and specdemo's wait for the device the same way, around every model pass."""

import copy
import json
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT

from specdemo.bench import grid as bench
from specdemo.bench import report as bench_report
from specdemo.bench import runs as bench_runs
from specdemo.judge.sampling import SamplingConfig
from specdemo.runtime.lm import Stopwatch, head_over

ARGS = SimpleNamespace(adaptive=False, draft_head_rows=None)  # the CLI's bench arguments used


class CudaStopwatch(Stopwatch):
    """A Stopwatch that synchronises as it would on CUDA, for tensors that stay on the CPU."""

    def __init__(self, device):
        super().__init__("cuda")
        self.device = device


@pytest.fixture
def log(pair, monkeypatch):
    """A run's events in order: "F" as a forward pass of the target or the draft starts, "S"
    for each torch.cuda.synchronize; the bench's timers wait as on a CUDA device."""
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("S"))
    monkeypatch.setattr(bench_runs, "Stopwatch", CudaStopwatch)
    # run_hf sets the draft's assisted-generation settings; the shared pair keeps its own.
    monkeypatch.setattr(
        pair.draft, "generation_config", copy.deepcopy(pair.draft.generation_config)
    )
    # Registered before the bench's hooks, so a pass's "F" comes before the sync it triggers.
    models = (pair.target, pair.draft)
    handles = [m.register_forward_pre_hook(lambda *_: events.append("F")) for m in models]
    yield events
    for h in handles:
        h.remove()


def each_pass_between_syncs(events: list[str]) -> bool:
    """A sync just before and just after every pass: S…S F SS F SS … F S…S."""
    text, passes = "".join(events), events.count("F")
    bracketed = text.startswith("S") and text.endswith("S")
    return passes > 2 and bracketed and text.strip("S") == "F" + "SSF" * (passes - 1)


@pytest.mark.parametrize("k", [None, 3], ids=["target alone", "assisted"])
def test_transformers_runs_wait_for_the_device_around_every_pass(pair, log, k):
    ids = pair.tokenizer("def add(a, b):")["input_ids"]
    n, seconds, tokens = bench.run_hf(pair, ids, SamplingConfig(0.0), 8, 0, k)
    assert n > 0 and seconds > 0 and len(tokens) == n
    assert each_pass_between_syncs(log), "".join(log)


def test_specdemo_runs_wait_for_the_device_around_every_pass(pair, log):
    ids = pair.tokenizer("def add(a, b):")["input_ids"]
    stats, _ = bench.run_ours(pair, ids, 3, SamplingConfig(0.0), 8, 0, ARGS)
    assert stats.new_tokens > 0
    assert each_pass_between_syncs(log), "".join(log)


def test_the_engines_plain_loop_waits_for_the_device_around_every_pass(pair, log):
    ids = pair.tokenizer("def add(a, b):")["input_ids"]
    assert bench.run_plain(pair, ids, SamplingConfig(0.0), 8, 0) > 0
    assert "".join(log).count("F") == 8 and each_pass_between_syncs(log), "".join(log)


def test_coverage_counts_the_target_tokens_a_draft_head_holds(pair):
    head = head_over(pair.draft, torch.tensor([3, 5, 8, 13]))
    assert bench.coverage([3, 4, 5, 5, 100], head) == pytest.approx(3 / 5)
    assert bench.coverage([3, 4], None) is None  # the full head holds every token


def test_the_auto_table_shows_each_set_with_its_plain_loop_and_the_heads_coverage():
    row = dict(prompt_set="prose", temperature=1.0, k="auto", baseline_tok_s=5.0, ours_tok_s=5.5,
               speedup=1.1, alpha=0.7, tokens_per_pass=1.8, bookkeeping=0.004)  # fmt: skip
    result = {
        "rows": [row, {**row, "k": 2}],
        "plain_loop": [{"prompt_set": "prose", "temperature": 1.0, "ratio": 0.99}],
        "draft_head": {"rows": 32768, "coverage": {"prose": 0.975}},
    }
    text = bench_report.auto_markdown(result)
    assert "| prose | 1 | 5.00 | 5.50 | **1.10×** | 0.70 | 1.80 | 0.4% | 0.99× |" in text
    assert text.count("| prose |") == 1  # fixed-K rows are not automatic K's
    assert "32,768-row ranked head holds, without the text's ids: prose 97.5%." in text


def test_benchmarks_shows_the_automatic_k_run_as_its_json_gives():
    """The automatic-K table kept with the older runs is ``auto_markdown`` of the raw JSON beside
    it, which names the machine it ran on."""
    result = json.loads((ROOT / "docs" / "bench" / "auto-vocab.json").read_text())
    assert {"cpu", "cpu_capability", "threads", "torch", "date"} <= set(result["machine"])
    history = (ROOT / "docs" / "bench" / "HISTORY.md").read_text(encoding="utf-8")
    assert bench_report.auto_markdown(result) in history
