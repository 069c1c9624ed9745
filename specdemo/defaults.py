"""The one set of generation defaults that the library, the command line and the app share.

K is chosen per round by default, so a pair never runs slower than its target alone when drafting
does not pay. Temperature 0.7 shows accepted, resampled and bonus tokens all at once, and seed 0
makes a first run reproducible on a projector; pass ``seed=None`` for fresh randomness.
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
}
