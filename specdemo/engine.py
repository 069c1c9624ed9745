"""The speculative decoding loop and its target-only baseline, as generators.

``speculative_generate`` yields one ``Round`` per target forward pass; ``autoregressive_generate``
yields one ``Step`` per token. Both take token ids and return token ids: the engine knows nothing
about tokenization, except that optional stop strings are checked with a caller-given decode.
``generate`` is the thin non-streaming wrapper that the app, the bench and outside code call.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from specdemo.drafters import Drafter, LookupDrafter, ModelDrafter, forward
from specdemo.sampling import (
    SamplingConfig,
    logits_to_probs,
    next_token,
    top_tokens,
    verify,
    verify_greedy,
)

DEFAULT_SAMPLING = SamplingConfig()
AUTO_HEAD_ROWS = 32768


@dataclass(frozen=True)
class Round:
    """One target pass: what was drafted, what survived, what the target added."""

    draft: list[int]  # the k proposed tokens
    n_accepted: int
    next_token: int  # resampled replacement of draft[n_accepted], or the bonus token
    p_x: list[float]
    q_x: list[float]
    accept_prob: list[float]
    u: list[float]
    residual_top: list[tuple[int, float]]  # the distribution next_token came from, top few
    tokens: list[int]  # what this round emits: accepted drafts + next_token, cut at a stop
    draft_time: float
    verify_time: float
    draft_steps: int
    finished: bool

    @property
    def k(self) -> int:
        return len(self.draft)

    @property
    def rejected(self) -> int | None:
        """The first rejected draft token, if any."""
        return self.draft[self.n_accepted] if self.n_accepted < self.k else None

    @property
    def bonus(self) -> bool:
        return self.n_accepted == self.k


@dataclass
class Stats:
    """Counts and timings of one speculative generation."""

    k: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    rejected: int = 0  # rounds that ended in a rejection (the rest earned a bonus token)
    new_tokens: int = 0
    target_passes: int = 0  # including the prefill
    draft_passes: int = 0
    accepted_hist: list[int] = field(default_factory=list)  # accepted_hist[n] = rounds with n kept
    prefill_time: float = 0.0
    draft_time: float = 0.0
    verify_time: float = 0.0
    wall_time: float = 0.0

    @property
    def alpha(self) -> float:
        """Acceptance rate: accepted / drafted."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def alpha_per_token(self) -> float:
        """Per-draft acceptance probability, accepted / (accepted + rejected): the alpha of the
        theory formulas. Drafts after a rejection are never judged, so `alpha` (accepted /
        drafted) is lower than this when k > 1."""
        judged = self.accepted + self.rejected
        return self.accepted / judged if judged else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Mean tokens emitted per target verify pass."""
        return self.new_tokens / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.wall_time if self.wall_time else 0.0

    @property
    def c(self) -> float:
        """Cost ratio: time of one draft step / time of one target (verify) pass."""
        if not self.draft_passes or not self.rounds or not self.verify_time:
            return 0.0
        return (self.draft_time / self.draft_passes) / (self.verify_time / self.rounds)

    def add(self, r: Round) -> None:
        self.rounds += 1
        self.drafted += r.k
        self.accepted += r.n_accepted
        self.rejected += r.n_accepted < r.k
        self.new_tokens += len(r.tokens)
        self.target_passes += 1
        self.draft_passes += r.draft_steps
        self.draft_time += r.draft_time
        self.verify_time += r.verify_time
        self.accepted_hist += [0] * (r.n_accepted + 1 - len(self.accepted_hist))
        self.accepted_hist[r.n_accepted] += 1

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items()}
        d.update(
            alpha=self.alpha,
            alpha_per_token=self.alpha_per_token,
            tokens_per_pass=self.tokens_per_pass,
            tokens_per_s=self.tokens_per_s,
            c=self.c,
        )
        return d


def eos_ids(model) -> set[int]:
    """Every EOS id of the model's generation config (an int or a list there)."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    if eos is None:
        return set()
    return {eos} if isinstance(eos, int) else set(eos)


def as_list(input_ids: list[int] | torch.Tensor) -> list[int]:
    return input_ids.view(-1).tolist() if isinstance(input_ids, torch.Tensor) else list(input_ids)


def make_generator(seed: int | None, device) -> torch.Generator:
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


class _Stopper:
    """Cuts a block of new tokens at the first EOS, max_new_tokens or stop string."""

    def __init__(self, eos: set[int], max_new_tokens: int, stop_strings, decode):
        if stop_strings and decode is None:
            raise ValueError("stop_strings need a decode function (token ids -> text)")
        self.eos, self.max_new_tokens = eos, max_new_tokens
        self.stop_strings, self.decode = tuple(stop_strings or ()), decode
        self.generated: list[int] = []

    def cut(self, block: list[int]) -> tuple[list[int], bool]:
        """The part of `block` to emit, and whether generation is finished."""
        kept = block[: self.max_new_tokens - len(self.generated)]
        done = len(kept) < len(block) or len(self.generated) + len(kept) >= self.max_new_tokens
        for i, t in enumerate(kept):
            if t in self.eos or self._stop_string_ends_at(kept[: i + 1]):
                kept, done = kept[: i + 1], True
                break
        self.generated += kept
        return kept, done

    def _stop_string_ends_at(self, new: list[int]) -> bool:
        # Earlier text held no stop string (we would have stopped), so any match is new.
        return bool(self.stop_strings) and any(
            s in self.decode(self.generated + new) for s in self.stop_strings
        )


def _timed_sync(device) -> float:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


