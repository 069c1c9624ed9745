"""What a ZeroGPU Space asks of its visitors' quotas, as the app's own gpu.py prices its jobs
for a default prompt: INSTALL's hosting section and WORKSHOP's room both quote it."""

import functools

PROMPT = "Write a Python function that checks whether a number is prime."  # the app's example
PROMPT_TOKENS = 40  # a default prompt's length with its chat template, about


@functools.cache
def zerogpu_jobs():
    """The default run, exactness check, step and sweep of a 40-token prompt, and the budgets
    of the embedded pair and of the 48-layer 14B, as gpu.py prices them."""
    from specdemo.app.config import parse_run
    from specdemo.app.page import gpu, jobs
    from specdemo.app.settings import EXACT_DEFAULTS, SWEEP_DEFAULTS
    from specdemo.cost.dispatch import ARCHS

    ids = tuple(range(PROMPT_TOKENS))
    deep = gpu.Budget.of_archs(ARCHS["14B"], ARCHS["0.5B"])
    exact = parse_run(PROMPT, k=EXACT_DEFAULTS["k"], temperature=1.0)
    sweep = jobs.Sweep(parse_run(PROMPT), SWEEP_DEFAULTS["ks"], SWEEP_DEFAULTS["temperatures"], ids)
    return {
        "gpu": gpu,
        "deep": deep,
        "run": jobs.Race(parse_run(PROMPT, k="auto"), ids).seconds,
        "run_14b": jobs.Race(parse_run(PROMPT, k="auto"), ids, budget=deep).seconds,
        "exact": jobs.ExactnessCheck(exact, ids, EXACT_DEFAULTS["n"], None).seconds,
        "step": jobs.StepThrough(parse_run(PROMPT, k=4, temperature=1.0), PROMPT_TOKENS).seconds,
        "sweep": gpu.sweep_calls(sweep.cells()),
    }
