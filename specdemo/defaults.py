"""The one set of generation defaults that the library, the command line and the app share.

K is chosen per round by default, so a pair never runs slower than its target alone when drafting
does not pay. Temperature 0.7 shows accepted, resampled and bonus tokens all at once, and seed 0
makes a first run reproducible on a projector; pass ``seed=None`` for fresh randomness.
On a CUDA GPU a step costs per layer, so the embedded pair's draft model costs nearly its
target's step (docs/BENCHMARKS.md, "GPU (predicted from the dispatch model)") and cannot pay
alone: there the default drafter is the hybrid, whose rounds automatic K prices one by one from
the measured costs (a free copy, a draft-model guess or a plain target step).
"""

DEFAULTS = {
    "k": "auto",  # chosen before each round from costs measured on this machine (policy.AutoK)
    "temperature": 0.7,
    "top_k": None,
    "top_p": None,
    "max_new_tokens": 128,
    "seed": 0,
    "drafter": "model",
    "adaptive": False,
    "tree_width": 1,  # guesses tried per position: 1 is the chain (engine.speculative_generate)
    "verify": "token",  # the judge: "token" (each draft on its own) or "block" (verify.py)
}


# Every drafter by name (``drafters.make_drafter``): the draft model, prompt lookup (n-grams),
# their hybrid, copies from the suffix index (``suffix``), and its hybrid with the model.
DRAFTERS = ("model", "lookup", "hybrid", "suffix", "suffix-hybrid")


def default_drafter(device) -> str:
    """The drafter used when none is named: "hybrid" on CUDA, else DEFAULTS["drafter"]."""
    return "hybrid" if str(device).startswith("cuda") else DEFAULTS["drafter"]
