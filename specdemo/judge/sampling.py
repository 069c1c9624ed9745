"""The maths of speculative sampling: logits into p and q, the acceptance probability and the
residual, and an exact sampler (``verify`` applies them to a round).

Nothing here knows about models or tokenizers; warping uses transformers' own logits warpers, the
rest is torch. The rule is that of Leviathan et al. (2023) / Chen et al. (2023): draft token x is
kept with probability min(1, p(x)/q(x)) (``acceptance_probs``); the first rejection is replaced
by a sample from max(0, p - q) / sum (``residual``). Both are the judges' one arithmetic
(``specdemo.judge.residual``), in float64.

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

from specdemo.judge import residual as arithmetic


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
    # Judge the drafts as a block, but keep up to the last position whose uniform falls below
    # min(1, prod p/q along the prefix) and draw the next token from the token-wise residual
    # max(p - q, 0) there, not from the block's residual.
    block_prefix: bool = False


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
        AcceptanceRule(
            "block-prefix",
            "Mistake: judge the block by min(1, Π p/q), resample from max(0, p − q)",
            "It looks like judging the whole block and keeps more drafts, but the residual "
            "max(0, p − q) only makes up for one token's min(p, q), not for the block's "
            "weight min(1, Π p/q): pairs of tokens come out too often or too rarely, though "
            "the first token alone can look right.",
            block_prefix=True,
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
    so no device sync happens here. A generator draws only on its own device: one on another
    device than `probs` (the target's, drawing from a draft's q) draws the uniforms there and
    they move to `probs`' device, one small copy.
    """
    cdf = probs.cumsum(-1, dtype=torch.float64)  # (rows, vocab)
    total = cdf[..., -1:]
    device = generator.device if generator is not None else probs.device
    u = torch.rand((*cdf.shape[:-1], n), generator=generator, dtype=torch.float64, device=device)
    u = u.to(probs.device)
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
    return arithmetic.acceptance(p_x.double(), q_x.double())


def residual(
    p_row: torch.Tensor, q_row: torch.Tensor, rule: AcceptanceRule = EXACT, w=1.0
) -> torch.Tensor:
    """max(0, p - q) normalised, in float64; p itself only when that mass is exactly zero.
    A block's residual weighs p by the block's running weight w <= 1: max(0, w p - q).

    The mass is zero only if p <= q at every token, while a rejection needs p(x) < q(x) somewhere;
    both rows sum to 1 up to float32 rounding (under vocab * 2^-24), so a rejection there has
    probability below that bound, and then p is what the residual tends to as p - q -> 0.
    """
    p_row = p_row.double()
    if rule.resample_from_p:
        return p_row
    return arithmetic.residual(p_row, q_row.double(), w)


def valid_rows(probs: torch.Tensor) -> torch.Tensor:
    """A 0-dim bool, without a host sync: every row's mass is finite and positive (a NaN or an
    infinity anywhere in a row makes its sum not finite)."""
    mass = probs.sum(-1)
    return (torch.isfinite(mass) & (mass > 0)).all()


def top_tokens(dist: torch.Tensor, n: int = 5) -> list[tuple[int, float]]:
    """The n most likely (token, probability) pairs of a (vocab,) distribution."""
    values, indices = torch.topk(dist.float(), min(n, dist.shape[-1]))
    return [(i, v) for i, v in zip(indices.tolist(), values.tolist(), strict=True) if v > 0]
