"""One request type per tab: widget or API values parsed once, in the main process, into a
frozen, picklable request that carries what the call needs.

A request knows its GPU budget (``seconds``, from ``gpu`` and the loaded pair's step budgets,
``gpu.budget_of``), what to say when that does not fit
one ZeroGPU call (``fits``), and for a race its replay keys. The handlers build a request, answer
it from replay where they can, and hand it to a GPU function (``work``) with nothing else; a
sweep's id is drawn here, so it stays unique however many GPU workers the cells run in.
"""

import uuid
from dataclasses import dataclass, replace

from specdemo.app.config import RunConfig, encode, parse_grid, parse_rule, parse_run, parse_samples
from specdemo.app.page import gpu, gpu_notes
from specdemo.app.settings import (
    DEFAULTS,
    DRAFTERS,
    EXACT_DEFAULTS,
    LIMITS,
    STEP_DEFAULTS,
    SWEEP_DEFAULTS,
)
from specdemo.judge.sampling import EXACT, AcceptanceRule


@dataclass(frozen=True)
class Race:
    """A speculative run and the target alone on one prompt (the Generate button, or one cell
    of a sweep). `since`: runs stored before it are measured again (a fresh run sets it)."""

    config: RunConfig
    ids: tuple[int, ...]
    since: float = 0.0
    with_target: bool = True  # False when the target-alone run is answered from replay
    budget: gpu.Budget = gpu.EMBEDDED  # the loaded pair's step budgets

    @property
    def seconds(self) -> int:
        return gpu.ask(gpu.race_seconds(self.config, len(self.ids), self.with_target, self.budget))

    @property
    def key(self) -> RunConfig:
        """Replay key of the whole race: every setting, the seed included."""
        return self.config

    @property
    def target_key(self) -> tuple:
        """Replay key of the target alone: K, the drafter, adaptive drafting and the judge play
        no part."""
        config = self.config
        return config.prompt, config.system, config.sampling, config.seed, config.max_new_tokens

    def fits(self) -> str:
        config = self.config

        def seconds(tokens: int) -> float:
            config_n = replace(config, max_new_tokens=tokens)
            return gpu.race_seconds(config_n, len(self.ids), budget=self.budget)

        n = gpu.largest_tokens(seconds)
        setting = f"K = {config.k} with {DRAFTERS[config.drafter].lower()}"
        if n is None:
            return "Shorten the prompt: no run of it fits."
        return f"At {setting}, at most {n} new tokens fit: lower Max new tokens."


def parse_race(
    pair,
    prompt,
    system="",
    k=DEFAULTS["k"],
    auto_k=DEFAULTS["auto_k"],
    temperature=DEFAULTS["temperature"],
    top_p=DEFAULTS["top_p"],
    top_k=DEFAULTS["top_k"],
    max_new_tokens=DEFAULTS["max_new_tokens"],
    seed=DEFAULTS["seed"],
    drafter=DEFAULTS["drafter"],
    adaptive=DEFAULTS["adaptive"],
    tree_width=DEFAULTS["tree_width"],
    since=0.0,
    judge=DEFAULTS["verify"],
) -> Race:
    config = parse_run(
        prompt,
        system,
        k,
        temperature,
        top_p,
        top_k,
        max_new_tokens,
        seed,
        drafter,
        adaptive,
        auto_k,
        tree_width,
        judge,
    )
    return Race(config, tuple(encode(pair, config)), since, budget=gpu.budget_of(pair))


@dataclass(frozen=True)
class Sweep:
    """A (K, temperature) grid of races, run one cell per call; `id` tells two sweeps apart."""

    config: RunConfig
    ks: tuple[int | str, ...]
    temperatures: tuple[float, ...]
    ids: tuple[int, ...]
    since: float = 0.0
    id: str = ""
    budget: gpu.Budget = gpu.EMBEDDED

    def cells(self) -> list[Race]:
        """Every cell's race, the K values of one temperature together; the target alone is
        charged to the first cell of each temperature, whose run the others replay."""
        return [
            Race(
                replace(self.config, temperature=t, k=k), self.ids, self.since, i == 0, self.budget
            )
            for t in self.temperatures
            for i, k in enumerate(self.ks)
        ]

    def check(self) -> None:
        """Refuse the whole sweep before it starts if any cell would not fit one call."""
        for cell in self.cells():
            try:
                gpu.check(cell)
            except ValueError as e:
                config = cell.config
                raise ValueError(
                    f"Sweep cell K = {config.k}, T = {config.temperature:g}: {e}"
                ) from None

    def note(self) -> str:
        """What the sweep costs a ZeroGPU visitor ("" elsewhere)."""
        return gpu_notes.sweep_note(*gpu.sweep_calls(self.cells()))


