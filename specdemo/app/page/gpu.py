"""GPU time on ZeroGPU: what each request may ask ``spaces.GPU`` for.

On ZeroGPU every GPU call runs in a worker forked from the main process: its arguments and
every value it returns or yields are pickled, module globals it writes are lost, and it starts
only if the visitor's daily quota can cover it. So a request (``jobs``) is parsed, priced
and answered from replay in the main process; only the models' work runs on the GPU
(``gpu_calls.on_gpu``). ``seconds`` budgets a request from the settings the work grows with
and the loaded pair's own step budgets (``Budget``, from ``dispatch.step_budget``), and
``check`` refuses one that does not fit, naming the largest setting that fits, before any GPU
time is asked for: nothing is clamped, so ZeroGPU never aborts a run it was asked too little
for. ``gpu_notes`` says all this to the visitor.

The step budgets are an upper bound, not measurements: ``scripts/gpu_smoke.sh`` measures the
steps on a GPU and fails when a measurement exceeds its budget by half.
"""

import math
from dataclasses import dataclass

from specdemo import models
from specdemo.app.exact.exactness import GREEDY_CHECK_TOKENS
from specdemo.app.exact.joint import BATCH, EXACT_FIRSTS
from specdemo.app.settings import LIMITS
from specdemo.cost import dispatch
from specdemo.cost.profile import PROFILE_KS
from specdemo.cost.theory import expected_tokens_per_pass
from specdemo.runtime.steps import resolve_target_step

# ZeroGPU (spaces 0.51.3, zero/client.py) admits a call on the default GPU size ("large", half an
# RTX Pro 6000 Blackwell) only if the visitor's quota left covers the seconds asked times the
# GPU's duration_factor (1.5); it then charges the seconds the call uses, once ("large" costs 1x
# quota, "xlarge" 2x: the Hub's ZeroGPU page). So one call may ask for at most 120 / 1.5 s.
QUOTA_SECONDS = 120  # a day, for visitors who are not signed in (shared per IP address)
SIGNED_IN_QUOTA_SECONDS = 300  # a day, for a free account
PRO_QUOTA_SECONDS = 2400  # a day, for a PRO account
DURATION_FACTOR = 1.5  # admission: quota needed per second asked, on the default GPU size

SETUP_SECONDS = 10.0  # each call: the worker's fork, the pair onto the GPU, the step-cost profile
VERIFY_STEPS = 1.5  # a verify pass over k + 1 tokens, in target steps (1.3 measured on CPU, k = 3)
PREFILL_TOKENS_PER_STEP = 256  # prompt tokens one prefill pass takes for the cost of one step
COPY_ONLY = ("lookup", "suffix")  # drafters that run no draft model (drafters.make_drafter)
ALPHA = 0.5  # per draft: below the lowest per-token alpha the benchmarks measured (a budget)
DRAW_SECONDS = 1e-5  # one draw of the exactness check's first token (vectorised, budget)
BATCH_STEPS = 1.5  # a batched one-token pass of joint.BATCH rows, in steps (budget)
MAX_FIRST_TOKENS = 1024  # distinct first tokens the exactness check pays for on ZeroGPU
# One CUDA graph captured (a pass of one row count): budget, above the 83-119 ms an H200
# measured for the draft's step (docs/bench/gpu-smoke-h200.md). Each ZeroGPU call is a fresh
# fork, so a call whose target passes run captured pays for every shape it uses, once.
CAPTURE_SECONDS = 0.25


@dataclass(frozen=True)
class Budget:
    """Seconds budgeted on a GPU for one eager step of a pair's target and of its draft (with
    the drafter's cut head), from each model's depth and bytes (``dispatch.step_budget``)."""

    t_step: float
    t_draft: float

    @classmethod
    def of_archs(cls, target: dispatch.Arch, draft: dispatch.Arch) -> "Budget":
        t_draft = dispatch.step_budget(draft, dispatch.draft_head_rows(draft))
        return cls(dispatch.step_budget(target), t_draft)


