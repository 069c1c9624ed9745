"""profile.py: step costs timed on the running machine, a draft step as its drafter runs it."""

import torch
from conftest import tiny_model

from specdemo import profile


def test_a_draft_step_is_timed_in_the_mode_the_drafter_runs(monkeypatch):
    """costs_for keeps one draft step per draft, head and step mode, each timed through that
    mode's step object (static: fixed buffers), and the target's steps once for all."""
    target, draft = tiny_model("qwen2", seed=0), tiny_model("qwen2", seed=1)
    kinds = []
    real = profile.make_draft_step

    def spy(model, head, step):
        kinds.append(step)
        return real(model, head, step)

    monkeypatch.setattr(profile, "make_draft_step", spy)
    eager = profile.costs_for(target, draft, None, "eager")
    static = profile.costs_for(target, draft, None, "static")
    assert kinds == ["eager", "static"] and eager.t_draft > 0 and static.t_draft > 0
    assert (eager.t_step, eager.t_verify) == (static.t_step, static.t_verify)
    assert profile.costs_for(target, draft, None, "static") == static and len(kinds) == 2


def test_the_captured_step_is_measured_on_cuda_only():
    target, draft = tiny_model("qwen2", seed=0), tiny_model("qwen2", seed=1)
    assert draft.device == torch.device("cpu")
    assert profile.captured_draft_seconds(target, draft) is None
