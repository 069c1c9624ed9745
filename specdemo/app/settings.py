"""What the app's widgets offer and start at: their ranges, the starting values of each tab, the
drafters by their labels, and the example prompts. ``config`` checks any value against the same
ranges, so the sliders and the checks cannot disagree.
"""

import json
from importlib.resources import files

from specdemo.defaults import DEFAULTS as LIBRARY_DEFAULTS
from specdemo.judge.sampling import EXACT
from specdemo.text import MAX_PROMPT_TOKENS

DATA = files("specdemo") / "data"  # shipped inside the package, so any install finds it

# Widget ranges; the same bounds are enforced on values that arrive through the API.
LIMITS = {
    "k": (1, 16),
    "temperature": (0.0, 2.0),
    "top_k": (0, 200),  # 0 means off
    "max_new_tokens": (1, 1024),
    "seed": (0, 2**32 - 1),
    "n": (100, 100_000),
    "tree_width": (1, 4),
}
# The library's defaults as widget values: a widget has no None, so top_p = 1.0 and top_k = 0 say
# "off" (parse_run maps them back). `n` is the app's own: the exactness tab's sample count.
# K is a slider and an "Auto K" box: auto_k says whether K is chosen per round, k is the fixed K.
DEFAULTS = {
    **LIBRARY_DEFAULTS,
    "k": 5 if LIBRARY_DEFAULTS["k"] == "auto" else LIBRARY_DEFAULTS["k"],
    "auto_k": LIBRARY_DEFAULTS["k"] == "auto",
    "top_p": LIBRARY_DEFAULTS["top_p"] or 1.0,
    "top_k": LIBRARY_DEFAULTS["top_k"] or 0,
    "n": 20_000,
}
# The other tabs start where their lesson shows best: sampling at T = 1; K = 4 to step through.
# Is it exact? starts on a prompt whose first token the embedded pair spreads over several
# words that its two models weigh differently. At these defaults, on either 4-bit kernel, each
# mistake the first token shows moves a shown bar by 0.12 or more, caught by N = 20,000 draws
# with probability above 0.99 (tests/app/exact/test_app_exactness.py); block-prefix moves the
# first two tokens 0.18 or more in total variation, as computed from both models' rows.
EXACT_PROMPT = "Name a fruit. Answer with one word."
EXACT_DEFAULTS = {**DEFAULTS, "temperature": 1.0, "rule": EXACT.name, "prompt": EXACT_PROMPT}
STEP_DEFAULTS = {**DEFAULTS, "k": 4, "temperature": 1.0}
SWEEP_DEFAULTS = {"ks": (1, 2, 4, "auto"), "temperatures": (0.0, 1.0)}
DRAFTERS = {
    "model": "Draft model",
    "lookup": "Prompt lookup",
    "hybrid": "Hybrid: lookup, else draft model",
    "suffix": "Copy from the context (suffix index)",
    "suffix-hybrid": "Copy when the text repeats, else the draft model",
}
MAX_PROMPT_CHARS = 16 * MAX_PROMPT_TOKENS  # refuse before tokenizing megabytes
MAX_SWEEP_CELLS = 64


def load_examples() -> list[dict]:
    """Example prompts from specdemo/data/prompts.json: label, prompt, drafter. Empty when
    missing."""
    try:
        examples = json.loads((DATA / "prompts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [e for e in examples if e.get("prompt") and e.get("drafter", "model") in DRAFTERS]
