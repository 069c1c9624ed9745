"""Step costs measured on the running machine, for the cost model and automatic K.

``measure_costs`` times a few forward passes with a warm KV cache: one plain target step, one
draft step as the drafter runs it (its head, ``draft_vocab.context_head``, whose spare rows for
the text's ids cost their matmul filled or not, and its step mode, ``steps``), and target
verify passes over k + 1 tokens, in the step mode the target runs (eager, static or graph; a
graph is captured in the warm-up round, outside the times), both timed by the runtime's
``modes``, which times the steps "auto" chooses between the same way. ``costs_for``
keeps the target's steps per target and mode and a draft step per draft, head and mode, so only
the first request in a mode (or the app's warm-up) pays the few seconds it takes, and automatic
K divides a request's passes by the same passes, in the same mode. Every lap synchronises the
device (``lm.Stopwatch``): on CUDA a cost is the work done, not the time to queue it.
"""

import weakref

import torch

from specdemo.cost.theory import StepCosts
from specdemo.draft.draft_vocab import context_head
from specdemo.runtime.lm import forward
from specdemo.runtime.modes import (
    known_modes,
    median_passes,
    restore_modes,
    synthetic_context,
    timed_draft_step,
    timed_passes,
)

PROFILE_KS = tuple(range(1, 9))  # the verify widths automatic K chooses among for a draft model
# Wider passes a long copy may fill, timed too; automatic K prices the widths between them on a
# straight line (``StepCosts.pass_seconds``, checked in docs/BENCHMARKS.md, "Long copies").
COPY_KS = (16, 32)
COPY_REPEATS = 3  # a wide pass varies less than a step and costs several: fewer repeats

# target -> {("target", mode): StepCosts without a draft,
#            (id(draft), head_rows, mode): seconds of a draft step}
_profiles: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@torch.inference_mode()
def pass_seconds(
    model, context: list[int], widths, head=None, repeats: int = 5
) -> dict[int, float]:
    """Median seconds of one forward pass over the last n tokens of `context`, for each n in
    `widths`, with the whole context in a warm KV cache (prefilled once), through transformers'
    own call rather than a step object; timed as the step objects are (``modes.median_passes``:
    the widths take turns, so their ratios, the verify cost in target steps, hold)."""
    _, cache = forward(model, context, None)

    def run(n):
        forward(model, context[-n:], cache, n_logits=n, head=head)

    return median_passes(model.device, widths, repeats, run, lambda n: cache.crop(-n))


def measure_costs(
    target,
    draft,
    input_ids: list[int],
    ks=PROFILE_KS,
    head=None,
    repeats: int = 5,
    step=None,
    target_mode: str = "eager",
) -> StepCosts:
    """Median seconds of each step at the context `input_ids`, the target's passes in
    `target_mode`; no draft (None) costs 0."""
    widths = (1, *(k + 1 for k in ks))
    seconds, _ = timed_passes(target, input_ids, widths, target_mode, repeats)
    t_draft = 0.0
    if draft is not None:
        t_draft = timed_draft_step(draft, input_ids, head, step, repeats)[0]
    return StepCosts(t_step=seconds[1], t_draft=t_draft, t_verify={k: seconds[k + 1] for k in ks})


def target_costs(target, context: list[int], mode: str = "eager") -> StepCosts:
    """The target's steps and its verify passes for a draft model's K (``PROFILE_KS``) and for
    the longer copies (``COPY_KS``, fewer repeats), at `context`, in step mode `mode`."""
    costs = measure_costs(target, None, context, target_mode=mode)
    wide, _ = timed_passes(target, context, [k + 1 for k in COPY_KS], mode, COPY_REPEATS)
    return StepCosts(costs.t_step, 0.0, {**costs.t_verify, **{n - 1: t for n, t in wide.items()}})


def costs_for(
    target,
    draft=None,
    head_rows: int | None = None,
    step: str = "eager",
    target_mode: str = "eager",
) -> StepCosts:
    """The profile of this target with this draft (None: prompt lookup, no draft step),
    measured at a synthetic context of PROFILE_CONTEXT tokens. The target's steps are measured
    once per step mode it runs in (`target_mode`: "eager", "static" or "graph", as resolved by
    ``modes.target_step_kind``) and shared by every draft; a draft's step once per
    draft, head and step mode (`step`)."""
    measured = _profiles.setdefault(target, {})
    if ("target", target_mode) not in measured:
        context = synthetic_context(target)
        measured["target", target_mode] = target_costs(target, context, target_mode)
    costs = measured["target", target_mode]
    if draft is None:
        return costs
    key = (id(draft), head_rows, step)
    if key not in measured:
        head = context_head(draft, head_rows)  # the head a drafter with `head_rows` runs
        context = synthetic_context(target, draft)
        measured[key] = timed_draft_step(draft, context, head, step)[0]
    return StepCosts(costs.t_step, measured[key], costs.t_verify)


@torch.inference_mode()
def captured_draft_seconds(target, draft, head_rows: int | None = None) -> float | None:
    """On CUDA, the seconds of this draft's step replayed from a CUDA graph (``steps``),
    measured once per draft and head, for the cost model's "captured" lever; None off CUDA or
    when the step could not be captured."""
    if torch.device(draft.device).type != "cuda":
        return None
    measured = _profiles.setdefault(target, {})
    key = (id(draft), head_rows, "captured")
    if key not in measured:
        head = context_head(draft, head_rows)
        context = synthetic_context(target, draft)
        seconds, runner = timed_draft_step(draft, context, head, "graph")
        measured[key] = None if runner.problem else seconds
    return measured[key]


def measured_for(target, draft) -> dict:
    """What this process has measured for the pair, as plain values to carry to another process:
    the step costs (``costs_for``, ``captured_draft_seconds``) and the fastest step mode of each
    model. A ZeroGPU call runs in a fork of the main process that keeps nothing it writes; its
    caller keeps this and hands it to the next call (``restore_measured``), so each is measured
    once and the target runs in the mode its profile was timed in. Draft models are keyed by
    id(), which a fork of the same process shares."""
    return {
        "profiles": dict(_profiles.get(target, {})),
        "fastest": known_modes(draft),
        "target_fastest": known_modes(target),
    }


def restore_measured(target, draft, measured: dict | None) -> None:
    """Take what ``measured_for`` carried (None: nothing yet) as measured in this process."""
    if not measured:
        return
    _profiles.setdefault(target, {}).update(measured["profiles"])
    restore_modes(draft, measured["fastest"])
    restore_modes(target, measured.get("target_fastest"))