# The embedded pair's (Qwen2.5-Coder 1.5B verified by 0.5B), for a request made without a pair.
EMBEDDED = Budget.of_archs(dispatch.ARCHS["1.5B"], dispatch.ARCHS["0.5B"])


def budget_of(pair) -> Budget:
    """The loaded pair's budget, read from its models' configs; a pair without loaded models
    (a page still preparing) takes the embedded pair's."""
    try:
        target, draft = pair.target.config, pair.draft.config
    except AttributeError:
        return EMBEDDED
    return Budget.of_archs(dispatch.arch_of_config(target), dispatch.arch_of_config(draft))


def duration_factor() -> float:
    """Seconds ZeroGPU charges per second asked on this Space's default GPU size (spaces reads
    its GPU on ZeroGPU only; elsewhere, that of ZeroGPU's current GPU)."""
    if not limited():
        return DURATION_FACTOR
    try:
        from spaces.zero import config

        return float(config.get_config()["duration_factor"])
    except Exception:  # off ZeroGPU, or a spaces release without it
        return DURATION_FACTOR


def limited() -> bool:
    """Whether GPU calls are priced: on a ZeroGPU Space."""
    return models.zero_gpu()


def max_seconds() -> int:
    """The most one call may ask for: a visitor's whole daily quota, charged at the factor."""
    return math.floor(QUOTA_SECONDS / duration_factor())


def prefill_seconds(prompt_tokens: int, t_step: float) -> float:
    """One prefill pass over the prompt, for a model whose step costs `t_step`."""
    return t_step * (1 + prompt_tokens / PREFILL_TOKENS_PER_STEP)


def speculative_seconds(
    max_new_tokens: int,
    k: int | str,
    drafter: str = "model",
    prompt_tokens: int = 0,
    budget: Budget = EMBEDDED,
) -> float:
    """One speculative run: both prefills, then rounds of k draft steps and a verify pass, each
    round yielding E[tokens per pass] = (1 - ALPHA^(k+1)) / (1 - ALPHA) tokens (theory).
    Automatic K is charged at the largest K it may choose; a drafter that only copies (prompt
    lookup, the suffix index) drafts for free."""
    k = max(PROFILE_KS) if k == "auto" else k
    t_draft = 0.0 if drafter in COPY_ONLY else budget.t_draft
    rounds = max_new_tokens / expected_tokens_per_pass(ALPHA, k)
    prefill = prefill_seconds(prompt_tokens, budget.t_step) + prefill_seconds(
        prompt_tokens, t_draft
    )
    return prefill + rounds * (k * t_draft + VERIFY_STEPS * budget.t_step)


def target_seconds(max_new_tokens: int, prompt_tokens: int = 0, budget: Budget = EMBEDDED) -> float:
    """One target-only run: the prefill, then a target step per token."""
    return prefill_seconds(prompt_tokens, budget.t_step) + max_new_tokens * budget.t_step


def capture_seconds(k: int | str, tree_width: int | str = 1) -> float:
    """The captures a request pays for when the target's passes run as CUDA graphs
    (SPECDEMO_TARGET_STEP graph, or auto, which may choose them): the plain step and one graph
    per verify pass's row count it may use, each captured lazily on first use; 0 when the
    target runs eager."""
    if resolve_target_step(None, "cuda") not in ("graph", "auto"):
        return 0.0
    widths = max(PROFILE_KS) if tree_width == "auto" else int(tree_width)
    ks = len(PROFILE_KS) if k == "auto" else 1
    return CAPTURE_SECONDS * (1 + ks * widths)


