"""The target step mode that "auto" runs (``target_step``), measured on the running machine.

Off CUDA "auto" is eager and nothing is measured. On CUDA ``fastest_target_step`` times the
eager passes against the captured ones, a plain step and a verify pass of each of TIMED_ROWS
with a warm cache (``timed_target_step``), once per target model; a graph whose capture failed
is no candidate. The draft's step is measured the same way (``profile.fastest_draft_step``), and
both picks are kept in one registry (``profile.fastest_mode``) that ZeroGPU's later calls get.
"""

import statistics

import torch

from specdemo.lm import Stopwatch
from specdemo.profile import fastest_mode, fastest_of, synthetic_context
from specdemo.target_step import held_step, resolve_target_step

TIMED_ROWS = (1, 5)  # a plain step and the verify pass of K = 4


def target_step_for(model, step: str | None = None):
    """The target step object for `model` in `step` mode (``target_step.resolve_target_step``),
    "auto" on CUDA measured here (``fastest_target_step``, once per target model), held for
    one request (a context manager: ``target_step.held_step``)."""
    return held_step(model, target_step_kind(model, step))


def target_step_kind(model, step: str | None = None) -> str:
    """The mode `target_step_for` runs `model`'s passes in: "eager", "static" or "graph"."""
    step = resolve_target_step(step, model.device)
    return fastest_target_step(model) if step == "auto" else step


@torch.inference_mode()
def timed_target_step(model, context: list[int], step: str, rows=TIMED_ROWS, repeats: int = 5):
    """(median seconds of one pass over each of `rows` rows after `context`, summed; the step
    object): its kind and, for a graph, any capture problem say what ran. A graph is captured
    in the warm-up round."""
    with held_step(model, step) as runner:  # its captures stay for the requests after
        runner.fits(len(context) + max(rows))
        runner.run(context)
        clock, times = Stopwatch(model.device), []
        for _ in range(repeats + 1):  # the first round is a warm-up
            clock.lap()
            for n in rows:
                runner.verify(context[-n:])
                runner.crop(n)
            times.append(clock.lap())
    return statistics.median(times[1:]), runner


def fastest_target_step(model, modes=("eager", "graph"), repeats: int = 5) -> str:
    """The mode of `modes` whose passes measure fastest for the target `model`, once per model
    (its first request pays the measurement); a graph whose capture failed is not a
    candidate. On CUDA: eager against captured graphs."""
    context = synthetic_context(model)
    return fastest_mode(
        model,
        "target",
        lambda: fastest_of(
            modes, lambda mode: timed_target_step(model, context, mode, repeats=repeats)
        ),
    )
