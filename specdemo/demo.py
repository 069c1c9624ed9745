"""The app's logic without Gradio: widget values in, engine runs, plain results out.

``parse_run`` turns raw widget or API values into a validated ``RunConfig`` (a ValueError with a
message meant for the user otherwise); the run, sweep, exactness and step-through functions take
a loaded pair and a config and return dataclasses, dicts and Markdown that ``ui.py`` displays.
Nothing here holds state between calls: what a session accumulates lives in a ``Session``.
"""

import contextlib
import csv
import json
import math
import numbers
import shutil
import tempfile
import time
import unicodedata
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from scipy.stats import chisquare

from specdemo import models
from specdemo.drafters import forward
from specdemo.engine import (
    Round,
    Stats,
    autoregressive_generate,
    eos_ids,
    make_drafter,
    make_generator,
    speculative_generate,
)
from specdemo.render import round_spans
from specdemo.sampling import SamplingConfig, first_token_samples, logits_to_probs, pad_vocab
from specdemo.text import MAX_PROMPT_TOKENS, Detokenizer, encode_prompt

ASSETS = Path(__file__).resolve().parent.parent / "assets"

# Widget ranges; the same bounds are enforced on values that arrive through the API.
LIMITS = {
    "k": (1, 16),
    "temperature": (0.0, 2.0),
    "top_k": (0, 200),  # 0 means off
    "max_new_tokens": (1, 1024),
    "seed": (0, 2**32 - 1),
    "n": (100, 100_000),
}
DEFAULTS = {
    "k": 5,
    "temperature": 0.7,
    "top_p": 1.0,
    "top_k": 0,
    "max_new_tokens": 128,
    "seed": 0,
    "drafter": "model",
    "adaptive": False,
    "n": 20_000,
}
DRAFTERS = {"model": "Draft model", "lookup": "Prompt lookup"}
MAX_PROMPT_CHARS = 16 * MAX_PROMPT_TOKENS  # refuse before tokenizing megabytes
MAX_SWEEP_CELLS = 64
STEP_LIMIT = 512  # new tokens in the step-through tab
GREEDY_CHECK_TOKENS = 64

SAME_DISTRIBUTION_NOTE = (
    "Both runs use the same seed. With temperature above 0 the two answers are different "
    "*samples*, so their words differ, yet every speculative token is drawn from exactly the "
    "target's distribution: both are samples of one distribution (the **Is it exact?** tab "
    "shows it). With temperature 0 (greedy) the two answers match token for token."
)


# ---------------------------------------------------------------- validation


@dataclass(frozen=True)
class RunConfig:
    """One generation's settings, checked on construction."""

    prompt: str
    system: str = ""
    k: int = DEFAULTS["k"]
    temperature: float = DEFAULTS["temperature"]
    top_p: float | None = None
    top_k: int | None = None
    max_new_tokens: int = DEFAULTS["max_new_tokens"]
    seed: int = DEFAULTS["seed"]
    drafter: str = DEFAULTS["drafter"]
    adaptive: bool = DEFAULTS["adaptive"]

    def __post_init__(self):
        if not self.prompt.strip():
            raise ValueError("The prompt is empty: type a question or pick an example.")
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

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(self.temperature, self.top_k, self.top_p)


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
) -> RunConfig:
    """Raw widget values (or anything an API caller sends) -> RunConfig, or a clear ValueError.

    Top-p 1 and top-k 0 mean "off"; control characters other than newline and tab are dropped.
    """
    if not isinstance(adaptive, bool) and adaptive is not None:
        raise ValueError(f"Adaptive K must be true or false, got {adaptive!r}.")
    top_p, top_k = _number("Top-p", top_p), _number("Top-k", top_k, integer=True)
    return RunConfig(
        prompt=clean_text(prompt, "prompt"),
        system=clean_text(system, "system prompt"),
        k=_number("K", k, integer=True),
        temperature=_number("Temperature", temperature),
        top_p=None if top_p == 1.0 else top_p,
        top_k=None if top_k == 0 else top_k,
        max_new_tokens=_number("Max new tokens", max_new_tokens, integer=True),
        seed=_number("Seed", seed, integer=True),
        drafter=drafter,
        adaptive=bool(adaptive),
    )


