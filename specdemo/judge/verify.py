"""One round's judgement: the accept/resample step that makes speculative decoding exact.

``verify`` judges one round's k drafts against the target's p: draft x is kept with probability
min(1, p(x)/q(x)), the first rejection is replaced by a sample from the residual
max(0, p - q) / sum, and a fully kept block earns a bonus token from p (Leviathan et al., 2023,
algorithm 1; Chen et al., 2023). The emitted tokens are distributed exactly as the target's own
samples. That is judging token by token (``judge="token"``).

Judging the whole block (``judge="block"``; Sun et al., *Block Verification Accelerates
Speculative Decoding*, ICLR 2025) keeps at least as many of the same drafts, in distribution, and
stays exact: a running weight w_i = min(1, w_(i-1) p(x_i)/q(x_i)) (w_0 = 1) says how much of the
target's mass the drafted prefix x_1..x_i still carries; position i < k stops the block with
chance h_i = r_i / (r_i + 1 - w_i), where r_i is the mass of the block residual
max(w_i p_i - q_i, 0), and position k with h_k = w_k. One uniform per position; the block keeps
x_1..x_tau for the LAST position tau with u_tau < h_tau (0 if none) and then draws one token from
max(w_tau p_tau - q_tau, 0) (at tau = k: from p, the bonus). The first position gains nothing
(h_1 is token-wise's chance once the later positions are summed out); later ones can be kept
where token-wise would already have rejected. A one-hot q (a greedy or copied draft) gives
token-wise's outcome, so it is judged token by token.

``verify_many`` judges B independent rounds at once, the same step the engine runs with B = 1,
so the app's exactness lab draws through the engine's own code; ``verify_greedy`` is the
temperature-0 case. The arithmetic it applies lives in ``residual`` (the judges' one module),
the rule's switches in ``sampling``.
"""

from dataclasses import dataclass, field

import torch

from specdemo.judge.residual import (
    log_ratios,
    log_running_weights,
    residual_mass,
    stop_chance,
)
from specdemo.judge.sampling import (
    EXACT,
    AcceptanceRule,
    acceptance_probs,
    check_tokens,
    draft_tokens,
    one_hot_q,
    pad_vocab,
    residual,
    sample,
    valid_rows,
)

JUDGES = {"token": "token by token", "block": "the whole block"}


def check_judge(judge: str) -> str:
    """A judge by name: "token" (each draft on its own) or "block" (the drafts as one block)."""
    if judge not in JUDGES:
        raise ValueError(f'verify must be "token" or "block", got {judge!r}')
    return judge


@dataclass(frozen=True)
class Verdict:
    """What happened to one round's k draft tokens (host-side, plain Python)."""

    n_accepted: int
    next_token: int  # the resampled replacement if n_accepted < k, else the bonus token
    p_x: list[float]  # target probability of each draft token
    q_x: list[float]  # draft probability of each draft token (1.0 for a deterministic draft)
    accept_prob: list[float]  # min(1, p/q)
    u: list[float]  # the uniform draws: token by token, position i is kept iff u[i] <
    # accept_prob[i] and every earlier one was; as a block, see `stop_chance`
    # (vocab,) distribution next_token was drawn from (residual or p); None for a greedy verify
    next_dist: torch.Tensor | None
    # The rows the rule judged, on the device, padded to one vocabulary: p (k+1, vocab) and q
    # (k, vocab; one-hot for a deterministic draft). None for a greedy verify, which has no p.
    p: torch.Tensor | None = None
    q: torch.Tensor | None = None
    judge: str = "token"  # who judged: "token" or "block" (``JUDGES``)
    # Judged as a block: each position's running weight w_i and stopping chance h_i; the block
    # kept the drafts up to the last position with u[i] < stop_chance[i].
    weights: list[float] = field(default_factory=list)
    stop_chance: list[float] = field(default_factory=list)
    # What judging token by token keeps of the same drafts with the same uniforms.
    token_kept: int | None = None
    # Judged as a block: the drafts each judge keeps of these drafts on average over the
    # uniforms, (token by token, the whole block): sum_i a_1..a_i and sum_i P(kept >= i).
    expected_kept: tuple[float, float] | None = None

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
    or p when B = 1, else None. Judged as a block, (B, k) running weights and stopping chances;
    `token_kept` (B,) is what judging token by token keeps with the same uniforms."""

    n_accepted: torch.Tensor
    next_token: torch.Tensor
    p_x: torch.Tensor
    q_x: torch.Tensor
    accept_prob: torch.Tensor
    u: torch.Tensor
    next_dist: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    stop_chance: torch.Tensor | None = None
    token_kept: torch.Tensor | None = None
    expected_kept: torch.Tensor | None = None  # (B, 2): token by token's, the block's


def expected_kept(accept_prob: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """(B, 2) the drafts each judge keeps of the same (B, k) drafts on average over its
    uniforms: token by token, sum over i of a_1 ... a_i; as a block, sum over i of
    P(kept >= i) = 1 - (1 - h_i) ... (1 - h_k). Both from the same rows, so their ratio over
    many rounds compares the judges without the noise of which drafts each run drew."""
    token = accept_prob.cumprod(1).sum(1)
    survive = torch.flip(torch.cumprod(torch.flip(1 - h, [1]), 1), [1])  # prod_(j >= i) (1 - h_j)
    return torch.stack([token, (1 - survive).sum(1)], 1)


def stopping_chances(log_w, masses) -> torch.Tensor:
    """(B, k) h_i = r_i / (r_i + 1 - w_i) for i < k (1 where that is 0 / 0) and h_k = w_k, from
    log w (B, k) and the block residual masses r_i (B, k - 1); 1 - w is -expm1(log w)."""
    inner = stop_chance(masses, -torch.expm1(log_w[:, :-1]))
    return torch.cat([inner, torch.exp(log_w[:, -1:])], 1)


def block_chances(p, p_rows, q, q_rows, p_x, q_x) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, k) log running weights and stopping chances of B blocks whose position i reads row
    p_rows[:, i] of p and q_rows[:, i] of q (q padded to p's vocabulary). Each distinct
    (p row, q row, weight) has its residual mass computed once, a few rows at a time, so the
    memory stays at the tables whatever B."""
    batch, k = p_x.shape
    log_w = log_running_weights(p_x, q_x)
    if k == 1:
        return log_w, stopping_chances(log_w, log_w.new_zeros((batch, 0)))
    rows_p, rows_q, weights = p_rows[:, 1:k], q_rows[:, 1:k], log_w[:, :-1]
    if batch == 1:  # the engine's round: k - 1 rows at once, no host sync
        masses = residual_mass(p[rows_p[0]], q[rows_q[0]], torch.exp(weights[0])[:, None])
        return log_w, stopping_chances(log_w, masses[None])
    keys = torch.stack([rows_p.double(), rows_q.double(), weights], -1).view(-1, 3)
    unique, where = torch.unique(keys, dim=0, return_inverse=True)
    masses = torch.cat(
        [
            residual_mass(p[part[:, 0].long()], q[part[:, 1].long()], torch.exp(part[:, 2:]))
            for part in unique.split(64)
        ]
    )
    return log_w, stopping_chances(log_w, masses[where].view(batch, k - 1))


