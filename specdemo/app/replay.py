"""Runs measured once and answered again, and the sweep, run one cell per call.

A run's tokens are fixed by the pair, the prompt and every setting, the seed included (with a
seed, sampling is deterministic), so a request already measured is answered with that
measurement: its tokens, colours and timings, marked with when it was measured. ``RACES`` keeps
whole races; ``TARGETS`` keeps target-alone runs, keyed without K, the drafter and adaptive
drafting, which the target alone never uses. Both are shared by every session, thread-safe and
bounded. A sweep is a ``SweepPlan`` advanced by ``sweep_cell``, one cell per call, so a server
can let other requests take the model between cells.
"""

import copy
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from specdemo.app.config import RunConfig, encode
from specdemo.app.race import SpecRun, TargetRun, last, record, run_speculative, run_target

KEPT = 64  # entries per store; a race of 1,024 tokens holds about 0.5 MB, mostly its spans


@dataclass(frozen=True)
class Measured:
    value: object
    at: float  # time.time() when it was stored


class Recorded:
    """A least-recently-used store of measurements. `get` hands out a deep copy, so a caller may
    change what it gets without touching what other sessions will get."""

    def __init__(self, size: int = KEPT):
        self.size = size
        self._items: OrderedDict[object, Measured] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, since: float = 0.0) -> Measured | None:
        """The entry under `key` if it was stored at or after `since` (a time.time()), else None."""
        with self._lock:
            found = self._items.get(key)
            if found is None or found.at < since:
                return None
            self._items.move_to_end(key)
        return Measured(copy.deepcopy(found.value), found.at)

    def put(self, key, value) -> None:
        """Store `value` under `key`, now; the caller does not change it afterwards."""
        with self._lock:
            self._items[key] = Measured(value, time.time())
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


RACES = Recorded()
TARGETS = Recorded()


def clear() -> None:
    """Forget every recorded run."""
    RACES.clear()
    TARGETS.clear()


def race_key(pair, config: RunConfig) -> tuple:
    return pair.summary, config


def target_key(pair, config: RunConfig) -> tuple:
    c = config  # all it takes from the config: K, the drafter and adaptive drafting play no part
    return pair.summary, c.prompt, c.system, c.sampling, c.seed, c.max_new_tokens


def target_once(pair, config: RunConfig, ids: list[int], since: float = 0.0) -> Iterator[TargetRun]:
    """The target alone, measured once per prompt, sampling, seed and length: the recorded run
    if it was measured at or after `since`, yielded once, else ``run_target``'s growing run,
    recorded when it finishes (a run stopped half-way is not)."""
    key = target_key(pair, config)
    found = TARGETS.get(key, since)
    if found is not None:
        yield replace(found.value, measured_at=found.at)
        return
    run = None
    for run in run_target(pair, config, ids):
        yield run
    if run is not None:
        TARGETS.put(key, run)


def recorded_race(pair, config: RunConfig, since: float = 0.0) -> tuple[SpecRun, TargetRun] | None:
    """The race recorded for this pair, prompt and settings at or after `since`, each run marked
    with when it was measured; None when there is none."""
    found = RACES.get(race_key(pair, config), since)
    if found is None:
        return None
    spec, target = found.value
    spec.measured_at = found.at
    target.measured_at = target.measured_at or found.at
    return spec, target


def keep_race(pair, config: RunConfig, spec: SpecRun, target: TargetRun) -> None:
    """Record a finished race, so the same request is answered with it (``recorded_race``)."""
    RACES.put(race_key(pair, config), (spec, target))


def race_once(pair, config: RunConfig, since: float = 0.0) -> tuple[SpecRun, TargetRun]:
    """A whole race, not streamed: the recorded one, or one run now (its target alone from
    ``target_once``) and kept."""
    found = recorded_race(pair, config, since)
    if found is not None:
        return found
    ids = encode(pair, config)
    target = last(target_once(pair, config, ids, since))
    spec = last(run_speculative(pair, config, ids))
    keep_race(pair, config, spec, target)
    return spec, target


_SWEEP_IDS = itertools.count(1)


@dataclass(frozen=True)
class SweepPlan:
    """A sweep under way: its settings, its (temperature, K) cells in run order, how many are
    done. Runs recorded before `since` are measured again (a fresh sweep sets it to its start)."""

    config: RunConfig
    cells: tuple[tuple[float, int | str], ...]
    since: float = 0.0
    done: int = 0
    id: int = field(default_factory=lambda: next(_SWEEP_IDS))  # no two sweeps look alike

    @property
    def finished(self) -> bool:
        return self.done >= len(self.cells)

    def next_config(self) -> RunConfig:
        temperature, k = self.cells[self.done]
        return replace(self.config, temperature=temperature, k=k)


def plan_sweep(config: RunConfig, ks: list, temperatures: list[float], fresh=False) -> SweepPlan:
    """Every (temperature, K) cell, the K values of one temperature together."""
    cells = tuple((t, k) for t in temperatures for k in ks)
    return SweepPlan(config, cells, since=time.time() if fresh else 0.0)


def sweep_cell(pair, plan: SweepPlan) -> tuple[SweepPlan, dict]:
    """The plan's next cell raced (``race_once``) and recorded: (the plan a cell on, the record).
    The cells of one temperature share one target-alone run, as it does not depend on K."""
    config = plan.next_config()
    spec, target = race_once(pair, config, plan.since)
    return replace(plan, done=plan.done + 1), record(config, spec, target)
