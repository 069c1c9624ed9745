"""The app's validation: raw widget or API values in, a checked config out.

Anything that fails raises a ValueError whose message is meant for the user as it stands (the
handlers show it in the browser or return it to the API client). The ranges checked are the
widgets' own (``settings.LIMITS``), so the sliders and the checks cannot disagree.
"""

import math
import numbers
import unicodedata
from dataclasses import dataclass

from specdemo.app.settings import DEFAULTS, DRAFTERS, LIMITS, MAX_PROMPT_CHARS, MAX_SWEEP_CELLS
from specdemo.defaults import DEFAULTS as LIBRARY_DEFAULTS
from specdemo.judge.sampling import EXACT, RULES, AcceptanceRule, SamplingConfig
from specdemo.judge.verify import JUDGES
from specdemo.text import MAX_PROMPT_TOKENS, encode_prompt


@dataclass(frozen=True)
class RunConfig:
    """One generation's settings, checked on construction."""

    prompt: str
    system: str = ""
    k: int | str = DEFAULTS["k"]  # a fixed K, or "auto" (chosen before each round)
    temperature: float = DEFAULTS["temperature"]
    top_p: float | None = LIBRARY_DEFAULTS["top_p"]
    top_k: int | None = LIBRARY_DEFAULTS["top_k"]
    max_new_tokens: int = DEFAULTS["max_new_tokens"]
    seed: int = DEFAULTS["seed"]
    drafter: str = DEFAULTS["drafter"]
    adaptive: bool = DEFAULTS["adaptive"]
    tree_width: int = DEFAULTS["tree_width"]  # 1: a chain; more: a fishbone of siblings
    judge: str = DEFAULTS["verify"]  # who judges the guesses: "token" or "block"

    def __post_init__(self):
        if not self.prompt.strip():
            raise ValueError("The prompt is empty: type a question or pick an example.")
        if self.k != "auto":
            _check_range("K", self.k, *LIMITS["k"])
        _check_range("Temperature", self.temperature, *LIMITS["temperature"])
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"Top-p must be above 0 and at most 1, got {self.top_p}.")
        if self.top_k is not None:
            _check_range("Top-k", self.top_k, 1, LIMITS["top_k"][1])
        _check_range("Max new tokens", self.max_new_tokens, *LIMITS["max_new_tokens"])
        _check_range("Seed", self.seed, *LIMITS["seed"])
        if not isinstance(self.drafter, str) or self.drafter not in DRAFTERS:
            raise ValueError(f"Drafter must be one of {', '.join(DRAFTERS)}; got {self.drafter!r}.")
        _check_range("Tree width", self.tree_width, *LIMITS["tree_width"])
        if not isinstance(self.judge, str) or self.judge not in JUDGES:
            judges = ", ".join(f'"{name}" ({label})' for name, label in JUDGES.items())
            raise ValueError(f"Judge must be one of {judges}; got {self.judge!r}.")

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_k, self.top_p)


def parse_flag(name: str, flag) -> bool:
    """A checkbox's value, or what an API caller sends for it (nothing counts as false)."""
    if not isinstance(flag, bool) and flag is not None:
        raise ValueError(f"{name} must be true or false, got {flag!r}.")
    return bool(flag)


def parse_run(
    prompt,
    system="",
    k=DEFAULTS["k"],
    temperature=DEFAULTS["temperature"],
    top_p=DEFAULTS["top_p"],
    top_k=DEFAULTS["top_k"],
    max_new_tokens=DEFAULTS["max_new_tokens"],
    seed=DEFAULTS["seed"],
    drafter=DEFAULTS["drafter"],
    adaptive=DEFAULTS["adaptive"],
    auto_k=False,
    tree_width=DEFAULTS["tree_width"],
    judge=DEFAULTS["verify"],
) -> RunConfig:
    """Raw widget values (or anything an API caller sends) -> RunConfig, or a clear ValueError.

    Top-p 1 and top-k 0 mean "off"; K is "auto" when `auto_k` is set or K itself says "auto";
    control characters other than newline and tab are dropped.
    """
    adaptive, auto_k = parse_flag("Adaptive K", adaptive), parse_flag("Auto K", auto_k)
    top_p, top_k = _number("Top-p", top_p), _number("Top-k", top_k, integer=True)
    return RunConfig(
        prompt=clean_text(prompt, "prompt"),
        system=clean_text(system, "system prompt"),
        k="auto" if auto_k else _k(k),
        temperature=_number("Temperature", temperature),
        top_p=None if top_p == 1.0 else top_p,
        top_k=None if top_k == 0 else top_k,
        max_new_tokens=_number("Max new tokens", max_new_tokens, integer=True),
        seed=_number("Seed", seed, integer=True),
        drafter=drafter,
        adaptive=adaptive,
        tree_width=_number("Tree width", tree_width, integer=True),
        judge=judge,
    )


