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


def test_the_profiled_draft_step_runs_the_head_the_drafter_runs(monkeypatch):
    """The draft step is timed with the drafter's own head: the same fixed rows (shared, not
    copied) and as many spare rows for the text's ids, whose matmul a step pays filled or not."""
    from specdemo.drafters import make_drafter
    from specdemo.sampling import SamplingConfig

    target, draft = tiny_model("qwen2", seed=0), tiny_model("qwen2", seed=1)
    model = make_drafter("model", draft, SamplingConfig(1.0), None, "cpu", head_rows=64)
    timed = []
    monkeypatch.setattr(
        profile, "draft_seconds", lambda d, context, head, step: timed.append(head) or 0.01
    )
    profile.costs_for(target, draft, model.head_rows, model.step.kind)
    [head] = timed
    assert (head.rows, head.spare) == (model.head.rows, model.head.spare) and head.spare > 0
    assert head.weight.data_ptr() == model.head.weight.data_ptr()
    assert torch.equal(head.all_ids[: head.rows], model.head.all_ids[: model.head.rows])
