"""runtime/modes.py: "auto" keeps the mode its measurement times fastest, for the draft and the
target alike, skips a mode whose capture failed, and measures once per model and role."""

import pytest
from conftest import tiny_model

from specdemo.runtime import modes, steps

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: one thread (conftest)


class FakeStopwatch:
    """A clock that moves only when a step object is charged for its work (``charged``)."""

    now = 0.0

    def __init__(self, device):
        self.last = FakeStopwatch.now

    def lap(self) -> float:
        elapsed, self.last = FakeStopwatch.now - self.last, FakeStopwatch.now
        return elapsed


def charged(method, per_row: dict[str, float]):
    """`method` of a step object, charging the fake clock per_row[its kind] per token it feeds
    (once per outer call: a static step's long run calls the eager one inside)."""

    def run(self, tokens, *args, **kwargs):
        outer = not getattr(self, "_charging", False)
        self._charging = True
        try:
            return method(self, tokens, *args, **kwargs)
        finally:
            if outer:
                self._charging = False
                FakeStopwatch.now += per_row[self.kind] * len(tokens)

    return run


@pytest.mark.parametrize("role", ["draft", "target"])
@pytest.mark.parametrize("winner", ["eager", "static"])
def test_auto_keeps_the_mode_a_fake_clock_times_fastest(monkeypatch, role, winner):
    """Real step objects on a tiny model, timed on a clock where `winner`'s passes cost a third
    of the other mode's: each mode wins once, for either role."""
    per_row = {"eager": 3.0, "static": 3.0}
    per_row[winner] = 1.0
    for cls in (steps.EagerStep, steps.StaticStep):
        for name in ("run", "verify"):
            if name in vars(cls):
                monkeypatch.setattr(cls, name, charged(vars(cls)[name], per_row))
    monkeypatch.setattr(modes, "Stopwatch", FakeStopwatch)
    model = tiny_model("qwen2", seed=5)
    if role == "draft":
        fastest = modes.fastest_draft_step(model, None, ("eager", "static"), repeats=2)
    else:
        fastest = modes.fastest_target_step(model, ("eager", "static"), repeats=2)
    assert fastest == winner
    assert modes.known_modes(model) == {role: winner}


@pytest.mark.parametrize("role", ["draft", "target"])
def test_auto_skips_a_failed_capture_and_measures_once_per_model(monkeypatch, role):
    def runner(model, mode):
        return type("Runner", (), {"kind": mode, "problem": model.costs[mode][1]})()

    def timed_draft(model, context, head, mode, repeats=5):
        return model.costs[mode][0], runner(model, mode)

    def timed_passes(model, context, widths, mode, repeats=5):
        return {n: model.costs[mode][0] / len(widths) for n in widths}, runner(model, mode)

    class Model:  # a stand-in the measurement never runs: the timers answer for it
        def __init__(self, costs):
            self.costs = costs

    monkeypatch.setattr(modes, "timed_draft_step", timed_draft)
    monkeypatch.setattr(modes, "timed_passes", timed_passes)
    monkeypatch.setattr(modes, "synthetic_context", lambda *models: [1, 2, 3])
    fastest = modes.fastest_draft_step if role == "draft" else modes.fastest_target_step
    captured_faster = Model({"eager": (0.030, ""), "graph": (0.003, "")})
    eager_faster = Model({"eager": (0.002, ""), "graph": (0.003, "")})
    capture_failed = Model({"eager": (0.030, ""), "graph": (0.003, "RuntimeError: capture")})
    assert fastest(captured_faster) == "graph"
    assert fastest(eager_faster) == "eager"
    assert fastest(capture_failed) == "eager"
    captured_faster.costs = {"eager": (0.001, ""), "graph": (0.003, "")}
    assert fastest(captured_faster) == "graph"  # measured once per model
