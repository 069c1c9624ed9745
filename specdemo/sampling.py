"""The maths of speculative sampling: logits into p and q, and one round's accept/resample step.

Nothing here knows about models or tokenizers; warping uses transformers' own logits warpers, the
rest is torch. ``verify`` implements the acceptance rule of Leviathan et al. (2023) / Chen et al.
(2023): draft token x is kept with probability min(1, p(x)/q(x)); the first rejection is replaced
by a sample from max(0, p - q) / sum, and a fully accepted block earns a bonus token from p. The
emitted tokens are distributed exactly as target-only sampling; uniforms, ratios and the residual
are computed in float64.

``RULES`` holds that rule and, for teaching, three classic ways to get it wrong. Each mistake is
one switch of an ``AcceptanceRule``, read in exactly one place of the path every caller runs
(the engine, the drafters and the app's exactness draws): ``draft_tokens``, ``acceptance_probs``
and ``residual``.
"""

import functools
from dataclasses import dataclass

import torch
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)


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


@dataclass(frozen=True)
class AcceptanceRule:
    """How drafts are judged. The exact rule has every switch off; each switch is one mistake."""

    name: str
    label: str
    why: str  # one sentence: what the rule does to the output distribution
    greedy_draft: bool = False  # draft the argmax of q, yet report q as the draft's probability
    accept_all: bool = False  # keep every draft token
    resample_from_p: bool = False  # on a rejection draw from p instead of max(0, p - q)


RULES = {
    rule.name: rule
    for rule in (
        AcceptanceRule(
            "exact",
            "Exact: keep x with min(1, p/q), else resample from max(0, p − q)",
            "Kept drafts give min(p, q) and the residual adds back exactly p − min(p, q), so "
            "every token comes out with probability p.",
        ),
        AcceptanceRule(
            "always-accept",
            "Mistake: always keep the draft",
            "Nothing is ever rejected, so the output follows the draft's q, not the target's p.",
            accept_all=True,
        ),
        AcceptanceRule(
            "resample-from-p",
            "Mistake: on a rejection resample from p",
            "Tokens the draft already covered get p again on top of min(p, q): over-represented, "
            "and the tokens only the target likes come out too rarely.",
            resample_from_p=True,
        ),
        AcceptanceRule(
            "greedy-draft",
            "Mistake: draft greedily but use the draft's softmax as q",
            "The draft always proposes its argmax, which it did with probability 1, not q(x): "
            "min(1, p/q) keeps it too often (a bug transformers fixed, #32867).",
            greedy_draft=True,
        ),
    )
}
EXACT = RULES["exact"]


def resolve_rule(rule: "str | AcceptanceRule") -> AcceptanceRule:
    """An AcceptanceRule as given, or by name."""
    if isinstance(rule, AcceptanceRule):
        return rule
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}; got {rule!r}")
    return RULES[rule]


@functools.cache
def make_warpers(config: SamplingConfig) -> tuple:
    """transformers' own warpers, in the order `generate` applies them (built once per config)."""
    warpers = []
    if config.temperature not in (0.0, 1.0):
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k is not None:
        warpers.append(TopKLogitsWarper(config.top_k))
    if config.top_p is not None and config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(config.top_p))
    return tuple(warpers)


