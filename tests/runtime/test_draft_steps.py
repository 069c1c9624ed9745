"""The draft step modes compute the same logits; the static one is ready for a CUDA graph."""

import pytest
import torch
from conftest import HostReads, replay_against_eager, tiny_model

import specdemo
from specdemo.draft.drafters import ModelDrafter
from specdemo.judge.sampling import SamplingConfig
from specdemo.runtime import steps
from specdemo.runtime.steps import (
    EagerStep,
    StaticStep,
    make_draft_step,
    resolve_draft_step,
)


@pytest.fixture(scope="module")
def draft():
    return tiny_model("qwen2", seed=1, layers=2)


def feed_and_roll_back(step, script):
    """Run a script of ("run", tokens) and ("crop", n); the logits of every run."""
    out = []
    for op, arg in script:
        if op == "run":
            out.append(step.run(arg))
        else:
            step.crop(arg)
    return out


SCRIPT = [
    ("run", list(range(3, 12))),  # a prompt
    ("run", [20]),
    ("run", [21]),
    ("run", [22]),
    ("crop", 2),  # two drafts rejected
    ("run", [30, 31]),  # the target's token and the next context token
    ("run", [40]),
    ("crop", 1),
    ("run", [41]),
]


@torch.inference_mode()
def test_static_step_gives_the_eager_logits_through_rollbacks(draft):
    eager = feed_and_roll_back(EagerStep(draft), SCRIPT)
    static = feed_and_roll_back(StaticStep(draft, capacity=32), SCRIPT)
    for e, s in zip(eager, static, strict=True):
        assert e.shape == s.shape == (1, 256)
        torch.testing.assert_close(s, e, atol=1e-5, rtol=1e-5)


@torch.inference_mode()
def test_a_static_step_that_fills_up_starts_over_larger(draft):
    step = StaticStep(draft, capacity=8)
    assert step.fits(8)
    step.run(list(range(8)))
    with pytest.raises(ValueError, match="do not fit"):
        step.run([9])
    assert not step.fits(20)  # started over: the drafter must feed everything again
    assert (step.capacity, step.length) == (32, 0)
    again = step.run(list(range(20)))
    torch.testing.assert_close(again, EagerStep(draft).run(list(range(20))))


def greedy_run(target, draft, prompt, step):
    drafter = ModelDrafter(draft, SamplingConfig(0.0), step=step)
    rounds = list(
        specdemo.speculative_generate(
            target, drafter, prompt, k=3, sampling=SamplingConfig(0.0), max_new_tokens=40
        )
    )
    return [t for r in rounds for t in r.tokens], [r.n_accepted for r in rounds]


def test_drafting_through_a_static_step_changes_nothing_but_speed(pair, monkeypatch):
    """Same greedy tokens and the same accepted drafts round by round, also across a restart of
    the static cache (capacity 16 for a 10-token prompt and 40 new tokens)."""
    monkeypatch.setattr(steps, "FIRST_CAPACITY", 16)
    prompt = pair.tokenizer("def is_prime(n):\n    if n")["input_ids"]
    eager = greedy_run(pair.target, pair.draft, prompt, "eager")
    static = greedy_run(pair.target, pair.draft, prompt, "static")
    assert static == eager
    assert 0 < sum(eager[1]) < 3 * len(eager[1])  # drafts kept and rejected: rollbacks ran


@torch.inference_mode()
def test_the_static_one_token_step_is_capturable(draft):
    """What a CUDA graph needs, checked on the CPU: the one-token step reads nothing back to the
    host and writes into the same buffers every time (a dynamic cache reallocates them)."""
    static, eager = StaticStep(draft, capacity=64), EagerStep(draft)
    for step in (static, eager):
        step.run(list(range(10)))
    static_keys = static.cache.layers[0].keys.data_ptr()
    with HostReads() as mode:
        for token in range(5):
            static.run(torch.tensor([token], device=draft.device))
            static.crop(1) if token % 2 else None
    assert mode.reads == []
    assert static.cache.layers[0].keys.data_ptr() == static_keys
    eager_keys = eager.cache.layers[0].keys.data_ptr()
    eager.run([3])
    assert eager.cache.layers[0].keys.data_ptr() != eager_keys


def test_auto_runs_eager_off_cuda_and_is_measured_on_cuda(monkeypatch, draft):
    monkeypatch.delenv(steps.ENV_DRAFT_STEP, raising=False)
    assert resolve_draft_step(None, "cpu") == resolve_draft_step("auto", "cpu") == "eager"
    assert resolve_draft_step(None, "cuda:0") == "auto"  # make_draft_step measures it
    assert make_draft_step(draft, None, "auto").kind == "eager"


def test_the_step_mode_comes_from_the_argument_then_the_environment(monkeypatch, draft):
    monkeypatch.delenv(steps.ENV_DRAFT_STEP, raising=False)
    monkeypatch.setenv(steps.ENV_DRAFT_STEP, "static")
    assert resolve_draft_step(None, "cpu") == "static"
    assert resolve_draft_step("eager", "cpu") == "eager"
    assert resolve_draft_step("graph", "cpu") == "static"  # a graph needs CUDA
    assert resolve_draft_step("graph", "cuda:0") == "graph"
    assert make_draft_step(draft, None, "graph").kind == "static"
    with pytest.raises(ValueError, match="eager, static, graph"):
        resolve_draft_step("compiled", "cpu")
    with pytest.raises(ValueError, match="CUDA"):
        StaticStep(draft, graph=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA graph needs a GPU")
@torch.inference_mode()
def test_a_captured_step_replays_the_eager_logits():
    model = tiny_model("qwen2", seed=1, layers=2).to("cuda")
    script = SCRIPT + [("run", [50]), ("run", [51]), ("crop", 1), ("run", [52])]
    graph = StaticStep(model, graph=True, capacity=64)
    replayed = feed_and_roll_back(graph, script)
    assert graph.problem == "" and 1 in graph.graphs and graph.capture_seconds > 0
    for e, g in zip(feed_and_roll_back(EagerStep(model), script), replayed, strict=True):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


def test_a_replayed_step_follows_eager_steps_and_a_frozen_position_is_caught(draft):
    """The draft step as a graph replays it (traced once, every Python value frozen) gives the
    eager step's logits and cache over 32 steps; the same check fails a step whose position is
    a Python int, which a capture would replay at one slot forever."""
    logits, keys = replay_against_eager(draft)
    assert logits < 1e-5 and keys < 1e-5, (logits, keys)
    logits, keys = replay_against_eager(draft, frozen=True)
    assert logits > 100 * 1e-5 and keys > 0.1, (logits, keys)
