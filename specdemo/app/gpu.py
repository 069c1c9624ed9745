"""GPU time on ZeroGPU: what each request may ask ``spaces.GPU`` for, and the GPU functions.

On ZeroGPU every GPU call runs in a worker forked from the main process: its arguments and
every value it returns or yields are pickled, module globals it writes are lost, and it is
charged against the visitor's daily quota before it starts. So a request (``requests``) is
parsed, priced and answered from replay in the main process; only the models' work runs under
``on_gpu``. ``seconds`` budgets a request from the settings the work grows with, and ``check``
refuses one that does not fit, naming the largest setting that does, before any GPU time is
asked for: nothing is clamped, so ZeroGPU never aborts a run it was asked too little for.

The step times below are a budget, not measurements: ``scripts/gpu_smoke.sh`` measures them on
a GPU and fails when a measurement exceeds its budget by half.
"""

import functools
import inspect
import math
import multiprocessing
import os
import pickle

from specdemo import models
from specdemo.app.exactness import GREEDY_CHECK_TOKENS
from specdemo.app.joint import BATCH, EXACT_FIRSTS
from specdemo.app.settings import LIMITS
from specdemo.profile import PROFILE_KS
from specdemo.theory import expected_tokens_per_pass

try:  # Hugging Face's ZeroGPU decorator, on Spaces; a no-op off ZeroGPU.
    import spaces
except ImportError:
    spaces = None

# ZeroGPU refuses a call that asks for more than the visitor's quota left, and charges a call on
# half an RTX Pro 6000 Blackwell ("large") 1.5 times the seconds asked (spaces 0.51.3). A visitor
# who is not signed in has 2 minutes a day, so one call may ask for at most 120 / 1.5 s.
QUOTA_SECONDS = 120  # a day, for a visitor who is not signed in
SIGNED_IN_QUOTA_SECONDS = 300  # a day, for a free account (PRO: 40 minutes)
DURATION_FACTOR = 1.5  # seconds charged per second asked, on the default GPU size

SETUP_SECONDS = 10.0  # each call: the worker's fork, the pair onto the GPU, the step-cost profile
T_STEP = 0.04  # a 4-bit 1.5B target step at batch 1, launch-bound (budget)
T_DRAFT = 0.03  # a 4-bit 0.5B draft step: 24 layers launch nearly as long as 28 (budget)
VERIFY_STEPS = 1.5  # a verify pass over k + 1 tokens, in target steps (1.3 measured on CPU, k = 3)
PREFILL_TOKENS_PER_STEP = 256  # prompt tokens one prefill pass takes for the cost of one step
ALPHA = 0.5  # per draft: below the lowest per-token alpha measured, 0.57 (docs/BENCHMARKS.md)
DRAW_SECONDS = 1e-5  # one draw of the exactness check's first token (vectorised, budget)
BATCH_STEPS = 1.5  # a batched one-token pass of joint.BATCH rows, in steps (budget)
MAX_FIRST_TOKENS = 1024  # distinct first tokens the exactness check pays for on ZeroGPU


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


# ---------------------------------------------------------------- budgets


def prefill_seconds(prompt_tokens: int, t_step: float = T_STEP) -> float:
    """One prefill pass over the prompt."""
    return t_step * (1 + prompt_tokens / PREFILL_TOKENS_PER_STEP)


def speculative_seconds(
    max_new_tokens: int, k: int | str, drafter: str = "model", prompt_tokens: int = 0
) -> float:
    """One speculative run: both prefills, then rounds of k draft steps and a verify pass, each
    round yielding E[tokens per pass] = (1 - ALPHA^(k+1)) / (1 - ALPHA) tokens (theory).
    Automatic K is charged at the largest K it may choose; prompt lookup drafts for free."""
    k = max(PROFILE_KS) if k == "auto" else k
    t_draft = 0.0 if drafter == "lookup" else T_DRAFT
    rounds = max_new_tokens / expected_tokens_per_pass(ALPHA, k)
    prefill = prefill_seconds(prompt_tokens) + prefill_seconds(prompt_tokens, t_draft)
    return prefill + rounds * (k * t_draft + VERIFY_STEPS * T_STEP)


def target_seconds(max_new_tokens: int, prompt_tokens: int = 0) -> float:
    """One target-only run: the prefill, then a target step per token."""
    return prefill_seconds(prompt_tokens) + max_new_tokens * T_STEP


def race_seconds(config, prompt_tokens: int, with_target: bool = True) -> float:
    """A race: the speculative run, and the target alone unless its run is stored."""
    tokens = config.max_new_tokens
    spec = speculative_seconds(tokens, config.k, config.drafter, prompt_tokens)
    return spec + (target_seconds(tokens, prompt_tokens) if with_target else 0.0)


def first_tokens(n: int, temperature: float) -> int:
    """The distinct first tokens the exactness check pays a second-token pass for: the likely
    ones it always shows, and at most one per draw (drafted, direct or resampled), up to
    MAX_FIRST_TOKENS in all (``joint.measure_pairs`` refuses more); greedy draws have two at
    most (the draft's argmax, and the target's when the draft's is rejected)."""
    return EXACT_FIRSTS + (2 if temperature == 0 else min(3 * n, MAX_FIRST_TOKENS))


