"""The load each half of a race ran under, from timings made up here against a made-up profile,
and the sentence beside the speedup exactly when the two are more than LOAD_GAP apart."""

from dataclasses import replace

import pytest

from specdemo.app.config import parse_run
from specdemo.app.generate import comparison, costs, loads, race
from specdemo.app.generate.run_record import RunRecord
from specdemo.cost.theory import StepCosts
from specdemo.decode.rounds import Stats

# A plain step of 10 ms; a verify of 2 tokens 12 ms, of 3 tokens 15 ms.
PROFILE = StepCosts(t_step=0.010, t_draft=0.004, t_verify={1: 0.012, 2: 0.015})


def halves(spec_load: float, target_load: float) -> tuple[race.SpecRun, race.TargetRun]:
    """A finished race of 4 tokens whose verify passes (two of 3 rows, one of 2) took
    `spec_load` times their price, and whose target alone's steps after the prefill took
    `target_load` times a plain step."""
    stats = Stats(rounds=3, new_tokens=4, target_passes=4)
    stats.verify_times = {3: [0.015 * spec_load] * 2, 2: [0.012 * spec_load]}
    spec = race.SpecRun(stats=stats, tokens=[1, 2, 3, 4], seconds=0.2, profile=PROFILE)
    steps = [0.5, *[0.010 * target_load] * 3]  # the first holds the prompt's prefill
    target = race.TargetRun(tokens=[1, 2, 3, 4], step_seconds=steps, seconds=sum(steps))
    return spec, target


def test_each_halfs_load_is_its_target_passes_as_timed_over_their_profiled_price():
    spec, target = halves(1.5, 2.2)
    assert loads.spec_load(spec) == pytest.approx(1.5)
    assert loads.target_load(target, PROFILE) == pytest.approx(2.2)  # the prefill left out
    spec.stats.verify_times = {3: [0.030], 2: [0.012]}  # 2× and 1×: a ratio of sums
    assert loads.spec_load(spec) == pytest.approx(0.042 / 0.027)
    spec.stats.pass_times = {3: [0.015], 2: [0.012]}  # the passes alone, without the judge
    assert loads.spec_load(spec) == pytest.approx(1.0)
    assert loads.spec_load(replace(spec, profile=None)) is None
    assert loads.spec_load(race.SpecRun(profile=PROFILE)) is None
    assert loads.target_load(target, None) is None
    assert loads.target_load(race.TargetRun(step_seconds=[0.5]), PROFILE) is None


@pytest.mark.parametrize(
    "spec, target, says",
    [
        (1.5, 2.2, "the target alone ran on a busier machine and the measured speedup sits above"),
        (1.3, 1.0, "the speculative run ran on a busier machine and the measured speedup sits "
                   "below"),
        (1.0, 1.21, "above"),
        (1.0, 1.19, ""),
        (1.19, 1.0, ""),
        (1.0, 1.0, ""),
        (None, 2.0, ""),
        (1.0, None, ""),
    ],
)  # fmt: skip
def test_the_sentence_appears_exactly_when_the_loads_are_more_than_a_fifth_apart(
    spec, target, says
):
    sentence = loads.uneven_loads(spec, target)
    assert bool(sentence) == bool(says) and says in sentence
    if sentence:
        assert f"took {spec:.2f}× their profiled time" in sentence
        assert f"the target alone's steps {target:.2f}×" in sentence


def test_the_race_table_says_uneven_loads_beside_the_speedup_not_under_a_fold():
    config = parse_run("x", k=2, temperature=1.0)
    spec, target = halves(1.5, 2.2)
    table = comparison.comparison_markdown(spec, target, config)
    speedup = table.index("| Speedup |")
    uneven = table.index("**Uneven loads:** the speculative run's target passes took 1.50×")
    assert speedup < uneven < table.index("The two answers are identical")
    assert "<details>" not in table
    even = comparison.comparison_markdown(*halves(1.5, 1.6), config)
    assert "Uneven loads" not in even and "| Speedup |" in even


def test_the_record_keeps_both_loads_and_the_cost_note_says_them_beside_the_curves():
    config = parse_run("x", k=2, temperature=1.0)
    record = RunRecord.of(config, *halves(1.5, 2.2))
    assert (record.spec_load, record.target_load) == pytest.approx((1.5, 2.2))
    note = costs.cost_note([record])
    shown = note.split("<details>")[0]
    assert shown.startswith("**Why the two curves differ**") and "**Uneven loads:**" in shown
    even = costs.cost_note([RunRecord.of(config, *halves(1.5, 1.6))])
    assert "Uneven loads" not in even