@torch.inference_mode()
def speculative_generate(
    target,
    drafter: Drafter,
    input_ids: list[int] | torch.Tensor,
    *,
    k: int = 5,
    sampling: SamplingConfig = DEFAULT_SAMPLING,
    max_new_tokens: int = 64,
    generator: torch.Generator | None = None,
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
    stats: Stats | None = None,
) -> Iterator[Round]:
    """Yield one Round per target pass until EOS, max_new_tokens or a stop string.

    The target's KV cache holds every token but the last emitted one; each round feeds that
    token plus the k drafts in one pass, giving p for k+1 positions, then crops the cache by
    the k - n rejected drafts.
    """
    if k < 0 or max_new_tokens < 1:
        raise ValueError("k must be >= 0 and max_new_tokens >= 1")
    context = as_list(input_ids)
    if not context:
        raise ValueError("input_ids must hold at least one token")
    stats = stats if stats is not None else Stats()
    stats.k = k
    stopper = _Stopper(eos_ids(target), max_new_tokens, stop_strings, decode)
    device = target.device
    start = _timed_sync(device)
    cache = None
    if len(context) > 1:
        _, cache = forward(target, context[:-1], cache)
        stats.target_passes += 1
    stats.prefill_time = _timed_sync(device) - start

    while True:
        t0 = _timed_sync(device)
        steps_before = getattr(drafter, "steps", 0)
        # k drafts + 1 target token never need to exceed what is left to generate.
        draft, q = drafter.propose(context, min(k, max_new_tokens - len(stopper.generated) - 1))
        t1 = _timed_sync(device)
        draft = draft.to(device)
        feed = torch.cat([torch.tensor(context[-1:], device=device), draft])
        logits, cache = forward(target, feed, cache, n_logits=len(feed))  # (k+1, vocab)
        if sampling.greedy:
            verdict = verify_greedy(draft, logits)
        else:
            q = q.to(device) if q is not None else None
            verdict = verify(draft, q, logits_to_probs(logits, sampling), generator)
        n, kd = verdict.n_accepted, len(draft)
        if n < kd:  # drop the rejected drafts' keys and values
            cache.crop(n - kd)
        t2 = _timed_sync(device)
        draft_list = draft.tolist()
        tokens, finished = stopper.cut(draft_list[:n] + [verdict.next_token])
        drafter.update(n)
        record = Round(
            draft=draft_list,
            n_accepted=n,
            next_token=verdict.next_token,
            p_x=verdict.p_x,
            q_x=verdict.q_x,
            accept_prob=verdict.accept_prob,
            u=verdict.u,
            residual_top=top_tokens(verdict.next_dist),
            tokens=tokens,
            draft_time=t1 - t0,
            verify_time=t2 - t1,
            draft_steps=getattr(drafter, "steps", 0) - steps_before,
            finished=finished,
        )
        stats.add(record)
        stats.wall_time = _timed_sync(device) - start
        context += tokens
        yield record
        if finished:
            return


@dataclass(frozen=True)
class Step:
    """One target-only token and the time it took."""

    token: int
    time: float
    finished: bool


@torch.inference_mode()
def autoregressive_generate(
    target,
    input_ids: list[int] | torch.Tensor,
    *,
    sampling: SamplingConfig = DEFAULT_SAMPLING,
    max_new_tokens: int = 64,
    generator: torch.Generator | None = None,
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
) -> Iterator[Step]:
    """The baseline: one target pass per token, same warping and stops as the speculative loop."""
    context = as_list(input_ids)
    stopper = _Stopper(eos_ids(target), max_new_tokens, stop_strings, decode)
    device = target.device
    cache, feed = None, context
    while True:
        t0 = _timed_sync(device)
        logits, cache = forward(target, feed, cache)
        token = next_token(logits, sampling, generator)
        feed = token
        tokens, finished = stopper.cut(token.tolist())
        yield Step(token=tokens[0], time=_timed_sync(device) - t0, finished=finished)
        if finished:
            return


@dataclass(frozen=True)
class Result:
    tokens: list[int]
    stats: Stats
    rounds: list[Round]


def make_drafter(
    kind: str, draft, sampling: SamplingConfig, generator, device, adaptive=False, head_rows="auto"
):
    """A drafter by name. head_rows "auto" cuts a draft head of more than 64k vocabulary rows to
    its first 32k (exact either way; on CPU it makes the 0.5B Qwen draft step ~35% cheaper);
    None or 0 keeps the full head."""
    if kind == "model":
        if draft is None:
            raise ValueError('drafter="model" needs a draft model')
        if head_rows == "auto":
            vocab = draft.get_output_embeddings().weight.shape[0]
            head_rows = AUTO_HEAD_ROWS if vocab > 2 * AUTO_HEAD_ROWS else None
        return ModelDrafter(
            draft, sampling, generator, adaptive=adaptive, head_rows=head_rows or None
        )
    if kind == "lookup":
        return LookupDrafter(device=device)
    raise ValueError(f'drafter must be "model" or "lookup", got {kind!r}')


def generate(
    target,
    draft,
    input_ids,
    *,
    k: int = 5,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    max_new_tokens: int = 64,
    seed: int | None = None,
    drafter: str = "model",
    adaptive: bool = False,
    stop_strings: tuple[str, ...] = (),
    decode: Callable[[list[int]], str] | None = None,
) -> Result:
    """Speculative generation in one call: the new token ids and the stats."""
    sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
    generator = make_generator(seed, target.device)
    proposer = make_drafter(drafter, draft, sampling, generator, target.device, adaptive)
    stats = Stats()
    rounds = list(
        speculative_generate(
            target,
            proposer,
            input_ids,
            k=k,
            sampling=sampling,
            max_new_tokens=max_new_tokens,
            generator=generator,
            stop_strings=stop_strings,
            decode=decode,
            stats=stats,
        )
    )
    return Result(tokens=[t for r in rounds for t in r.tokens], stats=stats, rounds=rounds)
