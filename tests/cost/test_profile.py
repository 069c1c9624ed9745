"""profile.py: step costs timed on the running machine, a draft step as its drafter runs it."""

import torch
from conftest import tiny_model

from specdemo.cost import profile
from specdemo.runtime import modes


def test_a_draft_step_is_timed_in_the_mode_the_drafter_runs(monkeypatch):
    """costs_for keeps one draft step per draft, head and step mode, each timed through that
    mode's step object (static: fixed buffers), and the target's steps once for all."""
    target, draft = tiny_model("qwen2", seed=0), tiny_model("qwen2", seed=1)
    kinds = []
    real = modes.make_draft_step

    def spy(model, head, step):
        kinds.append(step)
        return real(model, head, step)

    monkeypatch.setattr(modes, "make_draft_step", spy)
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
    from specdemo.draft.drafters import make_drafter
    from specdemo.judge.sampling import SamplingConfig

    target, draft = tiny_model("qwen2", seed=0), tiny_model("qwen2", seed=1)
    model = make_drafter("model", draft, SamplingConfig(1.0), None, "cpu", head_rows=64)
    timed = []
    monkeypatch.setattr(
        profile, "timed_draft_step", lambda d, context, head, step: (0.01, timed.append(head))
    )
    profile.costs_for(target, draft, model.head_rows, model.step.kind)
    [head] = timed
    assert (head.rows, head.spare) == (model.head.rows, model.head.spare) and head.spare > 0
    assert head.weight.data_ptr() == model.head.weight.data_ptr()
    assert torch.equal(head.all_ids[: head.rows], model.head.all_ids[: model.head.rows])


def test_the_targets_passes_are_timed_in_the_mode_the_request_runs_them(monkeypatch):
    """On a fake clock where the static cache's passes take half the eager ones: automatic K for
    a request whose target runs static is priced on static passes, each mode timed once and
    kept apart; a profile timed eager would price that request at twice its passes."""
    from specdemo.decode import engine
    from specdemo.draft.drafters import LookupDrafter

    unit = {"eager": 2.0, "static": 1.0}  # seconds per row of a pass, by mode
    timed = []

    def fake(model, context, widths, mode="eager", repeats=5):
        timed.append(mode)
        return {n: unit[mode] * n for n in widths}, None

    monkeypatch.setattr(profile, "timed_passes", fake)
    target = tiny_model("qwen2", seed=0)
    static = engine.auto_k(target, LookupDrafter(), target_step="static").costs
    assert (static.t_step, static.pass_seconds(5)) == (1.0, 5.0)
    eager = engine.profile_of(target, LookupDrafter(), "eager")
    assert (eager.t_step, eager.pass_seconds(5)) == (2.0, 10.0)
    assert engine.profile_of(target, LookupDrafter(), "static") == static
    assert timed.count("static") == timed.count("eager") == 2  # the chain's widths, the copies'


def test_the_fastest_modes_travel_to_a_later_call_with_the_profiles():
    """A ZeroGPU call is a fork that keeps nothing: what "auto" measured fastest for the target
    and the draft goes back to the caller and on to the next call, with the profiles timed in
    that mode."""
    target, draft = tiny_model("qwen2", seed=0), tiny_model("qwen2", seed=1)
    modes.fastest_mode(target, "target", lambda: "graph")
    modes.fastest_mode(draft, "draft", lambda: "eager")
    carried = profile.measured_for(target, draft)
    modes._fastest.clear()  # the next call starts bare
    profile.restore_measured(target, draft, carried)
    assert modes.fastest_mode(target, "target", lambda: "measured again") == "graph"
    assert modes.fastest_mode(draft, "draft", lambda: "measured again") == "eager"
    modes._fastest.clear()
