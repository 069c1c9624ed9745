"""The GPU functions: the models' work for one request, and nothing that must outlive the call.

Each takes the pair (bound before launch, so ZeroGPU's fork inherits it instead of pickling it),
a request from ``jobs`` and what earlier calls measured (``profile.measured_for``), and
returns or yields plain picklable values, what it measured among them. ZeroGPU runs each call
in a fork that keeps nothing it writes, so per-process measurements (the step-cost profile, the
draft step's fastest mode) travel back to the main process, which hands them to the next call:
each is paid once, not once per call. Figures and markdown are built in the main process, after
the call (``render_exactness``, ``render_step``), and so are replay records, sweep ids and
sessions. ``tasks(pair)`` gives the functions bound to a pair, wrapped by ``gpu_calls.on_gpu``
and carrying the measurements, once per pair.
"""

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Iterator

from specdemo.app import charts
from specdemo.app.errors import user_errors
from specdemo.app.exact import exactness as exact
from specdemo.app.exact import histograms, joint, verdicts
from specdemo.app.generate import race
from specdemo.app.generate.cadence import Cadence
from specdemo.app.page.gpu_calls import on_gpu
from specdemo.app.page.jobs import ExactnessCheck, Race, StepThrough
from specdemo.app.step import lesson, microscope, stepping
from specdemo.app.step.tree_chart import tree_chart
from specdemo.cost.profile import costs_for, measured_for, restore_measured
from specdemo.decode.engine import make_generator
from specdemo.runtime.threads import choose, each_step
from specdemo.text import token_labels


def run_race(
    pair, request: Race, measured: dict | None = None
) -> Iterator[tuple[str, object, bool]]:
    """The race's runs as they grow, both halves at one cadence in seconds of compute
    (``cadence.Cadence``), the last always: ("spec", ``race.SpecRun``, is_last), then unless
    `request.with_target` is False ("target", ``race.TargetRun``, is_last), then ("measured",
    ``profile.measured_for``, True). ZeroGPU stops the call at its next item once the caller
    stops reading, so Stop ends it within one frame or one round, whichever is longer."""
    restore_measured(pair.target, pair.draft, measured)
    ids = list(request.ids)
    with user_errors():
        # Both runs on the threads the machine's other work leaves free (``threads.choose``),
        # set on whichever worker thread advances them.
        threads = choose(pair.target.device)
        cadence = Cadence()
        spec_runs = each_step(race.run_speculative(pair, request.config, ids), threads)
        for spec, done in cadence.frames(spec_runs):
            spec.threads = threads
            yield "spec", spec, done
        if request.with_target:
            target_runs = each_step(race.run_target(pair, request.config, ids), threads)
            for target, done in cadence.frames(target_runs):
                yield "target", target, done
    yield "measured", measured_for(pair.target, pair.draft), True


def run_exactness(pair, request: ExactnessCheck, measured: dict | None = None) -> tuple:
    """(the measured exactness, first-two-token pairs and greedy check, what was measured),
    for ``render_exactness``."""
    restore_measured(pair.target, pair.draft, measured)
    config, n, rule = request.config, request.n, request.rule
    with user_errors():
        generator = make_generator(config.seed, pair.target.device)
        ex = exact.measure(pair, config, n, rule=rule, generator=generator)
        k = config.k if isinstance(config.k, int) else 2  # automatic K: its first rounds
        pairs = joint.measure_pairs(
            pair,
            list(request.ids),
            config.sampling,
            n,
            generator,
            rule,
            request.max_first_tokens,
            k,
            config.judge,
        )
        check = exact.greedy_check(pair, config)
    return (ex, pairs, check), measured_for(pair.target, pair.draft)


def render_exactness(pair, request: ExactnessCheck, outcome: tuple) -> list:
    """The exactness check's outputs (``handlers.EXACTNESS_OUTPUTS``) from ``run_exactness``."""
    ex, pairs, check = outcome
    config = request.config
    return [
        histograms.exactness_chart(ex.labels, ex.p, ex.speculative, ex.direct, ex.n),
        histograms.exactness_chart(
            pairs.labels, pairs.p, pairs.speculative, pairs.direct, pairs.n, "The first two tokens"
        ),
        verdicts.markdown(ex, pairs, config),
        verdicts.greedy_markdown(check, config.k, pair.summary.label),
        {
            "sampling": dataclasses.asdict(ex),
            "pairs": dataclasses.asdict(pairs),
            "greedy": dataclasses.asdict(check),
        },
    ]


def run_step(pair, request: StepThrough, state, measured: dict | None = None) -> tuple:
    """One step-through round after the context in `state`: ((state, round, microscope, the
    target's step seconds), what was measured), for ``render_step``."""
    restore_measured(pair.target, pair.draft, measured)
    with user_errors():
        state, r, scope = stepping.next_round(pair, request.config, state)
    t_step = costs_for(pair.target).t_step  # measured once per target (the warm-up does it)
    return (state, r, scope, t_step), measured_for(pair.target, pair.draft)


def render_step(pair, request: StepThrough, outcome: tuple) -> list:
    """The step-through's outputs (``handlers.STEP_OUTPUTS``) from ``run_step``."""
    state, r, scope, t_step = outcome
    config, tokenizer = request.config, pair.tokenizer
    return [
        list(state.spans),
        *lesson.round_markdown(
            r, tokenizer, config, t_step, scope.outside, state.refed, scope.copy
        ),
        stepping.round_table(r, tokenizer, scope.outside),
        (tree_chart if r.width > 1 else charts.step_chart)(
            r, lambda ids: token_labels(tokenizer, ids)
        ),
        *microscope.figures(scope),
        f"**Round {state.rounds}:** {microscope.markdown(scope, r, tokenizer)}",
        state,
    ]


FUNCTIONS = {"race": run_race, "exactness": run_exactness, "step": run_step}
RENDER = {"exactness": render_exactness, "step": render_step}
_bound: dict[int, tuple[object, "Carried"]] = {}  # id(pair) -> (pair, its GPU functions)
_lock = threading.Lock()


class Carried:
    """The GPU functions of one pair, each handed what earlier calls measured and keeping what
    it measured in turn (in this, the main process), its outputs rendered after the call."""

    def __init__(self, pair):
        self.pair, self.measured = pair, None
        self.gpu = {name: on_gpu(functools.partial(fn, pair)) for name, fn in FUNCTIONS.items()}

    def race(self, request: Race) -> Iterator[tuple[str, object, bool]]:
        with contextlib.closing(self.gpu["race"](request, measured=self.measured)) as runs:
            for kind, value, done in runs:  # closing this closes the GPU call's stream too
                if kind == "measured":
                    self.measured = value
                else:
                    yield kind, value, done

    def exactness(self, request: ExactnessCheck) -> list:
        return self._called("exactness", request)

    def step(self, request: StepThrough, state) -> list:
        return self._called("step", request, state)

    def _called(self, name: str, request, *args) -> list:
        outcome, self.measured = self.gpu[name](request, *args, measured=self.measured)
        return RENDER[name](self.pair, request, outcome)


def tasks(pair) -> Carried:
    """The GPU functions with `pair` bound (``Carried``), wrapped by ``gpu_calls.on_gpu`` once
    per pair: ``race(request)``, ``exactness(request)``, ``step(request, state)``."""
    with _lock:
        found = _bound.get(id(pair))
        if found is None or found[0] is not pair:
            found = _bound[id(pair)] = (pair, Carried(pair))
        return found[1]
