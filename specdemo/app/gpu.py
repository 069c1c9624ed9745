"""GPU time on ZeroGPU: the seconds each model handler asks ``spaces.GPU`` for, estimated from
the request itself, and the smaller sweep a ZeroGPU Space accepts.

Each ``*_seconds`` takes its handler's arguments by name (those it does not need are ignored)
and parses them as the handler does, so bad input is refused before any GPU time is asked for;
``SECONDS`` names them by handler and ``per_request`` gives spaces.GPU its duration callable.
The step times below are a budget, not measurements: no GPU was available to measure them.
``scripts/gpu_bench.sh`` measures t_step and t_draft on CUDA; these should follow its numbers.
"""

import inspect
import math

from specdemo.app.config import (
    DEFAULTS,
    EXACT_DEFAULTS,
    STEP_DEFAULTS,
    SWEEP_DEFAULTS,
    parse_grid,
    parse_rule,
    parse_run,
    parse_samples,
)
from specdemo.app.exactness import GREEDY_CHECK_TOKENS
from specdemo.profile import PROFILE_KS
from specdemo.theory import expected_tokens_per_pass

# ZeroGPU's daily quota for a visitor who is not logged in is 2 minutes, and a call asking for
# more than the quota left is refused: no request asks for more.
MAX_SECONDS = 120
ZERO_GPU_SWEEP_CELLS = 8  # the default grid, 4 K values x 2 temperatures
SETUP_SECONDS = 10.0  # each call: the pair onto the GPU, CUDA's start, the step-cost profile
T_STEP = 0.04  # a 4-bit 1.5B target step at batch 1, launch-bound (budget)
T_DRAFT = 0.03  # a 4-bit 0.5B draft step: 24 layers launch nearly as long as 28 (budget)
VERIFY_STEPS = 1.5  # a verify pass over k + 1 tokens, in target steps (1.3 measured on CPU, k = 3)
ALPHA = 0.5  # per draft: below the lowest per-token alpha measured, 0.57 (docs/BENCHMARKS.md)
JOINT_SECONDS = 5.0  # the exactness tab's batched second-token passes (budget)


def speculative_seconds(max_new_tokens: int, k: int | str, drafter: str = "model") -> float:
    """One speculative run: rounds of k draft steps and a verify pass, each round yielding
    E[tokens per pass] = (1 - ALPHA^(k+1)) / (1 - ALPHA) tokens (theory). Automatic K is charged
    at the largest K it may choose; prompt lookup drafts for free."""
    k = max(PROFILE_KS) if k == "auto" else k
    t_draft = 0.0 if drafter == "lookup" else T_DRAFT
    rounds = max_new_tokens / expected_tokens_per_pass(ALPHA, k)
    return rounds * (k * t_draft + VERIFY_STEPS * T_STEP)


def target_seconds(max_new_tokens: int) -> float:
    """One target-only run: a target step per token."""
    return max_new_tokens * T_STEP


def ask(seconds: float) -> int:
    """Whole seconds to ask for, the call's setup included, never above MAX_SECONDS."""
    return min(MAX_SECONDS, math.ceil(SETUP_SECONDS + seconds))


def generate_seconds(
    prompt, system="", k=DEFAULTS["k"], auto_k=DEFAULTS["auto_k"],
    temperature=DEFAULTS["temperature"], top_p=DEFAULTS["top_p"], top_k=DEFAULTS["top_k"],
    max_new_tokens=DEFAULTS["max_new_tokens"], seed=DEFAULTS["seed"], drafter=DEFAULTS["drafter"],
    adaptive=DEFAULTS["adaptive"], **_,
) -> int:  # fmt: skip
    """The Generate button: a speculative run, then the target alone."""
    c = parse_run(
        prompt, system, k, temperature, top_p, top_k, max_new_tokens, seed, drafter, adaptive,
        auto_k,
    )  # fmt: skip
    tokens = c.max_new_tokens
    return ask(speculative_seconds(tokens, c.k, c.drafter) + target_seconds(tokens))


