"""Pure-torch maths of speculative sampling: warping logits into p and q, and one round's verify.

Nothing here knows about models or tokenizers. ``verify`` implements the acceptance rule of
Leviathan et al. (2023) / Chen et al. (2023): draft token x is kept with probability
min(1, p(x)/q(x)); the first rejection is replaced by a sample from max(0, p - q) / sum, and a
fully accepted block earns a bonus token from p. The emitted tokens are distributed exactly as
target-only sampling.
"""

from dataclasses import dataclass

import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

# Below this residual mass, max(0, p - q) is rounding noise, and we sample from p instead:
# p ≈ q there, so the rejection itself was a numerical accident.
RESIDUAL_EPS = 1e-6


@dataclass(frozen=True)
class SamplingConfig:
    """How logits become probabilities; applied identically to target and draft."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if not (0.0 <= self.temperature <= 100.0):  # also rejects NaN
            raise ValueError(f"temperature must be in [0, 100], got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be a positive integer or None, got {self.top_k}")
        if self.top_p is not None and not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def make_warpers(config: SamplingConfig) -> LogitsProcessorList:
    """transformers' own warpers, in the order `generate` applies them."""
    warpers = LogitsProcessorList()
    if config.temperature not in (0.0, 1.0):
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k is not None:
        warpers.append(TopKLogitsWarper(config.top_k))
    if config.top_p is not None and config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(config.top_p))
    return warpers