def logits_to_probs(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """(n, vocab) logits of any dtype -> (n, vocab) float32 probabilities.

    Temperature 0 gives the one-hot argmax, so greedy decoding is the same acceptance rule with
    degenerate p and q. The warpers are called one by one: LogitsProcessorList would inspect
    each one's signature on every call, a third of a toy model's whole round.
    """
    logits = logits.float()
    if config.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    for warper in make_warpers(config):
        logits = warper(None, logits)
    return torch.softmax(logits, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None, n: int = 1) -> torch.Tensor:
    """n tokens per row of (rows, vocab) probabilities -> (rows,) ids, or (rows, n) if n > 1.

    Inverse-CDF sampling on a float64 cumulative sum with float64 uniforms: token i is drawn when
    cdf[i-1] <= u * total < cdf[i], so a zero-probability token (cdf[i] == cdf[i-1]) is never
    drawn, for any u in [0, 1). On CPU about 100x faster than torch.multinomial at a 152k
    vocabulary (0.4 ms against 40 ms). Rows need not be normalised. A row with no valid mass
    (all zero, negative or not finite) gives -1: callers check on the host (``check_tokens``),
    so no device sync happens here.
    """
    cdf = probs.cumsum(-1, dtype=torch.float64)  # (rows, vocab)
    total = cdf[..., -1:]
    u = torch.rand(
        (*cdf.shape[:-1], n), generator=generator, dtype=torch.float64, device=probs.device
    )
    # u <= 1 - 2^-53, and in float64 (1 - 2^-53) * total rounds below total for every total, so
    # the search always lands on a token with positive probability.
    tokens = torch.searchsorted(cdf, u * total, right=True)
    tokens = torch.where(torch.isfinite(total) & (total > 0), tokens, -1)
    return tokens.squeeze(-1) if n == 1 else tokens


def check_tokens(tokens: list[int], what: str) -> list[int]:
    """Raise on the -1 that ``sample`` gives for a row with no valid probability mass."""
    if any(t < 0 for t in tokens):
        raise ValueError(f"{what}: a probability row was all zero or not finite")
    return tokens


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


def draft_tokens(
    q: torch.Tensor, generator: torch.Generator | None, rule: AcceptanceRule = EXACT, n: int = 1
) -> torch.Tensor:
    """Draft tokens from (rows, vocab) q, as ``sample`` returns them: x ~ q. The greedy-draft
    mistake takes q's argmax instead while q stays the probability the rule is told."""
    if rule.greedy_draft:
        best = q.argmax(-1)
        return best if n == 1 else best[:, None].expand(-1, n)
    return sample(q, generator, n)


def acceptance_probs(
    p_x: torch.Tensor, q_x: torch.Tensor, rule: AcceptanceRule = EXACT
) -> torch.Tensor:
    """min(1, p(x)/q(x)) in float64; q(x) > 0 for any token the draft actually sampled."""
    if rule.accept_all:
        return torch.ones_like(p_x, dtype=torch.float64)
    p_x, q_x = p_x.double(), q_x.double()
    return torch.clamp(p_x / q_x.clamp_min(torch.finfo(torch.float64).tiny), max=1.0)


def residual(
    p_row: torch.Tensor, q_row: torch.Tensor, rule: AcceptanceRule = EXACT
) -> torch.Tensor:
    """max(0, p - q) normalised, in float64; p itself only when that mass is exactly zero.

    The mass is zero only if p <= q at every token, while a rejection needs p(x) < q(x) somewhere;
    both rows sum to 1 up to float32 rounding (under vocab * 2^-24), so a rejection there has
    probability below that bound, and then p is what the residual tends to as p - q -> 0.
    """
    p_row = p_row.double()
    if rule.resample_from_p:
        return p_row
    r = torch.clamp(p_row - q_row.double(), min=0.0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / mass.clamp_min(torch.finfo(torch.float64).tiny), p_row)


def valid_rows(probs: torch.Tensor) -> torch.Tensor:
    """A 0-dim bool, without a host sync: every row's mass is finite and positive (a NaN or an
    infinity anywhere in a row makes its sum not finite)."""
    mass = probs.sum(-1)
    return (torch.isfinite(mass) & (mass > 0)).all()


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
    # The rows the rule judged, on the device, padded to one vocabulary: p (k+1, vocab) and q
    # (k, vocab; one-hot for a deterministic draft). None for a greedy verify, which has no p.
    p: torch.Tensor | None = None
    q: torch.Tensor | None = None

    @property
    def k(self) -> int:
        return len(self.p_x)

    @property
    def bonus(self) -> bool:
        return self.n_accepted == self.k


@dataclass(frozen=True)
class Judged:
    """Many independent rounds judged at once (``verify_many``), on the device: (B,) kept drafts
    and next tokens (the resampled replacement, or the bonus when all k were kept), and (B, k)
    p(x), q(x), min(1, p/q) and the uniforms; `next_dist` is the one round's (vocab,) residual
    or p when B = 1, else None."""

    n_accepted: torch.Tensor
    next_token: torch.Tensor
    p_x: torch.Tensor
    q_x: torch.Tensor
    accept_prob: torch.Tensor
    u: torch.Tensor
    next_dist: torch.Tensor | None = None


def verify_many(
    draft: torch.Tensor,
    p: torch.Tensor,
    p_rows: torch.Tensor,
    q: torch.Tensor,
    q_rows: torch.Tensor,
    generator: torch.Generator | None = None,
    rule: AcceptanceRule = EXACT,
) -> Judged:
    """B independent rounds' accept/resample step: the engine's one round (B = 1) and the
    exactness lab's thousands of draws run this same code.

    draft: (B, k) proposed tokens. Distributions are rows of shared tables, since draws from one
    context share them: p (R, vocab_p) with p_rows (B, k + 1) naming each position's row (the
    last for the bonus position), q (S, vocab_q) with q_rows (B, k). Draft x at position i is
    kept with probability min(1, p(x)/q(x)); the first rejection is replaced by a sample from
    max(0, p - q) / sum at that position, and a round that keeps all k earns a bonus from p.
    Rows are sampled by group of draws sharing one (p row, q row), so memory stays at the tables.
    """
    batch, k = draft.shape
    vocab = max(p.shape[-1], q.shape[-1])
    p, q = pad_vocab(p, vocab), pad_vocab(q, vocab)
    q = torch.cat([q, q.new_zeros(1, vocab)])  # the bonus position pairs p with q = 0
    none = q.shape[0] - 1
    q_rows = torch.cat([q_rows, q_rows.new_full((batch, 1), none)], 1)  # (B, k + 1)
    p_x, q_x = p[p_rows[:, :k], draft], q[q_rows[:, :k], draft]  # (B, k)
    accept_prob = acceptance_probs(p_x, q_x, rule)  # float64
    u = torch.rand((batch, k), generator=generator, dtype=torch.float64, device=p.device)
    rejected = torch.cat([u >= accept_prob, u.new_ones(batch, 1, dtype=torch.bool)], 1)
    n = rejected.int().argmax(1)  # first rejection, or k when all pass (the appended sentinel)
    p_at, q_at = p_rows.gather(1, n[:, None])[:, 0], q_rows.gather(1, n[:, None])[:, 0]  # (B,)
    if batch == 1:  # the engine's round: no grouping, so no host sync before the verdict
        next_dist = residual(p[p_at[0]], q[q_at[0]], rule)
        next_token = sample(next_dist[None], generator)
        return Judged(n, next_token, p_x, q_x, accept_prob, u, next_dist)
    codes, group = torch.unique(p_at * q.shape[0] + q_at, return_inverse=True)
    next_token = torch.empty(batch, dtype=torch.long, device=p.device)
    for j, code in enumerate(codes.tolist()):
        members = group == j
        dist = residual(p[code // q.shape[0]], q[code % q.shape[0]], rule)
        next_token[members] = sample(dist[None], generator, int(members.sum())).view(-1)
    return Judged(n, next_token, p_x, q_x, accept_prob, u)


def verify(
    draft: torch.Tensor,
    q: torch.Tensor | None,
    p: torch.Tensor,
    generator: torch.Generator | None = None,
    rule: AcceptanceRule = EXACT,
) -> Verdict:
    """One round's accept/resample step (``verify_many`` with one draw), vectorised over the k
    draft positions.

    draft: (k,) proposed tokens; q: (k, vocab_q) draft probabilities, or None for a deterministic
    draft; p: (k+1, vocab_p) target probabilities, the last row for the bonus position.
    One device-to-host transfer at the end; rows that are not probabilities raise there.
    """
    k = draft.shape[0]
    vocab = max(p.shape[-1], q.shape[-1] if q is not None else 0)
    valid = valid_rows(p) & (valid_rows(q) if q is not None else True)
    p = pad_vocab(p, vocab)
    q = one_hot_q(draft, vocab) if q is None else pad_vocab(q, vocab)
    rows = torch.arange(k + 1, device=p.device)[None]  # position i reads row i of p and q
    judged = verify_many(draft[None], p, rows, q, rows[:, :k], generator, rule)
    parts = (valid, judged.n_accepted, judged.next_token, judged.p_x, judged.q_x)
    parts += (judged.accept_prob, judged.u)
    host = torch.cat([t.double().view(-1) for t in parts]).tolist()
    if not host[0]:
        raise ValueError("verify: a probability row of p or q was all zero or not finite")
    return Verdict(
        n_accepted=int(host[1]),
        next_token=check_tokens([int(host[2])], "verify")[0],
        p_x=host[3 : 3 + k],
        q_x=host[3 + k : 3 + 2 * k],
        accept_prob=host[3 + 2 * k : 3 + 3 * k],
        u=host[3 + 3 * k :],
        next_dist=judged.next_dist,
        p=p,
        q=q,
    )


def verify_greedy(draft: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """Greedy verify: keep draft tokens while they equal argmax p; then emit argmax p.

    target_logits: (k+1, vocab). No softmax over the vocabulary is needed; logits that are not
    finite raise instead of letting argmax pick a NaN.
    """
    k = draft.shape[0]
    best = target_logits.argmax(-1)  # (k+1,)
    mismatch = torch.cat([best[:k] != draft, torch.ones(1, dtype=torch.bool, device=best.device)])
    n = mismatch.int().argmax()
    finite = torch.isfinite(target_logits).all().long()
    host = torch.cat([finite[None], n[None], best[n][None], (best[:k] == draft).long()]).tolist()
    if not host[0]:
        raise ValueError("verify: the target's logits were not finite")
    n_acc, next_token, matched = host[1], host[2], [float(m) for m in host[3:]]
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
    p: torch.Tensor,
    q: torch.Tensor | None,
    n: int,
    generator: torch.Generator | None = None,
    rule: AcceptanceRule = EXACT,
) -> torch.Tensor:
    """n independent first tokens of a round: x ~ q drafted as a drafter drafts it
    (``draft_tokens``), then judged by ``verify_many``, the engine's own step, so under the exact
    `rule` the result is distributed as p (the app's exactness tab shows it with histograms, and
    a mistaken rule shows how far it strays). p, q: (vocab,) target and draft distributions at
    one position (q None: sample from p)."""
    if not bool(valid_rows(p[None])) or (q is not None and not bool(valid_rows(q[None]))):
        raise ValueError("p and q must be probability rows with positive, finite mass")
    if q is None:
        return sample(p[None], generator, n)[0]
    x = draft_tokens(q[None], generator, rule, n).view(-1)  # (n,)
    # One judged position; the bonus row (p again) only matters to the second token.
    rows = torch.zeros((n, 2), dtype=torch.long, device=p.device)
    judged = verify_many(x[:, None], p[None], rows, q[None], rows[:, :1], generator, rule)
    return torch.where(judged.n_accepted == 1, x, judged.next_token)