def parse_sweep(
    pair,
    prompt,
    system="",
    ks=SWEEP_DEFAULTS["ks"],
    temperatures=SWEEP_DEFAULTS["temperatures"],
    top_p=DEFAULTS["top_p"],
    top_k=DEFAULTS["top_k"],
    max_new_tokens=DEFAULTS["max_new_tokens"],
    seed=DEFAULTS["seed"],
    drafter=DEFAULTS["drafter"],
    adaptive=DEFAULTS["adaptive"],
    tree_width=DEFAULTS["tree_width"],
    since=0.0,
    judge=DEFAULTS["verify"],
) -> Sweep:
    config = parse_run(
        prompt,
        system,
        top_p=top_p,
        top_k=top_k,
        max_new_tokens=max_new_tokens,
        seed=seed,
        drafter=drafter,
        adaptive=adaptive,
        tree_width=tree_width,
        judge=judge,
    )
    ks, temperatures = parse_grid(ks, temperatures)
    ids = tuple(encode(pair, config))
    id = uuid.uuid4().hex[:12]
    return Sweep(config, tuple(ks), tuple(temperatures), ids, since, id, gpu.budget_of(pair))


@dataclass(frozen=True)
class ExactnessCheck:
    """The exactness check: n draws of the first two tokens under `rule`, and the greedy check.
    `max_first_tokens` bounds the distinct first tokens it pays for (None: no bound)."""

    config: RunConfig
    ids: tuple[int, ...]
    n: int
    rule: AcceptanceRule
    max_first_tokens: int | None = None
    budget: gpu.Budget = gpu.EMBEDDED

    @property
    def seconds(self) -> int:
        return gpu.ask(gpu.exactness_seconds(self.config, self.n, len(self.ids), self.budget))

    def fits(self) -> str:
        low, high = LIMITS["n"]

        def fit(n: int) -> bool:
            seconds = gpu.exactness_seconds(self.config, n, len(self.ids), self.budget)
            return gpu.ask(seconds) <= gpu.max_seconds()

        n = gpu.largest(fit, low, high)
        if n is None:
            return "Shorten the prompt or lower K: no check of it fits."
        return f"At most {n:,} draws fit at these settings: lower N."


def parse_exactness(
    pair,
    prompt,
    temperature=EXACT_DEFAULTS["temperature"],
    top_p=EXACT_DEFAULTS["top_p"],
    k=EXACT_DEFAULTS["k"],
    n=EXACT_DEFAULTS["n"],
    seed=EXACT_DEFAULTS["seed"],
    rule=EXACT_DEFAULTS["rule"],
    tree_width=EXACT_DEFAULTS["tree_width"],
    judge=EXACT_DEFAULTS["verify"],
) -> ExactnessCheck:
    config = parse_run(
        prompt,
        k=k,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        tree_width=tree_width,
        judge=judge,
    )
    n, rule = parse_samples(n), parse_rule(rule, config.temperature)
    if config.tree_width > 1 and rule != EXACT:
        raise ValueError(
            "The mistaken rules are chain rules: set Tree width to 1 to try them, or keep the "
            "exact rule to check a tree."
        )
    bound = gpu.MAX_FIRST_TOKENS if gpu.limited() else None
    ids = tuple(encode(pair, config))
    return ExactnessCheck(config, ids, n, rule, bound, gpu.budget_of(pair))


@dataclass(frozen=True)
class StepThrough:
    """One step-through round after a context of `context_tokens` tokens."""

    config: RunConfig
    context_tokens: int
    budget: gpu.Budget = gpu.EMBEDDED

    @property
    def seconds(self) -> int:
        return gpu.ask(gpu.step_seconds(self.config, self.context_tokens, self.budget))

    def fits(self) -> str:
        return "Press Reset to start from a shorter context."


def parse_step(
    pair,
    prompt,
    k=STEP_DEFAULTS["k"],
    temperature=STEP_DEFAULTS["temperature"],
    seed=STEP_DEFAULTS["seed"],
    drafter=STEP_DEFAULTS["drafter"],
    state=None,
    tree_width=STEP_DEFAULTS["tree_width"],
    judge=STEP_DEFAULTS["verify"],
) -> StepThrough:
    config = parse_run(
        prompt,
        k=k,
        temperature=temperature,
        seed=seed,
        drafter=drafter,
        tree_width=tree_width,
        judge=judge,
    )
    if not isinstance(config.k, int):
        lo, hi = LIMITS["k"]
        raise ValueError(
            f"Step through shows one round at a K you choose: set K from {lo} to {hi} "
            "(automatic K is on the Generate tab)."
        )
    same = state is not None and (state.prompt, state.system) == (config.prompt, config.system)
    context = len(state.context) if same else len(encode(pair, config))
    return StepThrough(config, context, gpu.budget_of(pair))