def verify_many(
    draft: torch.Tensor,
    p: torch.Tensor,
    p_rows: torch.Tensor,
    q: torch.Tensor,
    q_rows: torch.Tensor,
    generator: torch.Generator | None = None,
    rule: AcceptanceRule = EXACT,
    judge: str = "token",
) -> Judged:
    """B independent rounds' accept/resample step: the engine's one round (B = 1) and the
    exactness lab's thousands of draws run this same code.

    draft: (B, k) proposed tokens. Distributions are rows of shared tables, since draws from one
    context share them: p (R, vocab_p) with p_rows (B, k + 1) naming each position's row (the
    last for the bonus position), q (S, vocab_q) with q_rows (B, k). Judged token by token,
    draft x at position i is kept with probability min(1, p(x)/q(x)); the first rejection is
    replaced by a sample from max(0, p - q) / sum at that position, and a round that keeps all
    k earns a bonus from p. Judged as a block (`judge` "block"), the last position whose uniform
    falls below its stopping chance ends the kept drafts and the next token comes from the
    block residual max(w p - q, 0) there (module docstring). Rows are sampled by group of draws
    sharing one (p row, q row, weight), so memory stays at the tables.
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
    token_kept = rejected.int().argmax(1)  # first rejection, or k when all pass (the sentinel)
    n, log_w, h = token_kept, None, None
    w_at = torch.ones(batch, dtype=torch.float64, device=p.device)  # the residual's weight
    if (judge == "block" or rule.block_prefix) and k:
        log_w, h = block_chances(p, p_rows, q, q_rows, p_x, q_x)
        n = block_tau(u, h, log_w, p_x, q_x, rule)
        if not rule.block_prefix:  # the mistake draws from the token-wise residual (w = 1)
            log_w_at = torch.cat([log_w.new_zeros(batch, 1), log_w], 1).gather(1, n[:, None])
            w_at = torch.exp(log_w_at[:, 0])
    p_at, q_at = p_rows.gather(1, n[:, None])[:, 0], q_rows.gather(1, n[:, None])[:, 0]  # (B,)
    common = dict(
        p_x=p_x,
        q_x=q_x,
        accept_prob=accept_prob,
        u=u,
        token_kept=token_kept,
        weights=None if log_w is None else torch.exp(log_w),
        stop_chance=h,
        expected_kept=None if h is None else expected_kept(accept_prob, h),
    )
    if batch == 1:  # the engine's round: no grouping, so no host sync before the verdict
        next_dist = residual(p[p_at[0]], q[q_at[0]], rule, w_at[0])
        next_token = sample(next_dist[None], generator)
        return Judged(n, next_token, next_dist=next_dist, **common)
    keys = torch.stack([p_at.double(), q_at.double(), w_at], 1)
    unique, group = torch.unique(keys, dim=0, return_inverse=True)
    next_token = torch.empty(batch, dtype=torch.long, device=p.device)
    for j, (p_row, q_row, w) in enumerate(unique.tolist()):
        members = group == j
        dist = residual(p[int(p_row)], q[int(q_row)], rule, w)
        next_token[members] = sample(dist[None], generator, int(members.sum())).view(-1)
    return Judged(n, next_token, **common)


def block_tau(u, h, log_w, p_x, q_x, rule: AcceptanceRule = EXACT) -> torch.Tensor:
    """(B,) drafts a block keeps: the last position whose uniform is below its stopping chance
    (0 if none), scanning every position. The block-prefix mistake compares each uniform with
    min(1, p/q multiplied along the prefix) instead, and draws the next token from the
    token-wise residual (``verify_many``)."""
    batch, k = u.shape
    if rule.accept_all:
        return torch.full((batch,), k, dtype=torch.long, device=u.device)
    if rule.block_prefix:
        h = prefix_products(p_x, q_x)
    positions = torch.arange(1, k + 1, device=u.device)
    return torch.where(u < h, positions, 0).max(1).values


def prefix_products(p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
    """(B, k) min(1, p/q multiplied along the prefix): the block-prefix mistake's chances, which
    the exact block rule replaces by its running weights and stopping chances."""
    s = log_ratios(p_x, q_x).cumsum(1)
    return torch.exp(torch.nan_to_num(s, nan=-torch.inf)).clamp(max=1.0)


def verify(
    draft: torch.Tensor,
    q: torch.Tensor | None,
    p: torch.Tensor,
    generator: torch.Generator | None = None,
    rule: AcceptanceRule = EXACT,
    judge: str = "token",
) -> Verdict:
    """One round's accept/resample step (``verify_many`` with one draw), vectorised over the k
    draft positions.

    draft: (k,) proposed tokens; q: (k, vocab_q) draft probabilities, or None for a deterministic
    draft (then judged token by token: as a block the outcome is the same); p: (k+1, vocab_p)
    target probabilities, the last row for the bonus position. `judge`: "token" or "block".
    One device-to-host transfer at the end; rows that are not probabilities raise there.
    """
    k = draft.shape[0]
    if k == 0:  # no guesses: the target's own token, drawn as a plain step draws it
        token = sample(p[:1], generator)
        host = torch.cat([valid_rows(p[:1]).long()[None], token]).tolist()
        if not host[0]:
            raise ValueError("verify: a probability row of p was all zero or not finite")
        no_q = p.new_zeros((0, p.shape[-1]))
        return Verdict(
            0, check_tokens(host[1:], "verify")[0], [], [], [], [], p[0], p, no_q, token_kept=0
        )
    judge = "token" if q is None else check_judge(judge)
    vocab = max(p.shape[-1], q.shape[-1] if q is not None else 0)
    valid = valid_rows(p) & (valid_rows(q) if q is not None else True)
    p = pad_vocab(p, vocab)
    q = one_hot_q(draft, vocab) if q is None else pad_vocab(q, vocab)
    rows = torch.arange(k + 1, device=p.device)[None]  # position i reads row i of p and q
    judged = verify_many(draft[None], p, rows, q, rows[:, :k], generator, rule, judge)
    parts = (valid, judged.n_accepted, judged.next_token, judged.token_kept, judged.p_x)
    parts += (judged.q_x, judged.accept_prob, judged.u)
    if judge == "block":
        parts += (judged.weights, judged.stop_chance, judged.expected_kept)
    host = torch.cat([t.double().view(-1) for t in parts]).tolist()
    if not host[0]:
        raise ValueError("verify: a probability row of p or q was all zero or not finite")
    expected = tuple(host[-2:]) if judge == "block" else None
    per_position = 6 if judge == "block" else 4  # p_x, q_x, accept_prob, u (w, h)
    rows = [host[4 + i * k : 4 + (i + 1) * k] for i in range(per_position)]
    return Verdict(
        n_accepted=int(host[1]),
        next_token=check_tokens([int(host[2])], "verify")[0],
        p_x=rows[0],
        q_x=rows[1],
        accept_prob=rows[2],
        u=rows[3],
        next_dist=judged.next_dist,
        p=p,
        q=q,
        judge=judge,
        weights=rows[4] if judge == "block" else [],
        stop_chance=rows[5] if judge == "block" else [],
        token_kept=int(host[3]),
        expected_kept=expected,
    )


def verify_greedy(draft: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """Greedy verify: keep draft tokens while they equal argmax p; then emit argmax p.

    target_logits: (k+1, vocab). One pass over the logits (their row maxima and where they lie),
    no softmax: a NaN or an infinity that wins a row raises instead of being picked. The
    verdict's `next_dist` is None: all of it lies on `next_token`.
    """
    k = draft.shape[0]
    top, best = target_logits.max(-1)  # (k+1,) each
    mismatch = torch.cat([best[:k] != draft, torch.ones(1, dtype=torch.bool, device=best.device)])
    n = mismatch.int().argmax()
    finite = torch.isfinite(top).all().long()
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
        next_dist=None,
    )


def chain_first_tokens(
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