def exactness_seconds(config, n: int, prompt_tokens: int) -> float:
    """The exactness check: two prompt passes and 2n draws of the first token, a batched pass
    of both models per joint.BATCH distinct first tokens and their second-token draws, then the
    greedy check's two runs."""
    # The second rounds (draws whose first draft was rejected) start a batch of their own.
    batches = math.ceil(first_tokens(n, config.temperature) / BATCH) + 1
    joint = batches * BATCH_STEPS * (T_STEP + T_DRAFT) + 4 * n * DRAW_SECONDS
    prompts = prefill_seconds(prompt_tokens) + prefill_seconds(prompt_tokens, T_DRAFT)
    greedy = speculative_seconds(GREEDY_CHECK_TOKENS, config.k, prompt_tokens=prompt_tokens)
    return prompts + joint + greedy + target_seconds(GREEDY_CHECK_TOKENS, prompt_tokens)


def step_seconds(config, context_tokens: int) -> float:
    """One step-through round: both models' prefill of the context, k draft steps, a verify."""
    k = max(PROFILE_KS) if config.k == "auto" else config.k
    prefill = prefill_seconds(context_tokens) + prefill_seconds(context_tokens, T_DRAFT)
    return prefill + k * T_DRAFT + VERIFY_STEPS * T_STEP


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


def sweep_note(calls: int, seconds: int) -> str:
    """What a sweep costs a ZeroGPU visitor, said before it starts ("" off ZeroGPU)."""
    if not limited():
        return ""
    factor = duration_factor()
    charged = math.ceil(seconds * factor)
    fits = "within" if charged <= QUOTA_SECONDS else "more than"
    return (
        f"On this ZeroGPU Space the default sweep is {calls} GPU calls asking for about "
        f"{seconds} s in all, {charged} s at this GPU's rate of {factor:g}: {fits} the "
        f"{QUOTA_SECONDS // 60} GPU minutes a day of a visitor who is not signed in. Sign in to "
        f"Hugging Face for {SIGNED_IN_QUOTA_SECONDS // 60} minutes a day (a free account); cells "
        "already measured replay without the GPU."
    )


# ---------------------------------------------------------------- GPU functions

# Set to "fork" or "pickle" to run GPU functions as ZeroGPU does, off ZeroGPU: "fork" runs each
# call in a fresh fork of this process, "pickle" only pickles what crosses (for a real GPU,
# where a fork cannot use CUDA the parent started).
EMULATION = os.environ.get("SPECDEMO_ZEROGPU_EMULATION", "")


def on_gpu(fn):
    """`fn(request, ...)` as a GPU function: under spaces.GPU with the request's own seconds on
    ZeroGPU, emulated as set in EMULATION, unchanged everywhere else. Call it once per function,
    before the app launches (ZeroGPU registers its GPU functions at launch)."""
    if EMULATION == "fork":
        return forked(fn)
    if EMULATION == "pickle":
        return pickled(fn)
    if spaces is None or not limited():
        return fn
    return spaces.GPU(duration=lambda request, *_: request.seconds)(fn)


def pickled(fn):
    """`fn` with its arguments and every value it returns or yields pickled and read back."""

    def copy(value):
        return pickle.loads(pickle.dumps(value))

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args, **kwargs):
            for item in fn(*copy(args), **copy(kwargs)):
                yield copy(item)

        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return copy(fn(*copy(args), **copy(kwargs)))

    return call


def forked(fn):
    """`fn` as ZeroGPU runs it: each call in a fresh fork of this process, which keeps nothing
    it writes; arguments and results pickled; a generator stopped at its next item once the
    caller stops reading."""
    context = multiprocessing.get_context("fork")

    def start(args, kwargs):
        pickle.dumps((args, kwargs))  # ZeroGPU sends them through a queue
        receive, send = context.Pipe(duplex=False)
        stop = context.Event()
        worker = context.Process(target=_worker, args=(fn, args, kwargs, send, stop), daemon=True)
        worker.start()
        send.close()
        return worker, receive, stop

    def results(worker, receive, stop):
        try:
            while True:
                kind, value = receive.recv()
                if kind == "error":
                    raise value
                if kind == "end":
                    return
                yield kind, value
        finally:
            stop.set()
            receive.close()
            worker.join(5)
            if worker.is_alive():
                worker.kill()

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args, **kwargs):
            for _, item in results(*start(args, kwargs)):
                yield item

        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return next(value for _, value in results(*start(args, kwargs)))

    return call


def _worker(fn, args, kwargs, send, stop) -> None:
    import torch

    # A fork inherits the parent's OpenMP thread pool without its threads: the first parallel
    # region would wait for them forever, so the emulated worker computes on one thread.
    torch.set_num_threads(1)
    try:
        try:
            result = fn(*args, **kwargs)
            if inspect.isgenerator(result):
                for item in result:
                    send.send(("item", item))
                    if stop.is_set():
                        result.close()
                        break
            else:
                send.send(("return", result))
            send.send(("end", None))
        except Exception as e:
            send.send(("error", e))
        finally:
            send.close()
    finally:
        os._exit(0)  # a fork leaves without running the parent's exit handlers
