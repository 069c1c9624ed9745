"""The GPU functions: the models' work for one request, and nothing that must outlive the call.

Each takes the pair (bound before launch, so ZeroGPU's fork inherits it instead of pickling it)
and a request from ``requests``, and returns or yields plain picklable values. Replay records,
sweep ids and sessions stay with the handlers in the main process. ``tasks(pair)`` gives the
functions bound to a pair and wrapped by ``gpu_calls.on_gpu``, once per pair.
"""

import dataclasses
import functools
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

from specdemo.app import charts
from specdemo.app.errors import user_errors
from specdemo.app.exact import exactness as exact
from specdemo.app.exact import joint
from specdemo.app.generate import race
from specdemo.app.page.gpu_calls import on_gpu
from specdemo.app.page.requests import Exactness, Race, Step
from specdemo.app.step import microscope, stepping
from specdemo.engine import make_generator
from specdemo.profile import costs_for
from specdemo.text import token_labels

STREAM_EVERY = 0.1  # seconds between streamed runs (a slow round streams every round)


def throttled(iterator, seconds: float = STREAM_EVERY):
    """(item, is_last) pairs, at most one every `seconds`; the last item always comes."""
    item, shown = None, 0.0
    for item in iterator:
        if time.perf_counter() - shown >= seconds:
            shown = time.perf_counter()
            yield item, False
    if item is not None:
        yield item, True


def run_race(pair, request: Race) -> Iterator[tuple[str, object, bool]]:
    """The race's runs as they grow, at most one every STREAM_EVERY s, the last always:
    ("spec", ``race.SpecRun``, is_last), then unless `request.with_target` is False
    ("target", ``race.TargetRun``, is_last). ZeroGPU stops the call at its next item once the
    caller stops reading, so Stop ends it within one round or STREAM_EVERY, whichever is longer."""
    ids = list(request.ids)
    with user_errors():
        for spec, done in throttled(race.run_speculative(pair, request.config, ids)):
            yield "spec", spec, done
        if request.with_target:
            for target, done in throttled(race.run_target(pair, request.config, ids)):
                yield "target", target, done


def run_exactness(pair, request: Exactness) -> list:
    """The exactness check's outputs (``handlers.EXACTNESS_OUTPUTS``)."""
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
        )
        check = exact.greedy_check(pair, config)
    return [
        charts.exactness_chart(ex.labels, ex.p, ex.speculative, ex.direct, ex.n),
        charts.exactness_chart(
            pairs.labels, pairs.p, pairs.speculative, pairs.direct, pairs.n, "The first two tokens"
        ),
        exact.markdown(ex, pairs),
        exact.greedy_markdown(check, config.k, pair.summary.label),
        {
            "sampling": dataclasses.asdict(ex),
            "pairs": dataclasses.asdict(pairs),
            "greedy": dataclasses.asdict(check),
        },
    ]


def run_step(pair, request: Step, state) -> list:
    """One step-through round after the context in `state` (``handlers.STEP_OUTPUTS``)."""
    config = request.config
    with user_errors():
        state, r, scope = stepping.next_round(pair, config, state)
    tokenizer = pair.tokenizer
    t_step = costs_for(pair.target).t_step  # measured once per target (the warm-up does it)
    return [
        list(state.spans),
        *stepping.round_markdown(r, tokenizer, config, t_step, scope.outside),
        stepping.round_rows(r, tokenizer, scope.outside),
        charts.step_chart(r, lambda ids: token_labels(tokenizer, ids)),
        *microscope.figures(scope),
        f"**Round {state.rounds}:** {microscope.markdown(scope, r, tokenizer)}",
        state,
    ]


FUNCTIONS = {"race": run_race, "exactness": run_exactness, "step": run_step}
_bound: dict[int, tuple[object, SimpleNamespace]] = {}  # id(pair) -> (pair, its GPU functions)
_lock = threading.Lock()


def tasks(pair) -> SimpleNamespace:
    """The GPU functions with `pair` bound, each wrapped by ``gpu_calls.on_gpu`` once per pair:
    ``race(request)``, ``exactness(request)``, ``step(request, state)``."""
    with _lock:
        found = _bound.get(id(pair))
        if found is None or found[0] is not pair:
            bound = {name: on_gpu(functools.partial(fn, pair)) for name, fn in FUNCTIONS.items()}
            found = _bound[id(pair)] = (pair, SimpleNamespace(**bound))
        return found[1]