def race_seconds(config, prompt_tokens: int, with_target: bool = True, budget=EMBEDDED) -> float:
    """A race: the speculative run, and the target alone unless its run is stored, and the
    target's captures when its passes run as CUDA graphs."""
    tokens = config.max_new_tokens
    spec = speculative_seconds(tokens, config.k, config.drafter, prompt_tokens, budget)
    spec += capture_seconds(config.k, config.tree_width)
    return spec + (target_seconds(tokens, prompt_tokens, budget) if with_target else 0.0)


def first_tokens(n: int, temperature: float) -> int:
    """The distinct first tokens the exactness check pays a second-token pass for: the likely
    ones it always shows, and at most one per draw (drafted, direct or resampled), up to
    MAX_FIRST_TOKENS in all (``joint.measure_pairs`` refuses more); greedy draws have two at
    most (the draft's argmax, and the target's when the draft's is rejected)."""
    return EXACT_FIRSTS + (2 if temperature == 0 else min(3 * n, MAX_FIRST_TOKENS))


def exactness_seconds(config, n: int, prompt_tokens: int, budget: Budget = EMBEDDED) -> float:
    """The exactness check: two prompt passes and 2n draws of the first token, a batched pass
    of both models per joint.BATCH distinct first tokens and their second-token draws, then the
    greedy check's two runs."""
    # The second rounds (draws whose first draft was rejected) start a batch of their own.
    batches = math.ceil(first_tokens(n, config.temperature) / BATCH) + 1
    steps = budget.t_step + budget.t_draft
    joint = batches * BATCH_STEPS * steps + 4 * n * DRAW_SECONDS
    prompts = prefill_seconds(prompt_tokens, budget.t_step)
    prompts += prefill_seconds(prompt_tokens, budget.t_draft)
    greedy = speculative_seconds(GREEDY_CHECK_TOKENS, config.k, "model", prompt_tokens, budget)
    return prompts + joint + greedy + target_seconds(GREEDY_CHECK_TOKENS, prompt_tokens, budget)


def step_seconds(config, context_tokens: int, budget: Budget = EMBEDDED) -> float:
    """One step-through round: both models' prefill of the context, k draft steps, a verify."""
    k = max(PROFILE_KS) if config.k == "auto" else config.k
    prefill = prefill_seconds(context_tokens, budget.t_step)
    prefill += prefill_seconds(context_tokens, budget.t_draft)
    return prefill + k * budget.t_draft + VERIFY_STEPS * budget.t_step


def ask(seconds: float) -> int:
    """Whole seconds to ask for, the call's setup included."""
    return math.ceil(SETUP_SECONDS + seconds)


def check(request) -> None:
    """On ZeroGPU, refuse a request whose GPU budget does not fit one call, before any GPU time
    is asked for: a ValueError naming the largest setting that fits (``request.fits``)."""
    if not limited() or request.seconds <= max_seconds():
        return
    raise ValueError(
        f"This request needs about {request.seconds} s of GPU time, more than the "
        f"{max_seconds()} s one call may ask for on this ZeroGPU Space. {request.fits()}"
    )


def largest(fits, low: int, high: int) -> int | None:
    """The largest integer in [low, high] for which `fits` holds (it holds below any value it
    holds for); None when it holds for none."""
    if not fits(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def largest_tokens(seconds_for) -> int | None:
    """The most new tokens whose budget (`seconds_for(tokens)`, asked whole) fits one call."""
    high = LIMITS["max_new_tokens"][1]
    return largest(lambda n: ask(seconds_for(n)) <= max_seconds(), 1, high)


def sweep_calls(requests) -> tuple[int, int]:
    """(calls, seconds asked in all) for a sweep's cells, the target alone once per temperature."""
    return len(requests), sum(r.seconds for r in requests)


def runs_within(quota: int, seconds: int) -> int:
    """How many calls of `seconds` a quota of `quota` seconds starts at least: each starts while
    `duration_factor` times its ask is left, and is charged at most its ask."""
    needed = math.ceil(seconds * duration_factor())
    return 0 if quota < needed else 1 + (quota - needed) // seconds
