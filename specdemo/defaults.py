"""The one set of generation defaults that the library, the command line and the app share.

K is chosen per round by default, so a pair never runs slower than its target alone when drafting
does not pay. Temperature 0.7 shows accepted, resampled and bonus tokens all at once, and seed 0
makes a first run reproducible on a projector; pass ``seed=None`` for fresh randomness.
The default drafter copies from the context where the text repeats itself and asks the draft
model otherwise ("suffix-hybrid": automatic K prices each round's copy, draft-model guess or
plain step from the measured costs). On code and prose it runs the draft model's rounds, as fast
as the draft model alone; on an answer that returns its input (an edited file) its copies run far
longer guesses for no draft step (docs/BENCHMARKS.md, "Edits: copying from the context"). On a
CUDA GPU a step costs per layer, so the draft model costs nearly its target's step and copies are
what pays there ("GPU (predicted from the dispatch model)").
"""

DEFAULTS = {
    "k": "auto",  # chosen before each round from costs measured on this machine (policy.AutoK)
    "temperature": 0.7,
    "top_k": None,
    "top_p": None,
    "max_new_tokens": 128,
    "seed": 0,
    "drafter": "suffix-hybrid",  # a copy where the text repeats, else the draft model
    "adaptive": False,
    "tree_width": 1,  # guesses tried per position: 1 is the chain (engine.speculative_generate)
    "verify": "token",  # the judge: "token" (each draft on its own) or "block" (verify.py)
}


# Every drafter by name (``drafters.make_drafter``): the draft model, prompt lookup (n-grams),
# their hybrid, copies from the suffix index (``suffix``), and its hybrid with the model.
DRAFTERS = ("model", "lookup", "hybrid", "suffix", "suffix-hybrid")


def default_drafter(device) -> str:
    """The drafter used when none is named, on any device (`device` kept for callers that name
    one): DEFAULTS["drafter"]."""
    return DEFAULTS["drafter"]
