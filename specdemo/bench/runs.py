"""The bench's runners: each way a prompt is run and timed, under one ``ForwardTimer`` so each
pays the same wait around every model pass. ``run_ours`` is specdemo, ``run_hf`` transformers
`generate` (target alone, or assisted by the draft), ``run_plain`` the engine's own target-only
loop; ``step_costs`` profiles the step costs the cost model predicts with, on the head the
drafter runs. ``bench`` lays them out over its grid and rows.
"""

import torch

from specdemo.cost.profile import measure_costs
from specdemo.cost.theory import StepCosts
from specdemo.decode.engine import (
    autoregressive_generate,
    make_generator,
    resolve_k,
    speculative_generate,
)
from specdemo.decode.rounds import Stats
from specdemo.draft.draft_vocab import context_head
from specdemo.draft.drafters import auto_head_rows, make_drafter
from specdemo.runtime.lm import Stopwatch


class ForwardTimer:
    """Forward hooks summing the wall time inside the given modules; nested calls count once.
    Times come from ``lm.Stopwatch``, which synchronises a CUDA device before and after each
    outermost call, so a run timed with one is slowed by those waits: time every run compared
    with it under one too."""

    def __init__(self, device, *modules):
        self.clock = Stopwatch(device)
        self.total, self.depth, self.start = 0.0, 0, 0.0
        self.handles = [
            h
            for m in modules
            for h in (m.register_forward_pre_hook(self._pre), m.register_forward_hook(self._post))
        ]

    def _pre(self, *_):
        if self.depth == 0:
            self.start = self.clock.now()
        self.depth += 1

    def _post(self, *_):
        self.depth -= 1
        if self.depth == 0:
            self.total += self.clock.now() - self.start

    def remove(self):
        for h in self.handles:
            h.remove()


def step_costs(pair, input_ids: list[int], ks: list[int], head_rows=None) -> StepCosts:
    """profile.measure_costs at the prompt's context length, the draft step as our drafter
    runs it (its head, ``draft_vocab.context_head``, and $SPECDEMO_DRAFT_STEP's mode)."""
    if head_rows == "auto":
        head_rows = auto_head_rows(pair.draft)
    head = context_head(pair.draft, head_rows)  # the head the drafter runs
    return measure_costs(pair.target, pair.draft, input_ids, ks, head)


def run_ours(
    pair, input_ids, k, sampling, max_new_tokens, seed, args, kind="model", width=1, judge="token"
):
    """specdemo with drafter `kind`, tree width `width`, judge `judge` and the bench's settings;
    returns the stats and the share of wall time outside model forward passes."""
    generator = make_generator(seed, pair.target.device)
    drafter = make_drafter(
        kind,
        pair.draft,
        sampling,
        generator,
        pair.target.device,
        args.adaptive,
        args.draft_head_rows,
    )
    stats = Stats()
    # The drafter may call the draft's base model and its own cut head instead of the whole model.
    model = drafter.draft_model
    heads = [model.head] if model is not None and model.head is not None else []
    timer = ForwardTimer(pair.target.device, pair.target, pair.draft, pair.draft.base_model, *heads)
    try:
        for _ in speculative_generate(
            pair.target,
            drafter,
            input_ids,
            k=resolve_k(k, pair.target, drafter, width),
            sampling=sampling,
            max_new_tokens=max_new_tokens,
            generator=generator,
            stats=stats,
            tree_width=width,
            verify=judge,
        ):
            pass
    finally:
        timer.remove()
    overhead = 1.0 - timer.total / stats.wall_time if stats.wall_time else 0.0
    return stats, overhead


# transformers' prompt lookup: the drafts per round its documentation suggests, for k "auto".
HF_LOOKUP_TOKENS = 10


@torch.inference_mode()
def run_hf(pair, input_ids, sampling, max_new_tokens, seed, k=None, peer="assisted"):
    """transformers generate: target alone, or with k drafts a round from the draft model
    (`peer` "assisted"; for k "auto", transformers' own dynamic choice: up to 20 drafts, stopped
    when the draft's confidence falls below 0.4, the library's defaults) or copied by its prompt
    lookup (`peer` "lookup": ``prompt_lookup_num_tokens`` = k, HF_LOOKUP_TOKENS for "auto", its
    n-gram of up to 2 tokens as the library sets it)."""
    kwargs = dict(max_new_tokens=max_new_tokens, do_sample=not sampling.greedy)
    if not sampling.greedy:
        kwargs.update(
            temperature=sampling.temperature, top_k=sampling.top_k or 0, top_p=sampling.top_p or 1.0
        )
    if k is not None and peer == "lookup":
        kwargs["prompt_lookup_num_tokens"] = HF_LOOKUP_TOKENS if k == "auto" else k
    elif k is not None:
        config = pair.draft.generation_config
        config.num_assistant_tokens = 20 if k == "auto" else k
        config.num_assistant_tokens_schedule = "constant"
        config.assistant_confidence_threshold = 0.4 if k == "auto" else 0.0
        kwargs["assistant_model"] = pair.draft
    ids = torch.tensor([input_ids], device=pair.target.device)
    torch.manual_seed(seed)
    # The same per-pass synchronisation as run_ours, whose forward passes are timed.
    timer = ForwardTimer(pair.target.device, pair.target, pair.draft)
    try:
        clock = Stopwatch(pair.target.device)
        out = pair.target.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        seconds = clock.total()
    finally:
        timer.remove()
    return out.shape[1] - ids.shape[1], seconds, out[0, ids.shape[1] :].tolist()


def run_plain(pair, input_ids, sampling, max_new_tokens, seed) -> float:
    """The engine's own target-only loop (``engine.autoregressive_generate``, the race's
    baseline), under the same forward timer as the other ways; returns tokens/s."""
    generator = make_generator(seed, pair.target.device)
    timer = ForwardTimer(pair.target.device, pair.target)
    try:
        clock = Stopwatch(pair.target.device)
        steps = autoregressive_generate(
            pair.target,
            input_ids,
            sampling=sampling,
            max_new_tokens=max_new_tokens,
            generator=generator,
        )
        n = sum(1 for _ in steps)
        seconds = clock.total()
    finally:
        timer.remove()
    return n / seconds


def coverage(tokens: list[int], head) -> float | None:
    """The share of `tokens` (the target's own) the draft's head holds; None for a full head."""
    if head is None or not tokens:
        return None
    return sum(head.covers(t) for t in tokens) / len(tokens)
