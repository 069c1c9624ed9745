"""The one chooser of a step's mode: what "auto" runs the draft and the target in (``steps``),
measured on the running machine.

Off CUDA "auto" is eager and nothing is measured. On CUDA each role times its eager step against
its captured one with a warm cache, once per model (its first request pays the measurement): the
draft its one-token step (``timed_draft_step``), the target a plain step and a verify pass of
each of TIMED_ROWS (``timed_passes``). A graph whose capture failed is no candidate
(``fastest_of``). Both picks are kept in one registry (``fastest_mode``) that ZeroGPU's later
calls get (``known_modes``, ``restore_modes``). Every lap synchronises the device
(``lm.Stopwatch``): on CUDA a time is the work done, not the time to queue it.
"""

import statistics
import weakref

import torch

from specdemo.runtime.lm import Stopwatch, vocab_size
from specdemo.runtime.steps import (
    held_step,
    make_draft_step,
    resolve_draft_step,
    resolve_target_step,
)

PROFILE_CONTEXT = 64  # tokens already in the cache when a step is timed
TIMED_ROWS = (1, 5)  # the target's plain step and the verify pass of K = 4

# model -> {"draft" or "target": the step mode "auto" measured fastest for it in that role}
_fastest: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def synthetic_context(*models) -> list[int]:
    """PROFILE_CONTEXT token ids every one of `models` can embed."""
    vocab = min(vocab_size(model) for model in models)
    return [(17 + 31 * i) % vocab for i in range(PROFILE_CONTEXT)]


def median_passes(device, widths, repeats: int, run, undo) -> dict[int, float]:
    """{n: median seconds of `run(n)`} for each n in `widths`, over `repeats` rounds after one
    warm-up round (a graph's capture falls in it), each lap synchronised on `device`; `undo(n)`
    rolls the cache back after each pass, outside the time. The widths take turns within each
    round, so a machine that slows down part-way slows all of them alike and their ratios hold."""
    clock, times = Stopwatch(device), {n: [] for n in widths}
    for _ in range(repeats + 1):
        for n in widths:
            clock.lap()
            run(n)
            times[n].append(clock.lap())
            undo(n)
    return {n: statistics.median(t[1:]) for n, t in times.items()}


@torch.inference_mode()
def timed_draft_step(draft, context: list[int], head, step: str | None, repeats: int = 5):
    """(median seconds of one draft step as a drafter runs it after `context`, the step object):
    its kind and, for a graph, any capture problem say what ran."""
    runner = draft_step_for(draft, head, step)
    runner.fits(len(context) + 1)
    runner.run(context)

    def one_step(n):
        runner.run(context[-n:])

    return median_passes(draft.device, (1,), repeats, one_step, runner.crop)[1], runner


@torch.inference_mode()
def timed_passes(model, context: list[int], widths, mode: str, repeats: int = 5):
    """({n: median seconds of a verify pass over the last n tokens of `context`}, the step
    object), through the target's step object in `mode` as the engine runs its passes, with the
    whole context in its warm cache (``median_passes``)."""
    with held_step(model, mode) as runner:  # its captures stay for the requests after
        runner.fits(len(context) + max(widths))
        runner.run(context)

        def verify(n):
            runner.verify(context[-n:])

        return median_passes(model.device, widths, repeats, verify, runner.crop), runner


def fastest_of(modes, timed) -> str:
    """The mode of `modes` whose ``timed(mode)`` -> (seconds, the step object it ran) is least;
    a step whose capture failed (its ``problem``) is no candidate. The draft's and the target's
    "auto" both choose by it."""
    seconds = {}
    for mode in modes:
        median, runner = timed(mode)
        if not getattr(runner, "problem", ""):
            seconds[runner.kind] = median
    return min(seconds, key=seconds.get)


def fastest_mode(model, role: str, measure) -> str:
    """The step mode "auto" runs `model` in as the pair's `role` ("draft" or "target"):
    ``measure()`` the first time, kept for the model's life."""
    modes = _fastest.setdefault(model, {})
    if role not in modes:
        modes[role] = measure()
    return modes[role]


def known_modes(model) -> dict[str, str]:
    """What ``fastest_mode`` has measured for `model`, by role, to carry to another process."""
    return dict(_fastest.get(model, {}))


def restore_modes(model, modes: dict[str, str] | None) -> None:
    """Take what ``known_modes`` carried as measured in this process (a measurement here wins)."""
    for role, mode in (modes or {}).items():
        _fastest.setdefault(model, {}).setdefault(role, mode)


def fastest_draft_step(draft, head=None, modes=("eager", "graph"), repeats: int = 5) -> str:
    """The mode of `modes` whose draft step measures fastest for `draft` with `head`, once per
    draft model. On CUDA: eager against a captured graph."""
    context = synthetic_context(draft)

    def timed(mode):
        return timed_draft_step(draft, context, head, mode, repeats)

    return fastest_mode(draft, "draft", lambda: fastest_of(modes, timed))


def fastest_target_step(model, modes=("eager", "graph"), repeats: int = 5) -> str:
    """The mode of `modes` whose passes (TIMED_ROWS, summed) measure fastest for the target
    `model`, once per model. On CUDA: eager against captured graphs."""
    context = synthetic_context(model)

    def timed(mode):
        seconds, runner = timed_passes(model, context, TIMED_ROWS, mode, repeats)
        return sum(seconds.values()), runner

    return fastest_mode(model, "target", lambda: fastest_of(modes, timed))


def draft_step_for(model, head=None, step: str | None = None):
    """The draft step object for `model` in `step` mode (``steps.resolve_draft_step``), "auto" on
    CUDA measured here (``fastest_draft_step``, once per draft model)."""
    step = resolve_draft_step(step, model.device)
    if step == "auto":
        step = fastest_draft_step(model, head)
    return make_draft_step(model, head, step)


def target_step_kind(model, step: str | None = None) -> str:
    """The mode `target_step_for` runs `model`'s passes in: "eager", "static" or "graph"."""
    step = resolve_target_step(step, model.device)
    return fastest_target_step(model) if step == "auto" else step


def target_step_for(model, step: str | None = None):
    """The target step object for `model` in `step` mode (``steps.resolve_target_step``),
    "auto" on CUDA measured here (``fastest_target_step``, once per target model), held for one
    request (a context manager: ``steps.held_step``)."""
    return held_step(model, target_step_kind(model, step))