def parse_rule(rule, temperature: float) -> AcceptanceRule:
    """The exactness tab's acceptance rule, by name; a mistake only shows when sampling."""
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"Rule must be one of {', '.join(RULES)}; got {rule!r}.")
    if RULES[rule] != EXACT and temperature == 0:
        raise ValueError(
            "The acceptance rules differ only when sampling: at temperature 0 a draft is kept "
            "when it equals the target's argmax. Raise the temperature to compare rules."
        )
    return RULES[rule]


def parse_samples(n) -> int:
    """The exactness tab's sample count."""
    n = _number("N", n, integer=True)
    _check_range("N", n, *LIMITS["n"])
    return n


def parse_grid(ks, temperatures) -> tuple[list[int], list[float]]:
    """The sweep's K values and temperatures: lists, or comma-separated text from the API."""
    ks = {_k(k) for k in _items(ks)}
    ks = sorted(k for k in ks if k != "auto") + ["auto"] * ("auto" in ks)
    temperatures = sorted({_number("Temperature", t) for t in _items(temperatures)})
    if not ks or not temperatures:
        raise ValueError("Pick at least one K and one temperature for the sweep.")
    for k in ks:
        if k != "auto":
            _check_range("K", k, *LIMITS["k"])
    for t in temperatures:
        _check_range("Temperature", t, *LIMITS["temperature"])
    if len(ks) * len(temperatures) > MAX_SWEEP_CELLS:
        raise ValueError(f"A sweep has at most {MAX_SWEEP_CELLS} cells (K values x temperatures).")
    return ks, temperatures


def clean_text(text, name: str = "prompt") -> str:
    """Text without control characters (newline and tab stay) or unpaired surrogates."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValueError(f"The {name} must be text, got {type(text).__name__}.")
    if len(text) > MAX_PROMPT_CHARS:  # checked before the character scan below
        raise ValueError(
            f"The {name} is too long: {len(text):,} characters, and the limit is "
            f"{MAX_PROMPT_CHARS:,} (about {MAX_PROMPT_TOKENS:,} tokens)."
        )
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(
        ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cs")
    )


def encode(pair, config: RunConfig) -> list[int]:
    """The prompt's token ids (chat template applied), within the context cap."""
    ids = encode_prompt(pair.tokenizer, config.prompt, system=config.system or None)
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ValueError(
            f"The prompt is {len(ids):,} tokens long; the limit is {MAX_PROMPT_TOKENS:,}. "
            "Please shorten it."
        )
    room = getattr(pair.target.config, "max_position_embeddings", None)
    if room and len(ids) + config.max_new_tokens > room:
        raise ValueError(
            f"The prompt ({len(ids):,} tokens) plus {config.max_new_tokens} new tokens does not "
            f"fit the model's context of {room:,} tokens: shorten it or lower max new tokens."
        )
    return ids


def _number(name: str, value, integer: bool = False) -> int | float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}.") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}.")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}.")
    if integer:
        if value != int(value):
            raise ValueError(f"{name} must be a whole number, got {value}.")
        return int(value)
    return float(value)


def _k(value) -> int | str:
    """A K: a whole number, or "auto"."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return _number("K", value, integer=True)


def _check_range(name: str, value, lo, hi) -> None:
    if not lo <= value <= hi:  # NaN fails too
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}.")


def _items(values) -> list:
    if isinstance(values, str):
        return [v for v in values.replace(";", ",").split(",") if v.strip()]
    if isinstance(values, (list, tuple)):
        return list(values)
    return [] if values is None else [values]