def parse_samples(n) -> int:
    """The exactness tab's sample count."""
    n = _number("N", n, integer=True)
    _check_range("N", n, *LIMITS["n"])
    return n


def parse_grid(ks, temperatures) -> tuple[list[int], list[float]]:
    """The sweep's K values and temperatures: lists, or comma-separated text from the API."""
    ks = sorted({_number("K", k, integer=True) for k in _items(ks)})
    temperatures = sorted({_number("Temperature", t) for t in _items(temperatures)})
    if not ks or not temperatures:
        raise ValueError("Pick at least one K and one temperature for the sweep.")
    for k in ks:
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
    return "".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cs"))


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


def _check_range(name: str, value, lo, hi) -> None:
    if not lo <= value <= hi:  # NaN fails too
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}.")


def _items(values) -> list:
    if isinstance(values, str):
        return [v for v in values.replace(";", ",").split(",") if v.strip()]
    if isinstance(values, (list, tuple)):
        return list(values)
    return [] if values is None else [values]


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


# ---------------------------------------------------------------- generation


@dataclass
class SpecRun:
    """A speculative run so far; ``run_speculative`` yields this same object after each round."""

    stats: Stats = field(default_factory=Stats)
    spans: list[tuple[str, str]] = field(default_factory=list)  # rejected drafts included
    tokens: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)  # per round
    drafted: list[int] = field(default_factory=list)  # per round (k, or fewer)
    seconds: float = 0.0  # time inside the engine: rendering and sending are not counted

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0


