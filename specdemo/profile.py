"""Step costs measured on the running machine, for the cost model and automatic K.

``measure_costs`` times a few forward passes with a warm KV cache: one plain target step, one
draft step as the drafter runs it (its cut head included), and target verify passes over k + 1
tokens. ``costs_for`` keeps one profile per target, draft and head, so only the first request
(or the app's warm-up) pays the few seconds it takes.
"""

import statistics
import weakref

import torch

from specdemo.lm import Stopwatch, cut_head, forward, vocab_size
from specdemo.theory import StepCosts

PROFILE_KS = tuple(range(1, 9))  # the verify widths automatic K chooses among
PROFILE_CONTEXT = 64  # tokens already in the cache when a step is timed

_profiles: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # target -> {key: StepCosts}


@torch.inference_mode()
def measure_costs(
    target, draft, input_ids: list[int], ks=PROFILE_KS, head=None, repeats: int = 5
) -> StepCosts:
    """Median seconds of each step at the context `input_ids`; no draft (None) costs 0."""

    def timed(model, n_tokens: int, head=None) -> float:
        _, cache = forward(model, input_ids, None)
        clock, times = Stopwatch(model.device), []
        for _ in range(repeats + 1):  # the first is a warm-up
            clock.lap()
            forward(model, input_ids[-n_tokens:], cache, n_logits=n_tokens, head=head)
            times.append(clock.lap())
            cache.crop(-n_tokens)
        return statistics.median(times[1:])

    return StepCosts(
        t_step=timed(target, 1),
        t_draft=timed(draft, 1, head) if draft is not None else 0.0,
        t_verify={k: timed(target, k + 1) for k in ks},
    )


def costs_for(target, draft=None, head_rows: int | None = None) -> StepCosts:
    """The profile of this target with this draft (None: prompt lookup), measured once at a
    synthetic context of PROFILE_CONTEXT tokens and then reused."""
    key = (id(draft), head_rows)
    profiles = _profiles.setdefault(target, {})
    if key not in profiles:
        vocab = min(vocab_size(target), vocab_size(draft) if draft is not None else 1 << 62)
        context = [(17 + 31 * i) % vocab for i in range(PROFILE_CONTEXT)]
        head = cut_head(draft, head_rows) if draft is not None and head_rows else None
        profiles[key] = measure_costs(target, draft, context, head=head)
    return profiles[key]
