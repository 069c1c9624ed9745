"""Both halves of a race stream at one cadence in seconds of compute, so a page that pays for
every update it draws loads them alike. Every clock here is fake: the runs' seconds are what the
test says each pass and each update cost, never the machine's."""

from types import SimpleNamespace

import pytest
from conftest import PROMPT

from specdemo.app.generate import race
from specdemo.app.generate.cadence import Cadence
from specdemo.app.generate.loads import LOAD_GAP
from specdemo.app.page import jobs, work

DRAWING = 0.06  # seconds of compute an update's drawing takes from the passes after it


class Machine:
    """One CPU the models and the page share: a pass takes its own seconds plus whatever
    drawing the page still owes, as a browser beside the app takes cores from the next pass."""

    def __init__(self):
        self.owed = 0.0

    def passes(self, n: int, seconds: float):
        """A growing run after each of `n` passes of `seconds` each, timed as the engine times
        it (``seconds``) and as the profile would price it (``priced``)."""
        run = SimpleNamespace(seconds=0.0, priced=0.0)
        for _ in range(n):
            run.seconds += seconds + self.owed
            run.priced += seconds
            self.owed = 0.0
            yield run

    def draw(self) -> None:
        self.owed += DRAWING


def race_on(machine: Machine, stream, halves) -> list[SimpleNamespace]:
    """Each half, `(passes, seconds a pass)`, streamed by `stream` to a page that draws every
    update it gets: its updates a second of compute, and its load (timed over priced)."""
    measured = []
    for n, seconds in halves:
        drawn = []
        for update in stream(machine.passes(n, seconds)):
            machine.draw()
            drawn.append(update)
        run = drawn[-1][0]
        measured.append(
            SimpleNamespace(rate=len(drawn) / run.seconds, load=run.seconds / run.priced)
        )
    return measured


def every_pass(runs):
    """The cadence in tokens: an update after every pass (what a pause shorter than a pass
    gives), and the last again."""
    run = None
    for run in runs:
        yield run, False
    yield run, True


# A learner's laptop (26 rounds of 0.4 s against 128 steps of 0.1 s), a fast machine whose
# passes are all shorter than a frame, and a target whose steps cost most of a round.
HALVES = [[(26, 0.4), (128, 0.1)], [(160, 0.05), (512, 0.02)], [(64, 0.2), (128, 0.15)]]


@pytest.mark.parametrize("halves", HALVES)
def test_both_halves_get_the_same_updates_a_second_of_compute_and_so_the_same_load(halves):
    """Within 10% at 27 to 97 updates a half, where ±1 update is 1 to 4%: a cadence that sent
    one half a fifth more updates a second would fail."""
    spec, target = race_on(Machine(), Cadence().frames, halves)
    assert target.rate == pytest.approx(spec.rate, rel=0.1)
    assert max(spec.load, target.load) / min(spec.load, target.load) < LOAD_GAP


def test_a_cadence_in_tokens_loads_the_half_with_more_passes_more():
    """The control: an update a pass sends the target alone an update a token, four times the
    speculative run's a second of compute, and its load ends more than LOAD_GAP above."""
    spec, target = race_on(Machine(), every_pass, HALVES[0])
    assert target.rate > 2 * spec.rate
    assert target.load / spec.load > LOAD_GAP


def test_one_update_a_frame_on_a_fixed_grid_the_first_at_once_and_the_last_always():
    runs = [SimpleNamespace(seconds=k / 10) for k in range(1, 11)]
    pace = Cadence(0.25)
    shown = [(run.seconds, last) for run, last in pace.frames(runs)]
    assert shown == [(0.1, False), (0.3, False), (0.5, False), (0.8, False), (1.0, False),
                     (1.0, True)]  # fmt: skip
    assert pace.frame == 0.25  # five updates in one second: no slower than a frame
    assert list(pace.frames([])) == []


def test_a_half_whose_passes_outlast_a_frame_sets_the_next_halfs_pace():
    slow = [SimpleNamespace(seconds=0.5 * k) for k in range(1, 11)]
    pace = Cadence(0.25)
    assert sum(not last for _, last in pace.frames(slow)) == 10  # every round: each is a frame
    assert pace.frame == 0.5
    steps = [SimpleNamespace(seconds=0.125 * k) for k in range(1, 41)]
    # The first at once, then one in each 0.5 s of the 5 s.
    assert sum(not last for _, last in pace.frames(steps)) == 11


def test_the_race_streams_both_halves_at_one_cadence(pair, monkeypatch):
    """``work.run_race`` hands both halves one ``Cadence``: fake runs of 0.4 s rounds then 0.1 s
    steps reach the caller at the same updates a second of compute."""
    machine = Machine()
    monkeypatch.setattr(race, "run_speculative", lambda *_: machine.passes(26, 0.4))
    monkeypatch.setattr(race, "run_target", lambda *_: machine.passes(128, 0.1))
    request = jobs.parse_race(pair, PROMPT, max_new_tokens=8)
    items = [(kind, run) for kind, run, _ in work.run_race(pair, request) if kind != "measured"]
    rates = {
        kind: sum(k == kind for k, _ in items) / run.seconds for kind, run in dict(items).items()
    }
    assert set(rates) == {"spec", "target"}
    assert rates["target"] == pytest.approx(rates["spec"], rel=0.1)