@dataclass
class TargetRun:
    """A target-only run so far; one target pass per token."""

    spans: list[tuple[str, str]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0


def timed(iterator: Iterable) -> Iterator[tuple[object, float]]:
    """Each item with the seconds spent producing it, so the consumer's own time is excluded.

    The engine synchronises the device before it yields, so on CUDA this is the real cost.
    """
    iterator = iter(iterator)
    while True:
        start = time.perf_counter()
        try:
            item = next(iterator)
        except StopIteration:
            return
        yield item, time.perf_counter() - start


def run_speculative(pair, config: RunConfig, ids: list[int]) -> Iterator[SpecRun]:
    """Speculative generation, yielding the growing run after every target pass."""
    device = pair.target.device
    generator = make_generator(config.seed, device)
    drafter = make_drafter(
        config.drafter, pair.draft, config.sampling, generator, device, config.adaptive
    )
    run, detok = SpecRun(), Detokenizer(pair.tokenizer)
    rounds = speculative_generate(
        pair.target,
        drafter,
        ids,
        k=config.k,
        sampling=config.sampling,
        max_new_tokens=config.max_new_tokens,
        generator=generator,
        stats=run.stats,
    )
    for r, seconds in timed(rounds):
        run.seconds += seconds
        run.tokens += r.tokens
        run.spans += round_spans(r, detok, show_rejected=True)
        run.accepted.append(r.n_accepted)
        run.drafted.append(r.k)
        yield run


def run_target(pair, config: RunConfig, ids: list[int]) -> Iterator[TargetRun]:
    """The baseline with the same seed and sampling, yielding the growing run after each token."""
    run, detok = TargetRun(), Detokenizer(pair.tokenizer)
    steps = autoregressive_generate(
        pair.target,
        ids,
        sampling=config.sampling,
        max_new_tokens=config.max_new_tokens,
        generator=make_generator(config.seed, pair.target.device),
    )
    for step, seconds in timed(steps):
        run.seconds += seconds
        run.tokens.append(step.token)
        piece = detok.push(step.token)
        if piece:
            run.spans.append((piece, "target"))
        yield run


def warm_up(pair) -> None:
    """One short run of each kind, so the first timed run does not pay one-time start-up costs."""
    models.warm_up(pair)  # bitsandbytes' one-off weight repacking, and its scratch memory freed
    config = RunConfig("Hello", k=2, temperature=1.0, max_new_tokens=8)
    ids = encode(pair, config)
    last(run_speculative(pair, config, ids))
    last(run_target(pair, config, ids))


def last(iterator: Iterable):
    """The final item (None when there is none)."""
    tail = deque(iterator, maxlen=1)
    return tail[0] if tail else None


def visible_spans(spans: list[tuple[str, str]], show_rejected: bool) -> list[tuple[str, str]]:
    return spans if show_rejected else [s for s in spans if s[1] != "rejected"]


def record(config: RunConfig, spec: SpecRun, target: TargetRun) -> dict:
    """One row of the session's results."""
    s = spec.stats
    greedy_match = spec.tokens == target.tokens if config.temperature == 0 else None
    return {
        "k": config.k,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "top_k": config.top_k,
        "drafter": config.drafter,
        "adaptive": config.adaptive,
        "seed": config.seed,
        "max_new_tokens": config.max_new_tokens,
        "alpha": s.alpha,
        "alpha_per_token": s.alpha_per_token,
        "tokens_per_pass": s.tokens_per_pass,
        "c": s.c,
        "spec_tokens": len(spec.tokens),
        "spec_seconds": spec.seconds,
        "spec_tokens_per_s": spec.tokens_per_s,
        "spec_target_passes": s.target_passes,
        "target_tokens": len(target.tokens),
        "target_seconds": target.seconds,
        "target_tokens_per_s": target.tokens_per_s,
        "target_passes": len(target.tokens),
        "speedup": spec.tokens_per_s / target.tokens_per_s if target.tokens_per_s else 0.0,
        "greedy_match": greedy_match,
    }


COMPARISON_ROWS = [
    "Tokens/s",
    "Wall time",
    "Acceptance rate α",
    "Tokens per target pass",
    "Target passes (with prefill)",
    "New tokens",
]


def comparison_markdown(
    spec: SpecRun | None, target: TargetRun | None, finished: RunConfig | None = None
) -> str:
    """The side-by-side numbers, a run still to come showing dots; once both runs have
    `finished` (under that config), a note on whether their tokens agree."""
    speedup = "…"
    if spec and target and target.tokens_per_s:
        speedup = f"**{spec.tokens_per_s / target.tokens_per_s:.2f}×**"
    rows = list(zip(COMPARISON_ROWS, _column(spec), _column(target), strict=True))
    rows.insert(2, ("Speedup", speedup, "1×"))
    lines = ["| | Speculative | Target alone |", "|---|---:|---:|"]
    lines += [f"| {name} | {a} | {b} |" for name, a, b in rows]
    if finished is not None:
        lines += ["", same_tokens_note(spec.tokens, target.tokens, finished.temperature == 0)]
    return "\n".join(lines)


def _column(run: SpecRun | TargetRun | None) -> list[str]:
    if run is None or not run.tokens:
        return ["…"] * len(COMPARISON_ROWS)
    n, timing = len(run.tokens), [f"{run.tokens_per_s:.1f}", f"{run.seconds:.2f} s"]
    if isinstance(run, TargetRun):
        return [*timing, "—", "1", f"{n}", f"{n}"]
    s = run.stats
    return [*timing, f"{s.alpha:.2f}", f"{s.tokens_per_pass:.2f}", f"{s.target_passes}", f"{n}"]


def same_tokens_note(spec: list[int], target: list[int], greedy: bool) -> str:
    if spec == target:
        return "The two answers are identical, token for token."
    n = common_prefix(spec, target)
    tokens = f"{n} token{'' if n == 1 else 's'}"
    if greedy:
        return (
            f"The greedy answers agree for {tokens}, then differ: rounding in the batched verify "
            "pass can flip a near-tie (the **Is it exact?** tab shows where and why)."
        )
    return f"As two samples do, the answers agree for {tokens} and then go their own ways."


def common_prefix(a: list[int], b: list[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


# ---------------------------------------------------------------- the session


@dataclass
class Session:
    """What one browser session accumulates: its runs, and where their exports are written."""

    runs: list[dict] = field(default_factory=list)
    spans: list[tuple[str, str]] = field(default_factory=list)  # the last speculative answer
    folder: str | None = None


def export(session: Session) -> tuple[str, str] | tuple[None, None]:
    """The session's runs as results.csv and results.json in its own temp folder."""
    if not session.runs:
        return None, None
    if session.folder is None or not Path(session.folder).is_dir():
        session.folder = tempfile.mkdtemp(prefix="specdemo-")
    folder = Path(session.folder)
    rows = [{"run": i, **run} for i, run in enumerate(session.runs, 1)]
    with open(folder / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (folder / "results.json").write_text(json.dumps(rows, indent=1))
    return str(folder / "results.csv"), str(folder / "results.json")


def discard(session: Session | None) -> None:
    """Remove a finished session's export folder (Gradio calls this when the state expires)."""
    if session is not None and session.folder:
        shutil.rmtree(session.folder, ignore_errors=True)


def results_table(runs: list[dict]) -> list[list]:
    """The session's runs as table rows, newest first (columns: RESULT_COLUMNS)."""
    return [
        [
            i,
            r["k"],
            r["temperature"],
            DRAFTERS[r["drafter"]],
            round(r["alpha"], 3),
            round(r["tokens_per_pass"], 2),
            round(r["spec_tokens_per_s"], 1),
            round(r["target_tokens_per_s"], 1),
            round(r["speedup"], 2),
            round(r["c"], 3),
        ]
        for i, r in reversed(list(enumerate(runs, 1)))
    ]


RESULT_COLUMNS = [
    "run",
    "K",
    "T",
    "drafter",
    "α",
    "tokens/pass",
    "spec tok/s",
    "target tok/s",
    "speedup",
    "c",
]


def sweep(
    pair, config: RunConfig, ks: list[int], temperatures: list[float]
) -> Iterator[tuple[int, int, dict]]:
    """Every (temperature, K) cell, each speculative run timed against one target-only baseline
    per temperature (the baseline does not depend on K). Yields (cells done, cells, record)."""
    ids = encode(pair, config)
    done, total = 0, len(ks) * len(temperatures)
    for temperature in temperatures:
        base = replace(config, temperature=temperature)
        target = last(run_target(pair, base, ids))
        for k in ks:
            cell = replace(base, k=k)
            done += 1
            yield done, total, record(cell, last(run_speculative(pair, cell, ids)), target)


# ---------------------------------------------------------------- is it exact?


@dataclass(frozen=True)
class Exactness:
    """N first tokens drawn through the accept/resample path and N drawn from p, against p."""

    labels: list[str]  # the most likely tokens, then "other"
    p: list[float]  # exact target probability of each label
    speculative: list[float]  # frequency among the speculative draws
    direct: list[float]  # frequency among the direct draws
    n: int
    tv_speculative: float  # total-variation distance to p over the whole vocabulary
    tv_direct: float
    p_value_speculative: float  # χ² goodness of fit to p
    p_value_direct: float
    first_accept: float  # sum_x min(p, q): the chance the first draft token is kept


@torch.inference_mode()
def next_token_probs(model, ids: list[int], sampling: SamplingConfig) -> torch.Tensor:
    """(vocab,) warped distribution of the token after `ids`: one forward pass."""
    logits, _ = forward(model, ids, None)  # (1, vocab)
    return logits_to_probs(logits, sampling)[0]


def exactness(pair, config: RunConfig, n: int, top: int = 12) -> Exactness:
    ids = encode(pair, config)
    p = next_token_probs(pair.target, ids, config.sampling)
    q = next_token_probs(pair.draft, ids, config.sampling)
    generator = make_generator(config.seed, p.device)
    speculative = first_token_samples(p, q, n, generator).cpu()
    # torch's own sampler, independent of specdemo's, is the reference for "directly from p".
    direct = torch.multinomial(p, n, replacement=True, generator=generator).cpu()
    vocab = max(p.shape[-1], q.shape[-1])
    p, q = pad_vocab(p, vocab).double().cpu(), pad_vocab(q, vocab).double().cpu()
    p = p / p.sum()
    counts_s = torch.bincount(speculative, minlength=vocab).double()
    counts_d = torch.bincount(direct, minlength=vocab).double()
    order = torch.argsort(p, descending=True)[:top]
    order = order[p[order] > 0]

    def bars(dist: torch.Tensor) -> list[float]:
        shown = dist[order].tolist()
        return shown + [max(0.0, 1.0 - sum(shown))]

    return Exactness(
        labels=token_labels(pair.tokenizer, order.tolist()) + ["(other)"],
        p=bars(p),
        speculative=bars(counts_s / n),
        direct=bars(counts_d / n),
        n=n,
        tv_speculative=0.5 * (counts_s / n - p).abs().sum().item(),
        tv_direct=0.5 * (counts_d / n - p).abs().sum().item(),
        p_value_speculative=chi2_pvalue(counts_s, p),
        p_value_direct=chi2_pvalue(counts_d, p),
        first_accept=torch.minimum(p, q / q.sum()).sum().item(),
    )


def chi2_pvalue(counts: torch.Tensor, p: torch.Tensor) -> float:
    """χ² goodness of fit of counts to p; tokens expected fewer than 5 times share one bin."""
    expected = p * counts.sum()
    small = expected < 5
    observed, expect = counts[~small].tolist(), expected[~small].tolist()
    pooled_obs, pooled_exp = counts[small].sum().item(), expected[small].sum().item()
    if pooled_exp == 0 and pooled_obs > 0:
        return 0.0  # drew a token the target gives probability 0
    if pooled_exp > 0:
        observed.append(pooled_obs)
        expect.append(pooled_exp)
    if len(observed) < 2:
        return 1.0  # a single possible outcome: nothing to test
    return float(chisquare(observed, expect).pvalue)


def exactness_markdown(ex: Exactness) -> str:
    return (
        f"**{ex.n:,} draws each.** Total-variation distance to the exact p: "
        f"speculative **{ex.tv_speculative:.4f}**, direct **{ex.tv_direct:.4f}**. "
        f"χ² goodness of fit to p: speculative p-value **{ex.p_value_speculative:.3f}**, "
        f"direct **{ex.p_value_direct:.3f}**.\n\n"
        f"The draft's first token is kept with probability Σ min(p, q) = {ex.first_accept:.2f}; "
        "the rest of the time the target resamples from the residual max(0, p − q). Both "
        "distances are sampling noise of the same size (it shrinks like 1/√N), and a p-value "
        "is only suspicious when tiny (below 0.001) — the speculative path follows p exactly."
    )


@dataclass(frozen=True)
class GreedyCheck:
    """Greedy speculative vs greedy target-only token ids, and where they part if they do."""

    identical: bool
    n_tokens: int
    first_difference: int | None = None
    speculative_token: str = ""
    target_token: str = ""
    margin: float | None = None  # the target's top-two logit gap where they part


def greedy_check(pair, config: RunConfig) -> GreedyCheck:
    greedy = replace(
        config,
        temperature=0.0,
        top_p=None,
        top_k=None,
        max_new_tokens=GREEDY_CHECK_TOKENS,
        drafter="model",
        adaptive=False,
    )
    ids = encode(pair, greedy)
    spec = last(run_speculative(pair, greedy, ids)).tokens
    target = last(run_target(pair, greedy, ids)).tokens
    if spec == target:
        return GreedyCheck(identical=True, n_tokens=len(spec))
    i = common_prefix(spec, target)
    with torch.inference_mode():
        logits, _ = forward(pair.target, ids + target[:i], None)
    top2 = torch.topk(logits[-1].float(), 2).values.tolist()
    return GreedyCheck(
        identical=False,
        n_tokens=min(len(spec), len(target)),
        first_difference=i,
        speculative_token=token_text(pair.tokenizer, spec[i]) if i < len(spec) else "(end)",
        target_token=token_text(pair.tokenizer, target[i]) if i < len(target) else "(end)",
        margin=top2[0] - top2[1],
    )


def greedy_markdown(check: GreedyCheck, k: int, precision: str) -> str:
    if check.identical:
        return (
            f"**Greedy check: identical.** With temperature 0, speculative decoding (K = {k}) "
            f"and the target alone produced the same {check.n_tokens} token ids."
        )
    return (
        f"**Greedy check: they part at new token {check.first_difference + 1}** — speculative "
        f"chose `{check.speculative_token}`, the target alone `{check.target_token}`. This is "
        f"arithmetic, not the acceptance rule: the verify pass computes K + 1 = {k + 1} positions "
        f"in one batched forward pass, and {precision} kernels can round differently from "
        "one-token steps. There the target's top two logits differ by only "
        f"{check.margin:.4f}, close enough to a tie for rounding to flip the argmax. "
        "After the first difference the contexts differ, so the rest follows."
    )


# ---------------------------------------------------------------- step through


@dataclass(frozen=True)
class StepState:
    """The step-through tab's context: token ids so far and their coloured text."""

    prompt: str
    system: str
    context: tuple[int, ...]
    prompt_len: int
    spans: tuple[tuple[str, str], ...] = ()
    steps: int = 0
    finished: bool = False


STEP_COLUMNS = ["#", "draft token", "q(x)", "p(x)", "min(1, p/q)", "u", "verdict"]


def step(pair, config: RunConfig, state: StepState | None) -> tuple[StepState, Round]:
    """One speculative round on the current context; a new prompt starts a new context."""
    if state is None or (state.prompt, state.system) != (config.prompt, config.system):
        ids = encode(pair, replace(config, max_new_tokens=STEP_LIMIT))
        state = StepState(config.prompt, config.system, tuple(ids), len(ids))
    if state.finished:
        raise ValueError("The answer is finished (the target chose an end token): press Reset.")
    if len(state.context) - state.prompt_len + config.k + 1 > STEP_LIMIT:
        raise ValueError(f"Step-through stops after {STEP_LIMIT} new tokens: press Reset.")
    device = pair.target.device
    generator = make_generator(config.seed * 100_003 + state.steps, device)
    drafter = make_drafter(
        config.drafter, pair.draft, config.sampling, generator, device, config.adaptive
    )
    rounds = speculative_generate(
        pair.target,
        drafter,
        list(state.context),
        k=config.k,
        sampling=config.sampling,
        max_new_tokens=config.k + 1,  # room for k drafts and the target's token
        generator=generator,
    )
    with contextlib.closing(rounds):
        r = next(rounds)
    generated = list(state.context[state.prompt_len :])
    detok = Detokenizer(pair.tokenizer, generated)
    spans = round_spans(r, detok, show_rejected=True)
    state = replace(
        state,
        context=state.context + tuple(r.tokens),
        spans=state.spans + tuple(spans),
        steps=state.steps + 1,
        finished=any(t in eos_ids(pair.target) for t in r.tokens),
    )
    return state, r


def step_rows(r: Round, tokenizer) -> list[list]:
    """One row per draft position, then the target's own token (columns: STEP_COLUMNS)."""
    rows = []
    for i, token in enumerate(r.draft):
        verdict = "accepted" if i < r.n_accepted else "rejected" if i == r.n_accepted else "—"
        checked = i <= r.n_accepted
        rows.append(
            [
                i + 1,
                token_text(tokenizer, token),
                round(r.q_x[i], 4),
                round(r.p_x[i], 4),
                round(r.accept_prob[i], 4),
                round(r.u[i], 4) if checked else "",
                verdict,
            ]
        )
    verdict = "bonus (from p)" if r.bonus else "resampled (from the residual)"
    rows.append([r.n_accepted + 1, token_text(tokenizer, r.next_token), "", "", "", "", verdict])
    return rows


def step_markdown(r: Round, tokenizer, config: RunConfig) -> tuple[str, str, str]:
    """Plain-language notes on the round's three phases: draft, verify, accept/reject."""

    def tok(token: int) -> str:
        return f"`{token_text(tokenizer, token)}`"

    drafts = ", ".join(tok(t) for t in r.draft)
    if config.drafter == "lookup":
        draft = (
            f"Prompt lookup found the last few tokens earlier in the text and proposed the "
            f"{r.k} that followed them: {drafts}. No model pass at all; a copied guess is "
            "certain of itself, so q(x) = 1."
            if r.k
            else "Prompt lookup found no earlier match for the last tokens, so it guessed nothing."
        )
    else:
        draft = (
            f"The small draft model guessed {r.k} tokens one after another, each drawn from "
            f"its own distribution q: {drafts}. Draft steps are cheap: {r.draft_steps} took "
            f"{1000 * r.draft_time:.0f} ms."
        )
    verify = (
        f"The big target model read the context plus all {r.k} guesses in **one** forward "
        f"pass ({1000 * r.verify_time:.0f} ms). That pass gives the target's own distribution p "
        f"at all {r.k + 1} positions at once — about the price of a single ordinary token."
    )
    greedy = config.temperature == 0
    if greedy:
        rule = (
            "At temperature 0 both models are greedy: a guess is kept while it is the target's "
            "top choice (p(x) = 1 in the table)."
        )
    else:
        rule = (
            "Left to right, guess x is kept when a uniform draw u is below min(1, p(x)/q(x)): "
            "always if the target likes x at least as much as the draft did, else with "
            "probability p/q."
        )
    i = r.n_accepted
    if r.k == 0:
        outcome = f"With no guesses, the target produced one token itself: {tok(r.next_token)}."
    elif r.bonus:
        outcome = (
            f"All {r.k} guesses were kept, so the target's p at the next position gives a free "
            f"**bonus** token, {tok(r.next_token)}: {r.k + 1} tokens from one target pass."
        )
    elif greedy:
        outcome = (
            f"Guess {i + 1}, {tok(r.draft[i])}, was not the target's top choice, so it was "
            f"**rejected** with everything after it; the target's own choice "
            f"{tok(r.next_token)} takes its place. This round: {i} kept + 1 = {i + 1} tokens."
        )
    else:
        outcome = (
            f"Guess {i + 1}, {tok(r.draft[i])}, had p = {r.p_x[i]:.3f} and q = {r.q_x[i]:.3f}; "
            f"u = {r.u[i]:.3f} was not below {r.accept_prob[i]:.3f}, so it was **rejected** "
            f"with everything after it. The target drew {tok(r.next_token)} from the residual "
            "max(0, p − q), renormalised — the probability the draft under-proposed. That "
            f"correction makes every token follow p exactly. This round: {i} kept + 1 = "
            f"{i + 1} tokens."
        )
    return (
        f"**1 · Draft.** {draft}",
        f"**2 · Verify.** {verify}",
        f"**3 · Accept or reject.** {rule} {outcome}",
    )


# ---------------------------------------------------------------- small helpers


def token_labels(tokenizer, tokens: list[int]) -> list[str]:
    """Each token's visible text; a text two tokens share gets the id, keeping chart bars apart."""
    texts = [token_text(tokenizer, t) for t in tokens]
    return [f"{x} #{t}" if texts.count(x) > 1 else x for x, t in zip(texts, tokens, strict=True)]


def token_text(tokenizer, token: int) -> str:
    """A token as visible text: escapes for newlines and tabs, ␣ for a leading space."""
    text = tokenizer.decode([token])
    text = text.replace("\n", "\\n").replace("\t", "\\t")
    return "␣" + text[1:] if text.startswith(" ") else text or f"<{token}>"


def model_markdown(summary) -> str:
    s = summary
    return (
        f"**Target** {s.target_name} ({_params(s.target_params)}) · "
        f"**Draft** {s.draft_name} ({_params(s.draft_params)}) · "
        f"**Precision** {s.precision} · **Device** {s.device} · pair `{s.pair}`, "
        f"loaded in {s.load_seconds:.1f} s"
    )


def _params(n: int) -> str:
    return f"{n / 1e9:.2f} B params" if n >= 1e9 else f"{n / 1e6:.1f} M params"


def load_examples() -> list[dict]:
    """Example prompts from assets/prompts.json: label, prompt, drafter. None when missing."""
    try:
        examples = json.loads((ASSETS / "prompts.json").read_text())
    except (OSError, ValueError):
        return []
    return [e for e in examples if e.get("prompt") and e.get("drafter", "model") in DRAFTERS]