def logits_to_probs(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """(n, vocab) logits of any dtype -> (n, vocab) float32 probabilities.

    Temperature 0 gives the one-hot argmax, so greedy decoding is the same acceptance rule with
    degenerate p and q.
    """
    logits = logits.float()
    if config.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    warped = make_warpers(config)(None, logits)
    return torch.softmax(warped, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None, n: int = 1) -> torch.Tensor:
    """n tokens per row of (rows, vocab) probabilities -> (rows,) ids, or (rows, n) if n > 1.

    Inverse-CDF sampling on a float64 cumulative sum: exact to double rounding, and on CPU about
    100x faster than torch.multinomial at a 152k vocabulary (0.4 ms against 40 ms). Rows need not
    be normalised; a zero-probability token is never drawn. Stays on device.
    """
    cdf = probs.cumsum(-1, dtype=torch.float64)  # (rows, vocab)
    u = torch.rand(
        (*cdf.shape[:-1], n), generator=generator, dtype=torch.float64, device=probs.device
    )
    tokens = torch.searchsorted(cdf, u * cdf[..., -1:], right=True).clamp_max(probs.shape[-1] - 1)
    return tokens.squeeze(-1) if n == 1 else tokens


def next_token(logits: torch.Tensor, config: SamplingConfig, generator) -> torch.Tensor:
    """(n, vocab) logits -> (n,) tokens: argmax when greedy (no softmax needed), else a sample."""
    if config.greedy:
        return logits.argmax(-1)
    return sample(logits_to_probs(logits, config), generator)


def pad_vocab(probs: torch.Tensor, vocab: int) -> torch.Tensor:
    """Zero-pad the last dim to `vocab`. A token the draft cannot propose has q = 0, and the
    acceptance rule stays exact: the residual max(0, p - q) simply keeps all of p there."""
    extra = vocab - probs.shape[-1]
    return torch.nn.functional.pad(probs, (0, extra)) if extra > 0 else probs


def one_hot_q(draft: torch.Tensor, vocab: int) -> torch.Tensor:
    """q of a deterministic draft (prompt lookup): all mass on the proposed token. # (k, vocab)"""
    return torch.nn.functional.one_hot(draft, vocab).float()


def acceptance_probs(p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
    """min(1, p(x)/q(x)); q(x) > 0 for any token the draft actually sampled."""
    return torch.clamp(p_x / q_x.clamp_min(torch.finfo(q_x.dtype).tiny), max=1.0)


def residual(p_row: torch.Tensor, q_row: torch.Tensor) -> torch.Tensor:
    """max(0, p - q) normalised; falls back to p when the residual mass is ~0."""
    r = torch.clamp(p_row - q_row, min=0.0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > RESIDUAL_EPS, r / mass.clamp_min(RESIDUAL_EPS), p_row)


@dataclass(frozen=True)
class Verdict:
    """What happened to one round's k draft tokens (host-side, plain Python)."""

    n_accepted: int
    next_token: int  # the resampled replacement if n_accepted < k, else the bonus token
    p_x: list[float]  # target probability of each draft token
    q_x: list[float]  # draft probability of each draft token (1.0 for a deterministic draft)
    accept_prob: list[float]  # min(1, p/q)
    u: list[float]  # the uniform draws; position i is accepted iff u[i] < accept_prob[i]
    next_dist: torch.Tensor  # (vocab,) distribution next_token was drawn from (residual or p)

    @property
    def k(self) -> int:
        return len(self.p_x)

    @property
    def bonus(self) -> bool:
        return self.n_accepted == self.k


def verify(
    draft: torch.Tensor,
    q: torch.Tensor | None,
    p: torch.Tensor,
    generator: torch.Generator | None = None,
) -> Verdict:
    """One round's accept/resample step, vectorised over the k draft positions.

    draft: (k,) proposed tokens; q: (k, vocab_q) draft probabilities, or None for a deterministic
    draft; p: (k+1, vocab_p) target probabilities, the last row for the bonus position.
    One device-to-host transfer at the end.
    """
    k = draft.shape[0]
    vocab = max(p.shape[-1], q.shape[-1] if q is not None else 0)
    p = pad_vocab(p, vocab)
    q = one_hot_q(draft, vocab) if q is None else pad_vocab(q, vocab)
    positions = torch.arange(k, device=p.device)
    p_x, q_x = p[positions, draft], q[positions, draft]  # (k,)
    accept_prob = acceptance_probs(p_x, q_x)
    u = torch.rand(k, generator=generator, device=p.device)
    rejected = torch.cat([u >= accept_prob, torch.ones(1, dtype=torch.bool, device=p.device)])
    n = rejected.int().argmax()  # first rejection, or k when all pass (the appended sentinel)
    # The bonus row pairs p with q = 0, so residual() returns p itself there.
    q_rows = torch.cat([q, q.new_zeros(1, vocab)])  # (k+1, vocab)
    next_dist = residual(p[n], q_rows[n])
    next_token = sample(next_dist[None], generator)
    host = torch.cat([n[None].float(), next_token.float(), p_x, q_x, accept_prob, u]).tolist()
    return Verdict(
        n_accepted=int(host[0]),
        next_token=int(host[1]),
        p_x=host[2 : 2 + k],
        q_x=host[2 + k : 2 + 2 * k],
        accept_prob=host[2 + 2 * k : 2 + 3 * k],
        u=host[2 + 3 * k :],
        next_dist=next_dist,
    )


def verify_greedy(draft: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """Greedy verify: keep draft tokens while they equal argmax p; then emit argmax p.

    target_logits: (k+1, vocab). No softmax over the vocabulary is needed.
    """
    k = draft.shape[0]
    best = target_logits.argmax(-1)  # (k+1,)
    mismatch = torch.cat([best[:k] != draft, torch.ones(1, dtype=torch.bool, device=best.device)])
    n = mismatch.int().argmax()
    host = torch.cat([n[None], best[n][None], (best[:k] == draft).long()]).tolist()
    n_acc, next_token, matched = host[0], host[1], [float(m) for m in host[2:]]
    return Verdict(
        n_accepted=n_acc,
        next_token=next_token,
        p_x=matched,
        q_x=[1.0] * k,
        accept_prob=matched,
        u=[0.0] * k,
        next_dist=torch.nn.functional.one_hot(best[n], target_logits.shape[-1]).float(),
    )


def top_tokens(dist: torch.Tensor, n: int = 5) -> list[tuple[int, float]]:
    """The n most likely (token, probability) pairs of a (vocab,) distribution."""
    values, indices = torch.topk(dist.float(), min(n, dist.shape[-1]))
    return [(i, v) for i, v in zip(indices.tolist(), values.tolist(), strict=True) if v > 0]


def first_token_samples(
    p: torch.Tensor, q: torch.Tensor | None, n: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """n independent first tokens of a round through the accept/resample path, vectorised.

    p, q: (vocab,) target and draft distributions at one position (q None: sample from p).
    Draw x ~ q, keep it with probability min(1, p(x)/q(x)), else draw from the residual; the
    result is distributed as p, which the app's exactness tab shows with histograms.
    """
    if q is None:
        return sample(p[None], generator, n)[0]
    vocab = max(p.shape[-1], q.shape[-1])
    p, q = pad_vocab(p, vocab), pad_vocab(q, vocab)
    x = sample(q[None], generator, n)[0]  # (n,)
    keep = torch.rand(n, generator=generator, device=p.device) < acceptance_probs(p[x], q[x])
    fallback = sample(residual(p, q)[None], generator, n)[0]
    return torch.where(keep, x, fallback)
