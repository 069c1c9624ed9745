"""One round's judgement: the accept/resample step that makes speculative decoding exact.

``verify`` judges one round's k drafts against the target's p: draft x is kept with probability
min(1, p(x)/q(x)), the first rejection is replaced by a sample from the residual
max(0, p - q) / sum, and a fully kept block earns a bonus token from p (Leviathan et al., 2023,
algorithm 1; Chen et al., 2023). The emitted tokens are distributed exactly as the target's own
samples. ``verify_many`` judges B independent rounds at once, the same step the engine runs with
B = 1, so the app's exactness lab draws through the engine's own code; ``verify_greedy`` is the
temperature-0 case. The maths it applies lives in ``sampling``.
"""

from dataclasses import dataclass

import torch

from specdemo.sampling import (
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


@dataclass(frozen=True)
class Verdict:
    """What happened to one round's k draft tokens (host-side, plain Python)."""

    n_accepted: int
    next_token: int  # the resampled replacement if n_accepted < k, else the bonus token
    p_x: list[float]  # target probability of each draft token
    q_x: list[float]  # draft probability of each draft token (1.0 for a deterministic draft)
    accept_prob: list[float]  # min(1, p/q)
    u: list[float]  # the uniform draws; position i is accepted iff u[i] < accept_prob[i]
    # (vocab,) distribution next_token was drawn from (residual or p); None for a greedy verify
    next_dist: torch.Tensor | None
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
    if k == 0:  # no guesses: the target's own token, drawn as a plain step draws it
        token = sample(p[:1], generator)
        host = torch.cat([valid_rows(p[:1]).long()[None], token]).tolist()
        if not host[0]:
            raise ValueError("verify: a probability row of p was all zero or not finite")
        no_q = p.new_zeros((0, p.shape[-1]))
        return Verdict(0, check_tokens(host[1:], "verify")[0], [], [], [], [], p[0], p, no_q)
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