def sweep_seconds(
    prompt, system="", ks=SWEEP_DEFAULTS["ks"], temperatures=SWEEP_DEFAULTS["temperatures"],
    top_p=DEFAULTS["top_p"], top_k=DEFAULTS["top_k"], max_new_tokens=DEFAULTS["max_new_tokens"],
    seed=DEFAULTS["seed"], drafter=DEFAULTS["drafter"], adaptive=DEFAULTS["adaptive"], **_,
) -> int:  # fmt: skip
    """The sweep's first event runs its first cell (the target alone and one speculative run;
    ``sweep_next_seconds`` asks for each later cell). Only ZeroGPU asks, so a grid of more than
    ZERO_GPU_SWEEP_CELLS cells is refused here."""
    c = parse_run(
        prompt, system, top_p=top_p, top_k=top_k, max_new_tokens=max_new_tokens, seed=seed,
        drafter=drafter, adaptive=adaptive,
    )  # fmt: skip
    ks, temperatures = parse_grid(ks, temperatures)
    if len(ks) * len(temperatures) > ZERO_GPU_SWEEP_CELLS:
        raise ValueError(
            f"On this ZeroGPU Space a sweep has at most {ZERO_GPU_SWEEP_CELLS} cells (K values x "
            f"temperatures), to fit the {MAX_SECONDS} s of GPU time a call may ask for; "
            f"this one has {len(ks) * len(temperatures)}."
        )
    tokens = c.max_new_tokens
    return ask(target_seconds(tokens) + speculative_seconds(tokens, ks[0], c.drafter))


def sweep_next_seconds(session=None, **_) -> int:
    """One later sweep cell: its speculative run, and the target alone should it be the first
    of a new temperature (charged always: the estimate must not fall short)."""
    plan = getattr(session, "sweep", None)
    if plan is None or plan.finished:
        return ask(0)
    c = plan.next_config()
    tokens = c.max_new_tokens
    return ask(speculative_seconds(tokens, c.k, c.drafter) + target_seconds(tokens))


def exactness_seconds(
    prompt, temperature=EXACT_DEFAULTS["temperature"], top_p=EXACT_DEFAULTS["top_p"],
    k=EXACT_DEFAULTS["k"], n=EXACT_DEFAULTS["n"], seed=EXACT_DEFAULTS["seed"],
    rule=EXACT_DEFAULTS["rule"], **_,
) -> int:  # fmt: skip
    """The exactness check: two prompt passes and the draws, the batched second-token passes,
    and the greedy check's two runs of GREEDY_CHECK_TOKENS."""
    c = parse_run(prompt, k=k, temperature=temperature, top_p=top_p, seed=seed)
    parse_samples(n)
    parse_rule(rule, c.temperature)
    greedy = speculative_seconds(GREEDY_CHECK_TOKENS, c.k) + target_seconds(GREEDY_CHECK_TOKENS)
    return ask(JOINT_SECONDS + greedy)


def step_seconds(
    prompt, k=STEP_DEFAULTS["k"], temperature=STEP_DEFAULTS["temperature"],
    seed=STEP_DEFAULTS["seed"], drafter=STEP_DEFAULTS["drafter"], **_,
) -> int:  # fmt: skip
    """One step-through round: the context's prefill, k draft steps and the verify pass."""
    c = parse_run(prompt, k=k, temperature=temperature, seed=seed, drafter=drafter)
    k = max(PROFILE_KS) if c.k == "auto" else c.k
    return ask(T_STEP + k * T_DRAFT + VERIFY_STEPS * T_STEP)


SECONDS = {  # handler name -> its estimate
    "generate": generate_seconds,
    "sweep": sweep_seconds,
    "sweep_next": sweep_next_seconds,
    "exactness": exactness_seconds,
    "step": step_seconds,
}


def per_request(fn, estimate):
    """spaces.GPU's duration callable for `fn`: the arguments of each call, positional or named,
    bound to `fn`'s parameter names and handed to `estimate` by name."""
    signature = inspect.signature(fn)

    def seconds(*args, **kwargs) -> int:
        return estimate(**signature.bind(*args, **kwargs).arguments)

    return seconds
