"""Runs measured once and answered again, and the sweep, run one cell per call.

A run's tokens are fixed by the pair, the prompt and every setting, the seed included (with a
seed, sampling is deterministic), so a request already measured is answered with that
measurement: its tokens, colours and timings, marked with when it was measured. ``RACES`` keeps
whole races; ``TARGETS`` keeps target-alone runs, keyed without K, the drafter, adaptive
drafting and the judge, which the target alone never uses. Both are shared by every session,
thread-safe and bounded. A sweep is a ``SweepPlan`` advanced by ``sweep_cell``, one cell per
call, so a server can let other requests take the model between cells.

Everything here lives in the main process and is read and written outside the GPU functions
(``work``): on ZeroGPU each GPU call may run in a fresh fork, which would keep nothing.
"""

import copy
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace

from specdemo.app.config import RunConfig
from specdemo.app.generate.race import SpecRun, TargetRun
from specdemo.app.generate.run_record import RunRecord
from specdemo.app.page import gpu
from specdemo.app.page.jobs import Race, Sweep

KEPT = 64  # entries per store; a race of 1,024 tokens holds about 0.5 MB, mostly its spans


@dataclass(frozen=True)
class Measured:
    value: object
    at: float  # time.time() when it was stored


class Store:
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


RACES = Store()
TARGETS = Store()


def clear() -> None:
    """Forget every stored run."""
    RACES.clear()
    TARGETS.clear()


def stored_race(pair, request: Race) -> tuple[SpecRun, TargetRun] | None:
    """The race stored for this pair and request at or after `request.since`, each run marked
    with when it was measured; None when there is none."""
    found = RACES.get((pair.summary, request.key), request.since)
    if found is None:
        return None
    spec, target = found.value
    spec.measured_at = found.at
    target.measured_at = target.measured_at or found.at
    return spec, target


def stored_target(pair, request: Race) -> TargetRun | None:
    """The target-alone run stored for this prompt, sampling, seed and length at or after
    `request.since`, marked with when it was measured; None when there is none."""
    found = TARGETS.get((pair.summary, request.target_key), request.since)
    return None if found is None else replace(found.value, measured_at=found.at)


def keep(pair, request: Race, spec: SpecRun, target: TargetRun) -> None:
    """Record a finished race, and its target-alone run when that was measured now, so the same
    request is answered with them (``stored_race``, ``stored_target``)."""
    if target.measured_at is None:
        TARGETS.put((pair.summary, request.target_key), target)
    RACES.put((pair.summary, request.key), (spec, target))


def race_once(pair, request: Race, run_race) -> tuple[SpecRun, TargetRun]:
    """A whole race, not streamed: the stored one, or one run now by `run_race` (the GPU
    function ``work.run_race``, bound to the pair) with the target alone from the store when
    it is there, and kept. Refused (``gpu.check``) before the GPU is asked when too big."""
    found = stored_race(pair, request)
    if found is not None:
        return found
    target = stored_target(pair, request)
    request = replace(request, with_target=target is None)
    gpu.check(request)
    spec = None
    for kind, run, _ in run_race(request):
        if kind == "spec":
            spec = run
        else:
            target = run
    keep(pair, request, spec, target)
    return spec, target


@dataclass(frozen=True)
class SweepPlan:
    """A sweep under way (``jobs.Sweep``) and how many of its cells are done."""

    request: Sweep
    done: int = 0

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def cells(self) -> list[Race]:
        return self.request.cells()

    @property
    def finished(self) -> bool:
        return self.done >= len(self.cells)

    def next_request(self) -> Race:
        return self.cells[self.done]

    def next_config(self) -> RunConfig:
        return self.next_request().config


def sweep_cell(pair, plan: SweepPlan, run_race) -> tuple[SweepPlan, RunRecord]:
    """The plan's next cell raced (``race_once``): (the plan a cell on, the cell's ``RunRecord``).
    The cells of one temperature share one target-alone run, as it does not depend on K."""
    request = plan.next_request()
    spec, target = race_once(pair, request, run_race)
    return replace(plan, done=plan.done + 1), RunRecord.of(request.config, spec, target)
