"""The load each half of a race ran under, and the sentence beside the speedup where they differ.

A half's load is its target passes as timed over the same passes at the step profile's price
(``StepCosts.pass_seconds``): 1 on the machine the profile saw, 2 where every pass took twice as
long. Both halves run the same target, so their loads compare like with like; the draft's steps
are left out, since the engine's include their sampling and the profile's do not. The loads are
ratios of sums, not medians, because the speedup is a ratio of whole runs' times.
"""

from specdemo.app.generate.race import SpecRun, TargetRun
from specdemo.cost.theory import StepCosts

LOAD_GAP = 1.2  # one half's load this many times the other's: the speedup carries the difference


def spec_load(spec: SpecRun) -> float | None:
    """The speculative run's verify passes as timed over their price at each pass's rows: the
    passes alone where the engine timed them apart from the judge (``Stats.pass_times``), as the
    profile timed them; None without a profile or a timed pass."""
    times, profile = spec.stats.pass_times or spec.stats.verify_times, spec.profile
    if profile is None or not any(times.values()):
        return None
    priced = sum(len(seconds) * profile.pass_seconds(rows) for rows, seconds in times.items())
    return sum(sum(seconds) for seconds in times.values()) / priced


def target_load(target: TargetRun, profile: StepCosts | None) -> float | None:
    """The target alone's steps after the first (which holds the prompt's prefill) as timed over
    as many plain steps at the profile's price; None without a profile or such a step."""
    steps = target.step_seconds[1:]
    if profile is None or not steps:
        return None
    return sum(steps) / (len(steps) * profile.t_step)


def uneven_loads(spec: float | None, target: float | None) -> str:
    """Where one half's load is more than LOAD_GAP times the other's: one sentence with both, and
    which way they tilt the measured speedup (chosen from the two); "" otherwise."""
    if not spec or not target or max(spec, target) / min(spec, target) <= LOAD_GAP:
        return ""
    busier, tilt = ("target alone", "above") if target > spec else ("speculative run", "below")
    return (
        f"**Uneven loads:** the speculative run's target passes took {spec:.2f}× their profiled "
        f"time and the target alone's steps {target:.2f}×, so the {busier} ran on a busier "
        f"machine and the measured speedup sits {tilt} what the method gives under one load."
    )
